//! How long a failed reconcile waits before its retry, per ObserverSet: 5 s after the first
//! failure, doubling with each failure in a row, at most 5 minutes; a success starts over. One
//! set that keeps failing (a spec pointing at a Secret that is not there, an apiserver refusing
//! its writes) then costs a request every few minutes instead of every 5 s, and never delays the
//! others. Pure: the reconciler's `error_policy` asks, its result stream reports the successes.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

/// The first retry's wait.
pub const FIRST: Duration = Duration::from_secs(5);
/// The longest wait.
pub const MAX: Duration = Duration::from_secs(300);
/// Most objects tracked at once; beyond that a failing object gets [`FIRST`] (the memory a
/// tenant can make the operator hold stays bounded whatever it creates).
pub const MAX_TRACKED: usize = 10_000;

/// Failures in a row, per object.
#[derive(Debug)]
pub struct Backoff<K> {
    failures: HashMap<K, u32>,
}

impl<K> Default for Backoff<K> {
    fn default() -> Self {
        Backoff {
            failures: HashMap::new(),
        }
    }
}

impl<K: Eq + Hash> Backoff<K> {
    /// Records one more failure of `key` and returns the wait before its retry.
    pub fn failed(&mut self, key: K) -> Duration {
        if !self.failures.contains_key(&key) && self.failures.len() >= MAX_TRACKED {
            return FIRST;
        }
        let n = self.failures.entry(key).or_insert(0);
        *n = n.saturating_add(1);
        wait_after(*n)
    }

    /// `key` reconciled: its next failure waits [`FIRST`] again.
    pub fn succeeded(&mut self, key: &K) {
        self.failures.remove(key);
    }

    #[cfg(test)]
    pub fn tracked(&self) -> usize {
        self.failures.len()
    }
}

/// The wait after `failures` failures in a row (at least one).
pub fn wait_after(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    FIRST.saturating_mul(1 << doublings).min(MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn waits_double_from_five_seconds_up_to_five_minutes() {
        let waits: Vec<Duration> = (1..=9).map(wait_after).collect();
        assert_eq!(
            waits,
            [5, 10, 20, 40, 80, 160, 300, 300, 300].map(|n| n * S)
        );
        assert_eq!(wait_after(u32::MAX), MAX);
    }

    #[test]
    fn each_object_counts_its_own_failures_and_a_success_starts_over() {
        let mut b = Backoff::default();
        assert_eq!(b.failed("a"), 5 * S);
        assert_eq!(b.failed("a"), 10 * S);
        assert_eq!(
            b.failed("b"),
            5 * S,
            "another object is not held back by a's failures"
        );
        assert_eq!(b.failed("a"), 20 * S);
        b.succeeded(&"a");
        assert_eq!(b.failed("a"), 5 * S);
        assert_eq!(b.tracked(), 2);
        b.succeeded(&"a");
        b.succeeded(&"b");
        assert_eq!(b.tracked(), 0, "successes leave nothing behind");
    }

    #[test]
    fn beyond_the_tracked_limit_a_new_object_gets_the_first_wait_and_is_not_stored() {
        let mut b = Backoff::default();
        for i in 0..MAX_TRACKED {
            b.failed(i);
        }
        assert_eq!(b.failed(MAX_TRACKED), FIRST);
        assert_eq!(b.failed(MAX_TRACKED), FIRST);
        assert_eq!(b.tracked(), MAX_TRACKED);
        assert_eq!(b.failed(0), 10 * S, "a tracked object still counts");
    }

    proptest! {
        #[test]
        fn the_wait_never_shrinks_while_failures_go_on_and_stays_in_bounds(n in 1u32..200) {
            prop_assert!(wait_after(n) >= FIRST && wait_after(n) <= MAX);
            prop_assert!(wait_after(n + 1) >= wait_after(n));
        }
    }
}
