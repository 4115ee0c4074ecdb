//! The operator's Kafka clients against a real Kafka on secured listeners: a single-node KRaft
//! Kafka (the cached distribution of e2e/versions.env's KAFKA_VERSION, `$KOO_CACHE/kafka/<v>`,
//! as `make kafka-jars` fetches it) run as a local process on 127.0.0.1, ports chosen at run
//! time, with
//!
//! - a SASL_SSL listener (SCRAM-SHA-512, the user created by `kafka-storage format --add-scram`),
//! - an SSL listener that requires client certificates (mutual TLS),
//! - a PLAINTEXT listener (inter-broker) and the controller's,
//!
//! and certificates made by the test (rcgen). The settings come from Secret contents through
//! `kafka::security::connection_security`, exactly as the operator makes them. Checks, over both
//! secured listeners: the watcher's scan (librdkafka metadata and configs, the probe's log end
//! offsets and high watermark) and the probe alone; then the failures: a wrong password is the
//! SASL authentication error, a CA that did not sign the broker's certificate is the TLS error,
//! no client certificate on the mTLS listener and TLS to the plaintext listener are named too.
//!
//! Runs with the ordinary `cargo test` (about 11 s on the 2-core machine: format 3 s, Kafka's
//! start 3-4 s, the checks 4 s), alone with `make secure-kafka-test` or `cargo test --release
//! --test integration secure_kafka::`. Without the cached distribution or `java` it prints a skip line and
//! passes; `KOO_SECURE_KAFKA_TEST=0` skips it too. The Kafka process is killed and its temporary
//! directory removed when the test ends, failed or not; on failure the tail of Kafka's log is
//! printed.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kafka_observer_operator::crd::{
    ClientCertSecretRef, SaslMechanism, SaslSecretRef, SaslSpec, SecretKeyRef, TlsSpec,
};
use kafka_observer_operator::kafka::security::{connection_security, SecretContents};
use kafka_observer_operator::kafka::{
    ConnectionSettings, KafkaWatcher, OffsetKind, OffsetProbe, ProbeError, SaslError,
    TlsFailureKind, WatcherOptions,
};
use kafka_observer_operator::promotion::SourceHealth;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};
use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::ClientConfig;

const OPT_OUT: &str = "KOO_SECURE_KAFKA_TEST";
pub(crate) const USER: &str = "koo-observer";
pub(crate) const PASSWORD: &str = "koo-secret-password";
const TOPIC: &str = "secure-test";
const RECORDS: i64 = 5;

// ---------------------------------------------------------------------------------------------
// Certificates.

pub(crate) struct Ca {
    pub(crate) pem: String,
    issuer: Issuer<'static, KeyPair>,
}

pub(crate) struct Leaf {
    pub(crate) cert_pem: String,
    pub(crate) key_pem: String,
}

impl Ca {
    pub(crate) fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Ca {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    pub(crate) fn leaf(&self, cn: &str, sans: &[SanType]) -> Leaf {
        self.leaf_with(cn, sans, |_| {})
    }

    /// A leaf that expired on 2021-01-01 (valid from 2020-01-01).
    pub(crate) fn expired_leaf(&self, cn: &str) -> Leaf {
        self.leaf_with(cn, &[], |p| {
            p.not_before = rcgen::date_time_ymd(2020, 1, 1);
            p.not_after = rcgen::date_time_ymd(2021, 1, 1);
        })
    }

    fn leaf_with(
        &self,
        cn: &str,
        sans: &[SanType],
        adjust: impl FnOnce(&mut CertificateParams),
    ) -> Leaf {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.subject_alt_names = sans.to_vec();
        adjust(&mut params);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The Kafka process.

/// Where the cached Kafka runtime is, or why the test cannot run.
fn kafka_lib() -> Result<PathBuf, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let version = std::env::var("KAFKA_VERSION").ok().or_else(|| {
        let versions = std::fs::read_to_string(root.join("e2e/versions.env")).ok()?;
        versions.lines().find_map(|l| {
            // KAFKA_VERSION="${KAFKA_VERSION:-4.1.2}"
            let rest = l.strip_prefix("KAFKA_VERSION=")?;
            let default = rest.split(":-").nth(1)?;
            Some(default.trim_end_matches(['}', '"']).to_string())
        })
    });
    let Some(version) = version else {
        return Err("no KAFKA_VERSION in e2e/versions.env".into());
    };
    let cache = std::env::var("KOO_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default())
                .join(".cache/kafka-observer-operator")
        });
    let dist = cache.join("kafka").join(&version);
    if !dist.join(".complete").exists() {
        return Err(format!(
            "no cached Kafka {version} at {} (make kafka-jars fetches it)",
            dist.display()
        ));
    }
    let java = Command::new("java")
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !java.is_ok_and(|s| s.success()) {
        return Err("no java on PATH".into());
    }
    Ok(dist.join("lib"))
}

fn free_ports<const N: usize>() -> [u16; N] {
    // All bound at once, so they differ; released just before Kafka binds them.
    let listeners: Vec<TcpListener> = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    std::array::from_fn(|i| listeners[i].local_addr().unwrap().port())
}

pub(crate) struct Kafka {
    child: Option<Child>,
    dir: tempfile::TempDir,
    plaintext: u16,
    pub(crate) sasl_ssl: u16,
    pub(crate) mtls: u16,
}

impl Kafka {
    fn log(&self) -> PathBuf {
        self.dir.path().join("kafka.log")
    }

    pub(crate) fn start(lib: &Path, ca: &Ca, broker: &Leaf) -> Kafka {
        let dir = tempfile::Builder::new()
            .prefix("koo-secure-kafka-")
            .tempdir()
            .unwrap();
        let d = dir.path();
        let [plaintext, controller, sasl_ssl, mtls] = free_ports::<4>();
        // Kafka's PEM keystore: the unencrypted PKCS#8 key, then the certificate.
        std::fs::write(
            d.join("broker.pem"),
            format!("{}{}", broker.key_pem, broker.cert_pem),
        )
        .unwrap();
        std::fs::write(d.join("ca.pem"), &ca.pem).unwrap();
        let config = format!(
            "process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller}
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://127.0.0.1:{plaintext},CONTROLLER://127.0.0.1:{controller},SASL_SSL://127.0.0.1:{sasl_ssl},SSL://127.0.0.1:{mtls}
advertised.listeners=PLAINTEXT://127.0.0.1:{plaintext},SASL_SSL://127.0.0.1:{sasl_ssl},SSL://127.0.0.1:{mtls}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL
inter.broker.listener.name=PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
ssl.keystore.type=PEM
ssl.keystore.location={d}/broker.pem
ssl.truststore.type=PEM
ssl.truststore.location={d}/ca.pem
listener.name.ssl.ssl.client.auth=required
log.dirs={d}/data
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
",
            d = d.display()
        );
        let properties = d.join("server.properties");
        std::fs::write(&properties, config).unwrap();
        let classpath = format!("{}/*", lib.display());
        let log4j =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/testbed/kafka/log4j2.properties");
        let java = |main: &str| {
            let mut c = Command::new("java");
            c.args(["-Xms128m", "-Xmx512m", "-XX:+UseSerialGC"])
                .arg(format!("-Dlog4j2.configurationFile={}", log4j.display()))
                .arg(format!("-Dkafka.logs.dir={}/logs", d.display()))
                .arg("-cp")
                .arg(&classpath)
                .arg(main);
            c
        };
        let format = java("kafka.tools.StorageTool")
            .args(["format", "--cluster-id", "koo-secure-test-0001", "--config"])
            .arg(&properties)
            .arg("--add-scram")
            .arg(format!("SCRAM-SHA-512=[name={USER},password={PASSWORD}]"))
            .output()
            .expect("run kafka-storage format");
        assert!(
            format.status.success(),
            "kafka-storage format failed: {}{}",
            String::from_utf8_lossy(&format.stdout),
            String::from_utf8_lossy(&format.stderr)
        );
        let log = std::fs::File::create(d.join("kafka.log")).unwrap();
        let child = java("kafka.Kafka")
            .arg(&properties)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start Kafka");
        let mut kafka = Kafka {
            child: Some(child),
            dir,
            plaintext,
            sasl_ssl,
            mtls,
        };
        kafka.wait_started();
        kafka
    }

    fn wait_started(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let log = std::fs::read_to_string(self.log()).unwrap_or_default();
            if log.contains("Kafka Server started") {
                return;
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("Kafka exited ({status}) before it started");
            }
            assert!(Instant::now() < deadline, "Kafka did not start within 90 s");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    pub(crate) fn address(&self, port: u16) -> String {
        format!("127.0.0.1:{port}")
    }
}

impl Drop for Kafka {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            if let Ok(file) = std::fs::File::open(self.log()) {
                let lines: Vec<String> =
                    BufReader::new(file).lines().map_while(Result::ok).collect();
                eprintln!("--- the last lines of Kafka's log ---");
                for line in &lines[lines.len().saturating_sub(60)..] {
                    eprintln!("{line}");
                }
            }
        }
        // The TempDir field removes the directory after this.
    }
}

// ---------------------------------------------------------------------------------------------
// Settings as the operator makes them from Secrets in namespace `ns`.

fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
        .collect()
}

/// SASL_SSL: the CA Secret `kafka-ca`, the SCRAM-SHA-512 user Secret `kafka-user`.
fn sasl_ssl_settings(kafka: &Kafka, ca_pem: &str, password: &str) -> ConnectionSettings {
    let secrets = SecretContents::from([
        ("kafka-ca".to_string(), data(&[("ca.crt", ca_pem)])),
        (
            "kafka-user".to_string(),
            data(&[("username", USER), ("password", password)]),
        ),
    ]);
    let tls = TlsSpec {
        ca_secret_ref: SecretKeyRef {
            name: "kafka-ca".into(),
            key: "ca.crt".into(),
        },
        client_cert_secret_ref: None,
    };
    let sasl = SaslSpec {
        mechanism: SaslMechanism::ScramSha512,
        secret_ref: SaslSecretRef {
            name: "kafka-user".into(),
            username_key: "username".into(),
            password_key: "password".into(),
        },
    };
    let security = connection_security("ns", Some(&tls), Some(&sasl), &secrets).unwrap();
    ConnectionSettings::from_bootstrap(&kafka.address(kafka.sasl_ssl)).with_security(security)
}

/// SSL with a client certificate (Secret `kafka-client`), or without one.
fn mtls_settings(
    kafka: &Kafka,
    port: u16,
    ca_pem: &str,
    client: Option<&Leaf>,
) -> ConnectionSettings {
    let mut secrets = SecretContents::from([("kafka-ca".to_string(), data(&[("ca.crt", ca_pem)]))]);
    if let Some(client) = client {
        secrets.insert(
            "kafka-client".into(),
            data(&[("tls.crt", &client.cert_pem), ("tls.key", &client.key_pem)]),
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
    let security = connection_security("ns", Some(&tls), None, &secrets).unwrap();
    ConnectionSettings::from_bootstrap(&kafka.address(port)).with_security(security)
}

fn client_config(settings: &ConnectionSettings) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", settings.bootstrap_servers.join(","));
    for (k, v) in &settings.properties {
        config.set(k, v);
    }
    config
}

fn probe(settings: &ConnectionSettings) -> OffsetProbe {
    OffsetProbe::new("secure-test", Duration::from_secs(10))
        .with_security(settings.probe_security().expect("probe settings").clone())
}

async fn log_end_offset(settings: &ConnectionSettings, address: &str) -> Result<i64, ProbeError> {
    let answer = probe(settings)
        .query(1, address, OffsetKind::LocalLogEnd, &[(TOPIC, vec![0])])
        .await?;
    Ok(answer[0].result.expect("an offset for partition 0"))
}

/// A full scan through `settings` sees the topic with its log end offset and high watermark.
async fn scan_sees_the_records(settings: &ConnectionSettings, listener: &str) {
    let mut watcher = KafkaWatcher::new(settings, WatcherOptions::default()).unwrap();
    let snapshot = watcher.scan().await;
    assert_eq!(
        snapshot.source,
        SourceHealth::Healthy,
        "{listener}: {snapshot:?}"
    );
    assert!(
        snapshot.brokers.get(&1).is_some_and(|b| b.reachable),
        "{listener}: the probe did not reach broker 1: {:?}",
        snapshot.brokers
    );
    let partition = snapshot
        .partitions
        .iter()
        .find(|p| p.topic == TOPIC)
        .unwrap_or_else(|| panic!("{listener}: no {TOPIC} in {snapshot:?}"));
    assert_eq!(partition.leader, Some(1), "{listener}");
    assert_eq!(
        partition.high_watermark,
        Some(RECORDS),
        "{listener}: {partition:?}"
    );
    assert_eq!(
        partition.log_end_offsets.get(&1).copied(),
        Some(RECORDS),
        "{listener}: {partition:?}"
    );
}

// ---------------------------------------------------------------------------------------------

/// Watcher options that give up on a refused connection in 3 s.
fn quick() -> WatcherOptions {
    WatcherOptions {
        request_timeout: Duration::from_secs(3),
        ..WatcherOptions::default()
    }
}

/// The scan is unhealthy, its reason saying `what` (and librdkafka's own error after it).
fn assert_unhealthy(source: &SourceHealth, what: &str) {
    match source {
        SourceHealth::Unhealthy { reason } => assert!(
            reason.contains(what) && reason.contains("librdkafka"),
            "the reason must say '{what}', then librdkafka's error: {reason}"
        ),
        SourceHealth::Healthy => panic!("the scan must fail: {what}"),
    }
}

/// The cached Kafka's lib directory, or `None` after a skip line naming `test` (opted out with
/// `KOO_SECURE_KAFKA_TEST=0`, or no cached distribution or `java`).
pub(crate) fn kafka_lib_or_skip(test: &str) -> Option<PathBuf> {
    if std::env::var(OPT_OUT).as_deref() == Ok("0") {
        eprintln!("SKIP {test}: {OPT_OUT}=0");
        return None;
    }
    kafka_lib()
        .map_err(|why| eprintln!("SKIP {test}: {why}"))
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_and_probe_over_sasl_ssl_scram_and_mutual_tls() {
    let Some(lib) = kafka_lib_or_skip("secure_kafka") else {
        return;
    };
    let started = Instant::now();
    let ca = Ca::new("koo-secure-test-ca");
    let broker = ca.leaf(
        "localhost",
        &[
            SanType::IpAddress("127.0.0.1".parse().unwrap()),
            SanType::DnsName("localhost".try_into().unwrap()),
        ],
    );
    let client = ca.leaf("koo-observer", &[]);
    let kafka = Kafka::start(&lib, &ca, &broker);
    eprintln!("Kafka up in {:?}", started.elapsed());

    // Topic and records through librdkafka on the SASL_SSL listener.
    let sasl = sasl_ssl_settings(&kafka, &ca.pem, PASSWORD);
    let admin = sasl.admin_client().unwrap();
    let created = admin
        .create_topics(
            &[NewTopic::new(TOPIC, 1, TopicReplication::Fixed(1))],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        )
        .await
        .expect("create_topics over SASL_SSL");
    assert!(created[0].is_ok(), "{created:?}");
    let producer: BaseProducer = client_config(&sasl)
        .set("acks", "all")
        .create()
        .expect("producer");
    for i in 0..RECORDS {
        let payload = format!("record {i}");
        producer
            .send(BaseRecord::<(), _>::to(TOPIC).payload(&payload))
            .expect("enqueue");
    }
    producer
        .flush(Duration::from_secs(30))
        .expect("records written over SASL_SSL");

    // Over SASL_SSL (SCRAM-SHA-512) and over mutual TLS: the whole scan, and the probe alone.
    scan_sees_the_records(&sasl, "SASL_SSL").await;
    let sasl_address = kafka.address(kafka.sasl_ssl);
    assert_eq!(log_end_offset(&sasl, &sasl_address).await.unwrap(), RECORDS);
    let mtls = mtls_settings(&kafka, kafka.mtls, &ca.pem, Some(&client));
    scan_sees_the_records(&mtls, "SSL with client certificate").await;
    let mtls_address = kafka.address(kafka.mtls);
    assert_eq!(log_end_offset(&mtls, &mtls_address).await.unwrap(), RECORDS);

    // A wrong password: the SASL authentication error, naming where the username and the
    // password come from, never the username itself (a credential).
    let wrong = sasl_ssl_settings(&kafka, &ca.pem, "not-the-password");
    let result = log_end_offset(&wrong, &sasl_address).await;
    eprintln!("wrong password: {result:?}");
    match &result {
        Err(ProbeError::Sasl {
            source: SaslError::AuthenticationFailed { user, .. },
            ..
        }) => assert_eq!(user, "Secret ns/kafka-user key username"),
        other => panic!("expected the SASL authentication error, got {other:?}"),
    }
    let msg = result.unwrap_err().to_string();
    assert!(msg.contains("Secret ns/kafka-user key password"), "{msg}");
    assert!(!msg.contains(USER), "{msg}");

    // A CA that did not sign the broker's certificate: the TLS error, naming the CA's Secret.
    let stranger = Ca::new("a-ca-kafka-does-not-use");
    let untrusted = sasl_ssl_settings(&kafka, &stranger.pem, PASSWORD);
    let result = log_end_offset(&untrusted, &sasl_address).await;
    eprintln!("untrusted CA: {result:?}");
    match &result {
        Err(ProbeError::Tls { source, .. }) => {
            assert_eq!(source.kind, TlsFailureKind::UntrustedCertificate)
        }
        other => panic!("expected the TLS error, got {other:?}"),
    }
    let msg = result.unwrap_err().to_string();
    assert!(
        msg.contains("not trusted by the CA in Secret ns/kafka-ca key ca.crt"),
        "{msg}"
    );
    // The same CA through librdkafka: the scan is unhealthy, never a snapshot to act on.
    let mut watcher = KafkaWatcher::new(&untrusted, quick()).unwrap();
    let snapshot = watcher.scan().await;
    eprintln!("untrusted CA, librdkafka: {:?}", snapshot.source);
    // librdkafka's error names no Secret: the watcher's probe diagnosis puts the TLS error
    // (naming the CA's Secret and key) first.
    assert_unhealthy(
        &snapshot.source,
        "not trusted by the CA in Secret ns/kafka-ca key ca.crt",
    );
    // A wrong password through the whole scan: the SASL error naming the user's Secret.
    let mut watcher = KafkaWatcher::new(&wrong, quick()).unwrap();
    let snapshot = watcher.scan().await;
    eprintln!("wrong password, scan: {:?}", snapshot.source);
    assert_unhealthy(&snapshot.source, "Secret ns/kafka-user key password");

    // The mTLS listener without a client certificate, and TLS to the plaintext listener.
    let anonymous = mtls_settings(&kafka, kafka.mtls, &ca.pem, None);
    let result = log_end_offset(&anonymous, &mtls_address).await;
    eprintln!("no client certificate: {result:?}");
    assert!(
        matches!(&result, Err(ProbeError::Tls { source, .. }) if source.kind == TlsFailureKind::ClientCertificateRequired),
        "{result:?}"
    );
    let plaintext_address = kafka.address(kafka.plaintext);
    let to_plaintext = mtls_settings(&kafka, kafka.plaintext, &ca.pem, Some(&client));
    let result = log_end_offset(&to_plaintext, &plaintext_address).await;
    eprintln!("TLS to the plaintext listener: {result:?}");
    assert!(
        matches!(&result, Err(ProbeError::Tls { source, .. }) if source.kind == TlsFailureKind::NotTls),
        "{result:?}"
    );
    // A client certificate that expired: the broker refuses it; the scan's reason names the
    // client certificate's Secret.
    let expired = ca.expired_leaf("koo-observer-expired");
    let stale = mtls_settings(&kafka, kafka.mtls, &ca.pem, Some(&expired));
    let mut watcher = KafkaWatcher::new(&stale, quick()).unwrap();
    let snapshot = watcher.scan().await;
    eprintln!("expired client certificate, scan: {:?}", snapshot.source);
    assert_unhealthy(
        &snapshot.source,
        "client certificate in Secret ns/kafka-client",
    );
    eprintln!("secure_kafka: done in {:?}", started.elapsed());
}
