//! Asks one broker for offsets of the replicas it hosts, over a Kafka connection of its own:
//! plaintext, or TLS and/or SASL as the ObserverSet's Secrets say (`secure_stream`).
//! See `list_offsets` for why this is not done through librdkafka.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::messages::{ApiKey, ListOffsetsResponse};
use thiserror::Error;
use tokio::net::TcpStream;

use super::list_offsets::{self, OffsetKind, PartitionOffset};
use super::name_cache;
use super::probe_exchange::ExchangeError;
use super::secure_stream::{
    authenticate, host_of, tls_cause, tls_connect, tls_failure, AuthenticateError, OversizedReply,
    SaslError, Stream, TlsConnectError, TlsFailure,
};
use super::security::ProbeSecurity;

/// Largest answer accepted (why: `crate::crd::bounds::PROBE_REPLY_MAX_BYTES`).
pub(super) const MAX_RESPONSE_BYTES: usize = crate::crd::bounds::PROBE_REPLY_MAX_BYTES;

#[derive(Debug, Error)]
pub enum ProbeError {
    #[error("cannot reach broker {broker} at {address}: {source}")]
    Io {
        broker: i32,
        address: String,
        source: std::io::Error,
    },
    #[error("broker {broker} at {address} did not accept a connection within {timeout:?}")]
    ConnectTimeout {
        broker: i32,
        address: String,
        timeout: Duration,
    },
    #[error("broker {broker} at {address} did not answer within {timeout:?}")]
    Timeout {
        broker: i32,
        address: String,
        timeout: Duration,
    },
    #[error("TLS with broker {broker} at {address} failed: {source}")]
    Tls {
        broker: i32,
        address: String,
        source: TlsFailure,
    },
    #[error("broker {broker} at {address}: {source}")]
    Sasl {
        broker: i32,
        address: String,
        source: SaslError,
    },
    #[error("broker {broker} at {address} announced a {announced}-byte reply, more than the {limit} bytes the operator reads: refused unread (check that kafka.bootstrapServers names the Kafka cluster; a real cluster's replies fit)")]
    ReplyTooLarge {
        broker: i32,
        address: String,
        announced: usize,
        limit: usize,
    },
    /// The request could not be encoded or the answer not decoded (an answer to another
    /// request, a truncated one).
    #[error("broker {broker}: {reason}")]
    Protocol { broker: i32, reason: String },
}

/// How long a broker may take to accept the probe's connection (its name already resolved),
/// unless the whole request's timeout is shorter. A live broker accepts within milliseconds, even across zones; a stopped
/// pod's address usually drops the SYN instead of refusing it, and until the controller fences
/// that broker (`broker.session.timeout.ms`) every scan would otherwise wait the full request
/// timeout for it, delaying the first sight of the under-min-ISR state the fencing causes.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// The connect timeout for a broker whose last connection attempt timed out: it is most likely
/// stopped, and until the controller fences it each scan would wait the full connect timeout for
/// it. Every [`FULL_RETRY_EVERY`]th consecutive attempt also starts, beside it, a bare TCP
/// connect with the full timeout, so a live broker that is merely far away (a remote zone) is not
/// locked out by one slow connect: once that check connects in time, the broker is no suspect.
/// The check runs off the caller's path: it once held the scan that first saw a stopped broker
/// fenced (under min ISR) for the full 500 ms (`make bench-promotion`, 2026-12-04).
pub const SUSPECT_CONNECT_TIMEOUT: Duration = Duration::from_millis(100);
pub const FULL_RETRY_EVERY: u32 = 5;

/// Sends ListOffsets requests; one short-lived connection per request.
#[derive(Debug)]
pub struct OffsetProbe {
    client_id: String,
    security: ProbeSecurity,
    timeout: Duration,
    connect_timeout: Duration,
    next_correlation: AtomicI32,
    /// Consecutive connect timeouts per broker (absent: the last attempt connected); shared
    /// with the background checks of suspects.
    connect_failures: Arc<Mutex<HashMap<i32, u32>>>,
}

/// The per-broker connect-failure counts; a panic while holding this lock leaves a plain
/// counter map behind: still usable.
fn lock_failures(
    failures: &Mutex<HashMap<i32, u32>>,
) -> std::sync::MutexGuard<'_, HashMap<i32, u32>> {
    failures.lock().unwrap_or_else(|e| e.into_inner())
}

impl OffsetProbe {
    pub fn new(client_id: impl Into<String>, timeout: Duration) -> Self {
        OffsetProbe {
            client_id: client_id.into(),
            security: ProbeSecurity::default(),
            timeout,
            connect_timeout: timeout.min(DEFAULT_CONNECT_TIMEOUT),
            next_correlation: AtomicI32::new(1),
            connect_failures: Arc::default(),
        }
    }

    /// Sets how long a connection may take to be accepted (at most the request timeout).
    pub fn with_connect_timeout(mut self, connect_timeout: Duration) -> Self {
        self.connect_timeout = connect_timeout.min(self.timeout);
        self
    }

    /// Sets TLS and SASL (both absent by default: plaintext).
    pub fn with_security(mut self, security: ProbeSecurity) -> Self {
        self.security = security;
        self
    }

    fn connect_timeout_for(&self, broker: i32) -> Duration {
        if self.failures().get(&broker).copied().unwrap_or(0) > 0 {
            SUSPECT_CONNECT_TIMEOUT.min(self.connect_timeout)
        } else {
            self.connect_timeout
        }
    }

    /// Whether this attempt at a suspect broker is the one that also checks it with the full
    /// connect timeout, in the background.
    fn full_check_due(&self, broker: i32) -> bool {
        let failures = self.failures().get(&broker).copied().unwrap_or(0);
        failures > 0 && failures % FULL_RETRY_EVERY == 0
    }

    /// A bare TCP connect to a suspect broker with the full connect timeout, off the caller's
    /// path; connecting in time clears the suspicion for the next attempt.
    fn check_in_background(&self, broker: i32, addresses: Vec<std::net::SocketAddr>) {
        let (failures, full) = (Arc::clone(&self.connect_failures), self.connect_timeout);
        tokio::spawn(async move {
            let connect = TcpStream::connect(addresses.as_slice());
            if let Ok(Ok(_)) = tokio::time::timeout(full, connect).await {
                lock_failures(&failures).remove(&broker);
            }
        });
    }

    fn record_connect(&self, broker: i32, in_time: bool) {
        let mut failures = self.failures();
        if in_time {
            failures.remove(&broker);
        } else {
            *failures.entry(broker).or_default() += 1;
        }
    }

    fn failures(&self) -> std::sync::MutexGuard<'_, HashMap<i32, u32>> {
        lock_failures(&self.connect_failures)
    }

    /// Offsets of `partitions` (grouped by topic) as broker `broker` at `address` sees them.
    pub async fn query(
        &self,
        broker: i32,
        address: &str,
        kind: OffsetKind,
        topics: &[(&str, Vec<i32>)],
    ) -> Result<Vec<PartitionOffset>, ProbeError> {
        let api = (ApiKey::ListOffsets, list_offsets::VERSION);
        let body = list_offsets::request(kind, topics);
        let answer: ListOffsetsResponse = self
            .exchange(broker, address, api, &body, MAX_RESPONSE_BYTES)
            .await
            .map_err(|e| match e {
                ExchangeError::Connection(e) => e,
                ExchangeError::Protocol(reason) => ProbeError::Protocol { broker, reason },
            })?;
        Ok(list_offsets::offsets(&answer))
    }
}

impl OffsetProbe {
    /// A connection to `broker` at `address`, with the probe's TLS and SASL: what the offset
    /// queries and the reorder-only reassignments (`reassignment`) are sent on. The SASL
    /// requests' correlation ids come before `correlation`, the caller's first request's.
    pub(super) async fn connect(
        &self,
        broker: i32,
        address: &str,
        connect_timeout: Duration,
        correlation: i32,
    ) -> Result<Box<dyn Stream>, ProbeError> {
        // The name is resolved outside the connect timeout, within the exchange's: a lookup
        // that kube-proxy sent to a lost zone's CoreDNS waits out the resolver's timeout (1 s
        // with the chart's dnsConfig) and retries, once per search domain, while a broker's
        // SYN is answered in milliseconds (`name_cache`). A pod IP (what brokers advertise)
        // needs no lookup.
        let resolved = name_cache::resolve(address)
            .await
            .map_err(|source| self.io_error(broker, address, source))?;
        if self.full_check_due(broker) {
            self.check_in_background(broker, resolved.clone());
        }
        let connected =
            tokio::time::timeout(connect_timeout, TcpStream::connect(resolved.as_slice())).await;
        self.record_connect(broker, connected.is_ok());
        let tcp = connected
            .map_err(|_| ProbeError::ConnectTimeout {
                broker,
                address: address.to_string(),
                timeout: connect_timeout,
            })?
            .map_err(|source| self.io_error(broker, address, source))?;
        let mut stream: Box<dyn Stream> = match &self.security.tls {
            None => Box::new(tcp),
            Some(tls) => match tls_connect(tls, address, tcp).await {
                Ok(stream) => Box::new(stream),
                Err(TlsConnectError::Tls(source)) => {
                    return Err(ProbeError::Tls {
                        broker,
                        address: address.to_string(),
                        source,
                    })
                }
                Err(TlsConnectError::Io(source)) => {
                    return Err(self.io_error(broker, address, source))
                }
            },
        };
        if let Some(credentials) = &self.security.sasl {
            let first = correlation.wrapping_sub(16);
            authenticate(&mut *stream, credentials, &self.client_id, first)
                .await
                .map_err(|e| match e {
                    AuthenticateError::Sasl(source) => ProbeError::Sasl {
                        broker,
                        address: address.to_string(),
                        source,
                    },
                    AuthenticateError::Io(source) => self.io_error(broker, address, source),
                })?;
        }
        Ok(stream)
    }

    /// Whether the probe speaks TLS or SASL.
    pub fn is_secured(&self) -> bool {
        self.security.tls.is_some() || self.security.sasl.is_some()
    }

    /// Connects to `address` with the probe's TLS and SASL and sends one ListOffsets request for
    /// no partition: whether the certificates and credentials work there. A request, not just
    /// the handshake: with TLS 1.3 a broker refuses a client certificate after the handshake,
    /// and the alert arrives with the first answer. Broker id -1 in the errors: the address is a
    /// bootstrap server, not a broker of the metadata.
    pub async fn check_connection(&self, address: &str) -> Result<(), ProbeError> {
        self.query(-1, address, OffsetKind::LocalLogEnd, &[])
            .await
            .map(drop)
    }

    /// A fresh correlation id and the connect timeout for `broker` (shorter while it is suspect).
    pub(super) fn next_request(&self, broker: i32) -> (i32, Duration) {
        (
            self.next_correlation.fetch_add(1, Ordering::Relaxed),
            self.connect_timeout_for(broker),
        )
    }

    pub(super) fn client_id(&self) -> &str {
        &self.client_id
    }

    pub(super) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// An I/O error on the connection; on a TLS connection one that rustls reported (such as
    /// an alert refusing the client certificate, which TLS 1.3 sends after the handshake) is a
    /// TLS failure.
    pub(super) fn io_error(
        &self,
        broker: i32,
        address: &str,
        source: std::io::Error,
    ) -> ProbeError {
        if let (Some(tls), Some(cause)) = (&self.security.tls, tls_cause(&source)) {
            return ProbeError::Tls {
                broker,
                address: address.to_string(),
                source: tls_failure(cause, tls, host_of(address)),
            };
        }
        if let Some(&OversizedReply { announced, limit }) = source
            .get_ref()
            .and_then(|e| e.downcast_ref::<OversizedReply>())
        {
            return ProbeError::ReplyTooLarge {
                broker,
                address: address.to_string(),
                announced,
                limit,
            };
        }
        ProbeError::Io {
            broker,
            address: address.to_string(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A one-shot server on loopback that reads the request and answers with `reply`
    /// (`None`: never answers).
    async fn server(reply: Option<Vec<u8>>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let size = socket.read_i32().await.unwrap();
            let mut request = vec![0; size as usize];
            socket.read_exact(&mut request).await.unwrap();
            match reply {
                Some(bytes) => socket.write_all(&bytes).await.unwrap(),
                None => tokio::time::sleep(Duration::from_secs(60)).await,
            }
        });
        address
    }

    fn framed(body: &[u8]) -> Vec<u8> {
        [&(body.len() as i32).to_be_bytes()[..], body].concat()
    }

    #[tokio::test]
    async fn a_silent_broker_times_out_within_the_probe_timeout() {
        let address = server(None).await;
        let probe = OffsetProbe::new("t", Duration::from_millis(200));
        let start = std::time::Instant::now();
        let result = probe
            .query(1, &address, OffsetKind::LocalLogEnd, &[("t", vec![0])])
            .await;
        assert!(
            matches!(result, Err(ProbeError::Timeout { .. })),
            "{result:?}"
        );
        assert!(start.elapsed() < Duration::from_secs(2));
    }

    /// A stopped pod's address drops the SYN instead of refusing it. A listener whose accept
    /// queue is full does the same on loopback: the kernel drops further SYNs.
    #[tokio::test]
    async fn a_broker_that_does_not_accept_times_out_on_the_connect_timeout() {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener = socket.listen(0).unwrap();
        let address = listener.local_addr().unwrap();
        let mut queued = Vec::new();
        loop {
            match tokio::time::timeout(Duration::from_millis(300), TcpStream::connect(address))
                .await
            {
                Ok(Ok(stream)) => queued.push(stream),
                Ok(Err(e)) => panic!("loopback connect refused: {e}"),
                Err(_) => break,
            }
            assert!(queued.len() < 64, "the accept queue never filled up");
        }
        // The request timeout is far away: only the connect timeout can end this query. After a
        // connect timeout the broker is a suspect: shorter attempts, the full one every fifth.
        let probe = OffsetProbe::new("t", Duration::from_secs(60))
            .with_connect_timeout(Duration::from_millis(300));
        let mut timeouts = Vec::new();
        for _ in 0..6 {
            let result = probe
                .query(
                    1,
                    &address.to_string(),
                    OffsetKind::LocalLogEnd,
                    &[("t", vec![0])],
                )
                .await;
            match result {
                Err(ProbeError::ConnectTimeout { timeout, .. }) => {
                    timeouts.push(timeout.as_millis())
                }
                other => panic!("{other:?}"),
            }
        }
        // The fifth suspect attempt checks with the full timeout in the background: still 100.
        assert_eq!(timeouts, [300, 100, 100, 100, 100, 100]);
        // Another broker is no suspect, and a connection in time clears the suspicion.
        assert_eq!(probe.connect_timeout_for(2), Duration::from_millis(300));
        probe.record_connect(1, true);
        assert_eq!(probe.connect_timeout_for(1), Duration::from_millis(300));
    }

    #[tokio::test]
    async fn the_background_check_clears_a_suspect_that_accepts() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let probe = OffsetProbe::new("t", Duration::from_secs(2));
        for _ in 0..FULL_RETRY_EVERY {
            probe.record_connect(7, false);
        }
        assert!(probe.full_check_due(7));
        assert_eq!(probe.connect_timeout_for(7), SUSPECT_CONNECT_TIMEOUT);
        probe.check_in_background(7, vec![address]);
        let cleared = async {
            while probe.connect_timeout_for(7) == SUSPECT_CONNECT_TIMEOUT {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), cleared)
            .await
            .expect("a broker that accepts is no suspect after the background check");
        assert_eq!(probe.connect_timeout_for(7), Duration::from_millis(500));
    }

    #[tokio::test]
    async fn oversized_and_negative_sizes_are_refused_without_allocating() {
        let address = server(Some((-1i32).to_be_bytes().to_vec())).await;
        let probe = OffsetProbe::new("t", Duration::from_secs(2));
        let result = probe
            .query(1, &address, OffsetKind::LocalLogEnd, &[("t", vec![0])])
            .await;
        assert!(
            matches!(&result, Err(ProbeError::Io { source, .. })
                if source.to_string().contains("announced a -1-byte answer")),
            "{result:?}"
        );
        // Just over the bound: a typed refusal that says what happened.
        for size in [MAX_RESPONSE_BYTES as i32 + 1, i32::MAX] {
            let address = server(Some(size.to_be_bytes().to_vec())).await;
            let result = probe
                .query(1, &address, OffsetKind::LocalLogEnd, &[("t", vec![0])])
                .await;
            assert!(
                matches!(&result, Err(ProbeError::ReplyTooLarge { broker: 1, announced, limit, .. })
                    if *announced == size as usize && *limit == 16 << 20),
                "{size}: {result:?}"
            );
            let message = result.unwrap_err().to_string();
            assert!(
                message.contains("more than the 16777216 bytes the operator reads"),
                "{message}"
            );
        }
    }

    #[tokio::test]
    async fn an_answer_to_another_request_is_rejected() {
        // Correlation id 999 cannot be ours: a fresh probe starts at 1.
        let body = [&999i32.to_be_bytes()[..], &[0, 0, 0, 0], &[0, 0, 0, 0]].concat();
        let address = server(Some(framed(&body))).await;
        let probe = OffsetProbe::new("t", Duration::from_secs(2));
        let result = probe
            .query(1, &address, OffsetKind::LocalLogEnd, &[("t", vec![0])])
            .await;
        assert!(
            matches!(result, Err(ProbeError::Protocol { broker: 1, .. })),
            "{result:?}"
        );
    }

    #[tokio::test]
    async fn a_closed_connection_mid_answer_is_an_io_error() {
        // Announces 100 bytes, sends 4, closes.
        let address = server(Some([&100i32.to_be_bytes()[..], &[0, 0, 0, 1]].concat())).await;
        let probe = OffsetProbe::new("t", Duration::from_secs(2));
        let result = probe
            .query(1, &address, OffsetKind::LocalLogEnd, &[("t", vec![0])])
            .await;
        assert!(matches!(result, Err(ProbeError::Io { .. })), "{result:?}");
    }
}
