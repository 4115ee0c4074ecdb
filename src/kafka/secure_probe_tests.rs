//! The offset probe against in-process TLS and SASL servers on loopback: certificates from
//! `security::test_pki`, the settings from `security::connection_security` as the operator
//! makes them. The real-Kafka test (tests/integration/secure_kafka.rs) covers SCRAM and Kafka's own TLS.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::list_offsets;
use super::security::test_pki::{Ca, Leaf};
use super::security::{connection_security, ProbeSecurity, SecretContents};
use super::{OffsetKind, OffsetProbe, ProbeError, SaslError, TlsFailureKind};
use crate::crd::{
    ClientCertSecretRef, SaslMechanism, SaslSecretRef, SaslSpec, SecretKeyRef, TlsSpec,
};

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A TLS server config with `leaf` as its certificate; with `clients_from`, it requires a client
/// certificate signed by that CA.
fn server_config(leaf: &Leaf, clients_from: Option<&Ca>) -> Arc<ServerConfig> {
    let chain = CertificateDer::pem_slice_iter(leaf.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap();
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = match clients_from {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(ca.pem.as_bytes()) {
                roots.add(cert.unwrap()).unwrap();
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .unwrap();
            builder.with_client_cert_verifier(verifier)
        }
    };
    Arc::new(builder.with_single_cert(chain, key).unwrap())
}

async fn read_frame(stream: &mut (impl AsyncRead + Unpin)) -> std::io::Result<Vec<u8>> {
    let size = stream.read_i32().await?;
    let mut body = vec![0; size as usize];
    stream.read_exact(&mut body).await?;
    Ok(body)
}

fn framed(body: &[u8]) -> Vec<u8> {
    [&(body.len() as i32).to_be_bytes()[..], body].concat()
}

fn correlation_of(request: &[u8]) -> [u8; 4] {
    request[4..8].try_into().unwrap()
}

/// A ListOffsets v2 answer: topic `t`, partition 0 at offset 42.
fn list_offsets_answer(request: &[u8]) -> Vec<u8> {
    let correlation = i32::from_be_bytes(correlation_of(request));
    framed(&list_offsets::tests::answer(correlation, &[(0, 0, 42)]))
}

/// What the fake broker does with a connection after TLS (if any).
#[derive(Clone, Copy)]
enum Broker {
    /// Answers one ListOffsets request.
    ListOffsets,
    /// SASL PLAIN: accepts `alice`/`hunter2`, refuses anything else; then answers ListOffsets.
    SaslPlain,
    /// Answers the SaslHandshake with UNSUPPORTED_SASL_MECHANISM, enabling SCRAM-SHA-512 only.
    SaslScramOnly,
}

async fn serve(mut stream: impl AsyncRead + AsyncWrite + Unpin, broker: Broker) {
    let Ok(request) = read_frame(&mut stream).await else {
        return;
    };
    if matches!(broker, Broker::SaslPlain | Broker::SaslScramOnly) {
        assert_eq!(&request[..4], &[0, 17, 0, 1], "SaslHandshake v1 first");
        // SaslHandshake v1 answer: header v0, error code, enabled mechanisms.
        let (error, mechanism): (i16, &[u8]) = match broker {
            Broker::SaslPlain => (0, b"PLAIN"),
            _ => (33, b"SCRAM-SHA-512"),
        };
        let answer = [
            &correlation_of(&request)[..],
            &error.to_be_bytes(),
            &[0, 0, 0, 1],
            &(mechanism.len() as i16).to_be_bytes(),
            mechanism,
        ]
        .concat();
        stream.write_all(&framed(&answer)).await.unwrap();
        if error != 0 {
            return;
        }
        let request = read_frame(&mut stream).await.unwrap();
        assert_eq!(&request[..4], &[0, 36, 0, 2], "then SaslAuthenticate v2");
        let plain_ok = good_len(&request);
        // SaslAuthenticate v2 answer: header v1 (correlation, no tags), error code, compact
        // nullable error message, compact bytes, session lifetime, no tags.
        let mut answer = correlation_of(&request).to_vec();
        answer.push(0);
        if plain_ok {
            answer.extend_from_slice(&0i16.to_be_bytes());
            answer.push(0); // null message
        } else {
            let message = b"Authentication failed: Invalid username or password";
            answer.extend_from_slice(&58i16.to_be_bytes());
            answer.push(message.len() as u8 + 1);
            answer.extend_from_slice(message);
        }
        answer.push(1); // empty auth bytes
        answer.extend_from_slice(&0i64.to_be_bytes());
        answer.push(0);
        stream.write_all(&framed(&answer)).await.unwrap();
        if !plain_ok {
            return;
        }
    }
    let request = if matches!(broker, Broker::ListOffsets) {
        request
    } else {
        match read_frame(&mut stream).await {
            Ok(r) => r,
            Err(_) => return,
        }
    };
    assert_eq!(&request[..4], &[0, 2, 0, 2], "ListOffsets v2");
    let _ = stream.write_all(&list_offsets_answer(&request)).await;
    let _ = stream.flush().await;
}

/// The PLAIN message is exactly "\0alice\0hunter2" (no authzid, nothing after the password):
/// the compact-bytes length before it is 14 + 1.
fn good_len(request: &[u8]) -> bool {
    request
        .windows(15)
        .any(|w| w[0] == 15 && &w[1..] == b"\0alice\0hunter2")
}

/// A fake broker on loopback: TLS with `tls` (a server config) or plaintext, then `broker`.
async fn fake_broker(tls: Option<Arc<ServerConfig>>, broker: Broker) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            let tls = tls.clone();
            tokio::spawn(async move {
                match tls {
                    None => serve(socket, broker).await,
                    Some(config) => {
                        if let Ok(stream) = TlsAcceptor::from(config).accept(socket).await {
                            serve(stream, broker).await;
                        }
                    }
                }
            });
        }
    });
    address
}

struct Pki {
    ca: Ca,
    broker: Leaf,
    client: Leaf,
}

fn pki() -> Pki {
    let ca = Ca::new("koo-test-ca");
    Pki {
        broker: ca.leaf(&["127.0.0.1", "localhost"]),
        client: ca.leaf(&["observer"]),
        ca,
    }
}

/// The probe's settings as the operator makes them from Secrets in namespace `ns`: CA Secret
/// `kafka-ca` (`ca_pem`), client certificate Secret `kafka-client` (with `client`), SASL PLAIN
/// Secret `kafka-user` (with `password`).
fn security(ca_pem: &str, client: Option<&Leaf>, password: Option<&str>) -> ProbeSecurity {
    let mut secrets = SecretContents::new();
    let entry = |pairs: &[(&str, &str)]| -> BTreeMap<String, Vec<u8>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect()
    };
    secrets.insert("kafka-ca".into(), entry(&[("ca.crt", ca_pem)]));
    if let Some(client) = client {
        secrets.insert(
            "kafka-client".into(),
            entry(&[("tls.crt", &client.cert_pem), ("tls.key", &client.key_pem)]),
        );
    }
    if let Some(password) = password {
        secrets.insert(
            "kafka-user".into(),
            entry(&[("username", "alice"), ("password", password)]),
        );
    }
    let tls = TlsSpec {
        ca_secret_ref: SecretKeyRef {
            name: "kafka-ca".into(),
            key: "ca.crt".into(),
        },
        client_cert_secret_ref: client.map(|_| ClientCertSecretRef {
            name: "kafka-client".into(),
            cert_key: "tls.crt".into(),
            key_key: "tls.key".into(),
        }),
    };
    let sasl = password.map(|_| SaslSpec {
        mechanism: SaslMechanism::Plain,
        secret_ref: SaslSecretRef {
            name: "kafka-user".into(),
            username_key: "username".into(),
            password_key: "password".into(),
        },
    });
    connection_security("ns", Some(&tls), sasl.as_ref(), &secrets)
        .unwrap()
        .probe
}

async fn probe(security: ProbeSecurity, address: &str) -> Result<i64, ProbeError> {
    let probe = OffsetProbe::new("t", Duration::from_secs(5)).with_security(security);
    let answer = probe
        .query(1, address, OffsetKind::LocalLogEnd, &[("t", vec![0])])
        .await?;
    Ok(answer[0].result.expect("offset"))
}

fn tls_kind(result: &Result<i64, ProbeError>) -> Option<TlsFailureKind> {
    match result {
        Err(ProbeError::Tls { source, .. }) => Some(source.kind),
        _ => None,
    }
}

#[tokio::test]
async fn tls_with_the_right_ca_reads_offsets() {
    let pki = pki();
    let address = fake_broker(Some(server_config(&pki.broker, None)), Broker::ListOffsets).await;
    assert_eq!(
        probe(security(&pki.ca.pem, None, None), &address)
            .await
            .unwrap(),
        42
    );
}

#[tokio::test]
async fn a_ca_that_did_not_sign_the_broker_is_a_tls_error_naming_the_secret() {
    let pki = pki();
    let address = fake_broker(Some(server_config(&pki.broker, None)), Broker::ListOffsets).await;
    let other = Ca::new("another-ca");
    let result = probe(security(&other.pem, None, None), &address).await;
    assert_eq!(
        tls_kind(&result),
        Some(TlsFailureKind::UntrustedCertificate),
        "{result:?}"
    );
    let msg = result.unwrap_err().to_string();
    assert!(
        msg.contains(&format!("TLS with broker 1 at {address} failed")),
        "{msg}"
    );
    assert!(
        msg.contains("not trusted by the CA in Secret ns/kafka-ca key ca.crt"),
        "{msg}"
    );
}

#[tokio::test]
async fn a_certificate_for_another_host_is_a_name_mismatch() {
    let pki = pki();
    let elsewhere = pki.ca.leaf(&["kafka-0.elsewhere"]);
    let address = fake_broker(Some(server_config(&elsewhere, None)), Broker::ListOffsets).await;
    let result = probe(security(&pki.ca.pem, None, None), &address).await;
    assert_eq!(
        tls_kind(&result),
        Some(TlsFailureKind::NameMismatch),
        "{result:?}"
    );
    assert!(result
        .unwrap_err()
        .to_string()
        .contains("does not name host 127.0.0.1"));
}

#[tokio::test]
async fn mutual_tls_with_and_without_a_client_certificate() {
    let pki = pki();
    let address = fake_broker(
        Some(server_config(&pki.broker, Some(&pki.ca))),
        Broker::ListOffsets,
    )
    .await;
    let with = probe(security(&pki.ca.pem, Some(&pki.client), None), &address).await;
    assert_eq!(with.unwrap(), 42);

    let without = probe(security(&pki.ca.pem, None, None), &address).await;
    assert_eq!(
        tls_kind(&without),
        Some(TlsFailureKind::ClientCertificateRequired),
        "{without:?}"
    );
    assert!(without
        .unwrap_err()
        .to_string()
        .contains("spec.kafka.tls.clientCertSecretRef"));

    // A client certificate from a CA the broker does not trust.
    let stranger = Ca::new("stranger").leaf(&["observer"]);
    let refused = probe(security(&pki.ca.pem, Some(&stranger), None), &address).await;
    assert_eq!(
        tls_kind(&refused),
        Some(TlsFailureKind::ClientCertificateRefused),
        "{refused:?}"
    );
    let msg = refused.unwrap_err().to_string();
    assert!(
        msg.contains("client certificate in Secret ns/kafka-client key tls.crt"),
        "{msg}"
    );
}

#[tokio::test]
async fn tls_to_a_plaintext_listener_says_so() {
    let pki = pki();
    // A plaintext broker answers the ClientHello with a Kafka-looking frame.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut hello = [0u8; 64];
        let _ = socket.read(&mut hello).await;
        let _ = socket.write_all(&framed(&[0, 0, 0, 1, 0, 35])).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
    });
    let result = probe(security(&pki.ca.pem, None, None), &address).await;
    assert_eq!(
        tls_kind(&result),
        Some(TlsFailureKind::NotTls),
        "{result:?}"
    );
}

#[tokio::test]
async fn sasl_plain_over_tls_reads_offsets_and_a_wrong_password_is_an_auth_error() {
    let pki = pki();
    let address = fake_broker(Some(server_config(&pki.broker, None)), Broker::SaslPlain).await;
    let good = probe(security(&pki.ca.pem, None, Some("hunter2")), &address).await;
    assert_eq!(good.unwrap(), 42);

    let bad = probe(security(&pki.ca.pem, None, Some("hunter3")), &address).await;
    let Err(ProbeError::Sasl {
        source: source @ SaslError::AuthenticationFailed { .. },
        ..
    }) = &bad
    else {
        panic!("{bad:?}");
    };
    let msg = source.to_string();
    assert!(
        msg.contains(
            "SASL authentication failed for the user in Secret ns/kafka-user key username (PLAIN"
        ),
        "{msg}"
    );
    // The username is a credential: its Secret and key are named, never its value.
    assert!(!msg.contains("alice"), "{msg}");
    assert!(!format!("{bad:?}").contains("alice"), "{bad:?}");
    assert!(msg.contains("Secret ns/kafka-user key password"), "{msg}");
    assert!(msg.contains("Invalid username or password"), "{msg}");
    assert!(msg.contains("wrong password"), "{msg}");
}

#[tokio::test]
async fn a_mechanism_the_listener_does_not_enable_is_named() {
    let pki = pki();
    let address = fake_broker(
        Some(server_config(&pki.broker, None)),
        Broker::SaslScramOnly,
    )
    .await;
    let result = probe(security(&pki.ca.pem, None, Some("hunter2")), &address).await;
    let Err(ProbeError::Sasl { source, .. }) = &result else {
        panic!("{result:?}");
    };
    assert!(
        matches!(source, SaslError::UnsupportedMechanism { .. }),
        "{source}"
    );
    let msg = source.to_string();
    assert!(
        msg.contains("does not enable SASL mechanism PLAIN (it enables SCRAM-SHA-512)"),
        "{msg}"
    );
}
