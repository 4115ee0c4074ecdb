//! `spec.clusters`: checked as far as the object allows, then against the operator's members.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::crd::{
    validate, validate_over, KafkaConnection, MemberCluster, NodeIdSource, NodesSpec, ObserverSet,
    ObserverSetSpec, PromotionPolicy, Role, RoleNodes, SpecViolation,
};

fn role(app: &str, offset: i32) -> Option<RoleNodes> {
    Some(RoleNodes {
        selector: LabelSelector {
            match_labels: Some([("app".to_string(), app.to_string())].into()),
            ..Default::default()
        },
        node_id: NodeIdSource {
            label: None,
            ordinal_offset: Some(offset),
        },
        combined: false,
    })
}

fn member(name: &str, controller: i32, broker: Option<i32>) -> MemberCluster {
    MemberCluster {
        name: name.into(),
        nodes: NodesSpec {
            controllers: role("kafka-controller", controller),
            brokers: broker.and_then(|b| role("kafka-broker", b)),
        },
    }
}

/// The 2.5-region layout of docs/multi-cluster.md.
fn stretched() -> ObserverSet {
    let spec = ObserverSetSpec {
        kafka: KafkaConnection {
            bootstrap_servers: "kafka-broker-east-0.kafka-broker.kafka.svc:9092".into(),
            tls: None,
            sasl: None,
        },
        nodes: None,
        clusters: Some(vec![
            member("east", 101, Some(1)),
            member("west", 102, Some(3)),
            member("tie", 103, None),
        ]),
        observers: vec![4],
        promotion: Default::default(),
        rollout: Default::default(),
        deletion_policy: Default::default(),
    };
    let mut obs = ObserverSet::new("kafka", spec);
    obs.metadata.namespace = Some("kafka".into());
    obs
}

fn messages(edit: impl FnOnce(&mut ObserverSet)) -> Vec<String> {
    let mut obs = stretched();
    edit(&mut obs);
    match validate(&obs) {
        Ok(_) => panic!("a set with clusters was accepted"),
        Err(e) => e.violations.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn a_consistent_layout_is_refused_by_an_operator_of_one_cluster() {
    let found = messages(|_| {});
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("spec.clusters (east, west, tie) describes one Kafka cluster"),
        "{}",
        found[0]
    );
    assert!(found[0].contains("use spec.nodes"), "{}", found[0]);
    assert!(found[0].contains("--members"), "{}", found[0]);
}

fn operator_members() -> Vec<String> {
    ["east", "west", "tie"].map(String::from).to_vec()
}

fn messages_over(members: &[String], edit: impl FnOnce(&mut ObserverSet)) -> Vec<String> {
    let mut obs = stretched();
    edit(&mut obs);
    match validate_over(&obs, Some(members)) {
        Ok(_) => panic!("accepted"),
        Err(e) => e.violations.iter().map(ToString::to_string).collect(),
    }
}

/// Over its members, the operator takes the set: one selection per (role, member), every
/// member's controllers before any member's brokers, members in `--members` order.
#[test]
fn an_operator_over_the_same_members_takes_one_role_per_member_controllers_first() {
    let members = ["west", "tie", "east"].map(String::from).to_vec();
    let validated = validate_over(&stretched(), Some(&members)).unwrap();
    let order: Vec<(Role, &str)> = validated
        .roles
        .iter()
        .map(|r| (r.role, r.member.as_str()))
        .collect();
    assert_eq!(
        order,
        [
            (Role::Controller, "west"),
            (Role::Controller, "tie"),
            (Role::Controller, "east"),
            (Role::Broker, "west"),
            (Role::Broker, "east"),
        ]
    );
    // The member's own node rule, not another's.
    let west_brokers = &validated.roles[3];
    assert_eq!(
        west_brokers.node_id,
        crate::crd::NodeIdRule::OrdinalOffset(3)
    );
}

#[test]
fn other_members_than_the_operators_are_refused_naming_both() {
    let members: Vec<String> = ["east", "west", "north"].map(String::from).to_vec();
    let found = messages_over(&members, |_| {});
    assert_eq!(
        found,
        ["spec.clusters names the members east, west, tie, but the operator runs over east, west, north (--members): name exactly the operator's members, each once"]
    );
}

/// Every policy is taken over members: the engine runs there and writes its record to a
/// majority of the copies (`crate::automation::replicate`).
#[test]
fn an_automatic_policy_across_members_is_accepted() {
    for policy in [PromotionPolicy::UnderMinIsr, PromotionPolicy::Manual] {
        let mut obs = stretched();
        obs.spec.promotion.policy = policy;
        let v = validate_over(&obs, Some(&operator_members()));
        assert!(v.is_ok(), "{policy:?}: {:?}", v.err());
    }
}

/// Deleting the set could not delete lists that carry no owner reference: refused, not ignored.
#[test]
fn delete_policy_across_members_is_refused() {
    let found = messages_over(&operator_members(), |o| {
        o.spec.deletion_policy = crate::crd::DeletionPolicy::Delete;
    });
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("spec.deletionPolicy is Delete: across member clusters"),
        "{}",
        found[0]
    );
}

/// An operator over members does not take a one-cluster set: it would write to its own member
/// only, and nothing would keep the controllers-first order across the others.
#[test]
fn a_one_cluster_set_is_refused_by_an_operator_over_members() {
    let found = messages_over(&operator_members(), |o| {
        o.spec.clusters = None;
        o.spec.nodes = Some(member("x", 0, Some(1)).nodes);
    });
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("spec.nodes describes the pods of one Kubernetes cluster, but this operator runs over the member clusters east, west, tie"), "{}", found[0]);
}

/// What is wrong in the object is said before the members are compared.
#[test]
fn the_objects_own_faults_come_before_the_members_check() {
    let found = messages_over(&operator_members(), |o| {
        o.spec.clusters.as_mut().unwrap()[1].name = "east".into();
    });
    assert!(
        found
            .iter()
            .any(|m| m.contains("names member \"east\" twice")),
        "{found:?}"
    );
    assert!(!found.iter().any(|m| m.contains("--members")), "{found:?}");
}

#[test]
fn what_is_wrong_in_the_object_is_said_first() {
    assert_eq!(
        messages(|o| {
            o.spec.clusters.as_mut().unwrap().pop();
        }),
        ["spec.clusters names 2 member clusters: name an odd number, 3 or 5 (a majority of them decides which operator replica acts)"]
    );
    let found = messages(|o| o.spec.clusters.as_mut().unwrap()[2].name = "east".into());
    assert!(
        found
            .iter()
            .any(|m| m.contains("names member \"east\" twice")),
        "{found:?}"
    );
    let found = messages(|o| o.spec.clusters.as_mut().unwrap()[1].name = "West".into());
    assert!(
        found[0].contains("\"West\" is not a DNS label"),
        "{found:?}"
    );
    // A per-member node rule, reported at its path inside the member.
    let found = messages(|o| o.spec.clusters.as_mut().unwrap()[1].nodes.controllers = None);
    assert_eq!(
        found,
        ["spec.clusters[west].nodes.controllers is missing but the brokers are not combined-mode: add controllers or set brokers.combined: true"]
    );
    // The same ordinal offset in two members: pod 0 of each claims the same node id.
    let found = messages(|o| {
        o.spec.clusters.as_mut().unwrap()[2].nodes.controllers = role("kafka-controller", 3)
    });
    assert_eq!(
        found,
        ["spec.clusters[west].nodes.brokers and spec.clusters[tie].nodes.controllers both use nodeId.ordinalOffset 3: pod ordinal 0 of each would claim node id 3; give each member's StatefulSets their own node id range"]
    );
}

#[test]
fn nodes_and_clusters_are_exclusive() {
    let found = messages(|o| {
        o.spec.nodes = Some(member("x", 0, Some(1)).nodes);
    });
    assert!(
        found
            .iter()
            .any(|m| m.starts_with("spec.nodes and spec.clusters are both set")),
        "{found:?}"
    );
    let mut none = stretched();
    none.spec.clusters = None;
    let e = validate(&none).unwrap_err();
    assert_eq!(e.violations, [SpecViolation::NoNodes]);
}

/// A spec written with `nodes` serializes without `clusters`, as before the field existed.
#[test]
fn a_single_cluster_spec_round_trips_without_clusters() {
    let mut obs = stretched();
    obs.spec.clusters = None;
    obs.spec.nodes = Some(member("x", 0, Some(1)).nodes);
    let json = serde_json::to_value(&obs.spec).unwrap();
    assert!(json.get("clusters").is_none(), "{json}");
    assert!(json.get("nodes").is_some(), "{json}");
    assert!(validate(&obs).is_ok());
}
