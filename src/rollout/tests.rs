//! Scenarios and properties of the rollout state machine, run against the cluster model in
//! `simulation`.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;

use super::machine::settled;
use super::model::FAST_POLL;
use super::simulation::{Drift, Op, World};
use super::*;
use crate::crd::{AckMode, NodeId, Phase, Role, RolloutKind, RolloutStep};

fn set(ids: &[NodeId]) -> BTreeSet<NodeId> {
    ids.iter().copied().collect()
}

/// A bed like the test bed: 3 controllers, 4 brokers, seeded lists, broker 4 an observer.
fn bed(mode: AckMode) -> World {
    let mut w = World::new(3, 4, mode, Some(set(&[4])));
    w.quiesce(12);
    assert!(w.converged(), "{:#?}", w.status);
    w
}

#[test]
fn first_reconcile_adopts_the_seeded_lists_controllers_first() {
    let mut w = World::new(3, 4, AckMode::Agent, Some(set(&[4])));
    w.reconcile(None);
    assert_eq!(
        w.writes.len(),
        1,
        "only the controllers' list is written first: {:?}",
        w.writes
    );
    assert_eq!(w.writes[0].role, Role::Controller);
    assert_eq!(w.writes[0].revision, 1);
    let rollout = w.status.rollout.clone().unwrap();
    assert_eq!(rollout.step, RolloutStep::Controllers);
    assert_eq!(rollout.pending, ["c-0", "c-1", "c-2"]);
    assert_eq!(w.status.phase(), Phase::RollingOut);
    // Nothing moves until the controllers read revision 1.
    w.reconcile(None);
    assert_eq!(w.writes.len(), 1);
    w.sync_all();
    w.reconcile(None);
    assert_eq!(w.writes.len(), 2);
    assert_eq!((w.writes[1].role, w.writes[1].revision), (Role::Broker, 1));
    w.sync_all();
    w.reconcile(None);
    assert!(w.converged());
    assert_eq!(w.status.phase(), Phase::Ready);
}

#[test]
fn promotion_goes_controllers_then_brokers_and_every_pod_is_nudged() {
    let mut w = bed(AckMode::Agent);
    let base = w.writes.len();
    w.set_desired(set(&[]));
    let d = w.decide();
    assert!(matches!(
        d.happenings[0],
        Happening::RolloutStarted {
            kind: RolloutKind::Promotion,
            superseded: None,
            ..
        }
    ));
    assert_eq!(d.writes.len(), 1);
    assert_eq!(d.writes[0].role, Role::Controller);
    assert_eq!(
        d.nudges.iter().map(|n| n.pod.as_str()).collect::<Vec<_>>(),
        ["c-0", "c-1", "c-2"]
    );
    w.reconcile(None);
    // Two controllers read it, one does not: brokers wait.
    w.sync(0);
    w.sync(1);
    w.reconcile(None);
    assert_eq!(w.writes.len(), base + 1);
    assert_eq!(w.status.rollout.as_ref().unwrap().pending, ["c-2"]);
    w.sync(2);
    w.reconcile(None);
    assert_eq!(w.writes.last().unwrap().role, Role::Broker);
    assert_eq!(
        w.writes.last().unwrap().ids,
        set(&[]),
        "the deliberate empty list"
    );
    w.sync_all();
    w.reconcile(None);
    assert!(w.converged());
    assert!(w.happenings.iter().any(
        |h| matches!(h, Happening::RolloutComplete { observers, .. } if observers.is_empty())
    ));
}

#[test]
fn demotion_also_goes_controllers_first() {
    let mut w = bed(AckMode::Agent);
    w.set_desired(set(&[3, 4]));
    let d = w.decide();
    assert!(matches!(
        d.happenings[0],
        Happening::RolloutStarted {
            kind: RolloutKind::Demotion,
            ..
        }
    ));
    assert_eq!(
        d.writes.iter().map(|x| x.role).collect::<Vec<_>>(),
        [Role::Controller]
    );
}

#[test]
fn timeout_degrades_naming_the_pending_pods_and_keeps_waiting() {
    let mut w = bed(AckMode::Agent);
    w.pods[1].responsive = false;
    w.set_desired(set(&[]));
    w.reconcile(None);
    w.sync_all();
    w.tick(9);
    w.reconcile(None);
    assert_eq!(w.status.phase(), Phase::RollingOut);
    w.tick(1);
    w.reconcile(None);
    assert_eq!(w.status.phase(), Phase::Degraded);
    let rollout = w.status.rollout.clone().unwrap();
    assert_eq!(
        (rollout.step, rollout.pending),
        (RolloutStep::Controllers, vec!["c-1".to_string()])
    );
    let timeouts = w
        .happenings
        .iter()
        .filter(|h| matches!(h, Happening::StepTimedOut { .. }))
        .count();
    w.tick(30);
    w.reconcile(None);
    assert_eq!(
        w.happenings
            .iter()
            .filter(|h| matches!(h, Happening::StepTimedOut { .. }))
            .count(),
        timeouts,
        "the timeout is reported once"
    );
    assert!(w
        .writes
        .iter()
        .all(|x| x.role != Role::Broker || x.revision != rollout.revision));
    // The agent answers again: the rollout finishes.
    w.pods[1].responsive = true;
    w.quiesce(3);
    assert!(w.converged());
}

#[test]
fn a_stopped_pod_does_not_block_and_reads_the_current_list_when_it_starts() {
    let mut w = bed(AckMode::Agent);
    w.set_running(0, false);
    w.set_desired(set(&[]));
    w.quiesce(3);
    assert!(w.converged());
    w.set_running(0, true);
    assert_eq!(w.pods[0].seen, Some((Some(w.status.revision), set(&[]))));
}

#[test]
fn a_change_during_a_rollout_supersedes_it_from_the_controllers() {
    let mut w = bed(AckMode::Agent);
    w.set_desired(set(&[]));
    w.reconcile(None);
    w.sync_all();
    w.reconcile(None); // controllers acknowledged: brokers written with the promotion
    assert_eq!(
        w.status.rollout.as_ref().unwrap().step,
        RolloutStep::Brokers
    );
    let promoted = w.status.revision;
    w.set_desired(set(&[4])); // demoted back before the brokers acknowledged
    let d = w.decide();
    assert!(
        matches!(d.happenings[0], Happening::RolloutStarted { superseded: Some(r), .. } if r == promoted)
    );
    assert_eq!(
        d.state.rollout.as_ref().unwrap().step,
        RolloutStep::Controllers
    );
    assert_eq!(
        d.writes
            .iter()
            .map(|x| (x.role, x.revision))
            .collect::<Vec<_>>(),
        [(Role::Controller, promoted + 1)]
    );
    w.quiesce(3);
    assert!(w.converged());
}

#[test]
fn drift_is_restored_with_the_same_revision() {
    let mut w = bed(AckMode::Agent);
    let revision = w.status.revision;
    w.drift(Role::Broker, Drift::Edit);
    w.drift(Role::Controller, Drift::Delete);
    let d = w.decide();
    assert_eq!(d.writes.len(), 2);
    assert!(d
        .writes
        .iter()
        .all(|x| x.cause == WriteCause::Restore && x.revision == revision));
    assert_eq!(d.state, w.status, "restoring is not a rollout");
    assert_ne!(
        d.requeue_after(w.now),
        Some(std::time::Duration::ZERO),
        "a restore never requeues at once"
    );
    w.reconcile(None);
    assert!(w.converged());
}

#[test]
fn time_mode_waits_for_the_settle_time() {
    let mut w = bed(AckMode::Time);
    w.set_desired(set(&[]));
    w.reconcile(None);
    w.tick(2);
    w.reconcile(None);
    assert_eq!(
        w.status.rollout.as_ref().unwrap().step,
        RolloutStep::Controllers
    );
    w.tick(1);
    w.reconcile(None);
    assert_eq!(
        w.status.rollout.as_ref().unwrap().step,
        RolloutStep::Brokers
    );
    w.tick(3);
    w.reconcile(None);
    assert!(w.converged());
}

#[test]
fn combined_mode_has_one_step() {
    let mut w = World::new(0, 3, AckMode::Agent, Some(set(&[2])));
    w.quiesce(3);
    assert!(w.converged());
    w.set_desired(set(&[]));
    let d = w.decide();
    assert_eq!(d.state.rollout.as_ref().unwrap().step, RolloutStep::Brokers);
}

#[test]
fn a_crash_after_the_status_write_resumes_the_step() {
    let mut w = bed(AckMode::Agent);
    w.set_desired(set(&[]));
    w.reconcile(Some(1)); // status persisted, ConfigMap not written
    assert_eq!(
        w.status.rollout.as_ref().unwrap().step,
        RolloutStep::Controllers
    );
    let revision = w.status.revision;
    w.reconcile(None);
    assert_eq!(
        w.writes.last().map(|x| (x.role, x.revision)),
        Some((Role::Controller, revision))
    );
    w.quiesce(3);
    assert!(w.converged());
}

#[test]
fn without_pods_nothing_is_waited_for() {
    // Nothing seeded: no pod can start before its list exists. The written controllers' step
    // has nothing to wait for, so the same reconcile takes the brokers' step once the
    // controllers' list is in place, and finishes.
    let mut w = World::new(3, 4, AckMode::Agent, None);
    w.reconcile(None);
    assert!(w.converged(), "{:#?}", w.status);
    assert_eq!(
        w.writes.iter().map(|x| x.role).collect::<Vec<_>>(),
        [Role::Controller, Role::Broker]
    );
    let order: Vec<&Happening> = w
        .happenings
        .iter()
        .filter(|h| {
            matches!(
                h,
                Happening::StepWritten { .. } | Happening::StepAcknowledged { .. }
            )
        })
        .collect();
    assert!(
        matches!(
            order.as_slice(),
            [
                Happening::StepWritten {
                    role: Role::Controller,
                    ..
                },
                Happening::StepAcknowledged {
                    role: Role::Controller,
                    ..
                },
                Happening::StepWritten {
                    role: Role::Broker,
                    ..
                },
                Happening::StepAcknowledged {
                    role: Role::Broker,
                    ..
                },
            ]
        ),
        "{order:#?}"
    );
}

#[test]
fn time_mode_without_settle_time_rolls_out_in_one_reconcile_controllers_first() {
    let mut w = bed(AckMode::Time);
    w.settings.settle = std::time::Duration::ZERO;
    let base = w.writes.len();
    w.set_desired(set(&[]));
    w.reconcile(None);
    assert!(w.converged(), "{:#?}", w.status);
    assert_eq!(
        w.writes[base..].iter().map(|x| x.role).collect::<Vec<_>>(),
        [Role::Controller, Role::Broker]
    );
}

/// Why the shell writes the intent before the first list and not side by side with it: found by
/// the property test when the model let the list land first. The list of revision n lands,
/// the operator stops before the status records its write, and the next reconcile measures
/// the settle time from the older record: the brokers get n before the 3 s have passed.
#[test]
#[should_panic(expected = "after the controllers, settle time is 3s")]
fn a_list_that_lands_before_its_intent_would_cut_the_settle_time_short() {
    let mut w = World::new(2, 3, AckMode::Time, None);
    w.reconcile(None);
    w.set_desired(set(&[]));
    w.reconcile(Some(1)); // the intent persisted, its list not written
    w.set_running(0, true);
    w.tick(1);
    w.reconcile_ordered(Some(1), true); // the list written, the status not
    w.reconcile(None);
    w.quiesce(40);
}

#[test]
fn a_crash_after_the_chained_lists_before_the_final_status_resumes_from_the_intent() {
    // Time mode without settle time: status (intent), controllers' list, brokers' list, then
    // the final status. A crash before that last write leaves the intent persisted with both
    // lists already written; the next reconcile finishes on them without a new revision.
    let mut w = bed(AckMode::Time);
    w.settings.settle = std::time::Duration::ZERO;
    let base = w.writes.len();
    w.set_desired(set(&[]));
    w.reconcile(Some(3));
    let revision = w.status.revision;
    assert_eq!(
        w.status.rollout.as_ref().map(|r| r.step),
        Some(RolloutStep::Controllers),
        "only the intent is persisted"
    );
    assert_eq!(
        w.writes[base..]
            .iter()
            .map(|x| (x.role, x.revision))
            .collect::<Vec<_>>(),
        [(Role::Controller, revision), (Role::Broker, revision)]
    );
    w.reconcile(None);
    assert!(w.converged(), "{:#?}", w.status);
    assert_eq!(
        w.status.revision, revision,
        "no new revision for the same set"
    );
    assert!(
        w.writes[base..].iter().all(|x| x.revision == revision),
        "{:#?}",
        &w.writes[base..]
    );
}

#[test]
fn agent_mode_stops_after_the_write_until_the_pods_answer() {
    let mut w = bed(AckMode::Agent);
    let base = w.writes.len();
    w.set_desired(set(&[]));
    w.reconcile(None);
    assert_eq!(w.writes.len(), base + 1, "only the controllers' list");
    assert_eq!(
        w.status.rollout.as_ref().unwrap().pending,
        ["c-0", "c-1", "c-2"]
    );
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => proptest::option::of(0usize..4).prop_map(Op::Reconcile),
        4 => (0usize..7).prop_map(Op::Sync),
        1 => Just(Op::SyncAll),
        2 => proptest::collection::btree_set(1..6i32, 0..4).prop_map(Op::Desire),
        2 => (1u64..15).prop_map(Op::Tick),
        1 => (0usize..7, any::<bool>()).prop_map(|(i, r)| Op::Running(i, r)),
        1 => (0usize..7, any::<bool>()).prop_map(|(i, r)| Op::Responsive(i, r)),
        1 => (any::<bool>(), prop_oneof![Just(Drift::Delete), Just(Drift::Edit), Just(Drift::StripLabels)])
            .prop_map(|(b, d)| Op::Drift(b, d)),
        1 => (0usize..7, any::<bool>()).prop_map(|(i, r)| Op::Node(i, r)),
        1 => (0usize..7).prop_map(Op::Terminate),
        1 => (0usize..7, proptest::option::of(any::<bool>())).prop_map(|(i, a)| Op::KafkaAlive(i, a)),
    ]
}

fn run(mut w: World, ops: Vec<Op>) {
    for op in ops {
        w.apply(op);
    }
    w.quiesce(40);
    // Silent agents, and pods on a lost node (its kubelet never brings them the new list,
    // whether or not their agent answers).
    let silent: BTreeSet<String> = w
        .pods
        .iter()
        .filter(|p| p.running && (!p.responsive || p.node_ready == Some(false)))
        .map(|p| p.name.clone())
        .collect();
    if w.converged() {
        assert_eq!(w.status.phase(), Phase::Ready);
        return;
    }
    // Not converged: only because a running pod's agent does not answer, and then Degraded
    // naming exactly such pods.
    assert!(
        w.settings.mode == AckMode::Agent && !silent.is_empty(),
        "stuck without cause: {:#?}",
        w.status
    );
    let rollout = w.status.rollout.clone().expect("a rollout is in flight");
    assert_eq!(w.status.phase(), Phase::Degraded);
    assert!(!rollout.pending.is_empty());
    assert!(
        rollout.pending.iter().all(|p| silent.contains(p)),
        "{:?} vs {silent:?}",
        rollout.pending
    );
    // A promotion that may go on without unreachable pods waits only for silent pods the
    // model does not find unreachable (an agent down in front of a live JVM).
    if rollout.may_excuse {
        for name in &rollout.pending {
            let pod = w.pods.iter().find(|p| &p.name == name).unwrap();
            assert!(
                !pod.unreachable(),
                "{name} is unreachable yet waited for: {pod:?}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn agent_mode_never_skips_a_step_and_ends_ready_or_degraded(
        controllers in 0usize..4,
        seed in proptest::option::of(proptest::collection::btree_set(1..6i32, 0..3)),
        ops in proptest::collection::vec(op(), 0..60),
    ) {
        run(World::new(controllers, 3, AckMode::Agent, seed), ops);
    }

    #[test]
    fn time_mode_never_skips_a_step_and_ends_ready(
        controllers in 0usize..4,
        seed in proptest::option::of(proptest::collection::btree_set(1..6i32, 0..3)),
        ops in proptest::collection::vec(op(), 0..60),
        no_settle_time in any::<bool>(),
    ) {
        let mut w = World::new(controllers, 3, AckMode::Time, seed);
        if no_settle_time {
            w.settings.settle = std::time::Duration::ZERO;
        }
        run(w, ops);
    }
}

#[test]
fn pending_pods_are_nudged_again_after_a_while() {
    let mut w = bed(AckMode::Agent);
    w.set_desired(set(&[]));
    w.reconcile(None);
    w.sync(0);
    w.sync(1);
    w.tick(5);
    assert!(w.decide().nudges.is_empty(), "not yet");
    w.tick(5);
    let again: Vec<String> = w.decide().nudges.into_iter().map(|n| n.pod).collect();
    assert_eq!(again, ["c-2"], "only the pending pod");
}

#[test]
fn a_recreated_observer_set_continues_the_retained_revisions() {
    // Deleted with Retain, then created again: the lists carry revision 5, the status is empty.
    let mut w = bed(AckMode::Agent);
    for _ in 0..4 {
        let next = if w.desired.is_empty() {
            set(&[4])
        } else {
            set(&[])
        };
        w.set_desired(next);
        w.quiesce(4);
    }
    assert_eq!(w.status.revision, 5);
    w.status = RolloutState::default();
    let d = w.decide();
    assert_eq!(
        d.state.revision, 6,
        "never reuses a revision the pods may have read"
    );
    assert_eq!(
        d.writes
            .iter()
            .map(|x| (x.role, x.revision))
            .collect::<Vec<_>>(),
        [(Role::Controller, 6)]
    );
    w.quiesce(4);
    assert!(w.converged());
}

#[test]
fn stripped_labels_on_the_controllers_list_send_the_rollout_back_a_step() {
    let mut w = bed(AckMode::Agent);
    w.set_desired(set(&[]));
    w.reconcile(None);
    w.sync_all();
    w.reconcile(None);
    assert_eq!(
        w.status.rollout.as_ref().unwrap().step,
        RolloutStep::Brokers
    );
    w.drift(Role::Controller, Drift::StripLabels);
    let d = w.decide();
    assert_eq!(
        d.state.rollout.as_ref().unwrap().step,
        RolloutStep::Controllers
    );
    assert_eq!(
        d.writes.iter().map(|x| x.role).collect::<Vec<_>>(),
        [Role::Controller]
    );
    w.quiesce(4);
    assert!(w.converged());
}

#[test]
fn a_step_waiting_for_acknowledgements_polls_fast_then_once_a_second_then_every_five() {
    let mut w = bed(AckMode::Agent);
    assert_eq!(w.decide().requeue_after(w.now), None, "nothing in flight");
    w.pods[1].responsive = false;
    w.set_desired(set(&[]));
    let started = w.decide();
    assert_eq!(
        started.requeue_after(w.now),
        Some(std::time::Duration::ZERO),
        "a step's list just written: look again at once"
    );
    w.reconcile(None);
    w.sync_all();
    assert_eq!(w.decide().requeue_after(w.now), Some(FAST_POLL));
    w.tick(4);
    assert_eq!(w.decide().requeue_after(w.now), Some(FAST_POLL));
    w.tick(1);
    assert_eq!(
        w.decide().requeue_after(w.now),
        Some(std::time::Duration::from_secs(1))
    );
    w.tick(5);
    w.reconcile(None);
    assert_eq!(w.status.phase(), Phase::Degraded);
    assert_eq!(
        w.decide().requeue_after(w.now),
        Some(std::time::Duration::from_secs(5))
    );
}

/// Time mode: `settleTime` after the step's write+nudge is the acknowledgement.
#[test]
fn time_mode_waits_for_settle_time() {
    let start: Timestamp = "2026-11-29T09:00:00Z".parse().unwrap();
    let at = |s: &str| -> Timestamp { s.parse().unwrap() };
    let settle = Duration::from_secs(15);
    assert!(!settled(start, at("2026-11-29T09:00:14Z"), settle));
    assert!(settled(start, at("2026-11-29T09:00:15Z"), settle));
    assert!(settled(start, start, Duration::ZERO));
}

// Unreachable pods (issue 28): a zone outage leaves pods Running (then Terminating) in the API
// while their node is lost and their agent answers nothing.

fn excused_in(w: &World) -> Vec<(String, crate::crd::ExcuseReason)> {
    w.happenings
        .iter()
        .filter_map(|h| match h {
            Happening::StepWentOnWithout { pods, .. } => Some(pods.clone()),
            _ => None,
        })
        .flatten()
        .map(|e| (e.pod, e.reason))
        .collect()
}

#[test]
fn a_promotion_goes_on_without_a_controller_on_a_lost_node() {
    use crate::crd::ExcuseReason;
    let mut w = bed(AckMode::Agent);
    w.set_node_ready(2, false); // c-2: its zone is gone
    let base = w.writes.len();
    w.set_desired(set(&[]));
    w.reconcile(None);
    w.sync_all(); // c-2's kubelet is gone: it keeps {4}
    w.reconcile(None);
    assert_eq!(
        w.writes[base..].iter().map(|x| x.role).collect::<Vec<_>>(),
        [Role::Controller, Role::Broker],
        "the brokers' step starts without c-2"
    );
    let controller = w.status.roles.controller.clone().unwrap();
    assert_eq!(controller.acknowledged, ["c-0", "c-1"]);
    assert!(controller.pending.is_empty());
    assert_eq!(
        controller
            .excused
            .iter()
            .map(|e| (e.pod.as_str(), e.reason))
            .collect::<Vec<_>>(),
        [("c-2", ExcuseReason::NodeNotReady)]
    );
    assert_eq!(
        excused_in(&w),
        [("c-2".to_string(), ExcuseReason::NodeNotReady)]
    );
    w.sync_all();
    w.reconcile(None);
    assert!(w.converged(), "{:#?}", w.status);
    assert_eq!(w.status.phase(), Phase::Ready);
    assert_eq!(
        w.pods[2].seen.as_ref().unwrap().1,
        set(&[4]),
        "still holds the old list"
    );
}

#[test]
fn a_terminating_controller_and_one_gone_from_kafka_are_gone_on_without() {
    use crate::crd::ExcuseReason;
    let mut w = bed(AckMode::Agent);
    w.terminate(1);
    w.set_responsive(1, false);
    w.set_responsive(2, false);
    w.set_kafka_alive(2, Some(false));
    w.set_desired(set(&[]));
    w.reconcile(None);
    w.sync_all();
    w.reconcile(None);
    // Kafka's verdict already waited out its own timeouts: the silent pod it drops is gone on
    // without at once, no operator-side bound on top.
    assert_eq!(
        w.status.rollout.as_ref().unwrap().step,
        RolloutStep::Brokers
    );
    assert_eq!(
        excused_in(&w),
        [
            ("c-1".to_string(), ExcuseReason::Terminating),
            ("c-2".to_string(), ExcuseReason::GoneFromKafka)
        ]
    );
    w.quiesce(3);
    assert!(w.converged());
}

#[test]
fn a_silent_agent_in_front_of_a_live_node_is_waited_for() {
    let mut w = bed(AckMode::Agent);
    w.set_responsive(2, false);
    w.set_kafka_alive(2, Some(true));
    w.set_desired(set(&[]));
    w.quiesce(20);
    let r = w.status.rollout.clone().unwrap();
    assert_eq!(
        (r.step, r.pending),
        (RolloutStep::Controllers, vec!["c-2".to_string()])
    );
    assert!(r.excused.is_empty());
    assert_eq!(w.status.phase(), Phase::Degraded);
}

#[test]
fn a_pod_that_returns_mid_step_must_acknowledge_and_is_not_counted_before() {
    let mut w = bed(AckMode::Agent);
    w.set_node_ready(2, false);
    w.set_desired(set(&[]));
    w.reconcile(None);
    w.sync(0); // c-1 still behind: the step waits for it
    w.reconcile(None);
    let r = w.status.rollout.clone().unwrap();
    assert_eq!(
        (r.pending.clone(), r.excused.len()),
        (vec!["c-1".to_string()], 1)
    );
    // c-2's node returns: its agent answers with the old list. No longer excused: pending.
    w.set_node_ready(2, true);
    w.sync(1);
    w.reconcile(None);
    let r = w.status.rollout.clone().unwrap();
    assert_eq!(r.step, RolloutStep::Controllers);
    assert_eq!(r.pending, ["c-2"]);
    assert!(r.excused.is_empty());
    assert_eq!(r.acknowledged, ["c-0", "c-1"]);
    w.sync(2);
    w.reconcile(None);
    assert_eq!(
        w.status.rollout.as_ref().unwrap().step,
        RolloutStep::Brokers
    );
    assert!(excused_in(&w).is_empty(), "the step went on with every pod");
}

#[test]
fn a_demotion_waits_for_a_lost_pod_until_it_returns() {
    let mut w = bed(AckMode::Agent);
    w.set_node_ready(2, false);
    w.set_desired(set(&[]));
    w.quiesce(3);
    assert!(w.converged(), "the promotion went on without c-2");
    w.set_desired(set(&[4])); // demote while c-2 is still lost
    w.quiesce(15);
    let r = w.status.rollout.clone().unwrap();
    assert_eq!(r.kind, RolloutKind::Demotion);
    assert_eq!(
        (r.step, r.pending),
        (RolloutStep::Controllers, vec!["c-2".to_string()])
    );
    assert!(r.excused.is_empty());
    assert_eq!(w.status.phase(), Phase::Degraded);
    w.set_node_ready(2, true);
    w.quiesce(3);
    assert!(w.converged());
    assert_eq!(w.pods[2].seen.as_ref().unwrap().1, set(&[4]));
}

#[test]
fn excused_pods_are_nudged_and_nudged_again() {
    let mut w = bed(AckMode::Agent);
    w.set_node_ready(2, false);
    w.set_desired(set(&[]));
    let d = w.decide();
    assert!(
        d.nudges.iter().any(|n| n.pod == "c-2"),
        "nudged like the others"
    );
    w.reconcile(None);
    w.sync(0); // c-1 pending keeps the step open
    w.tick(10);
    let again: Vec<String> = w.decide().nudges.into_iter().map(|n| n.pod).collect();
    assert_eq!(
        again,
        ["c-1", "c-2"],
        "pending and excused pods are nudged again"
    );
}

#[test]
fn time_mode_goes_on_after_settle_time_and_excuses_nobody() {
    let mut w = bed(AckMode::Time);
    w.set_node_ready(2, false);
    w.set_desired(set(&[]));
    w.quiesce(10);
    assert!(w.converged());
    assert!(excused_in(&w).is_empty());
}

/// A promotion superseding a mixed change never goes on without a controller: one may hold the
/// mixed change's list, which lacks an id the promotion keeps as an observer (here 3).
#[test]
fn a_promotion_superseding_a_mixed_change_waits_for_every_controller() {
    let mut w = bed(AckMode::Agent);
    w.set_desired(set(&[3, 4]));
    w.quiesce(3);
    assert!(w.converged());
    w.set_desired(set(&[4, 5])); // mixed: 3 promoted, 5 demoted
    w.reconcile(None);
    w.sync_all();
    w.reconcile(None);
    assert_eq!(
        w.status.rollout.as_ref().unwrap().step,
        RolloutStep::Brokers,
        "every controller holds {{4, 5}}"
    );
    w.set_node_ready(2, false);
    w.set_desired(set(&[3])); // relative to {3, 4}: a promotion of 4
    w.quiesce(15);
    let r = w.status.rollout.clone().unwrap();
    assert_eq!(r.kind, RolloutKind::Promotion);
    assert!(!r.may_excuse);
    assert_eq!(
        (r.step, r.pending),
        (RolloutStep::Controllers, vec!["c-2".to_string()])
    );
    w.set_node_ready(2, true);
    w.quiesce(3);
    assert!(w.converged());
}

/// A promotion superseding a promotion may go on without a controller only for ids the first
/// one kept too: a controller that read the first ({4}) lacks 3, which the second ({3}) keeps
/// as an observer.
#[test]
fn a_promotion_superseding_a_promotion_keeps_to_the_ids_both_keep() {
    let mut w = bed(AckMode::Agent);
    w.set_desired(set(&[3, 4]));
    w.quiesce(3);
    assert!(w.converged());
    w.set_desired(set(&[4])); // promotes 3
    w.reconcile(None);
    w.sync(0); // c-0 reads {4}
    w.reconcile(None);
    w.set_node_ready(0, false); // and is lost
    w.set_desired(set(&[3])); // relative to {3, 4}: promotes 4, keeps 3
    w.quiesce(15);
    let r = w.status.rollout.clone().unwrap();
    assert_eq!(r.kind, RolloutKind::Promotion);
    assert!(!r.may_excuse);
    assert_eq!(
        (r.step, r.pending),
        (RolloutStep::Controllers, vec!["c-0".to_string()])
    );
    // Superseding a strict rollout stays strict, even for a target inside every list ({}):
    // what the superseded rollouts wrote is no longer known. Conservative; the returning
    // controller ends it.
    w.set_desired(set(&[]));
    w.quiesce(4);
    assert!(!w.status.rollout.as_ref().unwrap().may_excuse);
    w.set_node_ready(0, true);
    w.quiesce(4);
    assert!(w.converged(), "{:#?}", w.status);
    assert!(excused_in(&w).is_empty());
}

/// Fates of a pod in [`a_promotion_with_unreachable_pods_completes`].
#[derive(Clone, Copy, Debug)]
enum Fate {
    Healthy,
    NodeLost,
    Terminating,
    GoneFromKafka,
}

fn fate() -> impl Strategy<Value = Fate> {
    prop_oneof![
        3 => Just(Fate::Healthy),
        1 => Just(Fate::NodeLost),
        1 => Just(Fate::Terminating),
        1 => Just(Fate::GoneFromKafka),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Whatever pods of either role become unreachable, a promotion completes, goes on without
    /// exactly those pods, and every reachable pod reads it.
    #[test]
    fn a_promotion_with_unreachable_pods_completes(
        controllers in 1usize..4,
        observers in proptest::collection::btree_set(1..6i32, 1..4),
        keep in proptest::collection::vec(any::<bool>(), 5),
        fates in proptest::collection::vec(fate(), 7),
    ) {
        let mut w = World::new(controllers, 4, AckMode::Agent, Some(observers.clone()));
        w.set_desired(observers.clone());
        w.quiesce(6);
        prop_assert!(w.converged());
        let mut lost = BTreeSet::new();
        for (i, fate) in fates.iter().enumerate().take(w.pods.len()) {
            match fate {
                Fate::Healthy => continue,
                Fate::NodeLost => w.set_node_ready(i, false),
                Fate::Terminating => {
                    w.terminate(i);
                    w.set_responsive(i, false);
                }
                Fate::GoneFromKafka => {
                    w.set_responsive(i, false);
                    w.set_kafka_alive(i, Some(false));
                }
            }
            lost.insert(w.pods[i].name.clone());
        }
        let target: BTreeSet<NodeId> = observers
            .iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .map(|(id, _)| *id)
            .collect();
        let target = if target == observers { BTreeSet::new() } else { target };
        let from = w.happenings.len();
        w.set_desired(target.clone());
        w.quiesce(8);
        prop_assert!(w.converged(), "{:#?}", w.status);
        prop_assert_eq!(w.status.effective.iter().copied().collect::<BTreeSet<_>>(), target.clone());
        let went_on_without: BTreeSet<String> = w.happenings[from..]
            .iter()
            .filter_map(|h| match h {
                Happening::StepWentOnWithout { pods, .. } => Some(pods.clone()),
                _ => None,
            })
            .flatten()
            .map(|e| e.pod)
            .collect();
        prop_assert_eq!(&went_on_without, &lost);
        for pod in w.pods.iter().filter(|p| !lost.contains(&p.name)) {
            prop_assert_eq!(pod.seen.as_ref().map(|s| &s.1), Some(&target));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// Changes superseding each other, each read by some controllers, with a controller lost
    /// at some point: the model checks every write of the brokers' list (a controller left
    /// behind holds a list containing the brokers' new one, and only in a promotion), and the
    /// rollout ends converged, or waiting only for the lost controller.
    #[test]
    fn superseding_changes_with_a_lost_controller_never_leave_one_less_conservative(
        sets in proptest::collection::vec(proptest::collection::btree_set(1..6i32, 0..4), 1..5),
        reads in proptest::collection::vec(0usize..4, 5),
        lose_at in 0usize..5,
        lost in 0usize..3,
    ) {
        let mut w = World::new(3, 3, AckMode::Agent, Some(set(&[3, 4])));
        w.set_desired(set(&[3, 4]));
        w.quiesce(6);
        prop_assert!(w.converged());
        for (i, ids) in sets.iter().enumerate() {
            if i == lose_at {
                w.set_node_ready(lost, false);
            }
            w.set_desired(ids.clone());
            w.reconcile(None);
            // Some controllers read it (3: all of them), then the brokers' step may start.
            for pod in 0..reads[i].min(3) {
                w.sync(pod);
            }
            w.tick(1);
            w.reconcile(None);
        }
        w.quiesce(15);
        if !w.converged() {
            let r = w.status.rollout.clone().unwrap();
            prop_assert_eq!(r.pending, vec![w.pods[lost].name.clone()]);
        }
    }
}
