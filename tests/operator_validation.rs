//! The apiserver rejects bad ObserverSets with messages that say what to fix (the CRD's schema
//! and CEL rules), and accepts a good one. Server-side dry-run creates: nothing is stored.
//! Needs only the CRD installed on the bed (`operator.sh crd`), not a running operator.

mod operator_support;

use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::Api;
use serde_json::Value;

use kafka_observer_operator::crd::ObserverSet;
use operator_support::bed;

/// Dry-run create of `body` in namespace kafka: `Ok(())` or the apiserver's message.
async fn dry_run(bed: &operator_support::Bed, body: Value) -> Result<(), String> {
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
