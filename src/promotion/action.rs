//! What a decision returns: the actions to carry out, in order, and why the engine held back.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::held_back::HeldBack;
use super::history::PolicyHistory;
use super::snapshot::{BrokerId, TopicPartition};
use crate::crd::EngineActionKind;

/// A partition's replicas in a new order: the same brokers, so Kafka moves no data; only the
/// preferred leader (the first) changes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaOrder {
    pub partition: TopicPartition,
    pub replicas: Vec<BrokerId>,
}

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
    /// Reorder the replicas of partitions the broker leads and is the preferred leader of
    /// (a reorder-only reassignment), so that the preferred election which follows can move
    /// leadership off it.
    ReorderReplicas {
        node_id: BrokerId,
        orders: Vec<ReplicaOrder>,
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
            | PromotionAction::ReorderReplicas { node_id, .. }
            | PromotionAction::UncleanElect { node_id, .. } => *node_id,
        }
    }

    pub fn reason(&self) -> &str {
        match self {
            PromotionAction::Promote { reason, .. }
            | PromotionAction::Demote { reason, .. }
            | PromotionAction::MoveLeadership { reason, .. }
            | PromotionAction::ReorderReplicas { reason, .. }
            | PromotionAction::UncleanElect { reason, .. } => reason,
        }
    }

    /// Its kind as the status records it (`status.history`, `status.engineState`).
    pub fn kind(&self) -> EngineActionKind {
        match self {
            PromotionAction::Promote { .. } => EngineActionKind::Promote,
            PromotionAction::Demote { .. } => EngineActionKind::Demote,
            PromotionAction::MoveLeadership { .. } => EngineActionKind::MoveLeadership,
            PromotionAction::ReorderReplicas { .. } => EngineActionKind::ReorderReplicas,
            PromotionAction::UncleanElect { .. } => EngineActionKind::UncleanElect,
        }
    }

    /// The partitions of a leader election or a reordering; none for a promotion or demotion.
    pub fn partitions(&self) -> Vec<TopicPartition> {
        match self {
            PromotionAction::Promote { .. } | PromotionAction::Demote { .. } => Vec::new(),
            PromotionAction::MoveLeadership { partitions, .. }
            | PromotionAction::UncleanElect { partitions, .. } => partitions.clone(),
            PromotionAction::ReorderReplicas { orders, .. } => {
                orders.iter().map(|o| o.partition.clone()).collect()
            }
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
