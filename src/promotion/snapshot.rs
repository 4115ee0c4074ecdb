//! What the Kafka watcher saw in one scan: the input the policy engine decides from.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// A Kafka node id (`node.id`).
pub type BrokerId = i32;

/// One partition of one topic.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Whether the watcher could read the cluster at all during the scan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SourceHealth {
    /// Metadata, configs and offsets were read.
    Healthy,
    /// The scan failed or was partial in a way that makes the whole picture untrustworthy.
    Unhealthy { reason: String },
}

/// A broker as the scan saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerState {
    /// Listed in the cluster metadata (registered and not fenced by the controller).
    pub registered: bool,
    /// Answered the watcher's offset probe in this scan.
    pub reachable: bool,
}

impl BrokerState {
    /// A broker counts as alive only when the controller lists it and it answered us.
    pub fn is_alive(&self) -> bool {
        self.registered && self.reachable
    }
}

/// One partition's replication state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    pub topic: String,
    pub partition: i32,
    /// Assigned replicas in assignment order; the first is the preferred leader.
    pub replicas: Vec<BrokerId>,
    pub isr: Vec<BrokerId>,
    /// `None` when the partition has no leader (offline).
    pub leader: Option<BrokerId>,
    /// `min.insync.replicas` of the topic (topic config, else broker default); `None` when unknown.
    pub min_isr: Option<u32>,
    /// High watermark read from the leader in this scan; `None` when unknown (for example offline).
    pub high_watermark: Option<i64>,
    /// Log end offset per replica, read from each replica's own broker; missing means unknown.
    pub log_end_offsets: BTreeMap<BrokerId, i64>,
    /// The metadata that answered shows a leader epoch older than one already seen for this
    /// partition (`crate::kafka::freshness`): its state is unknown this scan.
    pub metadata_stale: bool,
}

impl PartitionState {
    pub fn id(&self) -> TopicPartition {
        TopicPartition {
            topic: self.topic.clone(),
            partition: self.partition,
        }
    }

    pub fn hosts(&self, broker: BrokerId) -> bool {
        self.replicas.contains(&broker)
    }

    pub fn in_isr(&self, broker: BrokerId) -> bool {
        self.isr.contains(&broker)
    }

    /// Messages the replica is behind `high_watermark`; `None` when either side is unknown.
    pub fn lag_against(&self, broker: BrokerId, high_watermark: Option<i64>) -> Option<i64> {
        let leo = *self.log_end_offsets.get(&broker)?;
        // LEO and HW come from two requests, so the replica may already be past the HW we read.
        Some((high_watermark? - leo).max(0))
    }
}

/// Everything one scan saw, stamped with the time the scan finished.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterSnapshot {
    pub taken_at: Timestamp,
    pub source: SourceHealth,
    /// Every broker that appears in the metadata or in some replica list.
    pub brokers: BTreeMap<BrokerId, BrokerState>,
    pub partitions: Vec<PartitionState>,
    /// Topics the metadata listed with an error (their partitions unknown): no demotion while
    /// any is listed, whatever the filter (their partitions may be hosted by the broker).
    pub undescribed_topics: Vec<String>,
}

impl ClusterSnapshot {
    pub fn is_alive(&self, broker: BrokerId) -> bool {
        self.brokers.get(&broker).is_some_and(BrokerState::is_alive)
    }
}
