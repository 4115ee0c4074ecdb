//! How long each pod's agent has been silent: the reconciler's memory of consecutive
//! Unreachable verdicts, keyed by pod uid (a recreated pod of the same name starts afresh).
//! Pure: the reconciler keeps the map in its context and records each round's verdicts here.
//!
//! Kept in memory only: a restarted operator (or a new leader) starts every clock again, which
//! only delays an excusal (`crate::rollout::unreachable`), never brings one forward.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::rollout::machine::elapsed;

/// A gap this long between two Unreachable verdicts (the pod was not asked in between: another
/// step, no rollout) starts the clock again: the pod may have answered meanwhile.
pub const GAP: Duration = Duration::from_secs(10);

/// One pod's silence: since when, and when it was last found silent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Silence {
    pub since: Timestamp,
    pub last: Timestamp,
}

/// The memory: pod uid -> its silence.
pub type Memory = HashMap<String, Silence>;

/// Records one round of verdicts (`uid`, whether the agent answered nothing) at `now` and
/// returns since when each silent pod of the round has been silent. An answer clears the
/// pod's entry; entries not refreshed for [`GAP`] are dropped (bounded memory).
pub fn record(
    memory: &mut Memory,
    round: &[(String, bool)],
    now: Timestamp,
) -> BTreeMap<String, Timestamp> {
    memory.retain(|_, s| elapsed(s.last, now) < GAP);
    let mut silent = BTreeMap::new();
    for (uid, unreachable) in round {
        if !unreachable {
            memory.remove(uid);
            continue;
        }
        let entry = memory.entry(uid.clone()).or_insert(Silence {
            since: now,
            last: now,
        });
        entry.last = now;
        silent.insert(uid.clone(), entry.since);
    }
    silent
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::SignedDuration;

    fn at(secs: i64) -> Timestamp {
        "2026-12-03T09:00:00Z"
            .parse::<Timestamp>()
            .unwrap()
            .checked_add(SignedDuration::from_secs(secs))
            .unwrap()
    }

    fn round(entries: &[(&str, bool)]) -> Vec<(String, bool)> {
        entries.iter().map(|(u, s)| (u.to_string(), *s)).collect()
    }

    #[test]
    fn silence_runs_from_the_first_of_consecutive_unreachable_verdicts() {
        let mut m = Memory::new();
        let got = record(&mut m, &round(&[("a", true), ("b", false)]), at(0));
        assert_eq!(got, BTreeMap::from([("a".to_string(), at(0))]));
        let got = record(&mut m, &round(&[("a", true), ("b", true)]), at(2));
        assert_eq!(
            got,
            BTreeMap::from([("a".to_string(), at(0)), ("b".to_string(), at(2))])
        );
    }

    #[test]
    fn an_answer_clears_the_clock() {
        let mut m = Memory::new();
        record(&mut m, &round(&[("a", true)]), at(0));
        record(&mut m, &round(&[("a", false)]), at(1));
        let got = record(&mut m, &round(&[("a", true)]), at(2));
        assert_eq!(got[&"a".to_string()], at(2));
    }

    #[test]
    fn a_long_gap_between_verdicts_restarts_the_clock() {
        let mut m = Memory::new();
        record(&mut m, &round(&[("a", true)]), at(0));
        record(&mut m, &round(&[("a", true)]), at(9));
        assert_eq!(record(&mut m, &round(&[("a", true)]), at(18))["a"], at(0));
        // Not asked for 10 s (another step): the pod may have answered meanwhile.
        assert_eq!(record(&mut m, &round(&[("a", true)]), at(28))["a"], at(28));
        // Pods not asked are forgotten after the gap.
        record(&mut m, &round(&[]), at(40));
        assert!(m.is_empty());
    }
}
