//! Two ObserverSets selecting the same pods, on the bed: the newer one is in phase Conflict
//! with a condition naming the older, writes no ConfigMap and gets no automation plan, while the
//! older keeps working; once the older is deleted, the newer proceeds.
//!
//! The test owns its state: namespace `refuse-test` with three pods that never schedule (a
//! nodeSelector no node has; selection is by label only), and an operator process of this build
//! (`CARGO_BIN_EXE_kafka-observer-operator`) watching only that namespace, without leader
//! election, on its own metrics port. The bed's shared operator, which watches every namespace,
//! is stopped for the test and started again afterwards (`Bed::pause_operator`).

use crate::support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::FutureExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::{json, Value};
use std::panic::AssertUnwindSafe;

use support::{bed, get_cm, listed_ids, phase, status_of, wait_for, Bed};

const NS: &str = "refuse-test";

/// The operator binary: `KOO_OPERATOR_BIN` if set (as for e2e/testbed/operator.sh), else the
/// one cargo built with this test. Either must print this build's CRD: a target directory
/// shared between checkouts may hold another checkout's binary, and the test says so.
fn operator_binary() -> std::path::PathBuf {
    use kube::CustomResourceExt;
    let bin = std::env::var_os("KOO_OPERATOR_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_kafka-observer-operator").into());
    let out = Command::new(&bin)
        .arg("crd")
        .output()
        .unwrap_or_else(|e| panic!("run {} crd: {e}", bin.display()));
    let ours = serde_norway::to_string(&kafka_observer_operator::crd::ObserverSet::crd()).unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout) == ours,
        "{} is not a build of this source (its CRD differs); rebuild it, or point KOO_OPERATOR_BIN at one",
        bin.display()
    );
    bin
}

/// The bed's shared operator (e2e/testbed/operator.sh) watches every namespace, so it
/// reconciles this test's ObserverSets too. A build of this source agrees with ours; another
/// build (one without the conflict check) writes the newer set's ConfigMaps and makes the test
/// meaningless, so the test stops with what to do instead.
fn refuse_a_foreign_shared_operator(bed: &Bed) {
    use kube::CustomResourceExt;
    let Some(pid) = std::fs::read_to_string(bed.dir.join("pids/operator.pid"))
        .ok()
        .and_then(|p| p.trim().parse::<u32>().ok())
    else {
        return;
    };
    // Only a live operator process (the pid file may be stale and the pid reused).
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let cmdline = String::from_utf8_lossy(&cmdline);
    if !(cmdline.contains("kafka-observer-operator") && cmdline.contains("run")) {
        return;
    }
    let exe = std::path::PathBuf::from(format!("/proc/{pid}/exe"));
    let Ok(out) = Command::new(&exe).arg("crd").output() else {
        return; // not running
    };
    let ours = serde_norway::to_string(&kafka_observer_operator::crd::ObserverSet::crd()).unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout) == ours,
        "the bed's shared operator (pid {pid}) runs another build and watches every namespace, \
         including {NS}: it would write for the newer ObserverSet. Run this test while it is down \
         (e2e/testbed/operator.sh status), or once it runs a build with the conflict check"
    );
}

/// The operator process of this build; killed when dropped (also when the test panics).
struct Operator {
    child: Child,
    log: std::path::PathBuf,
}

impl Operator {
    fn start(bed: &Bed) -> Operator {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let log =
            std::env::temp_dir().join(format!("koo-refuse-conflict-{}.log", std::process::id()));
        let file = std::fs::File::create(&log).expect("operator log file");
        let bin = operator_binary();
        let child = Command::new(&bin)
            .args([
                "run",
                "--namespace",
                NS,
                "--leader-election",
                "off",
                "--metrics-listen",
                &format!("127.0.0.1:{port}"),
                "--resync",
                "30s",
            ])
            .env("KUBECONFIG", bed.dir.join("kubeconfig"))
            .env("RUST_LOG", "info")
            .env("POD_NAME", "refuse-conflict-test")
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("start the operator");
        println!("operator pid {} (log {})", child.id(), log.display());
        Operator { child, log }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn test_pod(name: &str, labels: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {
            // No node has this label: the pod stays Pending, selected by label only.
            "nodeSelector": {"koo-it/unschedulable": "true"},
            "containers": [{"name": "none", "image": "koo-it/none:0"}]
        }
    }))
    .unwrap()
}

/// An ObserverSet of `refuse-test`: no pod runs, so a rollout (Agent acknowledgement) asks and
/// waits for nobody, and a dry-run policy watching no topic, so the
/// automation, when it runs for the set, writes an empty plan and nothing else.
fn observer_set(bed: &Bed, name: &str, controllers: Value, brokers: Value) -> Value {
    json!({
        "apiVersion": "kafkaobserver.io/v1alpha1",
        "kind": "ObserverSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "kafka": {"bootstrapServers": bed.bootstrap},
            "nodes": {
                "controllers": {"selector": {"matchLabels": controllers}, "nodeId": {"label": "kafkaobserver.io/node-id"}},
                "brokers": {"selector": {"matchLabels": brokers}, "nodeId": {"ordinalOffset": 1}}
            },
            "observers": [1],
            "promotion": {
                "policy": "UnderMinIsr", "dryRun": true, "scanInterval": "500ms",
                "topics": {"include": ["^refuse-no-such-topic$"], "exclude": []}
            },
            "rollout": {"acknowledgement": "Agent", "timeout": "30s"}
        }
    })
}

async fn ensure_namespace(bed: &Bed) {
    let api: Api<Namespace> = Api::all(bed.client.clone());
    // A namespace left terminating by an earlier run must be gone first.
    wait_for(
        Duration::from_secs(120),
        "namespace refuse-test to be gone or active",
        || {
            let api = api.clone();
            async move {
                match api.get_opt(NS).await.ok()? {
                    Some(ns) if ns.metadata.deletion_timestamp.is_some() => None,
                    _ => Some(()),
                }
            }
        },
    )
    .await;
    let body: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    match api.create(&PostParams::default(), &body).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("create namespace {NS}: {e}"),
    }
}

async fn create_pods(bed: &Bed) {
    let pods: Api<Pod> = Api::namespaced(bed.client.clone(), NS);
    let list = [
        test_pod(
            "refuse-controller-0",
            json!({"refuse/role": "controller", "refuse/cluster": "one", "kafkaobserver.io/node-id": "0"}),
        ),
        test_pod(
            "refuse-broker-0",
            json!({"refuse/role": "broker", "refuse/cluster": "one"}),
        ),
        test_pod(
            "refuse-broker-1",
            json!({"refuse/role": "broker", "refuse/cluster": "one"}),
        ),
    ];
    for pod in list {
        match pods.create(&PostParams::default(), &pod).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("create pod: {e}"),
        }
    }
}

fn ready_condition(status: &Value) -> Value {
    status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready").cloned())
        .unwrap_or(Value::Null)
}

async fn wait_phase(bed: &Bed, name: &str, want: &str, op: &Operator) -> Value {
    let api = bed.observer_sets(NS);
    let start = Instant::now();
    loop {
        let status = status_of(&api, name).await;
        if phase(&status) == want {
            return status;
        }
        assert!(
            start.elapsed() < Duration::from_secs(45),
            "{name} never reached phase {want}; status {status:#}\noperator log:\n{}",
            op.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn delete_and_wait_gone(bed: &Bed, name: &str) {
    let api = bed.observer_sets(NS);
    let _ = api.delete(name, &DeleteParams::default()).await;
    wait_for(
        Duration::from_secs(60),
        &format!("ObserverSet {name} to be gone (finalizer)"),
        || {
            let api = api.clone();
            async move { api.get_opt(name).await.ok()?.is_none().then_some(()) }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn newer_observer_set_selecting_the_same_pods_is_in_conflict_until_the_older_is_deleted() {
    let Some(bed) = bed().await else {
        return;
    };
    refuse_a_foreign_shared_operator(&bed);
    // This test's operator is the only writer for its sets: the shared one is paused meanwhile.
    let _paused = bed.pause_operator();
    bed.install_crd_of_this_build().await;
    ensure_namespace(&bed).await;
    create_pods(&bed).await;
    let op = Operator::start(&bed);
    // Whatever happens, the sets go: an ObserverSet in phase Conflict left behind would break
    // every operator of an older build on the shared bed (its Phase has no Conflict variant,
    // so it cannot even list ObserverSets).
    let outcome = AssertUnwindSafe(scenario(&bed, &op)).catch_unwind().await;
    clean_up(&bed, op).await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// Deletes both sets (our operator removes the finalizers; stripped by hand if it cannot),
/// stops the operator and deletes the namespace with its pods and retained ConfigMaps.
async fn clean_up(bed: &Bed, op: Operator) {
    let api = bed.observer_sets(NS);
    for name in ["beta", "alpha"] {
        let _ = api.delete(name, &DeleteParams::default()).await;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let left = api
            .list(&Default::default())
            .await
            .map(|l| l.items.len())
            .unwrap_or(0);
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for name in ["beta", "alpha"] {
        let strip = json!({"metadata": {"finalizers": null}});
        let _ = api
            .patch(name, &PatchParams::default(), &Patch::Merge(&strip))
            .await;
    }
    drop(op);
    let namespaces: Api<Namespace> = Api::all(bed.client.clone());
    let _ = namespaces.delete(NS, &DeleteParams::default()).await;
}

async fn scenario(bed: &Bed, op: &Operator) {
    let sets = bed.observer_sets(NS);
    let cms = bed.config_maps(NS);
    // Leftovers of an interrupted run: deleted by our operator (it removes the finalizers),
    // with their retained ConfigMaps.
    for name in ["alpha", "beta"] {
        delete_and_wait_gone(bed, name).await;
        for role in ["controller", "broker"] {
            let _ = cms
                .delete(
                    &format!("{name}-observers-{role}"),
                    &DeleteParams::default(),
                )
                .await;
        }
    }

    // The older set: every pod by role.
    let alpha = observer_set(
        bed,
        "alpha",
        json!({"refuse/role": "controller"}),
        json!({"refuse/role": "broker"}),
    );
    support::create_observer_set(&sets, alpha).await;
    wait_phase(bed, "alpha", "Ready", op).await;
    wait_for(Duration::from_secs(30), "alpha's automation plan", || {
        let sets = sets.clone();
        async move { (!status_of(&sets, "alpha").await["plan"].is_null()).then_some(()) }
    })
    .await;
    for role in ["controller", "broker"] {
        let cm = get_cm(&cms, &format!("alpha-observers-{role}"))
            .await
            .unwrap_or_else(|| panic!("alpha wrote no {role} ConfigMap"));
        assert_eq!(listed_ids(&cm), Some(vec![1]));
    }

    // The newer set: other selectors, the same pods. The CRD is installed again first: the bed
    // is shared, and a CRD of an older build (no Conflict phase) would refuse beta's status.
    bed.install_crd_of_this_build().await;
    let beta = observer_set(
        bed,
        "beta",
        json!({"refuse/cluster": "one", "refuse/role": "controller"}),
        json!({"refuse/cluster": "one", "refuse/role": "broker"}),
    );
    support::create_observer_set(&sets, beta).await;
    let status = wait_phase(bed, "beta", "Conflict", op).await;
    let ready = ready_condition(&status);
    assert_eq!(ready["status"], "False", "{status:#}");
    assert_eq!(ready["reason"], "Conflict", "{status:#}");
    let message = ready["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(
            "ObserverSet refuse-test/alpha (older) already selects pod(s) refuse-broker-0, refuse-broker-1, refuse-controller-0"
        ),
        "{message}"
    );
    // Several scans and reconciles later, still nothing written for beta; alpha keeps working.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status = status_of(&sets, "beta").await;
    assert_eq!(phase(&status), "Conflict", "{status:#}");
    assert!(
        status["plan"].is_null(),
        "the automation acted for beta: {status:#}"
    );
    assert_eq!(status["revision"], json!(0), "{status:#}");
    for role in ["controller", "broker"] {
        assert!(
            get_cm(&cms, &format!("beta-observers-{role}"))
                .await
                .is_none(),
            "beta wrote its {role} ConfigMap while in conflict"
        );
    }
    let alpha_status = status_of(&sets, "alpha").await;
    assert_eq!(phase(&alpha_status), "Ready", "{alpha_status:#}");

    // The older set goes: the newer proceeds.
    let deleted = Instant::now();
    delete_and_wait_gone(bed, "alpha").await;
    wait_phase(bed, "beta", "Ready", op).await;
    println!(
        "beta Ready {:?} after alpha's delete request",
        deleted.elapsed()
    );
    for role in ["controller", "broker"] {
        let cm = get_cm(&cms, &format!("beta-observers-{role}"))
            .await
            .unwrap_or_else(|| panic!("beta wrote no {role} ConfigMap after alpha was deleted"));
        assert_eq!(listed_ids(&cm), Some(vec![1]));
    }
    wait_for(Duration::from_secs(30), "beta's automation plan", || {
        let sets = sets.clone();
        async move { (!status_of(&sets, "beta").await["plan"].is_null()).then_some(()) }
    })
    .await;

    // The operator removes beta's finalizer too (clean_up then finds nothing left).
    delete_and_wait_gone(bed, "beta").await;
}
