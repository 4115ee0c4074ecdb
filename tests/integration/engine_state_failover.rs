//! The promotion engine's memory survives an operator restart, on the bed: the bed's operator
//! (`e2e/testbed/operator.sh`, built from this tree) automates the example ObserverSet
//! `kafka/kafka` with a 60 s stabilization window, on a topic of this test only
//! (`engine-state-test`, replicas 1, 2 and observer 4). The test drives the engine through the
//! topic's `min.insync.replicas`, with no Kafka node down:
//!
//! 1. 50 messages written (min ISR 1), so the topic's high watermark is 50;
//! 2. min ISR 3: the topic is under min ISR without 4, the engine promotes 4;
//! 3. min ISR 2: healthy without 4, the stabilization window starts (`recoveredSince`);
//! 4. 20 s into the window the operator is killed (SIGKILL) and started again;
//! 5. the demotion comes at `recoveredSince` + 60 s, the original deadline (a window restarted by
//!    the new process would end 20 s later at the earliest);
//! 6. the restarted operator logged what it restored (high watermarks included), status holds
//!    the topic's high watermark 50, and an unclean takeover decided from the restored state (the
//!    topic's primaries gone, 4 alive with log end offset 50) does *not* elect 4: a restored high
//!    watermark is a predecessor's sample, not one this process watched up to the loss. The same
//!    bar witnessed by the deciding process elects 4 at offset 50 and refuses it at 49.
//!
//! The test sets `spec.promotion` of `kafka/kafka` (topics: only its own) and gives it back at
//! the end, also on failure; when `kafka/kafka` did not exist, it creates the example and deletes
//! it again. It needs the chart's operator pods not running (`operator-chart.sh down`), and runs
//! the bed's operator with the credentials given in `KOO_OPERATOR_CREDENTIALS` (as
//! integration.sh: `chart`). On a bed shared by several work trees, run it with a private copy
//! of this tree's binary (`KOO_OPERATOR_BIN`), so another tree's build cannot replace the
//! operator the test restarts; the test fails with that hint when the restore line is missing.

use crate::support;

use std::time::{Duration, Instant};

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kafka_observer_operator::automation::engine_state::{self, decode_partitions};
use kafka_observer_operator::crd::EngineState;
use kafka_observer_operator::promotion::{
    decide, BrokerState, ClusterSnapshot, CompiledTopicFilter, PartitionState, PolicyConfig,
    PolicyHistory, PromotionAction, PromotionPolicy, SourceHealth,
};
use kafka_observer_operator::time_format::Text;
use serde_json::{json, Value};

const TOPIC: &str = "engine-state-test";
const SET: &str = "kafka";
const NS: &str = "kafka";
const WINDOW: i64 = 60;
const MESSAGES: i64 = 50;

/// Gives `kafka/kafka` its promotion spec back (or deletes it when the test created it) and
/// deletes the topic, also when the test fails half-way.
struct Restore<'a> {
    bed: &'a support::Bed,
    /// `Some(spec.promotion)` to give back, `None` when the test created the ObserverSet.
    promotion: Option<Value>,
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        let t = &self.bed.testbed;
        let result = match &self.promotion {
            Some(p) => {
                let patch = json!([{"op": "replace", "path": "/spec/promotion", "value": p}]);
                t.run_tool(
                    "kubectl",
                    &[
                        "-n",
                        NS,
                        "patch",
                        "observerset",
                        SET,
                        "--type",
                        "json",
                        "-p",
                        &patch.to_string(),
                    ],
                )
            }
            // Not waiting: the finalizer needs a working operator, which a failed test may lack.
            None => t.run_tool(
                "kubectl",
                &["-n", NS, "delete", "observerset", SET, "--wait=false"],
            ),
        };
        if let Err(e) = result {
            eprintln!("engine_state_failover: giving {NS}/{SET} back: {e}");
        }
        let bootstrap = t.kafka_bootstrap();
        let _ = t.run_tool(
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
}

fn kafka(bed: &support::Bed, tool: &str, args: &[&str]) -> String {
    let mut all = vec!["--bootstrap-server", bed.bootstrap.as_str()];
    all.extend_from_slice(args);
    bed.testbed
        .run_tool(tool, &all)
        .unwrap_or_else(|e| panic!("{tool} {args:?}: {e}"))
}

fn set_min_isr(bed: &support::Bed, n: u32) {
    let config = format!("min.insync.replicas={n}");
    kafka(
        bed,
        "kafka-configs",
        &[
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            TOPIC,
            "--add-config",
            &config,
        ],
    );
}

fn auto_ids(status: &Value) -> Vec<i64> {
    status["autoPromotions"]
        .as_array()
        .map(|a| a.iter().filter_map(|p| p["nodeId"].as_i64()).collect())
        .unwrap_or_default()
}

fn engine_state_of(status: &Value) -> Option<EngineState> {
    serde_json::from_value(status.get("engineState")?.clone()).ok()
}

fn recovered_since(status: &Value, node: i32) -> Option<Timestamp> {
    let state = engine_state_of(status)?;
    let b = state.brokers.iter().find(|b| b.node_id == node)?;
    b.recovered_since.as_ref().map(|t| t.0)
}

async fn wait_status(
    bed: &support::Bed,
    limit: Duration,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let api = bed.observer_sets(NS);
    let start = Instant::now();
    loop {
        let s = support::status_of(&api, SET).await;
        if pred(&s) {
            return s;
        }
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}; last status: {s:#}\noperator log:\n{}",
            bed.log_tail(40)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The takeover the engine would decide for the test's topic with its primaries 1 and 2 gone
/// and 4 (promoted, acknowledged by every pod) alive with log end offset `leo`.
fn takeover(history: &PolicyHistory, leo: i64, now: Timestamp) -> Vec<PromotionAction> {
    let brokers = (1..=4)
        .map(|id| {
            let up = id > 2;
            (
                id,
                BrokerState {
                    registered: up,
                    reachable: up,
                },
            )
        })
        .collect();
    let snapshot = ClusterSnapshot {
        undescribed_topics: Vec::new(),
        taken_at: now,
        source: SourceHealth::Healthy,
        brokers,
        partitions: vec![PartitionState {
            topic: TOPIC.into(),
            partition: 0,
            replicas: vec![1, 2, 4],
            isr: vec![1],
            leader: None,
            min_isr: Some(2),
            high_watermark: None,
            log_end_offsets: [(4, leo)].into(),
            metadata_stale: false,
        }],
    };
    let config = PolicyConfig {
        policy: PromotionPolicy::Manual,
        observers: [4].into(),
        promoted: [4].into(),
        acknowledged_observers: Default::default(),
        max_lag_messages: 1000,
        confirmations: 2,
        cooldown: Duration::ZERO,
        max_concurrent_promotions: 1,
        topics: CompiledTopicFilter::all(),
        dry_run: true,
        auto_demote_after: None,
        unclean_takeover: true,
        stale_after: Duration::from_secs(3),
    };
    decide(&snapshot, &config, history, now).actions
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_keeps_the_stabilization_deadline_and_the_high_watermarks() {
    let Some(bed) = support::bed().await else {
        return;
    };
    let started = Instant::now();
    bed.operator("up");
    let api = bed.observer_sets(NS);

    // The ObserverSet, as found; the promotion spec this test needs.
    let existing = api.get_opt(SET).await.expect("get kafka/kafka");
    let found = existing.is_some();
    // Always the example with the bed's bootstrap (the Service's ClusterIP): the promotion drill
    // leaves it with the cluster DNS name, which the operator as a local process cannot resolve.
    support::apply_observer_set(&api, &bed.example_observer_set()).await;
    let current: Value = serde_json::to_value(api.get(SET).await.unwrap()).unwrap();
    let restore = Restore {
        bed: &bed,
        promotion: found.then(|| current["spec"]["promotion"].clone()),
    };
    assert!(
        auto_ids(&current["status"]).is_empty(),
        "{NS}/{SET} has automatic promotions in force already: {}",
        current["status"]["autoPromotions"]
    );

    // The topic, with a high watermark of 50.
    let _ = bed.testbed.run_tool(
        "kafka-topics",
        &[
            "--bootstrap-server",
            &bed.bootstrap,
            "--delete",
            "--topic",
            TOPIC,
        ],
    );
    let mut created = false;
    for _ in 0..30 {
        let args = [
            "--bootstrap-server",
            bed.bootstrap.as_str(),
            "--create",
            "--topic",
            TOPIC,
            "--replica-assignment",
            "1:2:4",
            "--config",
            "min.insync.replicas=1",
        ];
        if bed.testbed.run_tool("kafka-topics", &args).is_ok() {
            created = true;
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(created, "cannot create {TOPIC}");
    let lines: String = (0..MESSAGES).map(|i| format!("m{i}\n")).collect();
    bed.testbed
        .run_tool_with_input(
            "kafka-console-producer",
            &[
                "--bootstrap-server",
                &bed.bootstrap,
                "--topic",
                TOPIC,
                "--producer-property",
                "acks=all",
            ],
            &lines,
        )
        .expect("produce to the test topic");

    let promotion = json!({
        "policy": "UnderMinIsr", "promoted": [], "maxLagMessages": 1000, "confirmations": 2,
        "scanInterval": "1s", "cooldown": "5s", "maxConcurrentPromotions": 1,
        "topics": {"include": [format!("^{TOPIC}$")], "exclude": []},
        "dryRun": false, "uncleanTakeover": false,
        "autoDemote": {"enabled": true, "stabilizationWindow": format!("{WINDOW}s")}
    });
    let patch = json!([{"op": "replace", "path": "/spec/promotion", "value": promotion}]);
    bed.testbed
        .run_tool(
            "kubectl",
            &[
                "-n",
                NS,
                "patch",
                "observerset",
                SET,
                "--type",
                "json",
                "-p",
                &patch.to_string(),
            ],
        )
        .expect("set the test's promotion spec");

    // The engine saves the topic's high watermark (only partitions an observer hosts).
    let hw_of = |s: &Value| -> Option<i64> {
        let state = engine_state_of(s)?;
        let t = state.high_watermarks.iter().find(|t| t.topic == TOPIC)?;
        let pairs = decode_partitions(&t.topic, &t.partitions).ok()?;
        pairs.iter().find(|(p, _)| *p == 0).map(|(_, hw)| *hw)
    };
    wait_status(
        &bed,
        Duration::from_secs(90),
        "status.engineState with the topic's high watermark 50 (is the bed's operator built from this tree?)",
        |s| hw_of(s) == Some(MESSAGES),
    )
    .await;

    // Under min ISR without 4: promoted.
    set_min_isr(&bed, 3);
    wait_status(
        &bed,
        Duration::from_secs(90),
        "the automatic promotion of 4",
        |s| auto_ids(s) == vec![4],
    )
    .await;

    // Healthy without 4: the window starts.
    set_min_isr(&bed, 2);
    let s = wait_status(
        &bed,
        Duration::from_secs(90),
        "engineState.brokers[4].recoveredSince",
        |s| recovered_since(s, 4).is_some(),
    )
    .await;
    let since = recovered_since(&s, 4).unwrap();
    let deadline = since + SignedDuration::from_secs(WINDOW);
    eprintln!("window started at {since}, deadline {deadline}");

    // 20 s into the window: a crash, and a new process.
    let crash_at = since + SignedDuration::from_secs(20);
    if let Ok(wait) = Duration::try_from(crash_at.duration_since(Timestamp::now())) {
        tokio::time::sleep(wait).await;
    }
    let log_before = std::fs::read_to_string(bed.dir.join("logs/operator.log")).unwrap_or_default();
    bed.operator("kill");
    let restarted = Timestamp::now();
    bed.operator("up");
    assert!(
        auto_ids(&support::status_of(&api, SET).await) == vec![4],
        "4 must still be promoted right after the restart"
    );

    // What the new process restored.
    // (The line comes when the new process's task starts, before its first decision.)
    let restored_line = support::wait_for(
        Duration::from_secs(30),
        "the new process's restore line for kafka/kafka in .testbed/logs/operator.log (is the bed's operator built from this tree? KOO_OPERATOR_BIN)",
        || async {
            let log =
                std::fs::read_to_string(bed.dir.join("logs/operator.log")).unwrap_or_default();
            let new_part = log.get(log_before.len().min(log.len())..).unwrap_or("");
            new_part
                .lines()
                .find(|l| {
                    l.contains("restored the promotion engine's state")
                        && l.contains(&format!("namespace={NS} observerset={SET}"))
                })
                .map(str::to_owned)
        },
    )
    .await;
    eprintln!("{restored_line}");
    assert!(
        restored_line.contains("1 stabilization timer(s)"),
        "{restored_line}"
    );
    // "..., 1 high watermark(s) namespace=kafka observerset=kafka"
    let hws: usize = restored_line
        .split(" high watermark(s)")
        .next()
        .and_then(|head| head.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(hws >= 1, "no high watermark restored: {restored_line}");

    let demoted = wait_status(
        &bed,
        Duration::from_secs(WINDOW as u64 + 60),
        "the demotion of 4",
        |s| auto_ids(s).is_empty(),
    )
    .await;
    // Exact, on the operator's own clock (no comparison of the test's clock with a deadline):
    // the demotion was decided at or after the window's end, and from the original timer (a
    // window restarted by the new process would name a start after the restart).
    let decided_at: Timestamp = demoted["plan"]["at"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("status.plan.at: {:#}", demoted["plan"]));
    eprintln!(
        "restarted at {restarted}, demotion decided at {decided_at}: {:.1}s after the original deadline",
        decided_at.duration_since(deadline).as_secs_f64()
    );
    // status.plan.at keeps whole seconds: the decision's second is not before the deadline's.
    assert!(
        decided_at >= Timestamp::from_second(deadline.as_second()).unwrap(),
        "demotion decided at {decided_at}, before the window's end {deadline}"
    );
    let reason = format!(
        "every partition it hosts has been fully replicated without it since {}",
        Text(since)
    );
    assert!(
        demoted["plan"]["actions"].as_array().is_some_and(|a| a
            .iter()
            .any(|x| x["action"] == "Demote" && x["reason"] == json!(reason))),
        "the demotion must come from the original window ({reason}): {:#}",
        demoted["plan"]
    );
    let plan = &demoted["plan"]["actions"];
    assert!(
        plan.as_array().is_some_and(|a| a
            .iter()
            .any(|x| x["action"] == "Demote" && x["nodeId"] == 4)),
        "plan: {plan}"
    );

    // The high watermark in status after the restart, and a takeover decided from it.
    let status = support::status_of(&api, SET).await;
    assert_eq!(
        hw_of(&status),
        Some(MESSAGES),
        "{:#}",
        status["engineState"]
    );
    let saved = engine_state_of(&status).expect("status.engineState");
    let now = Timestamp::now();
    let restored = engine_state::restore(
        &saved,
        PolicyHistory::default(),
        now,
        SignedDuration::from_secs(3),
    )
    .expect("restore status.engineState");
    assert!(
        takeover(&restored.history, MESSAGES, now).is_empty(),
        "a restored high watermark must not be the bar of an unclean election"
    );
    // The bar read and watched by the deciding process itself: the rule of the takeover.
    let mut witnessed = restored.history.clone();
    witnessed.hw_witness = witnessed.last_known_hw.clone();
    let elect = takeover(&witnessed, MESSAGES, now);
    assert!(
        matches!(&elect[..], [PromotionAction::UncleanElect { node_id: 4, partitions, .. }] if partitions.len() == 1),
        "{elect:?}"
    );
    assert!(
        takeover(&witnessed, MESSAGES - 1, now).is_empty(),
        "4 short of one acknowledged message must not be elected"
    );
    assert!(takeover(&PolicyHistory::default(), MESSAGES, now).is_empty());

    // The demotion's rollout done (controllers, then brokers) before the ObserverSet is given
    // back or deleted: a deletion mid-rollout would leave the brokers' list without 4.
    wait_status(
        &bed,
        Duration::from_secs(120),
        "the demotion rolled out (phase Ready, effectiveObservers [4])",
        |s| support::phase(s) == "Ready" && s["effectiveObservers"] == json!([4]),
    )
    .await;
    drop(restore);
    eprintln!(
        "engine_state_failover: {:.1}s",
        started.elapsed().as_secs_f64()
    );
}
