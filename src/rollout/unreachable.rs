//! Unreachable pods: whether a rollout step may go on without a running pod that has not
//! acknowledged it, and why. Pure: the shell reads the facts (the pod's deletion timestamp, its
//! Node's Ready condition, how long its agent has been silent, whether Kafka still lists the
//! node as alive) into [`PodObservation`], the state machine asks [`excuse`].
//!
//! Why this exists: in a zone outage the lost zone's pods stay `Running` in the API (then
//! `Terminating`) while their node is NotReady and their agent answers nothing. Waiting for
//! them would hold a promotion's controllers step forever, exactly when the observer is needed.
//!
//! The rule (docs/architecture.md, "Unreachable pods"): a pod is excused only when
//! 1. the rollout may excuse at all ([`may_excuse`]): a pure promotion, in Agent mode, whose
//!    target every list a pod may still hold contains. A pod left behind then holds a list
//!    with *more* observers than the target: it still treats the promoted id as an observer,
//!    which is the conservative direction (a controller rejects the ISR expansion with
//!    INELIGIBLE_REPLICA until it reads the list, a broker does not propose it); it never lets
//!    an observer lead. A demotion or a mixed change never excuses: a left-behind controller
//!    would lack the demoted id and could elect it;
//! 2. its agent is silent now (a pod whose agent answers, even with an old revision, is alive
//!    and will catch up: it is waited for);
//! 3. and one of: its Node is not Ready; it is terminating; or Kafka no longer lists the node as
//!    alive. Silence alone (or with Kafka unknown or saying alive) is not enough: a slow or
//!    restarting agent in front of a live JVM must be waited for. Kafka's verdict is itself a
//!    judgement over time (a broker is fenced after `broker.session.timeout.ms`, a voter the
//!    quorum has not heard from for 2 s is reported behind), so the operator adds no wait of
//!    its own on top: that wait only delayed the promotion the outage needs (it was 3 s, and
//!    made the controllers' step of a zone outage end on the node's NotReady instead).

use std::collections::BTreeSet;

use super::model::PodObservation;
use crate::crd::{AckMode, ExcuseReason, ExcusedPod, NodeId, RolloutKind, RolloutStatus};

/// Whether a rollout from the last completed set `effective` to `target` may go on without
/// unreachable pods, given the rollout it supersedes (if any). True only for a promotion
/// (`kind`) whose target is contained in every list a pod may still hold: the last completed
/// set (every pod read it, or was itself excused holding a superset of it) and the targets of
/// the superseded rollouts since (some pods may have read those). A superseded rollout that
/// could not excuse, or an older status that does not say, makes the new one strict too: its
/// history is not known.
pub fn may_excuse(
    kind: RolloutKind,
    effective: &BTreeSet<NodeId>,
    target: &BTreeSet<NodeId>,
    superseded: Option<&RolloutStatus>,
) -> bool {
    kind == RolloutKind::Promotion
        && target.is_subset(effective)
        && superseded.is_none_or(|r| r.may_excuse && target.iter().all(|id| r.target.contains(id)))
}

/// Why Kubernetes or Kafka say `pod` is lost, if they do: its Node not Ready, its deletion, or
/// Kafka no longer listing its node as alive. The facts of an excusal, silence aside; also what
/// makes the shell ask the pod's agent with a short budget (`reconciler::observe::quick_asks`).
pub fn lost(pod: &PodObservation) -> Option<(ExcuseReason, &'static str)> {
    if pod.node_ready == Some(false) {
        Some((ExcuseReason::NodeNotReady, "its node is not Ready"))
    } else if pod.terminating {
        Some((ExcuseReason::Terminating, "it is being deleted"))
    } else if pod.kafka_alive == Some(false) {
        Some((
            ExcuseReason::GoneFromKafka,
            "Kafka no longer lists its node as alive",
        ))
    } else {
        None
    }
}

/// Whether the current step of `rollout` may go on without `pod`, which has not acknowledged
/// it, and why; `None`: the step waits for it.
pub fn excuse(rollout: &RolloutStatus, mode: AckMode, pod: &PodObservation) -> Option<ExcusedPod> {
    if mode != AckMode::Agent || rollout.kind != RolloutKind::Promotion || !rollout.may_excuse {
        return None;
    }
    let since = pod.agent_silent_since?;
    let (reason, why) = lost(pod)?;
    let message = format!("{why} and its agent has not answered since {since}");
    Some(ExcusedPod {
        pod: pod.name.clone(),
        reason,
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::RolloutStep;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    use k8s_openapi::jiff::{SignedDuration, Timestamp};

    fn t0() -> Timestamp {
        "2026-12-03T09:00:00Z".parse().unwrap()
    }

    fn at(secs: i64) -> Timestamp {
        t0().checked_add(SignedDuration::from_secs(secs)).unwrap()
    }

    fn set(ids: &[NodeId]) -> BTreeSet<NodeId> {
        ids.iter().copied().collect()
    }

    fn rollout(kind: RolloutKind) -> RolloutStatus {
        RolloutStatus {
            revision: 7,
            kind,
            step: RolloutStep::Controllers,
            started_at: MicroTime(t0()),
            step_started_at: MicroTime(t0()),
            target: vec![],
            acknowledged: vec![],
            pending: vec![],
            excused: vec![],
            timed_out: false,
            may_excuse: kind == RolloutKind::Promotion,
        }
    }

    /// A running pod whose node is Ready, not terminating, agent answering, Kafka unknown.
    fn healthy() -> PodObservation {
        PodObservation {
            name: "c-2".into(),
            running: true,
            nudged_revision: Some(7),
            nudged_at: Some(t0()),
            terminating: false,
            node_ready: Some(true),
            agent_silent_since: None,
            kafka_alive: None,
        }
    }

    fn silent(since: i64) -> PodObservation {
        PodObservation {
            agent_silent_since: Some(at(since)),
            ..healthy()
        }
    }

    fn reason(r: &RolloutStatus, mode: AckMode, pod: &PodObservation) -> Option<ExcuseReason> {
        excuse(r, mode, pod).map(|e| e.reason)
    }

    #[test]
    fn a_silent_pod_on_a_node_that_is_not_ready_is_excused() {
        let pod = PodObservation {
            node_ready: Some(false),
            ..silent(0)
        };
        let got = excuse(&rollout(RolloutKind::Promotion), AckMode::Agent, &pod).unwrap();
        assert_eq!(
            (got.pod.as_str(), got.reason),
            ("c-2", ExcuseReason::NodeNotReady)
        );
        assert!(
            got.message.contains("not Ready") && got.message.contains("2026-12-03T09:00:00Z"),
            "{}",
            got.message
        );
    }

    #[test]
    fn a_silent_terminating_pod_is_excused() {
        let pod = PodObservation {
            terminating: true,
            ..silent(0)
        };
        assert_eq!(
            reason(&rollout(RolloutKind::Promotion), AckMode::Agent, &pod),
            Some(ExcuseReason::Terminating)
        );
    }

    #[test]
    fn a_silent_pod_gone_from_kafka_is_excused_at_once() {
        // Kafka's verdict already waited (session timeout, quorum fetch lag): no bound on top.
        let pod = PodObservation {
            kafka_alive: Some(false),
            ..silent(0)
        };
        let r = rollout(RolloutKind::Promotion);
        assert_eq!(
            reason(&r, AckMode::Agent, &pod),
            Some(ExcuseReason::GoneFromKafka)
        );
    }

    #[test]
    fn a_demotion_or_mixed_change_never_excuses() {
        let lost = PodObservation {
            node_ready: Some(false),
            terminating: true,
            kafka_alive: Some(false),
            ..silent(0)
        };
        for kind in [RolloutKind::Demotion, RolloutKind::Mixed] {
            let mut r = rollout(kind);
            assert_eq!(reason(&r, AckMode::Agent, &lost), None, "{kind:?}");
            // Not even if the flag says so (an edited status): the kind decides too.
            r.may_excuse = true;
            assert_eq!(reason(&r, AckMode::Agent, &lost), None, "{kind:?}");
        }
    }

    #[test]
    fn a_promotion_that_may_not_excuse_waits() {
        let lost = PodObservation {
            node_ready: Some(false),
            ..silent(0)
        };
        let mut r = rollout(RolloutKind::Promotion);
        r.may_excuse = false;
        assert_eq!(reason(&r, AckMode::Agent, &lost), None);
    }

    #[test]
    fn time_mode_never_excuses() {
        let lost = PodObservation {
            node_ready: Some(false),
            terminating: true,
            ..silent(0)
        };
        assert_eq!(
            reason(&rollout(RolloutKind::Promotion), AckMode::Time, &lost),
            None
        );
    }

    #[test]
    fn an_agent_that_answers_is_waited_for_even_behind_on_a_lost_node() {
        // Answering (with an old revision: behind) means the pod is alive and will catch up.
        let behind = PodObservation {
            node_ready: Some(false),
            terminating: true,
            kafka_alive: Some(false),
            ..healthy()
        };
        assert_eq!(
            reason(&rollout(RolloutKind::Promotion), AckMode::Agent, &behind),
            None
        );
    }

    #[test]
    fn silence_alone_or_with_kafka_saying_alive_or_unknown_is_waited_for() {
        let r = rollout(RolloutKind::Promotion);
        for kafka_alive in [Some(true), None] {
            let pod = PodObservation {
                kafka_alive,
                ..silent(0)
            };
            assert_eq!(reason(&r, AckMode::Agent, &pod), None, "{kafka_alive:?}");
        }
        // A node whose readiness is unknown (unscheduled, not read) is not "not Ready".
        let pod = PodObservation {
            node_ready: None,
            ..silent(0)
        };
        assert_eq!(reason(&r, AckMode::Agent, &pod), None);
    }

    #[test]
    fn only_promotions_within_every_list_a_pod_may_hold_may_excuse() {
        let e = set(&[3, 4]);
        assert!(may_excuse(RolloutKind::Promotion, &e, &set(&[4]), None));
        assert!(!may_excuse(
            RolloutKind::Demotion,
            &e,
            &set(&[3, 4, 5]),
            None
        ));
        assert!(!may_excuse(RolloutKind::Mixed, &e, &set(&[4, 5]), None));
        // Superseding a promotion that may excuse, with a target inside its target.
        let mut prior = rollout(RolloutKind::Promotion);
        prior.target = vec![4];
        assert!(may_excuse(
            RolloutKind::Promotion,
            &e,
            &set(&[]),
            Some(&prior)
        ));
        assert!(may_excuse(
            RolloutKind::Promotion,
            &e,
            &set(&[4]),
            Some(&prior)
        ));
        // Some pods may hold the superseded {4} only: {3} is not in it.
        assert!(!may_excuse(
            RolloutKind::Promotion,
            &e,
            &set(&[3]),
            Some(&prior)
        ));
        // A superseded mixed change ({3,4} -> {4,5}): a controller may hold {4,5}, which
        // lacks 3; promoting 4 relative to {3,4} would leave it able to elect 3.
        let mut mixed = rollout(RolloutKind::Mixed);
        mixed.target = vec![4, 5];
        assert!(!may_excuse(
            RolloutKind::Promotion,
            &e,
            &set(&[3]),
            Some(&mixed)
        ));
        // ... and stays strict even for a target it does contain (its own history is unknown).
        assert!(!may_excuse(
            RolloutKind::Promotion,
            &e,
            &set(&[4]),
            Some(&mixed)
        ));
    }
}
