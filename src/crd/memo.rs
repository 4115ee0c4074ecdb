//! Compiled topic filters, kept per ObserverSet generation: the automation validates its set on
//! every scan and the reconciler on every reconcile, and compiling `promotion.topics` (up to
//! 2 x 64 regexes) costs far more than the rest of validation. A set's `metadata.generation`
//! changes with every spec change, so `(uid, generation)` names one `promotion.topics`; the
//! entry also keeps the patterns and is used only when they are the same (an object built in
//! memory, without a uid or generation, is compiled every time).
//!
//! Bounded: one entry per set (a new generation replaces the old), at most [`CAPACITY`] sets
//! (beyond that the least recently used is dropped: more sets only cost recompiles), and the
//! finalizer drops a deleted set's entry ([`TopicFilterMemo::forget`]).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use super::promotion::TopicFilter;
use super::topic_filter::{compile, CompiledTopicFilter};
use super::validation::SpecViolation;

/// Most ObserverSets remembered. A filter compiles to at most 2 x 256 KiB
/// (`bounds::TOPIC_FILTER_MAX_COMPILED_BYTES`), real ones to a few KiB.
pub const CAPACITY: usize = 256;

type Compiled = Result<CompiledTopicFilter, Vec<SpecViolation>>;

/// The process's memo, shared by the reconciler and the automation (both call `validate`).
pub static TOPIC_FILTERS: LazyLock<TopicFilterMemo> = LazyLock::new(TopicFilterMemo::default);

struct Entry {
    generation: i64,
    spec: TopicFilter,
    compiled: Compiled,
    used: u64,
}

#[derive(Default)]
pub struct TopicFilterMemo {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<String, Entry>,
    clock: u64,
    /// Compilations done, for tests.
    compiled: u64,
}

impl TopicFilterMemo {
    /// The compiled filter of `spec`, compiled at most once per `(uid, generation)`.
    pub fn compile(
        &self,
        uid: Option<&str>,
        generation: Option<i64>,
        spec: &TopicFilter,
    ) -> Compiled {
        let (Some(uid), Some(generation)) = (uid, generation) else {
            return compile(spec);
        };
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.clock += 1;
        let now = inner.clock;
        if let Some(entry) = inner.entries.get_mut(uid) {
            if entry.generation == generation && entry.spec == *spec {
                entry.used = now;
                return entry.compiled.clone();
            }
        }
        // Compiled under the lock: two loops asking for the same new generation compile once.
        let compiled = compile(spec);
        inner.compiled += 1;
        if !inner.entries.contains_key(uid) && inner.entries.len() >= CAPACITY {
            let oldest = inner
                .entries
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                inner.entries.remove(&oldest);
            }
        }
        inner.entries.insert(
            uid.to_string(),
            Entry {
                generation,
                spec: spec.clone(),
                compiled: compiled.clone(),
                used: now,
            },
        );
        compiled
    }

    /// Drops a deleted set's entry.
    pub fn forget(&self, uid: &str) {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entries
            .remove(uid);
    }

    #[cfg(test)]
    fn stats(&self) -> (usize, u64) {
        let inner = self.inner.lock().unwrap();
        (inner.entries.len(), inner.compiled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(include: &str) -> TopicFilter {
        TopicFilter {
            include: vec![include.into()],
            exclude: vec![],
        }
    }

    #[test]
    fn compiles_once_per_generation() {
        let memo = TopicFilterMemo::default();
        for _ in 0..3 {
            assert!(memo
                .compile(Some("a"), Some(1), &spec("^x"))
                .unwrap()
                .watches("x1"));
        }
        assert_eq!(memo.stats(), (1, 1));
        let next = memo.compile(Some("a"), Some(2), &spec("^y")).unwrap();
        assert!(next.watches("y") && !next.watches("x"));
        assert_eq!(
            memo.stats(),
            (1, 2),
            "a new generation replaces the old entry"
        );
    }

    #[test]
    fn refusals_are_remembered_too() {
        let memo = TopicFilterMemo::default();
        assert!(memo.compile(Some("a"), Some(1), &spec("(")).is_err());
        assert!(memo.compile(Some("a"), Some(1), &spec("(")).is_err());
        assert_eq!(memo.stats(), (1, 1));
    }

    #[test]
    fn other_patterns_under_the_same_key_are_compiled() {
        let memo = TopicFilterMemo::default();
        memo.compile(Some("a"), Some(1), &spec("^x")).unwrap();
        let other = memo.compile(Some("a"), Some(1), &spec("^y")).unwrap();
        assert!(other.watches("y"), "never the filter of other patterns");
        assert!(memo
            .compile(None, Some(1), &spec("^z"))
            .unwrap()
            .watches("z"));
        assert_eq!(
            memo.stats(),
            (1, 2),
            "no uid: neither remembered nor counted"
        );
    }

    #[test]
    fn bounded_and_forgets_deleted_sets() {
        let memo = TopicFilterMemo::default();
        for i in 0..CAPACITY + 10 {
            memo.compile(Some(&format!("set-{i}")), Some(1), &spec("^x"))
                .unwrap();
        }
        assert_eq!(memo.stats().0, CAPACITY);
        // The most recent stays, the oldest went.
        memo.compile(Some(&format!("set-{}", CAPACITY + 9)), Some(1), &spec("^x"))
            .unwrap();
        assert_eq!(memo.stats().1, (CAPACITY + 10) as u64);
        memo.compile(Some("set-0"), Some(1), &spec("^x")).unwrap();
        assert_eq!(memo.stats().1, (CAPACITY + 11) as u64, "set-0 was dropped");
        memo.forget("set-0");
        assert_eq!(memo.stats().0, CAPACITY - 1);
    }
}
