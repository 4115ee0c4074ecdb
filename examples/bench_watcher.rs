//! The watcher against the test bed's real Kafka (the example StatefulSets of examples/kafka/ on
//! the bed's node, reached through the kafka-bootstrap Service and the brokers' pod IPs): scan
//! cost (metadata, configs, every broker's offsets) with the bed's topics plus ~1k and then ~5k
//! partitions, and the latency from a metadata change (broker 2 leaving: a controlled shutdown,
//! `kafka.sh restart` deleting its pod gracefully; then lost, `kafka.sh stop`: SIGKILL and the pod
//! down until started) to the engine's detection and to its promotion decision, scanning every
//! second with 2 confirmations.
//! Needs KOO_TESTBED=<abs .testbed>; creates `policy-bench-*` topics and deletes them at the end;
//! brings broker 2 back. `POLICY_BENCH_PARTITIONS=1000,4000` sets the topic sizes added in turn.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kafka_observer_operator::kafka::{ConnectionSettings, KafkaWatcher, WatcherOptions};
use kafka_observer_operator::promotion::{
    decide, CompiledTopicFilter, PolicyConfig, PolicyHistory, PromotionPolicy, SourceHealth,
};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::ClientConfig;

async fn timed_scans(w: &mut KafkaWatcher, runs: usize) -> (usize, Duration, Duration) {
    let mut times = Vec::new();
    let mut n = 0;
    for _ in 0..runs {
        let start = Instant::now();
        let snap = w.scan().await;
        times.push(start.elapsed());
        assert_eq!(snap.source, SourceHealth::Healthy, "scan failed");
        n = snap.partitions.len();
    }
    times.sort();
    (n, times[runs / 2], times[runs - 1])
}

async fn create(
    admin: &AdminClient<DefaultClientContext>,
    name: &str,
    partitions: i32,
    assignment: Option<&[i32]>,
) {
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(120)));
    let _ = admin.delete_topics(&[name], &opts).await;
    let manual = assignment.map(|a| [a]);
    for _ in 0..60 {
        let replication = match &manual {
            Some(m) => TopicReplication::Variable(m),
            None => TopicReplication::Fixed(3),
        };
        let topic = NewTopic::new(name, partitions, replication).set("min.insync.replicas", "2");
        match &admin
            .create_topics(&[topic], &opts)
            .await
            .expect("create_topics")[0]
        {
            Ok(_) => return,
            Err((_, e)) => eprintln!("create {name}: {e:?}, retrying"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("cannot create {name}");
}

async fn wait_led(w: &mut KafkaWatcher, prefix: &str, expected: usize) {
    let start = Instant::now();
    loop {
        let snap = w.scan().await;
        let led = snap
            .partitions
            .iter()
            .filter(|p| p.topic.starts_with(prefix) && p.leader.is_some())
            .count();
        if led >= expected {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(600),
            "only {led} of {expected} partitions led after 600 s"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

fn config(topic: &str) -> PolicyConfig {
    PolicyConfig {
        policy: PromotionPolicy::UnderMinIsr,
        observers: BTreeSet::from([4]),
        promoted: BTreeSet::new(),
        acknowledged_observers: BTreeSet::from([4]),
        max_lag_messages: 1000,
        confirmations: 2,
        cooldown: Duration::from_secs(300),
        max_concurrent_promotions: 1,
        topics: CompiledTopicFilter::new([format!("^{topic}$")], Vec::<String>::new()).unwrap(),
        dry_run: false,
        auto_demote_after: None,
        unclean_takeover: false,
        stale_after: Duration::from_secs(3),
    }
}

/// Scans every second from `t0` until the engine promotes; prints detection and decision times.
async fn latency(w: &mut KafkaWatcher, topic: &str, what: &str, t0: Instant) {
    let cfg = config(topic);
    let mut history = PolicyHistory::default();
    let mut detected = None;
    let mut last_reasons = String::from("-");
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let mut snap = w.scan().await;
        snap.partitions.retain(|p| p.topic == topic);
        let decided_start = Timestamp::now();
        let d = decide(&snap, &cfg, &history, decided_start);
        let engine =
            Duration::try_from(Timestamp::now().duration_since(snap.taken_at)).unwrap_or_default();
        if d.triggered_partitions() > 0 && detected.is_none() {
            detected = Some(t0.elapsed());
        }
        if !d.actions.is_empty() {
            println!(
                "{what:<38} detection={:>6.2} s  promotion decision={:>6.2} s  (scan start to decision {:.1} ms)",
                detected.unwrap_or_default().as_secs_f64(),
                t0.elapsed().as_secs_f64(),
                engine.as_secs_f64() * 1e3
            );
            return;
        }
        let why = kafka_observer_operator::promotion::joined(&d.reasons);
        if why != last_reasons {
            eprintln!(
                "  {:>6.2} s  {}",
                t0.elapsed().as_secs_f64(),
                if why.is_empty() {
                    "(nothing to do)"
                } else {
                    &why
                }
            );
            last_reasons = why;
        }
        history = d.next_history;
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "{what}: no decision within 120 s: {:?}",
            d.reasons
        );
    }
}

async fn healthy(w: &mut KafkaWatcher, topic: &str) {
    let start = Instant::now();
    loop {
        let snap = w.scan().await;
        if snap.is_alive(2)
            && snap.partitions.iter().any(|p| {
                p.topic == topic && p.isr.contains(&1) && p.isr.contains(&2) && p.leader.is_some()
            })
        {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(180),
            "{topic} not healthy after 180 s"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::main]
async fn main() {
    let bed = match std::env::var("KOO_TESTBED") {
        Ok(v) if v != "off" => v,
        _ => {
            println!("bench_watcher: skipped (KOO_TESTBED not set or off)");
            return;
        }
    };
    let testbed = koo_testbed::TestBed::at(bed.into()).expect("the bed named by KOO_TESTBED");
    let bootstrap = testbed.kafka_bootstrap();
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    let mut w = KafkaWatcher::new(
        &ConnectionSettings::from_bootstrap(&bootstrap),
        WatcherOptions::default(),
    )
    .unwrap();
    let (n, median, max) = timed_scans(&mut w, 10).await;
    let base = n;
    println!(
        "{:<38} partitions={n:>6}  median={:>8.1} ms  max={:>8.1} ms",
        "real scan, bed as found",
        median.as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3
    );

    let sizes: Vec<i32> = std::env::var("POLICY_BENCH_PARTITIONS")
        .unwrap_or_else(|_| "1000,4000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let mut added = 0usize;
    let mut created = Vec::new();
    for (i, size) in sizes.iter().enumerate() {
        let name = format!("policy-bench-{i}");
        create(&admin, &name, *size, None).await;
        created.push(name);
        added += *size as usize;
        wait_led(&mut w, "policy-bench-", added).await;
        let (n, median, max) = timed_scans(&mut w, 10).await;
        println!(
            "{:<38} partitions={n:>6}  median={:>8.1} ms  max={:>8.1} ms",
            format!("real scan, +{added} partitions RF3"),
            median.as_secs_f64() * 1e3,
            max.as_secs_f64() * 1e3
        );
    }
    let names: Vec<&str> = created.iter().map(String::as_str).collect();
    let _ = admin
        .delete_topics(
            &names,
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(120))),
        )
        .await;
    // Deleting thousands of partitions loads the brokers for a while: measure latency after.
    let start = Instant::now();
    loop {
        let (n, median, _) = timed_scans(&mut w, 3).await;
        if n <= base + 50 && median < Duration::from_millis(200)
            || start.elapsed() > Duration::from_secs(300)
        {
            break;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }

    let topic = "policy-bench-latency";
    create(&admin, topic, 1, Some(&[1, 2, 4])).await;
    healthy(&mut w, topic).await;
    // The bed's own ObserverSet (an automatic policy once the drill or the tests applied the
    // example) must not promote broker 4 on the real cluster meanwhile: held at Manual, and held
    // before t0 so that the node commands below cost no API calls of their own.
    let manual = testbed
        .hold_manual_policy()
        .expect("the bed's ObserverSet held at Manual");
    // Graceful: the pod deleted (SIGTERM, controlled shutdown) and replaced; `restart` returns
    // once the replacement is Ready, long after the decision.
    let t0 = Instant::now();
    let restarter = std::thread::spawn({
        let testbed = testbed.clone();
        move || testbed.restart_node(2)
    });
    latency(
        &mut w,
        topic,
        "broker 2 controlled shutdown (pod deleted)",
        t0,
    )
    .await;
    restarter
        .join()
        .unwrap()
        .expect("kafka.sh restart 2: replacement Ready");
    healthy(&mut w, topic).await;
    // Lost: SIGKILL, and the pod stays down until started (a `kill` alone would have the kubelet
    // restart the container within seconds). The guard starts it again, also on a panic.
    let t0 = Instant::now();
    let stopped = testbed.stop_node(2).expect("kafka.sh stop 2");
    latency(&mut w, topic, "broker 2 lost (SIGKILL, pod down)", t0).await;
    stopped.start().expect("kafka.sh start 2");
    manual
        .release()
        .expect("the ObserverSet's policy given back");
    let _ = admin.delete_topics(&[topic], &AdminOptions::new()).await;
}
