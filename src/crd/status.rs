//! `status` of an ObserverSet: what the operator wrote, what the pods acknowledged, what is rolling out.
//!
//! The rollout state machine (`crate::plan::rollout`) keeps its whole state here, so a restarted
//! operator resumes a rollout exactly where the previous one stopped.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::NodeId;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObserverSetStatus {
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// Effective observer set wanted now (observers minus promotions).
    #[serde(default)]
    pub desired_observers: Vec<NodeId>,
    /// Observer set every pod of both roles has acknowledged.
    #[serde(default)]
    pub effective_observers: Vec<NodeId>,
    /// Last revision written to the ConfigMaps (0: nothing written yet).
    #[serde(default)]
    pub revision: i64,
    #[serde(default)]
    pub roles: RolesStatus,
    /// Present while a change is rolling out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutStatus>,
    /// Promotions the operator made on its own (they leave the effective set until auto-demoted).
    #[serde(default)]
    pub auto_promotions: Vec<AutoPromotion>,
    /// The latest decision of the promotion engine (always reported in dry-run mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanStatus>,
    /// Ready, Progressing and Degraded conditions.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Phase {
    /// Every pod acknowledged the desired set.
    Ready,
    /// A change is being written and acknowledged.
    RollingOut,
    /// A rollout step timed out; see the Degraded condition for the pods that did not acknowledge.
    Degraded,
    /// The spec cannot be used; see the Ready condition's message for what to fix.
    Invalid,
    /// An older ObserverSet in the namespace selects the same pods: nothing is written, nudged
    /// or automated for this one; the Ready condition names the other.
    Conflict,
}

/// Per-role view: what the role's ConfigMap holds and which pods confirmed it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolesStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<RoleStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker: Option<RoleStatus>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoleStatus {
    /// Revision in the role's ConfigMap.
    pub revision: i64,
    /// Observer ids in the role's ConfigMap.
    #[serde(default)]
    pub observers: Vec<NodeId>,
    /// Pods that acknowledged `revision`.
    #[serde(default)]
    pub acknowledged: Vec<String>,
    /// Pods that have not acknowledged `revision` yet.
    #[serde(default)]
    pub pending: Vec<String>,
}

/// A change in flight. Controllers are always written and acknowledged before brokers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    pub revision: i64,
    pub kind: RolloutKind,
    pub step: RolloutStep,
    /// When the rollout started (microsecond precision: step durations feed the metrics).
    pub started_at: MicroTime,
    /// When the current step's ConfigMap was (last) written.
    pub step_started_at: MicroTime,
    /// The effective set being rolled out.
    #[serde(default)]
    pub target: Vec<NodeId>,
    /// Pods of the current step that acknowledged `revision`.
    #[serde(default)]
    pub acknowledged: Vec<String>,
    /// Pods of the current step still to acknowledge.
    #[serde(default)]
    pub pending: Vec<String>,
    /// True once the current step timed out (the rollout keeps waiting, the phase is Degraded).
    #[serde(default)]
    pub timed_out: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RolloutKind {
    /// The effective set loses ids (observers become electable).
    Promotion,
    /// The effective set gains ids.
    Demotion,
    /// Gains and losses in one change.
    Mixed,
}

#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum RolloutStep {
    Controllers,
    Brokers,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutoPromotion {
    pub node_id: NodeId,
    pub at: Time,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanStatus {
    pub at: Time,
    #[serde(default)]
    pub dry_run: bool,
    #[serde(default)]
    pub actions: Vec<PlanAction>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanAction {
    pub action: PlanActionKind,
    pub node_id: NodeId,
    pub reason: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PlanActionKind {
    Promote,
    Demote,
}
