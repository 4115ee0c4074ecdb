//! The promotion automation end to end on the test bed: a real apiserver holding an ObserverSet,
//! the bed's real Kafka (the example StatefulSets on the bed's node) losing a broker (`kafka.sh
//! stop`: its JVM killed with SIGKILL, its pod down until started again), the automation writing
//! `status.plan` in dry run, then `status.autoPromotions` once live, events and metrics, and the
//! demotion after the broker is back. The test runs its own automation; it checks the automation's
//! side of the contract (status fields only), the rollout is the reconciler's. The bed's operator
//! (`operator.sh`) would automate this ObserverSet as well and write the same fields, so it is
//! stopped for the test and started again afterwards ([`support::Bed::pause_operator`]): every
//! status write, Event and metric the test sees is its own automation's.

use crate::support;

use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kafka_observer_operator::metrics::Metrics;
use kube::api::{Api, ListParams, Patch, PatchParams};
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use serde_json::{json, Value};

const TOPIC: &str = "policy-test-auto";

async fn create_topic(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    support::recreate_topic(
        bootstrap,
        TOPIC,
        &[&[1, 2, 4]],
        &[("min.insync.replicas", "2")],
    )
    .await
}

fn plan_actions(status: &Value) -> Vec<(String, i64)> {
    status["plan"]["actions"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| {
                    (
                        x["action"].as_str().unwrap_or("").to_string(),
                        x["nodeId"].as_i64().unwrap_or(-1),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn auto_ids(status: &Value) -> Vec<i64> {
    status["autoPromotions"]
        .as_array()
        .map(|a| a.iter().filter_map(|p| p["nodeId"].as_i64()).collect())
        .unwrap_or_default()
}

/// Polls the ObserverSet's status every 200 ms until `pred` holds; on timeout panics with the
/// last status seen, so a failure on the shared bed says what the automation last wrote.
async fn wait_status(
    api: &kube::Api<kafka_observer_operator::crd::ObserverSet>,
    limit: Duration,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let start = std::time::Instant::now();
    loop {
        let s = support::status_of(api, "auto").await;
        if pred(&s) {
            return s;
        }
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}; last status: {s:#}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits up to 10 s until the rendered metrics contain `line`.
async fn wait_metric(metrics: &Metrics, line: &str) {
    for _ in 0..50 {
        if metrics.render().contains(line) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("metrics never showed {line}:\n{}", metrics.render());
}

#[tokio::test(flavor = "multi_thread")]
async fn dry_run_plan_then_live_promotion_in_status_then_demotion_after_recovery() {
    let Some(bed) = support::bed().await else {
        return;
    };
    let bootstrap = bed.bootstrap.clone();
    let admin = create_topic(&bootstrap).await;
    let _paused = bed.pause_operator();
    let ns = bed.namespace("policy-auto").await;
    let api = bed.observer_sets(&ns);
    // The bed's bootstrap, which the automation's scans reach.
    let mut body = bed.podless_observer_set("auto", &[4], &[]);
    body["spec"]["promotion"] = json!({
        "policy": "UnderMinIsr", "promoted": [], "confirmations": 2, "scanInterval": "1s",
        "cooldown": "5s", "maxLagMessages": 1000,
        "topics": {"include": [format!("^{TOPIC}$")], "exclude": []},
        "dryRun": true, "autoDemote": {"enabled": true, "stabilizationWindow": "10s"}
    });
    support::create_observer_set(&api, body).await;

    let metrics = Metrics::new();
    let task = support::spawn_automation(&bed, &ns, &metrics).await;

    // Healthy: a plan with nothing to do.
    wait_status(&api, Duration::from_secs(60), "a first (empty) plan", |s| {
        s["plan"]["dryRun"] == json!(true) && plan_actions(s).is_empty()
    })
    .await;

    // Down until started again: a `kill` alone would have the kubelet restart it within seconds.
    let killed = bed.testbed.stop_node(2).expect("stop broker 2");
    let dry = wait_status(
        &api,
        Duration::from_secs(90),
        "a dry-run plan promoting 4",
        |s| plan_actions(s) == vec![("Promote".to_string(), 4)],
    )
    .await;
    assert_eq!(dry["plan"]["dryRun"], json!(true));
    assert!(
        auto_ids(&dry).is_empty(),
        "a dry run records no promotion: {dry}"
    );

    // Live: the same promotion, now recorded.
    let live_patch = json!({"spec": {"promotion": {"dryRun": false}}});
    api.patch("auto", &PatchParams::default(), &Patch::Merge(&live_patch))
        .await
        .unwrap();
    let live = wait_status(
        &api,
        Duration::from_secs(60),
        "status.autoPromotions with 4",
        |s| auto_ids(s) == vec![4],
    )
    .await;
    assert_eq!(live["plan"]["dryRun"], json!(false));
    assert_eq!(plan_actions(&live), vec![("Promote".to_string(), 4)]);
    let reason = live["autoPromotions"][0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("under min ISR") && reason.contains(TOPIC),
        "{reason}"
    );
    let labels = format!("namespace=\"{ns}\",observerset=\"auto\"");
    wait_metric(
        &metrics,
        &format!("kafka_observer_automation_promotions_total{{{labels},node_id=\"4\"}} 1"),
    )
    .await;
    wait_metric(
        &metrics,
        &format!("kafka_observer_automation_decision_latency_seconds_count{{{labels}}}"),
    )
    .await;
    let events: Api<Event> = Api::namespaced(bed.client.clone(), &ns);
    let reasons: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|e| e.reason)
        .collect();
    assert!(
        reasons.iter().any(|r| r == "AutoPromoted"),
        "events: {reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r == "DryRunPromote"),
        "events: {reasons:?}"
    );

    // Recovery: broker 2 back in the ISR, the automation demotes 4 (after the 10 s window).
    killed.start().expect("start broker 2");
    wait_status(&api, Duration::from_secs(120), "the demotion of 4", |s| {
        auto_ids(s).is_empty()
    })
    .await;
    wait_metric(
        &metrics,
        &format!("kafka_observer_automation_demotions_total{{{labels},node_id=\"4\"}} 1"),
    )
    .await;
    // While broker 2 was down the demotion was impossible, and said so.
    let notes: Vec<(String, String)> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect();
    assert!(
        notes
            .iter()
            .any(|(r, n)| r == "AutomationHeldBack" && n.contains("broker 4: stays promoted")),
        "events: {notes:?}"
    );
    assert!(
        notes.iter().any(|(r, _)| r == "AutoDemoted"),
        "events: {notes:?}"
    );

    task.abort();
    bed.drop_namespace(&ns).await;
    let _ = admin.delete_topics(&[TOPIC], &AdminOptions::new()).await;
}
