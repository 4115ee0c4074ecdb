//! Scenario tests of the engine, one rule each.

use super::fixtures::{at, broker_2_lost, config, healthy, partition, run, scans, snapshot};
use super::*;

#[test]
fn healthy_cluster_needs_nothing() {
    let d = scans(
        &healthy(3),
        &[],
        &config(PromotionPolicy::UnderReplicated),
        PolicyHistory::default(),
        0,
        3,
    );
    assert!(d.actions.is_empty(), "{d:?}");
}

#[test]
fn under_min_isr_promotes_after_the_confirmations() {
    let cfg = config(PromotionPolicy::UnderMinIsr);
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
        matches!(
            &second.actions[..],
            [PromotionAction::Promote { node_id: 4, .. }]
        ),
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
        &config(PromotionPolicy::UnderMinIsr),
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
        &config(PromotionPolicy::UnderMinIsr),
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

/// A new leader under min ISR serves no high watermark (KIP-966) and a successor may have
/// restored none: the lag is then measured against the leader's log end offset, never below the
/// high watermark, so a caught-up observer is promoted and a lagging one still is not.
#[test]
fn without_any_high_watermark_the_leaders_log_end_is_the_bar() {
    let mut parts = broker_2_lost(2);
    for p in &mut parts {
        p.high_watermark = None;
    }
    let cfg = config(PromotionPolicy::UnderMinIsr);
    let d = scans(&parts, &[2], &cfg, PolicyHistory::default(), 0, 5);
    let promoted: Vec<_> = d
        .next_history
        .auto_promotions
        .iter()
        .map(|p| p.node_id)
        .collect();
    assert_eq!(promoted, [4], "{:?}", d.reasons);
    // The leader 1100 messages ahead of 4: lagging, not promoted.
    for p in &mut parts {
        p.log_end_offsets.insert(1, 1200);
    }
    let d = scans(&parts, &[2], &cfg, PolicyHistory::default(), 0, 5);
    assert!(d.actions.is_empty(), "{:?}", d.actions);
    assert!(
        d.reasons
            .iter()
            .any(|r| r.contains("lagging (up to 1100 messages")),
        "{:?}",
        d.reasons
    );
    // Nor does the leader's log end stand in for a high watermark the engine remembers.
    assert!(d.next_history.last_known_hw.is_empty());
}

#[test]
fn a_stale_snapshot_is_never_acted_on_and_breaks_the_streak() {
    let cfg = config(PromotionPolicy::UnderMinIsr);
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
    let cfg = config(PromotionPolicy::UnderMinIsr);
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
        &config(PromotionPolicy::UnderMinIsr),
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
        (PromotionPolicy::Manual, false),
        (PromotionPolicy::LeaderIsObserver, false),
        (PromotionPolicy::UnderMinIsr, false),
        (PromotionPolicy::UnderReplicated, true),
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
    let cfg = config(PromotionPolicy::LeaderIsObserver);
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
        matches!(
            &d.actions[..],
            [PromotionAction::Promote { node_id: 4, .. }]
        ),
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
        &config(PromotionPolicy::UnderMinIsr),
        PolicyHistory::default(),
        0,
        3,
    );
    assert!(d.actions.is_empty());
}

#[test]
fn max_concurrent_promotions_holds_the_second_observer() {
    let mut cfg = config(PromotionPolicy::UnderMinIsr);
    cfg.observers.insert(3);
    cfg.acknowledged_observers.insert(3);
    let parts = vec![
        partition("t", 0, &[1, 2, 4], &[1], Some(1), 5),
        partition("u", 0, &[1, 2, 3], &[1], Some(1), 5),
    ];
    let d = scans(&parts, &[2], &cfg, PolicyHistory::default(), 0, 2);
    assert!(
        matches!(
            &d.actions[..],
            [PromotionAction::Promote { node_id: 3, .. }]
        ),
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
    let mut cfg = config(PromotionPolicy::UnderMinIsr);
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
        [PromotionAction::Promote { node_id: 4, .. }]
    ));
    assert!(d.next_history.auto_promotions.is_empty());
    assert!(d.next_history.last_action.is_empty());
}

#[test]
fn dry_run_plans_the_promotion_at_the_scan_the_live_run_makes_it() {
    let live = config(PromotionPolicy::UnderMinIsr);
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

#[test]
fn a_candidate_awaiting_confirmations_is_rechecked_after_a_tenth_of_the_scan_interval() {
    use std::time::Duration;
    let second = Duration::from_secs(1);
    let mut h = PolicyHistory::default();
    assert_eq!(h.next_scan_after(second, 2), second, "nothing seen");
    h.promote_streak.insert(4, 1);
    assert!(h.confirming(2));
    assert_eq!(h.next_scan_after(second, 2), Duration::from_millis(100));
    assert_eq!(
        h.next_scan_after(Duration::from_secs(3), 2),
        Duration::from_millis(300)
    );
    assert_eq!(
        h.next_scan_after(Duration::from_millis(300), 2),
        Duration::from_millis(100),
        "never below 100 ms"
    );
    assert_eq!(
        h.next_scan_after(Duration::from_millis(100), 2),
        Duration::from_millis(100)
    );
    h.promote_streak.insert(4, 2);
    assert!(
        !h.confirming(2),
        "confirmed (acted on, or held back by cooldown or limits)"
    );
    assert_eq!(h.next_scan_after(second, 2), second);
    assert_eq!(
        h.next_scan_after(second, 1),
        second,
        "one confirmation: nothing awaits"
    );
}

#[test]
fn a_loss_is_confirmed_by_the_quick_recheck_and_a_blip_is_not() {
    // Broker 2 lost: the first scan starts the streak and asks for a quick re-check; the second
    // confirms and promotes. A blip (healthy again at the re-check) resets the streak.
    let c = config(PromotionPolicy::UnderMinIsr);
    let first = run(
        &snapshot(at(0), &[2], broker_2_lost(3)),
        &c,
        &PolicyHistory::default(),
        0,
    );
    assert!(first.actions.is_empty());
    assert!(first.next_history.confirming(c.confirmations));
    let blip = run(
        &snapshot(at(1), &[], healthy(3)),
        &c,
        &first.next_history,
        1,
    );
    assert!(blip.actions.is_empty());
    assert!(
        !blip.next_history.confirming(c.confirmations),
        "{:?}",
        blip.next_history
    );
    let second = run(
        &snapshot(at(1), &[2], broker_2_lost(3)),
        &c,
        &first.next_history,
        1,
    );
    assert!(
        matches!(
            &second.actions[..],
            [PromotionAction::Promote { node_id: 4, .. }]
        ),
        "{second:?}"
    );
    assert!(!second.next_history.confirming(c.confirmations));
}

/// An RF 1 topic placed on the observer: the patch lets 4 lead it, and it is "under min ISR"
/// (observers never count). Promoting 4 would make it a primary for every partition it hosts to
/// fix one placement: the engine does not, and says why.
#[test]
fn an_observer_only_partition_never_triggers_a_promotion() {
    let mut parts = healthy(1);
    parts.push(partition("rf1", 0, &[4], &[4], Some(4), 100));
    let cfg = config(PromotionPolicy::UnderReplicated);
    let d = scans(&parts, &[], &cfg, PolicyHistory::default(), 0, 5);
    assert!(d.actions.is_empty(), "{d:?}");
    assert!(d.triggered.is_empty());
    assert_eq!(
        d.observer_only.as_deref(),
        Some(
            &[TopicPartition {
                topic: "rf1".into(),
                partition: 0
            }][..]
        )
    );
    assert!(
        d.reasons
            .iter()
            .any(|r| r.starts_with("rf1-0 has only observers as replicas")),
        "{:?}",
        d.reasons
    );
    let snap = snapshot(at(0), &[], parts.clone());
    let history = PolicyHistory::default();
    assert!(triggered(&snap, &cfg, &history).is_empty());
    assert_eq!(
        observer_only_partitions(&snap, &cfg, &history),
        vec![TopicPartition {
            topic: "rf1".into(),
            partition: 0
        }]
    );
}

/// The observer-only partition does not hide a real trigger: broker 2 lost still promotes 4.
#[test]
fn an_observer_only_partition_does_not_mask_a_real_trigger() {
    let mut parts = broker_2_lost(1);
    parts.push(partition("rf1", 0, &[4], &[4], Some(4), 100));
    let d = scans(
        &parts,
        &[2],
        &config(PromotionPolicy::UnderMinIsr),
        PolicyHistory::default(),
        0,
        2,
    );
    assert!(
        matches!(
            &d.actions[..],
            [PromotionAction::Promote { node_id: 4, .. }]
        ),
        "{d:?}"
    );
}

/// Demoting 4 would turn a partition whose only primary is 4 into an observer-only one under
/// min ISR: the engine keeps 4 promoted.
#[test]
fn no_demotion_makes_a_partition_observer_only() {
    let mut parts = healthy(1);
    let mut p = partition("rf1", 0, &[4], &[4], Some(4), 100);
    p.min_isr = Some(1);
    parts.push(p);
    let d = scans(
        &parts,
        &[],
        &config(PromotionPolicy::UnderMinIsr),
        super::fixtures::promoted_4_at(0),
        400,
        3,
    );
    assert!(
        !d.actions.iter().any(|a| matches!(
            a,
            PromotionAction::Demote { .. } | PromotionAction::MoveLeadership { .. }
        )),
        "{d:?}"
    );
    assert!(
        d.reasons
            .iter()
            .any(|r| r.starts_with("broker 4: stays promoted") && r.contains("rf1-0")),
        "{:?}",
        d.reasons
    );
}

/// The promotion's time is kept in whole seconds, as status stores it: the copy read back then
/// equals the engine's memory, and the engine does not rewrite an unchanged status every scan
/// (seen on the multi-cluster bed: a write every scan, each breaking the reconciler's
/// preconditions).
#[test]
fn a_promotion_time_survives_the_status_round_trip() {
    let cfg = config(PromotionPolicy::UnderMinIsr);
    let mut history = PolicyHistory::default();
    let mut promoted = None;
    for s in 0..5 {
        let now = at(s) + std::time::Duration::from_millis(437);
        let d = decide(&snapshot(now, &[2], broker_2_lost(1)), &cfg, &history, now);
        history = d.next_history.clone();
        if let Some(p) = history.auto_promotions.first() {
            promoted = Some(p.clone());
            break;
        }
    }
    let promoted = promoted.expect("4 promoted within 5 scans");
    let stored: crate::crd::AutoPromotion =
        serde_json::from_value(serde_json::to_value(&promoted).unwrap()).unwrap();
    assert_eq!(stored, promoted);
}
