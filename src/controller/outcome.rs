//! From a planner decision to what the reconciler reports: the status fields it owns and the
//! Events it publishes. Pure and unit-tested.

use std::collections::BTreeSet;

use k8s_openapi::jiff::Timestamp;

use crate::crd::{NodeId, ObserverSetStatus, Phase};
use crate::kube::config_map::config_map_name;
use crate::kube::events::reason;
use crate::kube::status::{condition_values, merge_conditions};
use crate::plan::{Decision, Happening, RolloutState};

/// The planner's persisted state, read back from status.
pub fn state_of(status: &ObserverSetStatus) -> RolloutState {
    RolloutState {
        revision: status.revision,
        effective: status.effective_observers.clone(),
        roles: status.roles.clone(),
        rollout: status.rollout.clone(),
    }
}

/// The status after `decision`. `autoPromotions` and `plan` are carried over untouched (they
/// are not even sent: see `kube::status::status_patch`).
pub fn status_after(
    previous: &ObserverSetStatus,
    generation: Option<i64>,
    desired: &BTreeSet<NodeId>,
    decision: &Decision,
    now: Timestamp,
) -> ObserverSetStatus {
    let state = &decision.state;
    let phase = state.phase();
    let values = condition_values(phase, state.rollout.as_ref(), None);
    ObserverSetStatus {
        observed_generation: generation,
        phase: Some(phase),
        desired_observers: desired.iter().copied().collect(),
        effective_observers: state.effective.clone(),
        revision: state.revision,
        roles: state.roles.clone(),
        rollout: state.rollout.clone(),
        auto_promotions: previous.auto_promotions.clone(),
        plan: previous.plan.clone(),
        conditions: merge_conditions(&previous.conditions, &values, generation, now),
    }
}

/// The status of an ObserverSet that cannot be used: the rollout state is kept as it is (the
/// ConfigMaps keep their content), only phase and conditions say what to fix.
pub fn status_invalid(
    previous: &ObserverSetStatus,
    generation: Option<i64>,
    problem: &str,
    now: Timestamp,
) -> ObserverSetStatus {
    let values = condition_values(Phase::Invalid, previous.rollout.as_ref(), Some(problem));
    ObserverSetStatus {
        observed_generation: generation,
        phase: Some(Phase::Invalid),
        conditions: merge_conditions(&previous.conditions, &values, generation, now),
        ..previous.clone()
    }
}

/// One Event to publish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    pub warning: bool,
    pub reason: &'static str,
    pub text: String,
}

/// An Event for every change of the effective set, step, timeout and restored drift.
pub fn notes(name: &str, happenings: &[Happening]) -> Vec<Note> {
    happenings
        .iter()
        .map(|h| match h {
            Happening::RolloutStarted { revision, kind, from, to, superseded } => Note {
                warning: false,
                reason: reason::ROLLOUT_STARTED,
                text: format!(
                    "effective observers {from:?} -> {to:?} ({kind:?}), revision {revision}{}: controllers first, then brokers",
                    superseded.map(|s| format!(", replacing revision {s} still in flight")).unwrap_or_default()
                ),
            },
            Happening::StepWritten { role, revision, pods } => Note {
                warning: false,
                reason: reason::STEP_WRITTEN,
                text: format!(
                    "revision {revision} written to ConfigMap {}; waiting for {pods} {role} pod(s)",
                    config_map_name(name, *role)
                ),
            },
            Happening::StepAcknowledged { role, revision, took } => Note {
                warning: false,
                reason: reason::STEP_ACKNOWLEDGED,
                text: format!("every running {role} pod acknowledged revision {revision} after {took:?}"),
            },
            Happening::StepTimedOut { role, revision, pending } => Note {
                warning: true,
                reason: reason::ROLLOUT_TIMED_OUT,
                text: format!(
                    "revision {revision} not acknowledged by {role} pod(s) {} within rollout.timeout; still waiting (later roles are not written before these acknowledge)",
                    pending.join(", ")
                ),
            },
            Happening::RolloutComplete { revision, observers, took } => Note {
                warning: false,
                reason: reason::ROLLOUT_COMPLETE,
                text: format!("every pod reads revision {revision}: effective observers {observers:?} (took {took:?})"),
            },
            Happening::DriftRestored { role, revision } => Note {
                warning: true,
                reason: reason::DRIFT_RESTORED,
                text: format!(
                    "ConfigMap {} was edited or deleted by someone else; restored revision {revision}",
                    config_map_name(name, *role)
                ),
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{Role, RolloutKind};
    use crate::plan::RolloutState;

    fn now() -> Timestamp {
        "2026-11-29T09:00:00Z".parse().unwrap()
    }

    #[test]
    fn status_reports_desired_effective_and_phase() {
        let decision = Decision {
            state: RolloutState {
                revision: 2,
                effective: vec![4],
                ..Default::default()
            },
            writes: vec![],
            nudges: vec![],
            happenings: vec![],
        };
        let previous = ObserverSetStatus::default();
        let status = status_after(&previous, Some(3), &BTreeSet::from([4]), &decision, now());
        assert_eq!(status.phase, Some(Phase::Ready));
        assert_eq!(
            (
                status.desired_observers.clone(),
                status.effective_observers.clone()
            ),
            (vec![4], vec![4])
        );
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(status.conditions.len(), 3);
        // Same inputs later: identical status, so no write and no event loop.
        let later: Timestamp = "2026-11-29T10:00:00Z".parse().unwrap();
        assert_eq!(
            status_after(&status, Some(3), &BTreeSet::from([4]), &decision, later),
            status
        );
    }

    #[test]
    fn invalid_keeps_the_rollout_state_and_says_what_to_fix() {
        let previous = ObserverSetStatus {
            revision: 7,
            effective_observers: vec![4],
            ..Default::default()
        };
        let status = status_invalid(
            &previous,
            Some(2),
            "spec.observers lists 4 more than once",
            now(),
        );
        assert_eq!(status.phase, Some(Phase::Invalid));
        assert_eq!(
            (status.revision, status.effective_observers.clone()),
            (7, vec![4])
        );
        let ready = status
            .conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        assert_eq!(ready.status, "False");
        assert!(ready.message.contains("more than once"));
    }

    #[test]
    fn notes_name_the_config_map_and_the_pods() {
        let notes = notes(
            "kafka",
            &[
                Happening::RolloutStarted {
                    revision: 8,
                    kind: RolloutKind::Promotion,
                    from: vec![4],
                    to: vec![],
                    superseded: None,
                },
                Happening::StepTimedOut {
                    role: Role::Controller,
                    revision: 8,
                    pending: vec!["kafka-controller-2".into()],
                },
                Happening::DriftRestored {
                    role: Role::Broker,
                    revision: 8,
                },
            ],
        );
        assert!(notes[0].text.contains("[4] -> []") && !notes[0].warning);
        assert!(notes[1].text.contains("kafka-controller-2") && notes[1].warning);
        assert!(notes[2].text.contains("kafka-observers-broker"));
    }
}
