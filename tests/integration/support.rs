//! Shared helpers of the operator integration tests (`tests/integration/`): reach the bed,
//! run the bed's operator, create throw-away namespaces, wait for conditions, read agents.
//!
//! Every test starts with [`bed`]: `KOO_TESTBED=off` prints a skip line and the test passes;
//! unset fails with a message saying how to bring the bed up.
//!
//! The bed's Kafka is the example cluster of examples/kafka/ in namespace `kafka` on the bed's
//! real node: its agents are reached on the pods' IPs (looked up when needed, a replaced pod has
//! a new one), and every ObserverSet a test creates names the bed's bootstrap address (the
//! `kafka-bootstrap` Service's ClusterIP:9092): the operator runs as a local process on the
//! machine, which does not resolve cluster DNS names such as `kafka-bootstrap.kafka.svc`.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use kube::api::{DeleteParams, PostParams};

use kube::{Api, Client};
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use kafka_observer_operator::automation;
use kafka_observer_operator::crd::ObserverSet;
use kafka_observer_operator::k8s::events::Events;
use kafka_observer_operator::metrics::Metrics;
use koo_testbed::{KafkaNode, Role, TestBed};

/// The example ObserverSet of the example cluster, which the bed runs.
pub const EXAMPLE_OBSERVERSET: &str = "examples/kafka/observerset/observerset.yaml";

/// The chart's ServiceAccount, whose permissions the operator runs with (e2e/testbed/operator.sh,
/// `KOO_OPERATOR_CREDENTIALS=chart`).
const CHART_SERVICE_ACCOUNT: (&str, &str) = ("kafka-observer-system", "kafka-observer-operator");

/// A running bed: its `.testbed/` directory, an admin client and the Kafka bootstrap address.
pub struct Bed {
    pub dir: PathBuf,
    pub client: Client,
    pub testbed: TestBed,
    /// `.testbed/kafka/bootstrap`: the `kafka-bootstrap` Service's ClusterIP:9092.
    pub bootstrap: String,
}

/// The bed's operator stopped by [`Bed::pause_operator`]; dropping it starts the operator again
/// when it was running before.
#[must_use = "dropping it starts the operator again at once"]
pub struct OperatorPaused {
    dir: PathBuf,
    running: bool,
}

impl Drop for OperatorPaused {
    fn drop(&mut self) {
        if !self.running {
            return;
        }
        let out = Command::new("bash")
            .arg(repo_root().join("e2e/testbed/operator.sh"))
            .arg("up")
            .env("KOO_TESTBED", &self.dir)
            .output();
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => eprintln!(
                "operator.sh up after the pause failed:\n{}",
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => eprintln!("operator.sh up after the pause: {e}"),
        }
    }
}

/// This build's promotion automation in-process, for namespace `ns` only, reporting to
/// `metrics`, with the operator's permissions ([`Bed::operator_client`]); for tests that pause
/// the bed's operator and must be the only automation.
pub async fn spawn_automation(
    bed: &Bed,
    ns: &str,
    metrics: &Metrics,
) -> tokio::task::JoinHandle<()> {
    let client = bed.operator_client().await;
    let (metrics, ns) = (metrics.clone(), ns.to_owned());
    tokio::spawn(async move {
        let events = Events::new(client.clone(), None, metrics.clone());
        automation::run_namespaced(client, metrics, events, &ns, Default::default()).await
    })
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The bed named by `KOO_TESTBED` (through `koo_testbed::TestBed::require`, which prints the
/// skip line for `KOO_TESTBED=off` and panics with instructions when it is unset).
pub async fn bed() -> Option<Bed> {
    let testbed = koo_testbed::TestBed::require()?;
    let client = testbed
        .client()
        .await
        .expect("a client for the bed's apiserver");
    Some(Bed {
        dir: testbed.dir().to_path_buf(),
        client,
        bootstrap: testbed.kafka_bootstrap(),
        testbed,
    })
}

impl Bed {
    /// `e2e/testbed/operator.sh <cmd>`; panics with its output when it fails.
    pub fn operator(&self, cmd: &str) {
        let out = Command::new("bash")
            .arg(repo_root().join("e2e/testbed/operator.sh"))
            .arg(cmd)
            .env("KOO_TESTBED", &self.dir)
            .output()
            .expect("run e2e/testbed/operator.sh");
        assert!(
            out.status.success(),
            "operator.sh {cmd} failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Stops the bed's operator (`operator.sh down`) when it runs, for a test that runs its own
    /// reconciler or automation and must be the only writer; the guard starts it again.
    pub fn pause_operator(&self) -> OperatorPaused {
        let running = Command::new("bash")
            .arg(repo_root().join("e2e/testbed/operator.sh"))
            .arg("status")
            .env("KOO_TESTBED", &self.dir)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).contains("operator: running"))
            .unwrap_or(false);
        if running {
            self.operator("down");
        }
        OperatorPaused {
            dir: self.dir.clone(),
            running,
        }
    }

    /// Installs the CRD of this build (`ObserverSet::crd()`, what `kafka-observer-operator crd`
    /// of the same source prints) by server-side apply under operator.sh's field manager, and
    /// waits until it is Established. Unlike `operator("crd")` it does not depend on which build
    /// last wrote the shared release binary.
    pub async fn install_crd_of_this_build(&self) {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        use kube::CustomResourceExt;
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let crd = ObserverSet::crd();
        let name = crd.metadata.name.clone().expect("CRD name");
        // Established stays true across schema updates, so readiness is judged by a probe that
        // only this build's schema refuses (the confirmations bound). The bed is shared: another
        // session may install its own build's CRD meanwhile, so the apply is repeated until the
        // probe passes.
        let probe = serde_json::json!({
            "apiVersion": "kafkaobserver.io/v1alpha1",
            "kind": "ObserverSet",
            "metadata": {"name": "schema-probe"},
            "spec": {
                "kafka": {"bootstrapServers": "probe:9092"},
                "nodes": {"controllers": {"selector": {"matchLabels": {"probe": "x"}}, "nodeId": {"ordinalOffset": 0}}},
                "observers": [],
                "promotion": {"confirmations": 101}
            }
        });
        let sets: Api<kube::api::DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            "default",
            &kube::api::ApiResource::erase::<ObserverSet>(&()),
        );
        let probe: kube::api::DynamicObject = serde_json::from_value(probe).unwrap();
        let pp = kube::api::PatchParams::apply("koo-testbed").force();
        wait_for(
            Duration::from_secs(60),
            "the apiserver to serve this build's CRD",
            || {
                let (api, sets, probe, crd, name, pp) = (
                    api.clone(),
                    sets.clone(),
                    probe.clone(),
                    crd.clone(),
                    name.clone(),
                    pp.clone(),
                );
                async move {
                    api.patch(&name, &pp, &kube::api::Patch::Apply(&crd))
                        .await
                        .expect("install the ObserverSet CRD");
                    let dry = PostParams {
                        dry_run: true,
                        ..Default::default()
                    };
                    for _ in 0..10 {
                        if let Err(kube::Error::Api(e)) = sets.create(&dry, &probe).await {
                            if e.message
                                .contains("promotion.confirmations must be between 1 and 100")
                            {
                                return Some(());
                            }
                        }
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    None
                }
            },
        )
        .await;
    }

    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.dir.join("logs/operator.log")).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// A fresh namespace `koo-it-<name>-<suffix>`; delete it with [`Bed::drop_namespace`].
    pub async fn namespace(&self, name: &str) -> String {
        let ns = format!("koo-it-{name}-{}", std::process::id());
        let api: Api<Namespace> = Api::all(self.client.clone());
        let body: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap();
        match api.create(&PostParams::default(), &body).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("create namespace {ns}: {e}"),
        }
        ns
    }

    pub async fn drop_namespace(&self, ns: &str) {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let _ = api.delete(ns, &DeleteParams::default()).await;
    }

    /// A client for the operator's own code run in-process (a reconcile, the automation): with
    /// `KOO_OPERATOR_CREDENTIALS=chart` (e2e/integration.sh) it holds a token of the chart's
    /// ServiceAccount, so a call the chart does not grant fails the test as it would fail the
    /// installed operator; otherwise it is the admin client (a bed without the chart). The
    /// test's own setup and checks keep the admin client (`Bed::client`).
    pub async fn operator_client(&self) -> Client {
        if std::env::var("KOO_OPERATOR_CREDENTIALS").as_deref() != Ok("chart") {
            return self.client.clone();
        }
        let (ns, name) = CHART_SERVICE_ACCOUNT;
        let accounts: Api<ServiceAccount> = Api::namespaced(self.client.clone(), ns);
        let request = TokenRequest {
            spec: TokenRequestSpec {
                expiration_seconds: Some(3600),
                ..TokenRequestSpec::default()
            },
            ..TokenRequest::default()
        };
        let token = accounts
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .unwrap_or_else(|e| {
                panic!("a token of ServiceAccount {ns}/{name} (e2e/testbed/operator-chart.sh rbac installs it): {e}")
            })
            .status
            .expect("a TokenRequest's status")
            .token;
        let mut config = bed_config(self).await;
        config.auth_info = serde_json::from_value(serde_json::json!({ "token": token }))
            .expect("an AuthInfo with a token");
        let client = Client::try_from(config).expect("a client with the chart's token");
        // Who the apiserver takes it for: the ServiceAccount, not the admin.
        let review = Api::<SelfSubjectReview>::all(client.clone())
            .create(&PostParams::default(), &SelfSubjectReview::default())
            .await
            .expect("a SelfSubjectReview");
        let user = review
            .status
            .and_then(|s| s.user_info)
            .and_then(|u| u.username)
            .unwrap_or_default();
        assert_eq!(user, format!("system:serviceaccount:{ns}:{name}"));
        client
    }

    pub fn observer_sets(&self, ns: &str) -> Api<ObserverSet> {
        Api::namespaced(self.client.clone(), ns)
    }

    pub fn config_maps(&self, ns: &str) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), ns)
    }

    /// The bed's controller pods: (pod name, agent address `podIP:9180`) as they are now.
    pub async fn controller_pods(&self) -> Vec<(String, String)> {
        self.pods_of(Role::Controller).await
    }

    /// The bed's broker pods: (pod name, agent address `podIP:9180`) as they are now.
    pub async fn broker_pods(&self) -> Vec<(String, String)> {
        self.pods_of(Role::Broker).await
    }

    async fn pods_of(&self, role: Role) -> Vec<(String, String)> {
        let mut pods = Vec::new();
        for node in KafkaNode::of_role(role) {
            let addr = node
                .agent_address(&self.client)
                .await
                .unwrap_or_else(|e| panic!("agent address of {}: {e}", node.pod));
            pods.push((node.pod, addr));
        }
        pods
    }

    /// An ObserverSet for a namespace without Kafka pods: the selectors match nothing, so a
    /// rollout (Agent acknowledgement) has no pod to ask and each step completes at once. Its bootstrap
    /// is the bed's, so an automation scanning it reaches the bed's Kafka.
    pub fn podless_observer_set(&self, name: &str, observers: &[i32], promoted: &[i32]) -> Value {
        serde_json::json!({
            "apiVersion": "kafkaobserver.io/v1alpha1",
            "kind": "ObserverSet",
            "metadata": {"name": name},
            "spec": {
                "kafka": {"bootstrapServers": self.bootstrap},
                "nodes": {
                    "controllers": {"selector": {"matchLabels": {"koo-it/role": "controller", "koo-it/set": name}}, "nodeId": {"label": "kafkaobserver.io/node-id"}},
                    "brokers": {"selector": {"matchLabels": {"koo-it/role": "broker", "koo-it/set": name}}, "nodeId": {"ordinalOffset": 1}}
                },
                "observers": observers,
                "promotion": {"policy": "Manual", "promoted": promoted},
                "rollout": {"acknowledgement": "Agent", "timeout": "30s"}
            }
        })
    }

    /// The example ObserverSet kafka/kafka ([`EXAMPLE_OBSERVERSET`]) for the bed: the bed's
    /// bootstrap address instead of the cluster DNS name, and a Manual policy so the promotion
    /// engine cannot act during the test; `promoted` as given.
    pub fn bed_observer_set(&self, promoted: &[i32]) -> Value {
        let mut v = self.example_observer_set();
        v["spec"]["promotion"]["policy"] = serde_json::json!("Manual");
        v["spec"]["promotion"]["promoted"] = serde_json::json!(promoted);
        v
    }

    /// The example ObserverSet as the demo and the drill expect it, for namespace `kafka` of the
    /// bed: only its bootstrap replaced by the bed's.
    pub fn example_observer_set(&self) -> Value {
        let text = std::fs::read_to_string(repo_root().join(EXAMPLE_OBSERVERSET))
            .unwrap_or_else(|e| panic!("read {EXAMPLE_OBSERVERSET}: {e}"));
        let mut v: Value = serde_norway::from_str(&text)
            .unwrap_or_else(|e| panic!("{EXAMPLE_OBSERVERSET} is not YAML: {e}"));
        assert_eq!(
            v["spec"]["kafka"]["bootstrapServers"], "kafka-bootstrap.kafka.svc:9092",
            "{EXAMPLE_OBSERVERSET}: the bootstrap this helper replaces"
        );
        v["metadata"]["namespace"] = serde_json::json!(koo_testbed::KAFKA_NAMESPACE);
        v["spec"]["kafka"]["bootstrapServers"] = serde_json::json!(self.bootstrap);
        v
    }
}

pub async fn create_observer_set(api: &Api<ObserverSet>, body: Value) -> ObserverSet {
    let obj: ObserverSet = serde_json::from_value(body).expect("ObserverSet json");
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create ObserverSet")
}

/// Polls `f` every 100 ms until it returns `Some`, or panics after `timeout` with `what`.
pub async fn wait_for<T, F, Fut>(timeout: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The node ids a ConfigMap's `observer.ids` lists (comments and blank lines dropped).
/// Parsed here on purpose, not with `observer_ids::parse_ids`: an independent reading of the
/// contract, so a bug in the operator's own parser cannot hide itself in these tests.
pub fn listed_ids(cm: &ConfigMap) -> Option<Vec<i32>> {
    let text = cm.data.as_ref()?.get("observer.ids")?;
    let mut ids: Vec<i32> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .flat_map(|l| l.split([',', ' ', '\t']))
        .filter_map(|t| t.trim().parse().ok())
        .collect();
    ids.sort_unstable();
    Some(ids)
}

pub fn revision_of(cm: &ConfigMap) -> Option<u64> {
    cm.metadata
        .annotations
        .as_ref()?
        .get("kafkaobserver.io/revision")?
        .parse()
        .ok()
}

pub async fn get_cm(api: &Api<ConfigMap>, name: &str) -> Option<ConfigMap> {
    api.get_opt(name).await.expect("get ConfigMap")
}

/// The ObserverSet's status as JSON (`Value::Null` when absent).
pub async fn status_of(api: &Api<ObserverSet>, name: &str) -> Value {
    let raw: Value = serde_json::to_value(api.get(name).await.expect("get ObserverSet")).unwrap();
    raw.get("status").cloned().unwrap_or(Value::Null)
}

pub fn phase(status: &Value) -> &str {
    status.get("phase").and_then(Value::as_str).unwrap_or("")
}

/// `GET http://<addr>/observer-ids` of an observer agent, as JSON; `None` when unreachable.
pub async fn agent_snapshot(addr: &str) -> Option<Value> {
    let fut = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
        let req =
            format!("GET /observer-ids HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.ok()?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.ok()?;
        let text = String::from_utf8_lossy(&buf);
        let (head, body) = text.split_once("\r\n\r\n")?;
        if !head.starts_with("HTTP/1.1 200") {
            return None;
        }
        serde_json::from_str(body.trim()).ok()
    };
    tokio::time::timeout(Duration::from_secs(2), fut)
        .await
        .ok()
        .flatten()
}

/// Server-side apply of an ObserverSet as the tests' field manager.
pub async fn apply_observer_set(api: &Api<ObserverSet>, body: &Value) {
    let name = body["metadata"]["name"].as_str().expect("metadata.name");
    let pp = kube::api::PatchParams::apply("koo-integration-tests").force();
    api.patch(name, &pp, &kube::api::Patch::Apply(body))
        .await
        .expect("apply ObserverSet");
}

/// Creates `topic` afresh on the bed's Kafka (an earlier run's copy deleted first; its deletion
/// may still be in progress, so creation is retried for up to 60 s) with one partition per
/// entry of `assignment` and the given topic configs. Returns the admin client, for the test's
/// own clean-up.
pub async fn recreate_topic(
    bootstrap: &str,
    topic: &str,
    assignment: &[&[i32]],
    configs: &[(&str, &str)],
) -> rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let admin: AdminClient<_> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client");
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let _ = admin.delete_topics(&[topic], &opts).await;
    for _ in 0..60 {
        let mut new = NewTopic::new(
            topic,
            assignment.len() as i32,
            TopicReplication::Variable(assignment),
        );
        for (k, v) in configs {
            new = new.set(k, v);
        }
        if admin.create_topics(&[new], &opts).await.unwrap()[0].is_ok() {
            return admin;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("cannot create topic {topic} on {bootstrap}");
}

/// The bed apiserver's kubeconfig as a client config.
pub async fn bed_config(bed: &Bed) -> kube::Config {
    let kubeconfig = kube::config::Kubeconfig::read_from(bed.testbed.kubeconfig())
        .expect("read the bed's kubeconfig");
    kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("a config for the bed's apiserver")
}

/// A TCP relay to `upstream` on 127.0.0.1 (in the apiserver certificate's names). Once `cut`
/// is set, nothing more passes in either direction and every connection stays open, unanswered:
/// what a partition looks like to the client (timeouts, not refusals).
pub async fn relay(upstream: SocketAddr) -> (SocketAddr, Arc<AtomicBool>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind relay");
    let addr = listener.local_addr().expect("relay address");
    let cut = Arc::new(AtomicBool::new(false));
    let flag = cut.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let cut = flag.clone();
            tokio::spawn(async move {
                if cut.load(Ordering::SeqCst) {
                    // Accepted by the kernel's backlog, then silence.
                    let _held = client;
                    return std::future::pending::<()>().await;
                }
                let Ok(server) = TcpStream::connect(upstream).await else {
                    return;
                };
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                tokio::join!(pump(cr, sw, cut.clone()), pump(sr, cw, cut));
            });
        }
    });
    (addr, cut)
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    cut: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if cut.load(Ordering::SeqCst) {
            // Keep both halves open and forward nothing, ever.
            let _held = (from, to);
            return std::future::pending::<()>().await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
