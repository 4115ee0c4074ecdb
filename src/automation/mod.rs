//! The promotion automation: for every ObserverSet whose `spec.promotion.policy` is not `Manual`,
//! a task scans the Kafka cluster every `scanInterval`, asks the pure engine (`crate::promotion`)
//! what to do, runs the leader elections that must precede a demotion (or an opted-in unclean
//! takeover), and records promotions and demotions in `status.autoPromotions` and the decision
//! in `status.plan`, and saves the engine's memory in `status.engineState` (restored by the task
//! of a successor operator, `engine_state`), what it sees of the partitions in
//! `status.partitions` (`partitions`) and its actions in its own entries of `status.history`
//! (`crate::history`). It writes only those fields, by server-side apply under its own field
//! manager; the reconciler rolls out the resulting effective set (controllers first).
//!
//! Run it only while holding the leader lease: dropping the future returned by [`run`] stops
//! every per-ObserverSet task.

pub mod engine_state;
pub mod kafka_health;
pub mod observer_health;
pub mod partitions;
mod replicate;
mod schedule;
pub mod standby;
mod status;
pub mod status_write;
mod task;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Client, Resource, ResourceExt};
use thiserror::Error;
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinSet};

pub use task::reason;

use crate::crd::{ObserverSet, PromotionPolicy};
use crate::k8s::events::Events;
use crate::k8s::fence::Fence;
use crate::k8s::members::MemberClients;
use crate::k8s::scope::WatchScope;
use crate::kafka_liveness::KafkaLiveness;
use crate::metrics::{Metrics, ObserverSetLabels};
use crate::reconciler::conflict;

#[derive(Debug, Error)]
pub enum AutomationError {
    #[error("the ObserverSet is invalid, not automating it: {0}")]
    Invalid(String),
    /// A Secret `spec.kafka.tls`/`sasl` names is missing, lacks its key or holds a bad
    /// certificate or key; the message names the Secret, the key and the fix.
    #[error("cannot connect to Kafka with the Secrets spec.kafka names, so the automation acts on nothing: {0}")]
    Secret(#[from] crate::kafka::security::SecretError),
    #[error(transparent)]
    Kafka(#[from] crate::kafka::KafkaError),
    #[error(
        "cannot write status.autoPromotions/status.plan of ObserverSet {0}: {1} (does the operator's role allow patching observersets/status?)"
    )]
    Status(String, #[source] kube::Error),
    #[error(
        "cannot write the status of ObserverSet {0}: the installed ObserverSet CRD is older than this operator ({1}); apply the CRD of this version first (kubectl apply --server-side -f crds/observerset.yaml: helm never upgrades crds/)"
    )]
    StaleCrd(String, String),
    /// The status moved on since the copy the step decided on, in a way the decision may not
    /// be written over (`status_write::rebase`): nothing recorded, the next scan decides again.
    #[error("nothing recorded in the status of ObserverSet {0}: {1}; the next scan decides again on a fresh copy")]
    Superseded(String, status_write::Stale),
    /// The leadership's fence refused the status write (this replica's Lease is no longer
    /// proven): nothing was sent; the campaign steps down or renews.
    #[error("nothing recorded in the status of ObserverSet {0}: the write was refused by the fence (this replica's leader Lease is no longer proven)")]
    Fenced(String),
    /// Over member clusters: fewer than a majority of the members' copies answered the
    /// restore's read, or took the engine's record; the next scan tries again.
    #[error("the promotion engine's record of ObserverSet {0} is not on a majority of the member clusters: {1}")]
    NoMajority(String, String),
}

impl AutomationError {
    /// The error's metric label (`kafka_observer_automation_errors_total{category}`), one of
    /// [`AutomationError::CATEGORIES`].
    pub fn category(&self) -> &'static str {
        match self {
            AutomationError::Invalid(_) => "invalid_spec",
            AutomationError::Secret(_) => "secret",
            AutomationError::Kafka(_) => "kafka",
            AutomationError::Status(..) => "kube_api",
            AutomationError::StaleCrd(..) => "stale_crd",
            AutomationError::Superseded(..) => "superseded",
            AutomationError::Fenced(_) => "fenced",
            AutomationError::NoMajority(..) => "no_majority",
        }
    }

    /// Every category, for the metric series a forgotten ObserverSet loses.
    pub const CATEGORIES: [&'static str; 8] = [
        "invalid_spec",
        "secret",
        "kafka",
        "kube_api",
        "stale_crd",
        "superseded",
        "fenced",
        "no_majority",
    ];
}

struct Running {
    spec: watch::Sender<Arc<ObserverSet>>,
    abort: AbortHandle,
}

/// Whether an ObserverSet gets an automation task: a policy other than Manual, or automatic
/// promotions still in force (Manual stops new promotions, the earlier ones are still demoted
/// when autoDemote is enabled; docs/promotion-policies.md). Never for a set the reconciler found
/// in conflict with an older ObserverSet selecting the same pods.
/// A set over member clusters is scanned by an operator over members whatever its policy: the
/// reconciler needs Kafka's view to go on without a lost member's pods in a promotion
/// (`crate::rollout::unreachable`), since that member's Nodes cannot be read.
fn automated(obs: &ObserverSet, over_members: bool) -> bool {
    let pending = obs
        .status
        .as_ref()
        .is_some_and(|s| !s.auto_promotions.is_empty());
    obs.meta().deletion_timestamp.is_none()
        && !conflict::in_conflict(obs)
        && (obs.spec.promotion.policy != PromotionPolicy::Manual
            || pending
            || (over_members && obs.spec.clusters.is_some()))
}

fn key(obs: &ObserverSet) -> (String, String) {
    (obs.namespace().unwrap_or_default(), obs.name_any())
}

/// Watches the ObserverSets of `scope` (every namespace in the cluster-wide mode) and keeps one
/// automation task per automated set. Never returns on its own (watch errors are retried with
/// backoff); drop it to stop every task. One supervisor per namespace: each one's initial list
/// stops the tasks of sets no longer listed, which must not reach another namespace's.
/// `events`: the replica's publisher, shared with the reconciler.
/// `liveness`: where each scan's view of the live brokers goes, for the reconciler.
/// `fence`: the leadership's write fence, checked before every Kafka write of the engine.
pub async fn run(
    client: Client,
    scope: &WatchScope,
    metrics: Metrics,
    events: Events,
    liveness: KafkaLiveness,
    fence: Fence,
    members: Option<MemberClients>,
) {
    let supervisors = scope.apis::<ObserverSet>(&client).into_iter().map(|api| {
        supervise(
            client.clone(),
            api,
            metrics.clone(),
            events.clone(),
            liveness.clone(),
            fence.clone(),
            members.clone(),
        )
    });
    futures::future::join_all(supervisors).await;
}

/// [`run`] for the ObserverSets of one namespace only (tests).
pub async fn run_namespaced(
    client: Client,
    metrics: Metrics,
    events: Events,
    namespace: &str,
    liveness: KafkaLiveness,
) {
    let api: Api<ObserverSet> = Api::namespaced(client.clone(), namespace);
    supervise(client, api, metrics, events, liveness, Fence::open(), None).await
}

/// The conflict check before a task starts (one list of the namespace's ObserverSets and pods).
/// A failed check lets the task start: the reconciler's `Conflict` phase still stops it.
async fn starting_in_conflict(client: &Client, obs: &ObserverSet) -> Option<conflict::Conflict> {
    conflict::find(client, obs).await.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "conflict check before starting the promotion automation failed");
        None
    })
}

/// A stopped automation no longer scans: its `KafkaReachable` condition would go stale, so it
/// is removed (in the background, best effort).
fn clear_kafka_health(client: Client, (namespace, name): &(String, String)) {
    let (namespace, name) = (namespace.clone(), name.clone());
    tokio::spawn(async move {
        let api: Api<ObserverSet> = Api::namespaced(client, &namespace);
        if let Err(e) = kafka_health::apply(&api, &name, None).await {
            tracing::warn!(%namespace, observerset = %name, error = %e, "cannot remove the KafkaReachable condition");
        }
    });
}

async fn supervise(
    client: Client,
    api: Api<ObserverSet>,
    metrics: Metrics,
    publisher: Events,
    liveness: KafkaLiveness,
    fence: Fence,
    members: Option<MemberClients>,
) {
    let mut events = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut tasks: JoinSet<()> = JoinSet::new();
    let mut running: HashMap<(String, String), Running> = HashMap::new();
    let mut listed: HashSet<(String, String)> = HashSet::new();
    let stop = |running: &mut HashMap<(String, String), Running>, k: &(String, String)| {
        if let Some(r) = running.remove(k) {
            r.abort.abort();
            // No scan any more: the reconciler must not go on the last one.
            liveness.forget(k);
            metrics
                .automation()
                .forget(&ObserverSetLabels::new(&k.0, &k.1));
            tracing::info!(namespace = %k.0, observerset = %k.1, "promotion automation stopped");
        }
    };
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::Init) => listed.clear(),
            Ok(Event::InitApply(obs)) | Ok(Event::Apply(obs)) => {
                let k = key(&obs);
                listed.insert(k.clone());
                if !automated(&obs, members.is_some()) {
                    // The task is aborted before the clear is sent: aborted after it, a scan
                    // could still write the condition back.
                    let was_running = running.contains_key(&k);
                    stop(&mut running, &k);
                    if was_running && obs.meta().deletion_timestamp.is_none() {
                        clear_kafka_health(client.clone(), &k);
                    }
                } else if let Some(r) = running.get(&k) {
                    r.spec.send_replace(Arc::new(obs));
                } else if let Some(c) = starting_in_conflict(&client, &obs).await {
                    // The reconciler may not have marked it yet: checked here before starting.
                    tracing::info!(namespace = %k.0, observerset = %k.1, other = %c.other, "promotion automation not started: an older ObserverSet selects the same pods");
                } else {
                    let (spec, receiver) = watch::channel(Arc::new(obs));
                    let task = task::SetTask::new(
                        client.clone(),
                        metrics.clone(),
                        publisher.clone(),
                        &k,
                        liveness.clone(),
                        fence.clone(),
                        members.clone(),
                    );
                    let abort = tasks.spawn(task.run(receiver));
                    tracing::info!(namespace = %k.0, observerset = %k.1, "promotion automation started");
                    running.insert(k, Running { spec, abort });
                }
            }
            Ok(Event::InitDone) => {
                let gone: Vec<_> = running
                    .keys()
                    .filter(|k| !listed.contains(*k))
                    .cloned()
                    .collect();
                for k in gone {
                    stop(&mut running, &k);
                }
            }
            Ok(Event::Delete(obs)) => stop(&mut running, &key(&obs)),
            Err(e) => tracing::warn!(error = %e, "watching ObserverSets failed; retrying"),
        }
        // Reap aborted tasks so the set does not grow.
        while tasks.try_join_next().is_some() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::error::stale_crd;

    /// A Manual set gets no task in one cluster; over members a set with `spec.clusters` does
    /// (its scans are the reconciler's view of Kafka), and a one-cluster set still does not.
    #[test]
    fn a_manual_set_is_scanned_only_over_members_and_only_with_clusters() {
        let mut obs: ObserverSet = serde_json::from_value(serde_json::json!({
            "apiVersion": "kafkaobserver.io/v1alpha1", "kind": "ObserverSet",
            "metadata": {"name": "kafka", "namespace": "kafka"},
            "spec": {"kafka": {"bootstrapServers": "kafka:9092"}, "observers": [4]}
        }))
        .unwrap();
        assert_eq!(obs.spec.promotion.policy, PromotionPolicy::Manual);
        assert!(!automated(&obs, false));
        assert!(!automated(&obs, true));
        obs.spec.clusters = Some(Vec::new());
        assert!(!automated(&obs, false));
        assert!(automated(&obs, true));
    }

    #[test]
    fn a_crd_older_than_the_operator_is_named_as_such() {
        // What the apiserver answered on the bed when this build wrote status.history against
        // the previous CRD.
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": 500, "reason": "InternalError",
            "message": "failed to create typed patch object (/; kafkaobserver.io/v1alpha1, Kind=ObserverSet): .status.history: field not declared in schema"
        }))
        .unwrap();
        let e = kube::Error::Api(Box::new(status));
        let m = stale_crd(&e).expect("recognized");
        let text = AutomationError::StaleCrd("kafka".into(), m).to_string();
        assert!(
            text.contains("older than this operator") && text.contains(".status.history"),
            "{text}"
        );
        assert!(stale_crd(&kube::Error::LinesCodecMaxLineLengthExceeded).is_none());
    }
}
