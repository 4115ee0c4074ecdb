//! The operator's Prometheus metrics.
//!
//! One `Metrics` value owns the registry and every metric family. It is cheap to clone (the
//! families are reference-counted), so the reconciler, the rollout, the Kafka watcher and the
//! HTTP server each hold a clone and record through the typed methods below; nobody touches
//! label sets by hand, which keeps label names and cardinality in one place.

mod automation;

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

pub use automation::{observers_in_isr, AutomationMetrics, KafkaWrite};

/// Prefix of every metric name.
const PREFIX: &str = "kafka_observer";

/// The content type of [`Metrics::render`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Identifies one ObserverSet in label values.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ObserverSetLabels {
    pub namespace: String,
    pub observerset: String,
}

impl ObserverSetLabels {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            observerset: name.into(),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CategoryLabels {
    category: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RoleLabels {
    role: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    namespace: String,
    observerset: String,
    reason: String,
}

/// What the reconciler last computed for one ObserverSet, exported as gauges.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ObserverSetState {
    /// Size of the effective observer set wanted now.
    pub desired_observers: usize,
    /// Size of the observer set every pod has acknowledged.
    pub effective_observers: usize,
    pub rollout_in_progress: bool,
    pub degraded: bool,
}

#[derive(Debug)]
struct Families {
    reconciles: Counter,
    reconcile_duration: Histogram,
    reconcile_errors: Family<CategoryLabels, Counter>,
    rollout_step_duration: Family<RoleLabels, Histogram>,
    desired_observers: Family<ObserverSetLabels, Gauge>,
    effective_observers: Family<ObserverSetLabels, Gauge>,
    rollout_in_progress: Family<ObserverSetLabels, Gauge>,
    degraded: Family<ObserverSetLabels, Gauge>,
    events: Family<ReasonLabels, Counter>,
    kafka_scan_duration: Family<ObserverSetLabels, Histogram>,
    leader: Gauge,
}

/// The operator's metrics: clone it freely and record from anywhere.
#[derive(Clone, Debug)]
pub struct Metrics {
    registry: Arc<Registry>,
    families: Arc<Families>,
    automation: AutomationMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

// Reconciles and Kafka scans take milliseconds to seconds.
fn fast_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 14))
}

// A rollout step waits for the kubelet's remount: seconds to minutes.
fn step_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.5, 2.0, 11))
}

impl Metrics {
    pub fn new() -> Self {
        let families = Families {
            reconciles: Counter::default(),
            reconcile_duration: fast_histogram(),
            reconcile_errors: Family::default(),
            rollout_step_duration: Family::new_with_constructor(step_histogram),
            desired_observers: Family::default(),
            effective_observers: Family::default(),
            rollout_in_progress: Family::default(),
            degraded: Family::default(),
            events: Family::default(),
            kafka_scan_duration: Family::new_with_constructor(fast_histogram),
            leader: Gauge::default(),
        };
        let mut registry = Registry::with_prefix(PREFIX);
        let f = &families;
        registry.register(
            "reconciles",
            "ObserverSet reconciliations",
            f.reconciles.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Time spent in one reconciliation",
            f.reconcile_duration.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Failed reconciliations by error category",
            f.reconcile_errors.clone(),
        );
        registry.register(
            "rollout_step_duration_seconds",
            "Time from writing a role's ConfigMap to every pod of that role acknowledging it",
            f.rollout_step_duration.clone(),
        );
        registry.register(
            "desired_observers",
            "Number of node ids in the effective observer set wanted now",
            f.desired_observers.clone(),
        );
        registry.register(
            "effective_observers",
            "Number of node ids every pod of both roles has acknowledged as observers",
            f.effective_observers.clone(),
        );
        registry.register(
            "rollout_in_progress",
            "1 while a change of the observer set is rolling out",
            f.rollout_in_progress.clone(),
        );
        registry.register(
            "degraded",
            "1 while the ObserverSet is Degraded (a rollout step timed out)",
            f.degraded.clone(),
        );
        registry.register(
            "events",
            "Kubernetes events published, by reason",
            f.events.clone(),
        );
        registry.register(
            "kafka_scan_duration_seconds",
            "Time spent reading metadata and configs from Kafka in one watcher scan",
            f.kafka_scan_duration.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader lease and acts",
            f.leader.clone(),
        );
        let automation = AutomationMetrics::register(&mut registry);
        Self {
            registry: Arc::new(registry),
            families: Arc::new(families),
            automation,
        }
    }

    /// The promotion automation's families (metrics/automation.rs).
    pub fn automation(&self) -> &AutomationMetrics {
        &self.automation
    }

    /// The whole registry in the OpenMetrics text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Counts one reconciliation and records its duration.
    pub fn reconciled(&self, duration: Duration) {
        self.families.reconciles.inc();
        self.families
            .reconcile_duration
            .observe(duration.as_secs_f64());
    }

    /// Counts a failed reconciliation; `category` is the error's metric label.
    pub fn reconcile_failed(&self, category: &str) {
        self.families
            .reconcile_errors
            .get_or_create(&CategoryLabels {
                category: category.to_owned(),
            })
            .inc();
    }

    /// Records how long one rollout step of `role` (`controller` or `broker`) took.
    pub fn rollout_step_finished(&self, role: &str, duration: Duration) {
        self.families
            .rollout_step_duration
            .get_or_create(&RoleLabels {
                role: role.to_owned(),
            })
            .observe(duration.as_secs_f64());
    }

    /// Sets the per-ObserverSet gauges.
    pub fn set_observer_set_state(&self, set: &ObserverSetLabels, state: ObserverSetState) {
        let f = &self.families;
        f.desired_observers
            .get_or_create(set)
            .set(count(state.desired_observers));
        f.effective_observers
            .get_or_create(set)
            .set(count(state.effective_observers));
        f.rollout_in_progress
            .get_or_create(set)
            .set(i64::from(state.rollout_in_progress));
        f.degraded.get_or_create(set).set(i64::from(state.degraded));
    }

    /// Drops the gauges of a deleted ObserverSet so it stops being exported.
    pub fn forget_observer_set(&self, set: &ObserverSetLabels) {
        let f = &self.families;
        f.desired_observers.remove(set);
        f.effective_observers.remove(set);
        f.rollout_in_progress.remove(set);
        f.degraded.remove(set);
        f.kafka_scan_duration.remove(set);
    }

    /// Counts a Kubernetes event published about `set`.
    pub fn event_published(&self, set: &ObserverSetLabels, reason: &str) {
        self.families
            .events
            .get_or_create(&ReasonLabels {
                namespace: set.namespace.clone(),
                observerset: set.observerset.clone(),
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// Records the duration of one Kafka watcher scan for `set`.
    pub fn kafka_scanned(&self, set: &ObserverSetLabels, duration: Duration) {
        self.families
            .kafka_scan_duration
            .get_or_create(set)
            .observe(duration.as_secs_f64());
    }

    /// Whether this replica currently holds the leader lease.
    pub fn set_leader(&self, leading: bool) {
        self.families.leader.set(i64::from(leading));
    }
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line_with<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
        text.lines().find(|l| l.starts_with(prefix))
    }

    #[test]
    fn renders_every_family_with_help_and_eof() {
        // Labelled families appear once they have a series.
        let metrics = Metrics::new();
        let set = ObserverSetLabels::new("kafka", "kafka");
        metrics.reconcile_failed("kube_api");
        metrics.rollout_step_finished("controller", Duration::from_millis(5));
        metrics.set_observer_set_state(
            &set,
            ObserverSetState {
                desired_observers: 1,
                effective_observers: 1,
                rollout_in_progress: false,
                degraded: false,
            },
        );
        metrics.event_published(&set, "RolloutStarted");
        metrics.kafka_scanned(&set, Duration::from_millis(5));
        let text = metrics.render();
        for name in [
            "kafka_observer_reconciles",
            "kafka_observer_reconcile_duration_seconds",
            "kafka_observer_reconcile_errors",
            "kafka_observer_rollout_step_duration_seconds",
            "kafka_observer_desired_observers",
            "kafka_observer_effective_observers",
            "kafka_observer_rollout_in_progress",
            "kafka_observer_degraded",
            "kafka_observer_events",
            "kafka_observer_kafka_scan_duration_seconds",
            "kafka_observer_leader",
        ] {
            assert!(
                text.contains(&format!("# HELP {name} ")),
                "missing HELP for {name} in:\n{text}"
            );
        }
        assert!(text.trim_end().ends_with("# EOF"));
    }

    #[test]
    fn records_reconciles_errors_and_steps() {
        let m = Metrics::new();
        m.reconciled(Duration::from_millis(20));
        m.reconciled(Duration::from_millis(40));
        m.reconcile_failed("kubernetes");
        m.rollout_step_finished("controller", Duration::from_secs(3));
        let text = m.render();
        assert_eq!(
            line_with(&text, "kafka_observer_reconciles_total"),
            Some("kafka_observer_reconciles_total 2")
        );
        assert!(text.contains("kafka_observer_reconcile_duration_seconds_count 2"));
        assert!(text.contains("kafka_observer_reconcile_errors_total{category=\"kubernetes\"} 1"));
        assert!(text.contains(
            "kafka_observer_rollout_step_duration_seconds_bucket{le=\"4.0\",role=\"controller\"} 1"
        ));
        assert!(text.contains(
            "kafka_observer_rollout_step_duration_seconds_bucket{le=\"2.0\",role=\"controller\"} 0"
        ));
    }

    #[test]
    fn per_observer_set_gauges_are_set_and_forgotten() {
        let m = Metrics::new();
        let set = ObserverSetLabels::new("kafka", "kafka");
        m.set_observer_set_state(
            &set,
            ObserverSetState {
                desired_observers: 1,
                effective_observers: 2,
                rollout_in_progress: true,
                degraded: false,
            },
        );
        let labels = "{namespace=\"kafka\",observerset=\"kafka\"}";
        let text = m.render();
        assert!(text.contains(&format!("kafka_observer_desired_observers{labels} 1")));
        assert!(text.contains(&format!("kafka_observer_effective_observers{labels} 2")));
        assert!(text.contains(&format!("kafka_observer_rollout_in_progress{labels} 1")));
        assert!(text.contains(&format!("kafka_observer_degraded{labels} 0")));

        m.forget_observer_set(&set);
        assert!(!m.render().contains(labels));
    }

    #[test]
    fn events_scans_and_leadership_carry_their_labels() {
        let m = Metrics::new();
        let set = ObserverSetLabels::new("kafka", "kafka");
        m.event_published(&set, "RolloutStarted");
        m.kafka_scanned(&set, Duration::from_millis(12));
        m.set_leader(true);
        let text = m.render();
        assert!(text.contains(
            "kafka_observer_events_total{namespace=\"kafka\",observerset=\"kafka\",reason=\"RolloutStarted\"} 1"
        ));
        assert!(text.contains(
            "kafka_observer_kafka_scan_duration_seconds_count{namespace=\"kafka\",observerset=\"kafka\"} 1"
        ));
        assert_eq!(
            line_with(&text, "kafka_observer_leader "),
            Some("kafka_observer_leader 1")
        );
    }

    #[test]
    fn clones_share_the_registry() {
        let m = Metrics::new();
        m.clone().reconcile_failed("kafka");
        assert!(m
            .render()
            .contains("kafka_observer_reconcile_errors_total{category=\"kafka\"} 1"));
    }
}
