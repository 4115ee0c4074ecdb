//! The ObserverSet custom resource (`kafkaobserver.io/v1alpha1`), split by concern.
//!
//! The raw types here mirror docs/api.md field by field. The apiserver rejects most bad objects
//! through the schema (patterns, ranges, enums) and CEL rules; `validate` then turns a raw spec
//! into a [`ValidatedObserverSet`], the only model the rest of the operator works from.

mod duration;
mod kafka;
mod nodes;
mod promotion;
mod rollout;
mod spec;
mod status;
mod validation;

pub use duration::{parse_duration, DurationError, DURATION_PATTERN};
pub use kafka::{ClientCertSecretRef, KafkaConnection, SaslMechanism, SaslSpec, SecretKeyRef, SaslSecretRef, TlsSpec};
pub use nodes::{NodeIdSource, NodesSpec, RoleNodes};
pub use promotion::{AutoDemote, PromotionPolicy, PromotionSpec, TopicFilter};
pub use rollout::{AckMode, RolloutSpec};
pub use spec::{DeletionPolicy, ObserverSet, ObserverSetSpec};
pub use status::{
    AutoPromotion, ObserverSetStatus, Phase, PlanAction, PlanActionKind, PlanStatus, RoleStatus, RolesStatus,
    RolloutKind, RolloutStatus, RolloutStep,
};
pub use validation::{
    validate, NodeIdRule, RoleSelection, SpecError, SpecViolation, ValidatedKafka, ValidatedObserverSet, ValidatedPromotion,
    ValidatedRollout,
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
