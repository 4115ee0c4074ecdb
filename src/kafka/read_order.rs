//! Whom the watcher asks, best first. Two things make a broker a poor one to ask:
//! - it did not answer the last scan's probe: a broker cut off with its zone keeps its TCP
//!   connection "up", so a request sent there waits out its whole timeout (an election's is
//!   30 s);
//! - it is an observer. Observers sit in the remote zone, behind the slowest link, and a
//!   broker's metadata is only as fresh as the metadata log it has fetched over that link. On
//!   the bed, with zone `d` slowed (D19), broker 4 still listed the lost broker in the ISR after
//!   the others had dropped it, and a scan that read broker 4 saw no partition under min ISR
//!   until 4 had caught up: the promotion it was there for came late.
//!
//! So the metadata is read from brokers that answered and are not observers, and requests that
//! any broker can serve (elections, reorderings, the quorum) go to those first.

use std::collections::{BTreeMap, BTreeSet};

/// The brokers to read the metadata from: those that answered the last scan's probe and are not
/// observers; when none is left, every one that answered (an observer's answer beats none).
pub fn metadata_sources(
    answered: &[(i32, String)],
    observers: &BTreeSet<i32>,
) -> Vec<(i32, String)> {
    let fresh: Vec<(i32, String)> = answered
        .iter()
        .filter(|(b, _)| !observers.contains(b))
        .cloned()
        .collect();
    if fresh.is_empty() {
        answered.to_vec()
    } else {
        fresh
    }
}

/// Every registered broker, in the order to try them: answered non-observers, answered
/// observers, then the rest (each group by id).
pub fn ask_order(
    registered: &BTreeMap<i32, String>,
    answered: &[(i32, String)],
    observers: &BTreeSet<i32>,
) -> Vec<(i32, String)> {
    let answered: BTreeSet<i32> = answered.iter().map(|(b, _)| *b).collect();
    let rank = |b: &i32| match (answered.contains(b), observers.contains(b)) {
        (true, false) => 0,
        (true, true) => 1,
        (false, _) => 2,
    };
    let mut order: Vec<(i32, String)> = registered.iter().map(|(b, a)| (*b, a.clone())).collect();
    order.sort_by_key(|(b, _)| (rank(b), *b));
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn brokers(ids: &[i32]) -> Vec<(i32, String)> {
        ids.iter().map(|b| (*b, format!("b{b}:9092"))).collect()
    }

    #[test]
    fn the_metadata_is_read_from_answered_non_observers() {
        let observers = BTreeSet::from([4]);
        let got = metadata_sources(&brokers(&[1, 2, 4]), &observers);
        assert_eq!(got, brokers(&[1, 2]));
    }

    #[test]
    fn observers_are_read_only_when_nobody_else_answered() {
        let observers = BTreeSet::from([4, 5]);
        assert_eq!(
            metadata_sources(&brokers(&[4, 5]), &observers),
            brokers(&[4, 5])
        );
        assert!(metadata_sources(&[], &observers).is_empty());
    }

    #[test]
    fn requests_go_to_answered_non_observers_then_answered_observers_then_the_rest() {
        let registered: BTreeMap<i32, String> = brokers(&[1, 2, 3, 4, 5]).into_iter().collect();
        let got = ask_order(&registered, &brokers(&[5, 4, 2]), &BTreeSet::from([4]));
        let ids: Vec<i32> = got.iter().map(|(b, _)| *b).collect();
        assert_eq!(ids, vec![2, 5, 4, 1, 3]);
        assert_eq!(got[0].1, "b2:9092", "addresses are the registered ones");
    }

    proptest! {
        #[test]
        fn the_order_is_a_permutation_of_the_registered_brokers(
            registered in proptest::collection::btree_set(0i32..20, 0..10),
            answered in proptest::collection::btree_set(0i32..20, 0..10),
            observers in proptest::collection::btree_set(0i32..20, 0..5),
        ) {
            let registered: BTreeMap<i32, String> =
                registered.iter().map(|b| (*b, format!("b{b}"))).collect();
            let answered: Vec<(i32, String)> = answered.iter().map(|b| (*b, format!("b{b}"))).collect();
            let got = ask_order(&registered, &answered, &observers);
            let mut ids: Vec<i32> = got.iter().map(|(b, _)| *b).collect();
            // No silent broker ahead of one that answered, no observer ahead of a non-observer
            // among those that answered.
            let answered_ids: BTreeSet<i32> = answered.iter().map(|(b, _)| *b).collect();
            let first_silent = ids.iter().position(|b| !answered_ids.contains(b)).unwrap_or(ids.len());
            prop_assert!(ids[first_silent..].iter().all(|b| !answered_ids.contains(b)));
            let first_observer = ids[..first_silent].iter().position(|b| observers.contains(b)).unwrap_or(first_silent);
            prop_assert!(ids[first_observer..first_silent].iter().all(|b| observers.contains(b)));
            ids.sort_unstable();
            prop_assert_eq!(ids, registered.keys().copied().collect::<Vec<_>>());

            let sources = metadata_sources(&answered, &observers);
            prop_assert!(sources.iter().all(|s| answered.contains(s)));
            prop_assert_eq!(sources.is_empty(), answered.is_empty());
            if answered.iter().any(|(b, _)| !observers.contains(b)) {
                prop_assert!(sources.iter().all(|(b, _)| !observers.contains(b)));
            }
        }
    }
}
