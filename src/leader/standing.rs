//! What a replica can say about the leadership from where it stands, pure: from the campaign's
//! last look at each member's Lease, whether it leads, sees a leader (one holder of a majority of
//! the Leases it reaches) or sees no one with authority (the side of a partition without a
//! majority: docs/multi-cluster.md, "What the side without authority says"). The shell
//! (`super::view_report`) writes it to `status.localView` of its own member's copies and
//! publishes an Event when it changes.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::quorum;
use crate::crd::{LeaseView, LocalView};

/// What the campaign's last turn on one Lease showed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseSight {
    /// The member cluster the Lease is in.
    pub member: String,
    /// Its apiserver answered the last turn.
    pub reached: bool,
    /// Who holds it with a term still running by this replica's clock (this replica included);
    /// `None` when free, lapsed or not reached.
    pub holder: Option<String>,
}

/// Where this replica stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// It holds a majority of the Leases.
    Leads,
    /// Another replica holds a majority of the Leases, all of them among those reached here.
    Follows { leader: String },
    /// No one holds a majority of the Leases this replica reaches: it may not act and cannot see
    /// who may.
    NoAuthority,
    /// Not known yet: only the state before the first reported standing (`fold`), never written.
    Unknown,
}

impl Standing {
    /// The name in `status.localView.standing`.
    pub fn name(&self) -> &'static str {
        match self {
            Standing::Leads => "Leads",
            Standing::Follows { .. } => "FollowsLeader",
            Standing::NoAuthority => "NoAuthority",
            Standing::Unknown => "Unknown",
        }
    }

    fn leader(&self) -> Option<&str> {
        match self {
            Standing::Follows { leader } => Some(leader),
            _ => None,
        }
    }
}

/// The standing `sights` (one per member's Lease, in `--members` order) show to `identity`.
pub fn standing(identity: &str, sights: &[LeaseSight]) -> Standing {
    let majority = quorum::majority(sights.len());
    let holds = |who: &str| {
        sights
            .iter()
            .filter(|s| s.reached && s.holder.as_deref() == Some(who))
            .count()
    };
    if holds(identity) >= majority {
        return Standing::Leads;
    }
    let holders: BTreeSet<&str> = sights
        .iter()
        .filter(|s| s.reached)
        .filter_map(|s| s.holder.as_deref())
        .collect();
    holders
        .into_iter()
        .find(|h| holds(h) >= majority)
        .map_or(Standing::NoAuthority, |leader| Standing::Follows {
            leader: leader.to_string(),
        })
}

/// The standing as reported: a change to [`Standing::NoAuthority`] counts only once it has lasted
/// `hold` (a leader's hand-over passes through a moment when every Lease is lapsed or just
/// taken, and is no partition); a change to a leader, this replica or another, counts at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reported {
    pub standing: Standing,
    /// Since when `NoAuthority` is seen without being reported yet.
    pending: Option<Instant>,
}

impl Reported {
    pub fn new(standing: Standing) -> Self {
        Self {
            standing,
            pending: None,
        }
    }
}

/// Folds the standing seen at `now` into what is reported; `true` when the reported standing
/// changed.
pub fn settle(reported: &mut Reported, seen: Standing, hold: Duration, now: Instant) -> bool {
    if seen == reported.standing {
        reported.pending = None;
        return false;
    }
    if seen == Standing::NoAuthority {
        let since = *reported.pending.get_or_insert(now);
        if now.saturating_duration_since(since) < hold {
            return false;
        }
    }
    reported.standing = seen;
    reported.pending = None;
    true
}

/// The members whose Lease this replica reached: with the standing, what `status.localView`
/// is rewritten on (the holders of a minority's Leases change with every release and retake,
/// and are no news).
pub fn reached(sights: &[LeaseSight]) -> Vec<String> {
    sights
        .iter()
        .filter(|s| s.reached)
        .map(|s| s.member.clone())
        .collect()
}

/// The sentence of the view: what this replica reaches and who holds what.
pub fn message(member: &str, standing: &Standing, sights: &[LeaseSight]) -> String {
    let reached = reached(sights);
    let lost: Vec<&str> = sights
        .iter()
        .filter(|s| !s.reached)
        .map(|s| s.member.as_str())
        .collect();
    let holders: Vec<String> = sights
        .iter()
        .filter(|s| s.reached)
        .map(|s| match &s.holder {
            Some(h) => format!("{} held by {h}", s.member),
            None => format!("{} free", s.member),
        })
        .collect();
    let mut text = format!(
        "the operator in {member} reaches {} of {} Leases ({})",
        reached.len(),
        sights.len(),
        holders.join(", ")
    );
    if !lost.is_empty() {
        text.push_str(&format!("; no answer from {}", lost.join(", ")));
    }
    text.push_str(match standing {
        Standing::Leads => ": it leads",
        Standing::Follows { .. } => ": it follows the holder of the majority",
        Standing::NoAuthority => {
            ": no one holds a majority of the Leases it reaches, so it acts on nothing and cannot see who may"
        }
        Standing::Unknown => "",
    });
    text
}

/// `status.localView` for this replica's standing.
pub fn local_view(
    replica: &str,
    member: &str,
    standing: &Standing,
    sights: &[LeaseSight],
    since: Time,
) -> LocalView {
    LocalView {
        replica: replica.to_string(),
        member: member.to_string(),
        standing: standing.name().to_string(),
        leader: standing.leader().map(str::to_string),
        leases: sights
            .iter()
            .map(|s| LeaseView {
                member: s.member.clone(),
                reached: s.reached,
                holder: s.holder.clone(),
            })
            .collect(),
        message: message(member, standing, sights),
        since,
    }
}

/// The Event that goes with a new view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Announce {
    /// The standing became `NoAuthority` (a Warning).
    NoAuthority,
    /// It left `NoAuthority` (Normal).
    AuthorityVisible,
}

/// The view as last decided, and its revision (one up on every change).
#[derive(Clone, Debug, PartialEq)]
pub struct Current {
    pub reported: Reported,
    pub reached: Vec<String>,
    pub view: LocalView,
    pub revision: u64,
    /// The Event that goes with this revision, for every copy it is written to.
    pub event: Option<Announce>,
}

/// Folds the campaign's latest look (taken at `now`; `wall` stamps a new view's `since`) into
/// `current`: a new revision when the reported standing or the reached members changed, and
/// then the new state. Before the first known standing the state is revision 0, with nothing to
/// write: a replica whose first looks show no majority (a start on the wrong side of a cut, or
/// while no one leads yet) reports it only after `hold`, like any other.
pub fn fold<'a>(
    current: &'a mut Option<Current>,
    identity: &str,
    member: &str,
    hold: Duration,
    looked: &[LeaseSight],
    now: Instant,
    wall: Time,
) -> Option<&'a Current> {
    let seen = standing(identity, looked);
    let reached = reached(looked);
    let state = current.get_or_insert_with(|| Current {
        reported: Reported::new(Standing::Unknown),
        reached: reached.clone(),
        view: local_view(identity, member, &Standing::Unknown, looked, wall.clone()),
        revision: 0,
        event: None,
    });
    let before = state.reported.standing.clone();
    let standing_changed = settle(&mut state.reported, seen, hold, now);
    let after = state.reported.standing.clone();
    if after == Standing::Unknown || (!standing_changed && reached == state.reached) {
        return None;
    }
    state.event = match (&before, &after) {
        (b, Standing::NoAuthority) if *b != Standing::NoAuthority => Some(Announce::NoAuthority),
        (Standing::NoAuthority, a) if *a != Standing::NoAuthority => {
            Some(Announce::AuthorityVisible)
        }
        _ => None,
    };
    state.view = local_view(identity, member, &after, looked, wall);
    state.reached = reached;
    state.revision += 1;
    Some(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sight(member: &str, reached: bool, holder: Option<&str>) -> LeaseSight {
        LeaseSight {
            member: member.into(),
            reached,
            holder: holder.map(str::to_string),
        }
    }

    #[test]
    fn a_majority_held_by_one_holder_is_a_leader_and_a_minority_is_no_authority() {
        // MC4, the link east-west cut with the leader in east, as west sees it: its own Lease
        // lapsed (or taken by itself), tie's still renewed by east: one of three each.
        let west = [
            sight("east", false, None),
            sight("west", true, Some("op-west-0")),
            sight("tie", true, Some("op-east-0")),
        ];
        assert_eq!(standing("op-west-0", &west), Standing::NoAuthority);
        // MC3, tie lost, as west sees it: east's leader holds east and west.
        let mc3 = [
            sight("east", true, Some("op-east-0")),
            sight("west", true, Some("op-east-0")),
            sight("tie", false, None),
        ];
        assert_eq!(
            standing("op-west-0", &mc3),
            Standing::Follows {
                leader: "op-east-0".into()
            }
        );
        // The leader itself, one member lost.
        assert_eq!(standing("op-east-0", &mc3), Standing::Leads);
        // A Lease not reached never counts for anyone, whatever was last known of it.
        let unreached = [
            sight("east", false, Some("op-east-0")),
            sight("west", true, Some("op-east-0")),
            sight("tie", false, Some("op-east-0")),
        ];
        assert_eq!(standing("op-west-0", &unreached), Standing::NoAuthority);
        // A single cluster: its one Lease is the majority.
        assert_eq!(
            standing("b", &[sight("", true, Some("a"))]),
            Standing::Follows { leader: "a".into() }
        );
    }

    #[test]
    fn no_authority_is_reported_only_once_it_lasted_and_a_leader_at_once() {
        let hold = Duration::from_secs(6);
        let t0 = Instant::now();
        let follows = Standing::Follows {
            leader: "op-east-0".into(),
        };
        let mut reported = Reported::new(follows.clone());
        // A hand-over: a moment without a majority, then the new leader.
        assert!(!settle(&mut reported, Standing::NoAuthority, hold, t0));
        assert!(!settle(
            &mut reported,
            Standing::NoAuthority,
            hold,
            t0 + Duration::from_secs(3)
        ));
        let new_leader = Standing::Follows {
            leader: "op-tie-0".into(),
        };
        assert!(settle(
            &mut reported,
            new_leader.clone(),
            hold,
            t0 + Duration::from_secs(4)
        ));
        assert_eq!(reported.standing, new_leader);
        // A partition: no majority for the whole hold, counted from its first sighting.
        let t1 = t0 + Duration::from_secs(10);
        assert!(!settle(&mut reported, Standing::NoAuthority, hold, t1));
        assert!(!settle(
            &mut reported,
            Standing::NoAuthority,
            hold,
            t1 + Duration::from_secs(5)
        ));
        assert!(settle(
            &mut reported,
            Standing::NoAuthority,
            hold,
            t1 + hold
        ));
        assert_eq!(reported.standing, Standing::NoAuthority);
        // Healed: the leader is back at once, and the pending clock starts afresh next time.
        assert!(settle(&mut reported, follows, hold, t1 + hold * 2));
        assert!(!settle(
            &mut reported,
            Standing::NoAuthority,
            hold,
            t1 + hold * 3
        ));
        assert!(!settle(
            &mut reported,
            Standing::NoAuthority,
            hold,
            t1 + hold * 3 + Duration::from_secs(5)
        ));
    }

    #[test]
    fn a_view_is_revised_on_a_change_of_standing_or_reach_and_announced_to_and_from_no_authority() {
        let hold = Duration::from_secs(8);
        let t0 = Instant::now();
        let wall = || Time(k8s_openapi::jiff::Timestamp::from_second(1).unwrap());
        let at = |s: u64| t0 + Duration::from_secs(s);
        let all = [
            sight("east", true, Some("op-east-0")),
            sight("west", true, Some("op-east-0")),
            sight("tie", true, Some("op-east-0")),
        ];
        let cut = [
            sight("east", false, None),
            sight("west", true, Some("op-west-0")),
            sight("tie", true, Some("op-east-0")),
        ];
        let mut current = None;
        let mut fold_at = |looked: &[LeaseSight], s: u64| {
            fold(
                &mut current,
                "op-west-0",
                "west",
                hold,
                looked,
                at(s),
                wall(),
            )
            .map(|c| (c.revision, c.view.standing.clone(), c.event))
        };
        // The first known standing is revision 1, announced to no one.
        assert_eq!(fold_at(&all, 0), Some((1, "FollowsLeader".into(), None)));
        assert_eq!(fold_at(&all, 1), None, "nothing changed");
        // The cut: east is no longer reached (a new revision at once), and no one holds a
        // majority of what is reached (reported only after the hold, with a Warning).
        assert_eq!(fold_at(&cut, 2), Some((2, "FollowsLeader".into(), None)));
        assert_eq!(fold_at(&cut, 5), None);
        assert_eq!(
            fold_at(&cut, 10),
            Some((3, "NoAuthority".into(), Some(Announce::NoAuthority)))
        );
        assert_eq!(fold_at(&cut, 11), None, "announced once");
        // Healed: the leader is seen at once, announced.
        assert_eq!(
            fold_at(&all, 12),
            Some((4, "FollowsLeader".into(), Some(Announce::AuthorityVisible)))
        );
    }

    #[test]
    fn a_replica_starting_without_a_majority_in_sight_reports_it_only_after_the_hold() {
        let hold = Duration::from_secs(8);
        let t0 = Instant::now();
        let tie = |current: &mut Option<Current>, looked: &[LeaseSight], s: u64| {
            let wall = Time(k8s_openapi::jiff::Timestamp::from_second(1).unwrap());
            let at = t0 + Duration::from_secs(s);
            fold(current, "op-tie-0", "tie", hold, looked, at, wall)
                .map(|c| (c.revision, c.view.standing.clone(), c.event))
        };
        let nobody = [
            sight("east", true, None),
            sight("west", true, None),
            sight("tie", true, None),
        ];
        let mut current = None;
        assert_eq!(tie(&mut current, &nobody, 0), None);
        // It took the Leases within the hold: it leads, no Warning ever went out.
        let mine = [
            sight("east", true, Some("op-tie-0")),
            sight("west", true, Some("op-tie-0")),
            sight("tie", true, None),
        ];
        assert_eq!(tie(&mut current, &mine, 5), Some((1, "Leads".into(), None)));
        // Another start that never sees a majority: NoAuthority once the hold passed.
        let mut current = None;
        assert_eq!(tie(&mut current, &nobody, 0), None);
        assert_eq!(tie(&mut current, &nobody, 7), None);
        assert_eq!(
            tie(&mut current, &nobody, 8),
            Some((1, "NoAuthority".into(), Some(Announce::NoAuthority)))
        );
    }

    #[test]
    fn the_message_names_what_is_reached_and_who_holds_it() {
        let west = [
            sight("east", false, None),
            sight("west", true, None),
            sight("tie", true, Some("op-east-0")),
        ];
        let text = message("west", &Standing::NoAuthority, &west);
        assert_eq!(
            text,
            "the operator in west reaches 2 of 3 Leases (west free, tie held by op-east-0); no answer from east: no one holds a majority of the Leases it reaches, so it acts on nothing and cannot see who may"
        );
        let view = local_view(
            "op-west-0",
            "west",
            &Standing::NoAuthority,
            &west,
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::from_second(1).unwrap(),
            ),
        );
        assert_eq!(view.standing, "NoAuthority");
        assert_eq!(view.leader, None);
        assert_eq!(view.leases.len(), 3);
        assert_eq!(reached(&west), vec!["west".to_string(), "tie".to_string()]);
    }
}
