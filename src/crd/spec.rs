//! The ObserverSet root: `spec` and the generated `ObserverSet` resource type.

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::bounds::node_ids_rule;
use super::clusters::{MemberCluster, CLUSTERS_COUNT_RULE, CLUSTERS_UNIQUE_RULE};
use super::kafka::KafkaConnection;
use super::nodes::{NodesSpec, RoleNodes};
use super::promotion::PromotionSpec;
use super::rollout::RolloutSpec;
use super::status::ObserverSetStatus;
use super::NodeId;

/// Declares which Kafka nodes are observers and how the operator keeps their observer.ids files.
// The derive's `printcolumn(...)` entries repeat `type_`/`json_path`, which clippy mistakes
// for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[kube(
    group = "kafkaobserver.io",
    version = "v1alpha1",
    kind = "ObserverSet",
    plural = "observersets",
    shortname = "obs",
    namespaced,
    status = "ObserverSetStatus",
    derive = "PartialEq",
    validation = Rule::new("size(self.metadata.name) <= 63").message("metadata.name must have at most 63 characters: it becomes a label value of the observer ConfigMaps"),
    doc = "Observer replicas of one Kafka cluster: the declared observers, promotion policy and rollout of the observer.ids files",
    printcolumn(
        name = "Desired",
        type_ = "string",
        description = "Effective observer set wanted now",
        json_path = ".status.desiredObservers"
    ),
    printcolumn(
        name = "Effective",
        type_ = "string",
        description = "Observer set acknowledged by every pod",
        json_path = ".status.effectiveObservers"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Last-Action",
        type_ = "string",
        description = "The newest action in status.history",
        json_path = ".status.lastAction.action",
        priority = 1
    ),
    printcolumn(
        name = "Node",
        type_ = "integer",
        description = "The node id of the newest action",
        json_path = ".status.lastAction.nodeId",
        priority = 1
    ),
    printcolumn(
        name = "By",
        type_ = "string",
        description = "automation, or the field manager of a spec change",
        json_path = ".status.lastAction.who",
        priority = 1
    ),
    printcolumn(
        name = "Action-Age",
        type_ = "date",
        description = "When the newest action happened",
        json_path = ".status.lastAction.at",
        priority = 1
    ),
    printcolumn(
        name = "Under-Min-ISR",
        type_ = "integer",
        description = "Partitions an observer hosts that are under min ISR (engine's latest view)",
        json_path = ".status.partitions.underMinIsr",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.nodes) != has(self.clusters)").message("give exactly one of nodes (the pods of one Kubernetes cluster) or clusters (one Kafka cluster over several member clusters)"))]
#[x_kube(validation = Rule::new("!has(self.promotion) || !has(self.promotion.promoted) || self.promotion.promoted.all(id, id in self.observers)").message("every id in promotion.promoted must also be listed in observers"))]
pub struct ObserverSetSpec {
    /// How to reach the Kafka cluster.
    pub kafka: KafkaConnection,
    /// Which pods run controllers and brokers, and their node ids. Required unless `clusters`
    /// is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<NodesSpec>,
    /// One Kafka cluster over several Kubernetes clusters: the pods of each member cluster
    /// (docs/multi-cluster.md), instead of `nodes`. Needs the operator run over the same members
    /// (the chart's multiCluster values; an operator of one cluster refuses the set) and
    /// `deletionPolicy: Retain`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 5))]
    #[x_kube(validation = Rule::new(CLUSTERS_COUNT_RULE).message("clusters must name an odd number of member clusters, 3 or 5 (a majority of them decides which operator replica acts)"))]
    #[x_kube(validation = Rule::new(CLUSTERS_UNIQUE_RULE).message("clusters must not name a member twice"))]
    pub clusters: Option<Vec<MemberCluster>>,
    /// Node ids that are observers in normal operation: Kafka node ids (0 to 2147483647), unique,
    /// at most 256.
    #[schemars(length(max = 256), inner(range(min = 0, max = 2147483647)))]
    #[x_kube(validation = Rule::new(node_ids_rule()).message("observers must be node ids >= 0 and <= 2147483647 (Kafka's int32 node.id)"))]
    #[x_kube(validation = Rule::new("self.all(id, self.filter(x, x == id).size() == 1)").message("observers must not list a node id twice"))]
    pub observers: Vec<NodeId>,
    /// Promotion policy and manual promotions.
    #[serde(default)]
    pub promotion: PromotionSpec,
    /// How changes reach the pods.
    #[serde(default)]
    pub rollout: RolloutSpec,
    /// What happens to the observer ConfigMaps when the ObserverSet is deleted.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

impl ObserverSetSpec {
    /// The controllers' and brokers' pods of `spec.nodes`, those present; none for a set with
    /// `clusters` (which `validate` refuses, so it selects no pod of this cluster).
    pub fn role_nodes(&self) -> impl Iterator<Item = &RoleNodes> {
        self.nodes
            .iter()
            .flat_map(|n| [n.controllers.as_ref(), n.brokers.as_ref()])
            .flatten()
    }
}

/// Fate of the ConfigMaps when their ObserverSet is deleted.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub enum DeletionPolicy {
    /// Keep the ConfigMaps and their content (owner references removed): the brokers keep
    /// their observers. Deleting them would promote every observer at once.
    #[default]
    Retain,
    /// Delete the ConfigMaps with the ObserverSet.
    Delete,
}
