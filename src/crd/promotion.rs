//! When and how observers are promoted and demoted (`spec.promotion`).

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use super::bounds::{int_range_rule, node_ids_rule, COOLDOWN, SCAN_INTERVAL, STABILIZATION_WINDOW};
use super::duration::DURATION_PATTERN;
use super::NodeId;

/// Promotion settings. Every field has a default, so `promotion: {}` means manual promotion only.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromotionSpec {
    /// What makes the operator promote an observer on its own. `Manual` never does.
    #[serde(default)]
    pub policy: PromotionPolicy,
    /// Observers promoted by hand; each must also be listed in `observers`.
    #[serde(default)]
    #[schemars(length(max = 256), inner(range(min = 0, max = 2147483647)))]
    #[x_kube(validation = Rule::new(node_ids_rule()).message("promotion.promoted must be node ids >= 0 and <= 2147483647 (Kafka's int32 node.id)"))]
    #[x_kube(validation = Rule::new("self.all(id, self.filter(x, x == id).size() == 1)").message("promotion.promoted must not list a node id twice"))]
    pub promoted: Vec<NodeId>,
    /// An observer lagging by more messages than this on any partition it hosts is not eligible.
    #[serde(default = "default_max_lag")]
    #[schemars(range(min = 0))]
    #[x_kube(validation = Rule::new("self >= 0").message("promotion.maxLagMessages must be 0 or more"))]
    pub max_lag_messages: i64,
    /// Consecutive scans that must agree before the operator acts.
    #[serde(default = "default_confirmations")]
    #[schemars(range(min = 1, max = 100))]
    #[x_kube(validation = Rule::new(int_range_rule(1, 100)).message("promotion.confirmations must be between 1 and 100"))]
    pub confirmations: i32,
    /// How often the Kafka watcher polls the cluster.
    #[serde(default = "default_scan_interval")]
    #[schemars(regex(pattern = DURATION_PATTERN), length(max = 11))]
    #[x_kube(validation = Rule::new(SCAN_INTERVAL.cel_rule()).message(Message::Message(SCAN_INTERVAL.cel_message())))]
    pub scan_interval: String,
    /// Minimum time between two automatic actions on the same broker.
    #[serde(default = "default_cooldown")]
    #[schemars(regex(pattern = DURATION_PATTERN), length(max = 11))]
    #[x_kube(validation = Rule::new(COOLDOWN.cel_rule()).message(Message::Message(COOLDOWN.cel_message())))]
    pub cooldown: String,
    /// At most this many observers promoted automatically at the same time.
    #[serde(default = "default_max_concurrent")]
    #[schemars(range(min = 1, max = 256))]
    #[x_kube(validation = Rule::new(int_range_rule(1, 256)).message("promotion.maxConcurrentPromotions must be between 1 and 256"))]
    pub max_concurrent_promotions: i32,
    /// Which topics the policy looks at.
    #[serde(default)]
    pub topics: TopicFilter,
    /// Decide and report in `status.plan`, never act.
    #[serde(default)]
    pub dry_run: bool,
    /// Demote what the operator promoted once the cluster is healthy again.
    #[serde(default)]
    pub auto_demote: AutoDemote,
    /// Allow electing a promoted observer by unclean election when every primary replica is lost.
    #[serde(default)]
    pub unclean_takeover: bool,
}

impl Default for PromotionSpec {
    fn default() -> Self {
        PromotionSpec {
            policy: PromotionPolicy::default(),
            promoted: Vec::new(),
            max_lag_messages: default_max_lag(),
            confirmations: default_confirmations(),
            scan_interval: default_scan_interval(),
            cooldown: default_cooldown(),
            max_concurrent_promotions: default_max_concurrent(),
            topics: TopicFilter::default(),
            dry_run: false,
            auto_demote: AutoDemote::default(),
            unclean_takeover: false,
        }
    }
}

fn default_max_lag() -> i64 {
    1000
}

fn default_confirmations() -> i32 {
    2
}

fn default_scan_interval() -> String {
    "1s".into()
}

fn default_cooldown() -> String {
    "300s".into()
}

fn default_max_concurrent() -> i32 {
    1
}

/// The condition that triggers an automatic promotion.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub enum PromotionPolicy {
    /// Only `promotion.promoted` changes the effective set.
    #[default]
    Manual,
    /// Promote when a partition hosted by an observer has fewer in-sync replicas than min.insync.replicas.
    UnderMinIsr,
    /// Promote when a partition hosted by an observer has fewer in-sync replicas than non-observer replicas.
    UnderReplicated,
    /// Promote when an observer is the only replica that could lead (no electable replica left).
    LeaderIsObserver,
}

/// Regexes on topic names: a topic counts when it matches an include and no exclude.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopicFilter {
    /// At most 64 regexes of at most 256 characters each.
    #[serde(default = "default_include")]
    #[schemars(length(max = 64), inner(length(max = 256)))]
    pub include: Vec<String>,
    /// At most 64 regexes of at most 256 characters each.
    #[serde(default = "default_exclude")]
    #[schemars(length(max = 64), inner(length(max = 256)))]
    pub exclude: Vec<String>,
}

impl Default for TopicFilter {
    fn default() -> Self {
        TopicFilter {
            include: default_include(),
            exclude: default_exclude(),
        }
    }
}

fn default_include() -> Vec<String> {
    vec![".*".into()]
}

fn default_exclude() -> Vec<String> {
    vec!["^__".into()]
}

/// Automatic demotion of what the operator promoted itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutoDemote {
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// How long the cluster must stay healthy before an automatic promotion is undone.
    #[serde(default = "default_stabilization")]
    #[schemars(regex(pattern = DURATION_PATTERN), length(max = 11))]
    #[x_kube(validation = Rule::new(STABILIZATION_WINDOW.cel_rule()).message(Message::Message(STABILIZATION_WINDOW.cel_message())))]
    pub stabilization_window: String,
}

impl Default for AutoDemote {
    fn default() -> Self {
        AutoDemote {
            enabled: true,
            stabilization_window: default_stabilization(),
        }
    }
}

fn default_true() -> bool {
    true
}

fn default_stabilization() -> String {
    "60s".into()
}
