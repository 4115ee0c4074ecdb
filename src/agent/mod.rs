//! The observer-agent sidecar: the acknowledgement half of a rollout.
//!
//! It runs next to each Kafka controller and broker, reads the `observer.ids` file from the same
//! ConfigMap mount the Kafka container reads, and reports over HTTP what it sees
//! (`GET /observer-ids`). With `--loaded-file` it also reports what the Kafka JVM says it has
//! loaded (the patch writes it to `KAFKA_OBSERVER_IDS_LOADED_FILE` in a volume both containers
//! mount): the `jvm` part of the answer. The operator polls it to know when every pod of a role
//! uses a revision before moving on to the next role, instead of guessing the kubelet's sync
//! delay and the JVM's cache. Both ends of that protocol are here: the sidecar's server and the
//! operator's [`AgentClient`], sharing one wire type ([`Report`]).

mod client;
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
use k8s_openapi::jiff::Timestamp;
use tokio::net::TcpListener;

pub use client::{AgentClient, QUICK_TIMEOUT};
pub use snapshot::{Report, Snapshot, Source};
use watch::Followed;

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
    /// The file where the patched Kafka JVM reports what it has loaded (the Kafka container's
    /// `KAFKA_OBSERVER_IDS_LOADED_FILE`, in a volume both containers mount). Served as `jvm`;
    /// unset, `jvm` is null and the operator acknowledges on the file plus the JVM's cache TTL.
    /// Leave it unset for a Kafka that does not write the report (the public patch set): with it
    /// set, such a pod never acknowledges.
    #[arg(long, env = "OBSERVER_AGENT_LOADED_FILE", value_parser = parse_loaded_file)]
    pub loaded_file: Option<PathBuf>,
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

fn parse_loaded_file(path: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(path);
    if path.file_name().is_none() || path.to_str().is_none() {
        return Err(format!(
            "{} names no file: give the file the Kafka container's KAFKA_OBSERVER_IDS_LOADED_FILE names, e.g. /var/run/observer-loaded/observer.ids",
            path.display()
        ));
    }
    Ok(path)
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
    let file = Followed {
        dir: args.dir.clone(),
        key: args.key.clone(),
        read: Snapshot::from_observation,
        what: "observer file",
    };
    let loaded = args
        .loaded_file
        .as_deref()
        .and_then(|p| Followed::of_path(p, Snapshot::from_loaded, "JVM report"));
    // The first reports are made before serving, so no request ever sees a placeholder.
    let (file_rx, file_task) = start_following(file, args.resync, &shutdown).await;
    let mut jvm_rx = None;
    let mut jvm_task = None;
    if let Some(loaded) = loaded {
        let (rx, task) = start_following(loaded, args.resync, &shutdown).await;
        jvm_rx = Some(rx);
        jvm_task = Some(task);
    }

    let addr = listener.local_addr().map_err(AgentError::Serve)?;
    tracing::info!(%addr, "serving /observer-ids and /healthz");
    let stop = shutdown.clone();
    let state = Reports {
        file: file_rx,
        jvm: jvm_rx,
    };
    let served = axum::serve(listener, router(state))
        .with_graceful_shutdown(async move { stop.wait().await })
        .await
        .map_err(AgentError::Serve);
    shutdown.trigger();
    let _ = file_task.await;
    if let Some(task) = jvm_task {
        let _ = task.await;
    }
    served
}

/// Reads `followed` once, logs it, and follows it from then on.
async fn start_following(
    followed: Followed,
    resync: Duration,
    shutdown: &Shutdown,
) -> (
    tokio::sync::watch::Receiver<Snapshot>,
    tokio::task::JoinHandle<()>,
) {
    let path = followed.path();
    let first = (followed.read)(&watch::observe(&path).await, Timestamp::now());
    tracing::info!(
        path = %path.display(),
        what = followed.what,
        source = ?first.source,
        revision = ?first.revision,
        ids = ?first.ids,
        "observer agent follows"
    );
    let (reports, receiver) = tokio::sync::watch::channel(first);
    let task = tokio::spawn(watch::follow(followed, resync, reports, shutdown.clone()));
    (receiver, task)
}

/// The latest report of each followed file.
#[derive(Clone)]
struct Reports {
    file: tokio::sync::watch::Receiver<Snapshot>,
    jvm: Option<tokio::sync::watch::Receiver<Snapshot>>,
}

fn router(reports: Reports) -> Router {
    Router::new()
        .route("/observer-ids", get(observer_ids))
        .route("/healthz", get(|| async { "ok\n" }))
        .with_state(reports)
}

async fn observer_ids(State(reports): State<Reports>) -> Json<Report> {
    let file = reports.file.borrow().clone();
    let jvm = reports.jvm.as_ref().map(|rx| rx.borrow().clone());
    Json(Report::new(&file, jvm.as_ref(), Timestamp::now()))
}
