//! What every planning step of one decision (`demotion`, `promote`, `takeover`) reads, and the
//! draft they add their actions and reasons to.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::action::PromotionAction;
use super::config::PolicyConfig;
use super::health::{observer_only, triggers, Health};
use super::held_back::HeldBack;
use super::history::PolicyHistory;
use super::snapshot::{BrokerId, ClusterSnapshot, PartitionState};

/// What every step of one decision reads.
pub(super) struct Scan<'a> {
    pub snapshot: &'a ClusterSnapshot,
    pub config: &'a PolicyConfig,
    pub history: &'a PolicyHistory,
    pub now: Timestamp,
    /// Brokers that are observers for trigger purposes: declared, not promoted by hand or by us.
    pub observers_now: BTreeSet<BrokerId>,
    /// Partition indexes hosted by each broker the engine may act on.
    pub hosted: HashMap<BrokerId, Vec<usize>>,
    /// `assess` of every partition with `observers_now`, by partition index.
    pub health: Vec<Health>,
    pub cooldown: SignedDuration,
}

impl<'a> Scan<'a> {
    pub fn partitions_of(
        &self,
        broker: BrokerId,
    ) -> impl Iterator<Item = (usize, &'a PartitionState)> + '_ {
        let all: &'a [PartitionState] = &self.snapshot.partitions;
        let idx = self.hosted.get(&broker).map(Vec::as_slice).unwrap_or(&[]);
        idx.iter().map(move |&i| (i, &all[i]))
    }

    /// High watermark to measure a replica's lag against: the live one, or for a partition
    /// without leader the last one seen while it had one.
    pub fn lag_reference(&self, p: &PartitionState) -> Option<i64> {
        self.history.lag_reference(p)
    }

    pub fn cooling_until(&self, broker: BrokerId) -> Option<Timestamp> {
        self.history.cooling_until(broker, self.cooldown, self.now)
    }
}

/// Whether a partition in this state counts toward the policy's trigger. A partition whose
/// replicas are all observers never does (see `health::observer_only`).
pub(super) fn triggering(
    config: &PolicyConfig,
    observers_now: &BTreeSet<BrokerId>,
    p: &PartitionState,
    health: Health,
) -> bool {
    config.topics.watches(&p.topic)
        && triggers(config.policy, health)
        && !observer_only(p, |b| observers_now.contains(&b))
}

/// Actions and reasons collected by the planning steps, in the order they were decided.
#[derive(Default)]
pub(super) struct DecisionDraft {
    pub actions: Vec<PromotionAction>,
    pub reasons: Vec<HeldBack>,
}
