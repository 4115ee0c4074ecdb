//! What a decision returns: the actions to carry out, in order, and why the engine held back.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::held_back::HeldBack;
use super::history::PolicyHistory;
use super::snapshot::{BrokerId, TopicPartition};
use crate::crd::EngineActionKind;

/// One thing the reconciler should do. Carry them out in the order given.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PromotionAction {
    /// Remove the broker from the effective observer set (record it in `status.autoPromotions`).
    Promote { node_id: BrokerId, reason: String },
    /// Put an automatically promoted broker back into the effective observer set.
    Demote { node_id: BrokerId, reason: String },
    /// Run a preferred leader election on these partitions so the broker stops leading them;
    /// the demotion follows on a later scan once it leads nothing.
    MoveLeadership {
        node_id: BrokerId,
        partitions: Vec<TopicPartition>,
        reason: String,
    },
    /// Elect the broker leader of these offline partitions by unclean election.
    UncleanElect {
        node_id: BrokerId,
        partitions: Vec<TopicPartition>,
        reason: String,
    },
}

impl PromotionAction {
    pub fn node_id(&self) -> BrokerId {
        match self {
            PromotionAction::Promote { node_id, .. }
            | PromotionAction::Demote { node_id, .. }
            | PromotionAction::MoveLeadership { node_id, .. }
            | PromotionAction::UncleanElect { node_id, .. } => *node_id,
        }
    }

    pub fn reason(&self) -> &str {
        match self {
            PromotionAction::Promote { reason, .. }
            | PromotionAction::Demote { reason, .. }
            | PromotionAction::MoveLeadership { reason, .. }
            | PromotionAction::UncleanElect { reason, .. } => reason,
        }
    }

    /// Its kind as the status records it (`status.history`, `status.engineState`).
    pub fn kind(&self) -> EngineActionKind {
        match self {
            PromotionAction::Promote { .. } => EngineActionKind::Promote,
            PromotionAction::Demote { .. } => EngineActionKind::Demote,
            PromotionAction::MoveLeadership { .. } => EngineActionKind::MoveLeadership,
            PromotionAction::UncleanElect { .. } => EngineActionKind::UncleanElect,
        }
    }

    /// The partitions of a leader election; none for a promotion or demotion.
    pub fn partitions(&self) -> &[TopicPartition] {
        match self {
            PromotionAction::Promote { .. } | PromotionAction::Demote { .. } => &[],
            PromotionAction::MoveLeadership { partitions, .. }
            | PromotionAction::UncleanElect { partitions, .. } => partitions,
        }
    }
}

/// The outcome of one decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromotionDecision {
    /// What to do now; empty means nothing. With `dry_run` these are only to be reported.
    pub actions: Vec<PromotionAction>,
    /// Why the engine did not act where it might have (held back, blocked, unknown state).
    pub reasons: Vec<HeldBack>,
    /// The history to keep for the next decision, assuming `actions` are carried out.
    pub next_history: PolicyHistory,
    pub dry_run: bool,
    /// Watched partitions whose state triggers the policy in this scan (none when the scan is
    /// not trustworthy): what the automation counts as detections, and compares its glances with.
    pub triggered: BTreeSet<TopicPartition>,
    /// Watched partitions with only observers as replicas (`observer_only_partitions`); `None`
    /// when the scan is not trustworthy, so a failed scan neither reports nor clears them.
    pub observer_only: Option<Vec<TopicPartition>>,
}

impl PromotionDecision {
    /// How many watched partitions trigger the policy in this scan.
    pub fn triggered_partitions(&self) -> usize {
        self.triggered.len()
    }
}
