//! The safety argument of docs/multi-cluster.md ("Authority during a partition"), replayed:
//! two replicas campaign for one, three or five Leases with the real rule (`super::lease`) and
//! the real fence (`crate::k8s::fence`), each timing everything on its own monotonic clock,
//! which runs up to 0.1 % fast or slow. Whatever the order and spacing of their reads and
//! writes (a replica that does nothing for a while is a paused or cut-off one), the two fences
//! never admit a write at the same real instant.

use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::lease::{self, Seen, Step, Watching};
use crate::k8s::fence::{self, Term};

const DURATION: Duration = Duration::from_secs(4);
const MARGIN: Duration = Duration::from_secs(1);
/// Real-time resolution of the exclusivity check.
const SAMPLE_MS: u64 = 5;

/// One replica: its clock rate, what it remembers of each Lease, its fence's terms.
struct Replica {
    rate: f64,
    watching: Vec<Option<Watching>>,
    terms: Vec<Term>,
}

impl Replica {
    /// Its monotonic clock's reading at real time `t_ms`.
    fn clock(&self, base: Instant, t_ms: u64) -> Instant {
        base + Duration::from_secs_f64(t_ms as f64 / 1000.0 * self.rate)
    }

    fn admitted(&self, base: Instant, t_ms: u64) -> bool {
        fence::admit(true, fence::majority(&self.terms), self.clock(base, t_ms)).is_ok()
    }
}

/// The apiserver's copy of one Lease.
#[derive(Clone, Default)]
struct Stored {
    holder: Option<usize>,
    version: u64,
}

fn run(leases: usize, rates: [f64; 2], turns: &[(u64, usize, usize)]) -> Result<(), String> {
    let base = Instant::now();
    let mut stored = vec![Stored::default(); leases];
    let mut replicas: Vec<Replica> = rates
        .iter()
        .map(|&rate| Replica {
            rate,
            watching: vec![None; leases],
            terms: vec![Term::Unproven; leases],
        })
        .collect();
    let mut t = 0u64;
    for &(gap_ms, who, which) in turns {
        // Exclusivity at every sampled instant up to this turn.
        let end = t + gap_ms;
        while t < end {
            t += SAMPLE_MS.min(end - t);
            if replicas.iter().all(|r| r.admitted(base, t)) {
                return Err(format!("both admitted at {t} ms"));
            }
        }
        let (who, which) = (who % 2, which % leases);
        let replica = &mut replicas[who];
        let now = replica.clock(base, t);
        let lease = &mut stored[which];
        let seen = Seen {
            holder: lease.holder.map(|h| h.to_string()),
            version: lease.version.to_string(),
            transitions: 0,
        };
        let watching = lease::observe(replica.watching[which].take(), &seen, now);
        let step = lease::step(
            &who.to_string(),
            Some(&seen),
            Some(&watching),
            DURATION,
            now,
        );
        replica.watching[which] = Some(watching);
        let decided_on = match step {
            Step::Renew { version } | Step::Take { version, .. } => version,
            Step::Create | Step::Wait { .. } => continue,
        };
        // The write lands only on the version it was decided on (here, always: the read and
        // the write are one turn), and its answer names us: the term starts from its sending.
        if decided_on == lease.version.to_string() {
            lease.holder = Some(who);
            lease.version += 1;
            replica.terms[which] =
                fence::after_renewal(replica.terms[which], now, DURATION, MARGIN);
        }
        if replicas.iter().all(|r| r.admitted(base, t)) {
            return Err(format!("both admitted at {t} ms, right after a write"));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn two_replicas_are_never_admitted_at_once(
        leases in prop_oneof![Just(1usize), Just(3), Just(5)],
        rate_a in 0.999f64..1.001,
        rate_b in 0.999f64..1.001,
        turns in proptest::collection::vec((0u64..2500, 0usize..2, 0usize..5), 1..120),
    ) {
        prop_assert_eq!(run(leases, [rate_a, rate_b], &turns), Ok(()));
    }
}

/// One Lease of three proves nothing; two do.
#[test]
fn one_lease_of_three_is_no_authority() {
    let t0 = Instant::now();
    let held = fence::after_renewal(Term::Unproven, t0, DURATION, MARGIN);
    let a = [held, Term::Unproven, Term::Unproven];
    let b = [Term::Unproven, held, held];
    assert_eq!(fence::majority(&a), Term::Unproven);
    assert_eq!(fence::majority(&b), held);
    // Replayed: a takes Lease 0, b Leases 1 and 2 while a cannot reach them.
    let turns = [(0, 0, 0), (1, 1, 1), (1, 1, 2)];
    assert_eq!(run(3, [1.0, 1.0], &turns), Ok(()));
}

#[test]
fn the_majority_term_is_the_majority_th_latest() {
    let t0 = Instant::now();
    let s = Duration::from_secs(1);
    let until = |n: u32| Term::Until(t0 + n * s);
    assert_eq!(fence::majority(&[until(3)]), until(3));
    assert_eq!(fence::majority(&[until(3), until(9), until(5)]), until(5));
    assert_eq!(
        fence::majority(&[until(3), Term::Unproven, until(5)]),
        until(3)
    );
    assert_eq!(
        fence::majority(&[Term::Unproven, Term::Unproven, until(5)]),
        Term::Unproven
    );
    assert_eq!(fence::majority(&[Term::Unbounded]), Term::Unbounded);
    assert_eq!(
        fence::majority(&[until(2), until(4), until(6), until(8), until(1)]),
        until(4)
    );
}
