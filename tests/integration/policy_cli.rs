//! `kubectl observer` (the plugin binary) against the test bed: the replica status table reads
//! the real cluster (roles, leader, ISR, caught-up state per replica), the summary has one line
//! per broker, `plan` and `explain` give the engine's view of the healthy cluster, and manual
//! promote/demote go through the ObserverSet with the engine's pre-checks. Then the bed's
//! operator promotes observer 4 automatically (the test's topic with min.insync.replicas 3: its
//! two primaries alone are under min ISR) and `explain` shows what the operator saved in
//! `status.engineState`: the stabilization window once the topic is healthy again, and the
//! cooldown after the automatic demotion.

use crate::support;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kafka_observer_operator::time_format::Text;
use kube::api::{Patch, PatchParams};
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

    // The table (`--partitions`), as JSON: our partition's three replicas with their roles.
    let rows = support::wait_for(
        Duration::from_secs(60),
        "the topic's replicas in the table",
        || async {
            let out = plugin(&kubeconfig, &ns, &["status", "--partitions", "-o", "json"]);
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

    summary_plan_and_explain(&kubeconfig, &ns);

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

    explain_reads_the_operators_memory(&bed, &ns, &kubeconfig).await;

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

/// Runs the plugin and returns its stdout, failing with its stderr; prints the wall time.
fn plugin_ok(kubeconfig: &std::path::Path, ns: &str, args: &[&str]) -> String {
    let started = Instant::now();
    let out = plugin(kubeconfig, ns, args);
    println!(
        "PLUGIN {} wall={:.2}s",
        args.join(" "),
        started.elapsed().as_secs_f64()
    );
    assert!(
        out.status.success(),
        "kubectl-observer {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The healthy bed (broker 4 an observer, caught up; every broker alive; policy Manual): the
/// summary's broker lines, the engine's plan and the explanations of brokers 4 and 3.
fn summary_plan_and_explain(kubeconfig: &std::path::Path, ns: &str) {
    let doc: Value = serde_json::from_str(&plugin_ok(
        kubeconfig,
        ns,
        &["status", "-o", "json", "--topic", &format!("^{TOPIC}$")],
    ))
    .unwrap();
    assert_eq!(doc["observerSet"], json!("cli"));
    assert_eq!(doc["partitions"], json!(1));
    let brokers = doc["brokers"].as_array().unwrap();
    let ids: Vec<i64> = brokers.iter().map(|b| b["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, vec![1, 2, 3, 4], "{doc}");
    let broker = |id: i64| brokers.iter().find(|b| b["id"] == json!(id)).unwrap();
    assert!(brokers.iter().all(|b| b["alive"] == json!(true)), "{doc}");
    assert_eq!(broker(4)["role"], json!("observer"));
    assert_eq!(broker(4)["partitions"], json!(1));
    assert_eq!(broker(4)["inIsr"], json!(0));
    assert_eq!(broker(4)["leading"], json!(0));
    assert_eq!(broker(1)["role"], json!("primary"));
    assert_eq!(
        (
            broker(1)["partitions"].clone(),
            broker(1)["inIsr"].clone(),
            broker(1)["leading"].clone()
        ),
        (json!(1), json!(1), json!(1))
    );
    assert_eq!(broker(3)["partitions"], json!(0));
    // Replicas 1,2,4 with min ISR 2: two live primaries in the ISR, exactly at min ISR.
    assert_eq!(doc["attentionTotal"], json!(1), "{doc}");
    assert_eq!(
        doc["attention"][0]["reasons"],
        json!([{"kind": "atMinIsr", "liveIsr": 2, "minIsr": 2}])
    );
    let under: Value = serde_json::from_str(&plugin_ok(
        kubeconfig,
        ns,
        &[
            "status",
            "-o",
            "json",
            "--topic",
            &format!("^{TOPIC}$"),
            "--under-min-isr",
        ],
    ))
    .unwrap();
    assert_eq!(under["attentionTotal"], json!(0), "{under}");
    let yaml = plugin_ok(kubeconfig, ns, &["status", "-o", "yaml", "--broker", "4"]);
    let yaml: Value = serde_norway::from_str(&yaml).unwrap();
    assert_eq!(yaml["brokers"].as_array().unwrap().len(), 1);
    assert_eq!(yaml["brokers"][0]["role"], json!("observer"));
    let text = plugin_ok(kubeconfig, ns, &["status"]);
    assert!(text.contains("BROKER  ROLE"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("4 ") && l.contains("observer  yes")),
        "{text}"
    );

    let plan = plugin_ok(kubeconfig, ns, &["plan"]);
    assert!(
        plan.starts_with("engine decision now (policy Manual, scan at "),
        "{plan}"
    );
    assert!(
        plan.lines().next().unwrap().ends_with(
            "no action: policy Manual promotes nothing automatically, and no automatic promotion is in force"
        ),
        "{plan}"
    );
    let plan: Value =
        serde_json::from_str(&plugin_ok(kubeconfig, ns, &["plan", "-o", "json"])).unwrap();
    assert_eq!(plan["now"]["actions"], json!([]));
    assert_eq!(plan["now"]["reasons"], json!([]));
    assert_eq!(plan["now"]["triggeredPartitions"], json!(0));

    let four = plugin_ok(kubeconfig, ns, &["explain", "4"]);
    let first = four.lines().next().unwrap();
    assert!(
        first.starts_with("observer 4: not needed (no watched partition it hosts triggers policy Manual); caught up on all "),
        "{four}"
    );
    assert!(
        four.contains("[ok] alive: registered and answering"),
        "{four}"
    );
    assert!(
        four.contains("[ok] manual promote pre-checks: pass"),
        "{four}"
    );
    let four: Value =
        serde_json::from_str(&plugin_ok(kubeconfig, ns, &["explain", "4", "-o", "json"])).unwrap();
    assert_eq!(
        (
            four["question"].clone(),
            four["eligible"].clone(),
            four["role"].clone()
        ),
        (json!("promotion"), json!(false), json!("observer"))
    );
    let three = plugin_ok(kubeconfig, ns, &["explain", "3"]);
    assert!(
        three.starts_with("broker 3 is not a declared observer (spec.observers): a primary replica, which the engine never promotes or demotes"),
        "{three}"
    );
}

fn set_min_isr(testbed: &koo_testbed::TestBed, bootstrap: &str, n: u32) {
    testbed
        .run_tool(
            "kafka-configs",
            &[
                "--bootstrap-server",
                bootstrap,
                "--alter",
                "--entity-type",
                "topics",
                "--entity-name",
                TOPIC,
                "--add-config",
                &format!("min.insync.replicas={n}"),
            ],
        )
        .expect("set the topic's min.insync.replicas");
}

async fn patch_promotion(
    api: &kube::Api<kafka_observer_operator::crd::ObserverSet>,
    promotion: Value,
) {
    api.patch(
        "cli",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"promotion": promotion}})),
    )
    .await
    .expect("patch spec.promotion of cli");
}

/// `status.engineState.brokers[node]` of the ObserverSet.
fn engine_broker(status: &Value, node: i64) -> Option<Value> {
    status["engineState"]["brokers"]
        .as_array()?
        .iter()
        .find(|b| b["nodeId"] == json!(node))
        .cloned()
}

fn time(v: &Value) -> Timestamp {
    v.as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("not a timestamp: {v}"))
}

fn check<'a>(e: &'a Value, rule: &str) -> &'a Value {
    e["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["rule"] == json!(rule))
        .unwrap_or_else(|| panic!("no check {rule}: {e:#}"))
}

/// The bed's operator automates `cli` (policy UnderMinIsr on the test's topic, cooldown and
/// stabilization window one hour): it promotes 4 while the topic needs min ISR 3, saves the
/// window's start once the topic is back at min ISR 2, and after a demotion (window and cooldown
/// briefly at their floors, 10 s and 5 s) the demotion's time. `explain 4` must show exactly those saved times.
async fn explain_reads_the_operators_memory(
    bed: &support::Bed,
    ns: &str,
    kubeconfig: &std::path::Path,
) {
    const HOUR: i64 = 3600;
    // The bed's operator automates `cli` (started if an earlier test left it down).
    bed.operator("up");
    let api = bed.observer_sets(ns);
    let bootstrap = bed.bootstrap.clone();
    patch_promotion(
        &api,
        json!({
            "policy": "UnderMinIsr", "confirmations": 1, "scanInterval": "1s", "cooldown": "1h",
            "maxLagMessages": 1000, "dryRun": false,
            "topics": {"include": [format!("^{TOPIC}$")], "exclude": []},
            "autoDemote": {"enabled": true, "stabilizationWindow": "1h"}
        }),
    )
    .await;
    set_min_isr(&bed.testbed, &bootstrap, 3);
    support::wait_for(
        Duration::from_secs(120),
        "the operator's automatic promotion of 4 in status.autoPromotions",
        || async {
            let s = support::status_of(&api, "cli").await;
            (s["autoPromotions"].as_array().map(|a| a.len()) == Some(1)
                && s["autoPromotions"][0]["nodeId"] == json!(4))
            .then_some(())
        },
    )
    .await;

    // Healthy without 4 again: the operator starts the stabilization window and saves it.
    set_min_isr(&bed.testbed, &bootstrap, 2);
    let saved = support::wait_for(
        Duration::from_secs(120),
        "status.engineState.brokers[4].recoveredSince",
        || async {
            let s = support::status_of(&api, "cli").await;
            engine_broker(&s, 4).filter(|b| b.get("recoveredSince").is_some())
        },
    )
    .await;
    // Both saved by the operator (microseconds; status.autoPromotions keeps whole seconds).
    let since = time(&saved["recoveredSince"]);
    assert_eq!(saved["lastAction"], json!("Promote"), "{saved}");
    let promoted_at = time(&saved["lastActionAt"]);
    let e: Value =
        serde_json::from_str(&plugin_ok(kubeconfig, ns, &["explain", "4", "-o", "json"])).unwrap();
    assert_eq!(
        (
            e["question"].clone(),
            e["role"].clone(),
            e["eligible"].clone()
        ),
        (json!("demotion"), json!("promoted"), json!(false)),
        "{e:#}"
    );
    assert_eq!(e["operatorMemory"]["restored"], json!(true), "{e:#}");
    let memory = &e["memory"];
    assert_eq!(time(&memory["healthyWithoutSince"]), since, "{e:#}");
    let due = since + SignedDuration::from_secs(HOUR);
    assert_eq!(time(&memory["demotionDueAt"]), due, "{e:#}");
    assert_eq!(memory["lastAction"], json!("promote"));
    assert_eq!(time(&memory["lastActionAt"]), promoted_at);
    assert_eq!(
        time(&memory["cooldownUntil"]),
        promoted_at + SignedDuration::from_secs(HOUR)
    );
    let window = check(&e, "stabilization window");
    assert_eq!(window["ok"], json!(false));
    let detail = window["detail"].as_str().unwrap();
    assert!(
        detail.starts_with(&format!(
            "healthy without it since {} (the operator's timer): the window ends at {} (in ",
            Text(since),
            Text(due)
        )),
        "{detail}"
    );
    let verdict = e["verdict"].as_str().unwrap();
    assert!(
        verdict.starts_with("broker 4: automatically promoted, demotion in ")
            && verdict.ends_with(&format!(
                " at {} (stabilization window since {})",
                Text(due),
                Text(since)
            )),
        "{verdict}"
    );

    // The demotion (window 10 s, cooldown 5 s: both long past), then the cooldown back at one hour: the operator
    // saves the demotion's time, which status.autoPromotions no longer shows.
    patch_promotion(
        &api,
        json!({"cooldown": "5s", "autoDemote": {"enabled": true, "stabilizationWindow": "10s"}}),
    )
    .await;
    support::wait_for(
        Duration::from_secs(60),
        "the operator's automatic demotion of 4",
        || async {
            let s = support::status_of(&api, "cli").await;
            s["autoPromotions"]
                .as_array()
                .is_some_and(|a| a.is_empty())
                .then_some(())
        },
    )
    .await;
    patch_promotion(&api, json!({"cooldown": "1h"})).await;
    let demoted_at = support::wait_for(
        Duration::from_secs(60),
        "status.engineState.brokers[4].lastAction Demote",
        || async {
            let s = support::status_of(&api, "cli").await;
            engine_broker(&s, 4)
                .filter(|b| b["lastAction"] == json!("Demote"))
                .map(|b| time(&b["lastActionAt"]))
        },
    )
    .await;
    let e: Value =
        serde_json::from_str(&plugin_ok(kubeconfig, ns, &["explain", "4", "-o", "json"])).unwrap();
    assert_eq!(
        (e["question"].clone(), e["role"].clone()),
        (json!("promotion"), json!("observer")),
        "{e:#}"
    );
    assert_eq!(e["memory"]["lastAction"], json!("demote"), "{e:#}");
    assert_eq!(time(&e["memory"]["lastActionAt"]), demoted_at);
    let until = demoted_at + SignedDuration::from_secs(HOUR);
    assert_eq!(time(&e["memory"]["cooldownUntil"]), until);
    let cooldown = check(&e, "cooldown");
    assert_eq!(cooldown["ok"], json!(false));
    let detail = cooldown["detail"].as_str().unwrap();
    assert!(
        detail.starts_with(&format!("cooldown runs until {} (in ", Text(until)))
            && detail.ends_with(&format!(
                "): its last automatic action was demote at {}",
                Text(demoted_at)
            )),
        "{detail}"
    );
    let plan: Value =
        serde_json::from_str(&plugin_ok(kubeconfig, ns, &["plan", "-o", "json"])).unwrap();
    let timers = &plan["now"]["brokers"];
    assert_eq!(timers[0]["nodeId"], json!(4), "{plan:#}");
    assert_eq!(time(&timers[0]["cooldownUntil"]), until, "{plan:#}");
}
