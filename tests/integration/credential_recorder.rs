//! A stranger on the network, for the tests that credentials travel only to hosts the set's CA
//! vouches for: a TLS endpoint on 127.0.0.1 that presents the certificate a test gives it,
//! records every byte a client sends (the raw bytes before TLS, and what it decrypts after a
//! completed handshake), and relays the decrypted bytes to a real Kafka listener over TLS. So a
//! client that trusts its certificate completes its SASL exchange through it, and the recording
//! then holds the user name: the control that shows the recording would catch a credential.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::secure_kafka::Leaf;

/// What clients sent the recorder so far.
#[derive(Default, Clone)]
pub(crate) struct Seen {
    /// TCP connections accepted.
    pub(crate) connections: usize,
    /// TLS handshakes the client completed (it accepted the certificate).
    pub(crate) handshakes: usize,
    /// Every byte received, as it came off the socket (TLS records and all).
    pub(crate) raw: Vec<u8>,
    /// The bytes decrypted after completed handshakes: what a client sent the host it trusted.
    pub(crate) plaintext: Vec<u8>,
}

impl Seen {
    /// Whether `text` is anywhere in what the recorder received, raw or decrypted.
    pub(crate) fn holds(&self, text: &str) -> bool {
        let needle = text.as_bytes();
        [&self.raw, &self.plaintext]
            .iter()
            .any(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
    }
}

pub(crate) struct Recorder {
    pub(crate) address: String,
    seen: Arc<Mutex<Seen>>,
    accept: JoinHandle<()>,
}

impl Recorder {
    /// Listens on a free port of 127.0.0.1 presenting `leaf`; relays to `upstream` (host:port of
    /// a TLS listener whose certificate `upstream_ca_pem` signed for 127.0.0.1).
    pub(crate) async fn start(leaf: &Leaf, upstream: String, upstream_ca_pem: &str) -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().unwrap().to_string();
        let acceptor = TlsAcceptor::from(server_config(leaf));
        let connector = TlsConnector::from(client_config(upstream_ca_pem));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let recorded = seen.clone();
        let accept = tokio::spawn(async move {
            // Dropped with this task when the recorder is: every relay ends with it.
            let mut relays = JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                recorded.lock().unwrap().connections += 1;
                relays.spawn(relay(
                    stream,
                    acceptor.clone(),
                    connector.clone(),
                    upstream.clone(),
                    recorded.clone(),
                ));
            }
        });
        Recorder {
            address,
            seen,
            accept,
        }
    }

    pub(crate) fn seen(&self) -> Seen {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn server_config(leaf: &Leaf) -> Arc<ServerConfig> {
    let chain = CertificateDer::pem_slice_iter(leaf.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).unwrap();
    let config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    Arc::new(config)
}

fn client_config(ca_pem: &str) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

/// One client connection: the TLS handshake on the recorded socket, then, if the client accepted
/// the certificate, its decrypted bytes recorded and relayed both ways.
async fn relay(
    stream: TcpStream,
    acceptor: TlsAcceptor,
    connector: TlsConnector,
    upstream: String,
    seen: Arc<Mutex<Seen>>,
) {
    let recorded = RecordedStream {
        inner: stream,
        seen: seen.clone(),
    };
    let Ok(client) = acceptor.accept(recorded).await else {
        return;
    };
    seen.lock().unwrap().handshakes += 1;
    let Ok(tcp) = TcpStream::connect(&upstream).await else {
        return;
    };
    let name = ServerName::IpAddress(std::net::Ipv4Addr::LOCALHOST.into());
    let Ok(server) = connector.connect(name, tcp).await else {
        return;
    };
    let (mut from_client, mut to_client) = tokio::io::split(client);
    let (mut from_server, mut to_server) = tokio::io::split(server);
    let upward = async {
        let mut buf = vec![0u8; 16 * 1024];
        while let Ok(n @ 1..) = from_client.read(&mut buf).await {
            seen.lock().unwrap().plaintext.extend_from_slice(&buf[..n]);
            if to_server.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = to_server.shutdown().await;
    };
    let downward = async {
        let _ = tokio::io::copy(&mut from_server, &mut to_client).await;
        let _ = to_client.shutdown().await;
    };
    tokio::join!(upward, downward);
}

/// A socket whose received bytes are appended to `seen.raw` as they are read.
struct RecordedStream {
    inner: TcpStream,
    seen: Arc<Mutex<Seen>>,
}

impl AsyncRead for RecordedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let new = &buf.filled()[before..];
            self.seen.lock().unwrap().raw.extend_from_slice(new);
        }
        polled
    }
}

impl AsyncWrite for RecordedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
