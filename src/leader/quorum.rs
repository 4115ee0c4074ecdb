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
