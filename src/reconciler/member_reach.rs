//! `status.members` of an install over member clusters: each member reachable or not, and
//! since when, as the leader's passes saw it, and the Events of its changes (pure;
//! docs/multi-cluster.md, "Failure table").
//!
//! An entry changes only when its member's reachability does: `since` and `message` keep the
//! moment and the reason first seen (a member asked again later fails with "did not answer a
//! moment ago", which says less), and a status that did not change is not written again.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::crd::MemberReach;

/// Longest reason kept in `status.members[].message` (an apiserver's error can be long).
pub const MESSAGE_MAX: usize = 240;

/// A change of one member's reachability: an Event (`crate::k8s::events::reason`
/// `MEMBER_UNREACHABLE`, a Warning, or `MEMBER_RETURNED`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReachChange {
    /// `true`: not reached; `false`: answers again.
    pub lost: bool,
    pub text: String,
}

/// `status.members` after a pass over `members` (in that order) in which `lost` were not
/// reached (with why), from the `previous` entries; and what changed. A member seen for the
/// first time is news only when it is not reached; members no longer configured are dropped.
pub fn reach(
    previous: &[MemberReach],
    members: &[String],
    lost: &[(String, String)],
    now: Timestamp,
) -> (Vec<MemberReach>, Vec<ReachChange>) {
    let mut entries = Vec::with_capacity(members.len());
    let mut changes = Vec::new();
    for name in members {
        let why = lost.iter().find(|(m, _)| m == name).map(|(_, w)| w);
        let before = previous.iter().find(|e| &e.name == name);
        if let Some(kept) = before.filter(|e| e.reachable == why.is_none()) {
            entries.push(kept.clone());
            continue;
        }
        let entry = MemberReach {
            name: name.clone(),
            reachable: why.is_none(),
            since: Time(now),
            message: why.map(|w| bounded(w)),
        };
        match (why, before) {
            (Some(w), _) => changes.push(ReachChange {
                lost: true,
                text: format!(
                    "member cluster {name} not reached: {}; nothing is written there until it answers",
                    bounded(w)
                ),
            }),
            (None, Some(b)) => changes.push(ReachChange {
                lost: false,
                text: format!(
                    "member cluster {name} answers again (not reached since {}); its copy and lists are brought to the current state",
                    b.since.0
                ),
            }),
            (None, None) => {}
        }
        entries.push(entry);
    }
    (entries, changes)
}

fn bounded(why: &str) -> String {
    if why.len() <= MESSAGE_MAX {
        return why.to_string();
    }
    let mut end = MESSAGE_MAX;
    while !why.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &why[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }
    fn names() -> Vec<String> {
        ["east", "west", "tie"].map(String::from).to_vec()
    }
    fn lost(m: &str, why: &str) -> Vec<(String, String)> {
        vec![(m.to_string(), why.to_string())]
    }

    #[test]
    fn a_first_pass_records_every_member_and_reports_only_the_lost() {
        let (first, changes) = reach(&[], &names(), &[], at(0));
        assert_eq!(first.len(), 3);
        assert!(first.iter().all(|e| e.reachable && e.message.is_none()));
        assert!(changes.is_empty(), "reachable at first sight is no news");
        let (entries, changes) = reach(&[], &names(), &lost("tie", "connect timeout"), at(0));
        assert!(!entries[2].reachable);
        assert_eq!(changes.len(), 1);
        assert!(changes[0].lost && changes[0].text.contains("tie not reached: connect timeout"));
    }

    #[test]
    fn an_entry_changes_only_when_its_member_does() {
        let (start, _) = reach(&[], &names(), &[], at(0));
        let (lost_pass, changes) = reach(&start, &names(), &lost("tie", "connect timeout"), at(5));
        assert_eq!(changes.len(), 1);
        assert_eq!(lost_pass[2].since, Time(at(5)));
        assert_eq!(lost_pass[0], start[0], "east did not change");
        // Asked again later, tie fails with a vaguer reason: the entry keeps the first.
        let (again, changes) = reach(
            &lost_pass,
            &names(),
            &lost("tie", "did not answer a moment ago"),
            at(9),
        );
        assert!(changes.is_empty());
        assert_eq!(again, lost_pass);
        let (back, changes) = reach(&again, &names(), &[], at(30));
        assert_eq!(changes.len(), 1);
        assert!(!changes[0].lost);
        assert!(
            changes[0].text.contains(&at(5).to_string()),
            "{}",
            changes[0].text
        );
        assert!(back[2].reachable && back[2].message.is_none());
        assert_eq!(back[2].since, Time(at(30)));
    }

    #[test]
    fn members_no_longer_configured_are_dropped_and_reasons_bounded() {
        let (start, _) = reach(&[], &names(), &[], at(0));
        let two = vec!["east".to_string(), "west".to_string()];
        let long = "x".repeat(1000);
        let (entries, _) = reach(&start, &two, &lost("west", &long), at(1));
        assert_eq!(
            entries.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
            ["east", "west"]
        );
        assert!(entries[1].message.as_ref().unwrap().len() <= MESSAGE_MAX + 3);
    }
}
