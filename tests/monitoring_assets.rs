//! The chart's Grafana dashboard and alert rules use only metrics the operator exports.
//!
//! The reference is the operator's real registry (`Metrics::new()`, the one `/metrics` serves),
//! rendered in the OpenMetrics text format after every recording method has run once, so that
//! each labelled family has a series. The registration code is read too: a family registered in
//! src/metrics/mod.rs or src/metrics/automation.rs that this file does not exercise fails the test
//! (record it below), so the reference cannot silently miss a family.
//!
//! Run by `make unit` (with the other tests) and by `make alerts-check` (e2e/alerts-check.sh).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use kafka_observer_operator::metrics::{KafkaWrite, Metrics, ObserverSetLabels, ObserverSetState};
use regex::Regex;
use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: impl AsRef<Path>) -> String {
    let path = repo().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

const DASHBOARD: &str = "charts/kafka-observer-operator/dashboards/kafka-observer-operator.json";
const RULES: &str = "charts/kafka-observer-operator/templates/prometheusrule.yaml";
const RULE_TESTS: &str = "e2e/alerts/alerts.test.yaml";

/// The registry as `/metrics` renders it, with one series in every family.
fn rendered_registry() -> String {
    let m = Metrics::new();
    let set = ObserverSetLabels::new("kafka", "kafka");
    m.reconciled(Duration::from_millis(20));
    m.reconcile_failed("kube_api");
    m.rollout_step_finished("controller", Duration::from_secs(3));
    m.set_observer_set_state(
        &set,
        ObserverSetState {
            desired_observers: 1,
            effective_observers: 1,
            rollout_in_progress: true,
            degraded: false,
        },
    );
    m.event_published(&set, "RolloutStarted");
    m.kafka_scanned(&set, Duration::from_millis(12));
    m.set_leader(true);
    let a = m.automation();
    a.decided(&set, Duration::from_millis(3), 2, 0);
    a.promoted(&set, 4);
    a.demoted(&set, 4);
    a.elected(&set, "Preferred", KafkaWrite::Ok);
    a.elected(&set, "Unclean", KafkaWrite::Fenced);
    a.reordered(&set, KafkaWrite::Ok);
    a.failed(&set, "kafka");
    a.state_written(&set, "changed", 4096);
    a.set_observers_in_isr(&set, &BTreeMap::from([(4, 1)]));
    m.render()
}

/// Family name -> type, from the `# TYPE` lines.
fn families(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| {
            let (name, kind) = l.split_once(' ').expect("# TYPE name kind");
            (name.to_owned(), kind.to_owned())
        })
        .collect()
}

/// Every sample name the registry exposes (`foo_total`, `foo_bucket`, ...).
fn sample_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            l.split(['{', ' '])
                .next()
                .expect("a sample line starts with its name")
                .to_owned()
        })
        .collect()
}

/// The names passed to `registry.register(` in the registration code.
fn registered_in_source() -> BTreeSet<String> {
    let call = Regex::new(r#"registry\.register\(\s*"([a-z0-9_]+)""#).unwrap();
    let mut names = BTreeSet::new();
    for file in ["src/metrics/mod.rs", "src/metrics/automation.rs"] {
        let text = read(file);
        for c in call.captures_iter(&text) {
            names.insert(format!("kafka_observer_{}", &c[1]));
        }
    }
    names
}

fn metric_names_in(text: &str) -> BTreeSet<String> {
    let name = Regex::new(r"\bkafka_observer_[a-z0-9_]*[a-z0-9]").unwrap();
    name.find_iter(text)
        .map(|m| m.as_str().to_owned())
        .collect()
}

/// Every string in a JSON document (expressions, legends, titles, descriptions).
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(o) => o.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// The PromQL of a dashboard: every `expr`, and the `query` / `definition` of its variables.
fn queries_in(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Array(a) => a.iter().for_each(|x| queries_in(x, out)),
        Value::Object(o) => {
            for (k, x) in o {
                match (k.as_str(), x) {
                    ("expr" | "query" | "definition", Value::String(s)) => out.push(s.clone()),
                    _ => queries_in(x, out),
                }
            }
        }
        _ => {}
    }
}

fn assert_exported(what: &str, used: &BTreeSet<String>, exported: &BTreeSet<String>) {
    let unknown: Vec<_> = used.difference(exported).collect();
    assert!(
        unknown.is_empty(),
        "{what} uses metric names the operator does not export: {unknown:?}\nexported: {exported:?}"
    );
}

#[test]
fn the_reference_covers_every_registered_family() {
    let text = rendered_registry();
    let rendered: BTreeSet<String> = families(&text).into_keys().collect();
    let registered = registered_in_source();
    assert!(
        registered.len() >= 17,
        "found only {registered:?} in the registration code: did its shape change?"
    );
    let missing: Vec<_> = registered.difference(&rendered).collect();
    assert!(
        missing.is_empty(),
        "families registered but without a series in rendered_registry() (record them there): {missing:?}"
    );
    // Every family has a series, so each TYPE line has its samples.
    let samples = sample_names(&text);
    for (family, kind) in families(&text) {
        let expected: Vec<String> = match kind.as_str() {
            "counter" => vec![format!("{family}_total")],
            "gauge" => vec![family.clone()],
            "histogram" => ["_bucket", "_sum", "_count"]
                .iter()
                .map(|s| format!("{family}{s}"))
                .collect(),
            other => panic!("{family}: unexpected type {other}"),
        };
        for e in expected {
            assert!(samples.contains(&e), "{e} missing from:\n{text}");
        }
    }
}

#[test]
fn dashboard_is_valid_json_and_queries_only_exported_metrics() {
    let dashboard: Value = serde_json::from_str(&read(DASHBOARD)).expect("the dashboard is JSON");
    let exported = sample_names(&rendered_registry());

    // Queries (panel targets, variables) must name series the registry exposes; titles and
    // descriptions may also name a family (`..._seconds` for its `_bucket`, `_sum`, `_count`).
    let mut queries = Vec::new();
    queries_in(&dashboard, &mut queries);
    let used: BTreeSet<String> = queries.iter().flat_map(|t| metric_names_in(t)).collect();
    assert_exported("the dashboard's queries", &used, &exported);
    let mut texts = Vec::new();
    strings(&dashboard, &mut texts);
    let mentioned: BTreeSet<String> = texts.iter().flat_map(|t| metric_names_in(t)).collect();
    let names: BTreeSet<String> = exported
        .iter()
        .cloned()
        .chain(families(&rendered_registry()).into_keys())
        .collect();
    assert_exported("the dashboard's texts", &mentioned, &names);

    // What the issue asks the dashboard to show.
    for needed in [
        "kafka_observer_automation_promotions_total",
        "kafka_observer_automation_demotions_total",
        "kafka_observer_automation_triggered_partitions",
        "kafka_observer_rollout_step_duration_seconds_bucket",
        "kafka_observer_automation_decision_latency_seconds_bucket",
        "kafka_observer_reconcile_duration_seconds_bucket",
        "kafka_observer_kafka_scan_duration_seconds_bucket",
        "kafka_observer_degraded",
        "kafka_observer_rollout_in_progress",
        "kafka_observer_leader",
    ] {
        assert!(
            used.contains(needed),
            "the dashboard does not query {needed}"
        );
    }

    // Every panel has a query and the dashboard's data source variable.
    let panels = dashboard["panels"].as_array().expect("panels");
    let mut ids = BTreeSet::new();
    for p in panels {
        let title = p["title"].as_str().unwrap_or("?");
        assert!(
            ids.insert(p["id"].as_i64().expect("panel id")),
            "duplicate id: {title}"
        );
        if p["type"] == "row" || p["type"] == "text" {
            continue;
        }
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "panel {title} has no query");
        for t in targets {
            let expr = t["expr"].as_str().unwrap_or_default();
            assert!(!metric_names_in(expr).is_empty(), "panel {title}: {expr}");
        }
        assert_eq!(p["datasource"]["uid"], "${datasource}", "panel {title}");
    }
    assert!(dashboard["uid"].as_str().is_some_and(|u| u.len() <= 40));
}

#[test]
fn alert_rules_and_their_tests_use_only_exported_metrics() {
    let text = rendered_registry();
    let exported = sample_names(&text);
    let rules = read(RULES);
    let used = metric_names_in(&rules);
    assert!(used.len() >= 5, "{used:?}");
    assert_exported(RULES, &used, &exported);
    assert_exported(RULE_TESTS, &metric_names_in(&read(RULE_TESTS)), &exported);

    // A bucket bound in a selector must be one the histogram has, spelled as it is exposed.
    let bucket = Regex::new(r#"(kafka_observer_[a-z0-9_]+_bucket)\{.*?le="([^"]+)""#).unwrap();
    let mut bounds = 0;
    for c in bucket.captures_iter(&rules) {
        let (name, le) = (&c[1], &c[2]);
        let needle = format!("le=\"{le}\"");
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("{name}{{")) && l.contains(&needle)),
            "{name} has no bucket {needle}"
        );
        bounds += 1;
    }
    assert!(
        bounds > 0,
        "expected the Kafka scan bucket bound in {RULES}"
    );
}
