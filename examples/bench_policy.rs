//! Cost of one watcher cycle without the network at 1k, 10k and 50k partitions: turning a scan's
//! raw results into a snapshot (the watcher's own code) and the policy engine's decision.
//! Run: `cargo run --release --example bench_policy` (prints one line per case). The network part
//! of a scan is measured against the test bed by `examples/bench_watcher.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kafka_observer_operator::kafka::SyntheticScan;
use kafka_observer_operator::promotion::{
    decide, AutoPromotion, BrokerState, ClusterSnapshot, CompiledTopicFilter, PartitionState,
    PolicyConfig, PolicyHistory, PromotionPolicy, SourceHealth,
};

/// RF3 over brokers 1..=6 plus observer 7 on every partition; `lost` brokers are fenced and out
/// of every ISR; `promoted` brokers are in the ISR.
fn cluster(partitions: usize, lost: &[i32], in_isr_extra: &[i32]) -> ClusterSnapshot {
    let brokers: BTreeMap<i32, BrokerState> = (1..=7)
        .map(|b| {
            (
                b,
                BrokerState {
                    registered: !lost.contains(&b),
                    reachable: !lost.contains(&b),
                },
            )
        })
        .collect();
    let parts = (0..partitions)
        .map(|i| {
            let a = (i % 6) as i32 + 1;
            let b = ((i + 1) % 6) as i32 + 1;
            let replicas = vec![a, b, 7];
            let isr: Vec<i32> = replicas
                .iter()
                .copied()
                .filter(|r| (*r != 7 || in_isr_extra.contains(r)) && !lost.contains(r))
                .collect();
            let hw = 1_000_000 + i as i64;
            PartitionState {
                topic: format!("topic-{:04}", i / 100),
                partition: (i % 100) as i32,
                leader: isr.first().copied(),
                replicas: replicas.clone(),
                isr,
                min_isr: Some(2),
                high_watermark: Some(hw),
                log_end_offsets: replicas.iter().map(|&r| (r, hw)).collect(),
                metadata_stale: false,
            }
        })
        .collect();
    ClusterSnapshot {
        undescribed_topics: Vec::new(),
        taken_at: Timestamp::now(),
        source: SourceHealth::Healthy,
        brokers,
        partitions: parts,
    }
}

fn config() -> PolicyConfig {
    PolicyConfig {
        policy: PromotionPolicy::UnderMinIsr,
        observers: BTreeSet::from([7]),
        promoted: BTreeSet::new(),
        acknowledged_observers: BTreeSet::from([7]),
        max_lag_messages: 1000,
        confirmations: 2,
        cooldown: Duration::from_secs(300),
        max_concurrent_promotions: 1,
        topics: CompiledTopicFilter::new([".*"], ["^__"]).expect("regex"),
        dry_run: false,
        auto_demote_after: Some(Duration::from_secs(60)),
        unclean_takeover: false,
        stale_after: Duration::from_secs(3),
    }
}

fn measure(name: &str, snapshot: &ClusterSnapshot, history: &PolicyHistory) {
    let cfg = config();
    let now = snapshot.taken_at + SignedDuration::from_millis(500);
    // Warm-up also fills the high-watermark memory, as in steady state.
    let mut history = decide(snapshot, &cfg, history, now).next_history;
    // Steady state of the case: a promotion one confirmation away from done, a recovered
    // broker past its stabilization window; so the measured decision is the one that acts.
    history.promote_streak = history
        .promote_streak
        .keys()
        .map(|&b| (b, cfg.confirmations - 1))
        .collect();
    for since in history.recovered_since.values_mut() {
        *since = now - SignedDuration::from_hours(1);
    }
    let runs = (200_000 / snapshot.partitions.len()).clamp(5, 200);
    let mut times = Vec::with_capacity(runs);
    let mut actions = 0;
    for _ in 0..runs {
        let start = Instant::now();
        let d = decide(snapshot, &cfg, &history, now);
        times.push(start.elapsed());
        actions = d.actions.len();
    }
    times.sort();
    let median = times[runs / 2];
    let max = times[runs - 1];
    println!(
        "{name:<34} partitions={:>6} runs={runs:>4} median={:>9.3} ms  max={:>9.3} ms  actions={actions}",
        snapshot.partitions.len(),
        median.as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3
    );
}

fn measure_assembly(n: usize) {
    let raw = SyntheticScan::new(n, 7, 3);
    let runs = (200_000 / n).clamp(5, 200);
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            let snap = raw.assemble();
            let t = start.elapsed();
            assert_eq!(snap.partitions.len(), n);
            t
        })
        .collect();
    times.sort();
    println!(
        "{:<34} partitions={n:>6} runs={runs:>4} median={:>9.3} ms  max={:>9.3} ms",
        "snapshot assembly (scan results)",
        times[runs / 2].as_secs_f64() * 1e3,
        times[runs - 1].as_secs_f64() * 1e3
    );
}

fn main() {
    for n in [1_000, 10_000, 50_000] {
        measure_assembly(n);
        measure("healthy", &cluster(n, &[], &[]), &PolicyHistory::default());
        measure(
            "broker 2 lost (promotion)",
            &cluster(n, &[2], &[]),
            &PolicyHistory::default(),
        );
        let promoted = PolicyHistory::from_auto_promotions(vec![AutoPromotion {
            node_id: 7,
            at: Time(Timestamp::now() - SignedDuration::from_hours(1)),
            reason: "bench".into(),
        }]);
        measure(
            "recovered (demotion checks)",
            &cluster(n, &[], &[7]),
            &promoted,
        );
    }
}
