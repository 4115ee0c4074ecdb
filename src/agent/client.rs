//! The operator's side of `GET /observer-ids`: fetches one agent's [`Report`] over plain HTTP
//! on the pod network. Judging it is `crate::rollout::acknowledgement`'s.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;

use super::snapshot::Report;

/// A pod that does not answer within this time counts as not acknowledged this round; the
/// reconcile loop asks again on its next pass, so a slow agent never stalls the operator.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(300);
const REQUEST_TIMEOUT: Duration = Duration::from_millis(800);

/// HTTP client for the observer-agent sidecars (plain HTTP on the pod network).
#[derive(Clone)]
pub struct AgentClient {
    http: Client<HttpConnector, Empty<Bytes>>,
}

impl Default for AgentClient {
    fn default() -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        connector.set_nodelay(true);
        let http = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        AgentClient { http }
    }
}

impl AgentClient {
    /// Fetches one agent's report.
    pub async fn report(&self, ip: &str, port: u16) -> Result<Report, String> {
        let ip: IpAddr = ip
            .parse()
            .map_err(|_| format!("pod IP {ip:?} is not an IP address"))?;
        let uri = format!("http://{}/observer-ids", SocketAddr::new(ip, port));
        let request = async {
            let response = self
                .http
                .get(uri.parse().map_err(|e| format!("{e}"))?)
                .await
                .map_err(|e| format!("{e}"))?;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| format!("{e}"))?
                .to_bytes();
            if !status.is_success() {
                return Err(format!(
                    "HTTP {status}: {}",
                    String::from_utf8_lossy(&body).trim()
                ));
            }
            serde_json::from_slice(&body).map_err(|e| format!("unexpected answer: {e}"))
        };
        match tokio::time::timeout(REQUEST_TIMEOUT, request).await {
            Ok(result) => result.map_err(|e| format!("{uri}: {e}")),
            Err(_) => Err(format!("{uri}: no answer within {REQUEST_TIMEOUT:?}")),
        }
    }
}
