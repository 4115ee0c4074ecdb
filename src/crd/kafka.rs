//! How the operator reaches the Kafka cluster (`spec.kafka`).

use kube::KubeSchema;

use super::bootstrap::{BOOTSTRAP_FORM, BOOTSTRAP_PATTERN};
use super::validation::SASL_WITHOUT_TLS;
use serde::{Deserialize, Serialize};

/// Connection to the Kafka cluster the observers belong to. SASL only over TLS: the brokers
/// must prove themselves with a certificate the set's CA signed before any credential is sent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.sasl) || has(self.tls)").message(SASL_WITHOUT_TLS))]
pub struct KafkaConnection {
    /// Comma-separated `host:port` list of brokers, as in Kafka's `bootstrap.servers`: host a
    /// DNS name, an IPv4 address or an `[IPv6]` address, port 1-65535; no spaces, no scheme, no
    /// path, no empty entries; at most 4096 characters.
    #[x_kube(validation = Rule::new("self.trim() != ''").message("bootstrapServers must list at least one host:port"))]
    #[x_kube(validation = Rule::new(format!("self.matches(r'{BOOTSTRAP_PATTERN}')")).message(BOOTSTRAP_FORM))]
    #[schemars(length(min = 1, max = 4096))]
    pub bootstrap_servers: String,
    /// TLS to the brokers; absent means plaintext.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,
    /// SASL authentication; absent means none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sasl: Option<SaslSpec>,
}

/// A key of a Secret in the ObserverSet's namespace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    /// Secret name.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Key inside the Secret.
    #[schemars(length(min = 1))]
    pub key: String,
}

/// TLS settings for the Kafka client.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TlsSpec {
    /// CA certificate (PEM) that signed the brokers' certificates.
    pub ca_secret_ref: SecretKeyRef,
    /// Client certificate and key for mutual TLS; absent means server-only TLS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cert_secret_ref: Option<ClientCertSecretRef>,
}

/// A Secret holding a client certificate and its private key (PEM).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientCertSecretRef {
    #[schemars(length(min = 1))]
    pub name: String,
    #[serde(default = "default_cert_key")]
    pub cert_key: String,
    #[serde(default = "default_key_key")]
    pub key_key: String,
}

fn default_cert_key() -> String {
    "tls.crt".into()
}

fn default_key_key() -> String {
    "tls.key".into()
}

/// SASL mechanisms the operator's Kafka client supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum SaslMechanism {
    #[serde(rename = "PLAIN")]
    Plain,
    #[serde(rename = "SCRAM-SHA-256")]
    ScramSha256,
    #[serde(rename = "SCRAM-SHA-512")]
    ScramSha512,
}

impl SaslMechanism {
    /// The spelling of librdkafka's `sasl.mechanism`.
    pub fn as_str(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }
}

/// SASL settings for the Kafka client.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SaslSpec {
    pub mechanism: SaslMechanism,
    pub secret_ref: SaslSecretRef,
}

/// A Secret holding the SASL username and password.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SaslSecretRef {
    #[schemars(length(min = 1))]
    pub name: String,
    #[serde(default = "default_username_key")]
    pub username_key: String,
    #[serde(default = "default_password_key")]
    pub password_key: String,
}

fn default_username_key() -> String {
    "username".into()
}

fn default_password_key() -> String {
    "password".into()
}
