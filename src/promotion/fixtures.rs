//! Small builders for engine tests: the RF3 layout of the test bed (brokers 1-3 primaries,
//! broker 4 observer, min ISR 2) unless a test says otherwise.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::{
    decide, AutoPromotion, BrokerId, BrokerState, ClusterSnapshot, CompiledTopicFilter,
    PartitionState, PolicyConfig, PolicyHistory, PromotionDecision, PromotionPolicy, SourceHealth,
};

pub fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap()
}

pub fn config(policy: PromotionPolicy) -> PolicyConfig {
    PolicyConfig {
        policy,
        observers: BTreeSet::from([4]),
        promoted: BTreeSet::new(),
        acknowledged_observers: BTreeSet::from([4]),
        max_lag_messages: 1000,
        confirmations: 2,
        cooldown: Duration::from_secs(300),
        max_concurrent_promotions: 1,
        topics: CompiledTopicFilter::new([".*"], ["^__"]).unwrap(),
        dry_run: false,
        auto_demote_after: Some(Duration::from_secs(60)),
        unclean_takeover: false,
        stale_after: Duration::from_secs(3),
    }
}

/// A partition with every replica caught up at `hw`.
pub fn partition(
    topic: &str,
    partition: i32,
    replicas: &[BrokerId],
    isr: &[BrokerId],
    leader: Option<BrokerId>,
    hw: i64,
) -> PartitionState {
    PartitionState {
        topic: topic.into(),
        partition,
        replicas: replicas.to_vec(),
        isr: isr.to_vec(),
        leader,
        min_isr: Some(2),
        high_watermark: leader.map(|_| hw),
        log_end_offsets: replicas.iter().map(|&r| (r, hw)).collect(),
        metadata_stale: false,
    }
}

/// Brokers 1-4; those in `down` are fenced (gone from the metadata).
pub fn brokers(down: &[BrokerId]) -> BTreeMap<BrokerId, BrokerState> {
    (1..=4)
        .map(|id| {
            (
                id,
                BrokerState {
                    registered: !down.contains(&id),
                    reachable: !down.contains(&id),
                },
            )
        })
        .collect()
}

pub fn snapshot(
    taken_at: Timestamp,
    down: &[BrokerId],
    partitions: Vec<PartitionState>,
) -> ClusterSnapshot {
    ClusterSnapshot {
        undescribed_topics: Vec::new(),
        taken_at,
        source: SourceHealth::Healthy,
        brokers: brokers(down),
        partitions,
    }
}

/// Healthy RF3 topic `t` with `n` partitions on brokers 1, 2 (leader 1) and observer 4.
pub fn healthy(n: i32) -> Vec<PartitionState> {
    (0..n)
        .map(|i| partition("t", i, &[1, 2, 4], &[1, 2], Some(1), 100))
        .collect()
}

/// The same topic after broker 2 was lost: ISR [1], under min ISR 2.
pub fn broker_2_lost(n: i32) -> Vec<PartitionState> {
    (0..n)
        .map(|i| partition("t", i, &[1, 2, 4], &[1], Some(1), 100))
        .collect()
}

/// One decision at `now_secs`.
pub fn run(
    snap: &ClusterSnapshot,
    cfg: &PolicyConfig,
    history: &PolicyHistory,
    now_secs: i64,
) -> PromotionDecision {
    decide(snap, cfg, history, at(now_secs))
}

/// Feeds `scans` identical scans one second apart and returns the last decision.
pub fn scans(
    parts: &[PartitionState],
    down: &[BrokerId],
    cfg: &PolicyConfig,
    history: PolicyHistory,
    from: i64,
    n: i64,
) -> PromotionDecision {
    let mut history = history;
    let mut last = None;
    for s in from..from + n {
        let d = run(&snapshot(at(s), down, parts.to_vec()), cfg, &history, s);
        history = d.next_history.clone();
        last = Some(d);
    }
    last.expect("at least one scan")
}

/// A history in which the engine promoted broker 4 at `secs`.
pub fn promoted_4_at(secs: i64) -> PolicyHistory {
    PolicyHistory::from_auto_promotions(vec![AutoPromotion {
        node_id: 4,
        at: Time(at(secs)),
        reason: "test".into(),
    }])
}
