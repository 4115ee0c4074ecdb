//! kafka-observer-operator: keeps the `observer.ids` files of a Kafka cluster's controllers and
//! brokers in line with an ObserverSet, promoting and demoting observer replicas safely.
//!
//! Functional core, imperative shell: `crd` (the API and its validation), `observer_ids` (the
//! file format), `writers` (who writes which fields), `rollout` (effective set, rollout state
//! machine and the objects it reads and writes) and `promotion` (the promotion engine) are pure;
//! `reconciler` and `automation` are their two loops; `k8s` and `kafka` do the I/O.

// No unsafe code: the Kafka requests librdkafka does not wrap go through kafka-protocol.
#![forbid(unsafe_code)]

pub mod crd;
pub mod history;
pub mod observer_ids;
pub mod promotion;
pub mod rollout;
pub mod time_format;
pub mod writers;
// The two loops and their shells.
pub mod automation;
pub mod cli;
pub mod k8s;
pub mod kafka;
pub mod kafka_liveness;
pub mod reconciler;

// Operator infrastructure: sidecar, logs, metrics, HTTP endpoints, leader election, shutdown.
pub mod agent;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod shutdown;
pub mod telemetry;
