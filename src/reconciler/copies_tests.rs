use super::*;
use crate::crd::{RolloutKind, RolloutStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use proptest::prelude::*;

/// A status at (epoch, revision, step): step 1 and 2 a rollout at that step, 3 finished.
fn at(epoch: i64, revision: i64, step: u8) -> ObserverSetStatus {
    let t = MicroTime(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    let rollout = (step < 3).then(|| RolloutStatus {
        revision,
        kind: RolloutKind::Promotion,
        step: if step == 1 {
            RolloutStep::Controllers
        } else {
            RolloutStep::Brokers
        },
        started_at: t.clone(),
        step_started_at: t,
        target: vec![],
        acknowledged: vec![],
        pending: vec![],
        excused: vec![],
        timed_out: false,
        may_excuse: false,
    });
    ObserverSetStatus {
        writer_epoch: epoch,
        revision,
        rollout,
        ..ObserverSetStatus::default()
    }
}

fn answered(member: &str, status: Option<ObserverSetStatus>, version: &str) -> Copy {
    Copy {
        member: member.into(),
        read: Read::Answered {
            status,
            version: Some(version.into()),
        },
    }
}

fn unanswered(member: &str) -> Copy {
    Copy {
        member: member.into(),
        read: Read::Unanswered("connect timeout".into()),
    }
}

#[test]
fn a_later_epoch_wins_over_a_later_revision() {
    let copies = [
        answered("east", Some(at(1, 9, 2)), "10"),
        answered("west", Some(at(2, 8, 1)), "20"),
        answered("tie", Some(at(2, 8, 1)), "30"),
    ];
    let r = recover(&copies).unwrap();
    assert_eq!(r.from, "west");
    assert_eq!(progress(r.latest.as_ref()), (2, 8, 1));
    assert_eq!(r.epoch, 3);
    assert_eq!(r.behind, vec!["east".to_string()]);
    assert_eq!(r.versions.len(), 3);
}

#[test]
fn within_an_epoch_the_revision_then_the_step_decides() {
    let copies = [
        answered("east", Some(at(4, 5, 3)), "1"),
        answered("west", Some(at(4, 6, 1)), "2"),
        answered("tie", Some(at(4, 6, 2)), "3"),
    ];
    assert_eq!(recover(&copies).unwrap().from, "tie");
    let finished = [
        answered("east", Some(at(4, 6, 3)), "1"),
        answered("west", Some(at(4, 6, 2)), "2"),
        unanswered("tie"),
    ];
    let r = recover(&finished).unwrap();
    assert_eq!(r.from, "east");
    assert_eq!(r.unanswered.len(), 1);
    assert_eq!(r.epoch, 5);
}

#[test]
fn a_minority_answer_resumes_nothing() {
    let copies = [
        answered("east", Some(at(3, 9, 3)), "1"),
        unanswered("west"),
        unanswered("tie"),
    ];
    let e = recover(&copies).unwrap_err();
    assert!(
        matches!(
            e,
            CopiesError::TooFewAnswered {
                answered: 1,
                members: 3,
                needed: 2,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("west: connect timeout"), "{e}");
}

#[test]
fn no_status_anywhere_starts_at_epoch_one() {
    let copies = [
        answered("east", None, "1"),
        answered("west", None, "2"),
        unanswered("tie"),
    ];
    let r = recover(&copies).unwrap();
    assert_eq!(r.latest, None);
    assert_eq!(r.epoch, 1);
    assert!(r.behind.is_empty());
}

#[test]
fn one_member_is_its_own_majority() {
    let r = recover(&[answered("local", Some(at(2, 3, 3)), "7")]).unwrap();
    assert_eq!((r.epoch, r.from.as_str()), (3, "local"));
    assert!(recover(&[unanswered("local")]).is_err());
    assert!(persisted(1, 1, &[]).is_ok());
    assert!(persisted(1, 0, &[("local".into(), "409".into())]).is_err());
}

#[test]
fn a_write_counts_on_a_majority_only() {
    assert!(persisted(3, 2, &[("tie".into(), "timeout".into())]).is_ok());
    let e = persisted(
        3,
        1,
        &[
            ("west".into(), "timeout".into()),
            ("tie".into(), "refused".into()),
        ],
    )
    .unwrap_err();
    assert!(e.to_string().contains("1 of 3"), "{e}");
    assert!(e.to_string().contains("west: timeout; tie: refused"), "{e}");
    assert!(persisted(5, 3, &[]).is_ok());
    assert!(persisted(5, 2, &[]).is_err());
}

#[test]
fn a_later_epoch_read_means_another_leadership_took_over() {
    let mut s = at(3, 7, 3);
    assert_eq!(later_epoch(None, &s), None, "nothing claimed yet");
    assert_eq!(later_epoch(Some(3), &s), None, "our own epoch");
    s.leader_epoch = 4;
    assert_eq!(later_epoch(Some(3), &s), Some(4), "a successor's claim");
    assert_eq!(
        later_epoch(Some(2), &at(3, 1, 1)),
        Some(3),
        "a successor's write"
    );
    assert_eq!(later_epoch(Some(5), &s), None);
}

/// One leadership of the model below: the members it reaches when it reads, those that accept
/// its claim, and its writes, each with the members that accept it.
#[derive(Clone, Debug)]
struct Leadership {
    reads: Vec<bool>,
    claims: Vec<bool>,
    writes: Vec<Vec<bool>>,
}

fn leadership(members: usize) -> impl Strategy<Value = Leadership> {
    let some = || proptest::collection::vec(any::<bool>(), members);
    (some(), some(), proptest::collection::vec(some(), 0..6)).prop_map(|(reads, claims, writes)| {
        Leadership {
            reads,
            claims,
            writes,
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Leaders one after another (the Leases allow no overlap), each resuming from whatever
    /// majority it reaches, claiming its epoch where it can, then writing to whichever members
    /// accept, stopping at its first claim or write a majority did not take (as the reconciler
    /// does: no list follows it). Every resumption starts at or past the last write that
    /// counted, and no two leaderships write under one epoch, whatever reached a minority.
    #[test]
    fn a_resumption_never_misses_a_write_that_counted(
        members in prop_oneof![Just(3usize), Just(5usize)],
        leaderships in proptest::collection::vec(leadership(5), 1..12),
    ) {
        let names: Vec<String> = (0..members).map(|i| format!("m{i}")).collect();
        let mut copies: Vec<Option<ObserverSetStatus>> = vec![None; members];
        let mut counted: Option<(i64, i64, u8)> = None;
        let mut writer_of_epoch: BTreeMap<i64, usize> = BTreeMap::new();
        for (n, l) in leaderships.into_iter().enumerate() {
            let read: Vec<Copy> = (0..members)
                .map(|i| if l.reads[i] {
                    answered(&names[i], copies[i].clone(), "v")
                } else {
                    unanswered(&names[i])
                })
                .collect();
            let Ok(r) = recover(&read) else {
                // No majority: this one never leads (it writes nothing).
                continue;
            };
            let resumed = progress(r.latest.as_ref());
            if let Some(c) = counted {
                prop_assert!((resumed.1, resumed.2) >= (c.1, c.2),
                    "resumed at {resumed:?}, behind the counted write {c:?}");
            }
            // The claim: only leaderEpoch changes, where it is accepted.
            for i in (0..members).filter(|i| l.claims[*i]) {
                copies[i].get_or_insert_with(ObserverSetStatus::default).leader_epoch = r.epoch;
            }
            if persisted(members, l.claims[..members].iter().filter(|c| **c).count(), &[]).is_err() {
                continue;
            }
            let (mut revision, mut step) = (resumed.1, resumed.2);
            for accepts in l.writes.iter().map(|w| &w[..members]) {
                (revision, step) = if step >= 3 { (revision + 1, 1) } else { (revision, step + 1) };
                let mut written = at(r.epoch, revision, step);
                written.leader_epoch = r.epoch;
                let writer = *writer_of_epoch.entry(r.epoch).or_insert(n);
                prop_assert_eq!(writer, n, "two leaderships wrote under epoch {}", r.epoch);
                for (i, ok) in accepts.iter().enumerate() {
                    if *ok {
                        copies[i] = Some(written.clone());
                    }
                }
                let accepted = accepts.iter().filter(|a| **a).count();
                if persisted(members, accepted, &[]).is_err() {
                    break;
                }
                counted = Some((r.epoch, revision, step));
            }
        }
    }
}

/// A status whose engine saved its state at second `s` and promoted `promoted`.
fn engine_at(s: i64, promoted: &[i32]) -> ObserverSetStatus {
    let t = k8s_openapi::jiff::Timestamp::from_second(s).unwrap();
    ObserverSetStatus {
        auto_promotions: promoted
            .iter()
            .map(|&node_id| crate::crd::AutoPromotion {
                node_id,
                at: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t),
                reason: "under min ISR".into(),
            })
            .collect(),
        engine_state: Some(crate::crd::EngineState {
            saved_at: MicroTime(t),
            brokers: vec![],
            high_watermarks: vec![],
            omitted_high_watermarks: 0,
        }),
        ..ObserverSetStatus::default()
    }
}

#[test]
fn the_engine_record_comes_from_the_newest_mark_whatever_the_rollout_progress() {
    // east is furthest on for the rollout, but west holds the engine's later record.
    let mut east = engine_at(100, &[]);
    east.writer_epoch = 3;
    let copies = [
        answered("east", Some(east), "10"),
        answered("west", Some(engine_at(200, &[4])), "20"),
        answered("tie", Some(engine_at(150, &[])), "30"),
    ];
    assert_eq!(recover(&copies).unwrap().from, "east");
    let source = engine_source(&copies).unwrap().unwrap();
    assert_eq!(source.auto_promotions[0].node_id, 4);
}

#[test]
fn no_engine_record_without_a_majority_and_none_before_any_write() {
    let copies = [
        answered("east", Some(engine_at(200, &[4])), "10"),
        unanswered("west"),
        unanswered("tie"),
    ];
    assert!(matches!(
        engine_source(&copies),
        Err(CopiesError::TooFewAnswered { answered: 1, .. })
    ));
    let copies = [
        answered("east", Some(at(1, 1, 3)), "10"),
        answered("west", None, "20"),
        unanswered("tie"),
    ];
    assert_eq!(engine_source(&copies).unwrap(), None);
    // Equal marks: the first in member order.
    let mut west = engine_at(200, &[4]);
    west.revision = 7;
    let copies = [
        answered("east", Some(engine_at(200, &[4])), "10"),
        answered("west", Some(west), "20"),
        unanswered("tie"),
    ];
    assert_eq!(engine_source(&copies).unwrap().unwrap().revision, 0);
}

#[test]
fn the_reconciler_acts_only_on_promotions_a_majority_holds() {
    // The newest record (west's) is on one copy only: the older one, on two, stands.
    let copies = [
        answered("east", Some(engine_at(100, &[])), "10"),
        answered("west", Some(engine_at(200, &[4])), "20"),
        answered("tie", Some(engine_at(150, &[])), "30"),
    ];
    assert_eq!(engine_promotions(&copies), Some(vec![]));
    // Once it is on a majority, the newest record's promotions.
    let copies = [
        answered("east", Some(engine_at(100, &[])), "10"),
        answered("west", Some(engine_at(200, &[4])), "20"),
        answered("tie", Some(engine_at(200, &[4])), "30"),
    ];
    let promoted: Vec<i32> = engine_promotions(&copies)
        .unwrap()
        .iter()
        .map(|p| p.node_id)
        .collect();
    assert_eq!(promoted, [4]);
    // A lost member and two copies that differ: neither record is on a majority.
    let copies = [
        unanswered("east"),
        answered("west", Some(engine_at(200, &[4])), "20"),
        answered("tie", Some(engine_at(150, &[])), "30"),
    ];
    assert_eq!(engine_promotions(&copies), None);
}
