//! Snapshots and configs for the plugin's unit tests: the bed's layout (brokers 1-3 primaries,
//! broker 4 a declared observer, min ISR 2) unless a test changes it.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;

use super::memory::{operator_memory, OperatorMemory};
use crate::promotion::{
    BrokerId, BrokerState, ClusterSnapshot, PartitionState, PolicyHistory, PromotionPolicy,
    SourceHealth,
};

pub fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap()
}

/// A healthy partition with replicas `replicas` (first is leader), every one caught up at HW 100
/// and in the ISR except observer 4.
pub fn partition(topic: &str, n: i32, replicas: &[BrokerId]) -> PartitionState {
    PartitionState {
        topic: topic.into(),
        partition: n,
        replicas: replicas.to_vec(),
        isr: replicas.iter().copied().filter(|&r| r != 4).collect(),
        leader: replicas.first().copied(),
        min_isr: Some(2),
        high_watermark: Some(100),
        log_end_offsets: replicas.iter().map(|&r| (r, 100)).collect(),
        metadata_stale: false,
    }
}

pub fn snapshot(partitions: Vec<PartitionState>) -> ClusterSnapshot {
    ClusterSnapshot {
        undescribed_topics: Vec::new(),
        taken_at: at(0),
        source: SourceHealth::Healthy,
        brokers: (1..=4)
            .map(|b| {
                (
                    b,
                    BrokerState {
                        registered: true,
                        reachable: true,
                    },
                )
            })
            .collect::<BTreeMap<_, _>>(),
        partitions,
    }
}

/// The engine's own test config (observer 4, confirmations 2, cooldown 5 min, window 60 s).
pub use crate::promotion::fixtures::config;

/// Broker `id` stopped: unregistered, out of every ISR, no longer leader.
pub fn stop(s: &mut ClusterSnapshot, id: BrokerId) {
    s.brokers.insert(
        id,
        BrokerState {
            registered: false,
            reachable: false,
        },
    );
    for p in &mut s.partitions {
        p.isr.retain(|&r| r != id);
        p.log_end_offsets.remove(&id);
        if p.leader == Some(id) {
            p.leader = p.isr.first().copied();
        }
    }
}

/// The operator's memory without `status.engineState`: `history` as rebuilt from the status.
pub fn memory(history: PolicyHistory) -> OperatorMemory {
    operator_memory(history, None, &config(PromotionPolicy::Manual), at(0))
}
