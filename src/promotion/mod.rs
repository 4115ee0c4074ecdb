//! The promotion policy engine: pure functions from what the Kafka watcher saw, the ObserverSet's
//! `spec.promotion` and the engine's own history to the actions to take (promote, demote, move
//! leadership, unclean takeover) with reasons. No I/O and no clock: the caller passes `now`.
//! The rules are specified in docs/promotion-policies.md.
//!
//! `decide` builds a `scan::Scan` and runs the planning steps on it (`demotion`, `promote`,
//! `takeover`), which add to a draft of the [`PromotionDecision`]; the steps depend on `scan`,
//! never on `decide`.

mod action;
mod config;
mod decide;
mod demotion;
mod health;
mod held_back;
mod history;
mod listing;
mod manual;
mod promote;
mod scan;
mod snapshot;
mod takeover;
mod witness;

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_demotion;

// The engine's inputs and memory use the API's own types where the API has one.
pub use crate::crd::{AutoPromotion, CompiledTopicFilter, EngineActionKind, PromotionPolicy};
pub use action::{PromotionAction, PromotionDecision, ReplicaOrder};
pub use config::PolicyConfig;
pub use decide::{decide, misplaced_reason, observer_only_partitions, triggered};
pub use health::{assess, observer_only, Health};
pub use held_back::{gist, joined, Concern, HeldBack};
pub use history::{auto_promotions_in, LastAction, PolicyHistory};
pub use manual::{check_demotion, check_promotion, led_by, CheckReport};
pub use snapshot::{
    BrokerId, BrokerState, ClusterSnapshot, PartitionState, SourceHealth, TopicPartition,
};
