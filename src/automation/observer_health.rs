//! The `ObserversAvailable` condition: whether every declared observer is alive in Kafka (listed
//! in the metadata, unfenced, and answering the offset probe) at the last scan that could read the
//! cluster. An observer's own zone lost puts no partition under min ISR (observers never count
//! toward it), so nothing is promoted and nothing else in status would say that the copy meant
//! for disaster recovery is gone: this condition, and a Warning Event `ObserverUnavailable` when
//! it turns False, do.
//!
//! Written by its own field manager ([`writers::OBSERVER_HEALTH`]) as one entry of
//! `status.conditions`, like `KafkaReachable`; only on a change; never from a scan that could not
//! read the cluster (unknown is not "gone").

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::crd::ObserverSet;
use crate::promotion::{BrokerId, ClusterSnapshot, SourceHealth};
use crate::writers;

pub const OBSERVERS_AVAILABLE: &str = "ObserversAvailable";

/// The condition this scan calls for, or `None` when the stored one already says it, the scan
/// could not read the cluster, or no observer is declared. Pure.
pub fn after_scan(
    observers: &BTreeSet<BrokerId>,
    snapshot: &ClusterSnapshot,
    stored: &[Condition],
    generation: Option<i64>,
    now: Timestamp,
) -> Option<Condition> {
    if snapshot.source != SourceHealth::Healthy || observers.is_empty() {
        return None;
    }
    let gone: Vec<String> = observers
        .iter()
        .filter(|&&id| !snapshot.is_alive(id))
        .map(|id| id.to_string())
        .collect();
    let all: Vec<String> = observers.iter().map(|id| id.to_string()).collect();
    let (status, reason, message) = if gone.is_empty() {
        (
            "True",
            "Alive",
            format!("every observer ({}) is alive in Kafka", all.join(", ")),
        )
    } else {
        (
            "False",
            "NotAlive",
            format!(
                "observer {} is not alive in Kafka (fenced, gone from the metadata or not answering): it holds no current copy and cannot take over if a zone of primaries is lost. Nothing is promoted for it: observers never count toward min ISR",
                gone.join(", ")
            ),
        )
    };
    let previous = stored.iter().find(|c| c.type_ == OBSERVERS_AVAILABLE);
    if previous.is_some_and(|c| c.status == status && c.reason == reason && c.message == message) {
        return None;
    }
    let last_transition_time = previous
        .filter(|c| c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or(Time(now));
    Some(Condition {
        type_: OBSERVERS_AVAILABLE.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        observed_generation: generation,
        last_transition_time,
    })
}

/// Writes the condition with this module's own field manager.
pub async fn apply(
    api: &Api<ObserverSet>,
    name: &str,
    condition: &Condition,
) -> Result<(), kube::Error> {
    let body = writers::status_body(json!({ "conditions": [condition] }));
    api.patch_status(
        name,
        &PatchParams::apply(writers::OBSERVER_HEALTH).force(),
        &Patch::Apply(&body),
    )
    .await
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::promotion::BrokerState;

    fn snapshot(alive: &[BrokerId], dead: &[BrokerId], source: SourceHealth) -> ClusterSnapshot {
        let mut brokers = BTreeMap::new();
        for &id in alive {
            brokers.insert(
                id,
                BrokerState {
                    registered: true,
                    reachable: true,
                },
            );
        }
        for &id in dead {
            brokers.insert(
                id,
                BrokerState {
                    registered: false,
                    reachable: false,
                },
            );
        }
        ClusterSnapshot {
            undescribed_topics: Vec::new(),
            taken_at: Timestamp::from_second(1_000).unwrap(),
            source,
            brokers,
            partitions: vec![],
        }
    }

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    #[test]
    fn an_observer_gone_from_kafka_turns_it_false_naming_it_and_a_repeat_writes_nothing() {
        let observers = BTreeSet::from([4]);
        let down = snapshot(&[1, 2, 3], &[4], SourceHealth::Healthy);
        let c = after_scan(&observers, &down, &[], Some(2), t(10)).expect("first");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "NotAlive")
        );
        assert!(
            c.message.contains("observer 4 is not alive"),
            "{}",
            c.message
        );
        assert_eq!(c.observed_generation, Some(2));
        assert_eq!(
            after_scan(&observers, &down, std::slice::from_ref(&c), Some(2), t(20)),
            None
        );
        // A broker missing from the snapshot altogether is not alive either.
        let missing = snapshot(&[1, 2, 3], &[], SourceHealth::Healthy);
        assert_eq!(
            after_scan(&observers, &missing, &[], None, t(10))
                .unwrap()
                .status,
            "False"
        );
    }

    #[test]
    fn back_alive_turns_it_true_with_a_new_transition_time() {
        let observers = BTreeSet::from([4, 5]);
        let down = after_scan(
            &observers,
            &snapshot(&[1, 4], &[5], SourceHealth::Healthy),
            &[],
            None,
            t(10),
        )
        .unwrap();
        assert!(down.message.contains("observer 5 "), "{}", down.message);
        let up = after_scan(
            &observers,
            &snapshot(&[1, 4, 5], &[], SourceHealth::Healthy),
            &[down],
            None,
            t(30),
        )
        .unwrap();
        assert_eq!(
            (up.status.as_str(), up.last_transition_time.clone()),
            ("True", Time(t(30)))
        );
        assert!(up.message.contains("4, 5"), "{}", up.message);
    }

    #[test]
    fn an_unreadable_cluster_or_no_observer_writes_nothing() {
        let unhealthy = SourceHealth::Unhealthy {
            reason: "timed out".into(),
        };
        assert_eq!(
            after_scan(
                &BTreeSet::from([4]),
                &snapshot(&[], &[4], unhealthy),
                &[],
                None,
                t(1)
            ),
            None,
            "unknown is not gone"
        );
        assert_eq!(
            after_scan(
                &BTreeSet::new(),
                &snapshot(&[1], &[], SourceHealth::Healthy),
                &[],
                None,
                t(1)
            ),
            None
        );
    }
}
