//! The `KafkaReachable` condition: whether the automation's last scan could read the Kafka
//! cluster. While it is False the engine acts on nothing (it never acts on stale or unknown
//! state), and the condition says why, next to the reconciler's Ready/Progressing/Degraded.
//!
//! Written by its own field manager ([`writers::KAFKA_HEALTH`]) as one entry of
//! `status.conditions` (a list keyed by `type`), so neither loop's apply removes the other's
//! conditions; only on a change; removed when the automation of a set stops.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::crd::ObserverSet;
use crate::kafka::security::SecretError;
use crate::promotion::SourceHealth;
use crate::writers;

pub const KAFKA_REACHABLE: &str = "KafkaReachable";

/// The condition a scan with this outcome calls for, or `None` when the stored one already says
/// it (same status, reason and message): pure.
pub fn after_scan(
    source: &SourceHealth,
    stored: &[Condition],
    generation: Option<i64>,
    now: Timestamp,
) -> Option<Condition> {
    let (status, reason, message) = match source {
        SourceHealth::Healthy => (
            "True",
            "Scanned",
            "the last scan read the cluster's metadata and offsets".to_string(),
        ),
        SourceHealth::Unhealthy { reason } => (
            "False",
            "ScanFailed",
            format!("the last scan could not read the Kafka cluster, so the automation promotes and demotes nothing until it can: {reason}"),
        ),
    };
    changed(status, reason, message, stored, generation, now)
}

/// The condition when the Secrets `spec.kafka` names cannot be used (missing, a key missing, a
/// bad certificate or key): False, reason `SecretInvalid`, the message naming the Secret and the
/// key; `None` when the stored one already says it. Pure.
pub fn after_secret_error(
    error: &SecretError,
    stored: &[Condition],
    generation: Option<i64>,
    now: Timestamp,
) -> Option<Condition> {
    let message = format!("no scan: the Kafka connection's Secrets cannot be used, so the automation promotes and demotes nothing until they can: {error}");
    changed("False", SECRET_INVALID, message, stored, generation, now)
}

pub const SECRET_INVALID: &str = "SecretInvalid";

/// The `KafkaReachable` condition with this status, reason and message, unless the stored one
/// says the same; the transition time kept while the status stays.
fn changed(
    status: &str,
    reason: &str,
    message: String,
    stored: &[Condition],
    generation: Option<i64>,
    now: Timestamp,
) -> Option<Condition> {
    let previous = stored.iter().find(|c| c.type_ == KAFKA_REACHABLE);
    if previous.is_some_and(|c| c.status == status && c.reason == reason && c.message == message) {
        return None;
    }
    let last_transition_time = previous
        .filter(|c| c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or(Time(now));
    Some(Condition {
        type_: KAFKA_REACHABLE.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        observed_generation: generation,
        last_transition_time,
    })
}

/// Writes the condition (`Some`) or removes this manager's (`None`).
pub async fn apply(
    api: &Api<ObserverSet>,
    name: &str,
    condition: Option<&Condition>,
) -> Result<(), kube::Error> {
    let body =
        writers::status_body(json!({ "conditions": condition.into_iter().collect::<Vec<_>>() }));
    api.patch_status(
        name,
        &PatchParams::apply(writers::KAFKA_HEALTH).force(),
        &Patch::Apply(&body),
    )
    .await
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhealthy(why: &str) -> SourceHealth {
        SourceHealth::Unhealthy { reason: why.into() }
    }

    #[test]
    fn a_failed_scan_sets_false_with_the_reason_and_a_repeat_writes_nothing() {
        let t0 = Timestamp::from_second(1_000).unwrap();
        let c = after_scan(&unhealthy("metadata: timed out"), &[], Some(3), t0).expect("first");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "ScanFailed")
        );
        assert!(c.message.contains("metadata: timed out"), "{}", c.message);
        assert_eq!(c.observed_generation, Some(3));
        let later = Timestamp::from_second(2_000).unwrap();
        assert_eq!(
            after_scan(
                &unhealthy("metadata: timed out"),
                std::slice::from_ref(&c),
                Some(3),
                later
            ),
            None
        );
    }

    #[test]
    fn the_transition_time_moves_only_when_the_status_changes() {
        let t0 = Timestamp::from_second(1_000).unwrap();
        let down = after_scan(&unhealthy("a"), &[], None, t0).unwrap();
        let t1 = Timestamp::from_second(1_010).unwrap();
        let other_reason =
            after_scan(&unhealthy("b"), std::slice::from_ref(&down), None, t1).unwrap();
        assert_eq!(other_reason.last_transition_time, Time(t0), "still False");
        let t2 = Timestamp::from_second(1_020).unwrap();
        let up = after_scan(&SourceHealth::Healthy, &[other_reason], None, t2).unwrap();
        assert_eq!(
            (up.status.as_str(), up.last_transition_time.clone()),
            ("True", Time(t2))
        );
    }

    #[test]
    fn other_conditions_are_not_this_one() {
        let t0 = Timestamp::from_second(1_000).unwrap();
        let ready = Condition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: "Scanned".into(),
            message: "the last scan read the cluster's metadata and offsets".into(),
            observed_generation: None,
            last_transition_time: Time(t0),
        };
        assert!(after_scan(&SourceHealth::Healthy, &[ready], None, t0).is_some());
    }

    #[test]
    fn an_unusable_secret_names_it_and_a_good_scan_clears_it() {
        let t0 = Timestamp::from_second(1_000).unwrap();
        let missing = SecretError::KeyMissing {
            namespace: "team-a".into(),
            secret: "kafka-user".into(),
            key: "password".into(),
            field: "spec.kafka.sasl.secretRef.passwordKey",
        };
        let c = after_secret_error(&missing, &[], Some(2), t0).expect("first");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", SECRET_INVALID)
        );
        assert!(
            c.message
                .contains("Secret team-a/kafka-user has no key password"),
            "{}",
            c.message
        );
        assert_eq!(
            after_secret_error(&missing, std::slice::from_ref(&c), Some(2), t0),
            None,
            "a repeat writes nothing"
        );
        let t1 = Timestamp::from_second(1_010).unwrap();
        let up = after_scan(&SourceHealth::Healthy, &[c], Some(2), t1).expect("fixed");
        assert_eq!(
            (up.status.as_str(), up.last_transition_time),
            ("True", Time(t1))
        );
    }
}
