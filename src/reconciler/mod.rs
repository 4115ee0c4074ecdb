//! The reconciler: keeps each ObserverSet's observer.ids ConfigMaps in line with its effective
//! observer set, rolling changes out controllers first.
//!
//! Pipeline (one concept per module): `observe` dereferences what the spec points at (pods per
//! role and their node ids, the live ConfigMaps, the agents' answers); `crate::crd::validate`
//! turns the raw spec into the validated model; `crate::rollout` decides (pure); `outcome` turns
//! the decision into status and Events (pure, with `conditions`); `silence` remembers how long
//! each agent has been silent (pure); `status_patch` is the
//! reconciler's share of that status as sent (pure); `reconcile` applies it. `pods` routes pod events
//! to the ObserverSets selecting them; `wake` says which changes of an ObserverSet wake its
//! reconcile (pure).

mod backoff;
mod conditions;
pub mod conflict;
pub mod copies;
pub mod member_reach;
pub mod members;
mod observe;
mod outcome;
mod pods;
mod reconcile;
mod silence;
mod status_patch;
mod wake;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::Api;
use kube::core::Selector;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{reflector, watcher, PredicateConfig, WatchStreamExt};
use kube::{Client, Resource, ResourceExt};

pub use reconcile::reconcile;

use crate::agent::AgentClient;
use crate::crd::{ObserverSet, Role};
use crate::k8s::events::{reason, Events, MemberEvents};
use crate::k8s::members::MemberClients;
use crate::k8s::scope::WatchScope;
use crate::k8s::Error;
use crate::kafka_liveness::KafkaLiveness;
use crate::metrics::Metrics;
use crate::rollout::config_map::LABEL_MANAGED_BY;
use crate::rollout::pods::KafkaPod;
use crate::shutdown::Shutdown;
use crate::writers::OPERATOR as FIELD_MANAGER;

/// What every reconcile shares.
pub struct Context {
    pub client: Client,
    pub metrics: Metrics,
    pub events: Events,
    pub agents: AgentClient,
    /// Requeue of an ObserverSet with nothing in flight (watches trigger everything else).
    pub resync: Duration,
    /// The running controller's cache of ObserverSets (replaced on every start, since a new
    /// leadership term runs a new controller): the conflict check reads the siblings from it
    /// instead of listing them on every reconcile, once it holds a complete list.
    /// One store per controller: per watched namespace (the key), or one for the whole cluster
    /// (key `None`).
    pub sets: RwLock<HashMap<Option<String>, Store<ObserverSet>>>,
    /// Only the pods these labels select are a role's pods (`--pod-selector`, the pod watch's
    /// filter too); empty: every pod of the namespace.
    pub pod_filter: Selector,
    /// Since when each pod's agent has been silent (`silence`), by pod uid: in memory only, so
    /// a restart starts the clocks again (the conservative direction).
    pub silence: Mutex<silence::Memory>,
    /// Which brokers the automation's latest scans saw alive (it publishes, we read).
    pub liveness: KafkaLiveness,
    /// Node name -> when its Ready condition was read and what it said (silent pods' Nodes
    /// only; reused for a second while a step polls fast).
    pub nodes: Mutex<HashMap<String, (Instant, bool)>>,
    /// The member clusters (`--members`) and a client for each, none in a single-cluster
    /// install.
    pub members: Option<MemberClients>,
    /// The other members' copies of every Event (`MemberEvents`).
    pub member_events: MemberEvents,
    /// The pods last seen per (ObserverSet uid, member, role): an unreachable member's pods
    /// are assumed still running (docs/multi-cluster.md, "An unreachable member is not an
    /// empty member").
    pub member_pods: Mutex<HashMap<(String, String, Role), Vec<KafkaPod>>>,
    /// When each member's copy last failed to answer (`members::resting`): such a member is
    /// not asked again for a few seconds.
    pub member_failures: Mutex<HashMap<String, Instant>>,
    /// Failed reconciles in a row per ObserverSet: the wait before each retry (`backoff`).
    failures: Mutex<backoff::Backoff<ObjectRef<ObserverSet>>>,
    /// The epoch this leadership claimed per ObserverSet (by uid: a set recreated under the
    /// same name claims again): emptied when a leadership starts (`run`), so each one claims
    /// its own (`copies`).
    claimed: Mutex<HashMap<String, i64>>,
}

impl Context {
    /// The controller's cache of ObserverSets, if it holds a complete list (never a partial one:
    /// a sibling missing from it could be a missed conflict).
    /// `namespace`: the ObserverSet's, whose siblings are wanted.
    pub fn ready_sets(&self, namespace: &str) -> Option<Store<ObserverSet>> {
        let store = {
            let stores = self.sets.read().unwrap_or_else(|e| e.into_inner());
            stores
                .get(&Some(namespace.to_owned()))
                .or_else(|| stores.get(&None))
                .cloned()?
        };
        matches!(store.wait_until_ready().now_or_never(), Some(Ok(()))).then_some(store)
    }
}

impl Context {
    pub fn new(
        client: Client,
        metrics: Metrics,
        instance: Option<String>,
        resync: Duration,
    ) -> Self {
        let events = Events::new(client.clone(), instance, metrics.clone());
        Context {
            client,
            metrics,
            events,
            agents: AgentClient::default(),
            resync,
            sets: RwLock::new(HashMap::new()),
            pod_filter: Selector::default(),
            silence: Mutex::new(silence::Memory::new()),
            liveness: KafkaLiveness::default(),
            nodes: Mutex::new(HashMap::new()),
            members: None,
            member_events: MemberEvents::default(),
            member_pods: Mutex::default(),
            member_failures: Mutex::default(),
            failures: Mutex::default(),
            claimed: Mutex::default(),
        }
    }
}

impl Context {
    /// The epoch this leadership claimed on the set `key`, if it did.
    pub fn claimed_epoch(&self, key: &str) -> Option<i64> {
        let claimed = self.claimed.lock().unwrap_or_else(|e| e.into_inner());
        claimed.get(key).copied()
    }

    fn claim_epoch(&self, key: String, epoch: i64) {
        let mut claimed = self.claimed.lock().unwrap_or_else(|e| e.into_inner());
        claimed.insert(key, epoch);
    }

    /// Only the pods `filter` selects are watched and taken as a role's pods.
    pub fn with_pod_filter(mut self, filter: Selector) -> Self {
        self.pod_filter = filter;
        self
    }

    /// The member clusters of a multi-cluster install (`--members`), with their clients.
    pub fn with_members(mut self, members: Option<MemberClients>) -> Self {
        self.member_events = MemberEvents::new(&self.events, members.as_ref());
        self.members = members;
        self
    }
}

/// Logs, counts by category, publishes a Warning Event `ReconcileFailed` with the error (what
/// `kubectl describe` shows; the recorder folds repeats into one series) and retries: after 5 s,
/// doubling with each failure of the same set in a row up to 5 minutes (`backoff`).
/// How soon a reconcile whose write lost its precondition runs again.
const SUPERSEDED_RETRY: Duration = Duration::from_millis(200);

pub fn error_policy(obj: Arc<ObserverSet>, error: &Error, ctx: Arc<Context>) -> Action {
    let object = format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any());
    tracing::warn!(observerset = %object, category = error.category(), %error, "reconcile failed; retrying");
    ctx.metrics.reconcile_failed(error.category());
    // error_policy is synchronous; the Event is best effort and must not hold up the retry.
    let events = ctx.events.clone();
    let regarding = obj.object_ref(&());
    let note = error.to_string();
    tokio::spawn(async move {
        events
            .warning(&regarding, reason::RECONCILE_FAILED, note)
            .await;
    });
    // A lost precondition is no fault to back off from: the next pass reads what won.
    if matches!(error, Error::Superseded { .. }) {
        return Action::requeue(SUPERSEDED_RETRY);
    }
    let wait = ctx
        .failures
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .failed(ObjectRef::from_obj(obj.as_ref()));
    Action::requeue(wait)
}

/// Runs the controllers until `shutdown` (or until the future is dropped on loss of
/// leadership): one per namespace of `scope`, or one for the whole cluster. A controller per
/// namespace, not one fed by several watches: a reflector's store is replaced whole by each
/// watch's initial list, so one store cannot take two namespaces' lists.
pub async fn run(client: Client, scope: WatchScope, ctx: Arc<Context>, shutdown: Shutdown) {
    tracing::info!(namespaces = %scope.describe(), pods = %scope.pods, "controllers starting");
    // A new leadership: every set's epoch is claimed again before its first write.
    ctx.claimed
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clear();
    let mut keys: Vec<Option<String>> = scope.namespaces().iter().cloned().map(Some).collect();
    if keys.is_empty() {
        keys.push(None);
    }
    let controllers = keys.into_iter().map(|key| {
        let sets: Api<ObserverSet> = scoped(&client, key.as_deref());
        let config_maps: Api<ConfigMap> = scoped(&client, key.as_deref());
        let pods: Api<Pod> = scoped(&client, key.as_deref());
        run_one(
            key,
            sets,
            config_maps,
            pods,
            &scope,
            ctx.clone(),
            shutdown.clone(),
        )
    });
    futures::future::join_all(controllers).await;
    tracing::info!("controllers stopped");
}

/// One controller over the ObserverSets, ConfigMaps and pods these `Api`s reach.
async fn run_one(
    key: Option<String>,
    sets: Api<ObserverSet>,
    config_maps: Api<ConfigMap>,
    pods_api: Api<Pod>,
    scope: &WatchScope,
    ctx: Arc<Context>,
    shutdown: Shutdown,
) {
    let siblings_api = sets.clone();
    // `Controller::new` as it builds its own watch, with one filter after the cache: the store
    // sees every write, but only a change of what a reconcile decides on wakes it (`wake`), not
    // the status writes of either loop; a failed reconcile then waits its backoff.
    let (store, writer) = reflector::store();
    let changes = reflector(
        writer,
        watcher(sets, watcher::Config::default().any_semantic()),
    )
    .applied_objects()
    .predicate_filter(wake::fingerprint, PredicateConfig::default());
    let controller = Controller::for_stream(changes, store.clone());
    ctx.sets
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, store.clone());
    let sibling_store = store.clone();
    let claims = conflict::ClaimMemory::default();
    let managed = format!("{LABEL_MANAGED_BY}={FIELD_MANAGER}");
    // Only the Kafka pods (--pod-selector): the watch and its cache never hold the other pods
    // of the namespace.
    let pod_watch = if scope.pods.selects_all() {
        watcher::Config::default()
    } else {
        watcher::Config::default().labels_from(&scope.pods)
    };
    controller
        .owns(config_maps, watcher::Config::default().labels(&managed))
        .watches(pods_api, pod_watch, move |pod| {
            pods::observer_sets_selecting(&store.state(), &pod)
        })
        // An ObserverSet created, deleted or with other selectors can start or end a conflict
        // of its siblings (src/reconciler/conflict.rs); its status writes cannot.
        .watches(siblings_api, watcher::Config::default(), move |changed| {
            if !claims.changed(&changed) {
                return Vec::new();
            }
            let siblings = sibling_store.state();
            claims.prune(&siblings);
            siblings
                .into_iter()
                .filter(|sibling| conflict::concerns(&changed, sibling))
                .map(|sibling| ObjectRef::from_obj(sibling.as_ref()))
                .collect::<Vec<_>>()
        })
        .graceful_shutdown_on(async move { shutdown.wait().await })
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|result| {
            if let Ok((object, _)) = &result {
                let mut failures = ctx.failures.lock().unwrap_or_else(|e| e.into_inner());
                failures.succeeded(object);
            }
            async move {
                match result {
                    Ok((object, action)) => tracing::debug!(%object, ?action, "reconciled"),
                    Err(error) => tracing::debug!(%error, "controller stream"),
                }
            }
        })
        .await;
}

fn scoped<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}
