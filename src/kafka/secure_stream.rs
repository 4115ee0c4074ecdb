//! The offset probe's connection to a secured listener: TLS through tokio-rustls with the
//! ObserverSet's CA (and client certificate for mutual TLS), then SASL as Kafka frames it:
//! SaslHandshake v1 names the mechanism, SaslAuthenticate v2 carries the mechanism's messages.
//! The mechanisms (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) are rsasl's, the requests' wire format
//! is the `kafka-protocol` crate's (generated from Kafka's schemas); no cryptography here.
//!
//! A failure says which side is at fault: [`TlsFailure`] (the handshake, or an alert the broker
//! sent after it, such as a refused client certificate) and [`SaslError`] (the broker refused
//! the credentials or the mechanism) are distinct, each with a message that says what to fix.

use std::io;

use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use rsasl::prelude::{Mechname, MessageSent, SASLClient, SASLConfig, State};
use rustls::pki_types::ServerName;
use rustls::{AlertDescription, CertificateError};
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::security::{ProbeTls, SaslCredentials};

/// A connection the probe can send requests on: plain TCP or TLS.
pub(super) trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// Largest answer accepted on the small request-response exchanges (SASL, reassignments): a
/// SCRAM server message is a few hundred bytes, a reassignment answer ~10 bytes a partition.
pub(super) const MAX_SASL_RESPONSE_BYTES: usize = 64 << 10;
const SASL_HANDSHAKE_VERSION: i16 = 1;
const SASL_AUTHENTICATE_VERSION: i16 = 2;
/// SCRAM takes two round trips, PLAIN one; a broker that asks for more is not following either.
const MAX_SASL_ROUNDS: usize = 4;

/// What went wrong in TLS, as far as the client can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsFailureKind {
    /// The broker's certificate is not signed by the configured CA.
    UntrustedCertificate,
    /// The broker's certificate does not name the host the probe connected to.
    NameMismatch,
    /// The broker's certificate is expired or not valid yet.
    CertificateExpired,
    /// The broker asked for a client certificate and none is configured.
    ClientCertificateRequired,
    /// The broker refused the configured client certificate.
    ClientCertificateRefused,
    /// The broker did not answer in TLS.
    NotTls,
    Other,
}

/// A TLS failure with a message that says what to check.
#[derive(Clone, Debug, Error)]
#[error("{reason}")]
pub struct TlsFailure {
    pub kind: TlsFailureKind,
    pub reason: String,
}

/// A refused or failed SASL exchange.
#[derive(Debug, Error)]
pub enum SaslError {
    #[error("SASL authentication failed for the user in {user} ({mechanism}, password from {password}): {message}: wrong password, or a user the brokers do not know?")]
    AuthenticationFailed {
        /// Where the username comes from ("Secret ns/name key username"), never the name itself.
        user: String,
        mechanism: &'static str,
        /// Where the password comes from ("Secret ns/name key password").
        password: String,
        /// The broker's own words.
        message: String,
    },
    #[error("the listener does not enable SASL mechanism {mechanism} (it enables {enabled}): fix spec.kafka.sasl.mechanism, or the listener's sasl.enabled.mechanisms")]
    UnsupportedMechanism {
        mechanism: &'static str,
        enabled: String,
    },
    #[error(
        "the listener does not take SASL ({error}): is spec.kafka.sasl meant for another listener?"
    )]
    NotSasl { error: String },
    #[error("SASL {mechanism} exchange for the user in {user} failed: {reason}")]
    Exchange {
        /// Where the username comes from, never the name itself.
        user: String,
        mechanism: &'static str,
        reason: String,
    },
}

/// An I/O error from a TLS connection that is really a TLS failure: the error rustls reported,
/// whether in the handshake or later (an alert after the handshake: TLS 1.3 servers check the
/// client certificate after the client considers the handshake done).
pub(super) fn tls_cause(error: &io::Error) -> Option<&rustls::Error> {
    error.get_ref()?.downcast_ref::<rustls::Error>()
}

/// Turns rustls' error into what to check, naming the Secrets involved.
pub(super) fn tls_failure(error: &rustls::Error, tls: &ProbeTls, host: &str) -> TlsFailure {
    use TlsFailureKind::*;
    let client_cert = tls.client_cert.as_ref();
    let (kind, reason) = match error {
        rustls::Error::InvalidCertificate(e) => match e {
            CertificateError::UnknownIssuer | CertificateError::BadSignature => (
                UntrustedCertificate,
                format!(
                    "the broker's certificate is not trusted by the CA in {} ({e:?})",
                    tls.ca
                ),
            ),
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => (
                NameMismatch,
                format!("the broker's certificate does not name host {host} ({e}): the certificate's subjectAltNames must include the address the brokers advertise"),
            ),
            CertificateError::Expired
            | CertificateError::ExpiredContext { .. }
            | CertificateError::NotValidYet
            | CertificateError::NotValidYetContext { .. } => (
                CertificateExpired,
                format!("the broker's certificate is not valid now ({e})"),
            ),
            other => (
                Other,
                format!("the broker's certificate is refused: {other}"),
            ),
        },
        rustls::Error::AlertReceived(alert) => match (alert, client_cert) {
            (AlertDescription::CertificateRequired, _)
            | (AlertDescription::BadCertificate | AlertDescription::HandshakeFailure, None) => (
                ClientCertificateRequired,
                format!("the broker wants a client certificate (mutual TLS; alert {alert:?}): set spec.kafka.tls.clientCertSecretRef"),
            ),
            (
                AlertDescription::BadCertificate
                | AlertDescription::UnknownCA
                | AlertDescription::CertificateUnknown
                | AlertDescription::CertificateExpired
                | AlertDescription::CertificateRevoked
                | AlertDescription::DecryptError,
                Some(cert),
            ) => (
                ClientCertificateRefused,
                format!("the broker refused the client certificate in {cert} (alert {alert:?}): is it valid now and signed by a CA in the broker's truststore?"),
            ),
            _ => (Other, format!("the broker sent TLS alert {alert:?}")),
        },
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => (
            NotTls,
            format!("the broker did not answer in TLS ({error}): is this a TLS listener?"),
        ),
        other => (Other, other.to_string()),
    };
    TlsFailure { kind, reason }
}

/// The host of a `host:port` address (`[v6]:port` too), for the certificate check.
pub(super) fn host_of(address: &str) -> &str {
    let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// Why a TLS connection could not be set up.
pub(super) enum TlsConnectError {
    Tls(TlsFailure),
    Io(io::Error),
}

/// The TLS handshake on `tcp`, checking the broker's certificate against the CA and the host of
/// `address`.
pub(super) async fn tls_connect(
    tls: &ProbeTls,
    address: &str,
    tcp: TcpStream,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, TlsConnectError> {
    let host = host_of(address);
    let name = ServerName::try_from(host.to_string()).map_err(|e| {
        TlsConnectError::Tls(TlsFailure {
            kind: TlsFailureKind::Other,
            reason: format!(
                "{host} is neither a DNS name nor an IP address a certificate can name ({e})"
            ),
        })
    })?;
    TlsConnector::from(tls.config.clone())
        .connect(name, tcp)
        .await
        .map_err(|e| match tls_cause(&e) {
            Some(cause) => TlsConnectError::Tls(tls_failure(cause, tls, host)),
            // A plaintext Kafka listener reads the ClientHello as an oversized request and
            // closes the connection.
            None if matches!(
                e.kind(),
                io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset
            ) =>
            {
                TlsConnectError::Tls(TlsFailure {
                    kind: TlsFailureKind::NotTls,
                    reason: format!(
                        "the broker closed the connection during the TLS handshake ({e}): is this a TLS listener?"
                    ),
                })
            }
            None => TlsConnectError::Io(e),
        })
}

/// Why a SASL exchange did not succeed.
pub(super) enum AuthenticateError {
    Sasl(SaslError),
    Io(io::Error),
}

impl From<io::Error> for AuthenticateError {
    fn from(e: io::Error) -> Self {
        AuthenticateError::Io(e)
    }
}

/// Authenticates the connection with `credentials`. Correlation ids start at `correlation`.
pub(super) async fn authenticate(
    stream: &mut (impl Stream + ?Sized),
    credentials: &SaslCredentials,
    client_id: &str,
    correlation: i32,
) -> Result<(), AuthenticateError> {
    let mechanism = credentials.mechanism.as_str();
    let exchange_error = |reason: String| {
        AuthenticateError::Sasl(SaslError::Exchange {
            user: credentials.username_location.to_string(),
            mechanism,
            reason,
        })
    };
    let handshake =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism));
    let frame = request_frame(
        ApiKey::SaslHandshake,
        SASL_HANDSHAKE_VERSION,
        correlation,
        client_id,
        &handshake,
    )
    .map_err(|e| exchange_error(e.to_string()))?;
    let body = round_trip(stream, &frame).await?;
    let answer: SaslHandshakeResponse = decode_response(
        ApiKey::SaslHandshake,
        SASL_HANDSHAKE_VERSION,
        correlation,
        body,
    )
    .map_err(exchange_error)?;
    match ResponseError::try_from_code(answer.error_code) {
        None => {}
        Some(ResponseError::UnsupportedSaslMechanism) => {
            let enabled: Vec<&str> = answer.mechanisms.iter().map(|m| m.as_str()).collect();
            return Err(AuthenticateError::Sasl(SaslError::UnsupportedMechanism {
                mechanism,
                enabled: if enabled.is_empty() {
                    "none".into()
                } else {
                    enabled.join(", ")
                },
            }));
        }
        Some(e @ ResponseError::IllegalSaslState) => {
            return Err(AuthenticateError::Sasl(SaslError::NotSasl {
                error: e.to_string(),
            }))
        }
        Some(e) => return Err(exchange_error(format!("the handshake was refused: {e}"))),
    }

    let config = SASLConfig::with_credentials(
        None,
        credentials.username.clone(),
        credentials.password.clone(),
    )
    .map_err(|e| exchange_error(e.to_string()))?;
    let name = Mechname::parse(mechanism.as_bytes()).map_err(|e| exchange_error(e.to_string()))?;
    let mut session = SASLClient::new(config)
        .start_suggested(&[name])
        .map_err(|e| exchange_error(e.to_string()))?;
    // PLAIN and SCRAM are client-first: the first step has no input.
    let mut input: Option<Bytes> = None;
    for round in 1..=MAX_SASL_ROUNDS {
        let mut out = Vec::new();
        let state = session
            .step(input.as_deref(), &mut out)
            .map_err(|e| exchange_error(format!("the broker's message is not acceptable: {e}")))?;
        if matches!(state, State::Finished(MessageSent::No)) {
            // The last broker message checked out (SCRAM verifies the broker's signature).
            return Ok(());
        }
        let correlation = correlation.wrapping_add(round as i32);
        let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(out));
        let frame = request_frame(
            ApiKey::SaslAuthenticate,
            SASL_AUTHENTICATE_VERSION,
            correlation,
            client_id,
            &request,
        )
        .map_err(|e| exchange_error(e.to_string()))?;
        let body = round_trip(stream, &frame).await?;
        let answer: SaslAuthenticateResponse = decode_response(
            ApiKey::SaslAuthenticate,
            SASL_AUTHENTICATE_VERSION,
            correlation,
            body,
        )
        .map_err(exchange_error)?;
        if let Some(e) = ResponseError::try_from_code(answer.error_code) {
            let message = answer
                .error_message
                .as_ref()
                .map_or_else(|| e.to_string(), |m| m.to_string());
            return Err(AuthenticateError::Sasl(match e {
                ResponseError::SaslAuthenticationFailed => SaslError::AuthenticationFailed {
                    user: credentials.username_location.to_string(),
                    mechanism,
                    password: credentials.password_location.to_string(),
                    message,
                },
                _ => SaslError::Exchange {
                    user: credentials.username_location.to_string(),
                    mechanism,
                    reason: format!("{e}: {message}"),
                },
            }));
        }
        if matches!(state, State::Finished(_)) {
            return Ok(());
        }
        input = Some(answer.auth_bytes);
    }
    Err(exchange_error(format!(
        "the broker asked for more than {MAX_SASL_ROUNDS} rounds"
    )))
}

/// A length-prefixed request: header, then body.
pub(super) fn request_frame(
    key: ApiKey,
    version: i16,
    correlation: i32,
    client_id: &str,
    body: &impl Encodable,
) -> anyhow::Result<Vec<u8>> {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation)
        .with_client_id(Some(StrBytes::from_string(client_id.to_string())));
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&[0; 4]);
    header.encode(&mut buf, key.request_header_version(version))?;
    body.encode(&mut buf, version)?;
    let len = i32::try_from(buf.len() - 4)?;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    Ok(buf.to_vec())
}

/// Sends a frame and reads the answer's body (the bytes after its length prefix), at most
/// 64 KiB: what the SASL exchange and the small admin requests get back.
pub(super) async fn round_trip(
    stream: &mut (impl Stream + ?Sized),
    frame: &[u8],
) -> io::Result<Bytes> {
    round_trip_up_to(stream, frame, MAX_SASL_RESPONSE_BYTES).await
}

/// A reply larger than the operator reads; refused before anything is allocated. Carried
/// inside the `io::Error` of [`round_trip_up_to`] and turned into
/// `ProbeError::ReplyTooLarge` by the probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the broker announced a {announced}-byte answer, more than the {limit} bytes the operator reads")]
pub struct OversizedReply {
    pub announced: usize,
    pub limit: usize,
}

/// [`round_trip`] for an answer of up to `max_bytes` (a whole cluster's metadata).
pub(super) async fn round_trip_up_to(
    stream: &mut (impl Stream + ?Sized),
    frame: &[u8],
    max_bytes: usize,
) -> io::Result<Bytes> {
    stream.write_all(frame).await?;
    stream.flush().await?;
    let size = stream.read_i32().await?;
    let size = usize::try_from(size).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the broker announced a {size}-byte answer"),
        )
    })?;
    if size > max_bytes {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            OversizedReply {
                announced: size,
                limit: max_bytes,
            },
        ));
    }
    let mut body = vec![0; size];
    stream.read_exact(&mut body).await?;
    Ok(Bytes::from(body))
}

pub(super) fn decode_response<T: Decodable>(
    key: ApiKey,
    version: i16,
    correlation: i32,
    mut body: Bytes,
) -> Result<T, String> {
    let header = ResponseHeader::decode(&mut body, key.response_header_version(version))
        .map_err(|e| format!("bad {key:?} response header: {e}"))?;
    if header.correlation_id != correlation {
        return Err(format!(
            "the {key:?} response is for request {}, expected {correlation}",
            header.correlation_id
        ));
    }
    T::decode(&mut body, version).map_err(|e| format!("bad {key:?} response: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_of_addresses() {
        assert_eq!(host_of("kafka-0.kafka:9093"), "kafka-0.kafka");
        assert_eq!(host_of("10.0.0.1:9093"), "10.0.0.1");
        assert_eq!(host_of("[::1]:9093"), "::1");
    }

    #[test]
    fn handshake_frame_layout() {
        let handshake =
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
        let frame = request_frame(ApiKey::SaslHandshake, 1, 7, "koo", &handshake).unwrap();
        let expected: Vec<u8> = [
            &(frame.len() as i32 - 4).to_be_bytes()[..],
            &[0, 17, 0, 1], // api key 17, version 1
            &[0, 0, 0, 7],  // correlation id
            &[0, 3, b'k', b'o', b'o'],
            &[0, 5, b'P', b'L', b'A', b'I', b'N'],
        ]
        .concat();
        assert_eq!(frame, expected);
    }
}
