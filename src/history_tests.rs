use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, Time};
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;
use serde_json::json;

use super::*;

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap()
}

fn auto(secs: i64, action: EngineActionKind, node: NodeId, reason: &str) -> HistoryEntry {
    entry(t(secs), action, node, reason, AUTOMATION)
}

fn manual(secs: i64, action: EngineActionKind, node: NodeId, reason: &str) -> HistoryEntry {
    entry(t(secs), action, node, reason, "kubectl-observer")
}

use EngineActionKind::{Demote, MoveLeadership, Promote};

#[test]
fn newest_first_and_capped() {
    let mut h = Vec::new();
    for i in 0..30 {
        let action = if i % 2 == 0 { Promote } else { Demote };
        h = record(&h, vec![auto(i, action, 4, "r")]);
    }
    assert_eq!(h.len(), LIMIT);
    assert_eq!(h[0].at.0, t(29));
    assert_eq!(h[LIMIT - 1].at.0, t(10));
    assert_eq!(newest(&h).map(|e| e.at.0), Some(t(29)));
}

#[test]
fn a_retried_election_is_recorded_once() {
    let h = record(&[], vec![auto(1, MoveLeadership, 5, "broker 5 leads t-0")]);
    let h = record(&h, vec![auto(2, MoveLeadership, 5, "broker 5 leads t-0")]);
    assert_eq!(h.len(), 1);
    assert_eq!(h[0].at.0, t(1));
    // The same action with another reason, or from the other writer, is new.
    let h = record(&h, vec![auto(3, MoveLeadership, 5, "broker 5 leads t-1")]);
    let h = record(&h, vec![manual(4, MoveLeadership, 5, "broker 5 leads t-1")]);
    assert_eq!(h.len(), 3);
}

#[test]
fn each_writer_sends_only_its_own_entries() {
    let h = record(
        &[manual(
            1,
            Promote,
            4,
            "spec change: listed in spec.promotion.promoted",
        )],
        vec![auto(2, Promote, 5, "1 partition(s) under min ISR: t-0")],
    );
    assert_eq!(own(&h, true).len(), 1);
    assert_eq!(own(&h, true)[0].node_id, 5);
    assert_eq!(own(&h, false).len(), 1);
    assert_eq!(own(&h, false)[0].node_id, 4);
}

#[test]
fn reasons_are_bounded() {
    let e = entry(t(0), Promote, 4, &"x".repeat(5000), AUTOMATION);
    assert_eq!(e.reason.chars().count(), REASON_MAX);
    assert!(e.reason.ends_with("..."));
}

fn managed(manager: &str, secs: i64, fields: serde_json::Value) -> ManagedFieldsEntry {
    ManagedFieldsEntry {
        manager: Some(manager.into()),
        operation: Some("Update".into()),
        time: Some(Time(Timestamp::from_second(1_800_000_000 + secs).unwrap())),
        fields_type: Some("FieldsV1".into()),
        fields_v1: Some(FieldsV1(fields)),
        ..Default::default()
    }
}

#[test]
fn the_newest_manager_of_the_field_is_who() {
    let m = vec![
        managed(
            "kubectl-client-side-apply",
            0,
            json!({"f:spec": {"f:observers": {}, "f:promotion": {"f:policy": {}}}}),
        ),
        managed(
            "kubectl-observer",
            5,
            json!({"f:spec": {"f:promotion": {"f:promoted": {}}}}),
        ),
        ManagedFieldsEntry {
            subresource: Some("status".into()),
            ..managed(
                "kafka-observer-operator-rollout",
                9,
                json!({"f:spec": {"f:promotion": {"f:promoted": {}}}}),
            )
        },
    ];
    assert_eq!(
        spec_manager(&m, SpecField::Promoted).as_deref(),
        Some("kubectl-observer")
    );
    assert_eq!(
        spec_manager(&m, SpecField::Observers).as_deref(),
        Some("kubectl-client-side-apply")
    );
    assert_eq!(spec_manager(&[], SpecField::Observers), None);
}

#[test]
fn manual_and_automatic_changes_are_told_apart() {
    let m = vec![managed(
        "kubectl-observer",
        0,
        json!({"f:spec": {"f:observers": {}, "f:promotion": {"f:promoted": {}}}}),
    )];
    let before = vec![4, 5, 6];
    // 4 promoted by hand, 5 by the automation, 7 newly declared.
    let after = BTreeSet::from([6, 7]);
    let promoted = BTreeSet::from([4]);
    let auto_promoted = BTreeSet::from([5]);
    let change = SpecChange {
        before: &before,
        after: &after,
        promoted: &promoted,
        auto_promoted: &auto_promoted,
        managed: &m,
    };
    let e = manual_entries(&change, &[], t(10));
    let got: Vec<(EngineActionKind, NodeId, &str, &str)> = e
        .iter()
        .map(|e| (e.action, e.node_id, e.reason.as_str(), e.who.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                Promote,
                4,
                "spec change: listed in spec.promotion.promoted",
                "kubectl-observer"
            ),
            (
                Demote,
                7,
                "spec change: listed in spec.observers",
                "kubectl-observer"
            ),
        ]
    );
    // 4 back (removed from promoted), 5 back by the automation's demotion.
    let before = vec![6, 7];
    let after = BTreeSet::from([4, 5, 6, 7]);
    let none = BTreeSet::new();
    let history = vec![
        manual(
            10,
            Promote,
            4,
            "spec change: listed in spec.promotion.promoted",
        ),
        auto(11, Demote, 5, "broker 5: healthy for 5m"),
    ];
    let change = SpecChange {
        before: &before,
        after: &after,
        promoted: &none,
        auto_promoted: &none,
        managed: &[],
    };
    let e = manual_entries(&change, &history, t(12));
    assert_eq!(e.len(), 1);
    assert_eq!(
        (
            e[0].action,
            e[0].node_id,
            e[0].reason.as_str(),
            e[0].who.as_str()
        ),
        (
            Demote,
            4,
            "spec change: removed from spec.promotion.promoted",
            SPEC
        )
    );
}

fn any_entry() -> impl Strategy<Value = HistoryEntry> {
    (
        0i64..200,
        prop_oneof![Just(Promote), Just(Demote), Just(MoveLeadership)],
        1i32..6,
        prop_oneof![Just("a"), Just("b")],
        any::<bool>(),
    )
        .prop_map(|(s, action, node, reason, automatic)| {
            if automatic {
                auto(s, action, node, reason)
            } else {
                manual(s, action, node, reason)
            }
        })
}

proptest! {
    /// Whatever is added in whatever batches: at most LIMIT entries, newest first, unique keys,
    /// and the newest entry ever added that is not a repeat is present.
    #[test]
    fn record_is_bounded_sorted_and_unique(
        batches in prop::collection::vec(prop::collection::vec(any_entry(), 0..5), 0..20)
    ) {
        let mut h: Vec<HistoryEntry> = Vec::new();
        for batch in batches {
            h = record(&h, batch);
            prop_assert!(h.len() <= LIMIT);
            prop_assert!(h.windows(2).all(|w| key(&w[0]) > key(&w[1])), "{h:?}");
            // Recording nothing changes nothing; recording again what is there adds nothing.
            prop_assert_eq!(&record(&h, vec![]), &h);
            prop_assert_eq!(&record(&h, h.clone()), &h);
            // The two writers' shares partition the history.
            prop_assert_eq!(own(&h, true).len() + own(&h, false).len(), h.len());
            prop_assert_eq!(newest(&h), h.first().cloned());
        }
    }
}
