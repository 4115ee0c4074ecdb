use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use proptest::prelude::*;

use super::*;
use crate::promotion::fixtures::{at, broker_2_lost, config, healthy, partition, snapshot};
use crate::promotion::{decide, AutoPromotion, EngineActionKind, PromotionAction, PromotionPolicy};

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition {
        topic: topic.into(),
        partition,
    }
}

fn json_len(state: &EngineState) -> usize {
    serde_json::to_vec(state).unwrap().len()
}

/// A history with `topics` × `per_topic` high watermarks, topic names `len` bytes long.
fn history_with_hws(topics: usize, per_topic: i32, len: usize, hw: i64) -> PolicyHistory {
    let mut h = PolicyHistory::default();
    for t in 0..topics {
        let name = format!("{t:0>len$}");
        for p in 0..per_topic {
            h.last_known_hw.insert(tp(&name, p), hw);
        }
    }
    h
}

#[test]
fn partitions_round_trip_at_the_edges() {
    let pairs = vec![(0, 0), (1, i64::MAX), (7, 127), (8, 128), (i32::MAX, 1)];
    let text = encode_partitions(&pairs);
    assert_eq!(decode_partitions("t", &text).unwrap(), pairs);
    assert_eq!(decode_partitions("t", "").unwrap(), vec![]);
}

#[test]
fn corrupt_partitions_say_which_topic_and_what_to_do() {
    let e = decode_partitions("orders", "not base64!").unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("topic orders") && text.contains("not base64"),
        "{text}"
    );
    assert!(text.contains("do not edit status.engineState"), "{text}");
    // One varint pair cut in the middle.
    let e = decode_partitions("t", &BASE64.encode([0x00, 0x80])).unwrap_err();
    assert!(e.to_string().contains("truncated"), "{e}");
    // A gap that pushes the partition number past int32.
    let mut bytes = Vec::new();
    put_varint(&mut bytes, u64::from(u32::MAX));
    put_varint(&mut bytes, 0);
    let e = decode_partitions("t", &BASE64.encode(bytes)).unwrap_err();
    assert!(e.to_string().contains("beyond int32"), "{e}");
}

/// The bound the docs state: 50,000 partitions hosted by an observer (500 topics of 100, names
/// of 40 characters) fit in full even with the largest high watermarks Kafka can have, and a
/// realistic one (below 2^40 messages) about two thirds of it.
#[test]
fn fifty_thousand_partitions_fit_within_the_bound() {
    let cfg = config(PromotionPolicy::UnderMinIsr);
    let worst = save(&history_with_hws(500, 100, 40, i64::MAX), &cfg, at(0));
    assert_eq!(worst.omitted_high_watermarks, 0);
    let worst_len = json_len(&worst);
    assert!(worst_len <= MAX_STATE_BYTES, "{worst_len} bytes");
    let typical = save(&history_with_hws(500, 100, 40, (1 << 40) - 1), &cfg, at(0));
    assert_eq!(typical.omitted_high_watermarks, 0);
    let typical_len = json_len(&typical);
    eprintln!(
        "engineState with 50,000 high watermarks: {worst_len} bytes (i64::MAX), {typical_len} bytes (2^40 - 1), bound {MAX_STATE_BYTES}"
    );
    assert!(typical_len < 500 * 1024, "{typical_len} bytes");
    // Everything saved comes back.
    let restored = restore(
        &worst,
        PolicyHistory::default(),
        at(0),
        SignedDuration::from_secs(3),
    )
    .unwrap();
    assert_eq!(restored.history.last_known_hw.len(), 50_000);
}

/// The bound holds by construction: 50,000 single-partition topics with Kafka's longest names
/// (249 characters, 12 MB of names alone) are cut at the bound and the rest is counted.
#[test]
fn the_bound_holds_whatever_the_names() {
    let cfg = config(PromotionPolicy::UnderMinIsr);
    let state = save(&history_with_hws(50_000, 1, 249, i64::MAX), &cfg, at(0));
    let len = json_len(&state);
    assert!(len <= MAX_STATE_BYTES, "{len} bytes");
    assert!(state.omitted_high_watermarks > 0);
    assert_eq!(
        state.high_watermarks.len() + state.omitted_high_watermarks as usize,
        50_000
    );
    let restored = restore(
        &state,
        PolicyHistory::default(),
        at(1),
        SignedDuration::from_secs(3),
    )
    .unwrap();
    assert!(
        restored.dropped.iter().any(|d| d.contains("left out")),
        "{:?}",
        restored.dropped
    );
}

#[test]
fn streaks_are_capped_and_expired_cooldowns_are_not_saved() {
    let cfg = config(PromotionPolicy::UnderMinIsr); // confirmations 2, cooldown 300 s
    let mut h = PolicyHistory::default();
    h.promote_streak.insert(4, 9);
    h.last_action.insert(
        5,
        LastAction {
            kind: EngineActionKind::Demote,
            at: at(0),
        },
    );
    h.last_action.insert(
        6,
        LastAction {
            kind: EngineActionKind::Promote,
            at: at(100),
        },
    );
    let s = save(&h, &cfg, at(350));
    let ids: Vec<i32> = s.brokers.iter().map(|b| b.node_id).collect();
    assert_eq!(ids, vec![4, 6], "broker 5's cooldown ended at 300 s");
    assert_eq!(s.brokers[0].promote_streak, Some(2));
    assert_eq!(s.brokers[1].last_action, Some(EngineActionKind::Promote));
}

#[test]
fn a_restart_keeps_the_stabilization_deadline() {
    let cfg = config(PromotionPolicy::UnderMinIsr); // window 60 s, cooldown 300 s
                                                    // Promoted at 0 (broker 2 lost), recovered from 400 s on.
    let mut history = PolicyHistory::from_auto_promotions(vec![AutoPromotion {
        node_id: 4,
        at: Time(at(0)),
        reason: "test".into(),
    }]);
    for s in 400..430 {
        history = decide(&snapshot(at(s), &[], healthy(1)), &cfg, &history, at(s)).next_history;
    }
    assert_eq!(history.recovered_since.get(&4), Some(&at(400)));
    let saved = save(&history, &cfg, at(429));
    // The successor starts at 445 s from status.autoPromotions alone, plus the saved state.
    let base = PolicyHistory::from_auto_promotions(history.auto_promotions.clone());
    let restored = restore(&saved, base.clone(), at(445), SignedDuration::from_secs(3)).unwrap();
    let mut h = restored.history;
    let mut demoted_at = None;
    for s in 445..600 {
        let d = decide(&snapshot(at(s), &[], healthy(1)), &cfg, &h, at(s));
        if d.actions
            .iter()
            .any(|a| matches!(a, PromotionAction::Demote { .. }))
        {
            demoted_at = Some(s);
            break;
        }
        h = d.next_history;
    }
    assert_eq!(demoted_at, Some(460), "the original deadline, 400 + 60 s");
    // Without the saved state the window would restart at 445.
    let mut h = base;
    let mut fresh_at = None;
    for s in 445..600 {
        let d = decide(&snapshot(at(s), &[], healthy(1)), &cfg, &h, at(s));
        if d.actions
            .iter()
            .any(|a| matches!(a, PromotionAction::Demote { .. }))
        {
            fresh_at = Some(s);
            break;
        }
        h = d.next_history;
    }
    assert_eq!(fresh_at, Some(505));
}

#[test]
fn a_restart_never_elects_on_the_restored_high_watermark() {
    let mut cfg = config(PromotionPolicy::Manual);
    cfg.promoted.insert(4);
    cfg.acknowledged_observers.clear();
    cfg.unclean_takeover = true;
    // Seen with a leader at HW 100, then every primary lost.
    let seen = decide(
        &snapshot(
            at(0),
            &[],
            vec![partition("t", 0, &[1, 2, 4], &[1, 2], Some(1), 100)],
        ),
        &cfg,
        &PolicyHistory::default(),
        at(0),
    );
    let saved = save(&seen.next_history, &cfg, at(0));
    let offline = snapshot(
        at(20),
        &[1, 2],
        vec![partition("t", 0, &[1, 2, 4], &[1], None, 100)],
    );
    // The process that read the high watermark elects.
    let d = decide(&offline, &cfg, &seen.next_history, at(20));
    assert!(
        matches!(
            &d.actions[..],
            [PromotionAction::UncleanElect { node_id: 4, .. }]
        ),
        "{:?} {:?}",
        d.actions,
        d.reasons
    );
    // A successor restores the high watermark (for lag) but does not elect on it: records the
    // lost leader acknowledged after the save would be lost.
    let restored = restore(
        &saved,
        PolicyHistory::default(),
        at(20),
        SignedDuration::from_secs(3),
    )
    .unwrap();
    assert_eq!(
        restored.history.last_known_hw.values().collect::<Vec<_>>(),
        vec![&100]
    );
    let d = decide(&offline, &cfg, &restored.history, at(20));
    assert!(d.actions.is_empty(), "{:?}", d.actions);
    assert!(
        d.reasons
            .iter()
            .any(|r| r.contains("last high watermark known (100)")
                && r.contains("restored from a predecessor")),
        "{:?}",
        d.reasons
    );
    // With no high watermark at all, the takeover is refused too.
    let d = decide(&offline, &cfg, &PolicyHistory::default(), at(20));
    assert!(d.actions.is_empty());
    assert!(d
        .reasons
        .iter()
        .any(|r| r.contains("no high watermark known")));
}

#[test]
fn only_partitions_an_observer_hosts_are_remembered() {
    let cfg = config(PromotionPolicy::UnderMinIsr);
    let parts = vec![
        partition("t", 0, &[1, 2, 4], &[1, 2], Some(1), 100),
        partition("u", 0, &[1, 2, 3], &[1, 2, 3], Some(1), 100),
    ];
    let d = decide(
        &snapshot(at(0), &[], parts),
        &cfg,
        &PolicyHistory::default(),
        at(0),
    );
    let remembered: Vec<&TopicPartition> = d.next_history.last_known_hw.keys().collect();
    assert_eq!(remembered, vec![&tp("t", 0)]);
}

#[test]
fn old_or_future_states_are_refused_and_small_skew_is_now() {
    let cfg = config(PromotionPolicy::UnderMinIsr);
    let mut h = PolicyHistory::from_auto_promotions(vec![AutoPromotion {
        node_id: 4,
        at: Time(at(0)),
        reason: "r".into(),
    }]);
    h.recovered_since.insert(4, at(1000));
    let saved = save(&h, &cfg, at(1000));
    let base = PolicyHistory::from_auto_promotions(h.auto_promotions.clone());
    let stale = SignedDuration::from_secs(3);
    let e = restore(&saved, base.clone(), at(1000 + 601), stale).unwrap_err();
    assert!(
        matches!(e, EngineStateError::TooOld { age_s: 601, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("starts afresh"));
    let e = restore(&saved, base.clone(), at(1000 - 121), stale).unwrap_err();
    assert!(e.to_string().contains("check the clocks"), "{e}");
    // Saved 30 s "in the future": the timer counts from now, so the demotion is later, not sooner.
    let r = restore(&saved, base, at(970), stale).unwrap();
    assert_eq!(r.history.recovered_since.get(&4), Some(&at(970)));
}

#[test]
fn streaks_survive_only_a_short_gap() {
    let cfg = config(PromotionPolicy::UnderMinIsr);
    let d = decide(
        &snapshot(at(0), &[], broker_2_lost(1)),
        &cfg,
        &PolicyHistory::default(),
        at(0),
    );
    assert_eq!(d.next_history.promote_streak.get(&4), Some(&1));
    let saved = save(&d.next_history, &cfg, at(0));
    let stale = SignedDuration::from_secs(3);
    let kept = restore(&saved, PolicyHistory::default(), at(2), stale).unwrap();
    assert_eq!(kept.history.promote_streak.get(&4), Some(&1));
    // The successor's first scan is the second confirmation: it promotes.
    let next = decide(
        &snapshot(at(2), &[], broker_2_lost(1)),
        &cfg,
        &kept.history,
        at(2),
    );
    assert!(matches!(
        &next.actions[..],
        [PromotionAction::Promote { node_id: 4, .. }]
    ));
    let gap = restore(&saved, PolicyHistory::default(), at(20), stale).unwrap();
    assert!(gap.history.promote_streak.is_empty());
    assert!(
        gap.dropped[0].contains("confirmation streak 1 not restored"),
        "{:?}",
        gap.dropped
    );
}

#[test]
fn the_later_of_two_last_actions_wins() {
    let cfg = config(PromotionPolicy::UnderMinIsr);
    let mut h = PolicyHistory::default();
    h.last_action.insert(
        4,
        LastAction {
            kind: EngineActionKind::Demote,
            at: at(50),
        },
    );
    let saved = save(&h, &cfg, at(60));
    let base = PolicyHistory::from_auto_promotions(vec![AutoPromotion {
        node_id: 4,
        at: Time(at(10)),
        reason: "r".into(),
    }]);
    let r = restore(&saved, base, at(61), SignedDuration::from_secs(3)).unwrap();
    assert_eq!(r.history.last_action[&4].kind, EngineActionKind::Demote);
    assert_eq!(r.history.last_action[&4].at, at(50));
}

#[test]
fn writes_on_change_rate_limited() {
    let cfg = config(PromotionPolicy::UnderMinIsr);
    let mut h = history_with_hws(1, 2, 1, 100);
    let first = save(&h, &cfg, at(0));
    assert_eq!(
        write_due(None, &first, false, at(0)),
        Some(WriteReason::Decisions)
    );
    let last = LastWrite::new(first.clone(), h.last_known_hw.clone());
    assert_eq!(
        write_due(Some(&last), &save(&h, &cfg, at(5)), false, at(5)),
        None
    );
    // High watermarks moved: written once 30 s have passed.
    h.last_known_hw.insert(tp("0", 0), 200);
    let moved = save(&h, &cfg, at(10));
    assert_eq!(write_due(Some(&last), &moved, false, at(10)), None);
    assert_eq!(
        write_due(Some(&last), &moved, false, at(30)),
        Some(WriteReason::HighWatermarks)
    );
    // A decision or a frozen high watermark: at once, but not twice within a second.
    h.promote_streak.insert(4, 1);
    let decided = save(&h, &cfg, at(10));
    assert_eq!(
        write_due(
            Some(&last),
            &decided,
            false,
            at(0) + SignedDuration::from_millis(500)
        ),
        None
    );
    assert_eq!(
        write_due(Some(&last), &decided, false, at(2)),
        Some(WriteReason::Decisions)
    );
    assert_eq!(
        write_due(Some(&last), &first, true, at(2)),
        Some(WriteReason::FrozenHighWatermark)
    );
    assert_eq!(
        write_due(Some(&last), &first, false, at(240)),
        Some(WriteReason::Heartbeat)
    );
    assert!(
        HEARTBEAT * 2 < MAX_AGE,
        "a successor always finds a heartbeat young enough"
    );
}

#[test]
fn a_partition_losing_its_leader_is_a_frozen_unsaved_high_watermark() {
    let cfg = config(PromotionPolicy::UnderMinIsr);
    let live = vec![partition("t", 0, &[1, 2, 4], &[1, 2], Some(1), 100)];
    let d = decide(
        &snapshot(at(0), &[], live.clone()),
        &cfg,
        &PolicyHistory::default(),
        at(0),
    );
    let written = HashMap::from([(tp("t", 0), 90)]);
    assert!(!frozen_unsaved(
        &snapshot(at(0), &[], live),
        &d.next_history,
        &written
    ));
    let offline = snapshot(
        at(1),
        &[1, 2],
        vec![partition("t", 0, &[1, 2, 4], &[1], None, 100)],
    );
    assert!(frozen_unsaved(&offline, &d.next_history, &written));
    let written = HashMap::from([(tp("t", 0), 100)]);
    assert!(!frozen_unsaved(&offline, &d.next_history, &written));
}

fn arb_pairs() -> impl Strategy<Value = Vec<(i32, i64)>> {
    prop::collection::btree_map(0..=i32::MAX, 0..=i64::MAX, 0..50)
        .prop_map(|m| m.into_iter().collect())
}

prop_compose! {
    /// A history as the engine keeps it at `at(1000)`: streaks of observers not promoted,
    /// timers of auto-promoted brokers, last actions within the 300 s cooldown, high watermarks.
    fn arb_history()(
        auto in prop::collection::btree_set(1..20i32, 0..4),
        streaks in prop::collection::btree_map(20..40i32, 1..=2u32, 0..4),
        timers in prop::collection::vec(0..1000i64, 4),
        actions in prop::collection::btree_map(1..40i32, (0..5usize, 701..=1000i64), 0..6),
        hws in prop::collection::btree_map(("[a-z]{1,3}", 0..64i32), 0..=i64::MAX, 0..40),
    ) -> PolicyHistory {
        let kinds = [EngineActionKind::Promote, EngineActionKind::Demote, EngineActionKind::MoveLeadership, EngineActionKind::ReorderReplicas, EngineActionKind::UncleanElect];
        let auto_promotions: Vec<AutoPromotion> = auto.iter().map(|&id| AutoPromotion { node_id: id, at: Time(at(700)), reason: "r".into() }).collect();
        let mut h = PolicyHistory::from_auto_promotions(auto_promotions);
        h.promote_streak = streaks;
        h.recovered_since = auto.iter().zip(timers).map(|(&id, t)| (id, at(t))).collect();
        for (id, (k, t)) in actions {
            let a = LastAction { kind: kinds[k], at: at(t) };
            let e = h.last_action.entry(id).or_insert(a);
            if a.at > e.at { *e = a; }
        }
        h.last_known_hw = hws.into_iter().map(|((t, p), hw)| (tp(&t, p), hw)).collect::<HashMap<_, _>>();
        h
    }
}

proptest! {
    #[test]
    fn encoding_round_trips(pairs in arb_pairs()) {
        let text = encode_partitions(&pairs);
        prop_assert_eq!(decode_partitions("t", &text).unwrap(), pairs);
    }

    #[test]
    fn decoding_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64), text in ".{0,40}") {
        let _ = decode_partitions("t", &BASE64.encode(&bytes));
        let _ = decode_partitions("t", &text);
    }

    /// save then restore, at the same instant, gives back the history a successor needs, and
    /// the saved JSON round-trips through the status type.
    #[test]
    fn save_then_restore_is_the_identity(h in arb_history()) {
        let mut cfg = config(PromotionPolicy::UnderMinIsr);
        cfg.confirmations = 2;
        cfg.cooldown = Duration::from_secs(300);
        let saved = save(&h, &cfg, at(1000));
        let json = serde_json::to_string(&saved).unwrap();
        let back: EngineState = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(&back, &saved);
        let base = PolicyHistory::from_auto_promotions(h.auto_promotions.clone());
        let r = restore(&back, base, at(1000), SignedDuration::from_secs(3)).unwrap();
        prop_assert!(r.dropped.is_empty(), "{:?}", r.dropped);
        prop_assert_eq!(r.history, h);
    }

    /// Restored timestamps are never after `now`, whatever the skew within the tolerance: the
    /// successor may act later than the predecessor would have, never sooner.
    #[test]
    fn restored_times_are_never_in_the_future(h in arb_history(), skew in -119i64..600) {
        let cfg = config(PromotionPolicy::UnderMinIsr);
        let saved = save(&h, &cfg, at(1000));
        let now = at(1000 + skew);
        let base = PolicyHistory::from_auto_promotions(h.auto_promotions.clone());
        let r = restore(&saved, base, now, SignedDuration::from_secs(3)).unwrap();
        prop_assert!(r.history.recovered_since.values().all(|t| *t <= now));
        prop_assert!(r.history.last_action.values().all(|a| a.at <= now));
        let auto: BTreeSet<i32> = h.auto_promotions.iter().map(|p| p.node_id).collect();
        prop_assert!(r.history.recovered_since.keys().all(|id| auto.contains(id)));
    }
}
