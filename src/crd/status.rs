//! `status` of an ObserverSet: what the operator wrote, what the pods acknowledged, what is rolling out.
//!
//! The rollout state machine (`crate::rollout::rollout`) keeps its whole state here, so a restarted
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
    /// The epoch of the operator leadership that wrote this rollout state (0: none yet). It
    /// orders the copies of the status across member clusters (docs/multi-cluster.md, "The
    /// status, replicated").
    #[serde(default, skip_serializing_if = "is_no_epoch")]
    pub writer_epoch: i64,
    /// The highest epoch an operator leadership claimed on this copy. A new leader claims one
    /// above every epoch it read, on a majority of the copies, before it writes anything else:
    /// so each leadership that writes has an epoch of its own, above its predecessors'.
    #[serde(default, skip_serializing_if = "is_no_epoch")]
    pub leader_epoch: i64,
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
    /// What the promotion engine remembers between scans, saved so that a successor operator
    /// (failover, restart) resumes its decisions (docs/promotion-policies.md, "Engine state").
    /// Written by the automation only; not meant to be edited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_state: Option<EngineState>,
    /// Ready, Progressing and Degraded (the reconciler's), and KafkaReachable (the automation's,
    /// while it runs). Keyed by type, so each writer applies only its own.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The last automatic and manual actions (what, when, why, who): each loop keeps its own
    /// newest entries among the newest 20 of the whole history (`crate::history`). Two field
    /// managers write it, each its own entries, so the apiserver merges them by key; the stored
    /// order is not guaranteed: read it sorted by `at` (`kubectl observer status` does).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["at", "nodeId", "action", "who"]))]
    pub history: Vec<HistoryEntry>,
    /// The newest entry of `history` (written by the reconciler, which sees both loops'
    /// entries): what `kubectl get obs -o wide` shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_action: Option<HistoryEntry>,
    /// What the promotion engine sees of the partitions it acts on, the most severe first,
    /// bounded (written by the automation, on a change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<PartitionsStatus>,
    /// Over member clusters only (docs/multi-cluster.md): each member, reachable or not and
    /// since when, as the operator's leader last saw it (`kubectl observer status` shows it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub members: Vec<MemberReach>,
    /// Over member clusters only: what the operator replica running in this copy's member last
    /// saw of the leadership (written on a change, under a field manager of its own, by a
    /// replica whether it leads or not; docs/multi-cluster.md, "What the side without authority
    /// says"). Each member's copy holds its own replica's view: the copies differ here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_view: Option<LocalView>,
}

/// `status.localView`: one operator replica's view of the leader Leases.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalView {
    /// The replica's identity (its Lease holder name).
    pub replica: String,
    /// The member cluster it runs in.
    pub member: String,
    /// `Leads` (it holds a majority of the Leases), `FollowsLeader` (another replica holds a
    /// majority of the Leases it reaches) or `NoAuthority` (no one does, for longer than two
    /// lease durations: it acts on nothing and cannot see who may).
    pub standing: String,
    /// The holder of the majority, with `FollowsLeader`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
    /// Each member's Lease as the replica's last look found it, in `--members` order.
    #[serde(default)]
    pub leases: Vec<LeaseView>,
    pub message: String,
    /// When the replica's standing or the set of Leases it reaches last changed.
    pub since: Time,
}

/// One Lease in `status.localView.leases`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeaseView {
    pub member: String,
    /// Its apiserver answered.
    pub reached: bool,
    /// Who holds it with a running term by the replica's clock; absent when free, lapsed or
    /// not reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
}

/// One member cluster in `status.members`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberReach {
    /// The member's name, as the operator's `--members` gives it.
    pub name: String,
    /// Whether its copy of this ObserverSet, its pods and its ConfigMaps answered the leader's
    /// latest pass.
    pub reachable: bool,
    /// When the leader first saw it so.
    pub since: Time,
    /// Why it was not reached, as first seen (absent while reachable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One action in `status.history`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    /// When the action was decided (the engine's scan) or the spec change was rolled out.
    pub at: MicroTime,
    pub action: EngineActionKind,
    pub node_id: NodeId,
    /// The engine's reason, or "spec change: ..." for a manual change.
    pub reason: String,
    /// `automation`, or for a spec change the field manager that last wrote the field
    /// (from `metadata.managedFields`), `spec` when none is recorded.
    pub who: String,
}

/// The engine's per-partition view (`crate::automation::partitions`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PartitionsStatus {
    /// The scan this view was taken from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<MicroTime>,
    /// Watched partitions an observer hosts that are offline (no leader, no live primary).
    #[serde(default)]
    pub offline: u32,
    /// ... under min ISR (live primaries in the ISR below `min.insync.replicas`).
    #[serde(default)]
    pub under_min_isr: u32,
    /// ... exactly at min ISR (one more loss stops `acks=all` writes).
    #[serde(default)]
    pub at_min_isr: u32,
    /// ... whose state the engine cannot judge (min ISR unknown, a replica not answering).
    #[serde(default)]
    pub unknown: u32,
    /// At most 50 of the partitions counted above, the most severe first, then by topic and
    /// partition.
    #[serde(default)]
    pub entries: Vec<PartitionEntry>,
    /// Partitions counted above but left out of `entries` by the bound.
    #[serde(default)]
    pub omitted_partitions: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PartitionEntry {
    pub topic: String,
    pub partition: i32,
    pub state: PartitionCondition,
    /// Live primary replicas in the ISR (observers never count).
    pub isr: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_isr: Option<u32>,
    /// The observers (not promoted) hosting it and their lag in messages, where known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observers: Vec<ObserverLag>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObserverLag {
    pub node_id: NodeId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag: Option<i64>,
}

/// A partition's state in `status.partitions`, most severe first.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum PartitionCondition {
    Offline,
    UnderMinIsr,
    Unknown,
    AtMinIsr,
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
    /// Running pods the step went on without: unreachable during a promotion (node not Ready,
    /// terminating, or gone from Kafka while their agent stays silent). They read `revision`
    /// when they return; a demotion waits for them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excused: Vec<ExcusedPod>,
}

/// A running pod a rollout step does not wait for, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExcusedPod {
    pub pod: String,
    pub reason: ExcuseReason,
    /// What the operator saw, for people.
    pub message: String,
}

/// Why a step went on without a pod (docs/architecture.md, "Unreachable pods").
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum ExcuseReason {
    /// The pod's Node is not Ready (False or Unknown) and its agent does not answer.
    NodeNotReady,
    /// The pod is being deleted and its agent does not answer.
    Terminating,
    /// Its agent has not answered for a while and Kafka no longer lists the node as alive.
    GoneFromKafka,
}

impl ExcuseReason {
    pub fn as_str(self) -> &'static str {
        match self {
            ExcuseReason::NodeNotReady => "NodeNotReady",
            ExcuseReason::Terminating => "Terminating",
            ExcuseReason::GoneFromKafka => "GoneFromKafka",
        }
    }
}

impl std::fmt::Display for ExcuseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
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
    /// Running pods of the current step it goes on without (unreachable, see `mayExcuse`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excused: Vec<ExcusedPod>,
    /// True once the current step timed out (the rollout keeps waiting, the phase is Degraded).
    #[serde(default)]
    pub timed_out: bool,
    /// Whether a step of this rollout may go on without unreachable pods: only a promotion
    /// whose target is contained in every list a pod may still hold (the last completed set
    /// and the targets of the rollouts it superseded). Absent in older status: false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub may_excuse: bool,
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

// A promotion the operator made on its own: an entry of `status.autoPromotions` and, the same
// value, of the promotion engine's history (`crate::promotion::PolicyHistory`). A plain comment:
// a doc comment would become the field's description in the generated CRD.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
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

/// The promotion engine's memory, saved in status (`crate::automation` encodes and restores it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EngineState {
    /// When the engine last confirmed this state (the scan that produced the write). A successor
    /// discards a state older than 10 minutes, and the confirmation streaks of one older than
    /// three scan intervals.
    pub saved_at: MicroTime,
    /// Per broker: confirmation streak, stabilization timer, last automatic action.
    #[serde(default)]
    pub brokers: Vec<BrokerEngineState>,
    /// Last known high watermark of each partition hosted by an observer, one entry per topic.
    #[serde(default)]
    pub high_watermarks: Vec<TopicHighWatermarks>,
    /// High watermarks left out to keep the state within its byte bound (0 normally).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted_high_watermarks: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BrokerEngineState {
    pub node_id: NodeId,
    /// Consecutive scans (capped at `confirmations`) in which it was a valid promotion candidate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promote_streak: Option<u32>,
    /// Since when the cluster has been healthy without this auto-promoted broker: the
    /// stabilization window of its demotion runs from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovered_since: Option<MicroTime>,
    /// The last automatic action on it; its cooldown runs from `lastActionAt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_action: Option<EngineActionKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_action_at: Option<MicroTime>,
}

#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum EngineActionKind {
    Promote,
    Demote,
    MoveLeadership,
    // A reorder-only reassignment that made a primary the preferred leader (before a preferred
    // election moves leadership off a broker about to be demoted). A plain comment: a doc
    // comment on one variant changes the generated schema's shape.
    ReorderReplicas,
    UncleanElect,
}

/// The high watermarks of one topic's partitions, compactly: `partitions` is the standard
/// base64 of, for each partition in ascending order, the unsigned LEB128 varints of
/// (partition − previous partition − 1, starting from −1) and (high watermark).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopicHighWatermarks {
    pub topic: String,
    pub partitions: String,
}

fn is_no_epoch(n: &i64) -> bool {
    *n == 0
}
