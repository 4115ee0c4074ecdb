//! `status.history`, `status.lastAction`, `status.partitions`, the `observers_in_isr` gauge and
//! the `-o wide` columns on the test bed, with both of the operator's loops writing the same
//! ObserverSet: the operator binary of this build (reconciler and automation, each its own
//! server-side-apply field manager) on a podless ObserverSet in its own namespace, the bed's
//! real Kafka losing broker 2 (`kafka.sh stop`) and getting it back.
//!
//! Order matters: two manual changes first (the reconciler's entries), then the automatic
//! promotion and demotion (the automation's writes must leave the reconciler's entries alone),
//! then the reconciler's `lastAction` writes (which must leave the automation's entries alone).
//! The bed's shared operator watches every namespace and would automate this set too, so it is
//! paused for the test ([`support::Bed::pause_operator`]; run with `KOO_OPERATOR_BIN` naming
//! the shared operator's binary so the pause finds it and restarts the same one).

use crate::support;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::ClientConfig;
use serde_json::{json, Value};

const TOPIC: &str = "status-history-test";
const SET: &str = "hist";
const MANAGER: &str = "koo-history-test";

async fn create_topic(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    support::recreate_topic(
        bootstrap,
        TOPIC,
        &[&[1, 2, 4]],
        &[("min.insync.replicas", "2")],
    )
    .await
}

/// This build's operator binary (cargo builds it with the test), both loops, one namespace.
struct Operator {
    child: Child,
    log: std::path::PathBuf,
    metrics: String,
}

impl Operator {
    fn start(bed: &support::Bed, ns: &str) -> Operator {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let metrics = format!("127.0.0.1:{port}");
        let log =
            std::env::temp_dir().join(format!("koo-status-history-{}.log", std::process::id()));
        let file = std::fs::File::create(&log).expect("operator log file");
        let child = Command::new(env!("CARGO_BIN_EXE_kafka-observer-operator"))
            .args(["run", "--namespace", ns, "--leader-election", "off"])
            .args(["--metrics-listen", &metrics, "--resync", "30s"])
            .env("KUBECONFIG", bed.dir.join("kubeconfig"))
            .env("RUST_LOG", "info")
            .env("POD_NAME", "status-history-test")
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("start the operator");
        println!("operator pid {} (log {})", child.id(), log.display());
        Operator {
            child,
            log,
            metrics,
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    fn scrape(&self) -> String {
        let out = Command::new("curl")
            .args([
                "-sf",
                "-m",
                "2",
                &format!("http://{}/metrics", self.metrics),
            ])
            .output()
            .expect("curl");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// (action, nodeId, who, reason) of every history entry, sorted by `at`.
fn history(status: &Value) -> Vec<(String, i64, String, String)> {
    let mut entries: Vec<&Value> = status["history"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    entries.sort_by_key(|e| e["at"].as_str().unwrap_or("").to_owned());
    entries
        .into_iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap_or("").to_owned(),
                e["nodeId"].as_i64().unwrap_or(-1),
                e["who"].as_str().unwrap_or("").to_owned(),
                e["reason"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// The entries without the engine's leadership moves (whether 4 leads when it is demoted
/// depends on the election, not on what this test checks), reasons shortened to their start.
fn actions(status: &Value) -> Vec<(String, i64, String, String)> {
    history(status)
        .into_iter()
        .filter(|e| e.0 != "MoveLeadership")
        .map(|(a, n, w, r)| (a, n, w, r.chars().take(40).collect()))
        .collect()
}

fn entry(action: &str, node: i64, who: &str, reason: &str) -> (String, i64, String, String) {
    (
        action.into(),
        node,
        who.into(),
        reason.chars().take(40).collect(),
    )
}

/// Partitions of the whole cluster whose ISR lists broker 4, from a metadata request.
fn partitions_with_4_in_isr(bootstrap: &str) -> i64 {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let metadata = consumer
        .fetch_metadata(None, Duration::from_secs(10))
        .expect("cluster metadata");
    metadata
        .topics()
        .iter()
        .flat_map(|t| t.partitions())
        .filter(|p| p.isr().contains(&4))
        .count() as i64
}

async fn wait_status(
    api: &Api<kafka_observer_operator::crd::ObserverSet>,
    op: &Operator,
    limit: Duration,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let start = std::time::Instant::now();
    loop {
        let s = support::status_of(api, SET).await;
        if pred(&s) {
            return s;
        }
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}; last status: {s:#}\noperator log:\n{}",
            op.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn history_of_manual_and_automatic_actions_and_the_wide_columns() {
    let Some(bed) = support::bed().await else {
        return;
    };
    let admin = create_topic(&bed.bootstrap).await;
    let _paused = bed.pause_operator();
    bed.install_crd_of_this_build().await;
    let ns = bed.namespace("history").await;
    let api = bed.observer_sets(&ns);
    let mut body = bed.podless_observer_set(SET, &[4], &[]);
    body["spec"]["promotion"] = json!({
        "policy": "UnderMinIsr", "promoted": [], "confirmations": 2, "scanInterval": "1s",
        "cooldown": "5s", "maxLagMessages": 1000,
        "topics": {"include": [format!("^{TOPIC}$")], "exclude": []},
        "autoDemote": {"enabled": true, "stabilizationWindow": "10s"}
    });
    support::create_observer_set(&api, body).await;
    let op = Operator::start(&bed, &ns);
    let ready = |s: &Value| support::phase(s) == "Ready";
    wait_status(&api, &op, Duration::from_secs(60), "phase Ready", ready).await;

    // 1. Manual: promoted by hand, then back, both as this test's field manager.
    let pp = PatchParams::apply(MANAGER).force();
    let promoted = |ids: Value| {
        json!({"apiVersion": "kafkaobserver.io/v1alpha1", "kind": "ObserverSet",
               "metadata": {"name": SET}, "spec": {"promotion": {"promoted": ids}}})
    };
    api.patch(SET, &pp, &Patch::Apply(promoted(json!([4]))))
        .await
        .unwrap();
    let manual_promote = entry(
        "Promote",
        4,
        MANAGER,
        "spec change: listed in spec.promotion.promoted",
    );
    wait_status(
        &api,
        &op,
        Duration::from_secs(30),
        "the manual promotion",
        |s| actions(s) == vec![manual_promote.clone()] && ready(s),
    )
    .await;
    api.patch(SET, &pp, &Patch::Apply(promoted(json!([]))))
        .await
        .unwrap();
    let manual_demote = entry(
        "Demote",
        4,
        MANAGER,
        "spec change: removed from spec.promotion.promoted",
    );
    let s = wait_status(
        &api,
        &op,
        Duration::from_secs(30),
        "the manual demotion",
        |s| actions(s) == vec![manual_promote.clone(), manual_demote.clone()] && ready(s),
    )
    .await;
    assert_eq!(s["lastAction"]["action"], "Demote");
    assert_eq!(s["lastAction"]["who"], MANAGER);

    // 2. Automatic: broker 2 lost, 4 promoted; the view shows the partition under min ISR.
    let killed = bed.testbed.stop_node(2).expect("stop broker 2");
    let under = wait_status(
        &api,
        &op,
        Duration::from_secs(90),
        "the partition under min ISR in status.partitions",
        |s| s["partitions"]["underMinIsr"] == json!(1),
    )
    .await;
    let p = &under["partitions"]["entries"][0];
    assert_eq!(
        (
            &p["topic"],
            &p["partition"],
            &p["state"],
            &p["isr"],
            &p["minIsr"]
        ),
        (
            &json!(TOPIC),
            &json!(0),
            &json!("UnderMinIsr"),
            &json!(1),
            &json!(2)
        ),
        "{under:#}"
    );
    assert_eq!(under["partitions"]["omittedPartitions"], json!(0));
    let auto_promote = entry(
        "Promote",
        4,
        "automation",
        "1 partition(s) under min ISR: status-history-test-0",
    );
    let s = wait_status(
        &api,
        &op,
        Duration::from_secs(60),
        "the automatic promotion",
        |s| actions(s).len() == 3 && s["lastAction"]["who"] == "automation",
    )
    .await;
    assert_eq!(
        actions(&s),
        vec![
            manual_promote.clone(),
            manual_demote.clone(),
            auto_promote.clone()
        ],
        "the automation's write kept the reconciler's entries: {s:#}"
    );

    // 3. Broker 2 back: 4 demoted automatically; the reconciler follows with lastAction.
    killed.start().expect("start broker 2");
    let s = wait_status(
        &api,
        &op,
        Duration::from_secs(150),
        "the automatic demotion",
        |s| actions(s).len() == 4 && s["lastAction"]["action"] == "Demote" && ready(s),
    )
    .await;
    let got = actions(&s);
    assert_eq!(&got[..3], &[manual_promote, manual_demote, auto_promote]);
    assert_eq!(
        (got[3].0.as_str(), got[3].1, got[3].2.as_str()),
        ("Demote", 4, "automation")
    );
    assert_eq!(s["lastAction"]["who"], "automation");
    // Each loop owns exactly its entries (managedFields), so neither removes the other's.
    let obj: Value = serde_json::to_value(api.get(SET).await.unwrap()).unwrap();
    let owned = |manager: &str| -> usize {
        obj["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["manager"] == manager && m["subresource"] == "status")
            .filter_map(|m| m["fieldsV1"]["f:status"]["f:history"].as_object())
            .map(|h| h.keys().filter(|k| k.starts_with("k:")).count())
            .sum()
    };
    let automatic = history(&s).iter().filter(|e| e.2 == "automation").count();
    assert_eq!(
        owned("kafka-observer-operator-automation"),
        automatic,
        "{obj:#}"
    );
    assert_eq!(owned("kafka-observer-operator-rollout"), 2, "{obj:#}");

    // The gauge, now that 4 is an observer again and acknowledged: the partitions whose ISR
    // lists it, as Kafka's own metadata says (read until the two agree: both come from scans).
    let series = format!(
        "kafka_observer_observers_in_isr{{namespace=\"{ns}\",observerset=\"{SET}\",node_id=\"4\"}} "
    );
    let (gauge, kafka) = support::wait_for(Duration::from_secs(60), &series, || async {
        let text = op.scrape();
        let gauge: i64 = text
            .lines()
            .find_map(|l| l.strip_prefix(&series))?
            .trim()
            .parse()
            .ok()?;
        let kafka = partitions_with_4_in_isr(&bed.bootstrap);
        (gauge == kafka).then_some((gauge, kafka))
    })
    .await;
    println!("observers_in_isr of 4: {gauge} (Kafka's metadata: {kafka})");

    // The view once broker 2 is back in the ISR.
    wait_status(
        &api,
        &op,
        Duration::from_secs(60),
        "no partition under min ISR",
        |s| s["partitions"]["underMinIsr"] == json!(0),
    )
    .await;

    // 4. The wide columns, by the bed's real kubectl.
    let kubeconfig = bed.testbed.kubeconfig();
    let kubeconfig = kubeconfig.to_string_lossy();
    let get_obs = |extra: &[&str]| {
        let mut args = vec!["--kubeconfig", &kubeconfig, "-n", &ns, "get", "obs", SET];
        args.extend_from_slice(extra);
        bed.testbed
            .run_tool("kubectl", &args)
            .unwrap_or_else(|e| panic!("kubectl {args:?}: {e}"))
    };
    let wide = get_obs(&["-o", "wide"]);
    println!("{wide}");
    let lines: Vec<Vec<&str>> = wide
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        vec![
            "NAME",
            "DESIRED",
            "EFFECTIVE",
            "PHASE",
            "LAST-ACTION",
            "NODE",
            "BY",
            "ACTION-AGE",
            "UNDER-MIN-ISR",
            "AGE"
        ],
        "{wide}"
    );
    assert_eq!(
        (
            lines[1][0],
            lines[1][1],
            lines[1][2],
            lines[1][3],
            lines[1][4],
            lines[1][5],
            lines[1][6],
            lines[1][8]
        ),
        (SET, "[4]", "[4]", "Ready", "Demote", "4", "automation", "0"),
        "{wide}"
    );
    let plain = get_obs(&[]);
    assert!(
        !plain.contains("LAST-ACTION"),
        "priority 1 columns only with -o wide: {plain}"
    );

    // The reconciler's finalizer needs the operator: delete the set while it runs.
    api.delete(SET, &Default::default()).await.unwrap();
    support::wait_for(
        Duration::from_secs(60),
        "the ObserverSet deleted",
        || async { api.get_opt(SET).await.unwrap().is_none().then_some(()) },
    )
    .await;
    drop(op);
    bed.drop_namespace(&ns).await;
    let _ = admin.delete_topics(&[TOPIC], &AdminOptions::new()).await;
}
