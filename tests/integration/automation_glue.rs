//! The automation's supervisor (`automation::run_namespaced`, `automation/mod.rs`) in-process
//! against the bed's real apiserver: a task per ObserverSet whose policy is not Manual, started
//! and stopped as the spec changes, with what a stopped task leaves behind cleaned up.
//!
//! The set's Kafka is a loopback port nothing listens on, so every scan fails the same way and
//! writes `KafkaReachable=False`: that condition is how the test sees a running task. A task
//! stopped by the policy going back to Manual must remove it (it would go stale) and stop
//! exporting the set's automation series; deleting the set stops the task too.
//!
//! Owns its state: a fresh namespace, deleted at the end. The bed's shared operator watches
//! every namespace and would automate this set as well, so it is paused for the test.

use crate::support;

use std::time::Duration;

use kafka_observer_operator::metrics::Metrics;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{json, Value};

use support::*;

const SET: &str = "glue-auto";
const T: Duration = Duration::from_secs(60);

fn kafka_reachable(status: &Value) -> Option<Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "KafkaReachable")
        .cloned()
}

/// Whether the registry exports an automation decision latency for this test's set.
fn exports_decisions(metrics: &Metrics, ns: &str) -> bool {
    metrics.render().lines().any(|l| {
        l.starts_with("kafka_observer_automation_decision_latency_seconds")
            && l.contains(&format!("namespace=\"{ns}\""))
            && l.contains(&format!("observerset=\"{SET}\""))
    })
}

#[tokio::test]
async fn tasks_follow_the_policy_and_a_stopped_one_leaves_no_stale_condition() {
    let Some(bed) = bed().await else {
        return;
    };
    let _paused = bed.pause_operator();
    let ns = bed.namespace("automation-glue").await;
    let api = bed.observer_sets(&ns);
    // Port 1 on loopback: refused at once, so each scan fails quickly and the same way.
    let mut body = bed.podless_observer_set(SET, &[4], &[]);
    body["spec"]["kafka"]["bootstrapServers"] = json!("127.0.0.1:1");
    body["spec"]["promotion"] = json!({
        "policy": "UnderMinIsr", "promoted": [], "scanInterval": "1s", "dryRun": true
    });
    create_observer_set(&api, body).await;

    let metrics = Metrics::new();
    let supervisor = support::spawn_automation(&bed, &ns, &metrics).await;

    // Started: its first scan marks Kafka unreachable and decides (with nothing to act on).
    let down = wait_for(T, "KafkaReachable False from the started task", || async {
        let c = kafka_reachable(&status_of(&api, SET).await)?;
        (c["status"] == "False").then_some(c)
    })
    .await;
    println!("KafkaReachable: {down}");
    wait_for(T, "the task's decision latency exported", || async {
        exports_decisions(&metrics, &ns).then_some(())
    })
    .await;

    // Back to Manual: the task stops, its condition and series are removed, and nothing
    // writes the condition again.
    let policy = |name: &str| Patch::Merge(json!({"spec": {"promotion": {"policy": name}}}));
    api.patch(SET, &PatchParams::default(), &policy("Manual"))
        .await
        .expect("set the policy to Manual");
    wait_for(T, "the KafkaReachable condition removed", || async {
        kafka_reachable(&status_of(&api, SET).await)
            .is_none()
            .then_some(())
    })
    .await;
    assert!(
        !exports_decisions(&metrics, &ns),
        "a stopped task's series are still exported:\n{}",
        metrics.render()
    );
    // Three scan intervals: a task left running would have written the condition again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status = status_of(&api, SET).await;
    assert!(
        kafka_reachable(&status).is_none(),
        "a task still scans after the policy went Manual: {status}"
    );

    // Automated again: a new task.
    api.patch(SET, &PatchParams::default(), &policy("UnderMinIsr"))
        .await
        .expect("set the policy back to UnderMinIsr");
    wait_for(
        T,
        "KafkaReachable False from the restarted task",
        || async {
            let c = kafka_reachable(&status_of(&api, SET).await)?;
            (c["status"] == "False").then_some(())
        },
    )
    .await;

    // Deleted: the task stops with it (its series go).
    api.delete(SET, &DeleteParams::default())
        .await
        .expect("delete the ObserverSet");
    wait_for(T, "the deleted set's series gone", || async {
        (!exports_decisions(&metrics, &ns)).then_some(())
    })
    .await;

    supervisor.abort();
    bed.drop_namespace(&ns).await;
}
