//! The reconciler's conditions, built the Kubernetes way: Ready, Progressing and Degraded, one
//! entry per type, `observedGeneration` set, `lastTransitionTime` changing only when `status`
//! changes. Pure.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use crate::crd::{Phase, RolloutStatus};

pub const READY: &str = "Ready";
pub const PROGRESSING: &str = "Progressing";
pub const DEGRADED: &str = "Degraded";
/// Over member clusters only: whether every member answered this pass.
pub const MEMBERS_REACHABLE: &str = "MembersReachable";

/// One condition as decided this reconcile, before timestamps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConditionValue {
    pub type_: &'static str,
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}

/// Ready / Progressing / Degraded for a phase. `problem` is the reason the set is Invalid
/// (spec or pods unusable), if any.
pub fn condition_values(
    phase: Phase,
    rollout: Option<&RolloutStatus>,
    problem: Option<&str>,
) -> [ConditionValue; 3] {
    let pending = |r: &RolloutStatus| {
        format!(
            "revision {} ({:?}), step {:?}: waiting for {}{}",
            r.revision,
            r.kind,
            r.step,
            r.pending.join(", "),
            going_on_without(r)
        )
    };
    let value = |type_, status, reason, message: String| ConditionValue {
        type_,
        status,
        reason,
        message,
    };
    match (phase, rollout) {
        (Phase::Invalid, _) => {
            let why = problem
                .unwrap_or("the ObserverSet cannot be used")
                .to_string();
            [
                value(READY, false, "Invalid", why.clone()),
                value(
                    PROGRESSING,
                    false,
                    "Invalid",
                    "nothing is rolled out until the problem is fixed".into(),
                ),
                value(DEGRADED, true, "Invalid", why),
            ]
        }
        (Phase::Conflict, _) => {
            let why = problem
                .unwrap_or("another ObserverSet selects the same pods")
                .to_string();
            [
                value(READY, false, "Conflict", why.clone()),
                value(
                    PROGRESSING,
                    false,
                    "Conflict",
                    "nothing is rolled out while another ObserverSet holds the pods".into(),
                ),
                value(DEGRADED, true, "Conflict", why),
            ]
        }
        (Phase::Degraded, r) => {
            let msg = match r {
                Some(r) => format!(
                    "revision {} step {:?} not acknowledged within the rollout timeout by: {}",
                    r.revision,
                    r.step,
                    r.pending.join(", ")
                ),
                None => problem.unwrap_or("degraded").to_string(),
            };
            [
                value(READY, false, "RolloutTimedOut", msg.clone()),
                value(
                    PROGRESSING,
                    r.is_some(),
                    "RolloutTimedOut",
                    r.map(pending).unwrap_or_default(),
                ),
                value(DEGRADED, true, "RolloutTimedOut", msg),
            ]
        }
        (Phase::RollingOut, r) => {
            let msg = r.map(pending).unwrap_or_else(|| "rolling out".into());
            [
                value(READY, false, "RollingOut", msg.clone()),
                value(PROGRESSING, true, "RollingOut", msg),
                value(DEGRADED, false, "AsExpected", String::new()),
            ]
        }
        (Phase::Ready, _) => [
            value(
                READY,
                true,
                "Acknowledged",
                "every pod acknowledged the desired observer set".into(),
            ),
            value(PROGRESSING, false, "Idle", "no rollout in progress".into()),
            value(DEGRADED, false, "AsExpected", String::new()),
        ],
    }
}

/// `"; going on without kafka-controller-2 (NodeNotReady)"`, or nothing.
fn going_on_without(r: &RolloutStatus) -> String {
    if r.excused.is_empty() {
        return String::new();
    }
    let pods: Vec<String> = r
        .excused
        .iter()
        .map(|e| format!("{} ({})", e.pod, e.reason))
        .collect();
    format!("; going on without {}", pods.join(", "))
}

/// The condition types the reconciler owns; the others in `status.conditions` belong to other
/// writers (`automation::kafka_health`) and pass through untouched.
pub const OWN_CONDITIONS: [&str; 4] = [READY, PROGRESSING, DEGRADED, MEMBERS_REACHABLE];

/// `MembersReachable` of an install over members: `unreachable` are the members not read or
/// not written this pass (with why), `held` whether the rollout waits for them (a demotion or
/// a mixed change does not start or take a step while any member is unreachable).
pub fn members_reachable(unreachable: &[(String, String)], held: bool) -> ConditionValue {
    if unreachable.is_empty() {
        return ConditionValue {
            type_: MEMBERS_REACHABLE,
            status: true,
            reason: "AllMembersAnswered",
            message: "every member cluster answered this pass".into(),
        };
    }
    let names: Vec<String> = unreachable
        .iter()
        .map(|(m, why)| format!("{m} ({why})"))
        .collect();
    let waits = if held {
        "the rollout waits for them: a demotion or a mixed change takes no step while a member is unreachable"
    } else {
        "nothing is written there until they answer; a promotion goes on without their pods only where Kafka no longer lists them"
    };
    ConditionValue {
        type_: MEMBERS_REACHABLE,
        status: false,
        reason: "MemberUnreachable",
        message: format!("not reached this pass: {}; {waits}", names.join(", ")),
    }
}

/// Sets one decided condition in `conditions`, the others untouched (pure).
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    value: &ConditionValue,
    generation: Option<i64>,
    now: Timestamp,
) {
    let decided = decide(conditions, value, generation, now);
    match conditions.iter_mut().find(|c| c.type_ == value.type_) {
        Some(c) => *c = decided,
        None => conditions.push(decided),
    }
}

fn decide(
    previous: &[Condition],
    v: &ConditionValue,
    generation: Option<i64>,
    now: Timestamp,
) -> Condition {
    let status = if v.status { "True" } else { "False" }.to_string();
    let last_transition_time = previous
        .iter()
        .find(|c| c.type_ == v.type_ && c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or(Time(now));
    Condition {
        type_: v.type_.into(),
        status,
        reason: v.reason.into(),
        message: v.message.clone(),
        observed_generation: generation,
        last_transition_time,
    }
}

/// Merges decided values into the previous conditions: a condition whose status did not change
/// keeps its lastTransitionTime; another writer's conditions stay where they were, so an
/// unchanged status compares equal to the stored one (pure).
pub fn merge_conditions(
    previous: &[Condition],
    values: &[ConditionValue],
    generation: Option<i64>,
    now: Timestamp,
) -> Vec<Condition> {
    let decided = |v: &ConditionValue| decide(previous, v, generation, now);
    let mut merged: Vec<Condition> = previous
        .iter()
        .filter_map(|c| match values.iter().find(|v| v.type_ == c.type_) {
            Some(v) => Some(decided(v)),
            None if OWN_CONDITIONS.contains(&c.type_.as_str()) => None,
            None => Some(c.clone()),
        })
        .collect();
    for v in values {
        if !merged.iter().any(|c| c.type_ == v.type_) {
            merged.push(decided(v));
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_reachable_names_the_lost_member_and_what_waits_for_it() {
        let lost = [("tie".to_string(), "no answer".to_string())];
        let held = members_reachable(&lost, true);
        assert!(!held.status);
        assert_eq!(held.reason, "MemberUnreachable");
        assert!(
            held.message
                .starts_with("not reached this pass: tie (no answer); the rollout waits for them"),
            "{}",
            held.message
        );
        assert!(members_reachable(&lost, false)
            .message
            .contains("a promotion goes on without their pods"));
        assert!(members_reachable(&[], false).status);
        // Set once, then again with the same status: the transition time stays.
        let mut conditions = Vec::new();
        set_condition(&mut conditions, &held, Some(1), at("2026-12-07T00:00:00Z"));
        set_condition(&mut conditions, &held, Some(2), at("2026-12-07T00:01:00Z"));
        assert_eq!(conditions.len(), 1);
        assert_eq!(
            conditions[0].last_transition_time,
            Time(at("2026-12-07T00:00:00Z"))
        );
        assert_eq!(conditions[0].observed_generation, Some(2));
    }

    fn foreign(type_: &str, t: Timestamp) -> Condition {
        Condition {
            type_: type_.into(),
            status: "False".into(),
            reason: "ScanFailed".into(),
            message: "timed out".into(),
            observed_generation: Some(1),
            last_transition_time: Time(t),
        }
    }

    #[test]
    fn another_writers_condition_stays_in_place() {
        let t0 = Timestamp::from_second(1_000).unwrap();
        let values = condition_values(Phase::Ready, None, None);
        let own = merge_conditions(&[], &values, Some(1), t0);
        let mut stored = vec![foreign("KafkaReachable", t0)];
        stored.extend(own.iter().cloned());
        let t1 = Timestamp::from_second(2_000).unwrap();
        let merged = merge_conditions(&stored, &values, Some(1), t1);
        assert_eq!(
            merged, stored,
            "nothing changed: equal to what is stored, so nothing is written"
        );
    }

    #[test]
    fn a_condition_the_reconciler_no_longer_decides_is_dropped() {
        let t0 = Timestamp::from_second(1_000).unwrap();
        let mut stored =
            merge_conditions(&[], &condition_values(Phase::Ready, None, None), None, t0);
        stored.push(foreign("KafkaReachable", t0));
        let merged = merge_conditions(
            &stored,
            &condition_values(Phase::Ready, None, None)[..1],
            None,
            t0,
        );
        let types: Vec<&str> = merged.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, [READY, "KafkaReachable"]);
    }
    use crate::crd::{RolloutKind, RolloutStep};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn rollout(pending: &[&str]) -> RolloutStatus {
        RolloutStatus {
            revision: 8,
            kind: RolloutKind::Promotion,
            step: RolloutStep::Controllers,
            started_at: MicroTime(at("2026-11-29T09:00:00Z")),
            step_started_at: MicroTime(at("2026-11-29T09:00:00Z")),
            target: vec![],
            acknowledged: vec![],
            pending: pending.iter().map(|s| s.to_string()).collect(),
            excused: vec![],
            timed_out: false,
            may_excuse: true,
        }
    }

    #[test]
    fn degraded_names_the_pods_that_did_not_acknowledge() {
        let r = rollout(&["kafka-controller-2"]);
        let [ready, progressing, degraded] = condition_values(Phase::Degraded, Some(&r), None);
        assert!(!ready.status && progressing.status && degraded.status);
        assert!(
            degraded.message.contains("kafka-controller-2"),
            "{}",
            degraded.message
        );
    }

    #[test]
    fn a_step_going_on_without_pods_says_so() {
        use crate::crd::{ExcuseReason, ExcusedPod};
        let mut r = rollout(&["kafka-broker-1"]);
        r.excused = vec![ExcusedPod {
            pod: "kafka-controller-2".into(),
            reason: ExcuseReason::Terminating,
            message: "it is being deleted".into(),
        }];
        let [ready, progressing, _] = condition_values(Phase::RollingOut, Some(&r), None);
        for message in [&ready.message, &progressing.message] {
            assert!(
                message.contains(
                    "waiting for kafka-broker-1; going on without kafka-controller-2 (Terminating)"
                ),
                "{message}"
            );
        }
        r.excused.clear();
        let [ready, ..] = condition_values(Phase::RollingOut, Some(&r), None);
        assert!(!ready.message.contains("going on without"));
    }

    #[test]
    fn ready_has_one_true_condition() {
        let values = condition_values(Phase::Ready, None, None);
        assert_eq!(values.iter().filter(|v| v.status).count(), 1);
        assert_eq!(values[0].type_, READY);
    }

    #[test]
    fn transition_time_moves_only_when_status_changes() {
        let t0 = at("2026-11-29T09:00:00Z");
        let t1 = at("2026-11-29T09:05:00Z");
        let r = rollout(&["a"]);
        let first = merge_conditions(
            &[],
            &condition_values(Phase::RollingOut, Some(&r), None),
            Some(1),
            t0,
        );
        // Same phase, new message: times kept.
        let r2 = rollout(&["b"]);
        let second = merge_conditions(
            &first,
            &condition_values(Phase::RollingOut, Some(&r2), None),
            Some(2),
            t1,
        );
        assert!(second.iter().all(|c| c.last_transition_time == Time(t0)));
        assert!(second.iter().all(|c| c.observed_generation == Some(2)));
        // Ready flips: Ready and Progressing move, Degraded (still False) keeps its time.
        let third = merge_conditions(
            &second,
            &condition_values(Phase::Ready, None, None),
            Some(2),
            t1,
        );
        let time_of = |t: &str| {
            third
                .iter()
                .find(|c| c.type_ == t)
                .unwrap()
                .last_transition_time
                .clone()
        };
        assert_eq!(time_of(READY), Time(t1));
        assert_eq!(time_of(PROGRESSING), Time(t1));
        assert_eq!(time_of(DEGRADED), Time(t0));
    }
}
