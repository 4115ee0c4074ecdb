//! The apiserver rejects bad ObserverSets with messages that say what to fix (the CRD's schema
//! and CEL rules), and accepts a good one. Server-side dry-run creates: nothing is stored.
//! Needs only the CRD installed on the bed (`operator.sh crd`), not a running operator.

use crate::support;

use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::Api;
use serde_json::Value;

use kafka_observer_operator::crd::{validate, ObserverSet};
use support::bed;

/// Dry-run create of `body` in namespace kafka: `Ok(())` or the apiserver's message.
async fn dry_run(bed: &support::Bed, body: Value) -> Result<(), String> {
    // Untyped, so values the Rust types cannot even hold (an unknown enum) reach the apiserver.
    let ar = ApiResource::erase::<ObserverSet>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(bed.client.clone(), "kafka", &ar);
    let obj: DynamicObject = serde_json::from_value(body).expect("ObserverSet json");
    let pp = PostParams {
        dry_run: true,
        ..Default::default()
    };
    match api.create(&pp, &obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) => Err(format!("{} ({})", e.message, e.code)),
        Err(e) => panic!("unexpected client error: {e}"),
    }
}

/// `spec.clusters` with `nodes` for each of `names`.
fn stretched(nodes: &Value, names: &[&str]) -> Value {
    names
        .iter()
        .map(|n| serde_json::json!({"name": n, "nodes": nodes}))
        .collect()
}

/// The apiserver accepts a consistent `spec.clusters`; `validate` (an operator of one cluster,
/// not run over members) then refuses it, saying so (nothing is written).
#[tokio::test]
async fn member_clusters_pass_the_schema_and_are_refused_by_the_operator() {
    let Some(bed) = bed().await else {
        return;
    };
    bed.operator("crd");
    let mut body = bed.podless_observer_set("validation-clusters", &[4], &[]);
    body["spec"]["clusters"] = stretched(&body["spec"]["nodes"], &["east", "west", "tie"]);
    // Distinct node id ranges per member, as the StatefulSets of each member would have.
    for (i, offset) in [1, 11, 21].iter().enumerate() {
        body["spec"]["clusters"][i]["nodes"]["brokers"]["nodeId"] =
            serde_json::json!({"ordinalOffset": offset});
    }
    body["spec"].as_object_mut().unwrap().remove("nodes");
    dry_run(&bed, body.clone())
        .await
        .expect("the apiserver accepts three member clusters");
    let obs: ObserverSet = serde_json::from_value(body).unwrap();
    let refused = validate(&obs)
        .expect_err("the operator refuses spec.clusters")
        .to_string();
    assert!(
        refused.starts_with("spec.clusters (east, west, tie) describes one Kafka cluster"),
        "{refused}"
    );
}

fn with(mut body: Value, edit: impl FnOnce(&mut Value)) -> Value {
    edit(&mut body);
    body
}

#[tokio::test]
async fn apiserver_rejects_bad_observer_sets_with_useful_messages() {
    let Some(bed) = bed().await else {
        return;
    };
    bed.operator("crd");
    let good = bed.podless_observer_set("validation", &[4, 5], &[4]);
    dry_run(&bed, good.clone())
        .await
        .expect("a valid ObserverSet must be accepted");

    // (case, body, text the message must contain)
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "negative id",
            with(good.clone(), |b| {
                b["spec"]["observers"] = serde_json::json!([-1, 4])
            }),
            "observers must be node ids >= 0",
        ),
        (
            "duplicate ids",
            with(good.clone(), |b| {
                b["spec"]["observers"] = serde_json::json!([4, 4])
            }),
            "observers must not list a node id twice",
        ),
        (
            "promoted not in observers",
            with(good.clone(), |b| {
                b["spec"]["promotion"]["promoted"] = serde_json::json!([7])
            }),
            "every id in promotion.promoted must also be listed in observers",
        ),
        (
            "duplicate promoted",
            with(good.clone(), |b| {
                b["spec"]["promotion"]["promoted"] = serde_json::json!([4, 4])
            }),
            "promotion.promoted must not list a node id twice",
        ),
        (
            "bad duration",
            with(good.clone(), |b| {
                b["spec"]["rollout"]["timeout"] = serde_json::json!("2 minutes")
            }),
            "spec.rollout.timeout",
        ),
        (
            "fractional duration",
            with(good.clone(), |b| {
                b["spec"]["promotion"]["cooldown"] = serde_json::json!("1.5s")
            }),
            "spec.promotion.cooldown",
        ),
        (
            "empty selector",
            with(good.clone(), |b| {
                b["spec"]["nodes"]["brokers"]["selector"] = serde_json::json!({})
            }),
            "selector must have at least one matchLabels entry or matchExpressions term",
        ),
        (
            "no roles",
            with(good.clone(), |b| b["spec"]["nodes"] = serde_json::json!({})),
            "nodes needs at least one of controllers or brokers",
        ),
        (
            "controllers missing, brokers not combined",
            with(good.clone(), |b| {
                b["spec"]["nodes"]
                    .as_object_mut()
                    .unwrap()
                    .remove("controllers");
            }),
            "nodes.controllers is required unless the brokers are combined-mode",
        ),
        (
            "both node id sources",
            with(good.clone(), |b| {
                b["spec"]["nodes"]["brokers"]["nodeId"] =
                    serde_json::json!({"label": "x", "ordinalOffset": 1})
            }),
            "nodeId needs exactly one of label or ordinalOffset",
        ),
        (
            "empty bootstrap servers",
            with(good.clone(), |b| {
                b["spec"]["kafka"]["bootstrapServers"] = serde_json::json!(" ")
            }),
            "bootstrapServers must list at least one host:port",
        ),
        (
            "SASL without TLS",
            with(good.clone(), |b| {
                b["spec"]["kafka"]["sasl"] = serde_json::json!({
                    "mechanism": "PLAIN",
                    "secretRef": {"name": "kafka-user"}
                })
            }),
            "spec.kafka.sasl needs spec.kafka.tls",
        ),
        (
            "unknown policy",
            with(good.clone(), |b| {
                b["spec"]["promotion"]["policy"] = serde_json::json!("Sometimes")
            }),
            "spec.promotion.policy",
        ),
        (
            "zero confirmations",
            with(good.clone(), |b| {
                b["spec"]["promotion"]["confirmations"] = serde_json::json!(0)
            }),
            "spec.promotion.confirmations",
        ),
        (
            "neither nodes nor clusters",
            with(good.clone(), |b| {
                b["spec"].as_object_mut().unwrap().remove("nodes");
            }),
            "give exactly one of nodes",
        ),
        (
            "nodes and clusters",
            with(good.clone(), |b| {
                b["spec"]["clusters"] = stretched(&b["spec"]["nodes"], &["east", "west", "tie"])
            }),
            "give exactly one of nodes",
        ),
        (
            "two member clusters",
            with(good.clone(), |b| {
                b["spec"]["clusters"] = stretched(&b["spec"]["nodes"], &["east", "west"]);
                b["spec"].as_object_mut().unwrap().remove("nodes");
            }),
            "clusters must name an odd number of member clusters",
        ),
        (
            "a member named twice",
            with(good.clone(), |b| {
                b["spec"]["clusters"] = stretched(&b["spec"]["nodes"], &["east", "west", "east"]);
                b["spec"].as_object_mut().unwrap().remove("nodes");
            }),
            "clusters must not name a member twice",
        ),
    ];
    let mut failures = Vec::new();
    for (case, body, want) in cases {
        match dry_run(&bed, body).await {
            Ok(()) => failures.push(format!(
                "{case}: accepted, expected a rejection mentioning {want:?}"
            )),
            Err(msg) if msg.contains(want) => println!("ok   {case}: {msg}"),
            Err(msg) => failures.push(format!(
                "{case}: rejected, but the message lacks {want:?}: {msg}"
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The bounds and strict parsers of issue 10 ("refuse what cannot be right"): every id a Kafka
/// int32 node id, every duration within its range, counts bounded, bootstrapServers a strict
/// host:port list. Each case must be refused with the message that says what to change.
#[tokio::test]
async fn apiserver_refuses_out_of_bounds_values_and_malformed_strings() {
    let Some(bed) = bed().await else {
        return;
    };
    bed.install_crd_of_this_build().await;
    let good = bed.podless_observer_set("bounds", &[4, 5], &[4]);
    dry_run(&bed, good.clone())
        .await
        .expect("a valid ObserverSet must be accepted");
    // The edges of every range are accepted.
    let edges = with(good.clone(), |b| {
        b["spec"]["observers"] = serde_json::json!([0, 2147483647]);
        b["spec"]["promotion"]["promoted"] = serde_json::json!([2147483647]);
        b["spec"]["nodes"]["brokers"]["nodeId"] = serde_json::json!({"ordinalOffset": 2147483647});
        b["spec"]["kafka"]["bootstrapServers"] =
            serde_json::json!("kafka-0.kafka.svc:1,10.0.0.1:65535,[fd00::1]:9092");
        let p = &mut b["spec"]["promotion"];
        p["confirmations"] = serde_json::json!(100);
        p["maxConcurrentPromotions"] = serde_json::json!(256);
        p["maxLagMessages"] = serde_json::json!(0);
        p["scanInterval"] = serde_json::json!("100ms");
        p["cooldown"] = serde_json::json!("24h");
        p["autoDemote"] = serde_json::json!({"enabled": true, "stabilizationWindow": "10s"});
        let r = &mut b["spec"]["rollout"];
        r["timeout"] = serde_json::json!("86400s");
        r["settleTime"] = serde_json::json!("1h");
        r["jvmCacheTtl"] = serde_json::json!("60s");
    });
    dry_run(&bed, edges)
        .await
        .expect("the edges of every range must be accepted");

    let promotion = |field: &'static str, value: serde_json::Value| {
        with(good.clone(), move |b| b["spec"]["promotion"][field] = value)
    };
    let rollout = |field: &'static str, value: serde_json::Value| {
        with(good.clone(), move |b| b["spec"]["rollout"][field] = value)
    };
    let rollout_fields = |fields: serde_json::Value| {
        with(good.clone(), move |b| {
            for (k, v) in fields.as_object().into_iter().flatten() {
                b["spec"]["rollout"][k.as_str()] = v.clone();
            }
        })
    };
    let bootstrap = |value: &str| {
        let value = serde_json::json!(value);
        with(good.clone(), move |b| {
            b["spec"]["kafka"]["bootstrapServers"] = value
        })
    };
    use serde_json::json;
    const FORM: &str = kafka_observer_operator::crd::BOOTSTRAP_FORM;
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "observer id beyond int32",
            with(good.clone(), |b| {
                b["spec"]["observers"] = json!([4, 2147483648u64])
            }),
            "observers must be node ids >= 0 and <= 2147483647",
        ),
        (
            "negative promoted id",
            with(good.clone(), |b| {
                b["spec"]["promotion"]["promoted"] = json!([-1])
            }),
            "promotion.promoted must be node ids >= 0 and <= 2147483647",
        ),
        (
            "257 observers",
            with(good.clone(), |b| {
                b["spec"]["observers"] = json!((0..257).collect::<Vec<i32>>())
            }),
            "must have at most 256 items",
        ),
        (
            "ordinalOffset beyond int32",
            with(good.clone(), |b| {
                b["spec"]["nodes"]["brokers"]["nodeId"] = json!({"ordinalOffset": 2147483648u64})
            }),
            "nodeId.ordinalOffset must be between 0 and 2147483647",
        ),
        (
            "101 confirmations",
            promotion("confirmations", json!(101)),
            "promotion.confirmations must be between 1 and 100",
        ),
        (
            "zero concurrent promotions",
            promotion("maxConcurrentPromotions", json!(0)),
            "promotion.maxConcurrentPromotions must be between 1 and 256",
        ),
        (
            "257 concurrent promotions",
            promotion("maxConcurrentPromotions", json!(257)),
            "promotion.maxConcurrentPromotions must be between 1 and 256",
        ),
        (
            "negative maxLagMessages",
            promotion("maxLagMessages", json!(-1)),
            "promotion.maxLagMessages must be 0 or more",
        ),
        (
            "scanInterval below 100ms",
            promotion("scanInterval", json!("50ms")),
            "promotion.scanInterval must be between 100ms and 10m",
        ),
        (
            "scanInterval above 10m",
            promotion("scanInterval", json!("11m")),
            "promotion.scanInterval must be between 100ms and 10m",
        ),
        (
            "cooldown below 5s (promotion and demotion could flap)",
            promotion("cooldown", json!("4s")),
            "promotion.cooldown must be between 5s and 24h",
        ),
        (
            "stabilizationWindow below 10s (demotion on the first healthy scan)",
            promotion(
                "autoDemote",
                json!({"enabled": true, "stabilizationWindow": "0s"}),
            ),
            "promotion.autoDemote.stabilizationWindow must be between 10s and 24h",
        ),
        (
            "Time mode with a settleTime of 0s (both lists in one reconcile)",
            rollout_fields(json!({"acknowledgement": "Time", "settleTime": "0s"})),
            "rollout.settleTime must be at least 10s when rollout.acknowledgement is Time",
        ),
        (
            "cooldown above 24h",
            promotion("cooldown", json!("25h")),
            "promotion.cooldown must be between 5s and 24h",
        ),
        (
            "cooldown that would overflow a duration",
            promotion("cooldown", json!("999999999h")),
            "promotion.cooldown must be between 5s and 24h",
        ),
        (
            "stabilizationWindow above 24h",
            promotion(
                "autoDemote",
                json!({"enabled": true, "stabilizationWindow": "1441m"}),
            ),
            "promotion.autoDemote.stabilizationWindow must be between 10s and 24h",
        ),
        (
            "settleTime above 1h",
            rollout("settleTime", json!("2h")),
            "rollout.settleTime must be between 0s and 1h",
        ),
        (
            "timeout below 1s",
            rollout("timeout", json!("500ms")),
            "rollout.timeout must be between 1s and 24h",
        ),
        (
            "jvmCacheTtl below the patch's 100ms",
            rollout("jvmCacheTtl", json!("50ms")),
            "rollout.jvmCacheTtl must be between 100ms and 1m",
        ),
        (
            "jvmCacheTtl above the patch's 60s",
            rollout("jvmCacheTtl", json!("5m")),
            "rollout.jvmCacheTtl must be between 100ms and 1m",
        ),
        (
            "compound duration",
            rollout("timeout", json!("1m30s")),
            "spec.rollout.timeout in body should match",
        ),
        (
            "bootstrap with a scheme",
            bootstrap("PLAINTEXT://kafka:9092"),
            FORM,
        ),
        (
            "bootstrap with a space",
            bootstrap("kafka-0:9092, kafka-1:9092"),
            FORM,
        ),
        (
            "bootstrap with an empty entry",
            bootstrap("kafka-0:9092,,kafka-1:9092"),
            FORM,
        ),
        ("bootstrap with a path", bootstrap("kafka:9092/x"), FORM),
        ("bootstrap port 65536", bootstrap("kafka:65536"), FORM),
        ("bootstrap port 0", bootstrap("kafka:0"), FORM),
        ("bootstrap without a port", bootstrap("kafka"), FORM),
        (
            "bootstrap IPv6 without brackets",
            bootstrap("fd00::1:9092"),
            FORM,
        ),
        (
            "bootstrap longer than 4096",
            bootstrap(&format!("{}:9092", "a.".repeat(2100) + "a")),
            "4096",
        ),
        (
            "nodeId.label not a label key",
            with(good.clone(), |b| {
                b["spec"]["nodes"]["controllers"]["nodeId"] = json!({"label": "node id"})
            }),
            "nodeId.label must be a label key",
        ),
        (
            "name longer than a label value",
            with(good.clone(), |b| {
                b["metadata"]["name"] = json!("n".repeat(64))
            }),
            "metadata.name must have at most 63 characters",
        ),
        (
            "65 topic patterns",
            promotion("topics", json!({"include": vec![".*"; 65], "exclude": []})),
            "must have at most 64 items",
        ),
        (
            "topic pattern longer than 256",
            promotion(
                "topics",
                json!({"include": ["a".repeat(257)], "exclude": []}),
            ),
            "256",
        ),
    ];
    assert!(cases.len() >= 20);
    let mut failures = Vec::new();
    for (case, body, want) in cases {
        match dry_run(&bed, body).await {
            Ok(()) => failures.push(format!(
                "{case}: accepted, expected a rejection mentioning {want:?}"
            )),
            Err(msg) if msg.contains(want) => println!("ok   {case}: {msg}"),
            Err(msg) => failures.push(format!(
                "{case}: rejected, but the message lacks {want:?}: {msg}"
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The ObserverSets users copy (examples/observersets/, and the bed's own example): each is one
/// that the operator's validation accepts and, on the bed, the apiserver's schema and CEL rules
/// too. The operator's half runs without the bed.
#[tokio::test]
async fn examples_are_valid() {
    let root = support::repo_root();
    let mut files: Vec<_> = std::fs::read_dir(root.join("examples/observersets"))
        .expect("examples/observersets")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files.push(root.join(support::EXAMPLE_OBSERVERSET));
    assert!(files.len() >= 4, "the examples: {files:?}");
    let mut bodies = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let body: Value = serde_norway::from_str(&text)
            .unwrap_or_else(|e| panic!("{}: not YAML: {e}", file.display()));
        let obs: ObserverSet = serde_json::from_value(body.clone())
            .unwrap_or_else(|e| panic!("{}: not an ObserverSet: {e}", file.display()));
        if let Err(e) = validate(&obs) {
            panic!("{}: the operator rejects it: {e}", file.display());
        }
        bodies.push((file, body));
    }
    let Some(bed) = bed().await else {
        return;
    };
    bed.install_crd_of_this_build().await;
    for (i, (file, mut body)) in bodies.into_iter().enumerate() {
        // Namespace kafka holds the bed's own ObserverSet `kafka`: a dry-run create of that name
        // is refused as AlreadyExists before any validation.
        body["metadata"]["name"] = serde_json::json!(format!("example-check-{i}"));
        dry_run(&bed, body)
            .await
            .unwrap_or_else(|e| panic!("{}: the apiserver rejects it: {e}", file.display()));
    }
}
