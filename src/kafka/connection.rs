//! How to reach the Kafka cluster: bootstrap servers plus librdkafka properties for TLS/SASL.

use std::collections::BTreeMap;
use std::sync::Arc;

use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;
use rdkafka::ClientConfig;

use super::KafkaError;

/// Connection settings. The reconciler fills `properties` from the ObserverSet's TLS and SASL
/// secrets using librdkafka names (`security.protocol`, `ssl.ca.pem`, `sasl.mechanism`,
/// `sasl.username`, ...).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnectionSettings {
    pub bootstrap_servers: Vec<String>,
    pub properties: BTreeMap<String, String>,
}

impl ConnectionSettings {
    pub fn plaintext(bootstrap_servers: impl IntoIterator<Item = impl Into<String>>) -> Self {
        ConnectionSettings {
            bootstrap_servers: bootstrap_servers.into_iter().map(Into::into).collect(),
            properties: BTreeMap::new(),
        }
    }

    /// Parses a comma-separated bootstrap string (`host:port[,host:port...]`), such as the test
    /// bed's `.testbed/kafka/bootstrap` (one entry: its kafka-bootstrap Service's ClusterIP:9092).
    pub fn from_bootstrap(bootstrap: &str) -> Self {
        Self::plaintext(
            bootstrap
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty()),
        )
    }

    /// Whether the brokers are reached without TLS or SASL; only then can the watcher's own
    /// offset probe talk to them (it speaks plain Kafka protocol).
    pub fn is_plaintext(&self) -> bool {
        self.properties
            .get("security.protocol")
            .is_none_or(|p| p.eq_ignore_ascii_case("plaintext"))
    }

    pub fn admin_client(&self) -> Result<Arc<AdminClient<DefaultClientContext>>, KafkaError> {
        if self.bootstrap_servers.is_empty() {
            return Err(KafkaError::NoBootstrap);
        }
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", self.bootstrap_servers.join(","));
        config.set("client.id", "kafka-observer-operator");
        for (k, v) in &self.properties {
            config.set(k, v);
        }
        config
            .create()
            .map(Arc::new)
            .map_err(|e| KafkaError::Client(e.to_string()))
    }
}
