//! kafka-observer-operator: keeps the `observer.ids` files of a Kafka cluster's controllers and
//! brokers in line with an ObserverSet, promoting and demoting observer replicas safely.
//!
//! Functional core, imperative shell: `crd` (the API and its validation), `observer_ids` (the
//! file format) and `plan` (effective set and rollout state machine) are pure; `kube` and `kafka`
//! do the I/O.

pub mod crd;
pub mod history;
pub mod observer_ids;
pub mod plan;
pub mod time_format;
// The reconciler and its Kubernetes shell.
pub mod automation;
pub mod cli;
pub mod controller;
pub mod kafka;
pub mod kube;
pub mod policy;

// Operator infrastructure: sidecar, logs, metrics, HTTP endpoints, leader election, shutdown.
pub mod agent;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod shutdown;
pub mod telemetry;
