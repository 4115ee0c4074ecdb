use super::*;
use crate::crd::{Phase, RolesStatus};

fn copy(
    epoch: i64,
    claimed: i64,
    revision: i64,
    acked: usize,
    pending: usize,
) -> ObserverSetStatus {
    let pods = |prefix: &str, n: usize| (0..n).map(|i| format!("{prefix}-{i}")).collect();
    ObserverSetStatus {
        phase: Some(if pending == 0 {
            Phase::Ready
        } else {
            Phase::RollingOut
        }),
        revision,
        writer_epoch: epoch,
        leader_epoch: claimed,
        roles: RolesStatus {
            controller: Some(RoleStatus {
                revision,
                observers: vec![4],
                acknowledged: pods("kafka-controller-east", 1),
                pending: vec![],
                excused: vec![],
            }),
            broker: Some(RoleStatus {
                revision,
                observers: vec![4],
                acknowledged: pods("kafka-broker-east", acked),
                pending: pods("kafka-broker-west", pending),
                excused: vec![],
            }),
        },
        ..ObserverSetStatus::default()
    }
}

fn read(context: &str, ms: u64, status: Option<ObserverSetStatus>) -> MemberRead {
    MemberRead {
        context: context.into(),
        took: Duration::from_millis(ms),
        outcome: Ok((status, Some("1".into()))),
    }
}

fn lost(context: &str, ms: u64) -> MemberRead {
    MemberRead {
        context: context.into(),
        took: Duration::from_millis(ms),
        outcome: Err("connect timeout".into()),
    }
}

#[test]
fn one_member_unreachable_the_others_compared() {
    let view = members_view(&[
        lost("east", 2003),
        read("west", 12, Some(copy(3, 3, 7, 2, 0))),
        read("tie", 9, Some(copy(2, 3, 6, 1, 1))),
    ]);
    assert_eq!(view.resume_from.as_deref(), Some("west"));
    assert_eq!(view.behind, vec!["tie".to_string()]);
    assert_eq!(view.problem, None);
    let text = render_members(&view);
    let expected = "\
CONTEXT  ANSWERED     PHASE       REVISION  STEP  EPOCH          CONTROLLERS  BROKERS
east     no           -           -         -     -              -            -
west     yes (12 ms)  Ready       7         -     3 (claimed 3)  1/1          2/2
tie      yes (9 ms)   RollingOut  6         -     2 (claimed 3)  1/1          1/2
east: unreachable after 2003 ms: connect timeout
copies: a leader resumes from west; behind (overwritten by the leader's next write): tie
";
    assert_eq!(text, expected, "\n{text}");
}

#[test]
fn each_copy_shows_its_own_operators_view() {
    let view_of = |replica: &str, standing: &str, leader: Option<&str>| crate::crd::LocalView {
        replica: replica.into(),
        member: replica.trim_start_matches("operator-").into(),
        standing: standing.into(),
        leader: leader.map(str::to_string),
        leases: vec![],
        message: String::new(),
        since: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::from_second(1).unwrap(),
        ),
    };
    let mut east = copy(3, 3, 7, 2, 0);
    east.local_view = Some(view_of("operator-east", "Leads", None));
    let mut west = east.clone();
    west.local_view = Some(view_of("operator-west", "NoAuthority", None));
    let mut tie = east.clone();
    tie.local_view = Some(view_of(
        "operator-tie",
        "FollowsLeader",
        Some("operator-east"),
    ));
    let view = members_view(&[
        read("east", 5, Some(east)),
        read("west", 6, Some(west)),
        read("tie", 7, Some(tie)),
    ]);
    // The copies differ only in their views: none is behind.
    assert!(view.behind.is_empty(), "{:?}", view.behind);
    let text = render_members(&view);
    assert!(
        text.contains("operators' views: east: operator-east Leads; west: operator-west NoAuthority; tie: operator-tie FollowsLeader operator-east\n"),
        "{text}"
    );
    let json = serde_json::to_value(&view).unwrap();
    assert_eq!(json["members"][1]["view"], "operator-west NoAuthority");
}

#[test]
fn a_minority_answering_resumes_nothing_and_says_so() {
    let view = members_view(&[
        lost("east", 2001),
        lost("west", 2002),
        read("tie", 9, Some(copy(2, 2, 6, 1, 0))),
    ]);
    assert_eq!(view.resume_from, None);
    let problem = view.problem.clone().unwrap_or_default();
    assert!(problem.contains("only 1 of 3"), "{problem}");
    assert!(
        problem.contains("east: connect timeout; west: connect timeout"),
        "{problem}"
    );
    let text = render_members(&view);
    assert!(
        text.contains("copies: only 1 of 3 member clusters answered"),
        "{text}"
    );
    assert!(text.contains("west: unreachable after 2002 ms"), "{text}");
}

#[test]
fn copies_that_agree_leave_none_behind_and_a_fresh_copy_shows_dashes() {
    let same = copy(1, 1, 2, 2, 0);
    let view = members_view(&[
        read("east", 5, Some(same.clone())),
        read("west", 6, Some(same)),
        read("tie", 7, None),
    ]);
    assert_eq!(view.resume_from.as_deref(), Some("east"));
    assert_eq!(
        view.behind,
        vec!["tie".to_string()],
        "a copy never written is behind"
    );
    let text = render_members(&view);
    assert!(text.contains("tie      yes (7 ms)  -"), "{text}");
    let json = serde_json::to_value(&view).unwrap();
    assert_eq!(json["members"][0]["writerEpoch"], 1);
    assert_eq!(json["members"][2]["answered"], true);
    assert_eq!(json["resumeFrom"], "east");
}
