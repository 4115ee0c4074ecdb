//! Promotion latency on the bed (`make bench-promotion`, driven by e2e/bench/promotion.sh).
//!
//! Each run: a topic with replicas 1,2,4 and min ISR 2 (broker 4 the observer), an acks=all
//! producer sending a record every 25 ms (retrying every 100 ms); the partition leader is stopped
//! (`kafka.sh stop`: a lost zone); the bench records, on this machine's clock, when each step of
//! the automatic promotion became visible, then starts the broker again and waits for the
//! automatic demotion.
//! Sources: metadata polled every 50 ms (ISR), watches on the ObserverSet's status and on its two
//! ConfigMaps, the producer's acknowledgements.
//!
//! Each broker's own view of the partition is polled too (`broker_views`): when the first and
//! the last live broker showed it under min ISR, relative to "visible" (brokers learn the ISR
//! change from the metadata log at different moments; the first one is the floor of any
//! detection).
//! Split (seconds): detection = stop -> under min ISR visible; then from "visible": decision
//! (status.autoPromotions lists 4), controllers written / acknowledged (their ConfigMap without 4;
//! status.roles.controller at that list with nothing pending), brokers written / acknowledged,
//! observer in the ISR, first write accepted. Floor = what Kafka and the file delivery alone take
//! (detection, each role's write -> acknowledged, brokers acknowledged -> in the ISR); overhead =
//! the rest (the engine's scans and confirmations, the operator's steps).

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use clap::Parser;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kafka_observer_operator::crd::ObserverSet;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher;
use kube::{Api, Client, Config};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;

#[path = "bench_promotion/broker_views.rs"]
mod broker_views;

const OBSERVER: i32 = 4;

#[derive(Parser)]
struct Args {
    #[arg(long)]
    kubeconfig: String,
    #[arg(long)]
    bootstrap: String,
    /// e2e/testbed/kafka.sh of this work tree.
    #[arg(long)]
    kafka_sh: String,
    #[arg(long, default_value = "kafka")]
    namespace: String,
    #[arg(long, default_value = "kafka")]
    observerset: String,
    #[arg(long, default_value_t = 5)]
    runs: usize,
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// First time each named event was seen (seconds since the epoch).
#[derive(Default)]
struct Seen(Mutex<BTreeMap<&'static str, f64>>);

impl Seen {
    fn mark(&self, what: &'static str) {
        self.0.lock().unwrap().entry(what).or_insert_with(now);
    }
    fn get(&self, what: &str) -> Option<f64> {
        self.0.lock().unwrap().get(what).copied()
    }
    fn clear(&self) {
        self.0.lock().unwrap().clear();
    }
}

fn listed(cm: &ConfigMap) -> Option<Vec<i32>> {
    let text = cm.data.as_ref()?.get("observer.ids")?;
    Some(
        text.lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .flat_map(|l| l.split([',', ' ', '\t']))
            .filter_map(|t| t.trim().parse().ok())
            .collect(),
    )
}

fn kafka_sh(args: &Args, cmd: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("bash")
        .arg(&args.kafka_sh)
        .args(cmd)
        .env("KOO_KAFKA_NAMESPACE", &args.namespace)
        .output()?;
    if !out.status.success() {
        bail!(
            "kafka.sh {cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// (leader, isr) of partition 0, or None when metadata failed.
fn partition(consumer: &BaseConsumer, topic: &str) -> Option<(i32, Vec<i32>)> {
    let md = consumer
        .fetch_metadata(Some(topic), Duration::from_millis(500))
        .ok()?;
    let p = md.topics().first()?.partitions().first()?;
    Some((p.leader(), p.isr().to_vec()))
}

async fn wait<T>(
    limit: Duration,
    what: &str,
    mut f: impl FnMut() -> Option<T>,
) -> anyhow::Result<T> {
    let start = std::time::Instant::now();
    loop {
        if let Some(v) = f() {
            return Ok(v);
        }
        if start.elapsed() > limit {
            bail!("timed out after {limit:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Nearest-rank percentile (q in 0..=1) over the runs that saw the step (a mark the watches
/// missed is NaN and left out); NaN when no run saw it.
fn percentile(v: Vec<f64>, q: f64) -> f64 {
    let mut v: Vec<f64> = v.into_iter().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

fn p50(v: Vec<f64>) -> f64 {
    percentile(v, 0.5)
}

/// Each step's own share: (name, from, to), both marks relative to under-min-ISR visible.
const SHARES: [(&str, &str, &str); 8] = [
    ("decision (scans)", "visible", "decision"),
    (
        "decision after 1st broker",
        "first broker shows it",
        "decision",
    ),
    ("controllers' write", "decision", "controllers written"),
    (
        "controllers' delivery",
        "controllers written",
        "controllers acknowledged",
    ),
    (
        "brokers' write",
        "controllers acknowledged",
        "brokers written",
    ),
    (
        "brokers' delivery",
        "brokers written",
        "brokers acknowledged",
    ),
    (
        "Kafka's ISR join",
        "brokers acknowledged",
        "observer in ISR",
    ),
    (
        "first write after",
        "observer in ISR",
        "first write accepted",
    ),
];

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let kc = Kubeconfig::read_from(&args.kubeconfig)?;
    let client =
        Client::try_from(Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?)?;
    let sets: Api<ObserverSet> = Api::namespaced(client.clone(), &args.namespace);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &args.namespace);
    let seen = Arc::new(Seen::default());
    // Armed once the broker is stopped: only changes after that count.
    let armed = Arc::new(Mutex::new(false));

    {
        let (seen, armed) = (seen.clone(), armed.clone());
        let cfg = watcher::Config::default().fields(&format!("metadata.name={}", args.observerset));
        let mut stream = watcher(sets.clone(), cfg).boxed();
        tokio::spawn(async move {
            while let Some(Ok(ev)) = stream.next().await {
                let (watcher::Event::Apply(o) | watcher::Event::InitApply(o)) = ev else {
                    continue;
                };
                if !*armed.lock().unwrap() {
                    continue;
                }
                let Some(st) = o.status else { continue };
                if st.auto_promotions.iter().any(|a| a.node_id == OBSERVER) {
                    seen.mark("decision");
                }
                for (role, key) in [
                    (&st.roles.controller, "controllers acknowledged"),
                    (&st.roles.broker, "brokers acknowledged"),
                ] {
                    if let Some(r) = role {
                        if !r.observers.contains(&OBSERVER)
                            && r.pending.is_empty()
                            && !r.acknowledged.is_empty()
                        {
                            seen.mark(key);
                        }
                    }
                }
            }
        });
    }
    {
        let (seen, armed) = (seen.clone(), armed.clone());
        let cfg = watcher::Config::default().labels(&format!(
            "kafkaobserver.io/observerset={}",
            args.observerset
        ));
        let mut stream = watcher(cms.clone(), cfg).boxed();
        tokio::spawn(async move {
            while let Some(Ok(ev)) = stream.next().await {
                let (watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)) = ev else {
                    continue;
                };
                if !*armed.lock().unwrap() {
                    continue;
                }
                let name = cm.metadata.name.clone().unwrap_or_default();
                if listed(&cm).is_some_and(|ids| !ids.contains(&OBSERVER)) {
                    if name.ends_with("-controller") {
                        seen.mark("controllers written");
                    } else if name.ends_with("-broker") {
                        seen.mark("brokers written");
                    }
                }
            }
        });
    }

    let topic = format!("bench-promotion-{}", std::process::id());
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &args.bootstrap)
        .create()?;
    let assignment: [&[i32]; 1] = [&[1, 2, OBSERVER]];
    let new = NewTopic::new(&topic, 1, TopicReplication::Variable(&assignment))
        .set("min.insync.replicas", "2");
    admin
        .create_topics(&[new], &AdminOptions::new())
        .await?
        .remove(0)
        .map_err(|(t, e)| anyhow::anyhow!("create {t}: {e}"))?;
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &args.bootstrap)
        .create()?;
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &args.bootstrap)
        .set("acks", "all")
        .set("linger.ms", "0")
        .set("message.timeout.ms", "120000")
        // Retry every 100 ms: librdkafka's default backoff grows to 1 s over the repeated
        // NOT_ENOUGH_REPLICAS answers of a partition under min ISR, which would measure the
        // client's backoff, not when the cluster accepts writes again.
        .set("retry.backoff.ms", "100")
        .set("retry.backoff.max.ms", "100")
        .create()?;
    // The producer: a record every 25 ms; acknowledgement times after the stop go to `acks`.
    let acks: Arc<Mutex<Vec<f64>>> = Arc::default();
    {
        let (acks, topic, armed) = (acks.clone(), topic.clone(), armed.clone());
        tokio::spawn(async move {
            let mut i = 0u64;
            loop {
                let (p, t, acks, armed) =
                    (producer.clone(), topic.clone(), acks.clone(), armed.clone());
                tokio::spawn(async move {
                    let key = i.to_string();
                    let rec = FutureRecord::to(&t).key(&key).payload("x");
                    if p.send(rec, Duration::from_secs(0)).await.is_ok() && *armed.lock().unwrap() {
                        acks.lock().unwrap().push(now());
                    }
                });
                i += 1;
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        });
    }

    // The engine judges an observer's lag against the last high watermark it saw while the
    // partition had a leader with a full ISR (a new leader under min ISR serves none): give it a
    // few scans of the new topic first, or the first run's promotion is rightly held back.
    tokio::time::sleep(Duration::from_secs(5)).await;
    // An automatic action shortly before (a previous bench, a drill) started a cooldown that
    // would hold the first run's promotion back: wait it out, as between runs.
    let set = sets.get(&args.observerset).await?;
    let cooldown = kafka_observer_operator::crd::parse_duration(&set.spec.promotion.cooldown)?;
    if let Some(last) = set.status.as_ref().and_then(|s| s.last_action.as_ref()) {
        let since = k8s_openapi::jiff::Timestamp::now().duration_since(last.at.0);
        let left = cooldown.as_secs_f64() + 2.0 - since.as_secs_f64();
        if left > 0.0 {
            println!("waiting {left:.0} s for the cooldown of the last automatic action");
            tokio::time::sleep(Duration::from_secs_f64(left)).await;
        }
    }
    let mut rows: Vec<BTreeMap<&'static str, f64>> = Vec::new();
    for run in 1..=args.runs {
        // Healthy start: 1 and 2 in the ISR, 4 out, nothing promoted.
        let (leader, _) = wait(Duration::from_secs(300), "ISR 1,2 without 4", || {
            partition(&consumer, &topic).filter(|(l, isr)| {
                *l > 0 && isr.contains(&1) && isr.contains(&2) && !isr.contains(&OBSERVER)
            })
        })
        .await?;
        let brokers: BTreeMap<i32, String> = consumer
            .fetch_metadata(None, Duration::from_secs(5))?
            .brokers()
            .iter()
            .map(|b| (b.id(), format!("{}:{}", b.host(), b.port())))
            .collect();
        let views = broker_views::BrokerViews::start(&brokers, &topic, leader, OBSERVER).await;
        seen.clear();
        acks.lock().unwrap().clear();
        *armed.lock().unwrap() = true;
        let stopped = now();
        kafka_sh(&args, &["stop", &leader.to_string()]).context("stop the leader")?;
        wait(Duration::from_secs(60), "under min ISR", || {
            partition(&consumer, &topic)
                .filter(|(_, isr)| !isr.contains(&leader) && !isr.contains(&OBSERVER))
                .map(|_| seen.mark("under min ISR visible"))
        })
        .await?;
        wait(Duration::from_secs(120), "4 in the ISR", || {
            partition(&consumer, &topic)
                .filter(|(_, isr)| isr.contains(&OBSERVER))
                .map(|_| seen.mark("observer in ISR"))
        })
        .await?;
        let visible = seen.get("under min ISR visible").unwrap();
        let first = wait(Duration::from_secs(60), "a write accepted", || {
            acks.lock()
                .unwrap()
                .iter()
                .copied()
                .filter(|t| *t > visible)
                .reduce(f64::min)
        })
        .await?;
        *armed.lock().unwrap() = false;
        let shown = views.finish();
        let mut row = BTreeMap::new();
        row.insert("detection", visible - stopped);
        // Each broker's own view: the first to show the partition under min ISR (negative:
        // before the bench's poll saw it) and the last of those that did.
        let earliest = shown.values().copied().reduce(f64::min);
        let latest = shown.values().copied().reduce(f64::max);
        row.insert(
            "first broker shows it",
            earliest.map(|t| t - visible).unwrap_or(f64::NAN),
        );
        row.insert(
            "last broker shows it",
            latest.map(|t| t - visible).unwrap_or(f64::NAN),
        );
        for what in [
            "decision",
            "controllers written",
            "controllers acknowledged",
            "brokers written",
            "brokers acknowledged",
            "observer in ISR",
        ] {
            row.insert(
                what,
                seen.get(what).map(|t| t - visible).unwrap_or(f64::NAN),
            );
        }
        row.insert("first write accepted", first - visible);
        println!(
            "BENCH promotion run {run} (stopped {leader}): detection {:.2} s; from under-min-ISR visible: {}",
            row["detection"],
            row.iter()
                .filter(|(k, _)| **k != "detection")
                .map(|(k, v)| format!("{k} {v:.2}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        rows.push(row);
        kafka_sh(&args, &["start", &leader.to_string()]).context("start the leader again")?;
        // Automatic demotion after the stabilization window: 4 out of the ISR again.
        wait(Duration::from_secs(300), "the demotion of 4", || {
            partition(&consumer, &topic)
                .filter(|(_, isr)| isr.contains(&leader) && !isr.contains(&OBSERVER))
        })
        .await?;
        // The demotion started the broker's cooldown: the next run measures a promotion the
        // cooldown does not hold back.
        if run < args.runs {
            let cooldown = kafka_observer_operator::crd::parse_duration(
                &sets.get(&args.observerset).await?.spec.promotion.cooldown,
            )?;
            tokio::time::sleep(cooldown + Duration::from_secs(2)).await;
        }
    }
    let col = |k: &str, q: f64| percentile(rows.iter().map(|r| r[k]).collect(), q);
    println!(
        "BENCH promotion over {} runs, seconds from under-min-ISR visible (detection: from the stop): p50 / p90",
        rows.len()
    );
    for k in [
        "detection",
        "first broker shows it",
        "last broker shows it",
        "decision",
        "controllers written",
        "controllers acknowledged",
        "brokers written",
        "brokers acknowledged",
        "observer in ISR",
        "first write accepted",
    ] {
        println!("BENCH   {k:<26} {:.2} / {:.2}", col(k, 0.5), col(k, 0.9));
    }
    println!(
        "BENCH promotion each step's own share (s): p50 / p90 (delivery = file through the kubelet + the JVM's load + the agent's report; negative: marks seen out of order)"
    );
    for (name, from, to) in SHARES {
        let share = |r: &BTreeMap<&str, f64>| r[to] - if from == "visible" { 0.0 } else { r[from] };
        let v: Vec<f64> = rows.iter().map(share).collect();
        println!(
            "BENCH   {name:<22} {:.3} / {:.3}",
            percentile(v.clone(), 0.5),
            percentile(v, 0.9)
        );
    }
    let floors: Vec<f64> = rows
        .iter()
        .map(|r| {
            (r["controllers acknowledged"] - r["controllers written"])
                + (r["brokers acknowledged"] - r["brokers written"])
                + (r["observer in ISR"] - r["brokers acknowledged"]).max(0.0)
        })
        .collect();
    let totals: Vec<f64> = rows.iter().map(|r| r["observer in ISR"]).collect();
    let (floor, total, total90) = (p50(floors), p50(totals.clone()), percentile(totals, 0.9));
    println!(
        "BENCH promotion under-min-ISR visible -> observer in ISR: p50 {total:.2} s, p90 {total90:.2} s; floor (both roles' file delivery and JVM acknowledgement, then Kafka's ISR join) p50 {floor:.2} s; above the floor {:.2} s (the engine's scans and confirmations, the operator's steps); kill -> first write accepted p50 {:.2} s",
        total - floor,
        p50(rows.iter().map(|r| r["detection"] + r["first write accepted"]).collect())
    );
    let _ = admin.delete_topics(&[&topic], &AdminOptions::new()).await;
    Ok(())
}
