//! The Kubernetes shell of the reconciler: only calls to the apiserver, split by the object they
//! read or write: pods (`dereference`, `nudge`), the observer ConfigMaps (`config_map`), the
//! ObserverSet status (`status`), the Kafka connection's Secrets (`secrets`), events (`events`)
//! and deletion (`finalizer`); which namespaces and pods are watched at all (`scope`). What they
//! send and how they read it back is pure and lives with its concept (`crate::rollout`, `crate::reconciler`, `crate::writers`, `crate::kafka::security`).

pub mod client;
pub mod config_map;
pub mod dereference;
pub mod error;
pub mod events;
pub mod fence;
pub mod finalizer;
pub mod members;
pub mod nudge;
#[cfg(test)]
mod rbac_lint_tests;
pub mod scope;
pub mod secrets;
pub mod status;
pub mod status_copies;

pub use error::{Error, Result};
