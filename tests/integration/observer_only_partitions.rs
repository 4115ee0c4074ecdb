//! The "never leader" exception the operator guards: a partition created with only observers as
//! replicas. Kafka accepts such a topic (here an explicit assignment on observer 4; an RF 1 topic
//! can land there by automatic placement too), the observer patch keeps 4 in its first ISR so the
//! partition has a leader, and the partition is "under min ISR" (observers never count). An
//! UnderMinIsr policy would answer that by promoting 4, which makes it a primary for every
//! partition it hosts to fix one placement. The engine does not: the partition does not trigger,
//! and the automation publishes a Warning Event `ObserverOnlyPartitions` naming it.
//!
//! The test runs its own automation on its own podless ObserverSet, watching only its own topic,
//! with confirmations 1 and no cooldown, so without the guard its first scan would promote. The
//! bed's operator is paused for the test (it would see the topic too).

use crate::support;

use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kafka_observer_operator::metrics::Metrics;
use kube::api::{Api, ListParams};
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use serde_json::json;

const TOPIC: &str = "observer-only-test";
const SET: &str = "observer-only";

async fn create_topic_on_the_observer(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    support::recreate_topic(bootstrap, TOPIC, &[&[4]], &[]).await
}

/// The partition's (leader, replicas) as the metadata reports it.
fn leader_and_replicas(admin: &AdminClient<DefaultClientContext>) -> Option<(i32, Vec<i32>)> {
    let md = admin
        .inner()
        .fetch_metadata(Some(TOPIC), Duration::from_secs(5))
        .ok()?;
    let p = md.topics().first()?.partitions().first()?;
    Some((p.leader(), p.replicas().to_vec()))
}

/// How many scans the test's automation has made of its ObserverSet.
fn scans(metrics: &Metrics, ns: &str) -> u64 {
    let prefix = format!(
        "kafka_observer_kafka_scan_duration_seconds_count{{namespace=\"{ns}\",observerset=\"{SET}\"}} "
    );
    metrics
        .render()
        .lines()
        .find_map(|l| l.strip_prefix(&prefix).and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_observer_only_partition_is_reported_and_promotes_nothing() {
    let Some(bed) = support::bed().await else {
        return;
    };
    let _paused = bed.pause_operator();
    let admin = create_topic_on_the_observer(&bed.bootstrap).await;

    // The documented exception: Kafka gives the partition its only replica, the observer, as
    // leader (the controller logs a WARN).
    let (leader, replicas) = support::wait_for(
        Duration::from_secs(30),
        "a leader for the observer-only partition",
        || async { leader_and_replicas(&admin).filter(|(l, _)| *l >= 0) },
    )
    .await;
    assert_eq!((leader, replicas), (4, vec![4]));

    let ns = bed.namespace("observer-only").await;
    let api = bed.observer_sets(&ns);
    let mut body = bed.podless_observer_set(SET, &[4], &[]);
    body["spec"]["promotion"] = json!({
        "policy": "UnderMinIsr", "promoted": [], "confirmations": 1, "scanInterval": "1s",
        "cooldown": "5s", "maxLagMessages": 1000,
        "topics": {"include": [format!("^{TOPIC}$")], "exclude": []},
        "dryRun": false, "autoDemote": {"enabled": false}
    });
    support::create_observer_set(&api, body).await;
    let metrics = Metrics::new();
    let task = support::spawn_automation(&bed, &ns, &metrics).await;

    let events: Api<Event> = Api::namespaced(bed.client.clone(), &ns);
    let note = support::wait_for(
        Duration::from_secs(60),
        "the ObserverOnlyPartitions event",
        || {
            let events = events.clone();
            async move {
                events
                    .list(&ListParams::default())
                    .await
                    .ok()?
                    .items
                    .into_iter()
                    .find(|e| e.reason.as_deref() == Some("ObserverOnlyPartitions"))
                    .map(|e| (e.type_.unwrap_or_default(), e.note.unwrap_or_default()))
            }
        },
    )
    .await;
    assert_eq!(note.0, "Warning");
    assert!(
        note.1
            .starts_with(&format!("{TOPIC}-0 has only observers as replicas")),
        "{note:?}"
    );

    // Three more full scans, each of which would have promoted 4 without the guard.
    let seen = scans(&metrics, &ns);
    support::wait_for(Duration::from_secs(30), "three more scans", || async {
        (scans(&metrics, &ns) >= seen + 3).then_some(())
    })
    .await;
    let status = support::status_of(&api, SET).await;
    assert_eq!(status["autoPromotions"], json!([]), "{status:#}");
    assert_eq!(
        status["plan"]["actions"],
        json!([]),
        "no action planned: {status:#}"
    );
    assert!(
        !metrics
            .render()
            .contains("kafka_observer_automation_promotions_total{"),
        "{}",
        metrics.render()
    );

    task.abort();
    bed.drop_namespace(&ns).await;
    let _ = admin.delete_topics(&[TOPIC], &AdminOptions::new()).await;
}
