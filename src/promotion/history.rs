//! What the engine remembers between scans. `decide` never mutates it: it returns the next one.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use super::snapshot::{BrokerId, PartitionState, TopicPartition};
use crate::crd::{AutoPromotion, EngineActionKind, ObserverSetStatus};

/// The last automatic action on a broker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastAction {
    pub kind: EngineActionKind,
    pub at: Timestamp,
}

/// Memory carried from one decision to the next.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyHistory {
    /// Promotions made automatically and not yet undone, oldest first (`status.autoPromotions`).
    pub auto_promotions: Vec<AutoPromotion>,
    /// Consecutive scans in which a broker was a valid promotion candidate.
    pub promote_streak: BTreeMap<BrokerId, u32>,
    /// Since when an auto-promoted broker's partitions have been healthy without it.
    pub recovered_since: BTreeMap<BrokerId, Timestamp>,
    /// Last automatic action per broker: the cooldown is measured from it.
    pub last_action: BTreeMap<BrokerId, LastAction>,
    /// Last high watermark seen while the partition had a leader, for the partitions an observer
    /// hosts: the bar an unclean takeover must clear. Saved in `status.engineState` and restored
    /// by a successor (crate::automation::engine_state).
    #[serde(skip)]
    pub last_known_hw: HashMap<TopicPartition, i64>,
    /// The high watermarks this process read itself from a partition's live leader and has kept
    /// watching since without a gap (`crate::promotion::witness`): the only bar an unclean
    /// takeover accepts. Never saved or restored: a successor's bar would be an older sample, and
    /// records acknowledged after it would be lost by the election.
    #[serde(skip)]
    pub hw_witness: HashMap<TopicPartition, i64>,
}

/// `status.autoPromotions`, oldest first: the order the history keeps them in.
pub fn auto_promotions_in(status: Option<&ObserverSetStatus>) -> Vec<AutoPromotion> {
    let mut out = status
        .map(|s| s.auto_promotions.clone())
        .unwrap_or_default();
    out.sort_by_key(|p| p.at.clone());
    out
}

/// A candidate seen by fewer scans than `confirmations` is re-checked after this fraction of the
/// scan interval: the confirmations still count independent, consecutive scans, but a real loss
/// is confirmed in a fraction of a second instead of whole scan intervals.
pub const CONFIRMATION_RESCAN_DIVISOR: u32 = 10;
/// The shortest re-check (the CRD's minimum scan interval).
pub const MIN_RESCAN: Duration = Duration::from_millis(100);

impl PolicyHistory {
    /// Whether some promotion candidate has been seen, but not yet by `confirmations`
    /// consecutive scans.
    pub fn confirming(&self, confirmations: u32) -> bool {
        self.promote_streak
            .values()
            .any(|&n| n > 0 && n < confirmations)
    }

    /// High watermark to measure a replica's lag against: the live one while the partition has a
    /// leader, else the last one seen while it had one. A new leader under min ISR serves none on
    /// Kafka 4.x (KIP-966: ListOffsets answers OFFSET_NOT_AVAILABLE), so the last one seen is the
    /// reference then too.
    pub fn reference_hw(&self, p: &PartitionState) -> Option<i64> {
        match (p.leader, p.high_watermark) {
            (Some(_), Some(hw)) => Some(hw),
            _ => self.last_known_hw.get(&p.id()).copied(),
        }
    }

    /// What the lag rule measures a replica against: [`Self::reference_hw`], or when none is
    /// known while the partition has a leader, that leader's log end offset. That is never below
    /// the high watermark, so the lag it gives is never less than the true one: a successor that
    /// restored no high watermark of a partition whose new leader is under min ISR (KIP-966, no
    /// high watermark served) can still judge a caught-up observer instead of waiting forever.
    /// Not remembered as a high watermark (no witness for a takeover).
    pub fn lag_reference(&self, p: &PartitionState) -> Option<i64> {
        self.reference_hw(p).or_else(|| {
            p.leader
                .and_then(|leader| p.log_end_offsets.get(&leader).copied())
        })
    }

    /// When to scan next: `scan_interval`, or a tenth of it (at least 100 ms) while a candidate
    /// awaits its confirmations.
    pub fn next_scan_after(&self, scan_interval: Duration, confirmations: u32) -> Duration {
        if self.confirming(confirmations) {
            (scan_interval / CONFIRMATION_RESCAN_DIVISOR)
                .max(MIN_RESCAN)
                .min(scan_interval)
        } else {
            scan_interval
        }
    }

    /// Rebuilds the durable part of the history from `status.autoPromotions` after a restart:
    /// each promotion also starts the cooldown of its broker.
    pub fn from_auto_promotions(auto_promotions: Vec<AutoPromotion>) -> Self {
        let last_action = auto_promotions
            .iter()
            .map(|p| {
                (
                    p.node_id,
                    LastAction {
                        kind: EngineActionKind::Promote,
                        at: p.at.0,
                    },
                )
            })
            .collect();
        PolicyHistory {
            auto_promotions,
            last_action,
            ..PolicyHistory::default()
        }
    }

    pub fn is_auto_promoted(&self, broker: BrokerId) -> bool {
        self.auto_promotions.iter().any(|p| p.node_id == broker)
    }

    /// When the broker's cooldown ends, if it is still running at `now`.
    pub fn cooling_until(
        &self,
        broker: BrokerId,
        cooldown: SignedDuration,
        now: Timestamp,
    ) -> Option<Timestamp> {
        let last = self.last_action.get(&broker)?;
        // An absurdly long cooldown saturates instead of overflowing the date.
        let until = last.at.checked_add(cooldown).unwrap_or(Timestamp::MAX);
        (until > now).then_some(until)
    }
}
