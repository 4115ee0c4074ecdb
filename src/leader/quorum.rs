//! Authority over several Leases, pure: a replica leads while it holds a majority of them
//! (one Lease per member cluster, docs/multi-cluster.md; one Lease in a single cluster, where
//! this is "holds it"). The write fence (`crate::k8s::fence::majority`) proves the same from
//! confirmed renewals; this decides what the campaign publishes and when it gives up a
//! minority it cannot grow.

use std::time::{Duration, Instant};

/// What the last turn on one Lease found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holding {
    /// Our write on it was confirmed.
    Held,
    /// Another replica holds it (renewing, or not yet expired as timed here), or took it first.
    Other,
    /// Its apiserver did not answer in time.
    Unreachable,
}

/// How many Leases make a majority of `leases`.
pub fn majority(leases: usize) -> usize {
    leases / 2 + 1
}

/// Whether these holdings make this replica the leader.
pub fn leads(holdings: &[Holding]) -> bool {
    held(holdings) >= majority(holdings.len())
}

fn held(holdings: &[Holding]) -> usize {
    holdings.iter().filter(|h| **h == Holding::Held).count()
}

/// Which Leases this replica may take (or create) this round, given the holdings as
/// [`as_known`] reads them, in the members' common order: Lease `i` only when every Lease before
/// it is ours or lost. Renewing what it holds is always allowed. Why: after a leader is lost,
/// its Leases expire at about the same time for every standby; taking them in one order means
/// the standby that wins the first contested Lease goes on to the next and the others stop
/// there, instead of each taking one and all waiting for the minority release below. Safety
/// does not depend on it (the fence proves a majority). Liveness keeps the release: a replica
/// that holds an early Lease but cannot reach the rest gives it up, then stands aside for a
/// lease duration ([`STAND_ASIDE`]) so that a replica which can gather a majority takes it.
pub fn may_take(holdings: &[Holding]) -> Vec<bool> {
    let mut open = true;
    holdings
        .iter()
        .map(|h| {
            let now = open;
            open &= matches!(h, Holding::Held | Holding::Unreachable);
            now
        })
        .collect()
}

/// After releasing a minority, take nothing for this many lease durations.
pub const STAND_ASIDE: u32 = 1;

/// A Lease's holding as `may_take` reads it: one that stopped answering less than a lease
/// duration ago keeps its last answered holding. A slow answer or a dropped connection to a
/// live apiserver is not a lost member and must not open the Leases after it (two standbys
/// would each take one); a member silent for a whole duration counts as lost, about when the
/// lost leader's other Leases expire.
pub fn as_known(
    holding: Holding,
    answered: (Holding, Instant),
    duration: Duration,
    now: Instant,
) -> Holding {
    match holding {
        Holding::Unreachable if now.saturating_duration_since(answered.1) < duration => answered.0,
        other => other,
    }
}

/// When a minority holding is given up. Two candidates holding one Lease each of three, with
/// the third member down, would otherwise wait on each other forever. A minority is released
/// only after it lasted two lease durations (time for any Lease of a lost holder to expire and
/// be taken) plus `jitter` (drawn by the caller, up to one duration, so that two candidates
/// rarely give up together). Never for a single Lease, where holding it is the majority.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Minority {
    /// Nothing to give up: leading, or holding nothing.
    None,
    /// Holding a minority since `since`: release at `since + 2 * duration + jitter`.
    Since(Instant),
}

/// Folds one round's holdings into the minority clock.
pub fn minority(previous: Minority, holdings: &[Holding], now: Instant) -> Minority {
    let held = held(holdings);
    if held == 0 || held >= majority(holdings.len()) {
        return Minority::None;
    }
    match previous {
        Minority::Since(since) => Minority::Since(since),
        Minority::None => Minority::Since(now),
    }
}

/// Whether to release the Leases held now.
pub fn release_due(state: Minority, duration: Duration, jitter: Duration, now: Instant) -> bool {
    match state {
        Minority::None => false,
        Minority::Since(since) => now >= since + 2 * duration + jitter,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Holding::*;

    #[test]
    fn a_majority_leads_and_one_lease_is_a_majority_of_one() {
        assert!(leads(&[Held]));
        assert!(!leads(&[Other]));
        assert!(!leads(&[Unreachable]));
        assert!(leads(&[Held, Held, Unreachable]));
        assert!(!leads(&[Held, Other, Unreachable]));
        assert!(leads(&[Held, Held, Held, Other, Other]));
        assert!(!leads(&[Held, Held, Other, Other, Unreachable]));
    }

    #[test]
    fn leases_are_taken_in_order_past_lost_ones_only() {
        assert_eq!(may_take(&[Other, Other, Other]), [true, false, false]);
        assert_eq!(may_take(&[Held, Other, Other]), [true, true, false]);
        assert_eq!(may_take(&[Held, Held, Other]), [true, true, true]);
        // The lost member's Lease first: the next is open to all, the third to its winner.
        assert_eq!(may_take(&[Unreachable, Other, Other]), [true, true, false]);
        assert_eq!(may_take(&[Unreachable, Held, Other]), [true, true, true]);
        assert_eq!(
            may_take(&[Unreachable, Other, Unreachable]),
            [true, true, false]
        );
        assert_eq!(may_take(&[Held]), [true]);
        assert_eq!(may_take(&[Other]), [true]);
    }

    proptest::proptest! {
        /// Two standbys that hold nothing and see the same Leases (each Other or lost) may take
        /// exactly one and the same Lease: the first that answers. So they contend for it
        /// rather than each taking a different one; the winner then goes on alone.
        #[test]
        fn standbys_with_one_view_contend_for_one_lease(
            lost in proptest::collection::vec(proptest::bool::ANY, 1..=5)
        ) {
            let view: Vec<Holding> =
                lost.iter().map(|&l| if l { Unreachable } else { Other }).collect();
            let open: Vec<usize> = may_take(&view)
                .iter()
                .enumerate()
                .filter(|(i, &may)| may && view[*i] == Other)
                .map(|(i, _)| i)
                .collect();
            let first_answering = view.iter().position(|h| *h == Other);
            proptest::prop_assert_eq!(open, first_answering.into_iter().collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_lease_silent_for_less_than_a_duration_keeps_its_last_answer() {
        let t0 = Instant::now();
        let d = Duration::from_secs(4);
        let seen = (Other, t0);
        assert_eq!(as_known(Unreachable, seen, d, t0 + d / 2), Other);
        assert_eq!(as_known(Unreachable, seen, d, t0 + d), Unreachable);
        assert_eq!(as_known(Held, seen, d, t0), Held);
        // A flaky answer from the first Lease does not open the second to a standby.
        let flaky = [as_known(Unreachable, seen, d, t0 + d / 4), Other, Other];
        assert_eq!(may_take(&flaky), [true, false, false]);
    }

    #[test]
    fn a_minority_is_given_up_only_after_it_lasted() {
        let t0 = Instant::now();
        let d = Duration::from_secs(4);
        let jitter = Duration::from_millis(1500);
        let split = [Held, Other, Unreachable];
        let m = minority(Minority::None, &split, t0);
        assert_eq!(m, Minority::Since(t0));
        let later = t0 + Duration::from_secs(5);
        assert_eq!(minority(m, &split, later), Minority::Since(t0), "kept");
        assert!(!release_due(m, d, jitter, t0 + 2 * d));
        assert!(release_due(m, d, jitter, t0 + 2 * d + jitter));
        // Leading again, or holding nothing: the clock stops.
        assert_eq!(minority(m, &[Held, Held, Other], later), Minority::None);
        assert_eq!(minority(m, &[Other, Other, Other], later), Minority::None);
        // A single Lease is never a minority.
        assert_eq!(minority(Minority::None, &[Held], t0), Minority::None);
        assert_eq!(minority(Minority::None, &[Other], t0), Minority::None);
    }
}
