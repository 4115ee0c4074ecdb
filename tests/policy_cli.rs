//! `kubectl observer` (the plugin binary) against the test bed: the replica status table reads
//! the real cluster (roles, leader, ISR, caught-up state per replica),
//! and manual promote/demote go through the ObserverSet with the engine's pre-checks.

#[path = "operator_support/mod.rs"]
mod support;

use std::process::{Command, Output};
use std::time::Duration;

use serde_json::{json, Value};

const TOPIC: &str = "policy-test-cli";

fn plugin(kubeconfig: &std::path::Path, ns: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kubectl-observer"))
        .env("KUBECONFIG", kubeconfig)
        .args(["-n", ns])
        .args(args)
        .output()
        .expect("run kubectl-observer")
}

#[tokio::test(flavor = "multi_thread")]
async fn status_table_and_manual_promotion_with_pre_checks() {
    let Some(bed) = support::bed().await else {
        return;
    };
    let testbed = &bed.testbed;
    let bootstrap = bed.bootstrap.clone();
    testbed
        .run_tool(
            "kafka-topics",
            &[
                "--bootstrap-server",
                &bootstrap,
                "--create",
                "--if-not-exists",
                "--topic",
                TOPIC,
                "--replica-assignment",
                "1:2:4",
                "--config",
                "min.insync.replicas=2",
            ],
        )
        .expect("create topic");
    // Broker 4 is an observer on the real cluster for the whole test: the bed's ObserverSet is
    // held at Manual (nothing promotes meanwhile), and its lists are waited for to list 4 (a
    // promotion an earlier test left has been demoted).
    let _manual = testbed
        .hold_manual_policy()
        .expect("hold the bed's policy at Manual");
    let cms = bed.config_maps("kafka");
    support::wait_for(
        Duration::from_secs(180),
        "both observer lists of the bed to list broker 4",
        || async {
            let mut both = true;
            for role in ["controller", "broker"] {
                let cm = support::get_cm(&cms, &format!("kafka-observers-{role}")).await;
                both &= cm
                    .as_ref()
                    .and_then(support::listed_ids)
                    .is_some_and(|ids| ids.contains(&4));
            }
            both.then_some(())
        },
    )
    .await;
    let ns = bed.namespace("policy-cli").await;
    let api = bed.observer_sets(&ns);
    // The bed's bootstrap, which the plugin's table reads.
    let body = bed.podless_observer_set("cli", &[4], &[]);
    support::create_observer_set(&api, body).await;
    let kubeconfig = testbed.kubeconfig();

    // The table, as JSON: our partition's three replicas with their roles.
    let rows = support::wait_for(
        Duration::from_secs(60),
        "the topic's replicas in the table",
        || async {
            let out = plugin(&kubeconfig, &ns, &["status", "-o", "json"]);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
            let rows: Vec<Value> = doc["replicas"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["topic"] == TOPIC)
                .cloned()
                .collect();
            // An observer: it fetches everything, but the leader never adds it to the ISR.
            (rows.len() == 3
                && rows.iter().all(|r| r["alive"] == json!(true))
                && rows
                    .iter()
                    .any(|r| r["replica"] == json!(4) && r["inIsr"] == json!(false)))
            .then_some(rows)
        },
    )
    .await;
    let row = |id: i64| {
        rows.iter()
            .find(|r| r["replica"] == json!(id))
            .unwrap()
            .clone()
    };
    assert_eq!(row(1)["leader"], json!(true));
    assert_eq!(row(4)["role"], json!("observer"));
    assert_eq!(row(4)["caughtUp"], json!(true));
    assert_eq!(row(4)["inIsr"], json!(false));
    assert_eq!(row(1)["inIsr"], json!(true));
    assert_eq!(row(2)["inIsr"], json!(true));

    // Pre-checks: only declared observers can be promoted; the table is unchanged by a refusal.
    let refused = plugin(&kubeconfig, &ns, &["promote", "3"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("not a declared observer"));

    let promoted = plugin(&kubeconfig, &ns, &["promote", "4"]);
    assert!(
        promoted.status.success(),
        "{}",
        String::from_utf8_lossy(&promoted.stderr)
    );
    let obs = api.get("cli").await.unwrap();
    assert_eq!(obs.spec.promotion.promoted, vec![4]);
    let again = plugin(&kubeconfig, &ns, &["promote", "4"]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("already promoted"));

    let demoted = plugin(&kubeconfig, &ns, &["demote", "4", "--move-leadership"]);
    assert!(
        demoted.status.success(),
        "{}",
        String::from_utf8_lossy(&demoted.stderr)
    );
    assert!(api
        .get("cli")
        .await
        .unwrap()
        .spec
        .promotion
        .promoted
        .is_empty());

    bed.drop_namespace(&ns).await;
    let _ = testbed.run_tool(
        "kafka-topics",
        &[
            "--bootstrap-server",
            &bootstrap,
            "--delete",
            "--topic",
            TOPIC,
        ],
    );
}
