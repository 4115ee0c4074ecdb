//! From a planner decision to what the reconciler reports: the status fields it owns and the
//! Events it publishes. Pure and unit-tested.

use std::collections::BTreeSet;

use k8s_openapi::jiff::Timestamp;

use super::conditions::{condition_values, merge_conditions, ConditionValue, READY};
use super::observe::AckBasis;
use crate::crd::{NodeId, ObserverSetStatus, Phase, RolloutStatus};
use crate::k8s::events::reason;
use crate::rollout::acknowledgement::FILE_TTL_BASIS;
use crate::rollout::config_map::config_map_name;
use crate::rollout::model::role_of;
use crate::rollout::{Happening, RolloutDecision, RolloutState};

/// The Ready message of a set with nothing in flight (`conditions::condition_values`).
const READY_MESSAGE: &str = "every pod acknowledged the desired observer set";

/// The planner's persisted state, read back from status.
pub fn state_of(status: &ObserverSetStatus) -> RolloutState {
    RolloutState {
        revision: status.revision,
        effective: status.effective_observers.clone(),
        roles: status.roles.clone(),
        rollout: status.rollout.clone(),
    }
}

/// The status after `decision`. `autoPromotions`, `plan` and `engineState` are carried over untouched (they
/// are not even sent: see `status_patch::status_patch`). `basis` says which pods of the step
/// the agents were asked about this pass are judged on the file plus the cache TTL (their JVM
/// reports nothing): the conditions say so.
pub fn status_after(
    previous: &ObserverSetStatus,
    generation: Option<i64>,
    desired: &BTreeSet<NodeId>,
    decision: &RolloutDecision,
    basis: Option<&AckBasis>,
    now: Timestamp,
) -> ObserverSetStatus {
    let state = &decision.state;
    let phase = state.phase();
    let mut values = condition_values(phase, state.rollout.as_ref(), None);
    say_basis(&mut values, previous, decision, basis);
    ObserverSetStatus {
        observed_generation: generation,
        phase: Some(phase),
        desired_observers: desired.iter().copied().collect(),
        effective_observers: state.effective.clone(),
        revision: state.revision,
        writer_epoch: previous.writer_epoch,
        leader_epoch: previous.leader_epoch,
        roles: state.roles.clone(),
        rollout: state.rollout.clone(),
        auto_promotions: previous.auto_promotions.clone(),
        plan: previous.plan.clone(),
        engine_state: previous.engine_state.clone(),
        conditions: merge_conditions(&previous.conditions, &values, generation, now),
        history: previous.history.clone(),
        last_action: previous.last_action.clone(),
        partitions: previous.partitions.clone(),
        members: previous.members.clone(),
        // Not sent (`status_patch`): each member's own replica writes it.
        local_view: previous.local_view.clone(),
    }
}

/// `"; kafka-broker-0, kafka-broker-1: file + cache TTL (...)"`, or nothing when every pod's
/// JVM reports what it loaded.
fn basis_note(basis: &AckBasis) -> String {
    if basis.file_ttl.is_empty() {
        return String::new();
    }
    let pods: Vec<&str> = basis.file_ttl.iter().map(String::as_str).collect();
    format!(
        "; acknowledgement of {} ({}): {FILE_TTL_BASIS}",
        pods.join(", "),
        basis.role
    )
}

/// Appends how the pods are acknowledged to the condition messages (pure): during a step, the
/// basis of that step's pods; when a rollout completes, the basis of its last step, kept in the
/// Ready message until the next rollout.
fn say_basis(
    values: &mut [ConditionValue; 3],
    previous: &ObserverSetStatus,
    decision: &RolloutDecision,
    basis: Option<&AckBasis>,
) {
    let current =
        |r: &RolloutStatus, b: &AckBasis| role_of(r.step) == b.role && r.revision == b.revision;
    let completed = decision.happenings.iter().find_map(|h| match h {
        Happening::RolloutComplete { revision, .. } => Some(*revision),
        _ => None,
    });
    match (&decision.state.rollout, completed) {
        (Some(r), _) => {
            let Some(note) = basis.filter(|b| current(r, b)).map(basis_note) else {
                return;
            };
            for v in values.iter_mut().filter(|v| !v.message.is_empty()) {
                v.message.push_str(&note);
            }
        }
        (None, Some(revision)) => {
            let note = basis
                .filter(|b| b.revision == revision)
                .map(basis_note)
                .unwrap_or_default();
            for v in values.iter_mut().filter(|v| v.type_ == READY) {
                v.message.push_str(&note);
            }
        }
        (None, None) => {
            // Nothing rolled out this pass: keep the note of the rollout that made it Ready.
            let kept = previous
                .conditions
                .iter()
                .find(|c| c.type_ == READY && c.status == "True")
                .filter(|c| c.message.starts_with(READY_MESSAGE));
            if let Some(kept) = kept {
                for v in values
                    .iter_mut()
                    .filter(|v| v.type_ == READY && v.status && v.message == READY_MESSAGE)
                {
                    v.message = kept.message.clone();
                }
            }
        }
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

/// The status of an ObserverSet in conflict with an older one: like [`status_invalid`], the
/// rollout state is kept as it is, only phase and conditions change (naming the other set).
pub fn status_conflict(
    previous: &ObserverSetStatus,
    generation: Option<i64>,
    message: &str,
    now: Timestamp,
) -> ObserverSetStatus {
    let values = condition_values(Phase::Conflict, previous.rollout.as_ref(), Some(message));
    ObserverSetStatus {
        observed_generation: generation,
        phase: Some(Phase::Conflict),
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

impl Note {
    pub fn event_type(&self) -> kube::runtime::events::EventType {
        if self.warning {
            kube::runtime::events::EventType::Warning
        } else {
            kube::runtime::events::EventType::Normal
        }
    }
}

/// An Event for every change of a member cluster's reachability (`status.members`): Warning
/// `MemberUnreachable` when lost, `MemberReturned` when it answers again.
pub fn member_notes(changes: &[super::member_reach::ReachChange]) -> Vec<Note> {
    changes
        .iter()
        .map(|c| Note {
            warning: c.lost,
            reason: if c.lost {
                reason::MEMBER_UNREACHABLE
            } else {
                reason::MEMBER_RETURNED
            },
            text: c.text.clone(),
        })
        .collect()
}

/// An Event for every change of the effective set, step, timeout and restored drift. A step
/// acknowledged in this pass says what the acknowledgement rests on (`basis`).
pub fn notes(name: &str, happenings: &[Happening], basis: Option<&AckBasis>) -> Vec<Note> {
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
            Happening::StepWritten {
                role,
                member,
                revision,
                pods,
            } => Note {
                warning: false,
                reason: reason::STEP_WRITTEN,
                text: format!(
                    "revision {revision} written to ConfigMap {}{}; waiting for {pods} {role} pod(s)",
                    config_map_name(name, *role),
                    if member.is_empty() { String::new() } else { format!(" of member {member}") }
                ),
            },
            Happening::StepAcknowledged { role, revision, took } => Note {
                warning: false,
                reason: reason::STEP_ACKNOWLEDGED,
                text: format!(
                    "every running {role} pod acknowledged revision {revision} after {took:?}{}",
                    match basis.filter(|b| b.role == *role && b.revision == *revision) {
                        Some(b) if b.file_ttl.is_empty() => " (every JVM reports it loaded it)".to_string(),
                        Some(b) => basis_note(b),
                        None => String::new(),
                    }
                ),
            },
            Happening::StepTimedOut { role, revision, pending } => Note {
                warning: true,
                reason: reason::ROLLOUT_TIMED_OUT,
                text: format!(
                    "revision {revision} not acknowledged by {role} pod(s) {} within rollout.timeout; still waiting (later roles are not written before these acknowledge)",
                    pending.join(", ")
                ),
            },
            Happening::StepWentOnWithout { role, revision, pods } => Note {
                warning: true,
                reason: reason::STEP_WENT_ON_WITHOUT,
                text: format!(
                    "the {role} step of revision {revision} (a promotion) went on without {}: they read the list when they return, and a demotion waits for them",
                    pods.iter().map(|e| format!("{} ({}: {})", e.pod, e.reason, e.message)).collect::<Vec<_>>().join("; ")
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
    use crate::rollout::RolloutState;

    fn now() -> Timestamp {
        "2026-11-29T09:00:00Z".parse().unwrap()
    }

    #[test]
    fn status_reports_desired_effective_and_phase() {
        let decision = RolloutDecision {
            state: RolloutState {
                revision: 2,
                effective: vec![4],
                ..Default::default()
            },
            writes: vec![],
            nudges: vec![],
            happenings: vec![],
            held_for: vec![],
        };
        let previous = ObserverSetStatus::default();
        let status = status_after(
            &previous,
            Some(3),
            &BTreeSet::from([4]),
            &decision,
            None,
            now(),
        );
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
            status_after(
                &status,
                Some(3),
                &BTreeSet::from([4]),
                &decision,
                None,
                later
            ),
            status
        );
    }

    #[test]
    fn conflict_keeps_the_rollout_state_and_names_the_other_set() {
        let previous = ObserverSetStatus {
            revision: 3,
            effective_observers: vec![4],
            ..Default::default()
        };
        let message = "ObserverSet kafka/old (older) already selects pod(s) b-0: ...";
        let status = status_conflict(&previous, Some(5), message, now());
        assert_eq!(status.phase, Some(Phase::Conflict));
        assert_eq!(
            (status.revision, status.effective_observers.clone()),
            (3, vec![4])
        );
        let ready = status
            .conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        assert_eq!(
            (
                ready.status.as_str(),
                ready.reason.as_str(),
                ready.message.as_str()
            ),
            ("False", "Conflict", message)
        );
        assert_eq!(ready.observed_generation, Some(5));
        // Stable: the same verdict again changes nothing (no status write, no Event).
        assert_eq!(status_conflict(&status, Some(5), message, now()), status);
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
    fn going_on_without_pods_is_a_warning_naming_them_and_why() {
        use crate::crd::{ExcuseReason, ExcusedPod};
        let notes = notes(
            "kafka",
            &[Happening::StepWentOnWithout {
                role: Role::Controller,
                revision: 9,
                pods: vec![ExcusedPod {
                    pod: "kafka-controller-2".into(),
                    reason: ExcuseReason::NodeNotReady,
                    message: "its node is not Ready and its agent has not answered since 2026-12-03T09:00:00Z".into(),
                }],
            }],
            None,
        );
        assert_eq!(notes.len(), 1);
        let note = &notes[0];
        assert!(note.warning);
        assert_eq!(note.reason, "StepWentOnWithout");
        assert!(
            note.text
                .contains("kafka-controller-2 (NodeNotReady: its node is not Ready")
                && note.text.contains("revision 9")
                && note.text.contains("a demotion waits for them"),
            "{}",
            note.text
        );
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
            None,
        );
        assert!(notes[0].text.contains("[4] -> []") && !notes[0].warning);
        assert!(notes[1].text.contains("kafka-controller-2") && notes[1].warning);
        assert!(notes[2].text.contains("kafka-observers-broker"));
    }

    fn file_ttl(role: Role, revision: i64, pods: &[&str]) -> AckBasis {
        AckBasis {
            role,
            revision,
            file_ttl: pods.iter().map(|p| p.to_string()).collect(),
        }
    }

    fn rolling(step: crate::crd::RolloutStep, pending: &[&str]) -> RolloutDecision {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
        RolloutDecision {
            state: RolloutState {
                revision: 8,
                rollout: Some(RolloutStatus {
                    revision: 8,
                    kind: RolloutKind::Promotion,
                    step,
                    started_at: MicroTime(now()),
                    step_started_at: MicroTime(now()),
                    target: vec![],
                    acknowledged: vec![],
                    pending: pending.iter().map(|p| p.to_string()).collect(),
                    excused: vec![],
                    timed_out: false,
                    may_excuse: true,
                }),
                ..Default::default()
            },
            writes: vec![],
            nudges: vec![],
            happenings: vec![],
            held_for: vec![],
        }
    }

    fn message(status: &ObserverSetStatus, type_: &str) -> String {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| c.message.clone())
            .unwrap_or_default()
    }

    #[test]
    fn the_conditions_say_which_pods_are_acknowledged_on_file_and_ttl() {
        use crate::crd::RolloutStep;
        let previous = ObserverSetStatus::default();
        let desired = BTreeSet::new();
        let decision = rolling(RolloutStep::Brokers, &["kafka-broker-1"]);
        let basis = file_ttl(Role::Broker, 8, &["kafka-broker-0", "kafka-broker-1"]);
        let status = status_after(&previous, Some(1), &desired, &decision, Some(&basis), now());
        let progressing = message(&status, "Progressing");
        assert!(
            progressing.contains("waiting for kafka-broker-1")
                && progressing.ends_with(
                    "acknowledgement of kafka-broker-0, kafka-broker-1 (broker): file + cache TTL (the JVM does not report what it loaded)"
                ),
            "{progressing}"
        );
        // Every JVM reports, or the basis is of another step: nothing to add.
        let jvm = file_ttl(Role::Broker, 8, &[]);
        let status = status_after(&previous, Some(1), &desired, &decision, Some(&jvm), now());
        assert!(!message(&status, "Progressing").contains("cache TTL"));
        let other = file_ttl(Role::Controller, 8, &["kafka-controller-0"]);
        let status = status_after(&previous, Some(1), &desired, &decision, Some(&other), now());
        assert!(!message(&status, "Progressing").contains("cache TTL"));
    }

    #[test]
    fn the_ready_message_keeps_the_basis_of_the_rollout_that_completed() {
        let desired = BTreeSet::new();
        let completed = RolloutDecision {
            state: RolloutState {
                revision: 8,
                ..Default::default()
            },
            writes: vec![],
            nudges: vec![],
            happenings: vec![Happening::RolloutComplete {
                revision: 8,
                observers: vec![],
                took: std::time::Duration::from_secs(3),
            }],
            held_for: vec![],
        };
        let basis = file_ttl(Role::Broker, 8, &["kafka-broker-0"]);
        let done = status_after(
            &ObserverSetStatus::default(),
            Some(1),
            &desired,
            &completed,
            Some(&basis),
            now(),
        );
        let ready = message(&done, "Ready");
        assert!(
            ready.starts_with(READY_MESSAGE)
                && ready.contains("kafka-broker-0 (broker): file + cache TTL"),
            "{ready}"
        );
        // Later passes with nothing in flight keep it, so the status does not flap.
        let idle = RolloutDecision {
            happenings: vec![],
            ..completed.clone()
        };
        let later = status_after(&done, Some(1), &desired, &idle, None, now());
        assert_eq!(later, done);
        // A rollout whose JVMs all report leaves the plain message.
        let jvm = file_ttl(Role::Broker, 8, &[]);
        let plain = status_after(
            &ObserverSetStatus::default(),
            Some(1),
            &desired,
            &completed,
            Some(&jvm),
            now(),
        );
        assert_eq!(message(&plain, "Ready"), READY_MESSAGE);
    }

    #[test]
    fn a_step_event_says_what_the_acknowledgement_rests_on() {
        let step = Happening::StepAcknowledged {
            role: Role::Controller,
            revision: 8,
            took: std::time::Duration::from_secs(2),
        };
        let jvm = file_ttl(Role::Controller, 8, &[]);
        let text = &notes("kafka", std::slice::from_ref(&step), Some(&jvm))[0].text;
        assert!(text.ends_with("(every JVM reports it loaded it)"), "{text}");
        let file = file_ttl(Role::Controller, 8, &["kafka-controller-2"]);
        let text = &notes("kafka", std::slice::from_ref(&step), Some(&file))[0].text;
        assert!(
            text.contains("kafka-controller-2 (controller): file + cache TTL (the JVM does not report what it loaded)"),
            "{text}"
        );
        // Time mode: no agents, no basis.
        let text = &notes("kafka", &[step], None)[0].text;
        assert!(text.ends_with("after 2s"), "{text}");
    }
}
