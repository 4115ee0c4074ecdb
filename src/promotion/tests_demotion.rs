//! Scenario tests of demotion and the unclean takeover, one rule each.

use super::fixtures::{at, broker_2_lost, config, partition, promoted_4_at, run, scans, snapshot};
use super::*;

#[test]
fn demotion_waits_for_the_window_and_moves_leadership_first() {
    let cfg = config(PromotionPolicy::UnderMinIsr);
    // Broker 4 was promoted at 0, broker 2 came back, 4 is in the ISR and leads t-1.
    let mut parts: Vec<_> = (0..2)
        .map(|i| partition("t", i, &[1, 2, 4], &[1, 2, 4], Some(1), 100))
        .collect();
    parts[1].leader = Some(4);
    let early = scans(&parts, &[], &cfg, promoted_4_at(0), 300, 30);
    assert!(early.actions.is_empty(), "{early:?}");
    let d = scans(&parts, &[], &cfg, early.next_history, 330, 31);
    match &d.actions[..] {
        [PromotionAction::MoveLeadership {
            node_id: 4,
            partitions,
            ..
        }] => assert_eq!(partitions, &vec![parts[1].id()]),
        other => panic!("expected a leadership move, got {other:?}"),
    }
    parts[1].leader = Some(1);
    let d = run(
        &snapshot(at(361), &[], parts.clone()),
        &cfg,
        &d.next_history,
        361,
    );
    assert!(
        matches!(&d.actions[..], [PromotionAction::Demote { node_id: 4, .. }]),
        "{d:?}"
    );
    assert!(!d.next_history.is_auto_promoted(4));
}

#[test]
fn a_preferred_leader_is_reordered_behind_a_primary_then_elected_away() {
    let cfg = config(PromotionPolicy::UnderMinIsr);
    // 4 is listed first and leads: a preferred election alone would keep it leading.
    let mut parts = vec![partition("t", 0, &[4, 1, 2], &[1, 2, 4], Some(4), 100)];
    let d = scans(&parts, &[], &cfg, promoted_4_at(0), 400, 70);
    match &d.actions[..] {
        [PromotionAction::ReorderReplicas {
            node_id: 4, orders, ..
        }, PromotionAction::MoveLeadership {
            node_id: 4,
            partitions,
            ..
        }] => {
            assert_eq!(
                orders,
                &vec![ReplicaOrder {
                    partition: parts[0].id(),
                    replicas: vec![1, 2, 4]
                }]
            );
            assert_eq!(partitions, &vec![parts[0].id()]);
        }
        other => panic!("expected a reordering, then a leadership move, got {other:?}"),
    }
    assert!(d.next_history.is_auto_promoted(4), "not demoted yet");
    // Kafka carried both out: 1 is preferred and leads; the demotion follows.
    parts[0].replicas = vec![1, 2, 4];
    parts[0].leader = Some(1);
    let d = run(&snapshot(at(471), &[], parts), &cfg, &d.next_history, 471);
    assert!(
        matches!(&d.actions[..], [PromotionAction::Demote { node_id: 4, .. }]),
        "{d:?}"
    );
}

#[test]
fn reordering_puts_the_first_eligible_replica_first_and_the_broker_last() {
    use super::demotion::reordered;
    assert_eq!(reordered(&[4, 1, 2], 4, |b| b != 4), Some(vec![1, 2, 4]));
    assert_eq!(
        reordered(&[4, 1, 2, 3], 4, |b| b == 2 || b == 3),
        Some(vec![2, 1, 3, 4])
    );
    assert_eq!(reordered(&[4, 1, 2], 4, |_| false), None);
}

#[test]
fn demotion_never_drops_a_partition_under_min_isr() {
    let cfg = config(PromotionPolicy::UnderMinIsr);
    // Broker 2 is still gone: without 4, t-0 would have ISR [1] < 2.
    let parts = vec![partition("t", 0, &[1, 2, 4], &[1, 4], Some(1), 100)];
    let d = scans(&parts, &[2], &cfg, promoted_4_at(0), 400, 70);
    assert!(d.actions.is_empty());
    assert!(
        d.reasons.iter().any(|r| r.contains("under min ISR")),
        "{:?}",
        d.reasons
    );
}

#[test]
fn cooldown_holds_a_promotion_right_after_a_demotion() {
    let cfg = config(PromotionPolicy::UnderMinIsr);
    let mut history = PolicyHistory::default();
    history.last_action.insert(
        4,
        LastAction {
            kind: EngineActionKind::Demote,
            at: at(0),
        },
    );
    let d = scans(&broker_2_lost(1), &[2], &cfg, history.clone(), 10, 3);
    assert!(d.actions.is_empty());
    assert!(
        d.reasons.iter().any(|r| r.contains("cooldown")),
        "{:?}",
        d.reasons
    );
    let later = scans(&broker_2_lost(1), &[2], &cfg, history, 300, 2);
    assert!(matches!(
        &later.actions[..],
        [PromotionAction::Promote { node_id: 4, .. }]
    ));
}

#[test]
fn unclean_takeover_only_when_allowed_and_nothing_acknowledged_is_lost() {
    let mut cfg = config(PromotionPolicy::Manual);
    cfg.promoted.insert(4);
    cfg.acknowledged_observers.clear();
    let offline = vec![
        partition("t", 0, &[1, 2, 4], &[1], None, 100),
        partition("t", 1, &[1, 2, 4], &[1], None, 100),
    ];
    let mut history = PolicyHistory::default();
    history.hw_witness.insert(offline[0].id(), 100);
    history.hw_witness.insert(offline[1].id(), 101);

    let refused = scans(&offline, &[1, 2], &cfg, history.clone(), 0, 1);
    assert!(refused.actions.is_empty());
    assert!(refused
        .reasons
        .iter()
        .any(|r| r.contains("uncleanTakeover is disabled")));

    cfg.unclean_takeover = true;
    let d = scans(&offline, &[1, 2], &cfg, history, 0, 1);
    match &d.actions[..] {
        [PromotionAction::UncleanElect {
            node_id: 4,
            partitions,
            ..
        }] => assert_eq!(partitions, &vec![offline[0].id()]),
        other => panic!("expected one unclean election, got {other:?}"),
    }
    assert!(
        d.reasons
            .iter()
            .any(|r| r.contains("log end offset 100 < last known high watermark 101")),
        "{:?}",
        d.reasons
    );
}

#[test]
fn no_demotion_while_a_topic_could_not_be_described() {
    let cfg = config(PromotionPolicy::UnderMinIsr);
    let parts: Vec<_> = (0..2)
        .map(|i| partition("t", i, &[1, 2, 4], &[1, 2, 4], Some(1), 100))
        .collect();
    let early = scans(&parts, &[], &cfg, promoted_4_at(0), 300, 30);
    // Past the window, every partition seen healthy: but one topic came back with an error.
    let mut snap = snapshot(at(361), &[], parts.clone());
    snap.undescribed_topics = vec!["orders".into()];
    let held = run(&snap, &cfg, &early.next_history, 361);
    assert!(
        !held
            .actions
            .iter()
            .any(|a| matches!(a, PromotionAction::Demote { .. })),
        "{held:?}"
    );
    assert!(
        held.reasons.iter().any(|r| r
            .to_string()
            .contains("could not describe 1 topic(s) (orders)")),
        "{:?}",
        held.reasons
    );
    assert!(held.next_history.is_auto_promoted(4));
    // Described again: the stabilization window starts over, then the demotion goes ahead.
    let mut history = held.next_history;
    let mut demoted_at = None;
    for s in 362..600 {
        let d = run(&snapshot(at(s), &[], parts.clone()), &cfg, &history, s);
        if d.actions
            .iter()
            .any(|a| matches!(a, PromotionAction::Demote { node_id: 4, .. }))
        {
            demoted_at = Some(s);
            break;
        }
        history = d.next_history;
    }
    let window = cfg.auto_demote_after.expect("autoDemote on").as_secs() as i64;
    assert!(
        demoted_at.is_some_and(|s| s >= 362 + window),
        "demoted at {demoted_at:?}, window {window} s from 362"
    );
}
