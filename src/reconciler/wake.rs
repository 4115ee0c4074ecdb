//! What wakes the reconciler: a fingerprint of exactly the parts of an ObserverSet a reconcile
//! decides on, for the predicate filter of the controller's ObserverSet watch (`super::run_one`).
//! Pure.
//!
//! An event that leaves the fingerprint as it was wakes nothing. That is every status write no
//! decision reads: the reconciler's own fields (phase, conditions, revision, roles, rollout,
//! observedGeneration, desired and effective sets, lastAction and its history entries), which it
//! reads afresh at the start of each reconcile (a quorum GET) and whose next pass it schedules
//! itself (`Action::requeue`); and the automation's `plan`, `engineState`, `partitions` and
//! conditions. Without this, a failed reconcile was woken at once by its own status write and
//! retried in a loop instead of waiting its backoff (`super::backoff`).

use std::hash::{DefaultHasher, Hash, Hasher};

use crate::crd::ObserverSet;
use crate::history;

/// The fingerprint of what a reconcile of `set` decides on; always `Some` (kube's predicates
/// return an `Option`, `None` meaning "always pass").
pub fn fingerprint(set: &ObserverSet) -> Option<u64> {
    let meta = &set.metadata;
    let status = set.status.as_ref();
    let mut hasher = DefaultHasher::new();
    // The object itself (a set deleted and created again under the same name is a new one).
    meta.uid.hash(&mut hasher);
    // The whole spec: the apiserver bumps the generation on every spec change.
    meta.generation.hash(&mut hasher);
    // The cleanup starts when the deletion does.
    meta.deletion_timestamp
        .as_ref()
        .map(|t| t.0)
        .hash(&mut hasher);
    // kube's finalizer helper adds ours, then waits for that change to come back.
    meta.finalizers
        .as_deref()
        .unwrap_or_default()
        .hash(&mut hasher);
    // The automation's promotions leave the effective set: a change is a rollout, and dropping
    // it would stall every automatic promotion and demotion until the resync. Sorted: the
    // reconciler reads them as a set.
    let mut auto: Vec<_> = status
        .map(|s| s.auto_promotions.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|a| (a.node_id, a.at.0, a.reason.as_str()))
        .collect();
    auto.sort_unstable();
    auto.hash(&mut hasher);
    // The automation's own history entries: the reconciler sets `status.lastAction` to the
    // newest entry of both loops and trims its own entries to make room for them. They change
    // only with an automatic action, not with each scan. Sorted: the apiserver merges the two
    // writers' entries and does not keep an order.
    let automatic = status
        .map(|s| history::own(&s.history, true))
        .unwrap_or_default();
    let mut entries: Vec<_> = automatic
        .iter()
        .map(|e| {
            (
                e.at.0,
                e.action,
                e.node_id,
                e.reason.as_str(),
                e.who.as_str(),
            )
        })
        .collect();
    entries.sort_unstable();
    entries.hash(&mut hasher);
    Some(hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{
        AutoPromotion, EngineActionKind, EngineState, KafkaConnection, NodesSpec, ObserverSetSpec,
        ObserverSetStatus, PartitionsStatus, Phase, PlanStatus, RolloutKind, RolloutStatus,
        RolloutStep,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime, ObjectMeta, Time};
    use k8s_openapi::jiff::Timestamp;

    /// A named edit of a set.
    type Change = (&'static str, fn(&mut ObserverSet));

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    /// A set as the apiserver serves it: uid, generation, our finalizer, and a status both loops
    /// have written to (the spec's content does not matter: its generation stands for it).
    fn set() -> ObserverSet {
        let spec = ObserverSetSpec {
            kafka: KafkaConnection {
                bootstrap_servers: "kafka:9092".into(),
                tls: None,
                sasl: None,
            },
            nodes: Some(NodesSpec {
                controllers: None,
                brokers: None,
            }),
            clusters: None,
            observers: vec![4, 5],
            promotion: Default::default(),
            rollout: Default::default(),
            deletion_policy: Default::default(),
        };
        let mut set = ObserverSet::new("orders", spec);
        set.metadata = ObjectMeta {
            name: Some("orders".into()),
            namespace: Some("team-a".into()),
            uid: Some("u-1".into()),
            generation: Some(3),
            resource_version: Some("100".into()),
            finalizers: Some(vec![crate::k8s::finalizer::FINALIZER.into()]),
            ..ObjectMeta::default()
        };
        set.status = Some(ObserverSetStatus {
            observed_generation: Some(3),
            phase: Some(Phase::Ready),
            desired_observers: vec![4],
            effective_observers: vec![4],
            revision: 2,
            auto_promotions: vec![
                AutoPromotion {
                    node_id: 5,
                    at: Time(at(0)),
                    reason: "under min ISR".into(),
                },
                AutoPromotion {
                    node_id: 6,
                    at: Time(at(1)),
                    reason: "offline".into(),
                },
            ],
            history: history::record(
                &[],
                vec![
                    history::entry(
                        at(0),
                        EngineActionKind::Promote,
                        5,
                        "p",
                        history::AUTOMATION,
                    ),
                    history::entry(
                        at(1),
                        EngineActionKind::Promote,
                        6,
                        "p",
                        history::AUTOMATION,
                    ),
                    history::entry(at(2), EngineActionKind::Demote, 7, "spec", "kubectl"),
                ],
            ),
            ..ObserverSetStatus::default()
        });
        let newest = history::newest(&status(&mut set).history);
        status(&mut set).last_action = newest;
        set
    }

    fn status(set: &mut ObserverSet) -> &mut ObserverSetStatus {
        set.status.as_mut().expect("the test set has a status")
    }

    fn condition(type_: &str, status: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: "R".into(),
            message: "m".into(),
            observed_generation: Some(3),
            last_transition_time: Time(at(7)),
        }
    }

    /// Changes a reconcile does not decide on: none of them may wake it.
    #[test]
    fn writes_the_reconciler_does_not_read_leave_it_equal() {
        let changes: Vec<Change> = vec![
            ("resourceVersion", |s| {
                s.metadata.resource_version = Some("101".into())
            }),
            ("managedFields", |s| {
                s.metadata.managed_fields = Some(vec![Default::default()])
            }),
            ("labels", |s| {
                s.metadata.labels = Some([("team".into(), "a".into())].into())
            }),
            ("phase", |s| status(s).phase = Some(Phase::Degraded)),
            ("observedGeneration", |s| {
                status(s).observed_generation = Some(2)
            }),
            ("conditions of both loops", |s| {
                status(s).conditions = vec![
                    condition("Ready", "False"),
                    condition("KafkaReachable", "False"),
                    condition("ObserversAvailable", "True"),
                ]
            }),
            ("revision", |s| status(s).revision = 3),
            ("desired and effective", |s| {
                status(s).desired_observers = vec![];
                status(s).effective_observers = vec![];
            }),
            ("roles", |s| {
                status(s).roles.broker = Some(Default::default())
            }),
            ("rollout", |s| {
                status(s).rollout = Some(RolloutStatus {
                    revision: 3,
                    kind: RolloutKind::Promotion,
                    step: RolloutStep::Brokers,
                    started_at: MicroTime(at(8)),
                    step_started_at: MicroTime(at(9)),
                    target: vec![],
                    acknowledged: vec![],
                    pending: vec!["kafka-0".into()],
                    excused: vec![],
                    timed_out: true,
                    may_excuse: true,
                })
            }),
            ("plan", |s| {
                status(s).plan = Some(PlanStatus {
                    at: Time(at(9)),
                    dry_run: true,
                    actions: vec![],
                })
            }),
            ("engineState", |s| {
                status(s).engine_state = Some(EngineState {
                    saved_at: MicroTime(at(9)),
                    brokers: vec![],
                    high_watermarks: vec![],
                    omitted_high_watermarks: 0,
                })
            }),
            ("partitions", |s| {
                status(s).partitions = Some(PartitionsStatus {
                    offline: 1,
                    ..Default::default()
                })
            }),
            ("lastAction", |s| status(s).last_action = None),
            ("the reconciler's own history entry", |s| {
                let history = &status(s).history;
                let more = history::record(
                    history,
                    vec![history::entry(
                        at(5),
                        EngineActionKind::Promote,
                        4,
                        "spec",
                        "kubectl",
                    )],
                );
                status(s).history = more;
            }),
            ("the stored order of history and autoPromotions", |s| {
                status(s).history.reverse();
                status(s).auto_promotions.reverse();
            }),
        ];
        for (what, change) in changes {
            let before = set();
            let mut after = before.clone();
            change(&mut after);
            assert_ne!(
                serde_json::to_value(&before).unwrap(),
                serde_json::to_value(&after).unwrap(),
                "{what}: the test changes nothing"
            );
            assert_eq!(fingerprint(&before), fingerprint(&after), "{what}");
        }
    }

    /// Every input a reconcile decides on: each change must wake it.
    #[test]
    fn every_input_the_reconciler_reads_changes_it() {
        let changes: Vec<Change> = vec![
            ("spec (generation)", |s| s.metadata.generation = Some(4)),
            ("uid (recreated)", |s| s.metadata.uid = Some("u-2".into())),
            ("deletionTimestamp", |s| {
                s.metadata.deletion_timestamp = Some(Time(at(9)))
            }),
            ("finalizer removed", |s| s.metadata.finalizers = None),
            ("finalizer added", |s| {
                s.metadata
                    .finalizers
                    .get_or_insert_with(Vec::new)
                    .push("other.io/f".into())
            }),
            ("autoPromotions: a promotion", |s| {
                status(s).auto_promotions.push(AutoPromotion {
                    node_id: 4,
                    at: Time(at(9)),
                    reason: "offline".into(),
                })
            }),
            ("autoPromotions: a demotion", |s| {
                status(s).auto_promotions.clear()
            }),
            ("autoPromotions: another node", |s| {
                status(s).auto_promotions[0].node_id = 4
            }),
            ("autoPromotions: promoted again", |s| {
                status(s).auto_promotions[0].at = Time(at(9))
            }),
            ("the status gone (autoPromotions with it)", |s| {
                s.status = None
            }),
            ("an automatic history entry", |s| {
                let history = &status(s).history;
                let more = history::record(
                    history,
                    vec![history::entry(
                        at(5),
                        EngineActionKind::MoveLeadership,
                        4,
                        "drain",
                        history::AUTOMATION,
                    )],
                );
                status(s).history = more;
            }),
            ("an automatic history entry trimmed", |s| {
                status(s).history.retain(|e| !history::is_automatic(e))
            }),
        ];
        for (what, change) in changes {
            let before = set();
            let mut after = before.clone();
            change(&mut after);
            assert_ne!(fingerprint(&before), fingerprint(&after), "{what}");
        }
    }
}
