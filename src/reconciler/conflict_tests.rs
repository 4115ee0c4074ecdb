//! Unit tests of the conflict decision.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::api::ObjectMeta;

use super::*;
use crate::crd::{
    KafkaConnection, NodeIdSource, NodesSpec, ObserverSetSpec, ObserverSetStatus, Phase, RoleNodes,
};

fn selector(labels: &[(&str, &str)]) -> RoleNodes {
    RoleNodes {
        selector: LabelSelector {
            match_labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        node_id: NodeIdSource {
            label: None,
            ordinal_offset: Some(0),
        },
        combined: false,
    }
}

/// A set in `ns` created at minute `minute`, its brokers selected by `brokers` and its
/// controllers by `{component: controller, cluster: <cluster>}`.
fn set(name: &str, ns: &str, minute: u32, cluster: &str, brokers: &[(&str, &str)]) -> ObserverSet {
    let spec = ObserverSetSpec {
        kafka: KafkaConnection {
            bootstrap_servers: "k:9092".into(),
            tls: None,
            sasl: None,
        },
        nodes: Some(NodesSpec {
            controllers: Some(selector(&[
                ("component", "controller"),
                ("cluster", cluster),
            ])),
            brokers: Some(selector(brokers)),
        }),
        clusters: None,
        observers: vec![4],
        promotion: Default::default(),
        rollout: Default::default(),
        deletion_policy: Default::default(),
    };
    let mut obs = ObserverSet::new(name, spec);
    obs.metadata = ObjectMeta {
        name: Some(name.into()),
        namespace: Some(ns.into()),
        creation_timestamp: Some(Time(
            format!("2026-11-30T10:{minute:02}:00Z").parse().unwrap(),
        )),
        ..Default::default()
    };
    obs
}

fn pod(name: &str, labels: &[(&str, &str)]) -> PodLabels {
    PodLabels {
        name: name.into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

fn cluster_pods() -> Vec<PodLabels> {
    vec![
        pod("a-broker-0", &[("component", "broker"), ("cluster", "a")]),
        pod("a-broker-1", &[("component", "broker"), ("cluster", "a")]),
        pod("b-broker-0", &[("component", "broker"), ("cluster", "b")]),
        pod(
            "a-controller-0",
            &[("component", "controller"), ("cluster", "a")],
        ),
    ]
}

#[test]
fn the_newer_of_two_overlapping_sets_is_in_conflict_the_older_is_not() {
    let old = set("old", "kafka", 1, "a", &[("cluster", "a")]);
    let new = set(
        "new",
        "kafka",
        2,
        "b",
        &[("component", "broker"), ("cluster", "a")],
    );
    let all = [&old, &new];
    let pods = cluster_pods();
    let c = conflict_of(&new, &all, &pods).expect("new conflicts");
    assert_eq!(c.other, "old");
    assert_eq!(c.shared_pods, ["a-broker-0", "a-broker-1"]);
    assert!(!c.identical_selector);
    assert_eq!(conflict_of(&old, &all, &pods), None);
    let m = c.message();
    assert!(
        m.starts_with("ObserverSet kafka/old (older) already selects pod(s) a-broker-0, a-broker-1: nothing is written"),
        "{m}"
    );
    assert!(
        m.contains("until its spec.nodes selectors pick other pods or old is deleted"),
        "{m}"
    );
}

#[test]
fn disjoint_selections_do_not_conflict() {
    let a = set(
        "a",
        "kafka",
        1,
        "a",
        &[("component", "broker"), ("cluster", "a")],
    );
    let b = set(
        "b",
        "kafka",
        2,
        "b",
        &[("component", "broker"), ("cluster", "b")],
    );
    let pods = cluster_pods();
    assert_eq!(conflict_of(&b, &[&a, &b], &pods), None);
    assert_eq!(conflict_of(&a, &[&a, &b], &pods), None);
}

#[test]
fn a_controller_selector_overlapping_a_broker_selector_conflicts() {
    // Any role of one against any role of the other.
    let a = set(
        "a",
        "kafka",
        1,
        "a",
        &[("component", "broker"), ("cluster", "a")],
    );
    let b = set("b", "kafka", 2, "x", &[("component", "controller")]);
    let c = conflict_of(&b, &[&a, &b], &cluster_pods()).unwrap();
    assert_eq!(c.shared_pods, ["a-controller-0"]);
}

#[test]
fn identical_selectors_conflict_without_any_pod() {
    let a = set(
        "a",
        "kafka",
        1,
        "a",
        &[("component", "broker"), ("cluster", "a")],
    );
    let b = set(
        "b",
        "kafka",
        2,
        "a",
        &[("component", "broker"), ("cluster", "z")],
    );
    let c = conflict_of(&b, &[&a, &b], &[]).expect("same controllers selector");
    assert!(c.identical_selector && c.shared_pods.is_empty());
    assert!(
        c.message().contains("has an identical pod selector"),
        "{}",
        c.message()
    );
}

#[test]
fn other_namespaces_never_conflict() {
    let a = set("a", "other", 1, "a", &[("cluster", "a")]);
    let b = set("b", "kafka", 2, "a", &[("cluster", "a")]);
    assert_eq!(conflict_of(&b, &[&a, &b], &cluster_pods()), None);
}

#[test]
fn same_creation_time_the_name_decides() {
    let a = set("a", "kafka", 1, "a", &[("cluster", "a")]);
    let b = set("b", "kafka", 1, "a", &[("cluster", "a")]);
    let pods = cluster_pods();
    assert_eq!(conflict_of(&b, &[&a, &b], &pods).unwrap().other, "a");
    assert_eq!(conflict_of(&a, &[&a, &b], &pods), None);
}

#[test]
fn a_set_being_deleted_claims_nothing_and_is_never_in_conflict() {
    let mut old = set("old", "kafka", 1, "a", &[("cluster", "a")]);
    let new = set("new", "kafka", 2, "a", &[("cluster", "a")]);
    let pods = cluster_pods();
    assert!(conflict_of(&new, &[&old, &new], &pods).is_some());
    old.metadata.deletion_timestamp = Some(Time("2026-11-30T11:00:00Z".parse().unwrap()));
    assert_eq!(conflict_of(&new, &[&old, &new], &pods), None);
    // The deleted one only cleans up: no conflict reported for it either.
    let mut newer = new.clone();
    newer.metadata.deletion_timestamp = old.metadata.deletion_timestamp.clone();
    let older = set("older", "kafka", 0, "a", &[("cluster", "a")]);
    assert_eq!(conflict_of(&newer, &[&older, &newer], &pods), None);
}

#[test]
fn the_oldest_overlapping_set_is_named() {
    let first = set("zeta", "kafka", 1, "a", &[("cluster", "a")]);
    let second = set("alpha", "kafka", 2, "a", &[("cluster", "a")]);
    let third = set("mid", "kafka", 3, "a", &[("cluster", "a")]);
    let c = conflict_of(&third, &[&second, &third, &first], &cluster_pods()).unwrap();
    assert_eq!(c.other, "zeta");
}

#[test]
fn many_shared_pods_are_counted_not_listed() {
    let a = set("a", "kafka", 1, "a", &[("component", "broker")]);
    let b = set("b", "kafka", 2, "b", &[("component", "broker")]);
    let pods: Vec<PodLabels> = (0..8)
        .map(|i| pod(&format!("p-{i}"), &[("component", "broker")]))
        .collect();
    let m = conflict_of(&b, &[&a, &b], &pods).unwrap().message();
    assert!(m.contains("p-0, p-1, p-2, p-3, p-4 and 3 more"), "{m}");
}

#[test]
fn sibling_events_concern_sets_in_conflict_and_newer_ones() {
    let old = set("old", "kafka", 1, "a", &[("cluster", "a")]);
    let mut new = set("new", "kafka", 2, "a", &[("cluster", "a")]);
    let elsewhere = set("x", "other", 3, "a", &[("cluster", "a")]);
    // A newer sibling may now overlap the changed older one.
    assert!(concerns(&old, &new));
    // An older sibling that is not in conflict cannot be affected by a newer one.
    assert!(!concerns(&new, &old));
    assert!(!concerns(&old, &elsewhere));
    assert!(!concerns(&old, &old));
    new.status = Some(ObserverSetStatus {
        phase: Some(Phase::Conflict),
        ..Default::default()
    });
    assert!(in_conflict(&new));
    let mut older_in_conflict = set("o", "kafka", 0, "a", &[]);
    older_in_conflict.status = new.status.clone();
    assert!(concerns(&new, &older_in_conflict));
    // A set being deleted only frees pods: newer siblings not in conflict stay asleep, those in
    // conflict are woken.
    let mut leaving = set("leaving", "kafka", 1, "a", &[("cluster", "a")]);
    leaving.metadata.deletion_timestamp = Some(Time("2026-11-30T11:00:00Z".parse().unwrap()));
    let newer = set("newer", "kafka", 3, "a", &[("cluster", "a")]);
    assert!(!concerns(&leaving, &newer));
    assert!(concerns(&leaving, &new));
}

/// Only a change of what a set claims wakes its siblings: status writes and observer lists do
/// not; other selectors, a new object under the same name and the start of deletion do.
#[test]
fn only_a_changed_claim_wakes_the_siblings() {
    let memory = ClaimMemory::default();
    let a = set("a", "ns", 1, "c1", &[("component", "broker")]);
    assert!(memory.changed(&a), "first sight");
    assert!(!memory.changed(&a), "seen as it is");

    let mut status_only = a.clone();
    status_only.status = Some(ObserverSetStatus {
        phase: Some(Phase::Ready),
        ..Default::default()
    });
    status_only.spec.observers = vec![4, 5];
    assert!(
        !memory.changed(&status_only),
        "status and observers claim no pods"
    );

    let mut reselected = status_only.clone();
    reselected.spec.nodes.as_mut().unwrap().brokers =
        Some(selector(&[("component", "broker"), ("zone", "b")]));
    assert!(memory.changed(&reselected), "other selectors");

    let mut recreated = reselected.clone();
    recreated.metadata.uid = Some("new".into());
    assert!(
        memory.changed(&recreated),
        "a new object under the same name"
    );

    let mut deleting = recreated.clone();
    deleting.metadata.deletion_timestamp = Some(Time("2026-11-30T11:00:00Z".parse().unwrap()));
    assert!(
        memory.changed(&deleting),
        "deletion begun: it claims nothing any more"
    );
    assert!(!memory.changed(&deleting));

    let other = set("a", "other-ns", 1, "c1", &[("component", "broker")]);
    assert!(memory.changed(&other), "same name, other namespace");
}

#[test]
fn the_claim_memory_forgets_deleted_sets() {
    let memory = ClaimMemory::default();
    let kept: Vec<Arc<ObserverSet>> = (0..3u32)
        .map(|i| Arc::new(set(&format!("kept-{i}"), "kafka", i, "a", &[])))
        .collect();
    for s in &kept {
        assert!(memory.changed(s));
    }
    for i in 0..30u32 {
        assert!(memory.changed(&set(&format!("gone-{i}"), "kafka", 10 + i, "a", &[])));
    }
    memory.prune(&kept);
    assert_eq!(memory.len(), 3);
    // What is kept is still remembered: an unchanged claim wakes nobody.
    assert!(!memory.changed(&kept[0]));
}
