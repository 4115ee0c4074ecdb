//! The stand-in's main loop, after the kubelet's `syncLoop`: pod events from
//! a watch of pods bound to this node, a 500 ms housekeeping tick that syncs
//! due pods, supervises sidecars and reports status, and shutdown on a signal.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::{future::join_all, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, Resource, ResourceExt};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::json;

use crate::error::Error;
use crate::local_command::{self, PodFacts};
use crate::node::NodeAgent;
use crate::pod_state::{fingerprint, observe_main, PodState};
use crate::pods_file::{LocalPod, PodsFile};
use crate::resync::ResyncSchedule;
use crate::sidecars::Sidecars;
use crate::status::pod_status;
use crate::volumes::sync_pod_volumes;

/// How often pids are polled, sidecars reaped and status reported.
pub const TICK: Duration = Duration::from_millis(500);
const FIELD_MANAGER: &str = "kubelet-standin";

/// Settings from the command line.
pub struct Settings {
    pub node_name: String,
    pub node_ip: Ipv4Addr,
    pub sync_period: Duration,
    pub jitter: f64,
    pub image_bins: BTreeMap<String, PathBuf>,
}

struct Standin {
    client: Client,
    settings: Settings,
    local: BTreeMap<String, LocalPod>,
    pods: Store<Pod>,
    configmaps: BTreeMap<String, Store<ConfigMap>>,
    schedule: ResyncSchedule<String>,
    states: BTreeMap<String, PodState>,
    sidecars: Sidecars,
    recorder: Recorder,
    ignored: BTreeSet<String>,
    /// The pod store holds the first complete list (before that it is empty).
    listed: bool,
    rng: StdRng,
    base_env: BTreeMap<String, String>,
}

/// Runs until SIGTERM or SIGINT; then stops the sidecars.
pub async fn run(client: Client, pods_file: PodsFile, settings: Settings) -> Result<(), Error> {
    let node = NodeAgent::new(client.clone(), &settings.node_name, settings.node_ip);
    while let Err(error) = node.register().await {
        tracing::warn!(%error, "cannot register the node yet; retrying in 2 s");
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    tokio::spawn(node.run());

    let mut configmaps = BTreeMap::new();
    for namespace in pods_file.namespaces() {
        let (store, writer) = reflector::store();
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
        let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()));
        tokio::spawn(drain(
            stream.default_backoff(),
            format!("configmaps in {namespace}"),
        ));
        configmaps.insert(namespace, store);
    }
    // A ConfigMap read before the first list completes would look deleted.
    for (namespace, store) in &configmaps {
        store.wait_until_ready().await.ok();
        tracing::info!(%namespace, count = store.len(), "configmap cache ready");
    }

    let (pods, writer) = reflector::store();
    let selector = format!("spec.nodeName={}", settings.node_name);
    let pod_api: Api<Pod> = Api::all(client.clone());
    let mut pod_events = reflector::reflector(
        writer,
        watcher(pod_api, watcher::Config::default().fields(&selector)),
    )
    .default_backoff()
    .boxed();

    let reporter = Reporter {
        controller: "kubelet".into(),
        instance: Some(settings.node_name.clone()),
    };
    let base_env = std::env::var("PATH")
        .map(|path| BTreeMap::from([("PATH".to_string(), path)]))
        .unwrap_or_default();
    let mut standin = Standin {
        recorder: Recorder::new(client.clone(), reporter),
        client,
        schedule: ResyncSchedule::new(settings.sync_period, settings.jitter),
        settings,
        local: pods_file
            .pods
            .iter()
            .map(|p| (p.key(), p.clone()))
            .collect(),
        pods,
        configmaps,
        states: BTreeMap::new(),
        sidecars: Sidecars::new(pods_file.logs_dir.clone(), pods_file.pids_dir.clone()),
        ignored: BTreeSet::new(),
        listed: false,
        rng: StdRng::from_os_rng(),
        base_env,
    };

    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing a SIGTERM handler cannot fail on Linux");
    loop {
        tokio::select! {
            event = pod_events.next() => match event {
                Some(Ok(event)) => standin.on_pod_event(event).await,
                Some(Err(error)) => tracing::warn!(%error, "pod watch error; the watcher retries"),
                None => break,
            },
            _ = ticker.tick() => standin.tick().await,
            _ = sigterm.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    tracing::info!("stopping: killing sidecars");
    standin.sidecars.stop_all().await;
    Ok(())
}

async fn drain<S, T>(stream: S, what: String)
where
    S: futures::Stream<Item = Result<T, watcher::Error>>,
{
    futures::pin_mut!(stream);
    while let Some(item) = stream.next().await {
        if let Err(error) = item {
            tracing::warn!(%error, "watch of {what} failed; the watcher retries");
        }
    }
}

impl Standin {
    async fn on_pod_event(&mut self, event: watcher::Event<Pod>) {
        match event {
            // The store already holds an applied pod: an update is synced now, not at the next tick.
            watcher::Event::Apply(pod) => {
                self.pod_seen(pod).await;
                self.sync_due().await;
            }
            // A (re-)list: the store swaps in the new list only at InitDone.
            watcher::Event::InitApply(pod) => self.pod_seen(pod).await,
            watcher::Event::InitDone => {
                self.listed = true;
                self.sync_due().await;
            }
            // Deletions (and pods gone after a re-list) are noticed on the next tick.
            watcher::Event::Delete(_) | watcher::Event::Init => {}
        }
    }

    async fn pod_seen(&mut self, pod: Pod) {
        let key = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
        let Some(local) = self.local.get(&key) else {
            if self.ignored.insert(key.clone()) {
                tracing::info!(pod = %key, "pod bound to this node is not in the pods file; ignoring it");
            }
            return;
        };
        let uid = pod.uid().unwrap_or_default();
        let now = Instant::now();
        let state = self.states.get(&key);
        if state.is_none_or(|s| s.uid != uid) {
            tracing::info!(pod = %key, %uid, "pod added");
            self.states
                .insert(key.clone(), PodState::new(&pod, &local.main_container));
            self.schedule.request_now(key.clone(), now);
        } else if let Some(state) = self.states.get_mut(&key) {
            let current = fingerprint(&pod);
            if state.fingerprint != current {
                tracing::info!(pod = %key, "pod updated; syncing now");
                state.fingerprint = current;
                self.schedule.request_now(key.clone(), now);
            }
        }
        if pod.metadata.deletion_timestamp.is_some() {
            self.finish_deletion(&key, &pod).await;
        }
    }

    /// The kubelet's part of a pod deletion: stop the containers, then remove
    /// the object. The main process is the bed's and is left running.
    async fn finish_deletion(&mut self, key: &str, pod: &Pod) {
        let Some(state) = self.states.get_mut(key) else {
            return;
        };
        if state.deleting {
            return;
        }
        state.deleting = true;
        self.sidecars.retain(|(pod_key, _)| pod_key != key).await;
        let api: Api<Pod> =
            Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
        let params = DeleteParams::default()
            .grace_period(0)
            .preconditions(Preconditions {
                uid: pod.uid(),
                resource_version: None,
            });
        match api.delete(&pod.name_any(), &params).await {
            Ok(_) => {
                tracing::info!(pod = %key, "pod deleted; its main process keeps running (the bed owns it)")
            }
            Err(error) => tracing::warn!(pod = %key, %error, "cannot finish pod deletion"),
        }
    }

    async fn tick(&mut self) {
        self.sidecars.poll();
        if !self.listed {
            return;
        }
        self.forget_gone_pods().await;
        self.sync_due().await;
        self.report_statuses().await;
    }

    async fn sync_due(&mut self) {
        if !self.listed {
            return;
        }
        let now = Instant::now();
        for key in self.schedule.due(now) {
            self.sync_pod(&key, now).await;
        }
    }

    async fn forget_gone_pods(&mut self) {
        let present: BTreeSet<String> = self
            .pods
            .state()
            .iter()
            .map(|p| format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any()))
            .collect();
        let gone: Vec<String> = self
            .states
            .keys()
            .filter(|k| !present.contains(*k))
            .cloned()
            .collect();
        for key in gone {
            tracing::info!(pod = %key, "pod gone");
            self.states.remove(&key);
            self.schedule.forget(&key);
            self.sidecars.retain(|(pod_key, _)| *pod_key != key).await;
        }
    }

    fn pod(&self, key: &str) -> Option<Pod> {
        let (namespace, name) = key.split_once('/')?;
        self.pods
            .get(&ObjectRef::new(name).within(namespace))
            .map(|p| (*p).clone())
    }

    /// One pod sync: volumes, then (once they are set up) the sidecars.
    async fn sync_pod(&mut self, key: &str, now: Instant) {
        let (Some(pod), Some(local)) = (self.pod(key), self.local.get(key).cloned()) else {
            self.schedule.forget(&key.to_string());
            return;
        };
        if self.states.get(key).is_none_or(|s| s.deleting) {
            self.schedule.forget(&key.to_string());
            return;
        }
        let namespace = local.namespace.clone();
        let store = self.configmaps.get(&namespace);
        let lookup = |name: &str| {
            store
                .and_then(|s| s.get(&ObjectRef::new(name).within(&namespace)))
                .map(|cm| (*cm).clone())
        };
        let result = sync_pod_volumes(&local, &pod, lookup);
        match &result {
            Ok(()) => {
                self.start_sidecars(&local, &pod).await;
                self.schedule.synced(key.to_string(), now, &mut self.rng);
            }
            Err(message) => {
                tracing::warn!(pod = %key, %message, "pod cannot start");
                self.publish_failed_mount(&pod, message).await;
                self.schedule.failed(key.to_string(), now, &mut self.rng);
            }
        }
        if let Some(state) = self.states.get_mut(key) {
            state.volumes = Some(result);
        }
    }

    async fn start_sidecars(&mut self, local: &LocalPod, pod: &Pod) {
        let key = local.key();
        let facts = PodFacts {
            name: local.name.clone(),
            namespace: local.namespace.clone(),
            uid: pod.uid().unwrap_or_default(),
            node_name: self.settings.node_name.clone(),
            pod_ip: local.pod_ip.to_string(),
            host_ip: self.settings.node_ip.to_string(),
            service_account: pod
                .spec
                .as_ref()
                .and_then(|s| s.service_account_name.clone())
                .unwrap_or_else(|| "default".into()),
        };
        let containers = pod.spec.iter().flat_map(|s| s.containers.iter());
        let mut commands = BTreeMap::new();
        for container in containers.filter(|c| c.name != local.main_container) {
            let mounts = local_command::mount_map(container, &local.volumes_dir, &local.mounts);
            let resolved = local_command::resolve(
                container,
                &facts,
                &self.settings.image_bins,
                &mounts,
                &self.base_env,
            );
            match &resolved {
                Ok(command) => {
                    let sidecar_key = (key.clone(), container.name.clone());
                    let earlier = pod
                        .status
                        .as_ref()
                        .and_then(|s| s.container_statuses.as_ref())
                        .and_then(|cs| cs.iter().find(|c| c.name == container.name))
                        .map_or(0, |c| c.restart_count);
                    let (dir, command) = (local.pod_dir(), command.clone());
                    self.sidecars
                        .ensure(sidecar_key, &local.name, &dir, command, earlier)
                        .await;
                }
                Err(error) => {
                    tracing::debug!(pod = %key, container = %container.name, %error, "sidecar not run")
                }
            }
            commands.insert(container.name.clone(), resolved);
        }
        if let Some(state) = self.states.get_mut(&key) {
            state.commands = commands;
        }
    }

    async fn publish_failed_mount(&self, pod: &Pod, message: &str) {
        let event = KubeEvent {
            type_: EventType::Warning,
            reason: "FailedMount".into(),
            note: Some(message.to_string()),
            action: "MountVolume".into(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &pod.object_ref(&())).await {
            tracing::warn!(%error, "cannot publish FailedMount event");
        }
    }

    /// Observes every pod's main process (concurrently) and writes changed statuses.
    async fn report_statuses(&mut self) {
        let keys: Vec<String> = self
            .states
            .iter()
            .filter(|(_, s)| !s.deleting)
            .map(|(k, _)| k.clone())
            .collect();
        let observations = join_all(keys.iter().map(|key| observe_main(&self.local[key]))).await;
        let host_ip = self.settings.node_ip.to_string();
        for (key, observation) in keys.into_iter().zip(observations) {
            let (Some(pod), Some(local)) = (self.pod(&key), self.local.get(&key)) else {
                continue;
            };
            let Some(state) = self.states.get_mut(&key) else {
                continue;
            };
            state.record_main(&observation);
            let input = state.status_input(local, &pod, &host_ip, &observation, &self.sidecars);
            let previous = state.written.as_ref().or(pod.status.as_ref());
            let status = pod_status(&input, previous, Timestamp::now());
            if state.written.as_ref() == Some(&status) {
                continue;
            }
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &local.namespace);
            let patch = json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": local.name, "namespace": local.namespace},
                "status": status,
            });
            let params = PatchParams::apply(FIELD_MANAGER).force();
            match api
                .patch_status(&local.name, &params, &Patch::Apply(patch))
                .await
            {
                Ok(_) => {
                    let ready = status
                        .conditions
                        .iter()
                        .flatten()
                        .find(|c| c.type_ == "Ready")
                        .map(|c| c.status.clone());
                    tracing::info!(pod = %key, phase = ?status.phase, ?ready, restarts = state.main_restarts, "pod status written");
                    state.written = Some(status);
                }
                Err(error) => {
                    tracing::warn!(pod = %key, %error, "cannot write pod status; retrying")
                }
            }
        }
    }
}
