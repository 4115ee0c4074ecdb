//! The bed's operator (the binary of this build, with the chart's ServiceAccount under
//! e2e/integration.sh) automating an ObserverSet whose Kafka is reached only over SASL_SSL
//! (SCRAM-SHA-512), with the CA and the user's credentials in Secrets of the set's namespace:
//! the Kafka of `secure_kafka` (a single-node KRaft Kafka as a local process on 127.0.0.1, which
//! the operator, itself a local process, reaches).
//!
//! What the operator must show in `KafkaReachable`, without a restart between the steps:
//! 1. the right Secrets: True, reason `Scanned` (the scan went over SASL_SSL);
//! 2. the password in the Secret changed to a wrong one: False, `ScanFailed`, the message naming
//!    the Secret and the key (through the probe's diagnosis) and a Warning Event;
//! 3. the right password back (a rotation): True again, the log saying it reconnected;
//! 4. the password key removed: False, `SecretInvalid`, naming the Secret and the missing key
//!    and not the keys it has;
//! 5. the right data again but the Secret's opt-in annotation (`kafkaobserver.io/observer-sets`)
//!    removed, then naming another set: False, `SecretInvalid`, the message and the Warning Event
//!    naming the Secret and the annotation to add, and no username or password anywhere.
//!
//! The Secrets opt in as a user's would: `kafka-ca` to every set of the namespace (`*`),
//! `kafka-user` to this set by name.
//!
//! Owns its state: a fresh namespace with the Secrets and a pod-less ObserverSet (policy
//! UnderMinIsr in dry run: the scans run, nothing is ever promoted), deleted at the end, and its
//! own Kafka. Skips like `secure_kafka` without the cached Kafka distribution.

use std::net::Ipv4Addr;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::ByteString;
use kafka_observer_operator::crd::ObserverSet;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::Api;
use rcgen::SanType;
use serde_json::json;

use crate::credential_recorder::Recorder;
use crate::secure_kafka::{kafka_lib_or_skip, Ca, Kafka, PASSWORD, USER};
use crate::support::{bed, create_observer_set, status_of, wait_for, Bed};

const T: Duration = Duration::from_secs(60);
const SET: &str = "secure";
/// The annotation by which a Secret lets ObserverSets use it (`kafka::secret_opt_in`).
const OPT_IN: &str = "kafkaobserver.io/observer-sets";

/// The `KafkaReachable` condition of the set: (status, reason, message).
async fn reachable(sets: &Api<ObserverSet>) -> Option<(String, String, String)> {
    let status = status_of(sets, SET).await;
    let c = status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "KafkaReachable")?
        .clone();
    let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    Some((text("status"), text("reason"), text("message")))
}

async fn wait_reachable(sets: &Api<ObserverSet>, status: &str, reason: &str) -> String {
    wait_for(
        T,
        &format!("KafkaReachable {status} ({reason})"),
        || async {
            reachable(sets)
                .await
                .filter(|(s, r, _)| s == status && r == reason)
                .map(|(_, _, message)| message)
        },
    )
    .await
}

/// Secret `kafka-user` holds exactly `data` afterwards (created, or replaced whole), opted in to
/// the sets `opt_in` names (no annotation when `None`).
async fn set_user_secret(secrets: &Api<Secret>, data: &[(&str, &str)], opt_in: Option<&str>) {
    let mut secret = Secret {
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Secret::default()
    };
    secret.metadata.name = Some("kafka-user".into());
    secret.metadata.annotations =
        opt_in.map(|sets| [(OPT_IN.to_string(), sets.to_string())].into());
    match secrets
        .get_opt("kafka-user")
        .await
        .expect("read Secret kafka-user")
    {
        Some(current) => {
            secret.metadata.resource_version = current.metadata.resource_version;
            secrets
                .replace("kafka-user", &PostParams::default(), &secret)
                .await
                .expect("replace Secret kafka-user");
        }
        None => {
            secrets
                .create(&PostParams::default(), &secret)
                .await
                .expect("create Secret kafka-user");
        }
    }
}

/// Secret `kafka-ca` (the CA's certificate, opted in to every set of the namespace) and
/// `kafka-user` (the right credentials, opted in to this set).
async fn create_secrets(secrets: &Api<Secret>, ca: &Ca) {
    let ca_secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "kafka-ca", "annotations": {OPT_IN: "*"}},
        "stringData": {"ca.crt": ca.pem}
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &ca_secret)
        .await
        .expect("create Secret kafka-ca");
    set_user_secret(
        secrets,
        &[("username", USER), ("password", PASSWORD)],
        Some(SET),
    )
    .await;
}

/// The pod-less set, dry run, reaching `bootstrap` over SASL_SSL (SCRAM-SHA-512) with the
/// Secrets of `create_secrets`.
fn sasl_ssl_set(bed: &Bed, bootstrap: &str) -> serde_json::Value {
    let mut body = bed.podless_observer_set(SET, &[2], &[]);
    body["spec"]["kafka"] = json!({
        "bootstrapServers": bootstrap,
        "tls": {"caSecretRef": {"name": "kafka-ca", "key": "ca.crt"}},
        "sasl": {"mechanism": "SCRAM-SHA-512", "secretRef": {"name": "kafka-user"}}
    });
    body["spec"]["promotion"] =
        json!({"policy": "UnderMinIsr", "dryRun": true, "scanInterval": "1s"});
    body
}

/// 127.0.0.1, the address both tests' Kafka and strangers listen on, as a subjectAltName.
fn loopback() -> SanType {
    SanType::IpAddress(Ipv4Addr::LOCALHOST.into())
}

/// What both tests start from: the bed's operator up, a Kafka of their own whose SASL_SSL
/// certificate `ca` issued for 127.0.0.1, and a fresh namespace with the Secrets of
/// [`create_secrets`].
struct Secured {
    bed: Bed,
    kafka: Kafka,
    ca: Ca,
    ns: String,
    secrets: Api<Secret>,
    sets: Api<ObserverSet>,
}

/// `None`: skipped (no bed, or no cached Kafka distribution).
async fn secured(ca_name: &str, namespace: &str) -> Option<Secured> {
    let bed = bed().await?;
    let lib = kafka_lib_or_skip("secure_automation")?;
    let ca = Ca::new(ca_name);
    let kafka = Kafka::start(&lib, &ca, &ca.leaf("localhost", &[loopback()]));
    bed.operator("up");
    let ns = bed.namespace(namespace).await;
    let secrets = Api::namespaced(bed.client.clone(), &ns);
    create_secrets(&secrets, &ca).await;
    let sets = bed.observer_sets(&ns);
    Some(Secured {
        bed,
        kafka,
        ca,
        ns,
        secrets,
        sets,
    })
}

/// The set's `bootstrapServers` changed to `address`, as its author would change it.
async fn point_at(sets: &Api<ObserverSet>, address: &str) {
    let patch = json!({"spec": {"kafka": {"bootstrapServers": address}}});
    sets.patch(SET, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch the set's bootstrapServers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_scans_over_sasl_ssl_with_the_sets_secrets_and_names_what_to_fix() {
    let Some(Secured {
        bed,
        kafka,
        ns,
        secrets,
        sets,
        ..
    }) = secured("koo-secure-automation-ca", "secure").await
    else {
        return;
    };
    create_observer_set(&sets, sasl_ssl_set(&bed, &kafka.address(kafka.sasl_ssl))).await;

    // 1. Scanned over SASL_SSL with the Secrets.
    let message = wait_reachable(&sets, "True", "Scanned").await;
    eprintln!("1. right Secrets: {message}");

    // 2. A wrong password: the scan fails and says which Secret and key.
    set_user_secret(
        &secrets,
        &[("username", USER), ("password", "not-the-password")],
        Some(SET),
    )
    .await;
    let message = wait_reachable(&sets, "False", "ScanFailed").await;
    eprintln!("2. wrong password: {message}");
    assert!(
        message.contains("SASL authentication failed")
            && message.contains(&format!("Secret {ns}/kafka-user key password")),
        "the condition must name the user's Secret and key: {message}"
    );
    let events: Api<Event> = Api::namespaced(bed.client.clone(), &ns);
    let note = wait_for(T, "a Warning Event about the failed scan", || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find_map(|e| {
            let note = e.note.unwrap_or_default();
            (e.type_.as_deref() == Some("Warning") && note.contains("kafka-user key password"))
                .then_some(note)
        })
    })
    .await;
    eprintln!("2. Event: {note}");

    // 3. The right password back: picked up by the running operator at its next scan.
    set_user_secret(
        &secrets,
        &[("username", USER), ("password", PASSWORD)],
        Some(SET),
    )
    .await;
    let message = wait_reachable(&sets, "True", "Scanned").await;
    eprintln!("3. rotated back: {message}");
    assert!(
        bed.log_tail(400).contains("connection settings changed"),
        "the operator must log that it reconnected with the new Secret contents"
    );

    // 4. The password key gone: no scan, the condition names the Secret and the key.
    set_user_secret(&secrets, &[("username", USER)], Some(SET)).await;
    let message = wait_reachable(&sets, "False", "SecretInvalid").await;
    eprintln!("4. key removed: {message}");
    assert!(
        message.contains(&format!("Secret {ns}/kafka-user has no key password")),
        "the condition must name the Secret and the missing key: {message}"
    );
    assert!(
        !message.contains("username"),
        "the keys the Secret has are not listed: {message}"
    );

    // 5. The Secret no longer opted in to the set: refused before its data is read, the
    // message saying which annotation to add and showing no credential.
    for (opt_in, why) in [
        (None, format!("has no annotation {OPT_IN}")),
        (
            Some("other-set"),
            format!("does not name it in its annotation {OPT_IN}"),
        ),
    ] {
        set_user_secret(
            &secrets,
            &[("username", USER), ("password", PASSWORD)],
            opt_in,
        )
        .await;
        let message = wait_for(T, &format!("KafkaReachable False: {why}"), || async {
            reachable(&sets)
                .await
                .filter(|(s, r, m)| s == "False" && r == "SecretInvalid" && m.contains(&why))
                .map(|(_, _, message)| message)
        })
        .await;
        eprintln!("5. not opted in ({opt_in:?}): {message}");
        assert!(
            message.contains(&format!(
                "Secret {ns}/kafka-user {why}, so ObserverSet {SET} may not use it"
            )) && message.contains(&format!("{OPT_IN}={SET}")),
            "the condition must name the Secret, the set and the annotation to add: {message}"
        );
        for shown in [USER, PASSWORD, "username", "password", "other-set"] {
            assert!(
                !message.contains(shown),
                "the condition shows {shown:?}: {message}"
            );
        }
    }
    let notes: Vec<String> = events
        .list(&ListParams::default())
        .await
        .expect("list Events")
        .items
        .into_iter()
        .filter_map(|e| e.note)
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains(OPT_IN) && n.contains("kafka-user")),
        "a Warning Event names the Secret and the annotation: {notes:?}"
    );
    for note in &notes {
        for shown in [USER, PASSWORD] {
            assert!(!note.contains(shown), "an Event shows {shown:?}: {note}");
        }
    }
    let status = status_of(&sets, SET).await;
    assert!(
        status["autoPromotions"]
            .as_array()
            .is_none_or(|a| a.is_empty()),
        "dry run: nothing promoted: {status}"
    );
    bed.drop_namespace(&ns).await;
    drop(kafka);
}

/// Credentials travel only to a host the set's CA vouches for under the name the set dials: the
/// author of an ObserverSet chooses `bootstrapServers`, so a set pointed at a stranger must not
/// hand it the Secret's user name or password (SCRAM sends the name in its first message; PLAIN
/// sends both). The stranger is a `Recorder` on 127.0.0.1 that records every byte it receives;
/// the operator (both its Kafka clients: librdkafka and the offset probe) dials it in turn with
///
/// 1. a certificate from a CA the set does not trust,
/// 2. a certificate from the set's CA, but for another host's name,
///
/// and each time: `KafkaReachable` False with the operator's diagnosis naming the stranger's
/// address, at least two connections made (the sample is not empty), no TLS handshake
/// completed, and neither the user name nor the password anywhere in the bytes received, nor in
/// the condition. Then the control: 3. a certificate from the set's CA
/// for 127.0.0.1, relayed to the real Kafka: `KafkaReachable` True and the user name in what the
/// recorder decrypted, so the checks above would have seen a credential had one been sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_go_only_to_a_host_the_sets_ca_vouches_for() {
    let Some(Secured {
        bed,
        kafka,
        ca,
        ns,
        sets,
        ..
    }) = secured("koo-credential-travel-ca", "credential-travel").await
    else {
        return;
    };
    let upstream = kafka.address(kafka.sasl_ssl);
    let stranger_ca = Ca::new("koo-stranger-ca");
    let elsewhere = "kafka.elsewhere.example";
    // (the case, the stranger's certificate, what the operator must say is wrong with it)
    let strangers = [
        (
            "1. a certificate from a CA the set does not trust",
            stranger_ca.leaf("localhost", &[loopback()]),
            "the broker's certificate is not trusted by the CA in Secret",
        ),
        (
            "2. the set's CA, another host's name",
            ca.leaf(
                elsewhere,
                &[SanType::DnsName(elsewhere.try_into().unwrap())],
            ),
            "the broker's certificate does not name host 127.0.0.1",
        ),
    ];
    for (i, (case, leaf, diagnosis)) in strangers.iter().enumerate() {
        let recorder = Recorder::start(leaf, upstream.clone(), &ca.pem).await;
        if i == 0 {
            create_observer_set(&sets, sasl_ssl_set(&bed, &recorder.address)).await;
        } else {
            point_at(&sets, &recorder.address).await;
        }
        // Until the condition is this stranger's (the operator's diagnosis names the address it
        // dialled, not the case before's), or a client of the operator accepted the stranger.
        let named = format!(
            "TLS with bootstrap server {} failed: {diagnosis}",
            recorder.address
        );
        let message = wait_for(
            T,
            &format!("{case}: KafkaReachable False: {named}"),
            || async {
                if recorder.seen().handshakes > 0 {
                    return Some(String::new());
                }
                reachable(&sets)
                    .await
                    .filter(|(s, r, m)| s == "False" && r == "ScanFailed" && m.contains(&named))
                    .map(|(_, _, message)| message)
            },
        )
        .await;
        let seen = recorder.seen();
        eprintln!(
            "{case}: {} connections, {} handshakes, {} bytes received; KafkaReachable: {message}",
            seen.connections,
            seen.handshakes,
            seen.raw.len()
        );
        assert_eq!(
            seen.handshakes,
            0,
            "{case}: the operator completed TLS with the stranger (then sent it {} bytes)",
            seen.plaintext.len()
        );
        // Both clients dialled it (librdkafka, then the probe for its diagnosis).
        assert!(
            seen.connections >= 2 && !seen.raw.is_empty(),
            "{case}: the stranger was not dialled twice: {} connections",
            seen.connections
        );
        assert!(
            seen.plaintext.is_empty(),
            "{case}: bytes were sent inside TLS"
        );
        for credential in [USER, PASSWORD] {
            assert!(
                !seen.holds(credential),
                "{case}: the stranger received {credential:?}"
            );
            assert!(
                !message.contains(credential),
                "{case}: the condition shows {credential:?}: {message}"
            );
        }
    }

    let control = Recorder::start(
        &ca.leaf("localhost", &[loopback()]),
        upstream.clone(),
        &ca.pem,
    )
    .await;
    point_at(&sets, &control.address).await;
    let message = wait_reachable(&sets, "True", "Scanned").await;
    let seen = control.seen();
    eprintln!(
        "3. the control: {} connections, {} handshakes, {} bytes decrypted; KafkaReachable: {message}",
        seen.connections,
        seen.handshakes,
        seen.plaintext.len()
    );
    assert!(
        seen.handshakes >= 1,
        "the control: no TLS handshake completed"
    );
    assert!(
        seen.holds(USER),
        "the control: the recorder must see the user name the operator authenticated with"
    );
    bed.drop_namespace(&ns).await;
    drop(kafka);
}
