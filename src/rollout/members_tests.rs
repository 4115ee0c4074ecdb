//! The rollout across member clusters (docs/multi-cluster.md, "The lists reach every member",
//! "An unreachable member is not an empty member"), run against the cluster model in
//! `simulation` with the "2.5 regions" layout of the examples: `east` and `west` with one
//! controller and two brokers each, `tie` with one controller.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::simulation::{Drift, Op, World};
use crate::crd::{AckMode, ExcuseReason, NodeId, Phase, Role, RolloutKind};

fn set(ids: &[NodeId]) -> BTreeSet<NodeId> {
    ids.iter().copied().collect()
}

const MEMBERS: [&str; 3] = ["east", "west", "tie"];

/// Pods by index: 0 east/c-0, 1 west/c-0, 2 tie/c-0, 3 east/b-0, 4 east/b-1, 5 west/b-0,
/// 6 west/b-1. Broker 4 an observer, converged.
fn stretched(mode: AckMode) -> World {
    let mut w = World::stretched(
        &[("east", 1, 2), ("west", 1, 2), ("tie", 1, 0)],
        mode,
        Some(set(&[4])),
    );
    w.quiesce(12);
    assert!(w.converged(), "{:#?}", w.status);
    w
}

fn writes_since(w: &World, from: usize) -> Vec<(Role, &str)> {
    w.writes[from..]
        .iter()
        .map(|x| (x.role, x.member.as_str()))
        .collect()
}

#[test]
fn a_step_writes_every_members_list_and_waits_for_every_members_pods() {
    let mut w = stretched(AckMode::Agent);
    let base = w.writes.len();
    w.set_desired(set(&[]));
    w.reconcile(None);
    assert_eq!(
        writes_since(&w, base),
        [
            (Role::Controller, "east"),
            (Role::Controller, "west"),
            (Role::Controller, "tie")
        ]
    );
    // Two of three controllers read it: the brokers' step does not start.
    w.sync(0);
    w.sync(1);
    w.reconcile(None);
    assert_eq!(
        w.writes.len(),
        base + 3,
        "no broker list before tie/c-0 read it"
    );
    assert_eq!(
        w.status.rollout.as_ref().unwrap().pending,
        ["tie/c-0"],
        "pods are named with their member"
    );
    assert_eq!(
        w.status.rollout.as_ref().unwrap().acknowledged,
        ["east/c-0", "west/c-0"]
    );
    w.sync(2);
    w.reconcile(None);
    assert_eq!(
        writes_since(&w, base + 3),
        [(Role::Broker, "east"), (Role::Broker, "west")],
        "tie has no brokers, so no brokers' list"
    );
    w.sync_all();
    w.reconcile(None);
    assert!(w.converged(), "{:#?}", w.status);
}

#[test]
fn a_promotion_goes_on_without_a_lost_member_and_restores_it_controllers_first() {
    let mut w = stretched(AckMode::Agent);
    w.lose_member("east");
    // Kafka fences east's brokers and drops its controller from the quorum.
    w.fence_member("east");
    let base = w.writes.len();
    w.set_desired(set(&[]));
    w.quiesce(4);
    assert!(w.converged(), "{:#?}", w.status);
    assert!(
        writes_since(&w, base).iter().all(|(_, m)| *m != "east"),
        "nothing is written to a lost member: {:?}",
        writes_since(&w, base)
    );
    let controller = w.status.roles.controller.clone().unwrap();
    assert_eq!(controller.acknowledged, ["tie/c-0", "west/c-0"]);
    assert_eq!(
        controller
            .excused
            .iter()
            .map(|e| (e.pod.as_str(), e.reason))
            .collect::<Vec<_>>(),
        [("east/c-0", ExcuseReason::GoneFromKafka)]
    );
    assert_eq!(
        w.pods[0].seen.as_ref().unwrap().1,
        set(&[4]),
        "east keeps {{4}}"
    );

    // east answers again: its lists are put back, controllers first, before anything else.
    let back = w.writes.len();
    w.return_member("east");
    w.reconcile(None);
    assert_eq!(
        writes_since(&w, back),
        [(Role::Controller, "east"), (Role::Broker, "east")]
    );
    w.sync_all();
    assert_eq!(w.pods[0].seen.as_ref().unwrap().1, set(&[]));
    assert_eq!(w.pods[3].seen.as_ref().unwrap().1, set(&[]));
}

#[test]
fn a_demotion_does_not_start_while_a_member_is_lost() {
    let mut w = stretched(AckMode::Agent);
    w.set_desired(set(&[]));
    w.quiesce(4);
    assert!(w.converged());
    let revision = w.status.revision;
    w.lose_member("tie");
    let base = w.writes.len();
    w.set_desired(set(&[4]));
    w.quiesce(6);
    assert_eq!(w.status.revision, revision, "no revision allocated");
    assert!(w.status.rollout.is_none());
    assert_eq!(w.writes.len(), base, "nothing written");
    assert_eq!(w.decide().held_for, ["tie"]);
    w.return_member("tie");
    w.quiesce(6);
    assert!(w.converged(), "{:#?}", w.status);
    assert_eq!(w.status.effective, [4]);
    assert!(w.decide().held_for.is_empty());
}

#[test]
fn a_demotion_in_flight_takes_no_step_while_a_member_is_lost() {
    let mut w = stretched(AckMode::Agent);
    w.set_desired(set(&[]));
    w.quiesce(4);
    let base = w.writes.len();
    w.set_desired(set(&[4]));
    w.reconcile(None); // the controllers' lists of every member carry the demotion
    w.sync_all();
    w.lose_member("west");
    w.fence_member("west");
    w.quiesce(6);
    let r = w.status.rollout.clone().expect("still in flight");
    assert_eq!(r.kind, RolloutKind::Demotion);
    assert_eq!(r.step, crate::crd::RolloutStep::Controllers);
    assert!(r.excused.is_empty(), "a demotion excuses nobody");
    assert!(
        writes_since(&w, base)
            .iter()
            .all(|(role, _)| *role == Role::Controller),
        "no broker list while west is lost"
    );
    w.return_member("west");
    w.quiesce(6);
    assert!(w.converged(), "{:#?}", w.status);
    assert_eq!(w.status.phase(), Phase::Ready);
}

#[test]
fn a_member_that_returns_mid_promotion_sends_it_back_to_its_controllers() {
    let mut w = stretched(AckMode::Agent);
    w.lose_member("east");
    w.fence_member("east");
    w.set_desired(set(&[]));
    w.reconcile(None); // controllers of west and tie
    w.sync_all();
    w.reconcile(None); // brokers' step: west's brokers
    assert_eq!(
        w.status.rollout.as_ref().unwrap().step,
        crate::crd::RolloutStep::Brokers
    );
    w.return_member("east");
    let back = w.writes.len();
    w.reconcile(None);
    assert_eq!(
        writes_since(&w, back),
        [(Role::Controller, "east")],
        "east's controllers get the list before its brokers"
    );
    assert_eq!(
        w.status.rollout.as_ref().unwrap().step,
        crate::crd::RolloutStep::Controllers
    );
    w.quiesce(6);
    assert!(w.converged(), "{:#?}", w.status);
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => proptest::option::of(0usize..6).prop_map(Op::Reconcile),
        4 => (0usize..7).prop_map(Op::Sync),
        2 => Just(Op::SyncAll),
        2 => proptest::collection::btree_set(1..6i32, 0..4).prop_map(Op::Desire),
        2 => (1u64..15).prop_map(Op::Tick),
        1 => (0usize..7, any::<bool>()).prop_map(|(i, r)| Op::Running(i, r)),
        1 => (0usize..7, any::<bool>()).prop_map(|(i, r)| Op::Responsive(i, r)),
        1 => (any::<bool>(), prop_oneof![Just(Drift::Delete), Just(Drift::Edit), Just(Drift::StripLabels)])
            .prop_map(|(b, d)| Op::Drift(b, d)),
        2 => (0usize..3).prop_map(|m| Op::LoseMember(MEMBERS[m].into())),
        2 => (0usize..3).prop_map(|m| Op::ReturnMember(MEMBERS[m].into())),
        1 => (0usize..3).prop_map(|m| Op::FenceMember(MEMBERS[m].into())),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// Members lost, fenced by Kafka and returned at any point, between and during rollouts
    /// and operator crashes: the model checks every write and decision (controllers of every
    /// answering member first, nothing written to or nudged in a lost member, no demotion or
    /// mixed change started or stepped while one is lost). Once every member is back, the
    /// rollout converges, or waits only for a pod whose agent does not answer.
    #[test]
    fn members_lost_and_returned_never_break_controllers_first(
        mode in prop_oneof![Just(AckMode::Agent), Just(AckMode::Time)],
        ops in proptest::collection::vec(op(), 0..60),
    ) {
        let mut w = World::stretched(
            &[("east", 1, 2), ("west", 1, 2), ("tie", 1, 0)],
            mode,
            Some(set(&[4])),
        );
        for op in ops {
            w.apply(op);
        }
        for m in MEMBERS {
            w.return_member(m);
        }
        w.quiesce(40);
        if w.converged() {
            prop_assert_eq!(w.status.phase(), Phase::Ready);
        } else {
            let silent: BTreeSet<String> = w
                .pods
                .iter()
                .filter(|p| p.running && !p.responsive)
                .map(|p| p.key())
                .collect();
            let rollout = w.status.rollout.clone().expect("a rollout is in flight");
            prop_assert_eq!(mode, AckMode::Agent);
            prop_assert!(!rollout.pending.is_empty());
            prop_assert!(
                rollout.pending.iter().all(|p| silent.contains(p)),
                "stuck on {:?}, silent {:?}",
                rollout.pending,
                silent
            );
        }
    }
}
