//! The ObserverSet custom resource (`kafkaobserver.io/v1alpha1`), split by concern.
//!
//! The raw types here mirror docs/api.md field by field. The apiserver rejects most bad objects
//! through the schema (patterns, ranges, enums) and CEL rules; `validate` then turns a raw spec
//! into a [`ValidatedObserverSet`], the only model the rest of the operator works from.

mod bootstrap;
pub mod bounds;
mod clusters;
mod duration;
mod kafka;
pub mod memo;
mod nodes;
mod promotion;
mod rollout;
mod spec;
mod status;
mod topic_filter;
mod validation;

pub use bootstrap::{parse_bootstrap_servers, BootstrapError, BOOTSTRAP_FORM, BOOTSTRAP_PATTERN};
pub use clusters::{is_dns_label, is_member_count, ClustersViolation, MemberCluster, MAX_CLUSTERS};
pub use duration::{parse_duration, DurationError, DURATION_PATTERN};
pub use kafka::{
    ClientCertSecretRef, KafkaConnection, SaslMechanism, SaslSecretRef, SaslSpec, SecretKeyRef,
    TlsSpec,
};
pub use nodes::{NodeIdSource, NodesSpec, RoleNodes};
pub use promotion::{AutoDemote, PromotionPolicy, PromotionSpec, TopicFilter};
pub use rollout::{AckMode, RolloutSpec};
pub use spec::{DeletionPolicy, ObserverSet, ObserverSetSpec};
pub use status::{
    AutoPromotion, BrokerEngineState, EngineActionKind, EngineState, ExcuseReason, ExcusedPod,
    HistoryEntry, LeaseView, LocalView, MemberReach, ObserverLag, ObserverSetStatus,
    PartitionCondition, PartitionEntry, PartitionsStatus, Phase, PlanAction, PlanActionKind,
    PlanStatus, RoleStatus, RolesStatus, RolloutKind, RolloutStatus, RolloutStep,
    TopicHighWatermarks,
};
pub use topic_filter::CompiledTopicFilter;
pub use validation::{
    is_label_key, validate, validate_over, NodeIdRule, RoleSelection, SpecError, SpecViolation,
    ValidatedKafka, ValidatedObserverSet, ValidatedPromotion, ValidatedRollout,
};

/// API group of every resource this operator defines.
pub const GROUP: &str = "kafkaobserver.io";

/// A Kafka node id, as in `node.id` (KRaft). Kafka uses a signed 32-bit integer.
pub type NodeId = i32;

/// The two Kafka process roles whose observer.ids files the operator writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    Controller,
    Broker,
}

impl Role {
    /// Rollout order: controllers decide elections and ISR validity, so they always learn first.
    pub const ROLLOUT_ORDER: [Role; 2] = [Role::Controller, Role::Broker];

    /// The spelling used in ConfigMap names and the `kafkaobserver.io/role` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Controller => "controller",
            Role::Broker => "broker",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use kube::CustomResourceExt;

    use super::ObserverSet;

    /// `crds/observerset.yaml` and the chart's copy are what `kafka-observer-operator crd`
    /// prints; regenerate both with `make crds`.
    #[test]
    fn checked_in_crd_is_up_to_date() {
        let generated = serde_norway::to_string(&ObserverSet::crd()).unwrap();
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        for path in [
            "crds/observerset.yaml",
            "charts/kafka-observer-operator/crds/observerset.yaml",
        ] {
            let on_disk = std::fs::read_to_string(root.join(path)).unwrap_or_default();
            assert!(
                on_disk == generated,
                "{path} is stale or missing: run `make crds`"
            );
        }
    }

    #[test]
    fn crd_carries_the_validation_rules() {
        let yaml = serde_norway::to_string(&ObserverSet::crd()).unwrap();
        for rule in [
            "observers must be node ids >= 0 and <= 2147483647",
            "promotion.promoted must be node ids >= 0 and <= 2147483647",
            "promotion.confirmations must be between 1 and 100",
            "promotion.maxConcurrentPromotions must be between 1 and 256",
            "promotion.scanInterval must be between 100ms and 10m",
            "rollout.jvmCacheTtl must be between 100ms and 1m",
            "promotion.cooldown must be between 5s and 24h",
            "promotion.autoDemote.stabilizationWindow must be between 10s and 24h",
            "rollout.settleTime must be at least 10s when rollout.acknowledgement is Time",
            "rollout.timeout must be longer than rollout.settleTime when rollout.acknowledgement is Time",
            "rollout.agentPort must be between 1 and 65535",
            "nodeId.label must be a label key",
            "metadata.name must have at most 63 characters",
            super::BOOTSTRAP_FORM,
            "observers must not list a node id twice",
            "every id in promotion.promoted must also be listed in observers",
            "nodeId needs exactly one of label or ordinalOffset",
            "selector must have at least one matchLabels entry or matchExpressions term",
            "nodes needs at least one of controllers or brokers",
            "bootstrapServers must list at least one host:port",
            super::DURATION_PATTERN,
        ] {
            assert!(yaml.contains(rule), "the CRD lacks {rule:?}");
        }
    }
}
