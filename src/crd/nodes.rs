//! Which pods run Kafka controllers and brokers, and how to read their node ids (`spec.nodes`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::KubeSchema;

use super::bounds::int_range_rule;

/// RE2 pattern of a Kubernetes label key (`[prefix/]name`); the operator checks the same with
/// `is_label_key`.
pub const LABEL_KEY_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$";
use serde::{Deserialize, Serialize};

/// The pods of each Kafka role.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.controllers) || has(self.brokers)").message("nodes needs at least one of controllers or brokers"))]
#[x_kube(validation = Rule::new("has(self.controllers) || (has(self.brokers) && has(self.brokers.combined) && self.brokers.combined)").message("nodes.controllers is required unless the brokers are combined-mode (set brokers.combined: true)"))]
pub struct NodesSpec {
    /// Dedicated KRaft controller pods. Optional when every controller runs combined with a broker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controllers: Option<RoleNodes>,
    /// Broker pods (or broker+controller pods when `combined` is true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brokers: Option<RoleNodes>,
}

/// The pods of one role.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoleNodes {
    /// Label selector for this role's pods in the ObserverSet's namespace. Must not be empty:
    /// an empty selector would match every pod of the namespace.
    #[x_kube(validation = Rule::new("(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)").message("selector must have at least one matchLabels entry or matchExpressions term"))]
    pub selector: LabelSelector,
    /// How to derive a pod's Kafka node id.
    pub node_id: NodeIdSource,
    /// True when these pods run KRaft combined mode (`process.roles=broker,controller`).
    #[serde(default)]
    pub combined: bool,
}

/// Where a pod's node id comes from: exactly one of `label` or `ordinalOffset`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.label) != has(self.ordinalOffset)").message("nodeId needs exactly one of label or ordinalOffset"))]
pub struct NodeIdSource {
    /// A pod label whose value is the node id (e.g. `kafkaobserver.io/node-id`): a label key,
    /// `[prefix/]name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 317))]
    #[x_kube(validation = Rule::new(format!("self.matches(r'{LABEL_KEY_PATTERN}')")).message("nodeId.label must be a label key, [prefix/]name, for example kafkaobserver.io/node-id"))]
    pub label: Option<String>,
    /// Node id = StatefulSet pod ordinal (the `-N` suffix of the pod name) + this offset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// At most 2147483647 (Kafka's largest node id); ordinal + offset must not exceed it either.
    #[schemars(range(min = 0, max = 2147483647))]
    #[x_kube(validation = Rule::new(int_range_rule(0, 2147483647)).message("nodeId.ordinalOffset must be between 0 and 2147483647"))]
    pub ordinal_offset: Option<i32>,
}
