//! One ObserverSet's automation loop: scan Kafka every `scanInterval`, decide, carry out the
//! Kafka-side steps (leader elections), and record promotions, demotions, the plan and the
//! engine's memory in status. The memory is restored from `status.engineState` when the task
//! starts (operator start-up, leadership acquired), before the first decision.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::Api;
use kube::runtime::events::EventType;
use kube::{Client, Resource, ResourceExt};
use tokio::sync::watch;

use super::engine_state::{self, EngineStateError, LastWrite, WriteReason};
use super::kafka_health;
use super::observer_health;
use super::partitions;
use super::replicate;
use super::schedule::{self, Glanced};
use super::status;
use super::status_write;
use super::AutomationError;
use crate::crd::{
    validate_over, HistoryEntry, ObserverSet, ObserverSetStatus, PartitionsStatus, ValidatedKafka,
};
use crate::history;
use crate::k8s::events::{Events, MemberEvents, AUTOMATE};
use crate::k8s::fence::Fence;
use crate::k8s::members::MemberClients;
use crate::k8s::secrets;
use crate::kafka::{ConnectionSettings, ElectionKind, KafkaWatcher, WatcherOptions};
use crate::kafka_liveness::{KafkaLiveness, LivenessView, SetKey};
use crate::metrics::{observers_in_isr, KafkaWrite, Metrics, ObserverSetLabels};
use crate::promotion::{
    self, auto_promotions_in, decide, ClusterSnapshot, Concern, PolicyConfig, PolicyHistory,
    PromotionAction, PromotionDecision, PromotionPolicy, SourceHealth, TopicPartition,
};
use crate::reconciler::copies;
use crate::reconciler::members as reconciler_members;

/// Event reasons the automation publishes on the ObserverSet.
pub mod reason {
    pub const AUTO_PROMOTED: &str = "AutoPromoted";
    pub const AUTO_DEMOTED: &str = "AutoDemoted";
    pub const WOULD_PROMOTE: &str = "DryRunPromote";
    pub const WOULD_DEMOTE: &str = "DryRunDemote";
    pub const LEADERSHIP_MOVED: &str = "LeadershipMoved";
    pub const LEADERSHIP_MOVE_FAILED: &str = "LeadershipMoveFailed";
    pub const REPLICAS_REORDERED: &str = "ReplicasReordered";
    pub const REPLICA_REORDER_FAILED: &str = "ReplicaReorderFailed";
    pub const UNCLEAN_TAKEOVER: &str = "UncleanTakeover";
    pub const UNCLEAN_TAKEOVER_FAILED: &str = "UncleanTakeoverFailed";
    pub const HELD_BACK: &str = "PromotionHeldBack";
    pub const OTHER_HELD_BACK: &str = "AutomationHeldBack";
    pub const AUTOMATION_FAILED: &str = "AutomationFailed";
    /// `KafkaReachable` went False after a scan, or its reason changed while False.
    pub const KAFKA_UNREACHABLE: &str = "KafkaUnreachable";
    pub const STATE_RESTORED: &str = "EngineStateRestored";
    pub const STATE_DISCARDED: &str = "EngineStateDiscarded";
    pub const OBSERVER_ONLY_PARTITIONS: &str = "ObserverOnlyPartitions";
    /// An observer is not alive in Kafka (`ObserversAvailable` False).
    pub const OBSERVER_UNAVAILABLE: &str = "ObserverUnavailable";
}

const ELECTION_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a step waits for DescribeQuorum. A healthy quorum answers in milliseconds; while
/// the active controller is lost, a broker may hold the forwarded request until its own
/// controller timeout, and the step (so the next scan) could wait the probe's 2 s for each
/// broker tried.
const VOTERS_BUDGET: Duration = Duration::from_millis(500);

/// Each partition's result of a per-partition Kafka request.
type PartitionResults = Vec<(TopicPartition, Result<(), String>)>;

/// What failed of a per-partition Kafka request (a leader election, a reordering): one line per
/// failed partition, or the request's own error; empty when everything succeeded.
fn failures<E: std::fmt::Display>(outcome: Result<PartitionResults, E>) -> Vec<String> {
    match outcome {
        Ok(partitions) => partitions
            .into_iter()
            .filter_map(|(p, r)| r.err().map(|e| format!("{p}: {e}")))
            .collect(),
        Err(e) => vec![e.to_string()],
    }
}

pub(super) struct SetTask {
    client: Client,
    metrics: Metrics,
    events: Events,
    labels: ObserverSetLabels,
    /// The watcher and the settings it was made with: other settings (a bootstrap change, a
    /// rotated password or certificate) make a new one.
    watcher: Option<(ConnectionSettings, KafkaWatcher)>,
    /// The engine's memory. Seeded from `status.autoPromotions` and `status.engineState` when
    /// the task starts; after that the task's own copy is authoritative (the watch may lag
    /// behind our own status writes).
    history: Option<PolicyHistory>,
    /// The `status.engineState` last written (or found when the task started).
    saved: Option<LastWrite>,
    /// The automation's own `status.history` entries and the `status.partitions` last written
    /// (seeded from the status when the task starts; like `history`, the watch may lag).
    own_history: Option<Vec<HistoryEntry>>,
    partitions: Option<PartitionsStatus>,
    previously_triggered: usize,
    /// What the last glances need: the config of the last successful step (None after a failed
    /// one: then the task just sleeps), the partitions that triggered in its scan, and what the
    /// last glances cost (their spacing).
    glance_config: Option<PolicyConfig>,
    seen_triggers: BTreeSet<TopicPartition>,
    glance_costs: schedule::GlanceCosts,
    /// The watched partitions whose replicas were all observers in the last scan.
    misplaced: Vec<TopicPartition>,
    last_held_back: Option<Vec<(Concern, String)>>,
    last_error: Option<String>,
    /// The `KafkaReachable` condition as last written (`kafka_health`); `None` until the first.
    kafka_health: Option<Condition>,
    /// The `ObserversAvailable` condition as last written (`observer_health`).
    observer_health: Option<Condition>,
    /// `status.engineState.savedAt` as this task last wrote it (or found it when it started):
    /// a stored one that differs was written by another replica (`status_write::rebase`).
    engine_mark: Option<Timestamp>,
    /// Where each scan's view of the live brokers goes, for the reconciler
    /// (`crate::kafka_liveness`), under `key`.
    liveness: KafkaLiveness,
    key: SetKey,
    /// The leadership's fence, checked before every Kafka write (an election, a reordering):
    /// the Kubernetes client's guard fences only apiserver writes, and a replica resumed after
    /// a pause must not elect on the view it decided on before it lost its Lease.
    fence: Fence,
    /// The operator's member clusters (`--members`), none in a single-cluster install: what
    /// the set is validated against, where the engine restores from and writes to
    /// (`super::replicate`).
    members: Option<MemberClients>,
    /// The other members' copies of this task's Events (`MemberEvents`).
    member_events: MemberEvents,
}

impl SetTask {
    pub fn new(
        client: Client,
        metrics: Metrics,
        events: Events,
        (namespace, name): &SetKey,
        liveness: KafkaLiveness,
        fence: Fence,
        members: Option<MemberClients>,
    ) -> Self {
        SetTask {
            fence,
            member_events: MemberEvents::new(&events, members.as_ref()),
            members,
            liveness,
            key: (namespace.to_string(), name.to_string()),
            events,
            client,
            metrics,
            labels: ObserverSetLabels::new(namespace, name),
            watcher: None,
            history: None,
            saved: None,
            own_history: None,
            partitions: None,
            previously_triggered: 0,
            glance_config: None,
            seen_triggers: BTreeSet::new(),
            glance_costs: schedule::GlanceCosts::default(),
            misplaced: Vec::new(),
            last_held_back: None,
            last_error: None,
            kafka_health: None,
            observer_health: None,
            engine_mark: None,
        }
    }

    /// Runs until aborted. `spec` always holds the latest ObserverSet seen by the watch.
    pub async fn run(mut self, mut spec: watch::Receiver<Arc<ObserverSet>>) {
        loop {
            let obs = spec.borrow_and_update().clone();
            let started = Instant::now();
            let interval = match self.step(&obs).await {
                Ok(interval) => {
                    self.last_error = None;
                    interval
                }
                Err(e) => {
                    self.report_error(&obs, &e).await;
                    schedule::AFTER_ERROR
                }
            };
            self.wait_for_next_scan(started + interval).await;
        }
    }

    /// Sleeps until `until`, glancing at the metadata on the way (`schedule::wait_for_scan`):
    /// when a partition newly triggers the policy, the next scan starts at once.
    async fn wait_for_next_scan(&mut self, until: Instant) {
        let glancing = self
            .glance_config
            .as_ref()
            .is_some_and(|c| c.policy != PromotionPolicy::Manual);
        let SetTask {
            watcher,
            glance_config,
            history,
            seen_triggers,
            glance_costs,
            labels,
            ..
        } = self;
        let (watcher, glance_config, history, seen_triggers, labels) = (
            &*watcher,
            &*glance_config,
            &*history,
            &*seen_triggers,
            &*labels,
        );
        schedule::wait_for_scan(until, glancing, glance_costs, || async move {
            let (Some((_, watcher)), Some(config), Some(history)) =
                (watcher.as_ref(), glance_config.as_ref(), history.as_ref())
            else {
                return Glanced::NOTHING;
            };
            // A failed glance changes nothing: the next scan reports what is wrong.
            let Ok((snapshot, cost)) = watcher.glance().await else {
                return Glanced::NOTHING;
            };
            let now = promotion::triggered(&snapshot, config, history);
            let new = now.difference(seen_triggers).next();
            tracing::trace!(namespace = %labels.namespace, observerset = %labels.observerset, triggered = now.len(), partitions = snapshot.partitions.len(), brokers = snapshot.brokers.len(), cost_ms = cost.as_millis() as u64, "glanced");
            if let Some(new) = new {
                tracing::debug!(namespace = %labels.namespace, observerset = %labels.observerset, partition = %new, "a glance at the metadata shows a new trigger: scanning now");
            }
            Glanced {
                new_trigger: new.is_some(),
                cost: Some(cost),
            }
        })
        .await;
    }

    /// One scan and decision; returns when to scan next (sooner while a candidate awaits its
    /// confirmations: PolicyHistory::next_scan_after).
    async fn step(&mut self, obs: &ObserverSet) -> Result<Duration, AutomationError> {
        self.glance_config = None;
        let names = self.members.as_ref().map(MemberClients::names);
        let validated = validate_over(obs, names.as_deref())
            .map_err(|e| AutomationError::Invalid(e.to_string()))?;
        let interval = validated
            .promotion
            .scan_interval
            .max(Duration::from_millis(100));
        let settings = self.connection_settings(obs, &validated.kafka).await?;
        let watcher = match self.watcher_for(settings) {
            Ok(w) => w,
            Err(e) => {
                let source = SourceHealth::Unhealthy {
                    reason: e.to_string(),
                };
                self.report_kafka_health(obs, &source).await;
                return Err(e);
            }
        };
        watcher.set_observers(obs.spec.observers.iter().copied());
        let scan_started = Instant::now();
        let snapshot = watcher.scan().await;
        self.publish_liveness(&snapshot, interval);
        self.report_kafka_health(obs, &snapshot.source).await;
        self.metrics
            .kafka_scanned(&self.labels, scan_started.elapsed());
        let acknowledged = obs
            .status
            .iter()
            .flat_map(|s| s.effective_observers.iter().copied())
            .collect();
        let config = PolicyConfig::from_validated(&validated, acknowledged);
        self.report_observer_health(obs, &config, &snapshot).await;
        if self.history.is_none() {
            // Over members, the newest record a majority holds; else this cluster's copy.
            let source = self.restore_source(obs).await?;
            let status = source.as_ref();
            let restored = self.restore(obs, status, &config).await;
            self.history = Some(restored);
            self.own_history = Some(history::own(
                status.map(|s| s.history.as_slice()).unwrap_or_default(),
                true,
            ));
            self.partitions = status.and_then(|s| s.partitions.clone());
            // The mark of the copy this task writes on (`status_write::rebase`): over members
            // the local copy may be behind the record restored from, which is no other engine.
            self.engine_mark = status_write::engine_mark(obs);
        }
        let history = self.history.clone().unwrap_or_default();
        if snapshot.source == SourceHealth::Healthy {
            // Observers in the ISR: declared, acknowledged everywhere, promoted neither by
            // hand nor by the engine (whose promotions are in the history, not the config).
            let observers = crate::rollout::effective::effective_set(
                &config.observers,
                &config.promoted,
                history.auto_promotions.iter().map(|p| p.node_id),
            )
            .into_iter()
            .filter(|id| config.acknowledged_observers.contains(id))
            .collect();
            self.metrics
                .automation()
                .set_observers_in_isr(&self.labels, &observers_in_isr(&snapshot, &observers));
        }
        let now = Timestamp::now();
        let decision = decide(&snapshot, &config, &history, now);
        tracing::debug!(namespace = %self.labels.namespace, observerset = %self.labels.observerset,
            scan_ms = scan_started.elapsed().as_millis() as u64, triggered = decision.triggered.len(),
            actions = decision.actions.len(), "scanned and decided");
        self.seen_triggers = decision.triggered.clone();
        if let Some(misplaced) = decision.observer_only.clone() {
            self.report_misplaced(obs, misplaced).await;
        }
        let latency = Duration::try_from(Timestamp::now().duration_since(snapshot.taken_at))
            .unwrap_or_default();
        self.metrics.automation().decided(
            &self.labels,
            latency,
            decision.triggered_partitions(),
            self.previously_triggered,
        );
        self.previously_triggered = decision.triggered_partitions();
        for r in &decision.reasons {
            tracing::debug!(observerset = %self.labels.observerset, namespace = %self.labels.namespace, reason = %r, "held back");
        }
        if !decision.dry_run {
            self.run_elections(obs, &decision).await;
        }
        self.record(obs, &snapshot, &config, &decision, now).await?;
        self.publish_voters(&snapshot).await;
        let next = decision
            .next_history
            .next_scan_after(interval, config.confirmations);
        self.history = Some(decision.next_history.clone());
        self.glance_config = Some(config);
        self.report_held_back(obs, &decision).await;
        Ok(next)
    }

    /// Tells the reconciler which brokers Kafka lists (registered, not fenced): a silent pod's
    /// broker missing from a fresh view may be gone on without in a promotion. A failed scan
    /// knows nothing, so the view is dropped rather than left to age.
    fn publish_liveness(&self, snapshot: &ClusterSnapshot, interval: Duration) {
        if snapshot.source != SourceHealth::Healthy {
            self.liveness.forget(&self.key);
            return;
        }
        let brokers = snapshot
            .brokers
            .iter()
            .filter(|(_, b)| b.registered)
            .map(|(id, _)| *id)
            .collect();
        self.liveness.publish(
            self.key.clone(),
            LivenessView {
                at: std::time::Instant::now(),
                interval,
                brokers,
                voters: BTreeMap::new(),
            },
        );
    }

    /// Adds the KRaft voters the quorum still hears from to this scan's liveness view
    /// (DescribeQuorum through a broker the scan found alive). After the scan's decision, so
    /// a broker that does not answer never delays a promotion, and within [`VOTERS_BUDGET`], so
    /// it does not delay the next scan either; a failure leaves the controllers unknown (never
    /// excused for Kafka's view).
    async fn publish_voters(&self, snapshot: &ClusterSnapshot) {
        let Some((_, watcher)) = self.watcher.as_ref() else {
            return;
        };
        if snapshot.source != SourceHealth::Healthy {
            return;
        }
        let alive: BTreeSet<i32> = snapshot
            .brokers
            .iter()
            .filter(|(_, b)| b.is_alive())
            .map(|(id, _)| *id)
            .collect();
        let Ok(asked) = tokio::time::timeout(VOTERS_BUDGET, watcher.live_voters(&alive)).await
        else {
            tracing::debug!(namespace = %self.labels.namespace, observerset = %self.labels.observerset,
                "DescribeQuorum not answered within {VOTERS_BUDGET:?}: the controllers' liveness stays unknown");
            return;
        };
        match asked {
            Ok(voters) => self.liveness.set_voters(&self.key, voters),
            Err(e) => {
                tracing::debug!(namespace = %self.labels.namespace, observerset = %self.labels.observerset,
                error = %e, "DescribeQuorum failed: the controllers' liveness stays unknown")
            }
        }
    }

    /// How to reach the cluster for this scan. With TLS or SASL, the Secrets `spec.kafka` names
    /// are read again at every scan (two GETs each, metadata then data, in the set's namespace): a
    /// rotated password or certificate is used from the next scan on, without a restart. A Secret
    /// that has not opted in to the set (`kafka::secret_opt_in`), is missing, lacks its key or
    /// holds a bad certificate stops the scan: `KafkaReachable` False, a Warning Event naming the
    /// Secret and the key or annotation, and no action.
    async fn connection_settings(
        &mut self,
        obs: &ObserverSet,
        kafka: &ValidatedKafka,
    ) -> Result<ConnectionSettings, AutomationError> {
        match secrets::connection_settings(
            &self.client,
            &self.labels.namespace,
            &self.labels.observerset,
            &obs.spec.kafka,
            kafka,
        )
        .await
        {
            Ok(settings) => Ok(settings),
            Err(e) => {
                let condition = kafka_health::after_secret_error(
                    &e,
                    &self.stored_conditions(obs),
                    obs.metadata.generation,
                    Timestamp::now(),
                );
                self.write_kafka_health(obs, condition).await;
                Err(AutomationError::Secret(e))
            }
        }
    }

    fn watcher_for(
        &mut self,
        settings: ConnectionSettings,
    ) -> Result<&mut KafkaWatcher, AutomationError> {
        if self.watcher.as_ref().is_none_or(|(s, _)| *s != settings) {
            if self.watcher.is_some() {
                tracing::info!(namespace = %self.labels.namespace, observerset = %self.labels.observerset,
                    "the Kafka connection settings changed (bootstrap servers, or a Secret's content): reconnecting");
            }
            let watcher = KafkaWatcher::new(&settings, WatcherOptions::default())?;
            self.watcher = Some((settings, watcher));
        }
        Ok(&mut self.watcher.as_mut().expect("set above").1)
    }

    /// Reorderings and preferred elections before demotions, unclean elections for a takeover,
    /// in the decision's order. Failures are reported; the engine sees the outcome in the next
    /// scan (the broker still leads, or the partition is still offline) and decides again.
    async fn run_elections(&mut self, obs: &ObserverSet, decision: &PromotionDecision) {
        let Some((_, watcher)) = &self.watcher else {
            return;
        };
        for action in &decision.actions {
            let writes = matches!(
                action,
                PromotionAction::ReorderReplicas { .. }
                    | PromotionAction::MoveLeadership { .. }
                    | PromotionAction::UncleanElect { .. }
            );
            // Checked right before each write: the earlier ones of this decision took time.
            if let (true, Err(refused)) = (writes, self.fence.check()) {
                tracing::warn!(
                    namespace = %self.labels.namespace,
                    observerset = %self.labels.observerset,
                    node_id = action.node_id(),
                    reason = %refused,
                    "Kafka write refused by the fence; nothing more of this decision is sent"
                );
                let automation = self.metrics.automation();
                match action {
                    PromotionAction::ReorderReplicas { .. } => {
                        automation.reordered(&self.labels, KafkaWrite::Fenced)
                    }
                    PromotionAction::MoveLeadership { .. } => {
                        automation.elected(&self.labels, "Preferred", KafkaWrite::Fenced)
                    }
                    _ => automation.elected(&self.labels, "Unclean", KafkaWrite::Fenced),
                }
                return;
            }
            if let PromotionAction::ReorderReplicas { orders, .. } = action {
                let failures = failures(watcher.reorder_replicas(orders).await.map(|outcomes| {
                    outcomes
                        .into_iter()
                        .map(|o| (o.partition, o.result))
                        .collect()
                }));
                self.metrics
                    .automation()
                    .reordered(&self.labels, KafkaWrite::of(failures.is_empty()));
                if failures.is_empty() {
                    tracing::info!(node_id = action.node_id(), reason = %action.reason(), "replicas reordered");
                    self.publish(
                        obs,
                        EventType::Normal,
                        reason::REPLICAS_REORDERED,
                        action.reason().to_owned(),
                    )
                    .await;
                } else {
                    let note = format!(
                        "reordering the replicas for broker {} failed: {}",
                        action.node_id(),
                        failures.join("; ")
                    );
                    tracing::warn!(node_id = action.node_id(), "{note}");
                    self.publish(
                        obs,
                        EventType::Warning,
                        reason::REPLICA_REORDER_FAILED,
                        note,
                    )
                    .await;
                }
                continue;
            }
            let (kind, partitions, ok_reason, failed_reason) = match action {
                PromotionAction::MoveLeadership { partitions, .. } => (
                    ElectionKind::Preferred,
                    partitions,
                    reason::LEADERSHIP_MOVED,
                    reason::LEADERSHIP_MOVE_FAILED,
                ),
                PromotionAction::UncleanElect { partitions, .. } => (
                    ElectionKind::Unclean,
                    partitions,
                    reason::UNCLEAN_TAKEOVER,
                    reason::UNCLEAN_TAKEOVER_FAILED,
                ),
                PromotionAction::Promote { .. }
                | PromotionAction::Demote { .. }
                | PromotionAction::ReorderReplicas { .. } => continue,
            };
            let kind_name = format!("{kind:?}");
            let failures = failures(
                watcher
                    .elect_leaders(kind, partitions, ELECTION_TIMEOUT)
                    .await
                    .map(|outcomes| {
                        outcomes
                            .into_iter()
                            .map(|o| (o.partition, o.result))
                            .collect()
                    }),
            );
            self.metrics.automation().elected(
                &self.labels,
                &kind_name,
                KafkaWrite::of(failures.is_empty()),
            );
            if failures.is_empty() {
                tracing::info!(node_id = action.node_id(), election = %kind_name, reason = %action.reason(), "leader election done");
                self.publish(
                    obs,
                    EventType::Normal,
                    ok_reason,
                    action.reason().to_owned(),
                )
                .await;
            } else {
                let note = format!(
                    "{} election for broker {} failed: {}",
                    kind_name,
                    action.node_id(),
                    failures.join("; ")
                );
                tracing::warn!(node_id = action.node_id(), "{note}");
                self.publish(obs, EventType::Warning, failed_reason, note)
                    .await;
            }
        }
    }

    /// The status to restore the engine from: this cluster's copy, or over members the copy
    /// holding the newest engine record among a majority (`copies::engine_source`); without a
    /// majority nothing is restored and the next scan asks again.
    async fn restore_source(
        &self,
        obs: &ObserverSet,
    ) -> Result<Option<ObserverSetStatus>, AutomationError> {
        let Some(members) = &self.members else {
            return Ok(obs.status.clone());
        };
        let apis = reconciler_members::apis(&self.client, Some(members), &self.labels.namespace);
        let reads = replicate::read_majority(&apis, &obs.name_any()).await;
        let copies = reconciler_members::as_copies(&reads);
        let source = copies::engine_source(&copies)
            .map_err(|e| AutomationError::NoMajority(obs.name_any(), e.to_string()))?;
        Ok(source.cloned())
    }

    /// The history to start from: `status.autoPromotions`, merged with `status.engineState`
    /// when that is usable (logged and reported as an event either way).
    async fn restore(
        &mut self,
        obs: &ObserverSet,
        status: Option<&ObserverSetStatus>,
        config: &PolicyConfig,
    ) -> PolicyHistory {
        let base = PolicyHistory::from_auto_promotions(auto_promotions_in(status));
        let Some(saved) = status.and_then(|s| s.engine_state.as_ref()) else {
            tracing::info!(namespace = %self.labels.namespace, observerset = %self.labels.observerset, "no status.engineState to restore: the promotion engine starts from status.autoPromotions");
            return base;
        };
        let stale_after =
            SignedDuration::try_from(config.stale_after).unwrap_or(SignedDuration::MAX);
        match engine_state::restore(saved, base.clone(), Timestamp::now(), stale_after) {
            Ok(r) => {
                tracing::info!(namespace = %self.labels.namespace, observerset = %self.labels.observerset, "{}", r.summary);
                for d in &r.dropped {
                    tracing::warn!(namespace = %self.labels.namespace, observerset = %self.labels.observerset, "{d}");
                }
                self.saved = Some(LastWrite::new(
                    saved.clone(),
                    r.history.last_known_hw.clone(),
                ));
                let mut note = r.summary.clone();
                if !r.dropped.is_empty() {
                    note.push_str("; ");
                    note.push_str(&r.dropped.join("; "));
                }
                self.publish(obs, EventType::Normal, reason::STATE_RESTORED, note)
                    .await;
                r.history
            }
            Err(e) => {
                let note = e.to_string();
                tracing::warn!(namespace = %self.labels.namespace, observerset = %self.labels.observerset, "{note}");
                // An old state is normal after the automation was off for a while; a state from
                // the future means clocks disagree, which someone should fix.
                let type_ = match e {
                    EngineStateError::TooOld { .. } => EventType::Normal,
                    _ => EventType::Warning,
                };
                self.publish(obs, type_, reason::STATE_DISCARDED, note)
                    .await;
                base
            }
        }
    }

    /// Writes `status.autoPromotions`, `status.plan` and `status.engineState` when the first two
    /// change or the engine state is due (`engine_state::write_due`), then reports each
    /// promotion and demotion. A failed write records nothing: the next scan decides again.
    async fn record(
        &mut self,
        obs: &ObserverSet,
        snapshot: &ClusterSnapshot,
        config: &PolicyConfig,
        decision: &PromotionDecision,
        now: Timestamp,
    ) -> Result<(), AutomationError> {
        let plan = status::plan(decision, now);
        let auto = &decision.next_history.auto_promotions;
        let wrote = status::differs(obs.status.as_ref(), &plan, auto);
        let next = &decision.next_history;
        let state = engine_state::save(next, config, now);
        let frozen = self
            .saved
            .as_ref()
            .is_some_and(|s| engine_state::frozen_unsaved(snapshot, next, &s.high_watermarks));
        let due = engine_state::write_due(self.saved.as_ref(), &state, frozen, now);
        // History: the other writer's entries as on the copy written onto, ours as we last
        // wrote them.
        let own = self.own_history.clone().unwrap_or_default();
        let entries = status::history_entries(decision, now);
        let own_next_on = |copy: &ObserverSet| {
            let mut seen: Vec<HistoryEntry> = copy
                .status
                .as_ref()
                .map(|s| history::own(&s.history, false))
                .unwrap_or_default();
            seen.extend(own.iter().cloned());
            history::own(&history::record(&seen, entries.clone()), true)
        };
        let mut own_next = own_next_on(obs);
        let history_changed = own_next != own;
        // The per-partition view, from healthy scans only (else the last one is kept).
        let mut partitions_next = self.partitions.clone();
        if snapshot.source == SourceHealth::Healthy {
            let auto_set = next.auto_promotions.iter().map(|p| p.node_id).collect();
            let view = partitions::view(snapshot, config, &auto_set, |p| next.lag_reference(p));
            if partitions::write_due(self.partitions.as_ref(), &view) {
                partitions_next = Some(view);
            }
        }
        let partitions_changed = partitions_next != self.partitions;
        if wrote || due.is_some() || history_changed || partitions_changed {
            let name = obs.name_any();
            let api: Api<ObserverSet> =
                Api::namespaced(self.client.clone(), &self.labels.namespace);
            let body_with = |own_next: &[HistoryEntry]| {
                status::apply_body(
                    &plan,
                    &status::Owned {
                        auto,
                        engine_state: &state,
                        history: own_next,
                        partitions: partitions_next.as_ref(),
                    },
                )
            };
            // Over members: the same record to every other member's copy first, and to our own
            // only once it counts there with ours (a majority): our copy's change is what wakes
            // the reconciler, which then finds the record on a majority and acts on it (it acts
            // on no record a majority does not hold, `copies::engine_promotions`). Short of a
            // majority nothing more is written and the next scan writes it again.
            if let Some(members) = &self.members {
                let remotes: Vec<_> =
                    reconciler_members::apis(&self.client, Some(members), &self.labels.namespace)
                        .into_iter()
                        .filter(|m| m.member != members.local)
                        .collect();
                let replies = replicate::to_members(&remotes, &name, &body_with(&own_next)).await;
                let refused = replies
                    .iter()
                    .filter_map(|(m, r)| Some((m, r.as_ref().err()?)))
                    .filter(|(_, why)| why.as_str() != replicate::NOT_AWAITED);
                for (member, why) in refused {
                    tracing::warn!(namespace = %self.labels.namespace, observerset = %self.labels.observerset, %member, error = %why, "the engine's record was not written to this member's copy");
                }
                replicate::counted(&replies, remotes.len())
                    .map_err(|e| AutomationError::NoMajority(name.clone(), e.to_string()))?;
            }
            // On the copy decided on; on a 409 once more on a fresh copy, if the decision still
            // holds there (`status_write::rebase`).
            let mut onto = obs.resource_version();
            let mut written =
                status_write::apply(&api, &name, &body_with(&own_next), onto.as_deref()).await;
            if written.as_ref().is_err_and(status_write::superseded) {
                // The object, not its status subresource: the chart grants `get` on
                // observersets only (docs/rbac.md).
                let fresh = api
                    .get(&name)
                    .await
                    .map_err(|e| AutomationError::Status(name.clone(), e))?;
                status_write::rebase(
                    obs.metadata.generation,
                    fresh.metadata.generation,
                    self.engine_mark,
                    status_write::engine_mark(&fresh),
                )
                .map_err(|why| AutomationError::Superseded(name.clone(), why))?;
                own_next = own_next_on(&fresh);
                onto = fresh.resource_version();
                written =
                    status_write::apply(&api, &name, &body_with(&own_next), onto.as_deref()).await;
            }
            written.map_err(|e| match crate::k8s::error::stale_crd(&e) {
                Some(m) => AutomationError::StaleCrd(name.clone(), m),
                None if crate::k8s::fence::refused_in(&e) => AutomationError::Fenced(name.clone()),
                None if status_write::superseded(&e) => {
                    AutomationError::Superseded(name.clone(), status_write::Stale::Raced)
                }
                None => AutomationError::Status(name.clone(), e),
            })?;
            let bytes = serde_json::to_vec(&state).map_or(0, |v| v.len());
            let why = due.map_or("WithStatus", WriteReason::label);
            self.metrics
                .automation()
                .state_written(&self.labels, why, bytes);
            tracing::debug!(namespace = %self.labels.namespace, observerset = %self.labels.observerset, reason = why, bytes, "status.engineState written");
            self.engine_mark = Some(state.saved_at.0);
            self.saved = Some(LastWrite::new(state, next.last_known_hw.clone()));
            self.own_history = Some(own_next);
            self.partitions = partitions_next;
        }
        // A live promotion or demotion is in the decision once (the history records it), and is
        // reported even when the status already showed it; a dry run repeats its plan on every
        // scan, so it is reported only when the plan changed.
        for action in decision
            .actions
            .iter()
            .filter(|_| wrote || !decision.dry_run)
        {
            let (event_reason, note) = match (action, decision.dry_run) {
                (PromotionAction::Promote { node_id, reason }, false) => {
                    self.metrics.automation().promoted(&self.labels, *node_id);
                    (
                        reason::AUTO_PROMOTED,
                        format!("promoting observer {node_id}: {reason}"),
                    )
                }
                (PromotionAction::Demote { node_id, reason }, false) => {
                    self.metrics.automation().demoted(&self.labels, *node_id);
                    (
                        reason::AUTO_DEMOTED,
                        format!("demoting broker {node_id} back to observer: {reason}"),
                    )
                }
                (PromotionAction::Promote { node_id, reason }, true) => (
                    reason::WOULD_PROMOTE,
                    format!("dry run: would promote observer {node_id}: {reason}"),
                ),
                (PromotionAction::Demote { node_id, reason }, true) => (
                    reason::WOULD_DEMOTE,
                    format!("dry run: would demote broker {node_id}: {reason}"),
                ),
                _ => continue,
            };
            tracing::info!(namespace = %self.labels.namespace, observerset = %self.labels.observerset, "{note}");
            self.publish(obs, EventType::Normal, event_reason, note)
                .await;
        }
        Ok(())
    }

    /// A Warning Event and log line when the set of observer-only partitions changes to a
    /// non-empty one (the engine lets none of them trigger a promotion: `promotion::misplaced_reason`).
    async fn report_misplaced(&mut self, obs: &ObserverSet, misplaced: Vec<TopicPartition>) {
        if misplaced == self.misplaced {
            return;
        }
        if misplaced.is_empty() {
            tracing::info!(namespace = %self.labels.namespace, observerset = %self.labels.observerset, "no watched partition has only observers as replicas any more");
        } else {
            let note = promotion::misplaced_reason(&misplaced);
            tracing::warn!(namespace = %self.labels.namespace, observerset = %self.labels.observerset, reason = reason::OBSERVER_ONLY_PARTITIONS, "{note}");
            self.publish(
                obs,
                EventType::Warning,
                reason::OBSERVER_ONLY_PARTITIONS,
                note,
            )
            .await;
        }
        self.misplaced = misplaced;
    }

    /// One Warning event when the engine holds back although partitions need an observer
    /// (`PromotionHeldBack`), or while automatic promotions are in force and their demotion or
    /// an unclean takeover waits or is impossible (`AutomationHeldBack`: window, cooldown,
    /// leadership that cannot move, min ISR, takeover not allowed), each time the explanation
    /// changes other than in its numbers (`promotion::gist`).
    async fn report_held_back(&mut self, obs: &ObserverSet, decision: &PromotionDecision) {
        let promoting = decision.triggered_partitions() > 0;
        let demoting = !decision.next_history.auto_promotions.is_empty();
        let held =
            (promoting || demoting) && decision.actions.is_empty() && !decision.reasons.is_empty();
        // Compared by gist: a lag that shrinks scan by scan is one explanation, not a Warning a scan.
        let gist = held.then(|| promotion::gist(&decision.reasons));
        if gist == self.last_held_back {
            return;
        }
        self.last_held_back = gist;
        if held {
            let note = promotion::joined(&decision.reasons);
            let about_promotion = decision
                .reasons
                .iter()
                .any(|r| matches!(r.concern, Concern::Promotion(_)));
            let why = if about_promotion {
                reason::HELD_BACK
            } else {
                reason::OTHER_HELD_BACK
            };
            tracing::warn!(namespace = %self.labels.namespace, observerset = %self.labels.observerset, reason = why, "{note}");
            self.publish(obs, EventType::Warning, why, note).await;
        }
    }

    /// Writes the `KafkaReachable` condition when this scan's outcome changes it. Best effort:
    /// a failed write is logged and tried again after the next scan.
    /// The `KafkaReachable` condition as last written, else as the status holds it.
    fn stored_conditions(&self, obs: &ObserverSet) -> Vec<Condition> {
        match &self.kafka_health {
            Some(c) => vec![c.clone()],
            None => obs
                .status
                .as_ref()
                .map(|s| s.conditions.clone())
                .unwrap_or_default(),
        }
    }

    async fn report_kafka_health(&mut self, obs: &ObserverSet, source: &SourceHealth) {
        let condition = kafka_health::after_scan(
            source,
            &self.stored_conditions(obs),
            obs.metadata.generation,
            Timestamp::now(),
        );
        // A scan that cannot read the cluster is a Warning Event too, once per change of the
        // condition (an unusable Secret gets its `AutomationFailed` from `report_error`).
        if let Some(c) = condition.as_ref().filter(|c| c.status == "False") {
            self.publish(
                obs,
                EventType::Warning,
                reason::KAFKA_UNREACHABLE,
                c.message.clone(),
            )
            .await;
        }
        self.write_kafka_health(obs, condition).await;
    }

    /// Writes `condition` (`None`: the stored one already says it).
    async fn write_kafka_health(&mut self, obs: &ObserverSet, condition: Option<Condition>) {
        let Some(condition) = condition else {
            return;
        };
        let api: Api<ObserverSet> = Api::namespaced(self.client.clone(), &self.labels.namespace);
        match kafka_health::apply(&api, &obs.name_any(), Some(&condition)).await {
            Ok(()) => {
                tracing::info!(namespace = %self.labels.namespace, observerset = %self.labels.observerset,
                    status = %condition.status, reason = %condition.reason, "{}: {}", kafka_health::KAFKA_REACHABLE, condition.message);
                self.kafka_health = Some(condition);
            }
            Err(e) => {
                tracing::warn!(namespace = %self.labels.namespace, observerset = %self.labels.observerset, error = %e, "cannot write the KafkaReachable condition")
            }
        }
    }

    /// Writes `ObserversAvailable` when this scan changes it, with a Warning Event
    /// `ObserverUnavailable` when it turns False (an observer's own zone lost). Best effort, like
    /// `KafkaReachable`: a failed write is tried again after the next scan.
    async fn report_observer_health(
        &mut self,
        obs: &ObserverSet,
        config: &PolicyConfig,
        snapshot: &ClusterSnapshot,
    ) {
        let stored = match &self.observer_health {
            Some(c) => vec![c.clone()],
            None => obs
                .status
                .as_ref()
                .map(|s| s.conditions.clone())
                .unwrap_or_default(),
        };
        let Some(condition) = observer_health::after_scan(
            &config.observers,
            snapshot,
            &stored,
            obs.metadata.generation,
            Timestamp::now(),
        ) else {
            return;
        };
        if condition.status == "False" {
            tracing::warn!(namespace = %self.labels.namespace, observerset = %self.labels.observerset,
                reason = reason::OBSERVER_UNAVAILABLE, "{}", condition.message);
            self.publish(
                obs,
                EventType::Warning,
                reason::OBSERVER_UNAVAILABLE,
                condition.message.clone(),
            )
            .await;
        }
        let api: Api<ObserverSet> = Api::namespaced(self.client.clone(), &self.labels.namespace);
        match observer_health::apply(&api, &obs.name_any(), &condition).await {
            Ok(()) => {
                tracing::info!(namespace = %self.labels.namespace, observerset = %self.labels.observerset,
                    status = %condition.status, "{}: {}", observer_health::OBSERVERS_AVAILABLE, condition.message);
                self.observer_health = Some(condition);
            }
            Err(e) => {
                tracing::warn!(namespace = %self.labels.namespace, observerset = %self.labels.observerset, error = %e, "cannot write the ObserversAvailable condition")
            }
        }
    }

    async fn report_error(&mut self, obs: &ObserverSet, e: &AutomationError) {
        let text = e.to_string();
        tracing::warn!(namespace = %self.labels.namespace, observerset = %self.labels.observerset, category = e.category(), error = %text, "automation step failed");
        self.metrics.automation().failed(&self.labels, e.category());
        if self.last_error.as_deref() != Some(text.as_str()) {
            self.last_error = Some(text.clone());
            self.publish(obs, EventType::Warning, reason::AUTOMATION_FAILED, text)
                .await;
        }
    }

    async fn publish(&self, obs: &ObserverSet, type_: EventType, reason: &str, note: String) {
        self.member_events.send(
            &self.key.0,
            &self.key.1,
            AUTOMATE,
            &[(type_, reason.to_string(), note.clone())],
        );
        self.events
            .publish(&obs.object_ref(&()), type_, reason, AUTOMATE, note)
            .await
    }
}
