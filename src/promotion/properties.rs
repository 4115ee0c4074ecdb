//! Property tests: the engine's rules hold for arbitrary clusters and scan sequences.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::jiff::SignedDuration;
use proptest::prelude::*;

use super::fixtures::{at, partition, snapshot};
use super::*;

const BROKERS: [BrokerId; 5] = [1, 2, 3, 4, 5];

fn broker_state() -> impl Strategy<Value = BrokerState> {
    prop_oneof![
        6 => Just(BrokerState { registered: true, reachable: true }),
        2 => Just(BrokerState { registered: false, reachable: false }),
        1 => Just(BrokerState { registered: true, reachable: false }),
    ]
}

fn partition_state(index: i32) -> impl Strategy<Value = PartitionState> {
    let topic = prop_oneof![Just("t"), Just("u"), Just("__internal")];
    (
        topic,
        Just(BROKERS.to_vec()).prop_shuffle(),
        2usize..=4,
        prop::collection::vec(any::<bool>(), 4),
        prop::option::weighted(0.8, 0usize..4),
        prop::option::weighted(0.9, 1u32..=3),
        prop::option::weighted(0.9, 0i64..5000),
        prop::collection::vec(prop::option::weighted(0.9, 0i64..2500), 4),
    )
        .prop_map(
            move |(topic, shuffled, rf, in_isr, leader_pick, min_isr, hw, behind)| {
                let replicas: Vec<BrokerId> = shuffled[..rf].to_vec();
                let isr: Vec<BrokerId> = replicas
                    .iter()
                    .zip(&in_isr)
                    .filter(|(_, keep)| **keep)
                    .map(|(r, _)| *r)
                    .collect();
                let leader = leader_pick.and_then(|i| isr.get(i % isr.len().max(1)).copied());
                let base = hw.unwrap_or(3000);
                let log_end_offsets = replicas
                    .iter()
                    .zip(&behind)
                    .filter_map(|(r, b)| b.map(|b| (*r, base - b)))
                    .collect();
                PartitionState {
                    topic: topic.into(),
                    partition: index,
                    replicas,
                    isr,
                    leader,
                    min_isr,
                    high_watermark: leader.and(hw),
                    log_end_offsets,
                    metadata_stale: false,
                }
            },
        )
}

fn cluster() -> impl Strategy<Value = (BTreeMap<BrokerId, BrokerState>, Vec<PartitionState>)> {
    let brokers = prop::collection::vec(broker_state(), 5)
        .prop_map(|s| BROKERS.iter().copied().zip(s).collect());
    let partitions =
        (1usize..10).prop_flat_map(|n| (0..n as i32).map(partition_state).collect::<Vec<_>>());
    (brokers, partitions)
}

fn policy_config() -> impl Strategy<Value = PolicyConfig> {
    (
        prop_oneof![
            Just(PromotionPolicy::Manual),
            Just(PromotionPolicy::UnderMinIsr),
            Just(PromotionPolicy::UnderReplicated),
            Just(PromotionPolicy::LeaderIsObserver)
        ],
        prop::sample::subsequence(vec![3, 4, 5], 1..=3),
        any::<(bool, bool, bool)>(),
        (0i64..2000, 1u32..=3, 0u64..600, 1u32..=3),
        prop::option::of(0u64..120),
    )
        .prop_map(
            |(
                policy,
                observers,
                (promote_first, ack, unclean),
                (lag, confirmations, cooldown, concurrent),
                demote,
            )| {
                let observers: BTreeSet<BrokerId> = observers.into_iter().collect();
                let promoted: BTreeSet<BrokerId> = if promote_first {
                    observers.iter().take(1).copied().collect()
                } else {
                    BTreeSet::new()
                };
                PolicyConfig {
                    policy,
                    acknowledged_observers: if ack {
                        observers.clone()
                    } else {
                        BTreeSet::new()
                    },
                    observers,
                    promoted,
                    max_lag_messages: lag,
                    confirmations,
                    cooldown: Duration::from_secs(cooldown),
                    max_concurrent_promotions: concurrent,
                    topics: CompiledTopicFilter::new([".*"], ["^__"]).unwrap(),
                    dry_run: false,
                    auto_demote_after: demote.map(Duration::from_secs),
                    unclean_takeover: unclean,
                    stale_after: Duration::from_secs(3),
                }
            },
        )
}

/// A sequence of scans: (seconds since the previous scan, snapshot age, cluster).
type Scans = Vec<(
    i64,
    i64,
    (BTreeMap<BrokerId, BrokerState>, Vec<PartitionState>),
)>;

fn scan_sequence() -> impl Strategy<Value = Scans> {
    prop::collection::vec((1i64..200, 0i64..5, cluster()), 1..25)
}

fn observers_now(cfg: &PolicyConfig, history: &PolicyHistory) -> BTreeSet<BrokerId> {
    cfg.observers
        .iter()
        .copied()
        .filter(|id| !cfg.promoted.contains(id) && !history.is_auto_promoted(*id))
        .collect()
}

/// Checks every per-decision rule; returns the actions that change the observer set.
fn check_decision(
    snap: &ClusterSnapshot,
    cfg: &PolicyConfig,
    history: &PolicyHistory,
    d: &PromotionDecision,
) -> Result<(), TestCaseError> {
    let observers = observers_now(cfg, history);
    let hosting = |x: BrokerId| snap.partitions.iter().filter(move |p| p.hosts(x));
    for action in &d.actions {
        match action {
            PromotionAction::Promote { node_id: x, .. } => {
                prop_assert!(
                    observers.contains(x),
                    "promoted {x}, which is not an observer now"
                );
                for p in hosting(*x) {
                    // The high watermark (live, else the last known); without either, the
                    // leader's log end offset, which is never below it.
                    let hw = match (p.leader, p.high_watermark) {
                        (Some(_), Some(h)) => Some(h),
                        _ => history.last_known_hw.get(&p.id()).copied(),
                    }
                    .or_else(|| p.leader.and_then(|l| p.log_end_offsets.get(&l).copied()));
                    let lag = p.lag_against(*x, hw);
                    prop_assert!(
                        matches!(lag, Some(l) if l <= cfg.max_lag_messages),
                        "promoted lagging {x} on {}: {lag:?}",
                        p.id()
                    );
                }
            }
            PromotionAction::Demote { node_id: x, .. } => {
                prop_assert!(history.is_auto_promoted(*x) && !cfg.promoted.contains(x));
                for p in hosting(*x) {
                    prop_assert_ne!(
                        p.leader,
                        Some(*x),
                        "demoted {} while it leads {}",
                        x,
                        p.id()
                    );
                    let live = p
                        .isr
                        .iter()
                        .filter(|&&r| r != *x && !observers.contains(&r) && snap.is_alive(r))
                        .count();
                    let min = p.min_isr.unwrap_or(u32::MAX) as usize;
                    prop_assert!(
                        live >= min,
                        "demoting {x} leaves {} with {live} live ISR < {min}",
                        p.id()
                    );
                }
            }
            PromotionAction::UncleanElect {
                node_id: x,
                partitions,
                ..
            } => {
                prop_assert!(cfg.unclean_takeover);
                for id in partitions {
                    let p = snap.partitions.iter().find(|p| &p.id() == id).unwrap();
                    let (leo, hw) = (p.log_end_offsets.get(x), history.hw_witness.get(id));
                    prop_assert!(
                        matches!((leo, hw), (Some(l), Some(h)) if l >= h),
                        "unclean election of {x} on {id}: {leo:?} < {hw:?}"
                    );
                }
            }
            PromotionAction::ReorderReplicas {
                node_id: x, orders, ..
            } => {
                prop_assert!(
                    history.is_auto_promoted(*x),
                    "reordered for {x}, not auto-promoted"
                );
                for o in orders {
                    let p = snap
                        .partitions
                        .iter()
                        .find(|p| p.id() == o.partition)
                        .unwrap();
                    let (mut before, mut after) = (p.replicas.clone(), o.replicas.clone());
                    before.sort_unstable();
                    after.sort_unstable();
                    prop_assert_eq!(
                        before,
                        after,
                        "a reordering changed the replicas of {}",
                        p.id()
                    );
                    prop_assert!(p.leader == Some(*x) && p.replicas.first() == Some(x));
                    let first = o.replicas[0];
                    prop_assert!(
                        first != *x
                            && !observers.contains(&first)
                            && p.in_isr(first)
                            && snap.is_alive(first),
                        "{}: new preferred leader {first} is not a live primary in the ISR",
                        p.id()
                    );
                }
            }
            PromotionAction::MoveLeadership { .. } => {}
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Over any scan sequence: every decision keeps the rules, and no broker sees two
    /// promotions or demotions closer together than the cooldown.
    #[test]
    fn rules_hold_over_scan_sequences(cfg in policy_config(), scans in scan_sequence()) {
        let mut history = PolicyHistory::default();
        let mut now = 0;
        let mut last_change: BTreeMap<BrokerId, i64> = BTreeMap::new();
        for (step, age, (brokers, partitions)) in scans {
            now += step;
            let snap = ClusterSnapshot { undescribed_topics: Vec::new(), taken_at: at(now - age), source: SourceHealth::Healthy, brokers, partitions };
            let d = decide(&snap, &cfg, &history, at(now));
            check_decision(&snap, &cfg, &history, &d)?;
            for a in &d.actions {
                if matches!(a, PromotionAction::Promote { .. } | PromotionAction::Demote { .. }) {
                    if let Some(prev) = last_change.insert(a.node_id(), now) {
                        prop_assert!(SignedDuration::from_secs(now - prev) >= SignedDuration::try_from(cfg.cooldown).unwrap(),
                            "broker {} changed at {prev} and again at {now}, cooldown {:?}", a.node_id(), cfg.cooldown);
                    }
                }
            }
            history = d.next_history;
        }
    }

    /// Same input, same decision.
    #[test]
    fn decisions_are_deterministic(cfg in policy_config(), (brokers, partitions) in cluster(), streak in 0u32..3) {
        let snap = ClusterSnapshot { undescribed_topics: Vec::new(), taken_at: at(0), source: SourceHealth::Healthy, brokers, partitions };
        let mut history = PolicyHistory::default();
        for id in &cfg.observers {
            history.promote_streak.insert(*id, streak);
        }
        prop_assert_eq!(decide(&snap, &cfg, &history, at(1)), decide(&snap, &cfg, &history, at(1)));
    }

    /// The glance's trigger set is the decision's: one definition of "triggers".
    #[test]
    fn triggered_matches_the_decisions_set(cfg in policy_config(), (brokers, partitions) in cluster()) {
        let snap = ClusterSnapshot { undescribed_topics: Vec::new(), taken_at: at(0), source: SourceHealth::Healthy, brokers, partitions };
        let history = PolicyHistory::default();
        let set = crate::promotion::triggered(&snap, &cfg, &history);
        prop_assert_eq!(set, decide(&snap, &cfg, &history, at(1)).triggered);
    }

    /// A stale or failed scan never produces an action, whatever it shows.
    #[test]
    fn never_acts_on_a_stale_or_failed_scan(cfg in policy_config(), (brokers, partitions) in cluster(), age in 4i64..10_000, failed in any::<bool>()) {
        let mut history = PolicyHistory::default();
        for id in &cfg.observers {
            history.promote_streak.insert(*id, 10);
        }
        let (taken_at, source) = if failed {
            (at(0), SourceHealth::Unhealthy { reason: "test".into() })
        } else {
            (at(-age), SourceHealth::Healthy)
        };
        let snap = ClusterSnapshot { undescribed_topics: Vec::new(), taken_at, source, brokers, partitions };
        let d = decide(&snap, &cfg, &history, at(0));
        prop_assert!(d.actions.is_empty());
        prop_assert!(d.next_history.promote_streak.is_empty());
    }

    /// The bed's RF3 layout (primaries 1 and 2, observer 4) losing and regaining broker 2 at
    /// random moments: promotions and demotions of 4 alternate, never closer than the cooldown.
    /// Random clusters rarely produce a promotion followed by a recovery; this sequence does.
    #[test]
    fn no_flapping_inside_the_cooldown(
        seq in prop::collection::vec((1i64..90, any::<bool>()), 1..60),
        cooldown in 0u64..400,
        window in 0u64..120,
        confirmations in 1u32..=3,
    ) {
        let mut cfg = super::fixtures::config(PromotionPolicy::UnderMinIsr);
        cfg.cooldown = Duration::from_secs(cooldown);
        cfg.auto_demote_after = Some(Duration::from_secs(window));
        cfg.confirmations = confirmations;
        let mut history = PolicyHistory::default();
        let mut now = 0;
        let mut last_change: Option<i64> = None;
        for (step, lost) in seq {
            now += step;
            // A promoted 4 is in the ISR, as Kafka would have it once caught up.
            let mut isr = if lost { vec![1] } else { vec![1, 2] };
            if history.is_auto_promoted(4) {
                isr.push(4);
            }
            let parts = (0..3).map(|i| partition("t", i, &[1, 2, 4], &isr, Some(1), 100)).collect();
            let down: &[BrokerId] = if lost { &[2] } else { &[] };
            let d = decide(&snapshot(at(now), down, parts), &cfg, &history, at(now));
            for a in &d.actions {
                if matches!(a, PromotionAction::Promote { .. } | PromotionAction::Demote { .. }) {
                    if let Some(prev) = last_change.replace(now) {
                        prop_assert!(now - prev >= cooldown as i64, "{a:?} at {now}, previous change at {prev}, cooldown {cooldown}s");
                    }
                }
            }
            history = d.next_history;
        }
    }
}
