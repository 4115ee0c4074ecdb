//! How to reach the Kafka cluster: bootstrap servers plus librdkafka properties for TLS/SASL.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;
use rdkafka::ClientConfig;

use super::security::{ConnectionSecurity, ProbeSecurity};
use super::KafkaError;

/// Connection settings: librdkafka `properties` (`security.protocol`, `ssl.ca.pem`,
/// `sasl.mechanism`, `sasl.username`, ...) and the offset probe's TLS and SASL settings, both
/// filled by [`ConnectionSettings::with_security`] from what `security::connection_security`
/// made of the ObserverSet's Secrets. `Debug` does not show the password or the private key.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ConnectionSettings {
    pub bootstrap_servers: Vec<String>,
    pub properties: BTreeMap<String, String>,
    pub probe: ProbeSecurity,
}

/// How fast the admin client gives up on a broker that stopped answering. A zone cut off by a
/// partition or a power loss drops packets instead of refusing them: with librdkafka's defaults
/// (60 s request timeout, 30 s connection setup) a connection to such a broker stays "up", the
/// metadata reads sent on it hang, and every scan failed for 80 s after a zone partition on the
/// bed (`KafkaUnreachable`) while the other brokers answered. A request unanswered for 5 s
/// now closes that connection (librdkafka's `socket.max.fails` is 1) and the next read goes to
/// another broker; a new connection that is not accepted within 3 s is dropped likewise.
const FAILURE_DETECTION: [(&str, &str); 2] = [
    ("socket.timeout.ms", "5000"),
    ("socket.connection.setup.timeout.ms", "3000"),
];

/// librdkafka properties whose values `Debug` hides (the username too: it is a credential).
const SECRET_PROPERTIES: [&str; 4] = [
    "sasl.username",
    "sasl.password",
    "ssl.key.pem",
    "ssl.key.password",
];

impl fmt::Debug for ConnectionSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let properties: BTreeMap<&str, &str> = self
            .properties
            .iter()
            .map(|(k, v)| {
                let shown = if SECRET_PROPERTIES.contains(&k.as_str()) {
                    "<redacted>"
                } else {
                    v.as_str()
                };
                (k.as_str(), shown)
            })
            .collect();
        f.debug_struct("ConnectionSettings")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("properties", &properties)
            .field("probe", &self.probe)
            .finish()
    }
}

impl ConnectionSettings {
    pub fn plaintext(bootstrap_servers: impl IntoIterator<Item = impl Into<String>>) -> Self {
        ConnectionSettings {
            bootstrap_servers: bootstrap_servers.into_iter().map(Into::into).collect(),
            properties: BTreeMap::new(),
            probe: ProbeSecurity::default(),
        }
    }

    /// These settings with the TLS and SASL settings made from the ObserverSet's Secrets.
    pub fn with_security(mut self, security: ConnectionSecurity) -> Self {
        self.properties.extend(security.properties);
        self.probe = security.probe;
        self
    }

    /// The offset probe's settings, when they match the librdkafka `security.protocol` (they
    /// do when both come from [`Self::with_security`]); `None` when properties set by hand ask
    /// for TLS or SASL the probe was not given.
    pub fn probe_security(&self) -> Option<&ProbeSecurity> {
        let protocol = self
            .properties
            .get("security.protocol")
            .map_or("PLAINTEXT", String::as_str);
        protocol
            .eq_ignore_ascii_case(self.probe.protocol())
            .then_some(&self.probe)
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

    /// Whether the brokers are reached without TLS or SASL.
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
        for (k, v) in FAILURE_DETECTION {
            config.set(k, v);
        }
        for (k, v) in &self.properties {
            config.set(k, v);
        }
        config
            .create()
            .map(Arc::new)
            .map_err(|e| KafkaError::Client(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{SaslMechanism, SaslSecretRef, SaslSpec};
    use crate::kafka::security::{connection_security, SecretContents};

    fn sasl_settings() -> ConnectionSettings {
        let sasl = SaslSpec {
            mechanism: SaslMechanism::ScramSha512,
            secret_ref: SaslSecretRef {
                name: "user".into(),
                username_key: "username".into(),
                password_key: "password".into(),
            },
        };
        let secrets = SecretContents::from([(
            "user".to_string(),
            BTreeMap::from([
                ("username".to_string(), b"alice".to_vec()),
                ("password".to_string(), b"hunter2".to_vec()),
            ]),
        )]);
        let security = connection_security("ns", None, Some(&sasl), &secrets).unwrap();
        ConnectionSettings::from_bootstrap("k:9092").with_security(security)
    }

    #[test]
    fn debug_hides_the_username_and_the_password() {
        let shown = format!("{:?}", sasl_settings());
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(!shown.contains("alice"), "{shown}");
        assert!(shown.contains("sasl.username"), "{shown}");
    }

    #[test]
    fn the_probe_gets_its_settings_only_when_they_match_the_protocol() {
        let settings = sasl_settings();
        assert_eq!(
            settings.probe_security().map(ProbeSecurity::protocol),
            Some("SASL_PLAINTEXT")
        );
        assert!(!settings.is_plaintext());
        let plain = ConnectionSettings::from_bootstrap("k:9092");
        assert_eq!(plain.probe_security(), Some(&ProbeSecurity::default()));
        let mut by_hand = plain;
        by_hand
            .properties
            .insert("security.protocol".into(), "SSL".into());
        assert_eq!(by_hand.probe_security(), None);
    }
}
