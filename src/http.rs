//! The operator's HTTP endpoints: `/metrics` for Prometheus, `/healthz` (liveness) and
//! `/readyz` (readiness) for the kubelet's probes.
//!
//! Liveness fails only when the process reports itself broken ([`ProbeFlags::set_broken`]): a
//! restart is the fix. Readiness says the process has started its loops; a standby replica
//! waiting for the leader lease is ready too, otherwise a rolling update of the Deployment
//! would stall on it.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;

use crate::metrics::{Metrics, CONTENT_TYPE};
use crate::shutdown::Shutdown;

/// HTTP options, to be flattened into the operator's `run` command.
#[derive(Clone, Debug, clap::Args)]
pub struct HttpArgs {
    /// Address for /metrics, /healthz and /readyz (loopback by default; the chart listens on
    /// 0.0.0.0).
    #[arg(
        long,
        alias = "health-listen",
        env = "METRICS_LISTEN",
        default_value = "127.0.0.1:8080"
    )]
    pub metrics_listen: SocketAddr,
}

#[derive(Debug, Default)]
struct HealthState {
    ready: bool,
    broken: Option<String>,
}

/// Shared liveness and readiness flags, set by the operator's loops.
#[derive(Clone, Debug, Default)]
pub struct ProbeFlags {
    state: Arc<RwLock<HealthState>>,
}

impl ProbeFlags {
    pub fn new() -> Self {
        Self::default()
    }

    /// Readiness: true once the loops run (for a standby replica: once it campaigns).
    pub fn set_ready(&self, ready: bool) {
        self.write().ready = ready;
    }

    /// Liveness: the process cannot recover by itself; the kubelet should restart it.
    pub fn set_broken(&self, reason: impl Into<String>) {
        self.write().broken = Some(reason.into());
    }

    pub fn is_ready(&self) -> bool {
        let state = self.read();
        state.ready && state.broken.is_none()
    }

    /// `None` while alive, else why not.
    pub fn broken(&self) -> Option<String> {
        self.read().broken.clone()
    }

    // A poisoned lock only means a writer panicked mid-assignment of plain values; keep going.
    fn read(&self) -> std::sync::RwLockReadGuard<'_, HealthState> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HealthState> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }
}

#[derive(Clone)]
struct AppState {
    metrics: Metrics,
    health: ProbeFlags,
}

/// The routes, for serving or for tests.
pub fn router(metrics: Metrics, health: ProbeFlags) -> Router {
    Router::new()
        .route("/metrics", get(metrics_text))
        .route("/healthz", get(liveness))
        .route("/readyz", get(readiness))
        .with_state(AppState { metrics, health })
}

/// Binds `addr`; a separate step so that a port in use fails at startup with its address.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, HttpError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| HttpError::Bind { addr, source })
}

/// Serves until `shutdown` fires, then finishes in-flight requests and returns.
pub async fn serve(
    listener: TcpListener,
    metrics: Metrics,
    health: ProbeFlags,
    shutdown: Shutdown,
) -> Result<(), HttpError> {
    let addr = listener.local_addr().map_err(HttpError::Serve)?;
    tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
    axum::serve(listener, router(metrics, health))
        .with_graceful_shutdown(async move { shutdown.wait().await })
        .await
        .map_err(HttpError::Serve)
}

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("cannot listen on {addr}: {source} (is another process using the port? change --metrics-listen)")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("HTTP server failed: {0}")]
    Serve(std::io::Error),
}

async fn metrics_text(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, CONTENT_TYPE)],
        state.metrics.render(),
    )
}

async fn liveness(State(state): State<AppState>) -> impl IntoResponse {
    match state.health.broken() {
        None => (StatusCode::OK, "ok\n".to_owned()),
        Some(reason) => (StatusCode::SERVICE_UNAVAILABLE, format!("{reason}\n")),
    }
}

async fn readiness(State(state): State<AppState>) -> impl IntoResponse {
    if state.health.is_ready() {
        (StatusCode::OK, "ready\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A plain HTTP/1.1 GET over a real socket; returns (status, body). Blocking std I/O on
    /// the blocking pool keeps the test client independent of the server's stack.
    pub(crate) async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
        let path = path.to_owned();
        tokio::task::spawn_blocking(move || {
            use std::io::{Read, Write};
            let mut stream = std::net::TcpStream::connect(addr).unwrap();
            stream
                .set_read_timeout(Some(std::time::Duration::from_secs(5)))
                .unwrap();
            let request =
                format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
            stream.write_all(request.as_bytes()).unwrap();
            let mut raw = String::new();
            stream.read_to_string(&mut raw).unwrap();
            let (head, body) = raw.split_once("\r\n\r\n").unwrap();
            let status = head.split(' ').nth(1).unwrap().parse().unwrap();
            (status, body.to_owned())
        })
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn probes_and_metrics_over_a_real_socket() {
        let metrics = Metrics::new();
        let health = ProbeFlags::new();
        let shutdown = Shutdown::new();
        let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(serve(
            listener,
            metrics.clone(),
            health.clone(),
            shutdown.clone(),
        ));

        assert_eq!(get(addr, "/healthz").await.0, 200);
        assert_eq!(get(addr, "/readyz").await.0, 503);
        health.set_ready(true);
        assert_eq!(get(addr, "/readyz").await.0, 200);

        metrics.reconcile_failed("kafka");
        let (status, body) = get(addr, "/metrics").await;
        assert_eq!(status, 200);
        assert!(body.contains("kafka_observer_reconcile_errors_total{category=\"kafka\"} 1"));

        health.set_broken("leader lease task ended");
        let (status, body) = get(addr, "/healthz").await;
        assert_eq!((status, body.as_str()), (503, "leader lease task ended\n"));
        assert_eq!(get(addr, "/readyz").await.0, 503);

        shutdown.trigger();
        tokio::time::timeout(std::time::Duration::from_secs(2), server)
            .await
            .expect("server stops on shutdown")
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn a_port_in_use_names_the_address() {
        let taken = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = taken.local_addr().unwrap();
        let err = bind(addr).await.unwrap_err().to_string();
        assert!(err.contains(&addr.to_string()), "{err}");
    }
}
