//! The operator's side of `GET /observer-ids`: fetches one agent's [`Report`] over plain HTTP
//! on the pod network. Judging it is `crate::rollout::acknowledgement`'s.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;

use super::snapshot::Report;

/// A pod that does not answer within this time counts as not acknowledged this round; the
/// reconcile loop asks again on its next pass, so a slow agent never stalls the operator.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(300);
const REQUEST_TIMEOUT: Duration = Duration::from_millis(800);

/// The largest reply read from an agent. A report is a few hundred bytes; the agent runs in a
/// tenant's pod, so a bigger answer is refused before it is buffered, whatever the agent sends.
pub const MAX_REPLY_BYTES: usize = 64 * 1024;

/// How much of an error reply's body an error message quotes (it reaches status and Events).
const QUOTED_ERROR_CHARS: usize = 200;

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

/// The budget for a pod that was silent in the last round and may be gone anyway (its node
/// not Ready, being deleted, or no longer listed by Kafka): an agent on the pod network answers
/// in a few milliseconds, and a pass of a step's fast poll must not wait out the connect
/// timeout on a zone that is gone (300 ms a pass, about a second a step in the zone drills).
pub const QUICK_TIMEOUT: Duration = Duration::from_millis(100);

impl AgentClient {
    /// Fetches one agent's report.
    pub async fn report(&self, ip: &str, port: u16) -> Result<Report, String> {
        self.report_within(ip, port, REQUEST_TIMEOUT).await
    }

    /// Fetches one agent's report, giving up after `budget` (at most the request timeout).
    pub async fn report_within(
        &self,
        ip: &str,
        port: u16,
        budget: Duration,
    ) -> Result<Report, String> {
        let budget = budget.min(REQUEST_TIMEOUT);
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
            let body = Limited::new(response.into_body(), MAX_REPLY_BYTES)
                .collect()
                .await
                .map_err(
                    |e| match e.downcast_ref::<http_body_util::LengthLimitError>() {
                        Some(_) => format!("the reply is larger than {MAX_REPLY_BYTES} bytes"),
                        None => format!("{e}"),
                    },
                )?
                .to_bytes();
            if !status.is_success() {
                let text: String = String::from_utf8_lossy(&body)
                    .trim()
                    .chars()
                    .take(QUOTED_ERROR_CHARS)
                    .collect();
                return Err(format!("HTTP {status}: {text}"));
            }
            serde_json::from_slice(&body).map_err(|e| format!("unexpected answer: {e}"))
        };
        match tokio::time::timeout(budget, request).await {
            Ok(result) => result.map_err(|e| format!("{uri}: {e}")),
            Err(_) => Err(format!("{uri}: no answer within {budget:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A one-shot HTTP server on loopback that answers with `status` and `body_len` bytes of 'x'.
    async fn serve(status: &'static str, body_len: usize) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 1024];
            let _ = socket.read(&mut request).await;
            let head = format!("HTTP/1.1 {status}\r\ncontent-length: {body_len}\r\n\r\n");
            if socket.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let chunk = vec![b'x'; 16 * 1024];
            let mut left = body_len;
            while left > 0 {
                let n = left.min(chunk.len());
                // The client hangs up once it has read past its limit.
                if socket.write_all(&chunk[..n]).await.is_err() {
                    return;
                }
                left -= n;
            }
        });
        port
    }

    #[tokio::test]
    async fn a_reply_over_the_limit_is_refused_before_it_is_buffered() {
        let port = serve("200 OK", 8 * 1024 * 1024).await;
        let error = AgentClient::default()
            .report("127.0.0.1", port)
            .await
            .unwrap_err();
        assert!(
            error.contains(&format!("larger than {MAX_REPLY_BYTES} bytes")),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_reply_under_the_limit_is_read_and_judged() {
        // Not a report, but read whole: the error is the JSON parser's, not the limit's.
        let port = serve("200 OK", MAX_REPLY_BYTES).await;
        let error = AgentClient::default()
            .report("127.0.0.1", port)
            .await
            .unwrap_err();
        assert!(error.contains("unexpected answer"), "{error}");
    }

    #[tokio::test]
    async fn an_error_reply_is_quoted_short() {
        let port = serve("500 Internal Server Error", 10_000).await;
        let error = AgentClient::default()
            .report("127.0.0.1", port)
            .await
            .unwrap_err();
        assert!(error.contains("HTTP 500"), "{error}");
        assert!(
            error.len() < QUOTED_ERROR_CHARS + 100,
            "{} bytes",
            error.len()
        );
    }
}
