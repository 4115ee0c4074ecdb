//! Kubelet stand-in for the local test bed (see the "Kubelet stand-in" section
//! of e2e/README.md for what it reproduces and what it does not).
//!
//! Wiring only: flags, logging, the pods file, the client; `sync_loop` does the work.

mod atomic_writer;
mod cli;
mod error;
mod local_command;
mod main_process;
mod node;
mod pod_state;
mod pods_file;
mod projection;
mod resync;
mod sidecars;
mod status;
mod sync_loop;
mod volumes;

use clap::Parser;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tracing_subscriber::EnvFilter;

use crate::cli::{Args, LogFormat};
use crate::error::Error;
use crate::pods_file::PodsFile;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    init_logging(args.log_format);
    args.validate()?;
    let pods_file = PodsFile::load(&args.pods_file)?;
    tracing::info!(
        pods = pods_file.pods.len(),
        sync_period = ?args.sync_period,
        jitter = args.jitter,
        node = %args.node_name,
        "kubelet stand-in starting"
    );
    let client = client(&args).await?;
    let settings = sync_loop::Settings {
        image_bins: args.image_map()?,
        node_name: args.node_name,
        node_ip: args.node_ip,
        sync_period: args.sync_period,
        jitter: args.jitter,
    };
    sync_loop::run(client, pods_file, settings).await?;
    Ok(())
}

async fn client(args: &Args) -> Result<kube::Client, Error> {
    let kubeconfig_error = |source| Error::Kubeconfig {
        path: args.kubeconfig.clone(),
        source,
    };
    let kubeconfig = Kubeconfig::read_from(&args.kubeconfig).map_err(kubeconfig_error)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(kubeconfig_error)?;
    kube::Client::try_from(config).map_err(Error::Client)
}

fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}
