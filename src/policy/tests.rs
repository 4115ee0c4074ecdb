//! Scenario tests of the engine, one rule each.

use super::fixtures::{at, broker_2_lost, config, healthy, partition, snapshot};
use super::*;

fn run(
    snap: &ClusterSnapshot,
    cfg: &PolicyConfig,
    history: &PolicyHistory,
    now_secs: i64,
) -> Decision {
    decide(snap, cfg, history, at(now_secs))
}

/// Feeds `scans` identical scans one second apart and returns the last decision.
fn scans(
    parts: &[PartitionState],
    down: &[BrokerId],
    cfg: &PolicyConfig,
    history: PolicyHistory,
    from: i64,
    n: i64,
) -> Decision {
    let mut history = history;
    let mut last = None;
    for s in from..from + n {
        let d = run(&snapshot(at(s), down, parts.to_vec()), cfg, &history, s);
        history = d.next_history.clone();
        last = Some(d);
    }
    last.expect("at least one scan")
}

fn promoted_4_at(secs: i64) -> PolicyHistory {
    PolicyHistory::from_auto_promotions(vec![AutoPromotion {
        node_id: 4,
        at: at(secs),
        reason: "test".into(),
    }])
}

#[test]
fn healthy_cluster_needs_nothing() {
    let d = scans(
        &healthy(3),
        &[],
        &config(PolicyKind::UnderReplicated),
        PolicyHistory::default(),
        0,
        3,
    );
    assert!(d.actions.is_empty(), "{d:?}");
}

#[test]
fn under_min_isr_promotes_after_the_confirmations() {
    let cfg = config(PolicyKind::UnderMinIsr);
    let first = run(
        &snapshot(at(0), &[2], broker_2_lost(3)),
        &cfg,
        &PolicyHistory::default(),
        0,
    );
    assert!(first.actions.is_empty());
    assert!(
        first.reasons.iter().any(|r| r.contains("1 of 2")),
        "{:?}",
        first.reasons
    );
    let second = run(
        &snapshot(at(1), &[2], broker_2_lost(3)),
        &cfg,
        &first.next_history,
        1,
    );
    assert!(
        matches!(&second.actions[..], [Action::Promote { node_id: 4, .. }]),
        "{second:?}"
    );
    assert!(second.next_history.is_auto_promoted(4));
}

#[test]
fn a_lagging_observer_is_never_promoted() {
    let mut parts = broker_2_lost(2);
    parts[1].log_end_offsets.insert(4, 100 - 1001);
    let d = scans(
        &parts,
        &[2],
        &config(PolicyKind::UnderMinIsr),
        PolicyHistory::default(),
        0,
        5,
    );
    assert!(d.actions.is_empty());
    assert!(
        d.reasons
            .iter()
            .any(|r| r.contains("lagging (up to 1001 messages")),
        "{:?}",
        d.reasons
    );
}

#[test]
fn unknown_lag_blocks_promotion() {
    let mut parts = broker_2_lost(2);
    parts[0].log_end_offsets.remove(&4);
    let d = scans(
        &parts,
        &[2],
        &config(PolicyKind::UnderMinIsr),
        PolicyHistory::default(),
        0,
        5,
    );
    assert!(d.actions.is_empty());
    assert!(
        d.reasons.iter().any(|r| r.contains("lag is unknown")),
        "{:?}",
        d.reasons
    );
}

#[test]
fn a_stale_snapshot_is_never_acted_on_and_breaks_the_streak() {
    let cfg = config(PolicyKind::UnderMinIsr);
    let first = run(
        &snapshot(at(0), &[2], broker_2_lost(1)),
        &cfg,
        &PolicyHistory::default(),
        0,
    );
    let stale = run(
        &snapshot(at(0), &[2], broker_2_lost(1)),
        &cfg,
        &first.next_history,
        10,
    );
    assert!(stale.actions.is_empty());
    assert!(stale.reasons[0].contains("stale"));
    assert!(stale.next_history.promote_streak.is_empty());
}

#[test]
fn an_unreachable_but_registered_broker_is_unknown_not_dead() {
    let mut snap = snapshot(at(0), &[], broker_2_lost(1));
    snap.brokers.get_mut(&2).unwrap().reachable = false;
    let cfg = config(PolicyKind::UnderMinIsr);
    let d1 = run(&snap, &cfg, &PolicyHistory::default(), 0);
    snap.taken_at = at(1);
    let d2 = run(&snap, &cfg, &d1.next_history, 1);
    assert!(d2.actions.is_empty());
    assert!(
        d2.reasons.iter().any(|r| r.contains("state unknown")),
        "{:?}",
        d2.reasons
    );
}

#[test]
fn unknown_min_isr_blocks_promotion() {
    let mut parts = broker_2_lost(1);
    parts[0].min_isr = None;
    let d = scans(
        &parts,
        &[2],
        &config(PolicyKind::UnderMinIsr),
        PolicyHistory::default(),
        0,
        4,
    );
    assert!(d.actions.is_empty());
}

#[test]
fn each_policy_covers_its_trigger() {
    // Under-replicated but not under min ISR: RF4 with 3 primaries, min ISR 2, one primary lost.
    let parts = vec![partition("t", 0, &[1, 2, 3, 4], &[1, 2], Some(1), 10)];
    let down = [3];
    for (policy, expect) in [
        (PolicyKind::Manual, false),
        (PolicyKind::LeaderIsObserver, false),
        (PolicyKind::UnderMinIsr, false),
        (PolicyKind::UnderReplicated, true),
    ] {
        let d = scans(
            &parts,
            &down,
            &config(policy),
            PolicyHistory::default(),
            0,
            2,
        );
        assert_eq!(!d.actions.is_empty(), expect, "{policy:?}: {d:?}");
    }
}

#[test]
fn leader_is_observer_promotes_only_when_every_primary_is_gone() {
    let cfg = config(PolicyKind::LeaderIsObserver);
    let under_min = scans(
        &broker_2_lost(1),
        &[2],
        &cfg,
        PolicyHistory::default(),
        0,
        3,
    );
    assert!(under_min.actions.is_empty());
    let offline = vec![partition("t", 0, &[1, 2, 4], &[1], None, 100)];
    let mut history = PolicyHistory::default();
    history.last_known_hw.insert(offline[0].id(), 100);
    let d = scans(&offline, &[1, 2], &cfg, history, 0, 2);
    assert!(
        matches!(&d.actions[..], [Action::Promote { node_id: 4, .. }]),
        "{d:?}"
    );
}

#[test]
fn excluded_topics_do_not_trigger() {
    let parts: Vec<_> = broker_2_lost(1)
        .into_iter()
        .map(|mut p| {
            p.topic = "__consumer_offsets".into();
            p
        })
        .collect();
    let d = scans(
        &parts,
        &[2],
        &config(PolicyKind::UnderMinIsr),
        PolicyHistory::default(),
        0,
        3,
    );
    assert!(d.actions.is_empty());
}

#[test]
fn max_concurrent_promotions_holds_the_second_observer() {
    let mut cfg = config(PolicyKind::UnderMinIsr);
    cfg.observers.insert(3);
    cfg.acknowledged_observers.insert(3);
    let parts = vec![
        partition("t", 0, &[1, 2, 4], &[1], Some(1), 5),
        partition("u", 0, &[1, 2, 3], &[1], Some(1), 5),
    ];
    let d = scans(&parts, &[2], &cfg, PolicyHistory::default(), 0, 2);
    assert!(
        matches!(&d.actions[..], [Action::Promote { node_id: 3, .. }]),
        "{d:?}"
    );
    assert!(
        d.reasons
            .iter()
            .any(|r| r.contains("maxConcurrentPromotions")),
        "{:?}",
        d.reasons
    );
}

#[test]
fn dry_run_reports_but_records_nothing() {
    let mut cfg = config(PolicyKind::UnderMinIsr);
    cfg.dry_run = true;
    let d = scans(
        &broker_2_lost(1),
        &[2],
        &cfg,
        PolicyHistory::default(),
        0,
        3,
    );
    assert!(d.dry_run);
    assert!(matches!(
        &d.actions[..],
        [Action::Promote { node_id: 4, .. }]
    ));
    assert!(d.next_history.auto_promotions.is_empty());
    assert!(d.next_history.last_action.is_empty());
}

#[test]
fn demotion_waits_for_the_window_and_moves_leadership_first() {
    let cfg = config(PolicyKind::UnderMinIsr);
    // Broker 4 was promoted at 0, broker 2 came back, 4 is in the ISR and leads t-1.
    let mut parts: Vec<_> = (0..2)
        .map(|i| partition("t", i, &[1, 2, 4], &[1, 2, 4], Some(1), 100))
        .collect();
    parts[1].leader = Some(4);
    let early = scans(&parts, &[], &cfg, promoted_4_at(0), 300, 30);
    assert!(early.actions.is_empty(), "{early:?}");
    let d = scans(&parts, &[], &cfg, early.next_history, 330, 31);
    match &d.actions[..] {
        [
            Action::MoveLeadership {
                node_id: 4,
                partitions,
                ..
            },
        ] => assert_eq!(partitions, &vec![parts[1].id()]),
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
        matches!(&d.actions[..], [Action::Demote { node_id: 4, .. }]),
        "{d:?}"
    );
    assert!(!d.next_history.is_auto_promoted(4));
}

#[test]
fn demotion_is_refused_when_leadership_cannot_move() {
    let cfg = config(PolicyKind::UnderMinIsr);
    let parts = vec![partition("t", 0, &[4, 1, 2], &[1, 2, 4], Some(4), 100)];
    let d = scans(&parts, &[], &cfg, promoted_4_at(0), 400, 70);
    assert!(d.actions.is_empty());
    assert!(
        d.reasons
            .iter()
            .any(|r| r.contains("is its preferred leader")),
        "{:?}",
        d.reasons
    );
}

#[test]
fn demotion_never_drops_a_partition_under_min_isr() {
    let cfg = config(PolicyKind::UnderMinIsr);
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
    let cfg = config(PolicyKind::UnderMinIsr);
    let mut history = PolicyHistory::default();
    history.last_action.insert(
        4,
        LastAction {
            kind: ActionKind::Demote,
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
        [Action::Promote { node_id: 4, .. }]
    ));
}

#[test]
fn unclean_takeover_only_when_allowed_and_nothing_acknowledged_is_lost() {
    let mut cfg = config(PolicyKind::Manual);
    cfg.promoted.insert(4);
    cfg.acknowledged_observers.clear();
    let offline = vec![
        partition("t", 0, &[1, 2, 4], &[1], None, 100),
        partition("t", 1, &[1, 2, 4], &[1], None, 100),
    ];
    let mut history = PolicyHistory::default();
    history.last_known_hw.insert(offline[0].id(), 100);
    history.last_known_hw.insert(offline[1].id(), 101);

    let refused = scans(&offline, &[1, 2], &cfg, history.clone(), 0, 1);
    assert!(refused.actions.is_empty());
    assert!(
        refused
            .reasons
            .iter()
            .any(|r| r.contains("uncleanTakeover is disabled"))
    );

    cfg.unclean_takeover = true;
    let d = scans(&offline, &[1, 2], &cfg, history, 0, 1);
    match &d.actions[..] {
        [
            Action::UncleanElect {
                node_id: 4,
                partitions,
                ..
            },
        ] => assert_eq!(partitions, &vec![offline[0].id()]),
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
fn dry_run_plans_the_promotion_at_the_scan_the_live_run_makes_it() {
    let live = config(PolicyKind::UnderMinIsr);
    let mut dry = live.clone();
    dry.dry_run = true;
    let (mut h_live, mut h_dry) = (PolicyHistory::default(), PolicyHistory::default());
    let mut firsts = (None, None);
    for s in 0..8 {
        let (down, parts) = if s < 3 {
            (vec![], healthy(2))
        } else {
            (vec![2], broker_2_lost(2))
        };
        let snap = snapshot(at(s), &down, parts);
        let (l, d) = (run(&snap, &live, &h_live, s), run(&snap, &dry, &h_dry, s));
        if firsts.0.is_none() && !l.actions.is_empty() {
            firsts.0 = Some((s, l.actions.clone()));
        }
        if !d.actions.is_empty() {
            firsts.1.get_or_insert((s, d.actions.clone()));
        } else if firsts.1.is_some() {
            panic!(
                "the dry-run plan dropped the promotion at scan {s}: {:?}",
                d.reasons
            );
        }
        h_live = l.next_history;
        h_dry = d.next_history;
    }
    assert!(firsts.0.is_some(), "the live run never promoted");
    assert_eq!(firsts.0, firsts.1);
}
