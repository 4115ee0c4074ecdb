//! Rollouts on the bed's real pods (the example cluster of examples/kafka/ on the bed's real node,
//! ObserverSet kafka/kafka, the real kubelet projecting the ConfigMaps, an observer agent per pod
//! on its pod IP): a promotion and a demotion reach the controllers first, and every controller's
//! agent has acknowledged the new revision before the brokers' ConfigMap changes; an operator
//! killed mid-rollout resumes it without repeating or skipping a step. These tests share the
//! bed's pods: run them with --test-threads=1 (integration.sh does).

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::watcher;
use serde_json::Value;

use support::*;

const T: Duration = Duration::from_secs(120);

/// One observed write of an observer ConfigMap: when this test saw it, which role, revision, ids.
#[derive(Clone, Debug)]
struct Seen {
    at: Timestamp,
    role: String,
    revision: u64,
    ids: Vec<i32>,
}

/// Records every change of the kafka/kafka ConfigMaps, stamped on arrival.
/// Records every new (role, revision) of the example's ConfigMaps; returns once the watch has
/// listed them, so no write after the call can be missed.
async fn record_configmaps(bed: &Bed) -> (Arc<Mutex<Vec<Seen>>>, tokio::task::JoinHandle<()>) {
    let log = Arc::new(Mutex::new(Vec::<Seen>::new()));
    let api = bed.config_maps("kafka");
    let cfg = watcher::Config::default().labels("kafkaobserver.io/observerset=kafka");
    let sink = log.clone();
    let (listed, is_listed) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let mut listed = Some(listed);
        let mut stream = watcher(api, cfg).boxed();
        while let Some(ev) = stream.next().await {
            let cm = match ev {
                Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)) => cm,
                Ok(watcher::Event::InitDone) => {
                    if let Some(tx) = listed.take() {
                        let _ = tx.send(());
                    }
                    continue;
                }
                _ => continue,
            };
            let at = Timestamp::now();
            let role = cm
                .metadata
                .name
                .clone()
                .unwrap_or_default()
                .trim_start_matches("kafka-observers-")
                .to_string();
            if let (Some(revision), Some(ids)) = (revision_of(&cm), listed_ids(&cm)) {
                let mut log = sink.lock().unwrap();
                if log
                    .last()
                    .is_none_or(|l: &Seen| l.role != role || l.revision != revision)
                {
                    log.push(Seen {
                        at,
                        role,
                        revision,
                        ids,
                    });
                }
            }
        }
    });
    tokio::time::timeout(Duration::from_secs(30), is_listed)
        .await
        .expect("the ConfigMap watch did not list within 30 s")
        .expect("the ConfigMap watch ended before listing");
    (log, task)
}

fn first(log: &Arc<Mutex<Vec<Seen>>>, role: &str, revision: u64) -> Option<Seen> {
    log.lock()
        .unwrap()
        .iter()
        .find(|s| s.role == role && s.revision == revision)
        .cloned()
}

/// Waits until kafka/kafka is Ready with `ids` in both ConfigMaps; returns their revision.
async fn settled(bed: &Bed, ids: &[i32]) -> u64 {
    let sets = bed.observer_sets("kafka");
    let cms = bed.config_maps("kafka");
    wait_for(
        T,
        &format!("kafka/kafka Ready with observers {ids:?}"),
        || async {
            let status = status_of(&sets, "kafka").await;
            let c = get_cm(&cms, "kafka-observers-controller").await?;
            let b = get_cm(&cms, "kafka-observers-broker").await?;
            let (rc, rb) = (revision_of(&c)?, revision_of(&b)?);
            let ok = phase(&status) == "Ready"
                && listed_ids(&c)? == ids
                && listed_ids(&b)? == ids
                && rc == rb;
            ok.then_some(rc)
        },
    )
    .await
}

/// Every agent in `pods` (pod name, agent address) reports `revision` and `ids`; returns the
/// latest `seenAt`.
async fn agents_report(pods: &[(String, String)], revision: u64, ids: &[i32]) -> Timestamp {
    let mut latest = Timestamp::MIN;
    for (pod, addr) in pods {
        let snap: Value = wait_for(
            Duration::from_secs(30),
            &format!("agent of {pod} at revision {revision}"),
            || async {
                let s = agent_snapshot(addr).await?;
                (s["revision"] == serde_json::json!(revision)).then_some(s)
            },
        )
        .await;
        assert_eq!(
            snap["ids"],
            serde_json::json!(ids),
            "agent of {pod}: {snap}"
        );
        let seen: Timestamp = snap["seenAt"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{pod}: no seenAt in {snap}"));
        latest = latest.max(seen);
    }
    latest
}

/// The ordering contract for one rollout to `revision`.
async fn assert_controllers_first(
    bed: &Bed,
    log: &Arc<Mutex<Vec<Seen>>>,
    revision: u64,
    ids: &[i32],
) {
    let ctrl =
        first(log, "controller", revision).expect("controllers' ConfigMap write not observed");
    let brk = first(log, "broker", revision).expect("brokers' ConfigMap write not observed");
    assert_eq!(ctrl.ids, ids);
    assert_eq!(brk.ids, ids);
    assert!(
        ctrl.at <= brk.at,
        "brokers' ConfigMap changed before the controllers' one: {ctrl:?} {brk:?}"
    );
    // Sound on one clock: an agent's seenAt precedes the operator learning of the ack, which
    // precedes the brokers' write, which precedes this test seeing that write.
    let acked = agents_report(&bed.controller_pods().await, revision, ids).await;
    assert!(acked <= brk.at, "brokers' ConfigMap written at or before {} but the last controller acknowledged at {acked}", brk.at);
    agents_report(&bed.broker_pods().await, revision, ids).await;
    println!(
        "revision {revision}: controllers' ConfigMap {}, last controller ack +{} ms, brokers' ConfigMap +{} ms",
        ctrl.at,
        acked.duration_since(ctrl.at).as_millis(),
        brk.at.duration_since(ctrl.at).as_millis()
    );
}

/// Back to the example ObserverSet as the demo and the drill expect it (with the bed's
/// bootstrap address), nothing promoted.
async fn restore(bed: &Bed) {
    bed.operator("up");
    let mut body = bed.example_observer_set();
    body["spec"]["promotion"]["promoted"] = serde_json::json!([]);
    apply_observer_set(&bed.observer_sets("kafka"), &body).await;
}

#[tokio::test]
async fn promotion_and_demotion_reach_acknowledged_controllers_before_brokers() {
    let Some(bed) = bed().await else {
        return;
    };
    bed.operator("up");
    let sets = bed.observer_sets("kafka");
    apply_observer_set(&sets, &bed.bed_observer_set(&[])).await;
    let r0 = settled(&bed, &[4]).await;
    let (log, watch) = record_configmaps(&bed).await;

    apply_observer_set(&sets, &bed.bed_observer_set(&[4])).await;
    let r1 = settled(&bed, &[]).await;
    assert!(r1 > r0, "promotion did not move the revision past {r0}");
    assert_controllers_first(&bed, &log, r1, &[]).await;
    let status = status_of(&sets, "kafka").await;
    let acked = status["roles"]["controller"]["acknowledged"]
        .as_array()
        .map(Vec::len)
        .unwrap_or(0);
    assert_eq!(
        acked, 3,
        "status.roles.controller should list the 3 controllers: {status}"
    );

    apply_observer_set(&sets, &bed.bed_observer_set(&[])).await;
    let r2 = settled(&bed, &[4]).await;
    assert!(r2 > r1);
    assert_controllers_first(&bed, &log, r2, &[4]).await;
    watch.abort();
    restore(&bed).await;
}

#[tokio::test]
async fn operator_killed_mid_rollout_resumes_without_skipping_a_step() {
    let Some(bed) = bed().await else {
        return;
    };
    bed.operator("up");
    let sets = bed.observer_sets("kafka");
    let cms = bed.config_maps("kafka");
    apply_observer_set(&sets, &bed.bed_observer_set(&[])).await;
    let mut current: Vec<i32> = vec![4];
    let mut rev = settled(&bed, &current).await;
    let (log, watch) = record_configmaps(&bed).await;

    // Flip promoted/demoted until the kill lands between the two ConfigMap writes.
    for attempt in 1..=4 {
        let (promoted, target): (Vec<i32>, Vec<i32>) = if current.is_empty() {
            (vec![], vec![4])
        } else {
            (vec![4], vec![])
        };
        apply_observer_set(&sets, &bed.bed_observer_set(&promoted)).await;
        let next = rev + 1;
        wait_for(T, "controllers' ConfigMap write", || async {
            first(&log, "controller", next)
        })
        .await;
        bed.operator("kill");
        let brokers = get_cm(&cms, "kafka-observers-broker")
            .await
            .expect("brokers' ConfigMap");
        let caught = revision_of(&brokers) == Some(rev);
        println!("attempt {attempt}: operator killed after the controllers' write of revision {next}; brokers still at {rev}: {caught}");
        if caught {
            // Nothing moves the brokers' list while the operator is down.
            tokio::time::sleep(Duration::from_secs(3)).await;
            let b = get_cm(&cms, "kafka-observers-broker").await.unwrap();
            assert_eq!(
                revision_of(&b),
                Some(rev),
                "brokers' ConfigMap changed while the operator was down"
            );
        }
        bed.operator("up");
        let done = settled(&bed, &target).await;
        assert_eq!(done, next, "after the restart the rollout ended at revision {done}, expected exactly {next} (a step repeated or skipped)");
        let status = status_of(&sets, "kafka").await;
        assert_eq!(
            status["revision"],
            serde_json::json!(next),
            "status.revision: {status}"
        );
        assert!(
            status.get("rollout").is_none_or(Value::is_null),
            "rollout still in status after Ready: {status}"
        );
        assert_controllers_first(&bed, &log, next, &target).await;
        current = target;
        rev = next;
        if caught {
            watch.abort();
            restore(&bed).await;
            settled(&bed, &[4]).await;
            return;
        }
    }
    watch.abort();
    restore(&bed).await;
    panic!("in 4 attempts the operator could not be killed between the controllers' and the brokers' writes: {}", bed.log_tail(20));
}
