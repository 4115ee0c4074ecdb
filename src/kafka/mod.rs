//! The Kafka shell: watches a cluster's replication state for the policy engine and runs the
//! leader elections and reorder-only reassignments the engine asks for (both with the
//! `kafka-protocol` crate on the probe's connection: `election`, `reassignment`). librdkafka (rdkafka)
//! reads metadata and configs (the metadata also through the probe when librdkafka is slow:
//! `hedged_metadata`); the probe's ListOffsets requests (kafka-protocol too) read each replica's
//! log end offset (see `list_offsets` and docs/promotion-policies.md, "Where lag comes from"). On secured listeners
//! both get their settings from `security` (the ObserverSet's Secrets); the probe's TLS and SASL
//! are in `secure_stream` (docs/kafka-security.md).

mod connection;
mod election;
mod freshness;
mod glance_route;
mod hedged_metadata;
mod list_offsets;
pub mod name_cache;
mod offset_probe;
mod probe_exchange;
pub mod quorum;
mod read_order;
mod reassignment;
mod scan;
pub mod secret_opt_in;
#[cfg(test)]
mod secure_probe_tests;
mod secure_stream;
pub mod security;
mod topic_configs;
mod watcher;

use thiserror::Error;

pub use connection::ConnectionSettings;
pub use election::{ElectionError, ElectionKind, ElectionOutcome};
pub use list_offsets::{OffsetKind, PartitionOffset};
pub use offset_probe::{OffsetProbe, ProbeError};
pub use reassignment::{ReassignmentError, ReorderOutcome};
pub use secure_stream::{SaslError, TlsFailure, TlsFailureKind};
pub use watcher::{KafkaWatcher, SyntheticScan, WatcherOptions};

#[derive(Debug, Error)]
pub enum KafkaError {
    #[error("no Kafka bootstrap servers configured: set spec.kafka.bootstrapServers")]
    NoBootstrap,
    #[error("cannot create the Kafka client: {0}")]
    Client(String),
    #[error("cannot read cluster metadata from Kafka: {0} (are the bootstrap servers reachable?)")]
    Metadata(String),
    #[error("Kafka metadata task failed: {0}")]
    Join(String),
}
