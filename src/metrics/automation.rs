//! The automation's own metric families: detections, automatic promotions and demotions, leader
//! elections and reorder-only reassignments it ran, decision latency, and observers found in the ISR. Registered in the operator's registry by
//! `crate::metrics::Metrics::new` through [`AutomationMetrics::register`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use super::ObserverSetLabels;
use crate::promotion::{BrokerId, ClusterSnapshot};

/// How a Kafka write of the automation (an election, a reordering) ended: the `outcome` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KafkaWrite {
    Ok,
    Failed,
    /// Not sent: this replica's leader Lease could no longer be proven (`crate::k8s::fence`).
    Fenced,
}

impl KafkaWrite {
    pub fn of(ok: bool) -> Self {
        if ok {
            Self::Ok
        } else {
            Self::Failed
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Failed => "failed",
            Self::Fenced => "fenced",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabels {
    namespace: String,
    observerset: String,
    node_id: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateWriteLabels {
    namespace: String,
    observerset: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ElectionLabels {
    namespace: String,
    observerset: String,
    kind: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    namespace: String,
    observerset: String,
    category: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    namespace: String,
    observerset: String,
    outcome: String,
}

/// Cheap to clone: every family is reference-counted.
#[derive(Clone, Debug)]
pub struct AutomationMetrics {
    detections: Family<ObserverSetLabels, Counter>,
    triggered_partitions: Family<ObserverSetLabels, Gauge>,
    promotions: Family<NodeLabels, Counter>,
    demotions: Family<NodeLabels, Counter>,
    elections: Family<ElectionLabels, Counter>,
    reassignments: Family<OutcomeLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
    decision_latency: Family<ObserverSetLabels, Histogram>,
    state_writes: Family<StateWriteLabels, Counter>,
    state_bytes: Family<ObserverSetLabels, Gauge>,
    observers_in_isr: Family<NodeLabels, Gauge>,
    /// The node ids each ObserverSet has an `observers_in_isr` series for, so that a node that
    /// stops being an observer, and a forgotten ObserverSet, lose theirs.
    isr_nodes: Arc<Mutex<HashMap<ObserverSetLabels, BTreeSet<BrokerId>>>>,
}

/// For each observer in `observers`: the partitions whose ISR lists it (0 for none). The patch
/// keeps observers out of the ISR, so anything but 0 for long means a broker or controller
/// without the patch, a wrong `observer.ids`, or a demotion whose ISR shrink has not happened yet.
pub fn observers_in_isr(
    snapshot: &ClusterSnapshot,
    observers: &BTreeSet<BrokerId>,
) -> BTreeMap<BrokerId, usize> {
    let mut counts: BTreeMap<BrokerId, usize> = observers.iter().map(|&o| (o, 0)).collect();
    for p in &snapshot.partitions {
        for r in &p.isr {
            if let Some(n) = counts.get_mut(r) {
                *n += 1;
            }
        }
    }
    counts
}

fn latency_histogram() -> Histogram {
    // From 1 ms to ~16 s: a scan plus a decision.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

impl AutomationMetrics {
    /// Creates the families and registers them (names get the registry's prefix).
    pub fn register(registry: &mut Registry) -> Self {
        let m = AutomationMetrics {
            detections: Family::default(),
            triggered_partitions: Family::default(),
            promotions: Family::default(),
            demotions: Family::default(),
            elections: Family::default(),
            reassignments: Family::default(),
            errors: Family::default(),
            decision_latency: Family::new_with_constructor(latency_histogram),
            state_writes: Family::default(),
            state_bytes: Family::default(),
            observers_in_isr: Family::default(),
            isr_nodes: Arc::default(),
        };
        registry.register(
            "automation_detections",
            "Times the promotion engine saw partitions go from healthy to triggering the policy",
            m.detections.clone(),
        );
        registry.register(
            "automation_triggered_partitions",
            "Watched partitions whose state triggers the promotion policy in the latest scan",
            m.triggered_partitions.clone(),
        );
        registry.register(
            "automation_promotions",
            "Automatic observer promotions written to status.autoPromotions",
            m.promotions.clone(),
        );
        registry.register(
            "automation_demotions",
            "Automatic demotions (entries removed from status.autoPromotions)",
            m.demotions.clone(),
        );
        registry.register(
            "automation_elections",
            "Leader elections run by the automation, by kind (Preferred, Unclean) and outcome",
            m.elections.clone(),
        );
        registry.register(
            "automation_reassignments",
            "Reorder-only partition reassignments run by the automation (a primary made preferred leader before leadership moves off a broker to be demoted), by outcome",
            m.reassignments.clone(),
        );
        registry.register(
            "automation_errors",
            "Failed automation steps (the step is retried after 5 s), by category: invalid_spec, secret, kafka, kube_api, stale_crd",
            m.errors.clone(),
        );
        registry.register(
            "automation_decision_latency_seconds",
            "Time from the start of the Kafka scan to the engine's decision",
            m.decision_latency.clone(),
        );
        registry.register(
            "automation_state_writes",
            "Writes of status.engineState, by why the state was due (Decisions, FrozenHighWatermark, HighWatermarks, Heartbeat, WithStatus)",
            m.state_writes.clone(),
        );
        registry.register(
            "automation_state_bytes",
            "Size of the latest status.engineState written, in bytes of JSON",
            m.state_bytes.clone(),
        );
        registry.register(
            "observers_in_isr",
            "Partitions whose ISR lists this observer (declared, acknowledged, not promoted by hand or automatically), in the latest scan",
            m.observers_in_isr.clone(),
        );
        m
    }

    /// Sets `observers_in_isr` for the observers of one ObserverSet from a scan
    /// ([`observers_in_isr`]); series of nodes no longer in `counts` are removed.
    pub fn set_observers_in_isr(
        &self,
        set: &ObserverSetLabels,
        counts: &BTreeMap<BrokerId, usize>,
    ) {
        let mut known = self.isr_nodes.lock().unwrap_or_else(|e| e.into_inner());
        let nodes = known.entry(set.clone()).or_default();
        for gone in nodes.iter().filter(|n| !counts.contains_key(n)) {
            self.observers_in_isr.remove(&node(set, *gone));
        }
        *nodes = counts.keys().copied().collect();
        for (&id, &n) in counts {
            self.observers_in_isr
                .get_or_create(&node(set, id))
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    /// Records a write of `status.engineState` of `bytes` bytes, due for `reason`.
    pub fn state_written(&self, set: &ObserverSetLabels, reason: &str, bytes: usize) {
        let labels = StateWriteLabels {
            namespace: set.namespace.clone(),
            observerset: set.observerset.clone(),
            reason: reason.to_owned(),
        };
        self.state_writes.get_or_create(&labels).inc();
        self.state_bytes
            .get_or_create(set)
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    /// Records one decision: its latency, how many partitions trigger, and a detection when
    /// that number rises from zero.
    pub fn decided(
        &self,
        set: &ObserverSetLabels,
        latency: Duration,
        triggered: usize,
        previously_triggered: usize,
    ) {
        self.decision_latency
            .get_or_create(set)
            .observe(latency.as_secs_f64());
        self.triggered_partitions
            .get_or_create(set)
            .set(i64::try_from(triggered).unwrap_or(i64::MAX));
        if triggered > 0 && previously_triggered == 0 {
            self.detections.get_or_create(set).inc();
        }
    }

    pub fn promoted(&self, set: &ObserverSetLabels, node_id: i32) {
        self.promotions.get_or_create(&node(set, node_id)).inc();
    }

    pub fn demoted(&self, set: &ObserverSetLabels, node_id: i32) {
        self.demotions.get_or_create(&node(set, node_id)).inc();
    }

    pub fn elected(&self, set: &ObserverSetLabels, kind: &str, outcome: KafkaWrite) {
        let labels = ElectionLabels {
            namespace: set.namespace.clone(),
            observerset: set.observerset.clone(),
            kind: kind.to_owned(),
            outcome: outcome.label().to_owned(),
        };
        self.elections.get_or_create(&labels).inc();
    }

    pub fn reordered(&self, set: &ObserverSetLabels, outcome: KafkaWrite) {
        let labels = OutcomeLabels {
            namespace: set.namespace.clone(),
            observerset: set.observerset.clone(),
            outcome: outcome.label().to_owned(),
        };
        self.reassignments.get_or_create(&labels).inc();
    }

    /// Counts one failed automation step of `set`; `category` is the error's metric label.
    pub fn failed(&self, set: &ObserverSetLabels, category: &str) {
        self.errors.get_or_create(&error(set, category)).inc();
    }

    /// Stops exporting the series of a deleted ObserverSet (or one back on the Manual policy).
    pub fn forget(&self, set: &ObserverSetLabels) {
        for category in crate::automation::AutomationError::CATEGORIES {
            self.errors.remove(&error(set, category));
        }
        self.triggered_partitions.remove(set);
        self.decision_latency.remove(set);
        self.state_bytes.remove(set);
        let mut known = self.isr_nodes.lock().unwrap_or_else(|e| e.into_inner());
        for id in known.remove(set).unwrap_or_default() {
            self.observers_in_isr.remove(&node(set, id));
        }
    }
}

fn error(set: &ObserverSetLabels, category: &str) -> ErrorLabels {
    ErrorLabels {
        namespace: set.namespace.clone(),
        observerset: set.observerset.clone(),
        category: category.to_owned(),
    }
}

fn node(set: &ObserverSetLabels, node_id: i32) -> NodeLabels {
    NodeLabels {
        namespace: set.namespace.clone(),
        observerset: set.observerset.clone(),
        node_id: node_id.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_count_by_category_and_go_with_the_set() {
        let mut registry = Registry::with_prefix("kafka_observer");
        let m = AutomationMetrics::register(&mut registry);
        let set = ObserverSetLabels::new("team-a", "orders");
        m.failed(&set, "kafka");
        m.failed(&set, "kafka");
        m.failed(&set, "secret");
        let render = |registry: &Registry| {
            let mut out = String::new();
            prometheus_client::encoding::text::encode(&mut out, registry).unwrap();
            out
        };
        let text = render(&registry);
        assert!(text.contains("kafka_observer_automation_errors_total{namespace=\"team-a\",observerset=\"orders\",category=\"kafka\"} 2"), "{text}");
        assert!(text.contains("category=\"secret\"} 1"), "{text}");
        m.forget(&set);
        let text = render(&registry);
        assert!(!text.contains("automation_errors_total{"), "{text}");
    }

    #[test]
    fn detections_count_rising_edges_only() {
        let mut registry = Registry::with_prefix("kafka_observer");
        let m = AutomationMetrics::register(&mut registry);
        let set = ObserverSetLabels::new("kafka", "kafka");
        m.decided(&set, Duration::from_millis(3), 0, 0);
        m.decided(&set, Duration::from_millis(3), 5, 0);
        m.decided(&set, Duration::from_millis(3), 5, 5);
        m.decided(&set, Duration::from_millis(3), 0, 5);
        m.decided(&set, Duration::from_millis(3), 2, 0);
        m.promoted(&set, 4);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        let labels = "{namespace=\"kafka\",observerset=\"kafka\"}";
        assert!(
            text.contains(&format!(
                "kafka_observer_automation_detections_total{labels} 2"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "kafka_observer_automation_triggered_partitions{labels} 2"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "kafka_observer_automation_decision_latency_seconds_count{labels} 5"
            )),
            "{text}"
        );
        assert!(text.contains("kafka_observer_automation_promotions_total{namespace=\"kafka\",observerset=\"kafka\",node_id=\"4\"} 1"), "{text}");
    }

    #[test]
    fn observers_in_isr_counts_partitions_and_drops_former_observers() {
        use crate::promotion::{PartitionState, SourceHealth};
        let p = |isr: &[BrokerId]| PartitionState {
            topic: "t".into(),
            partition: 0,
            replicas: vec![1, 2, 4, 5],
            isr: isr.to_vec(),
            leader: Some(1),
            min_isr: Some(2),
            high_watermark: Some(0),
            log_end_offsets: Default::default(),
            metadata_stale: false,
        };
        let snapshot = ClusterSnapshot {
            undescribed_topics: Vec::new(),
            taken_at: k8s_openapi::jiff::Timestamp::now(),
            source: SourceHealth::Healthy,
            brokers: Default::default(),
            partitions: vec![p(&[1, 2, 4]), p(&[1, 4]), p(&[1, 2])],
        };
        let counts = observers_in_isr(&snapshot, &BTreeSet::from([4, 5]));
        assert_eq!(counts, BTreeMap::from([(4, 2), (5, 0)]));

        let mut registry = Registry::with_prefix("kafka_observer");
        let m = AutomationMetrics::register(&mut registry);
        let set = ObserverSetLabels::new("kafka", "kafka");
        let render = |registry: &Registry| {
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
            text
        };
        m.set_observers_in_isr(&set, &counts);
        let text = render(&registry);
        let series = |id: i32, v: i64| {
            format!("kafka_observer_observers_in_isr{{namespace=\"kafka\",observerset=\"kafka\",node_id=\"{id}\"}} {v}\n")
        };
        assert!(text.contains(&series(4, 2)), "{text}");
        assert!(text.contains(&series(5, 0)), "{text}");
        // 5 promoted: its series goes; the set forgotten: all go.
        m.set_observers_in_isr(&set, &BTreeMap::from([(4, 0)]));
        let text = render(&registry);
        assert!(
            text.contains(&series(4, 0)) && !text.contains("node_id=\"5\""),
            "{text}"
        );
        m.forget(&set);
        assert!(!render(&registry).contains("kafka_observer_observers_in_isr{"));
    }
}
