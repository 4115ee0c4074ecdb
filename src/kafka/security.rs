//! From the Secrets an ObserverSet names in `spec.kafka.tls` and `spec.kafka.sasl` to the
//! settings of every Kafka client the operator runs. Pure: the Secrets' contents come in as
//! bytes (the Kubernetes read is `k8s::secrets`), the result is
//!
//! - librdkafka properties for the watcher, the elections and `kubectl observer`
//!   (`security.protocol`, `ssl.ca.pem`, `ssl.certificate.pem`, `ssl.key.pem`,
//!   `sasl.mechanism`, `sasl.username`, `sasl.password`), and
//! - the offset probe's own settings ([`ProbeSecurity`]): a rustls client configuration with the
//!   CA (and the client certificate for mutual TLS), and the SASL mechanism and credentials.
//!
//! Both are built from the same bytes in one call, so they never disagree. Every error names the
//! Secret and the key to fix. The certificates are checked here, once, with rustls (the PEM
//! blocks parse, the CA is a usable trust anchor, the client key is a key rustls can sign with
//! and belongs to the certificate), so a bad Secret is reported before any connection is tried.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};
use thiserror::Error;

use crate::crd::{SaslMechanism, SaslSpec, TlsSpec};

/// The data of the Secrets read for one ObserverSet: Secret name, then key, then the value's
/// bytes (a Secret's `data`, already base64-decoded). A Secret that does not exist is absent.
pub type SecretContents = BTreeMap<String, BTreeMap<String, Vec<u8>>>;

/// Where a value comes from: a key of a Secret, for messages ("Secret ns/name key ca.crt").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretKeyLocation {
    pub namespace: String,
    pub secret: String,
    pub key: String,
}

impl fmt::Display for SecretKeyLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Secret {}/{} key {}",
            self.namespace, self.secret, self.key
        )
    }
}

/// Why the connection settings cannot be built from the Secrets. Each message names the Secret
/// and, where one is at fault, the key.
#[derive(Debug, Error)]
pub enum SecretError {
    #[error("Secret {namespace}/{secret} (named by {field}) does not exist: create it in namespace {namespace}, or fix {field}")]
    SecretMissing {
        namespace: String,
        secret: String,
        /// The spec field that names it, e.g. `spec.kafka.tls.caSecretRef.name`.
        field: &'static str,
    },
    /// The message names the missing key only: the keys the Secret does have are not listed (a
    /// set may name a Secret its author may not read).
    #[error("Secret {namespace}/{secret} has no key {key} (named by {field}): add the key, or fix {field}")]
    KeyMissing {
        namespace: String,
        secret: String,
        key: String,
        field: &'static str,
    },
    /// The Secret has not opted in to this ObserverSet (`kafka::secret_opt_in`): refused before
    /// its data is read.
    #[error("Secret {namespace}/{secret} {refusal}, so ObserverSet {observer_set} may not use it: a Secret is used only by the ObserverSets its annotation {annotation} names (comma-separated names, or * for every ObserverSet of namespace {namespace}); add {observer_set} to it, e.g. kubectl annotate secret -n {namespace} {secret} {annotation}={observer_set} (with --overwrite, keeping the names already there, if it has one)", annotation = crate::kafka::secret_opt_in::ANNOTATION)]
    NotOptedIn {
        namespace: String,
        secret: String,
        observer_set: String,
        refusal: crate::kafka::secret_opt_in::Refusal,
    },
    #[error("{location} is empty: it must hold the {what}")]
    Empty {
        location: SecretKeyLocation,
        what: &'static str,
    },
    #[error("{location} is not UTF-8 text: it must hold the {what}")]
    NotText {
        location: SecretKeyLocation,
        what: &'static str,
    },
    #[error("{location} does not hold a usable PEM certificate ({what}): {reason}")]
    BadCertificate {
        location: SecretKeyLocation,
        what: &'static str,
        reason: String,
    },
    #[error("{location} does not hold a usable PEM private key (unencrypted PKCS#8, PKCS#1 or SEC1): {reason}")]
    BadKey {
        location: SecretKeyLocation,
        reason: String,
    },
    #[error("the client certificate in Secret {namespace}/{secret} key {cert_key} and the private key in key {key_key} cannot be used together: {reason}")]
    ClientIdentity {
        namespace: String,
        secret: String,
        cert_key: String,
        key_key: String,
        reason: String,
    },
    /// Reading a Secret from the Kubernetes API failed (not "not found": that is `SecretMissing`).
    #[error("cannot read Secret {namespace}/{secret}: {source} (may the operator's ServiceAccount get Secrets in namespace {namespace}?)")]
    Read {
        namespace: String,
        secret: String,
        #[source]
        source: Box<kube::Error>,
    },
}

/// The SASL mechanism and credentials, for the probe.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslCredentials {
    pub mechanism: SaslMechanism,
    pub username: String,
    /// Where the username comes from: messages name this, never the username itself (status,
    /// Events and logs are read by people who may not read the Secret).
    pub username_location: SecretKeyLocation,
    pub password: String,
    /// Where the password comes from, for messages.
    pub password_location: SecretKeyLocation,
}

impl fmt::Debug for SaslCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SaslCredentials")
            .field("mechanism", &self.mechanism)
            .field("username", &"<redacted>")
            .field("username_location", &self.username_location)
            .field("password", &"<redacted>")
            .field("password_location", &self.password_location)
            .finish()
    }
}

/// The probe's TLS: a rustls client configuration, and where its parts come from.
#[derive(Clone)]
pub struct ProbeTls {
    pub config: Arc<ClientConfig>,
    /// Where the CA comes from, for messages.
    pub ca: SecretKeyLocation,
    /// Where the client certificate comes from (mutual TLS), for messages.
    pub client_cert: Option<SecretKeyLocation>,
    /// The PEM text the configuration was built from: two `ProbeTls` are equal when built from
    /// the same Secrets' contents (a rotated certificate makes them differ).
    material: String,
}

impl PartialEq for ProbeTls {
    fn eq(&self, other: &Self) -> bool {
        self.material == other.material
            && self.ca == other.ca
            && self.client_cert == other.client_cert
    }
}

impl Eq for ProbeTls {}

impl fmt::Debug for ProbeTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProbeTls")
            .field("ca", &self.ca)
            .field("client_cert", &self.client_cert)
            .finish_non_exhaustive()
    }
}

/// How the offset probe reaches a broker: TLS and SASL, each optional (both absent: plaintext).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProbeSecurity {
    pub tls: Option<ProbeTls>,
    pub sasl: Option<SaslCredentials>,
}

impl ProbeSecurity {
    /// librdkafka's `security.protocol` for these settings.
    pub fn protocol(&self) -> &'static str {
        match (self.tls.is_some(), self.sasl.is_some()) {
            (false, false) => "PLAINTEXT",
            (true, false) => "SSL",
            (false, true) => "SASL_PLAINTEXT",
            (true, true) => "SASL_SSL",
        }
    }
}

/// Everything the Secrets give: librdkafka properties and the probe's settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnectionSecurity {
    pub properties: BTreeMap<String, String>,
    pub probe: ProbeSecurity,
}

/// The names of the Secrets `tls` and `sasl` refer to (what `k8s::secrets` reads).
pub fn secret_names(tls: Option<&TlsSpec>, sasl: Option<&SaslSpec>) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    if let Some(tls) = tls {
        names.insert(tls.ca_secret_ref.name.clone());
        if let Some(client) = &tls.client_cert_secret_ref {
            names.insert(client.name.clone());
        }
    }
    if let Some(sasl) = sasl {
        names.insert(sasl.secret_ref.name.clone());
    }
    names
}

/// Builds the connection settings of an ObserverSet in `namespace` with these `tls` and `sasl`
/// specs from the contents of the Secrets they name.
pub fn connection_security(
    namespace: &str,
    tls: Option<&TlsSpec>,
    sasl: Option<&SaslSpec>,
    secrets: &SecretContents,
) -> Result<ConnectionSecurity, SecretError> {
    let lookup = Lookup { namespace, secrets };
    let mut properties = BTreeMap::new();
    let mut probe = ProbeSecurity::default();
    if let Some(tls) = tls {
        let (tls_properties, probe_tls) = tls_settings(&lookup, tls)?;
        properties.extend(tls_properties);
        probe.tls = Some(probe_tls);
    }
    if let Some(sasl) = sasl {
        let credentials = sasl_credentials(&lookup, sasl)?;
        properties.insert("sasl.mechanism".into(), sasl.mechanism.as_str().into());
        properties.insert("sasl.username".into(), credentials.username.clone());
        properties.insert("sasl.password".into(), credentials.password.clone());
        probe.sasl = Some(credentials);
    }
    properties.insert("security.protocol".into(), probe.protocol().into());
    Ok(ConnectionSecurity { properties, probe })
}

struct Lookup<'a> {
    namespace: &'a str,
    secrets: &'a SecretContents,
}

impl Lookup<'_> {
    fn location(&self, secret: &str, key: &str) -> SecretKeyLocation {
        SecretKeyLocation {
            namespace: self.namespace.into(),
            secret: secret.into(),
            key: key.into(),
        }
    }

    /// The value of `key` in Secret `secret` as text, not empty.
    fn text(
        &self,
        secret: &str,
        key: &str,
        field: &'static str,
        key_field: &'static str,
        what: &'static str,
    ) -> Result<(String, SecretKeyLocation), SecretError> {
        let data = self
            .secrets
            .get(secret)
            .ok_or_else(|| SecretError::SecretMissing {
                namespace: self.namespace.into(),
                secret: secret.into(),
                field,
            })?;
        let value = data.get(key).ok_or_else(|| SecretError::KeyMissing {
            namespace: self.namespace.into(),
            secret: secret.into(),
            key: key.into(),
            field: key_field,
        })?;
        let location = self.location(secret, key);
        let text = String::from_utf8(value.clone()).map_err(|_| SecretError::NotText {
            location: location.clone(),
            what,
        })?;
        if text.trim().is_empty() {
            return Err(SecretError::Empty { location, what });
        }
        Ok((text, location))
    }
}

/// What is wrong with a PEM text, in words (the parser's own text shows byte arrays).
fn pem_reason(e: &rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error;
    match e {
        Error::MissingSectionEnd { .. } => "a PEM block has no END line".into(),
        Error::IllegalSectionStart { line } => format!(
            "a PEM BEGIN line is malformed: {:?}",
            String::from_utf8_lossy(line)
        ),
        Error::Base64Decode(m) => format!("a PEM block is not valid base64 ({m})"),
        Error::NoItemsFound => "no PEM block of the expected type found".into(),
        other => other.to_string(),
    }
}

fn certificates(
    pem: &str,
    location: &SecretKeyLocation,
    what: &'static str,
) -> Result<Vec<CertificateDer<'static>>, SecretError> {
    let bad = |reason: String| SecretError::BadCertificate {
        location: location.clone(),
        what,
        reason,
    };
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(pem_reason(&e)))?;
    if certs.is_empty() {
        return Err(bad("no -----BEGIN CERTIFICATE----- block found".into()));
    }
    Ok(certs)
}

fn tls_settings(
    lookup: &Lookup<'_>,
    tls: &TlsSpec,
) -> Result<(BTreeMap<String, String>, ProbeTls), SecretError> {
    const CA: &str = "the CA certificate that signed the brokers' certificates";
    let ca_ref = &tls.ca_secret_ref;
    let (ca_pem, ca_location) = lookup.text(
        &ca_ref.name,
        &ca_ref.key,
        "spec.kafka.tls.caSecretRef.name",
        "spec.kafka.tls.caSecretRef.key",
        CA,
    )?;
    let mut roots = RootCertStore::empty();
    for cert in certificates(&ca_pem, &ca_location, CA)? {
        roots.add(cert).map_err(|e| SecretError::BadCertificate {
            location: ca_location.clone(),
            what: CA,
            reason: format!("not usable as a trust anchor ({e})"),
        })?;
    }
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("the ring provider supports the default TLS versions")
            .with_root_certificates(roots);
    // Hostname verification is librdkafka's default; said here so that no default of a later
    // librdkafka can turn it off: credentials go only to a host the CA vouches for *under the
    // name dialled* (tests/integration/secure_automation.rs, the stranger on the network).
    let mut properties = BTreeMap::from([
        ("ssl.ca.pem".to_string(), ca_pem.clone()),
        (
            "ssl.endpoint.identification.algorithm".to_string(),
            "https".to_string(),
        ),
    ]);
    let mut material = ca_pem;
    let (config, client_cert) = match &tls.client_cert_secret_ref {
        None => (builder.with_no_client_auth(), None),
        Some(client) => {
            const CERT: &str = "the client certificate (chain) for mutual TLS";
            let (cert_pem, cert_location) = lookup.text(
                &client.name,
                &client.cert_key,
                "spec.kafka.tls.clientCertSecretRef.name",
                "spec.kafka.tls.clientCertSecretRef.certKey",
                CERT,
            )?;
            let (key_pem, key_location) = lookup.text(
                &client.name,
                &client.key_key,
                "spec.kafka.tls.clientCertSecretRef.name",
                "spec.kafka.tls.clientCertSecretRef.keyKey",
                "the client certificate's private key",
            )?;
            let chain = certificates(&cert_pem, &cert_location, CERT)?;
            let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| {
                SecretError::BadKey {
                    location: key_location.clone(),
                    reason: if key_pem.contains("ENCRYPTED") {
                        "the key is encrypted; store it unencrypted".into()
                    } else {
                        pem_reason(&e)
                    },
                }
            })?;
            let config = builder.with_client_auth_cert(chain, key).map_err(|e| {
                SecretError::ClientIdentity {
                    namespace: lookup.namespace.into(),
                    secret: client.name.clone(),
                    cert_key: client.cert_key.clone(),
                    key_key: client.key_key.clone(),
                    reason: e.to_string(),
                }
            })?;
            properties.insert("ssl.certificate.pem".into(), cert_pem.clone());
            properties.insert("ssl.key.pem".into(), key_pem.clone());
            material.push_str(&cert_pem);
            material.push_str(&key_pem);
            (config, Some(cert_location))
        }
    };
    let probe = ProbeTls {
        config: Arc::new(config),
        ca: ca_location,
        client_cert,
        material,
    };
    Ok((properties, probe))
}

fn sasl_credentials(lookup: &Lookup<'_>, sasl: &SaslSpec) -> Result<SaslCredentials, SecretError> {
    let secret = &sasl.secret_ref;
    let (username, username_location) = lookup.text(
        &secret.name,
        &secret.username_key,
        "spec.kafka.sasl.secretRef.name",
        "spec.kafka.sasl.secretRef.usernameKey",
        "the SASL username",
    )?;
    let (password, password_location) = lookup.text(
        &secret.name,
        &secret.password_key,
        "spec.kafka.sasl.secretRef.name",
        "spec.kafka.sasl.secretRef.passwordKey",
        "the SASL password",
    )?;
    // A value written with `echo` into a file ends in a newline that is not part of the name;
    // a password is taken as stored (spaces may be part of it), but for the final newline.
    Ok(SaslCredentials {
        mechanism: sasl.mechanism,
        username: username.trim().to_string(),
        username_location,
        password: password
            .strip_suffix('\n')
            .map(|p| p.strip_suffix('\r').unwrap_or(p))
            .unwrap_or(&password)
            .to_string(),
        password_location,
    })
}

#[cfg(test)]
pub(crate) mod test_pki {
    //! Certificates made at run time for the TLS tests.

    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};

    pub struct Ca {
        pub pem: String,
        issuer: Issuer<'static, KeyPair>,
    }

    pub struct Leaf {
        pub cert_pem: String,
        pub key_pem: String,
    }

    impl Ca {
        pub fn new(name: &str) -> Ca {
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, name);
            let key = KeyPair::generate().unwrap();
            let cert = params.self_signed(&key).unwrap();
            Ca {
                pem: cert.pem(),
                issuer: Issuer::new(params, key),
            }
        }

        /// A certificate for `names` (DNS names or IP addresses) signed by this CA.
        pub fn leaf(&self, names: &[&str]) -> Leaf {
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            for name in names {
                params.subject_alt_names.push(match name.parse() {
                    Ok(ip) => SanType::IpAddress(ip),
                    Err(_) => SanType::DnsName((*name).try_into().unwrap()),
                });
            }
            params.distinguished_name.push(
                rcgen::DnType::CommonName,
                names.first().copied().unwrap_or("client"),
            );
            let key = KeyPair::generate().unwrap();
            let cert = params.signed_by(&key, &self.issuer).unwrap();
            Leaf {
                cert_pem: cert.pem(),
                key_pem: key.serialize_pem(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_pki::Ca;
    use super::*;
    use crate::crd::{ClientCertSecretRef, SaslSecretRef, SecretKeyRef};

    fn tls_spec(client: bool) -> TlsSpec {
        TlsSpec {
            ca_secret_ref: SecretKeyRef {
                name: "kafka-ca".into(),
                key: "ca.crt".into(),
            },
            client_cert_secret_ref: client.then(|| ClientCertSecretRef {
                name: "kafka-client".into(),
                cert_key: "tls.crt".into(),
                key_key: "tls.key".into(),
            }),
        }
    }

    fn sasl_spec(mechanism: SaslMechanism) -> SaslSpec {
        SaslSpec {
            mechanism,
            secret_ref: SaslSecretRef {
                name: "kafka-user".into(),
                username_key: "username".into(),
                password_key: "password".into(),
            },
        }
    }

    fn secret(entries: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    fn contents() -> SecretContents {
        let ca = Ca::new("test-ca");
        let client = ca.leaf(&["observer-operator"]);
        BTreeMap::from([
            ("kafka-ca".into(), secret(&[("ca.crt", &ca.pem)])),
            (
                "kafka-client".into(),
                secret(&[("tls.crt", &client.cert_pem), ("tls.key", &client.key_pem)]),
            ),
            (
                "kafka-user".into(),
                secret(&[("username", "observer\n"), ("password", "s3cret pass\n")]),
            ),
        ])
    }

    #[test]
    fn no_tls_no_sasl_is_plaintext() {
        let s = connection_security("ns", None, None, &SecretContents::new()).unwrap();
        assert_eq!(s.properties["security.protocol"], "PLAINTEXT");
        assert_eq!(s.properties.len(), 1);
        assert_eq!(s.probe, ProbeSecurity::default());
    }

    #[test]
    fn tls_and_sasl_give_sasl_ssl_properties_and_probe_settings() {
        let secrets = contents();
        let tls = tls_spec(true);
        let sasl = sasl_spec(SaslMechanism::ScramSha512);
        let s = connection_security("ns", Some(&tls), Some(&sasl), &secrets).unwrap();
        let p = &s.properties;
        assert_eq!(p["security.protocol"], "SASL_SSL");
        assert_eq!(p["sasl.mechanism"], "SCRAM-SHA-512");
        assert_eq!(p["sasl.username"], "observer");
        assert_eq!(p["sasl.password"], "s3cret pass");
        assert_eq!(p["ssl.ca.pem"].as_bytes(), secrets["kafka-ca"]["ca.crt"]);
        assert_eq!(p["ssl.endpoint.identification.algorithm"], "https");
        assert_eq!(
            p["ssl.certificate.pem"].as_bytes(),
            secrets["kafka-client"]["tls.crt"]
        );
        assert_eq!(
            p["ssl.key.pem"].as_bytes(),
            secrets["kafka-client"]["tls.key"]
        );
        let probe_tls = s.probe.tls.as_ref().unwrap();
        assert_eq!(probe_tls.ca.to_string(), "Secret ns/kafka-ca key ca.crt");
        assert!(probe_tls.config.client_auth_cert_resolver.has_certs());
        let creds = s.probe.sasl.as_ref().unwrap();
        assert_eq!(creds.mechanism, SaslMechanism::ScramSha512);
        assert_eq!(creds.password, "s3cret pass");
        assert!(!format!("{creds:?}").contains("s3cret"));
        assert_eq!(
            secret_names(Some(&tls), Some(&sasl)),
            BTreeSet::from([
                "kafka-ca".into(),
                "kafka-client".into(),
                "kafka-user".into()
            ])
        );
    }

    #[test]
    fn protocol_follows_what_is_configured() {
        let secrets = contents();
        let tls_only = connection_security("ns", Some(&tls_spec(false)), None, &secrets).unwrap();
        assert_eq!(tls_only.properties["security.protocol"], "SSL");
        assert!(!tls_only.properties.contains_key("ssl.key.pem"));
        assert!(!tls_only
            .probe
            .tls
            .unwrap()
            .config
            .client_auth_cert_resolver
            .has_certs());
        let sasl_only =
            connection_security("ns", None, Some(&sasl_spec(SaslMechanism::Plain)), &secrets)
                .unwrap();
        assert_eq!(sasl_only.properties["security.protocol"], "SASL_PLAINTEXT");
        assert_eq!(sasl_only.properties["sasl.mechanism"], "PLAIN");
        assert!(sasl_only.probe.tls.is_none());
    }

    #[test]
    fn same_contents_compare_equal_and_a_rotated_password_does_not() {
        let secrets = contents();
        let tls = tls_spec(true);
        let sasl = sasl_spec(SaslMechanism::ScramSha256);
        let a = connection_security("ns", Some(&tls), Some(&sasl), &secrets).unwrap();
        let b = connection_security("ns", Some(&tls), Some(&sasl), &secrets).unwrap();
        assert_eq!(a, b);
        let mut rotated = secrets.clone();
        rotated
            .get_mut("kafka-user")
            .unwrap()
            .insert("password".into(), b"new".to_vec());
        let c = connection_security("ns", Some(&tls), Some(&sasl), &rotated).unwrap();
        assert_ne!(a, c);
        let mut new_ca = secrets;
        new_ca
            .get_mut("kafka-ca")
            .unwrap()
            .insert("ca.crt".into(), Ca::new("other").pem.into_bytes());
        let d = connection_security("ns", Some(&tls), Some(&sasl), &new_ca).unwrap();
        assert_ne!(a.probe.tls, d.probe.tls);
    }

    fn error(secrets: &SecretContents, tls: Option<&TlsSpec>, sasl: Option<&SaslSpec>) -> String {
        connection_security("team-a", tls, sasl, secrets)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_missing_secret_is_named_with_the_field_that_names_it() {
        let mut secrets = contents();
        secrets.remove("kafka-client");
        let msg = error(&secrets, Some(&tls_spec(true)), None);
        assert!(msg.contains("Secret team-a/kafka-client"), "{msg}");
        assert!(msg.contains("does not exist"), "{msg}");
        assert!(
            msg.contains("spec.kafka.tls.clientCertSecretRef.name"),
            "{msg}"
        );
        secrets.remove("kafka-user");
        let msg = error(&secrets, None, Some(&sasl_spec(SaslMechanism::Plain)));
        assert!(msg.contains("Secret team-a/kafka-user"), "{msg}");
    }

    #[test]
    fn a_missing_key_is_named_and_the_keys_present_are_not() {
        let mut secrets = contents();
        let user = secrets.get_mut("kafka-user").unwrap();
        user.remove("password");
        user.insert("other-teams-token".into(), b"s3cr3t-value".to_vec());
        let msg = error(&secrets, None, Some(&sasl_spec(SaslMechanism::Plain)));
        assert!(
            msg.contains("Secret team-a/kafka-user has no key password"),
            "{msg}"
        );
        assert!(
            msg.contains("spec.kafka.sasl.secretRef.passwordKey"),
            "{msg}"
        );
        // Neither the other keys' names nor any value.
        for leak in ["username", "other-teams-token", "s3cr3t-value"] {
            assert!(!msg.contains(leak), "{leak} in {msg}");
        }
        secrets.get_mut("kafka-ca").unwrap().clear();
        let msg = error(&secrets, Some(&tls_spec(false)), None);
        assert!(msg.contains("has no key ca.crt"), "{msg}");
    }

    #[test]
    fn unparsable_certificates_and_keys_are_named() {
        let base = contents();
        let mut secrets = base.clone();
        secrets
            .get_mut("kafka-ca")
            .unwrap()
            .insert("ca.crt".into(), b"not a certificate".to_vec());
        let msg = error(&secrets, Some(&tls_spec(false)), None);
        assert!(msg.contains("Secret team-a/kafka-ca key ca.crt"), "{msg}");
        assert!(
            msg.contains("no -----BEGIN CERTIFICATE----- block"),
            "{msg}"
        );

        // A certificate block whose content is garbage.
        let mut secrets = base.clone();
        secrets.get_mut("kafka-ca").unwrap().insert(
            "ca.crt".into(),
            b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".to_vec(),
        );
        let msg = error(&secrets, Some(&tls_spec(false)), None);
        assert!(msg.contains("Secret team-a/kafka-ca key ca.crt"), "{msg}");
        assert!(msg.contains("trust anchor"), "{msg}");

        let mut secrets = base.clone();
        secrets
            .get_mut("kafka-client")
            .unwrap()
            .insert("tls.key".into(), b"-----BEGIN CERTIFICATE-----\n".to_vec());
        let msg = error(&secrets, Some(&tls_spec(true)), None);
        assert!(
            msg.contains("Secret team-a/kafka-client key tls.key"),
            "{msg}"
        );
        assert!(msg.contains("a PEM block has no END line"), "{msg}");

        let mut secrets = base.clone();
        secrets.get_mut("kafka-client").unwrap().insert(
            "tls.key".into(),
            b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n"
                .to_vec(),
        );
        let msg = error(&secrets, Some(&tls_spec(true)), None);
        assert!(msg.contains("encrypted"), "{msg}");

        let mut secrets = base.clone();
        secrets
            .get_mut("kafka-client")
            .unwrap()
            .insert("tls.crt".into(), vec![0xff, 0xfe]);
        let msg = error(&secrets, Some(&tls_spec(true)), None);
        assert!(
            msg.contains("Secret team-a/kafka-client key tls.crt is not UTF-8"),
            "{msg}"
        );

        let mut secrets = base;
        secrets
            .get_mut("kafka-user")
            .unwrap()
            .insert("username".into(), b" \n".to_vec());
        let msg = error(&secrets, None, Some(&sasl_spec(SaslMechanism::Plain)));
        assert!(
            msg.contains("Secret team-a/kafka-user key username is empty"),
            "{msg}"
        );
    }

    #[test]
    fn a_key_that_does_not_belong_to_the_certificate_is_refused() {
        let mut secrets = contents();
        let other = Ca::new("x").leaf(&["other"]);
        secrets
            .get_mut("kafka-client")
            .unwrap()
            .insert("tls.key".into(), other.key_pem.into_bytes());
        let msg = error(&secrets, Some(&tls_spec(true)), None);
        assert!(
            msg.contains("Secret team-a/kafka-client key tls.crt"),
            "{msg}"
        );
        assert!(msg.contains("private key in key tls.key"), "{msg}");
    }
}
