//! How healthy one partition is, given which brokers count as observers right now.

use super::snapshot::{BrokerId, ClusterSnapshot, PartitionState};
use crate::crd::PromotionPolicy;

/// A partition's state, most severe first. Observers never count toward the ISR.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Health {
    /// Something needed to judge it is unknown: min ISR, a replica's broker is registered but
    /// did not answer us, or the metadata is older than already seen. The engine never acts on
    /// such a partition.
    Unknown,
    /// No leader, and no non-observer replica is alive: only an observer could serve it.
    Offline,
    /// Fewer live non-observer ISR members than `min.insync.replicas`: `acks=all` writes fail.
    UnderMinIsr,
    /// Fewer live non-observer ISR members than non-observer replicas.
    UnderReplicated,
    Healthy,
}

/// Classifies a partition. `is_observer` says which brokers count as observers for this question.
pub fn assess(
    p: &PartitionState,
    snapshot: &ClusterSnapshot,
    is_observer: impl Fn(BrokerId) -> bool,
) -> Health {
    // An answer older than one already seen says nothing about now, offline included.
    if p.metadata_stale {
        return Health::Unknown;
    }
    let mut primaries = 0usize;
    let mut live_primaries = 0usize;
    for &r in &p.replicas {
        match snapshot.brokers.get(&r) {
            Some(b) if b.registered && !b.reachable => return Health::Unknown,
            Some(b) if b.registered && !is_observer(r) => live_primaries += 1,
            _ => {}
        }
        if !is_observer(r) {
            primaries += 1;
        }
    }
    if p.leader.is_none() && live_primaries == 0 {
        return Health::Offline;
    }
    let Some(min_isr) = p.min_isr else {
        return Health::Unknown;
    };
    let live_isr = p
        .isr
        .iter()
        .filter(|&&r| !is_observer(r) && snapshot.is_alive(r))
        .count();
    if live_isr < min_isr as usize {
        Health::UnderMinIsr
    } else if live_isr < primaries {
        Health::UnderReplicated
    } else {
        Health::Healthy
    }
}

/// Whether every replica of the partition is an observer (Kafka lets a topic be created so, for
/// example an RF 1 topic placed on an observer; the patch then keeps an observer leading it).
/// Promoting its observer would make that broker a primary for every partition it hosts, to fix
/// a placement: the engine does not let such a partition trigger a promotion, and reports it.
pub fn observer_only(p: &PartitionState, is_observer: impl Fn(BrokerId) -> bool) -> bool {
    !p.replicas.is_empty() && p.replicas.iter().all(|&r| is_observer(r))
}

/// Whether the policy promotes for a partition in this state. Each policy also covers the more
/// severe states of the policies below it: LeaderIsObserver < UnderMinIsr < UnderReplicated.
pub fn triggers(policy: PromotionPolicy, health: Health) -> bool {
    match policy {
        PromotionPolicy::Manual => false,
        PromotionPolicy::LeaderIsObserver => health == Health::Offline,
        PromotionPolicy::UnderMinIsr => matches!(health, Health::Offline | Health::UnderMinIsr),
        PromotionPolicy::UnderReplicated => matches!(
            health,
            Health::Offline | Health::UnderMinIsr | Health::UnderReplicated
        ),
    }
}

impl Health {
    pub fn describe(self) -> &'static str {
        match self {
            Health::Unknown => "state unknown",
            Health::Offline => "offline with no live primary replica",
            Health::UnderMinIsr => "under min ISR",
            Health::UnderReplicated => "under-replicated",
            Health::Healthy => "healthy",
        }
    }
}
