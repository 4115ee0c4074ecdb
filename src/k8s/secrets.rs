//! Reads the Secrets an ObserverSet names in `spec.kafka.tls` and `spec.kafka.sasl`, in the
//! ObserverSet's own namespace only, and hands their data to `kafka::security`, which turns it
//! into connection settings. Thin: one GET per named Secret; a Secret that does not exist is
//! left out, and `kafka::security` reports it with the spec field that names it.

use kube::api::Api;
use kube::Client;

use k8s_openapi::api::core::v1::Secret;

use crate::crd::{KafkaConnection, ValidatedKafka};
use crate::kafka::security::{
    connection_security, secret_names, ConnectionSecurity, SecretContents, SecretError,
};
use crate::kafka::ConnectionSettings;

/// The data of the Secrets `kafka` names, read in `namespace` (the ObserverSet's).
pub async fn read_secrets(
    client: &Client,
    namespace: &str,
    kafka: &KafkaConnection,
) -> Result<SecretContents, SecretError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let mut contents = SecretContents::new();
    for name in secret_names(kafka.tls.as_ref(), kafka.sasl.as_ref()) {
        let secret = api
            .get_opt(&name)
            .await
            .map_err(|source| SecretError::Read {
                namespace: namespace.into(),
                secret: name.clone(),
                source: Box::new(source),
            })?;
        if let Some(secret) = secret {
            let data = secret
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(key, value)| (key, value.0))
                .collect();
            contents.insert(name, data);
        }
    }
    Ok(contents)
}

/// The connection settings of an ObserverSet in `namespace` with this `spec.kafka`: its
/// Secrets read and checked (a missing Secret or key, or a bad certificate, is the typed error).
pub async fn read_connection_security(
    client: &Client,
    namespace: &str,
    kafka: &KafkaConnection,
) -> Result<ConnectionSecurity, SecretError> {
    let contents = read_secrets(client, namespace, kafka).await?;
    connection_security(
        namespace,
        kafka.tls.as_ref(),
        kafka.sasl.as_ref(),
        &contents,
    )
}

/// How the operator and `kubectl observer` reach an ObserverSet's cluster: plaintext to the
/// validated bootstrap servers, or with TLS/SASL from the Secrets `kafka` names, read in
/// `namespace` (the set's) with `client`'s credentials.
pub async fn connection_settings(
    client: &Client,
    namespace: &str,
    kafka: &KafkaConnection,
    validated: &ValidatedKafka,
) -> Result<ConnectionSettings, SecretError> {
    let plaintext = ConnectionSettings::plaintext(validated.bootstrap_servers.iter().cloned());
    if validated.tls.is_none() && validated.sasl.is_none() {
        return Ok(plaintext);
    }
    let security = read_connection_security(client, namespace, kafka).await?;
    Ok(plaintext.with_security(security))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::crd::{SaslMechanism, SaslSecretRef, SaslSpec};
    use http::{Request, Response, StatusCode};
    use kube::client::Body;

    /// A fake API server: the Secret `user` in namespace `team-a` exists, everything else is
    /// 404 (403 for Secret `forbidden`). Records the paths asked for.
    fn client(paths: Arc<Mutex<Vec<String>>>) -> Client {
        let service = tower::service_fn(move |request: Request<Body>| {
            let path = request.uri().path().to_string();
            paths.lock().unwrap().push(path.clone());
            async move {
                let (status, body) = match path.as_str() {
                    "/api/v1/namespaces/team-a/secrets/user" => (
                        StatusCode::OK,
                        serde_json::json!({
                            "apiVersion": "v1", "kind": "Secret",
                            "metadata": {"name": "user", "namespace": "team-a"},
                            // "alice" and "hunter2", base64.
                            "data": {"username": "YWxpY2U=", "password": "aHVudGVyMg=="},
                        }),
                    ),
                    "/api/v1/namespaces/team-a/secrets/forbidden" => (
                        StatusCode::FORBIDDEN,
                        serde_json::json!({
                            "apiVersion": "v1", "kind": "Status", "status": "Failure",
                            "message": "secrets \"forbidden\" is forbidden", "reason": "Forbidden",
                            "code": 403,
                        }),
                    ),
                    _ => (
                        StatusCode::NOT_FOUND,
                        serde_json::json!({
                            "apiVersion": "v1", "kind": "Status", "status": "Failure",
                            "message": "not found", "reason": "NotFound", "code": 404,
                        }),
                    ),
                };
                Response::builder()
                    .status(status)
                    .body(Body::from(serde_json::to_vec(&body).unwrap()))
                    .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
            }
        });
        Client::new(service, "default")
    }

    fn kafka(secret: &str) -> KafkaConnection {
        KafkaConnection {
            bootstrap_servers: "k:9092".into(),
            tls: None,
            sasl: Some(SaslSpec {
                mechanism: SaslMechanism::ScramSha256,
                secret_ref: SaslSecretRef {
                    name: secret.into(),
                    username_key: "username".into(),
                    password_key: "password".into(),
                },
            }),
        }
    }

    #[tokio::test]
    async fn reads_the_named_secret_in_the_objects_namespace_only() {
        let paths = Arc::default();
        let security =
            read_connection_security(&client(Arc::clone(&paths)), "team-a", &kafka("user"))
                .await
                .unwrap();
        assert_eq!(security.properties["sasl.username"], "alice");
        assert_eq!(security.properties["sasl.password"], "hunter2");
        assert_eq!(
            *paths.lock().unwrap(),
            ["/api/v1/namespaces/team-a/secrets/user"]
        );
    }

    #[tokio::test]
    async fn a_missing_secret_is_the_typed_error() {
        let paths = Arc::default();
        let err = read_connection_security(&client(paths), "team-b", &kafka("user"))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, SecretError::SecretMissing { secret, namespace, .. } if secret == "user" && namespace == "team-b"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_refused_read_names_the_secret() {
        let paths = Arc::default();
        let err = read_connection_security(&client(paths), "team-a", &kafka("forbidden"))
            .await
            .unwrap_err();
        assert!(matches!(err, SecretError::Read { .. }), "{err}");
        assert!(
            err.to_string()
                .contains("cannot read Secret team-a/forbidden"),
            "{err}"
        );
    }
}
