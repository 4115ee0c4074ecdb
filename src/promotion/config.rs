//! The engine's own view of `spec.promotion`, plus the few facts from the ObserverSet it needs.

use std::collections::BTreeSet;
use std::time::Duration;

use super::snapshot::BrokerId;
use crate::crd::{CompiledTopicFilter, PromotionPolicy, ValidatedObserverSet};

/// Everything the engine needs besides the snapshot and its history.
#[derive(Clone, Debug)]
pub struct PolicyConfig {
    pub policy: PromotionPolicy,
    /// `spec.observers`: node ids that are observers in normal operation.
    pub observers: BTreeSet<BrokerId>,
    /// `spec.promotion.promoted`: ids promoted by hand. The engine never demotes these.
    pub promoted: BTreeSet<BrokerId>,
    /// `status.effectiveObservers`: the set every pod acknowledged. An unclean takeover needs the
    /// controllers to treat the broker as a normal replica already, or the election is refused.
    pub acknowledged_observers: BTreeSet<BrokerId>,
    pub max_lag_messages: i64,
    /// Consecutive scans that must agree before a promotion (>= 1).
    pub confirmations: u32,
    /// Minimum time between two automatic actions on the same broker.
    pub cooldown: Duration,
    /// At most this many automatic promotions in force at once.
    pub max_concurrent_promotions: u32,
    pub topics: CompiledTopicFilter,
    /// Decide and report, never act: the returned history records no action.
    pub dry_run: bool,
    /// `None` when automatic demotion is disabled; else how long the cluster must stay healthy.
    pub auto_demote_after: Option<Duration>,
    pub unclean_takeover: bool,
    /// A snapshot older than this (at decision time) is stale and never acted on.
    pub stale_after: Duration,
}

impl PolicyConfig {
    /// Builds the engine's config from a validated ObserverSet and its `status.effectiveObservers`.
    /// A snapshot counts as stale after three scan intervals (at least 3 s).
    pub fn from_validated(
        obs: &ValidatedObserverSet,
        acknowledged_observers: BTreeSet<BrokerId>,
    ) -> Self {
        let p = &obs.promotion;
        PolicyConfig {
            policy: p.policy,
            observers: obs.observers.clone(),
            promoted: p.promoted.clone(),
            acknowledged_observers,
            max_lag_messages: p.max_lag_messages,
            confirmations: p.confirmations.max(1),
            cooldown: p.cooldown,
            max_concurrent_promotions: p.max_concurrent_promotions,
            topics: p.topics.clone(),
            dry_run: p.dry_run,
            auto_demote_after: p.auto_demote_after,
            unclean_takeover: p.unclean_takeover,
            stale_after: (p.scan_interval * 3).max(Duration::from_secs(3)),
        }
    }
}
