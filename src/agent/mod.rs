//! The observer-agent sidecar: the acknowledgement half of a rollout.
//!
//! It runs next to each Kafka controller and broker, reads the `observer.ids` file from the same
//! ConfigMap mount the Kafka container reads, and reports over HTTP what it sees
//! (`GET /observer-ids`). The operator polls it to know when every pod of a role holds a
//! revision before moving on to the next role, instead of guessing the kubelet's sync delay.

mod snapshot;
mod watch;

#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use tokio::net::TcpListener;

pub use snapshot::{Snapshot, Source};

use crate::shutdown::Shutdown;

/// `kafka-observer-operator agent` options.
#[derive(Clone, Debug, clap::Args)]
pub struct AgentArgs {
    /// Directory where the observer ConfigMap is mounted (a directory mount: a `subPath`
    /// mount never receives updates).
    #[arg(
        long,
        env = "OBSERVER_AGENT_DIR",
        default_value = "/etc/kafka/observer"
    )]
    pub dir: PathBuf,
    /// File name (ConfigMap key) inside `--dir`.
    #[arg(long, env = "OBSERVER_AGENT_KEY", default_value = "observer.ids", value_parser = parse_key)]
    pub key: String,
    /// Address to serve `/observer-ids` and `/healthz` on (the pod IP and the ObserverSet's
    /// `rollout.agentPort`).
    #[arg(long, env = "OBSERVER_AGENT_LISTEN", default_value = "0.0.0.0:9180")]
    pub listen: SocketAddr,
    /// Safety-net re-read interval, on top of inotify (e.g. `10s`, `500ms`).
    #[arg(long, env = "OBSERVER_AGENT_RESYNC", default_value = "10s", value_parser = crate::crd::parse_duration)]
    pub resync: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("cannot listen on {addr}: {source} (is the port taken? change --listen or rollout.agentPort)")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot install the SIGTERM/SIGINT handlers: {0}")]
    Signals(std::io::Error),
    #[error("the agent's HTTP server failed: {0}")]
    Serve(std::io::Error),
}

fn parse_key(key: &str) -> Result<String, String> {
    if key.is_empty() || key.contains('/') || key == "." || key == ".." {
        return Err(format!(
            "{key:?} is not a ConfigMap key: give a plain file name such as observer.ids"
        ));
    }
    Ok(key.to_owned())
}

/// Runs the agent until SIGTERM or SIGINT.
pub async fn run(args: AgentArgs) -> anyhow::Result<()> {
    let shutdown = Shutdown::on_signals().map_err(AgentError::Signals)?;
    let listener = TcpListener::bind(args.listen)
        .await
        .map_err(|source| AgentError::Bind {
            addr: args.listen,
            source,
        })?;
    serve(args, listener, shutdown).await?;
    Ok(())
}

/// Runs the agent on an already bound `listener` until `shutdown` fires.
pub async fn serve(
    args: AgentArgs,
    listener: TcpListener,
    shutdown: Shutdown,
) -> Result<(), AgentError> {
    let path = args.dir.join(&args.key);
    // The first report is made before serving, so no request ever sees a placeholder.
    let first =
        snapshot::Snapshot::from_observation(&watch::observe(&path).await, chrono::Utc::now());
    tracing::info!(
        path = %path.display(),
        source = ?first.source,
        revision = ?first.revision,
        ids = ?first.ids,
        "observer agent started"
    );
    let (reports, receiver) = tokio::sync::watch::channel(first);
    let follower = tokio::spawn(watch::follow(
        args.dir.clone(),
        args.key.clone(),
        args.resync,
        reports,
        shutdown.clone(),
    ));

    let addr = listener.local_addr().map_err(AgentError::Serve)?;
    tracing::info!(%addr, "serving /observer-ids and /healthz");
    let stop = shutdown.clone();
    let served = axum::serve(listener, router(receiver))
        .with_graceful_shutdown(async move { stop.wait().await })
        .await
        .map_err(AgentError::Serve);
    shutdown.trigger();
    let _ = follower.await;
    served
}

fn router(reports: tokio::sync::watch::Receiver<Snapshot>) -> Router {
    Router::new()
        .route("/observer-ids", get(observer_ids))
        .route("/healthz", get(|| async { "ok\n" }))
        .with_state(reports)
}

async fn observer_ids(
    State(reports): State<tokio::sync::watch::Receiver<Snapshot>>,
) -> Json<Snapshot> {
    Json(reports.borrow().clone())
}
