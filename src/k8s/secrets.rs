//! Reads the Secrets an ObserverSet names in `spec.kafka.tls` and `spec.kafka.sasl`, in the
//! ObserverSet's own namespace only, and hands their data to `kafka::security`, which turns it
//! into connection settings. Thin: first each named Secret's metadata, checked against its opt-in
//! annotation (`kafka::secret_opt_in`), so the data of a Secret that has not opted in to the set
//! is never fetched; then one GET per named Secret. A Secret that does not exist is left out, and
//! `kafka::security` reports it with the spec field that names it.

use kube::api::Api;
use kube::Client;

use k8s_openapi::api::core::v1::Secret;

use crate::crd::{KafkaConnection, ValidatedKafka};
use crate::kafka::secret_opt_in;
use crate::kafka::security::{
    connection_security, secret_names, ConnectionSecurity, SecretContents, SecretError,
};
use crate::kafka::ConnectionSettings;

/// The data of the Secrets `kafka` names, read in `namespace` for ObserverSet `observer_set` (the
/// set's own namespace and name). Every Secret must have opted in to the set
/// ([`secret_opt_in::ANNOTATION`]): one that has not is the error, before any Secret's data is read.
pub async fn read_secrets(
    client: &Client,
    namespace: &str,
    observer_set: &str,
    kafka: &KafkaConnection,
) -> Result<SecretContents, SecretError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let read_error = |name: &str| {
        let name = name.to_string();
        move |source| SecretError::Read {
            namespace: namespace.into(),
            secret: name,
            source: Box::new(source),
        }
    };
    let names = secret_names(kafka.tls.as_ref(), kafka.sasl.as_ref());
    for name in &names {
        let meta = api.get_metadata_opt(name).await.map_err(read_error(name))?;
        if let Some(meta) = meta {
            secret_opt_in::require(
                namespace,
                name,
                observer_set,
                meta.metadata.annotations.as_ref(),
            )?;
        }
    }
    let mut contents = SecretContents::new();
    for name in names {
        let secret = api.get_opt(&name).await.map_err(read_error(&name))?;
        if let Some(secret) = secret {
            // Again on the object whose data is used: the annotation may have gone since.
            secret_opt_in::require(
                namespace,
                &name,
                observer_set,
                secret.metadata.annotations.as_ref(),
            )?;
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

/// The connection settings of ObserverSet `observer_set` in `namespace` with this `spec.kafka`:
/// its Secrets read and checked (a Secret that has not opted in to the set, a missing Secret or
/// key, or a bad certificate, is the typed error).
pub async fn read_connection_security(
    client: &Client,
    namespace: &str,
    observer_set: &str,
    kafka: &KafkaConnection,
) -> Result<ConnectionSecurity, SecretError> {
    let contents = read_secrets(client, namespace, observer_set, kafka).await?;
    connection_security(
        namespace,
        kafka.tls.as_ref(),
        kafka.sasl.as_ref(),
        &contents,
    )
}

/// How the operator and `kubectl observer` reach an ObserverSet's cluster: plaintext to the
/// validated bootstrap servers, or with TLS/SASL from the Secrets `kafka` names, read in
/// `namespace` (the set's) with `client`'s credentials, each only if it opted in to the set
/// `observer_set`.
pub async fn connection_settings(
    client: &Client,
    namespace: &str,
    observer_set: &str,
    kafka: &KafkaConnection,
    validated: &ValidatedKafka,
) -> Result<ConnectionSettings, SecretError> {
    let plaintext = ConnectionSettings::plaintext(validated.bootstrap_servers.iter().cloned());
    if validated.tls.is_none() && validated.sasl.is_none() {
        return Ok(plaintext);
    }
    let security = read_connection_security(client, namespace, observer_set, kafka).await?;
    Ok(plaintext.with_security(security))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::crd::{SaslMechanism, SaslSecretRef, SaslSpec};
    use http::{Request, Response, StatusCode};
    use kube::client::Body;

    /// What the fake API server was asked: the path, and whether for the metadata only.
    type Asked = Arc<Mutex<Vec<(String, bool)>>>;

    fn not_found() -> (StatusCode, serde_json::Value) {
        (
            StatusCode::NOT_FOUND,
            serde_json::json!({
                "apiVersion": "v1", "kind": "Status", "status": "Failure",
                "message": "not found", "reason": "NotFound", "code": 404,
            }),
        )
    }

    /// A fake API server with Secrets in namespace `team-a` holding "alice" and "hunter2":
    /// `user` opted in to ObserverSet `orders`, `unannotated` without the annotation, `flips`
    /// annotated in its metadata read and no longer in its full read; `forbidden` is 403,
    /// everything else 404. A metadata read (kube's `get_metadata`) gets PartialObjectMetadata.
    fn client(asked: Asked) -> Client {
        let service = tower::service_fn(move |request: Request<Body>| {
            let path = request.uri().path().to_string();
            let metadata_only = request
                .headers()
                .get(http::header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.contains("as=PartialObjectMetadata"));
            asked.lock().unwrap().push((path.clone(), metadata_only));
            async move {
                let name = path.strip_prefix("/api/v1/namespaces/team-a/secrets/");
                let opted_in =
                    serde_json::json!({"kafkaobserver.io/observer-sets": "audit, orders"});
                let annotations = match name {
                    Some("user") => Some(opted_in),
                    Some("flips") if metadata_only => Some(opted_in),
                    Some("unannotated" | "flips") => Some(serde_json::json!({})),
                    _ => None,
                };
                let (status, body) = match (name, annotations) {
                    (Some("forbidden"), _) => (
                        StatusCode::FORBIDDEN,
                        serde_json::json!({
                            "apiVersion": "v1", "kind": "Status", "status": "Failure",
                            "message": "secrets \"forbidden\" is forbidden", "reason": "Forbidden",
                            "code": 403,
                        }),
                    ),
                    (Some(name), Some(annotations)) if metadata_only => (
                        StatusCode::OK,
                        serde_json::json!({
                            "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                            "metadata": {"name": name, "namespace": "team-a", "annotations": annotations},
                        }),
                    ),
                    (Some(name), Some(annotations)) => (
                        StatusCode::OK,
                        serde_json::json!({
                            "apiVersion": "v1", "kind": "Secret",
                            "metadata": {"name": name, "namespace": "team-a", "annotations": annotations},
                            // "alice" and "hunter2", base64.
                            "data": {"username": "YWxpY2U=", "password": "aHVudGVyMg=="},
                        }),
                    ),
                    _ => not_found(),
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

    fn path(name: &str, metadata_only: bool) -> (String, bool) {
        (
            format!("/api/v1/namespaces/team-a/secrets/{name}"),
            metadata_only,
        )
    }

    #[tokio::test]
    async fn reads_the_named_secret_in_the_objects_namespace_only() {
        let asked = Asked::default();
        let security = read_connection_security(
            &client(Arc::clone(&asked)),
            "team-a",
            "orders",
            &kafka("user"),
        )
        .await
        .unwrap();
        assert_eq!(security.properties["sasl.username"], "alice");
        assert_eq!(security.properties["sasl.password"], "hunter2");
        assert_eq!(
            *asked.lock().unwrap(),
            [path("user", true), path("user", false)]
        );
    }

    /// The message every refusal must keep clean of: the Secret's values and key names.
    fn assert_no_secret_content(msg: &str) {
        for leak in [
            "alice",
            "hunter2",
            "YWxpY2U=",
            "aHVudGVyMg==",
            "username",
            "password",
        ] {
            assert!(!msg.contains(leak), "{leak} in {msg}");
        }
    }

    #[tokio::test]
    async fn a_secret_that_has_not_opted_in_is_refused_before_its_data_is_read() {
        for (secret, set) in [("unannotated", "orders"), ("user", "payments")] {
            let asked = Asked::default();
            let err = read_connection_security(
                &client(Arc::clone(&asked)),
                "team-a",
                set,
                &kafka(secret),
            )
            .await
            .unwrap_err();
            assert!(
                matches!(&err, SecretError::NotOptedIn { secret: s, observer_set, .. } if s == secret && observer_set == set),
                "{err}"
            );
            let msg = err.to_string();
            assert!(msg.contains(&format!("Secret team-a/{secret}")), "{msg}");
            assert!(msg.contains("kafkaobserver.io/observer-sets"), "{msg}");
            assert_no_secret_content(&msg);
            assert_eq!(
                *asked.lock().unwrap(),
                [path(secret, true)],
                "only the metadata is read"
            );
        }
    }

    #[tokio::test]
    async fn the_opt_in_is_checked_again_on_the_object_whose_data_is_used() {
        let asked = Asked::default();
        let err = read_connection_security(&client(asked), "team-a", "orders", &kafka("flips"))
            .await
            .unwrap_err();
        assert!(matches!(err, SecretError::NotOptedIn { .. }), "{err}");
        assert_no_secret_content(&err.to_string());
    }

    #[tokio::test]
    async fn a_missing_secret_is_the_typed_error() {
        let asked = Asked::default();
        let err = read_connection_security(&client(asked), "team-b", "orders", &kafka("user"))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, SecretError::SecretMissing { secret, namespace, .. } if secret == "user" && namespace == "team-b"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_refused_read_names_the_secret() {
        let asked = Asked::default();
        let err = read_connection_security(&client(asked), "team-a", "orders", &kafka("forbidden"))
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
