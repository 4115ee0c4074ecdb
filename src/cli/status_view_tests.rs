use std::time::Instant;

use super::*;
use crate::cli::fixtures::{partition, snapshot, stop};

fn roles() -> Roles {
    Roles {
        observers: BTreeSet::from([4]),
        promoted: BTreeSet::new(),
        max_lag_messages: 10,
    }
}

#[test]
fn healthy_cluster_has_broker_lines_and_no_attention() {
    let s = snapshot(vec![
        partition("orders", 0, &[1, 2, 3, 4]),
        partition("orders", 1, &[2, 3, 1]),
    ]);
    let v = summarize(&s, &roles(), &StatusFilter::default(), 20);
    assert_eq!(v.partitions, 2);
    assert_eq!(v.attention_total, 0);
    let b: Vec<(BrokerId, ReplicaRole, usize, usize, usize)> = v
        .brokers
        .iter()
        .map(|b| (b.id, b.role, b.partitions, b.in_isr, b.leading))
        .collect();
    assert_eq!(
        b,
        vec![
            (1, ReplicaRole::Primary, 2, 2, 1),
            (2, ReplicaRole::Primary, 2, 2, 1),
            (3, ReplicaRole::Primary, 2, 2, 0),
            (4, ReplicaRole::Observer, 1, 0, 0),
        ]
    );
    assert_eq!(v.brokers[3].max_lag, Some(0));
    let text = render_summary(&v, 10);
    assert!(text.contains("no partition needs attention"), "{text}");
    assert!(
        text.contains("4       observer  yes    1           0       0        0"),
        "{text}"
    );
}

#[test]
fn lost_broker_puts_partitions_under_and_at_min_isr() {
    // RF3 with min ISR 2: losing broker 2 leaves [1,2,4] at 1 primary (under), [2,3,1] at 2 (at).
    let mut s = snapshot(vec![
        partition("orders", 0, &[1, 2, 4]),
        partition("orders", 1, &[2, 3, 1]),
        partition("audit", 0, &[3, 1, 2]),
    ]);
    s.partitions[0].log_end_offsets.insert(4, 50);
    stop(&mut s, 2);
    let v = summarize(&s, &roles(), &StatusFilter::default(), 20);
    assert_eq!(v.attention_total, 3);
    let first = &v.attention[0];
    assert_eq!((first.topic.as_str(), first.partition), ("orders", 0));
    assert_eq!(
        first.reasons,
        vec![
            Attention::UnderMinIsr {
                live_isr: 1,
                min_isr: 2
            },
            Attention::ObserverLagging { broker: 4, lag: 50 },
        ]
    );
    assert_eq!(
        v.attention[1].reasons,
        vec![Attention::AtMinIsr {
            live_isr: 2,
            min_isr: 2
        }]
    );
    assert_eq!(
        v.attention[1].topic, "audit",
        "same severity sorts by topic"
    );
    assert!(!v.brokers[1].alive && !v.brokers[1].registered);
    let under = summarize(
        &s,
        &roles(),
        &StatusFilter {
            under_min_isr: true,
            ..StatusFilter::default()
        },
        20,
    );
    assert_eq!(under.attention_total, 1);
    let text = render_summary(&v, 10);
    assert!(
        text.contains("under min ISR (1 of 2); observer 4 lags 50 (max 10)"),
        "{text}"
    );
    assert!(text.contains("no (not registered)"), "{text}");
}

#[test]
fn promoted_observer_counts_in_isr_and_leading_is_flagged() {
    let mut p = partition("orders", 0, &[4, 1, 2]);
    p.isr = vec![4, 1, 2];
    let s = snapshot(vec![p]);
    let mut r = roles();
    r.promoted.insert(4);
    let v = summarize(&s, &r, &StatusFilter::default(), 20);
    assert_eq!(v.brokers[3].role, ReplicaRole::Promoted);
    assert_eq!(
        v.attention[0].reasons,
        vec![Attention::PromotedLeading { broker: 4 }]
    );
}

#[test]
fn filters_and_cap() {
    let parts: Vec<_> = (0..30).map(|i| partition("t", i, &[1, 2, 4])).collect();
    let mut s = snapshot(parts);
    s.partitions.push(partition("other", 0, &[3, 1, 2]));
    stop(&mut s, 2);
    let v = summarize(&s, &roles(), &StatusFilter::default(), 20);
    assert_eq!(
        (v.attention_total, v.attention.len(), v.attention_omitted),
        (31, 20, 11)
    );
    // Sorted: every "t" partition is under min ISR, "other-0" only at min ISR (last, cut off).
    assert!(v.attention.iter().all(|a| a.topic == "t"));
    assert_eq!(v.attention[0].partition, 0);
    assert_eq!(v.attention[19].partition, 19);
    assert!(render_summary(&v, 10).contains("... and 11 more"));
    let topic = StatusFilter {
        topic: Some(Regex::new("^oth").unwrap()),
        ..StatusFilter::default()
    };
    let v = summarize(&s, &roles(), &topic, 0);
    assert_eq!((v.partitions, v.attention_total), (1, 1));
    let broker = StatusFilter {
        broker: Some(3),
        ..StatusFilter::default()
    };
    let v = summarize(&s, &roles(), &broker, 0);
    assert_eq!(v.brokers.len(), 1);
    assert_eq!((v.brokers[0].id, v.brokers[0].partitions), (3, 1));
    assert_eq!(v.partitions, 1);
}

#[test]
fn json_keeps_the_text_structure() {
    let mut s = snapshot(vec![partition("orders", 0, &[1, 2, 4])]);
    stop(&mut s, 2);
    let v = summarize(&s, &roles(), &StatusFilter::default(), 20);
    let j = serde_json::to_value(&v).unwrap();
    assert_eq!(j["brokers"][3]["role"], "observer");
    assert_eq!(j["attentionTotal"], 1);
    assert_eq!(j["attention"][0]["reasons"][0]["kind"], "underMinIsr");
    assert_eq!(j["attention"][0]["reasons"][0]["liveIsr"], 1);
}

/// 50,000 partitions over 4 brokers, a tenth of them under min ISR: prints the time taken
/// (not asserted: the machine is shared).
#[test]
fn summarizes_fifty_thousand_partitions() {
    let parts: Vec<_> = (0..50_000)
        .map(|i| {
            let lead = 1 + (i % 3);
            let replicas = [lead, 1 + (lead % 3), 1 + ((lead + 1) % 3), 4];
            let mut p = partition(&format!("topic-{}", i / 50), i % 50, &replicas);
            if i % 10 == 0 {
                p.isr.truncate(1);
            }
            p
        })
        .collect();
    let s = snapshot(parts);
    let started = Instant::now();
    let v = summarize(&s, &roles(), &StatusFilter::default(), 20);
    let text = render_summary(&v, 10);
    let took = started.elapsed();
    let json_started = Instant::now();
    let json = serde_json::to_string(&v).unwrap();
    let json_took = json_started.elapsed();
    println!(
        "SUMMARY partitions=50000 summarize+render={:.1} ms json={:.2} ms attention={} lines={} json_bytes={}",
        took.as_secs_f64() * 1000.0,
        json_took.as_secs_f64() * 1000.0,
        v.attention_total,
        text.lines().count(),
        json.len()
    );
    assert_eq!(v.partitions, 50_000);
    assert_eq!(v.attention_total, 5_000);
    assert_eq!(v.attention.len(), 20);
    assert_eq!(v.brokers[3].partitions, 50_000);
}

#[test]
fn history_is_shown_newest_first_and_capped() {
    use crate::crd::EngineActionKind;
    let at = |s: i64| Timestamp::from_second(1_800_000_000 + s).unwrap();
    // As the apiserver may return it: the two writers' entries in no particular order.
    let history = vec![
        crate::history::entry(
            at(10),
            EngineActionKind::Promote,
            4,
            "1 partition(s) under min ISR: t-0",
            "automation",
        ),
        crate::history::entry(
            at(30),
            EngineActionKind::Demote,
            4,
            "spec change: listed in spec.observers",
            "kubectl-observer",
        ),
        crate::history::entry(
            at(20),
            EngineActionKind::Demote,
            4,
            "broker 4: healthy",
            "automation",
        ),
    ];
    let s = snapshot(vec![partition("orders", 0, &[1, 2, 3, 4])]);
    let v = summarize(&s, &roles(), &StatusFilter::default(), 20).with_history(&history, 2);
    let text = render_summary(&v, 10);
    let tail: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("last "))
        .collect();
    assert_eq!(
        tail,
        vec![
            "last 2 action(s), newest first (status.history):",
            "AT                    ACTION  NODE  WHO               WHY",
            "2027-01-15T08:00:30Z  Demote  4     kubectl-observer  spec change: listed in spec.observers",
            "2027-01-15T08:00:20Z  Demote  4     automation        broker 4: healthy",
        ],
        "{text}"
    );
    let none = summarize(&s, &roles(), &StatusFilter::default(), 20).with_history(&[], 5);
    assert!(render_summary(&none, 10).ends_with("\nno action recorded in status.history yet\n"));
    let off = summarize(&s, &roles(), &StatusFilter::default(), 20).with_history(&history, 0);
    assert!(!render_summary(&off, 10).contains("status.history"));
    assert!(serde_json::to_value(&off).unwrap().get("history").is_none());
}

#[test]
fn the_pods_a_step_went_on_without_are_named_with_why() {
    use crate::crd::{ExcuseReason, ExcusedPod, RoleStatus, RolesStatus};
    let s = snapshot(vec![partition("orders", 0, &[1, 2, 3, 4])]);
    let roles_status = RolesStatus {
        controller: Some(RoleStatus {
            revision: 9,
            excused: vec![ExcusedPod {
                pod: "kafka-controller-2".into(),
                reason: ExcuseReason::NodeNotReady,
                message: "its node is not Ready and its agent has not answered since 2026-12-03T09:00:00Z".into(),
            }],
            ..Default::default()
        }),
        broker: Some(RoleStatus::default()),
    };
    let v = summarize(&s, &roles(), &StatusFilter::default(), 20).with_excused(&roles_status);
    assert_eq!(v.went_on_without.len(), 1);
    let text = render_summary(&v, 10);
    assert!(
        text.contains("went on without 1 unreachable pod")
            && text.contains("kafka-controller-2")
            && text.contains("NodeNotReady")
            && text.contains("not Ready"),
        "{text}"
    );
    let json = serde_json::to_value(&v).unwrap();
    assert_eq!(json["wentOnWithout"][0]["reason"], "NodeNotReady");
    // Nothing excused: no section, no field.
    let v =
        summarize(&s, &roles(), &StatusFilter::default(), 20).with_excused(&RolesStatus::default());
    assert!(!render_summary(&v, 10).contains("went on without"));
    assert!(serde_json::to_value(&v)
        .unwrap()
        .get("wentOnWithout")
        .is_none());
}

#[test]
fn each_member_cluster_is_shown_as_the_leader_last_saw_it() {
    use crate::crd::MemberReach;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    let s = snapshot(vec![partition("orders", 0, &[1, 2, 3, 4])]);
    let at = Timestamp::from_second(1_796_000_000).unwrap();
    let members = vec![
        MemberReach {
            name: "east".into(),
            reachable: true,
            since: Time(at),
            message: None,
        },
        MemberReach {
            name: "tie".into(),
            reachable: false,
            since: Time(at),
            message: Some("connect timeout".into()),
        },
    ];
    let v = summarize(&s, &roles(), &StatusFilter::default(), 20).with_members(&members);
    let text = render_summary(&v, 10);
    let tie = text
        .lines()
        .find(|l| l.starts_with("tie"))
        .unwrap_or_else(|| panic!("no line for tie: {text}"));
    assert!(
        tie.contains("NO") && tie.contains("connect timeout"),
        "{text}"
    );
    assert!(text.contains("status.members"), "{text}");
    let json = serde_json::to_value(&v).unwrap();
    assert_eq!(json["members"][1]["reachable"], false);
    // A single-cluster install: no section, no field.
    let v = summarize(&s, &roles(), &StatusFilter::default(), 20).with_members(&[]);
    assert!(!render_summary(&v, 10).contains("member clusters"));
    assert!(serde_json::to_value(&v).unwrap().get("members").is_none());
}
