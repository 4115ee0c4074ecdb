//! The Lease rule, pure: from what a read of the Lease showed and when, what the campaign sends
//! next. The shell (`super::campaign`) does the reads and writes.
//!
//! Expiry is timed on this replica's monotonic clock from the moment it *observed* the Lease
//! change (client-go's rule), never from `renewTime` against its wall clock: a candidate whose
//! wall clock runs ahead, or jumped, would otherwise take a Lease its holder still renews, and
//! the holder's write fence (`crate::k8s::fence`) assumes no successor acts before the holder's
//! last renewal plus the lease duration. Every write carries the `resourceVersion` it was
//! decided on, so a decision taken on a stale read fails with a Conflict instead of landing.

use std::time::{Duration, Instant};

/// What one read of the Lease showed. `None` in place of it: no Lease object exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// `spec.holderIdentity`; `None` when empty (released, or never held).
    pub holder: Option<String>,
    /// `metadata.resourceVersion`: changes with every write, whoever made it.
    pub version: String,
    /// `spec.leaseTransitions`, for people reading the Lease.
    pub transitions: i32,
}

/// What a candidate remembers between reads: the version it last saw, and the monotonic
/// instant it first saw that version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Watching {
    pub version: String,
    pub since: Instant,
}

/// Folds a read taken at `now` into what was remembered: a new version restarts the wait.
pub fn observe(previous: Option<Watching>, seen: &Seen, now: Instant) -> Watching {
    match previous {
        Some(watching) if watching.version == seen.version => watching,
        _ => Watching {
            version: seen.version.clone(),
            since: now,
        },
    }
}

/// The next write, or how long to wait before reading again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// No Lease exists: create one naming us (the apiserver refuses a second create).
    Create,
    /// The Lease names us: renew it, on condition that nobody wrote since `version`.
    Renew { version: String },
    /// The Lease is free, or its holder has not renewed it for a lease duration as timed here:
    /// take it, on condition that nobody wrote since `version`.
    Take { version: String, transitions: i32 },
    /// Another replica holds it and renewed it less than a lease duration ago (by our clock):
    /// it may expire at `since + duration` at the earliest.
    Wait { expires_in: Duration },
}

/// The rule: `seen` is the latest read (`None`: no Lease), `watching` what `observe` made of
/// it, `duration` the Lease's validity.
pub fn step(
    identity: &str,
    seen: Option<&Seen>,
    watching: Option<&Watching>,
    duration: Duration,
    now: Instant,
) -> Step {
    let Some(seen) = seen else {
        return Step::Create;
    };
    match seen.holder.as_deref() {
        Some(holder) if holder == identity => Step::Renew {
            version: seen.version.clone(),
        },
        None => Step::Take {
            version: seen.version.clone(),
            transitions: seen.transitions,
        },
        Some(_) => {
            // Only a wait timed from a read of this same version counts.
            let waited = watching
                .filter(|w| w.version == seen.version)
                .map(|w| now.saturating_duration_since(w.since))
                .unwrap_or_default();
            if waited >= duration {
                Step::Take {
                    version: seen.version.clone(),
                    transitions: seen.transitions,
                }
            } else {
                Step::Wait {
                    expires_in: duration - waited,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const D: Duration = Duration::from_secs(4);

    fn seen(holder: Option<&str>, version: &str) -> Seen {
        Seen {
            holder: holder.map(str::to_string),
            version: version.to_string(),
            transitions: 3,
        }
    }

    #[test]
    fn a_missing_lease_is_created_and_ours_is_renewed_on_its_version() {
        let now = Instant::now();
        assert_eq!(step("me", None, None, D, now), Step::Create);
        let ours = seen(Some("me"), "7");
        assert_eq!(
            step("me", Some(&ours), None, D, now),
            Step::Renew {
                version: "7".into()
            }
        );
    }

    #[test]
    fn a_released_lease_is_taken_at_once() {
        let now = Instant::now();
        assert_eq!(
            step("me", Some(&seen(None, "9")), None, D, now),
            Step::Take {
                version: "9".into(),
                transitions: 3
            }
        );
    }

    #[test]
    fn another_holder_is_waited_out_for_a_duration_from_our_first_sight_of_its_version() {
        let t0 = Instant::now();
        let theirs = seen(Some("other"), "5");
        let w = observe(None, &theirs, t0);
        assert_eq!(
            step("me", Some(&theirs), Some(&w), D, t0),
            Step::Wait { expires_in: D }
        );
        let later = t0 + Duration::from_millis(3999);
        let w = observe(Some(w), &theirs, later);
        assert_eq!(w.since, t0, "the same version keeps the first sighting");
        assert_eq!(
            step("me", Some(&theirs), Some(&w), D, later),
            Step::Wait {
                expires_in: Duration::from_millis(1)
            }
        );
        assert_eq!(
            step("me", Some(&theirs), Some(&w), D, t0 + D),
            Step::Take {
                version: "5".into(),
                transitions: 3
            }
        );
    }

    #[test]
    fn a_renewal_restarts_the_wait_and_a_foreign_watch_counts_for_nothing() {
        let t0 = Instant::now();
        let w = observe(None, &seen(Some("other"), "5"), t0);
        let renewed = seen(Some("other"), "6");
        let t1 = t0 + Duration::from_secs(3);
        let w = observe(Some(w), &renewed, t1);
        assert_eq!(w.since, t1);
        assert_eq!(
            step("me", Some(&renewed), Some(&w), D, t0 + D),
            Step::Wait {
                expires_in: Duration::from_secs(3)
            }
        );
        // A remembered sighting of another version proves no wait on this one.
        let stale = Watching {
            version: "5".into(),
            since: t0,
        };
        assert_eq!(
            step("me", Some(&renewed), Some(&stale), D, t0 + 10 * D),
            Step::Wait { expires_in: D }
        );
    }

    proptest! {
        /// Whatever the read history, another holder's Lease is taken only after it stayed at
        /// one version for a full duration of our reads: never earlier than `duration` after
        /// the first read that showed that version.
        #[test]
        fn a_held_lease_is_never_taken_before_it_stood_still_a_duration(
            reads in proptest::collection::vec((0u64..3000, 0u8..4, proptest::bool::ANY), 1..40),
        ) {
            let t0 = Instant::now();
            let mut now = t0;
            let mut watching: Option<Watching> = None;
            let mut first_sight: Option<(String, Instant)> = None;
            for (gap_ms, version, held) in reads {
                now += Duration::from_millis(gap_ms);
                let s = seen(held.then_some("other"), &version.to_string());
                if first_sight.as_ref().map(|(v, _)| v != &s.version).unwrap_or(true) {
                    first_sight = Some((s.version.clone(), now));
                }
                watching = Some(observe(watching, &s, now));
                if let Step::Take { version, .. } = step("me", Some(&s), watching.as_ref(), D, now) {
                    prop_assert_eq!(&version, &s.version);
                    if held {
                        let (_, since) = first_sight.clone().unwrap();
                        prop_assert!(now >= since + D, "taken {:?} after first sight", now - since);
                    }
                }
            }
        }
    }
}
