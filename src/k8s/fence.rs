//! The write fence: a replica writes to the apiserver only while it leads *and* its last
//! confirmed Lease renewal is recent enough, measured on the monotonic clock.
//!
//! Why both: "leading" is what the campaign last concluded, and a process that was paused
//! (SIGSTOP, a long GC-like stall, a partition) resumes with that conclusion unchanged. The
//! deadline is `renewal sent + lease duration - margin`, on `Instant` (CLOCK_MONOTONIC, which
//! advances while the process is stopped and ignores wall-clock jumps), so the first write
//! after a resume finds it passed and is refused before it leaves the process. A successor
//! takes the Lease only after it saw the same renewal stay unrenewed for a lease duration, so
//! the deadline falls before any successor acts (the margin covers clock skew and the write's
//! time in flight). Checked by `crate::k8s::client`'s guard on every mutating request.
//!
//! The fence keeps one term per Lease it campaigns for. With one Lease (today's installs) that
//! is the rule above. With several (one per member cluster, docs/multi-cluster.md) a write is
//! admitted only while a majority of the terms run, until the majority-th latest ends: two
//! majorities share a Lease, and one Lease has at most one unexpired term at a time, so at most
//! one replica is ever admitted (the property test below replays that with drifting clocks).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

/// Until when this replica may write, as far as Lease renewals prove it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Term {
    /// Leader election is off: one replica, nothing to fence against.
    Unbounded,
    /// No renewal of ours was confirmed yet.
    Unproven,
    /// The last confirmed renewal allows writes until this instant.
    Until(Instant),
}

/// Why a write was refused. Nothing was sent.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("write refused by the fence: this replica does not lead (another replica holds the leader Lease, or it was not acquired yet)")]
    NotLeading,
    #[error("write refused by the fence: no renewal of the leader Lease has been confirmed yet")]
    Unproven,
    #[error("write refused by the fence: the leader Lease was last renewed too long ago ({late:?} past the fenced deadline; the process was paused or the apiserver unreachable); another replica may lead now")]
    Lapsed { late: Duration },
}

/// Whether a failed API call was refused by the fence (nothing was sent).
pub fn refused_in(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Service(e) if e.downcast_ref::<Refused>().is_some())
}

/// The rule, pure: `Ok(time left)` (`None`: unbounded) when a write may go out at `now`.
pub fn admit(leading: bool, term: Term, now: Instant) -> Result<Option<Duration>, Refused> {
    if !leading {
        return Err(Refused::NotLeading);
    }
    match term {
        Term::Unbounded => Ok(None),
        Term::Unproven => Err(Refused::Unproven),
        Term::Until(deadline) if now < deadline => Ok(Some(deadline - now)),
        Term::Until(deadline) => Err(Refused::Lapsed {
            late: now - deadline,
        }),
    }
}

/// The term a renewal confirmed: it was sent at `sent_at`, so no successor can have taken the
/// Lease before `sent_at + duration`; `margin` comes off for skew and writes in flight.
/// Never shortens the current term (renewals are sequential, but a late answer could arrive).
pub fn after_renewal(
    current: Term,
    sent_at: Instant,
    duration: Duration,
    margin: Duration,
) -> Term {
    let until = sent_at + duration.saturating_sub(margin);
    match current {
        Term::Unbounded => Term::Unbounded,
        Term::Until(old) if old >= until => current,
        _ => Term::Until(until),
    }
}

/// The term a set of per-Lease terms proves together: the majority-th latest. `Unbounded` terms
/// (election off) count as the latest; with fewer than a majority of running terms, `Unproven`.
pub fn majority(terms: &[Term]) -> Term {
    let needed = terms.len() / 2 + 1;
    let mut ends: Vec<Option<Instant>> = terms
        .iter()
        .filter_map(|t| match t {
            Term::Unbounded => Some(None),
            Term::Until(end) => Some(Some(*end)),
            Term::Unproven => None,
        })
        .collect();
    // Latest first, `None` (unbounded) before every instant.
    ends.sort_by(|a, b| match (a, b) {
        (None, None) => std::cmp::Ordering::Equal,
        (None, Some(_)) => std::cmp::Ordering::Less,
        (Some(_), None) => std::cmp::Ordering::Greater,
        (Some(a), Some(b)) => b.cmp(a),
    });
    match ends.get(needed - 1) {
        Some(None) => Term::Unbounded,
        Some(Some(end)) => Term::Until(*end),
        None => Term::Unproven,
    }
}

/// Whether a Lease as returned by the apiserver (JSON) names `identity` as its holder.
pub fn held_by(lease: &serde_json::Value, identity: &str) -> bool {
    lease
        .pointer("/spec/holderIdentity")
        .and_then(serde_json::Value::as_str)
        == Some(identity)
}

/// The shared handle: the campaign feeds it, the client's guard checks it.
#[derive(Clone, Debug)]
pub struct Fence {
    leading: watch::Receiver<bool>,
    /// One term per Lease, in the campaign's order of its Leases.
    terms: Arc<Mutex<Vec<Term>>>,
}

impl Fence {
    /// A fence over one Lease.
    pub fn new(leading: watch::Receiver<bool>, term: Term) -> Self {
        Self::over(leading, vec![term])
    }

    /// A fence over several Leases, each starting at its given term.
    pub fn over(leading: watch::Receiver<bool>, terms: Vec<Term>) -> Self {
        Self {
            leading,
            terms: Arc::new(Mutex::new(terms)),
        }
    }

    /// A fence that always admits: for a process that does not campaign (tests, and
    /// `automation::run_namespaced`), like `--leader-elect=false`.
    pub fn open() -> Self {
        let (sender, receiver) = watch::channel(true);
        // Kept open for the life of the process: nothing ever changes it.
        std::mem::forget(sender);
        Self::new(receiver, Term::Unbounded)
    }

    /// Whether a write may go out now, and for how long at most.
    pub fn check(&self) -> Result<Option<Duration>, Refused> {
        admit(*self.leading.borrow(), self.term(), Instant::now())
    }

    /// The term the Leases prove together (`majority`).
    pub fn term(&self) -> Term {
        majority(&self.terms.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Records a renewal of ours of the Lease at `lease` (0 with one Lease) that its apiserver
    /// confirmed. An index beyond the Leases is ignored: it proves nothing.
    pub fn renewed(&self, lease: usize, sent_at: Instant, duration: Duration, margin: Duration) {
        let mut terms = self.terms.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(term) = terms.get_mut(lease) {
            *term = after_renewal(*term, sent_at, duration, margin);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn writes_go_out_only_while_leading_and_before_the_deadline() {
        let t0 = Instant::now();
        let term = after_renewal(Term::Unproven, t0, 4 * S, S);
        assert_eq!(term, Term::Until(t0 + 3 * S));
        assert_eq!(admit(true, term, t0), Ok(Some(3 * S)));
        assert_eq!(admit(true, term, t0 + 2 * S), Ok(Some(S)));
        // The instant of the deadline itself is already too late.
        assert_eq!(
            admit(true, term, t0 + 3 * S),
            Err(Refused::Lapsed {
                late: Duration::ZERO
            })
        );
        // Resumed after a 10 s SIGSTOP: the monotonic clock moved on, the write is refused.
        assert_eq!(
            admit(true, term, t0 + 10 * S),
            Err(Refused::Lapsed { late: 7 * S })
        );
        assert_eq!(admit(false, term, t0), Err(Refused::NotLeading));
        assert_eq!(admit(true, Term::Unproven, t0), Err(Refused::Unproven));
        assert_eq!(admit(false, Term::Unbounded, t0), Err(Refused::NotLeading));
        assert_eq!(admit(true, Term::Unbounded, t0 + 1000 * S), Ok(None));
    }

    #[test]
    fn a_renewal_extends_the_term_and_a_late_answer_never_shortens_it() {
        let t0 = Instant::now();
        let first = after_renewal(Term::Unproven, t0, 4 * S, S);
        let second = after_renewal(first, t0 + 2 * S, 4 * S, S);
        assert_eq!(second, Term::Until(t0 + 5 * S));
        assert_eq!(after_renewal(second, t0, 4 * S, S), second);
        assert_eq!(
            after_renewal(Term::Unbounded, t0, 4 * S, S),
            Term::Unbounded
        );
        // A margin larger than the lease leaves no time at all, never a panic.
        assert_eq!(after_renewal(Term::Unproven, t0, S, 4 * S), Term::Until(t0));
    }

    #[test]
    fn a_refusal_is_recognized_in_the_client_error() {
        let refused = kube::Error::Service(Box::new(Refused::Unproven));
        assert!(refused_in(&refused));
        let other = kube::Error::Service(Box::new(std::io::Error::other("reset")));
        assert!(!refused_in(&other));
        assert!(!refused_in(&kube::Error::LinesCodecMaxLineLengthExceeded));
    }

    #[test]
    fn only_a_lease_naming_us_proves_a_renewal() {
        let lease = |holder: serde_json::Value| json!({"spec": {"holderIdentity": holder}});
        assert!(held_by(&lease(json!("op-0")), "op-0"));
        assert!(!held_by(&lease(json!("op-1")), "op-0"));
        assert!(!held_by(&lease(serde_json::Value::Null), "op-0"));
        assert!(!held_by(&json!({"kind": "Status"}), "op-0"));
    }

    #[test]
    fn the_handle_follows_the_campaign() {
        let (sender, receiver) = watch::channel(false);
        let fence = Fence::new(receiver, Term::Unproven);
        assert_eq!(fence.check(), Err(Refused::NotLeading));
        sender.send_replace(true);
        assert_eq!(fence.check(), Err(Refused::Unproven));
        fence.renewed(0, Instant::now(), 60 * S, S);
        assert!(matches!(fence.check(), Ok(Some(left)) if left > 50 * S));
        fence.renewed(7, Instant::now(), 600 * S, S);
        assert!(matches!(fence.check(), Ok(Some(left)) if left < 60 * S));
        // A renewal confirmed long ago (as seen after a pause) lapses.
        let (sender, receiver) = watch::channel(true);
        let stale = Fence::new(receiver, Term::Until(Instant::now() - S));
        assert!(matches!(stale.check(), Err(Refused::Lapsed { .. })));
        drop(sender);
        assert_eq!(Fence::open().check(), Ok(None));
    }
}
