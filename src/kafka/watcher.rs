//! The per-ObserverSet cluster watcher: one scan a `scan_interval`, each scan turned into a
//! `ClusterSnapshot` for the policy engine and published on a watch channel.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use tokio::sync::watch;

use super::connection::ConnectionSettings;
use super::election::{self, ElectionError, ElectionKind, ElectionOutcome};
use super::freshness::{EpochFloor, PartitionKey};
use super::glance_route::{GlanceRoute, Route};
use super::hedged_metadata::{self, hedge, HEDGE_AFTER};
use super::offset_probe::{OffsetProbe, ProbeError, DEFAULT_CONNECT_TIMEOUT};
use super::quorum::{self, QuorumError};
use super::read_order;
use super::reassignment::{self, ReassignmentError, ReorderOutcome};
use super::scan::{
    read_metadata, read_min_isr, read_offsets, Admin, MetaPartition, Metadata, Offsets,
};
use super::topic_configs;
use super::KafkaError;
use crate::promotion::{BrokerState, ClusterSnapshot, PartitionState, SourceHealth};

#[derive(Clone, Debug)]
pub struct WatcherOptions {
    /// How long one request (metadata, configs, offsets) may take.
    pub request_timeout: Duration,
    /// How long one broker may take to answer the offset probe. Shorter than `request_timeout`:
    /// a broker that does not answer (a dead pod's address often drops packets instead of
    /// refusing) must not make every snapshot older than the engine's staleness limit
    /// (3 scan intervals, at least 3 s) while the controller has not fenced it yet.
    pub probe_timeout: Duration,
    /// How long a broker may take to accept the probe's connection (see
    /// `offset_probe::DEFAULT_CONNECT_TIMEOUT`).
    pub probe_connect_timeout: Duration,
    /// Topic configs change rarely: `min.insync.replicas` is re-read this often (and for new topics).
    pub config_refresh: Duration,
}

impl Default for WatcherOptions {
    fn default() -> Self {
        WatcherOptions {
            request_timeout: Duration::from_secs(5),
            probe_timeout: Duration::from_secs(2),
            probe_connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            config_refresh: Duration::from_secs(30),
        }
    }
}

/// A probe slower than this has the scan read the metadata again before it assembles the snapshot.
const SLOW_PROBE: Duration = Duration::from_millis(100);
/// How long that second metadata read may take; without it the first one is used.
const REREAD_TIMEOUT: Duration = Duration::from_secs(1);

/// Reads one Kafka cluster. Construct with [`KafkaWatcher::new`], then call [`KafkaWatcher::scan`]
/// or hand it to [`KafkaWatcher::run`].
pub struct KafkaWatcher {
    admin: Admin,
    probe: Option<OffsetProbe>,
    /// The bootstrap servers: for the probe's diagnosis of a failed secured connection, and
    /// whom the hedged metadata read asks before a scan has answered.
    bootstrap: Vec<String>,
    options: WatcherOptions,
    min_isr: HashMap<Arc<str>, u32>,
    min_isr_read_at: Option<Instant>,
    /// The brokers (id, `host:port`) that answered the last scan's probe: whom the probe asks
    /// for the metadata, observers last (`read_order`).
    answered: Vec<(i32, String)>,
    /// The ObserverSet's observers: read only when no other broker answered, their metadata
    /// may lag behind the remote zone's link (`read_order`).
    observers: BTreeSet<i32>,
    /// Whom the glances between scans ask first (`glance_route`).
    glance_route: std::sync::Mutex<GlanceRoute>,
    /// The highest leader epoch each partition's scans showed (`freshness`).
    epochs: EpochFloor,
}

impl KafkaWatcher {
    pub fn new(settings: &ConnectionSettings, options: WatcherOptions) -> Result<Self, KafkaError> {
        // Without probe settings that match the librdkafka properties (TLS or SASL set by hand)
        // log end offsets stay unknown, and the engine then never promotes (it never acts on
        // unknown lag).
        let probe = settings.probe_security().map(|security| {
            OffsetProbe::new("kafka-observer-operator", options.probe_timeout)
                .with_connect_timeout(options.probe_connect_timeout)
                .with_security(security.clone())
        });
        Ok(KafkaWatcher {
            admin: settings.admin_client()?,
            probe,
            bootstrap: settings.bootstrap_servers.clone(),
            options,
            min_isr: HashMap::new(),
            min_isr_read_at: None,
            answered: Vec::new(),
            observers: BTreeSet::new(),
            glance_route: std::sync::Mutex::default(),
            epochs: EpochFloor::default(),
        })
    }

    /// The observers of the ObserverSet this watcher serves (`read_order`); set before each scan.
    pub fn set_observers(&mut self, observers: impl IntoIterator<Item = i32>) {
        self.observers = observers.into_iter().collect();
    }

    /// The registered brokers in the order to send them a request any broker can serve.
    fn ask_order(&self, md: &Metadata) -> Vec<(i32, String)> {
        read_order::ask_order(&md.brokers, &self.answered, &self.observers)
    }

    /// Reorders partitions' replicas (same brokers, no data moved) through any registered
    /// broker; one result per partition Kafka answered for.
    pub async fn reorder_replicas(
        &self,
        orders: &[crate::promotion::ReplicaOrder],
    ) -> Result<Vec<ReorderOutcome>, ReassignmentError> {
        let probe = self.probe.as_ref().ok_or(ReassignmentError::NoProbe)?;
        let md = self.metadata(self.options.request_timeout).await?;
        reassignment::reorder(probe, &self.ask_order(&md), orders).await
    }

    /// Runs a `kind` leader election for `partitions` through any registered broker; Kafka
    /// waits up to `timeout` for the elections. One result per partition Kafka answered for.
    pub async fn elect_leaders(
        &self,
        kind: ElectionKind,
        partitions: &[crate::promotion::TopicPartition],
        timeout: Duration,
    ) -> Result<Vec<ElectionOutcome>, ElectionError> {
        let probe = self.probe.as_ref().ok_or(ElectionError::NoProbe)?;
        let md = self.metadata(self.options.request_timeout).await?;
        election::elect(probe, &self.ask_order(&md), kind, partitions, timeout).await
    }

    /// Each KRaft voter and whether the quorum still hears from it (`quorum`), asked through
    /// the first of `brokers` (ids the scan found alive) that answers.
    pub async fn live_voters(
        &self,
        brokers: &std::collections::BTreeSet<i32>,
    ) -> Result<BTreeMap<i32, bool>, QuorumError> {
        let probe = self.probe.as_ref().ok_or(QuorumError::NoProbe)?;
        let md = self.metadata(self.options.request_timeout).await?;
        let alive: Vec<(i32, String)> = self
            .ask_order(&md)
            .into_iter()
            .filter(|(id, _)| brokers.contains(id))
            .collect();
        quorum::describe(probe, &alive).await
    }

    /// One scan. Never fails: a scan that cannot read the metadata yields an unhealthy snapshot,
    /// which the engine refuses to act on.
    pub async fn scan(&mut self) -> ClusterSnapshot {
        // Stamped with the start: what the engine sees is at least this old.
        let started = Timestamp::now();
        let mut md = match self.metadata(self.options.request_timeout).await {
            Ok(md) => md,
            Err(e) => {
                return ClusterSnapshot {
                    undescribed_topics: Vec::new(),
                    taken_at: started,
                    source: SourceHealth::Unhealthy {
                        reason: self.unreadable(e).await,
                    },
                    brokers: BTreeMap::new(),
                    partitions: Vec::new(),
                };
            }
        };
        self.refresh_min_isr(&md).await;
        let probing = Instant::now();
        let offsets = match &self.probe {
            Some(probe) => read_offsets(probe, &md).await,
            // Without the probe, trust the metadata for liveness and leave offsets unknown.
            None => Offsets {
                reachable: md.brokers.keys().map(|&b| (b, true)).collect(),
                ..Offsets::default()
            },
        };
        for e in &offsets.errors {
            tracing::debug!(error = %e, "offset probe failed");
        }
        if probing.elapsed() >= SLOW_PROBE {
            // A broker kept the probe waiting (a stopped pod until the controller fences it):
            // the ISR and leaders are read again so that what the fencing changed meanwhile is
            // seen now, not a scan later. Offsets stay those of the probe.
            if let Ok(fresh) = self
                .metadata(self.options.request_timeout.min(REREAD_TIMEOUT))
                .await
            {
                md = fresh;
            }
        }
        self.answered = md
            .brokers
            .iter()
            .filter(|(b, _)| offsets.reachable.get(b) == Some(&true))
            .map(|(&b, address)| (b, address.clone()))
            .collect();
        let stale = self.epochs.check(&md);
        if !stale.is_empty() {
            tracing::info!(
                partitions = stale.len(),
                "the metadata that answered is older than already seen for some partitions (a leader epoch below the highest seen): their state is unknown for this scan"
            );
        }
        assemble(started, &md, &self.min_isr, &offsets, &stale)
    }

    /// The metadata a decision is made on. Once a scan has answered: the first answer of the
    /// brokers that answered it, observers last (`read_order`), with librdkafka's read as the
    /// hedge after [`HEDGE_AFTER`]. Before: [`Self::librdkafka_first`].
    async fn metadata(&self, timeout: Duration) -> Result<Metadata, KafkaError> {
        let sources = read_order::metadata_sources(&self.answered, &self.observers);
        let Some(probe) = self.probe.as_ref().filter(|_| !sources.is_empty()) else {
            return self.librdkafka_first(timeout).await;
        };
        let from_sources = async {
            let answer =
                tokio::time::timeout(timeout, hedged_metadata::first_answer(probe, &sources))
                    .await
                    .map_err(|_| {
                        KafkaError::Metadata(format!("no broker answered within {timeout:?}"))
                    })?;
            match answer {
                Some(Ok(md)) => Ok(md),
                Some(Err(e)) => Err(KafkaError::Metadata(e.to_string())),
                None => Err(KafkaError::Metadata("no broker to ask".to_string())),
            }
        };
        hedge(from_sources, HEDGE_AFTER, || async {
            backup_answer(read_metadata(&self.admin, timeout).await, "librdkafka")
        })
        .await
    }

    /// librdkafka's metadata (one request on a connection it keeps), or, when that has not
    /// come within [`HEDGE_AFTER`], the first answer the probe gets from the brokers that
    /// answered the last scan (observers last; the bootstrap servers before any did). For the
    /// glances between scans, ten a second: they only start a scan early, never decide, so a
    /// lagging broker's answer costs at most a scan interval there.
    async fn librdkafka_first(&self, timeout: Duration) -> Result<Metadata, KafkaError> {
        let librdkafka = read_metadata(&self.admin, timeout);
        let Some(probe) = &self.probe else {
            return librdkafka.await;
        };
        hedge(librdkafka, HEDGE_AFTER, || async {
            let mut ask = read_order::metadata_sources(&self.answered, &self.observers);
            if ask.is_empty() {
                ask = hedged_metadata::bootstrap_candidates(&self.bootstrap);
            }
            backup_answer(
                hedged_metadata::first_answer(probe, &ask).await?,
                "the probe",
            )
        })
        .await
    }

    /// Why the metadata could not be read. librdkafka's error for an untrusted certificate or a
    /// wrong password names neither the Secret nor the key; on a secured connection the probe
    /// then connects to the first bootstrap server once, and when TLS or SASL is what fails
    /// there, that is the reason (it names the Secret and the key to fix), librdkafka's after it.
    async fn unreadable(&self, error: KafkaError) -> String {
        let (Some(probe), Some(address)) = (
            self.probe.as_ref().filter(|p| p.is_secured()),
            self.bootstrap.first(),
        ) else {
            return error.to_string();
        };
        match probe.check_connection(address).await {
            Err(ProbeError::Tls { source, .. }) => {
                format!(
                    "TLS with bootstrap server {address} failed: {source} (librdkafka: {error})"
                )
            }
            Err(ProbeError::Sasl { source, .. }) => {
                format!("bootstrap server {address}: {source} (librdkafka: {error})")
            }
            _ => error.to_string(),
        }
    }

    /// A glance between scans: the metadata alone (one request; no configs, no offsets), with
    /// the last known `min.insync.replicas`, every registered broker taken as reachable and
    /// every offset unknown. Good for noticing that the ISR changed, never for deciding: the
    /// engine decides only on full scans. Returns the snapshot and what the glance cost the
    /// cluster (`glance_route`: the read that answered, not the wait on a silent broker).
    pub async fn glance(&self) -> Result<(ClusterSnapshot, Duration), KafkaError> {
        let started = Timestamp::now();
        let at = Instant::now();
        let route = self.lock_glance_route().route(at);
        let timeout = self.options.request_timeout;
        let md = match route {
            Route::LibrdkafkaFirst => self.librdkafka_first(timeout).await,
            Route::ProbeFirst => self.metadata(timeout).await,
        };
        let cost = self.lock_glance_route().glanced(route, at, at.elapsed());
        let md = md?;
        let offsets = Offsets {
            reachable: md.brokers.keys().map(|&b| (b, true)).collect(),
            ..Offsets::default()
        };
        // A glance never decides: no freshness judgement, nothing unknown.
        Ok((
            assemble(started, &md, &self.min_isr, &offsets, &HashSet::new()),
            cost,
        ))
    }

    fn lock_glance_route(&self) -> std::sync::MutexGuard<'_, GlanceRoute> {
        self.glance_route.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn refresh_min_isr(&mut self, md: &Metadata) {
        let mut topics: Vec<Arc<str>> = md.partitions.iter().map(|p| p.topic.clone()).collect();
        topics.dedup();
        let due = self
            .min_isr_read_at
            .is_none_or(|t| t.elapsed() >= self.options.config_refresh);
        if !due && topics.iter().all(|t| self.min_isr.contains_key(t)) {
            return;
        }
        if let Some(probe) = &self.probe {
            let ask = self.ask_order(md);
            let read = topic_configs::read_min_isr(probe, &ask, &topics);
            match tokio::time::timeout(self.options.request_timeout, read).await {
                Ok(Ok(min_isr)) => {
                    self.min_isr = min_isr;
                    self.min_isr_read_at = Some(Instant::now());
                    return;
                }
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "DescribeConfigs on the probe failed; asking librdkafka")
                }
                Err(_) => {
                    tracing::debug!("DescribeConfigs on the probe timed out; asking librdkafka")
                }
            }
        }
        let any_broker = md.brokers.keys().next().copied();
        self.min_isr = read_min_isr(
            &self.admin,
            &topics,
            any_broker,
            self.options.request_timeout,
        )
        .await;
        self.min_isr_read_at = Some(Instant::now());
    }

    /// Scans every `interval` and publishes each snapshot, until every receiver is dropped.
    pub async fn run(
        mut self,
        interval: Duration,
        publish: watch::Sender<Option<Arc<ClusterSnapshot>>>,
    ) {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                _ = publish.closed() => return,
            }
            let snapshot = self.scan().await;
            if publish.send(Some(Arc::new(snapshot))).is_err() {
                return;
            }
        }
    }
}

/// The hedge's own answer, logged: `from` answered after the first read had not within
/// [`HEDGE_AFTER`], or failed too.
fn backup_answer<E: std::fmt::Display>(
    answer: Result<Metadata, E>,
    from: &str,
) -> Option<Metadata> {
    match answer {
        Ok(md) => {
            tracing::debug!(
                "metadata from {from}: the first read had not answered within {HEDGE_AFTER:?}"
            );
            Some(md)
        }
        Err(e) => {
            tracing::debug!(error = %e, "the metadata request of {from} failed too");
            None
        }
    }
}

fn assemble(
    taken_at: Timestamp,
    md: &Metadata,
    min_isr: &HashMap<Arc<str>, u32>,
    offsets: &Offsets,
    stale: &HashSet<PartitionKey>,
) -> ClusterSnapshot {
    let mut brokers: BTreeMap<i32, BrokerState> = md
        .brokers
        .keys()
        .map(|&b| {
            (
                b,
                BrokerState {
                    registered: true,
                    reachable: offsets.reachable.get(&b).copied().unwrap_or(false),
                },
            )
        })
        .collect();
    let partitions = md
        .partitions
        .iter()
        .map(|p| {
            for r in &p.replicas {
                brokers.entry(*r).or_insert(BrokerState {
                    registered: false,
                    reachable: false,
                });
            }
            // Stale (`freshness`): unknown to the engine this scan, and its high watermark
            // (read from the leader an old view names) is no witness.
            let fresh = !stale.contains(&(p.topic.clone(), p.partition));
            PartitionState {
                topic: p.topic.to_string(),
                partition: p.partition,
                replicas: p.replicas.clone(),
                isr: p.isr.clone(),
                leader: p.leader,
                min_isr: min_isr.get(&p.topic).copied(),
                high_watermark: offsets
                    .high_watermark
                    .get(&(p.topic.clone(), p.partition))
                    .copied()
                    .filter(|_| fresh),
                log_end_offsets: p
                    .replicas
                    .iter()
                    .filter_map(|&r| {
                        offsets
                            .log_end
                            .get(&(p.topic.clone(), p.partition, r))
                            .map(|&o| (r, o))
                    })
                    .collect(),
                metadata_stale: !fresh,
            }
        })
        .collect();
    ClusterSnapshot {
        undescribed_topics: md.undescribed.clone(),
        taken_at,
        source: SourceHealth::Healthy,
        brokers,
        partitions,
    }
}

/// Benchmark support: the raw results of a scan of a synthetic cluster (every replica caught up),
/// so the cost of turning them into a snapshot can be measured without a cluster.
#[doc(hidden)]
pub struct SyntheticScan {
    md: Metadata,
    min_isr: HashMap<Arc<str>, u32>,
    offsets: Offsets,
}

#[doc(hidden)]
impl SyntheticScan {
    /// `partitions` partitions of 100 per topic, replication `rf` over brokers `1..=brokers`.
    pub fn new(partitions: usize, brokers: i32, rf: usize) -> Self {
        let mut md = Metadata::default();
        let mut offsets = Offsets::default();
        let mut min_isr = HashMap::new();
        for b in 1..=brokers {
            md.brokers.insert(b, format!("127.0.1.{b}:9092"));
            offsets.reachable.insert(b, true);
        }
        let mut topic: Arc<str> = Arc::from("");
        for i in 0..partitions {
            if i % 100 == 0 {
                topic = Arc::from(format!("topic-{:05}", i / 100));
                min_isr.insert(topic.clone(), 2);
            }
            let partition = (i % 100) as i32;
            let replicas: Vec<i32> = (0..rf)
                .map(|k| ((i + k) % brokers as usize) as i32 + 1)
                .collect();
            for &r in &replicas {
                offsets
                    .log_end
                    .insert((topic.clone(), partition, r), 1_000_000 + i as i64);
            }
            offsets
                .high_watermark
                .insert((topic.clone(), partition), 1_000_000 + i as i64);
            md.partitions.push(MetaPartition {
                topic: topic.clone(),
                partition,
                leader: replicas.first().copied(),
                isr: replicas.clone(),
                replicas,
                topic_id: None,
                leader_epoch: None,
            });
        }
        SyntheticScan {
            md,
            min_isr,
            offsets,
        }
    }

    /// What [`KafkaWatcher::scan`] does with the raw results.
    pub fn assemble(&self) -> ClusterSnapshot {
        assemble(
            Timestamp::now(),
            &self.md,
            &self.min_isr,
            &self.offsets,
            &HashSet::new(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_partition_is_unknown_in_the_snapshot_and_the_others_are_not() {
        let synthetic = SyntheticScan::new(2, 3, 3);
        let first = synthetic.md.partitions[0].clone();
        let stale = HashSet::from([(first.topic.clone(), first.partition)]);
        let snapshot = assemble(
            Timestamp::now(),
            &synthetic.md,
            &synthetic.min_isr,
            &synthetic.offsets,
            &stale,
        );
        let state = |i: usize| &snapshot.partitions[i];
        assert!(state(0).metadata_stale && state(0).high_watermark.is_none());
        assert!(!state(1).metadata_stale && state(1).high_watermark.is_some());
        // The engine's own reading of it: unknown, even when the old view shows it offline.
        let mut offline = state(0).clone();
        offline.leader = None;
        offline.isr.clear();
        let brokers_gone = ClusterSnapshot {
            brokers: BTreeMap::new(),
            ..snapshot.clone()
        };
        assert_eq!(
            crate::promotion::assess(&offline, &brokers_gone, |_| false),
            crate::promotion::Health::Unknown
        );
        offline.metadata_stale = false;
        assert_eq!(
            crate::promotion::assess(&offline, &brokers_gone, |_| false),
            crate::promotion::Health::Offline
        );
    }
}
