//! The Kafka watcher and the promotion engine against the test bed's real Kafka (KRaft, the
//! example StatefulSets of examples/kafka/ on the bed's node: brokers 1-4 listening on their pod
//! IPs :9092, bootstrap through the `kafka-bootstrap` Service, broker 4 the observer), reached
//! through `koo_testbed::TestBed` (`KOO_TESTBED=<abs .testbed>`, or `off` to skip). Takes brokers
//! down through the bed's kafka.sh and always brings them back (also on panic); topics are named
//! `policy-test-*` and deleted at the end.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kafka_observer_operator::kafka::{
    ConnectionSettings, KafkaWatcher, OffsetKind, OffsetProbe, WatcherOptions,
};
use kafka_observer_operator::promotion::{
    decide, ClusterSnapshot, CompiledTopicFilter, PartitionState, PolicyConfig, PolicyHistory,
    PromotionAction, PromotionPolicy, SourceHealth,
};
use koo_testbed::{KafkaNode, TestBed};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;

fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client")
}

/// Creates a one-partition topic on `replicas` with min ISR 2 (deleting a leftover first).
async fn create_topic(admin: &AdminClient<DefaultClientContext>, name: &str, replicas: &[i32]) {
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let _ = admin.delete_topics(&[name], &opts).await;
    let assignment = [replicas];
    for _ in 0..30 {
        let topic = NewTopic::new(name, 1, TopicReplication::Variable(&assignment))
            .set("min.insync.replicas", "2");
        let result = admin
            .create_topics(&[topic], &opts)
            .await
            .expect("create_topics");
        match &result[0] {
            Ok(_) => return,
            // A deletion just issued may still be in progress.
            Err((_, e)) => eprintln!("create {name}: {e:?}, retrying"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("could not create topic {name}");
}

async fn produce(bootstrap: &str, topic: &str, n: usize) {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("message.timeout.ms", "30000")
        .create()
        .expect("producer");
    for i in 0..n {
        let payload = format!("m{i}");
        producer
            .send(
                FutureRecord::<(), _>::to(topic).payload(&payload),
                Duration::from_secs(30),
            )
            .await
            .expect("produce");
    }
}

fn policy(observers: &[i32], topic: &str) -> PolicyConfig {
    PolicyConfig {
        policy: PromotionPolicy::UnderMinIsr,
        observers: observers.iter().copied().collect(),
        promoted: BTreeSet::new(),
        acknowledged_observers: observers.iter().copied().collect(),
        max_lag_messages: 1000,
        confirmations: 2,
        cooldown: Duration::ZERO,
        max_concurrent_promotions: 1,
        // Only our topic: other helpers' topics on the shared bed must not steer the decision.
        topics: CompiledTopicFilter::new([format!("^{topic}$")], Vec::<String>::new()).unwrap(),
        dry_run: false,
        auto_demote_after: Some(Duration::ZERO),
        unclean_takeover: false,
        stale_after: Duration::from_secs(30),
    }
}

/// The snapshot restricted to one topic (the decision may still read every broker's state).
fn only(mut snap: ClusterSnapshot, topic: &str) -> ClusterSnapshot {
    snap.partitions.retain(|p| p.topic == topic);
    snap
}

fn part(snap: &ClusterSnapshot, topic: &str) -> Option<PartitionState> {
    snap.partitions.iter().find(|p| p.topic == topic).cloned()
}

/// Scans until `pred` holds, up to `limit`; returns the snapshots seen (the last one matching).
async fn scan_until(
    w: &mut KafkaWatcher,
    topic: &str,
    limit: Duration,
    pred: impl Fn(&ClusterSnapshot) -> bool,
) -> Vec<ClusterSnapshot> {
    let start = Instant::now();
    let mut seen = Vec::new();
    loop {
        let snap = only(w.scan().await, topic);
        let done = snap.source == SourceHealth::Healthy && pred(&snap);
        seen.push(snap);
        if done {
            return seen;
        }
        assert!(
            start.elapsed() < limit,
            "condition not reached within {limit:?}; last scan: {:#?}",
            seen.last()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn follower_log_end_offsets_come_from_each_replica() {
    let Some(bed) = TestBed::require() else {
        return;
    };
    let bootstrap = bed.kafka_bootstrap();
    let topic = "policy-test-offsets";
    let admin = admin(&bootstrap);
    create_topic(&admin, topic, &[3, 1, 4]).await;
    produce(&bootstrap, topic, 50).await;
    let mut w = KafkaWatcher::new(
        &ConnectionSettings::from_bootstrap(&bootstrap),
        WatcherOptions::default(),
    )
    .unwrap();
    // The followers fetch asynchronously: wait until every replica reports the same end offset.
    let seen = scan_until(&mut w, topic, Duration::from_secs(30), |s| {
        part(s, topic).is_some_and(|p| {
            p.high_watermark == Some(50)
                && p.log_end_offsets.values().all(|&o| o == 50)
                && p.log_end_offsets.len() == 3
        })
    })
    .await;
    let p = part(seen.last().unwrap(), topic).unwrap();
    assert_eq!(p.leader, Some(3));
    // Broker 4's own listener: its pod IP as the API has it now.
    let client = bed.client().await.expect("a client for the bed");
    let broker4 = KafkaNode::get(4)
        .unwrap()
        .endpoint(&client)
        .await
        .expect("broker 4's pod IP");
    assert_eq!(p.min_isr, Some(2));
    assert_eq!(p.lag_against(4, p.high_watermark), Some(0));

    // The probe itself: a follower answers for its own replica; a closed port is an error.
    let probe = OffsetProbe::new("policy-test", Duration::from_secs(5));
    let answer = probe
        .query(4, &broker4, OffsetKind::LocalLogEnd, &[(topic, vec![0, 7])])
        .await
        .unwrap();
    assert_eq!(
        answer.iter().find(|a| a.partition == 0).unwrap().result,
        Ok(50)
    );
    assert!(
        answer
            .iter()
            .find(|a| a.partition == 7)
            .unwrap()
            .result
            .is_err(),
        "{answer:?}"
    );
    let hw_from_follower = probe
        .query(4, &broker4, OffsetKind::HighWatermark, &[(topic, vec![0])])
        .await
        .unwrap();
    assert!(
        hw_from_follower[0].result.is_err(),
        "only the leader answers with replica id -1: {hw_from_follower:?}"
    );
    assert!(probe
        .query(
            9,
            "127.0.0.1:1",
            OffsetKind::LocalLogEnd,
            &[(topic, vec![0])]
        )
        .await
        .is_err());
    let _ = admin.delete_topics(&[topic], &AdminOptions::new()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn under_min_isr_after_kill_then_recovery_and_the_dry_run_matches_the_live_run() {
    let Some(bed) = TestBed::require() else {
        return;
    };
    let bootstrap = bed.kafka_bootstrap();
    let topic = "policy-test-minisr";
    let admin = admin(&bootstrap);
    create_topic(&admin, topic, &[1, 2, 4]).await;
    produce(&bootstrap, topic, 20).await;
    let mut w = KafkaWatcher::new(
        &ConnectionSettings::from_bootstrap(&bootstrap),
        WatcherOptions::default(),
    )
    .unwrap();
    scan_until(&mut w, topic, Duration::from_secs(60), |s| {
        s.is_alive(2)
            && part(s, topic).is_some_and(|p| {
                p.isr.contains(&1)
                    && p.isr.contains(&2)
                    && p.lag_against(4, p.high_watermark) == Some(0)
            })
    })
    .await;

    let live = policy(&[4], topic);
    let mut dry = live.clone();
    dry.dry_run = true;
    let (mut h_live, mut h_dry) = (PolicyHistory::default(), PolicyHistory::default());
    let killed_at = Instant::now();
    // Broker 2 lost (SIGKILL) and down until started again: a `kill` alone would have the kubelet
    // restart it within seconds, before the engine's confirmations.
    let killed = bed.stop_node(2).expect("stop broker 2");
    // Feed every real scan to the live and the dry-run engine until the live one promotes.
    let mut promoted_after = None;
    while promoted_after.is_none() {
        assert!(
            killed_at.elapsed() < Duration::from_secs(90),
            "no promotion within 90 s of stopping broker 2; last reasons in h_live: {h_live:?}"
        );
        let snap = only(w.scan().await, topic);
        let now = Timestamp::now();
        let (l, d) = (
            decide(&snap, &live, &h_live, now),
            decide(&snap, &dry, &h_dry, now),
        );
        assert_eq!(
            l.actions, d.actions,
            "the dry-run plan differs from the live decision on the same scan"
        );
        if let Some(a) = l.actions.first() {
            assert!(
                matches!(a, PromotionAction::Promote { node_id: 4, .. }),
                "{a:?}"
            );
            // Tests run one at a time and stopping broker 2 holds the bed's ObserverSet at
            // Manual, so nothing else moves the topic: broker 1 is alive, the ISR is {1}.
            assert!(a.reason().contains("under min ISR"), "{a:?}");
            promoted_after = Some(killed_at.elapsed());
        }
        h_live = l.next_history;
        h_dry = d.next_history;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    eprintln!(
        "stop (SIGKILL) of broker 2 to the promotion decision: {:?}",
        promoted_after.unwrap()
    );
    assert!(h_live.is_auto_promoted(4));
    assert!(!h_dry.is_auto_promoted(4), "a dry run records nothing");

    killed.start().expect("start broker 2");
    // Recovery: broker 2 back in the ISR; with the window and cooldown at 0 the engine demotes 4
    // (or first moves leadership off it, if it leads).
    let restarted = Instant::now();
    let mut recovered = false;
    while restarted.elapsed() < Duration::from_secs(180) {
        let snap = only(w.scan().await, topic);
        let d = decide(&snap, &live, &h_live, Timestamp::now());
        if d.actions.iter().any(|a| {
            matches!(
                a,
                PromotionAction::Demote { node_id: 4, .. }
                    | PromotionAction::MoveLeadership { node_id: 4, .. }
            )
        }) {
            let p = part(&snap, topic).unwrap();
            assert!(
                p.isr.contains(&1) && p.isr.contains(&2),
                "demotion decided before the primaries are back: {p:?}"
            );
            recovered = true;
            break;
        }
        h_live = d.next_history;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(
        recovered,
        "recovery not detected within 180 s of restarting broker 2"
    );
    eprintln!(
        "restart of broker 2 to the demotion decision: {:?}",
        restarted.elapsed()
    );
    let _ = admin.delete_topics(&[topic], &AdminOptions::new()).await;
}

/// The leader election (ElectLeaders v2 on the probe's connection) against the real controller:
/// after a controlled shutdown moved
/// leadership off broker 1 (its pod deleted gracefully and replaced), a preferred election gives
/// it back; a second one is "not needed".
#[tokio::test(flavor = "multi_thread")]
async fn preferred_election_moves_leadership_back() {
    use kafka_observer_operator::kafka::ElectionKind;
    use kafka_observer_operator::promotion::TopicPartition;
    let Some(bed) = TestBed::require() else {
        return;
    };
    let bootstrap = bed.kafka_bootstrap();
    let topic = "policy-test-election";
    let admin = admin(&bootstrap);
    create_topic(&admin, topic, &[1, 2, 3]).await;
    let mut w = KafkaWatcher::new(
        &ConnectionSettings::from_bootstrap(&bootstrap),
        WatcherOptions::default(),
    )
    .unwrap();
    scan_until(&mut w, topic, Duration::from_secs(60), |s| {
        part(s, topic).is_some_and(|p| p.leader == Some(1) && p.isr.len() == 3)
    })
    .await;
    bed.restart_node(1)
        .expect("controlled shutdown of broker 1, its pod replaced and Ready");
    // auto.leader.rebalance.enable=false on the bed: broker 1 is back in the ISR but not leader.
    scan_until(&mut w, topic, Duration::from_secs(120), |s| {
        part(s, topic)
            .is_some_and(|p| p.leader.is_some() && p.leader != Some(1) && p.isr.contains(&1))
    })
    .await;
    let tp = vec![TopicPartition {
        topic: topic.into(),
        partition: 0,
    }];
    let outcome = w
        .elect_leaders(ElectionKind::Preferred, &tp, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(outcome.len(), 1);
    assert_eq!(outcome[0].result, Ok(()), "{outcome:?}");
    scan_until(&mut w, topic, Duration::from_secs(30), |s| {
        part(s, topic).is_some_and(|p| p.leader == Some(1))
    })
    .await;
    let again = w
        .elect_leaders(ElectionKind::Preferred, &tp, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(
        again[0].result,
        Ok(()),
        "ELECTION_NOT_NEEDED counts as done: {again:?}"
    );
    let missing = vec![TopicPartition {
        topic: "policy-test-no-such-topic".into(),
        partition: 0,
    }];
    let refused = w
        .elect_leaders(ElectionKind::Preferred, &missing, Duration::from_secs(30))
        .await;
    assert!(
        refused.is_err() || refused.as_ref().unwrap().iter().all(|o| o.result.is_err()),
        "{refused:?}"
    );
    let _ = admin.delete_topics(&[topic], &AdminOptions::new()).await;
}
