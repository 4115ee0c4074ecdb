//! Acknowledgement in Agent mode: does a pod's observer-agent report (`GET /observer-ids`,
//! [`crate::agent::Report`]) show it using the revision a step waits for? Pure: the reconciler
//! asks the agents (`crate::agent::AgentClient`) and judges each answer here. Time mode needs no
//! answer ([`super::machine::settled`]).
//!
//! Acknowledged means loaded: when the agent relays what the Kafka JVM reports it has loaded
//! (`jvm`, the patch's `KAFKA_OBSERVER_IDS_LOADED_FILE`), only that counts: the file on the
//! volume runs up to one JVM cache TTL ahead of the JVM. When the JVM reports nothing (an agent
//! without `--loaded-file`, a Kafka with the public patch set) the file counts once the agent
//! has seen it for `rollout.jvmCacheTtl`: [`FILE_TTL_BASIS`].

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::machine::elapsed;
use super::model::Expectation;
use crate::agent::{Report, Snapshot};
use crate::crd::NodeId;

/// How a pod whose JVM reports nothing is acknowledged; status, Events and docs say it so.
pub const FILE_TTL_BASIS: &str = "file + cache TTL (the JVM does not report what it loaded)";

/// What a pod's acknowledgement rests on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Basis {
    /// The JVM reports the revision it has loaded.
    Jvm,
    /// The JVM reports nothing: the file, seen for at least the JVM's cache TTL.
    FileAndTtl,
}

/// The verdict for one pod in one round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Acknowledged(Basis),
    /// The agent answered with something else (usually the previous revision: the kubelet has
    /// not refreshed the volume yet, or the JVM has not re-read it yet).
    Behind {
        basis: Basis,
        why: String,
    },
    /// No answer (no pod IP yet, connection refused, timeout, bad JSON).
    Unreachable(String),
}

impl Verdict {
    pub fn is_acknowledged(&self) -> bool {
        matches!(self, Verdict::Acknowledged(_))
    }

    /// What the pod is judged on; `None` when its agent did not answer.
    pub fn basis(&self) -> Option<Basis> {
        match self {
            Verdict::Acknowledged(basis) | Verdict::Behind { basis, .. } => Some(*basis),
            Verdict::Unreachable(_) => None,
        }
    }
}

/// Does `report` show the pod using exactly the expected revision and ids of the ObserverSet
/// `observer_set` (`<namespace>/<name>`)? (pure)
///
/// With a `jvm` part, only the JVM's report counts. Without one, the file counts once the agent
/// has seen its content for `jvm_cache_ttl` (`reportedAt - seenAt`, both on the agent's clock;
/// `now` stands in for `reportedAt` with older agents).
pub fn judge(
    report: &Report,
    observer_set: &str,
    expected: &Expectation,
    jvm_cache_ttl: Duration,
    now: Timestamp,
) -> Verdict {
    if let Some(jvm) = &report.jvm {
        return judge_jvm(jvm, &report.file, observer_set, expected);
    }
    let file = &report.file;
    let behind = |why: String| Verdict::Behind {
        basis: Basis::FileAndTtl,
        why,
    };
    let Some(ids) = file.ids.as_deref() else {
        return behind(format!("sees no observer.ids file ({})", file.source));
    };
    if !matches(file, ids, observer_set, expected) {
        return behind(format!(
            "reports revision {} ids {:?} from {} ({})",
            show_revision(file.revision),
            sorted(ids),
            file.observer_set.as_deref().unwrap_or("no ObserverSet"),
            file.source
        ));
    }
    if jvm_cache_ttl.is_zero() {
        return Verdict::Acknowledged(Basis::FileAndTtl);
    }
    match file_age(report, now) {
        Some(age) if age >= jvm_cache_ttl => Verdict::Acknowledged(Basis::FileAndTtl),
        Some(age) => behind(format!(
            "its file holds revision {} since {age:?}; waiting out rollout.jvmCacheTtl {jvm_cache_ttl:?}: {FILE_TTL_BASIS}",
            expected.revision
        )),
        None => behind(format!(
            "its file holds revision {} but the agent reports no usable seenAt ({:?}), so the JVM's cache TTL cannot be waited out: run the agent of this operator version",
            expected.revision, file.seen_at
        )),
    }
}

fn judge_jvm(
    jvm: &Snapshot,
    file: &Snapshot,
    observer_set: &str,
    expected: &Expectation,
) -> Verdict {
    let Some(ids) = jvm.ids.as_deref() else {
        return Verdict::Behind {
            basis: Basis::Jvm,
            why: format!(
                "its JVM has reported nothing yet ({}; file: revision {}): a Kafka without this \
                 project's observer patch never writes KAFKA_OBSERVER_IDS_LOADED_FILE, so drop \
                 --loaded-file from its agent to acknowledge on the file and rollout.jvmCacheTtl",
                jvm.source,
                show_revision(file.revision)
            ),
        };
    };
    if matches(jvm, ids, observer_set, expected) {
        return Verdict::Acknowledged(Basis::Jvm);
    }
    Verdict::Behind {
        basis: Basis::Jvm,
        why: format!(
            "its JVM uses revision {} ids {:?} from {} ({}); its file holds revision {}",
            show_revision(jvm.revision),
            sorted(ids),
            jvm.observer_set.as_deref().unwrap_or("no ObserverSet"),
            jvm.source,
            show_revision(file.revision)
        ),
    }
}

/// Whether `reported` (with its `ids`) is exactly the expected revision, ids and ObserverSet.
fn matches(
    reported: &Snapshot,
    ids: &[NodeId],
    observer_set: &str,
    expected: &Expectation,
) -> bool {
    reported.revision == Some(expected.revision)
        && ids.iter().copied().collect::<BTreeSet<_>>() == expected.ids
        && reported.observer_set.as_deref() == Some(observer_set)
}

fn sorted(ids: &[NodeId]) -> Vec<NodeId> {
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    ids.dedup();
    ids
}

fn show_revision(revision: Option<i64>) -> String {
    revision.map_or("none".to_string(), |r| r.to_string())
}

/// How long the agent has seen the file's content, on the agent's own clock when it says when
/// it answered; `None` without `seenAt`.
fn file_age(report: &Report, now: Timestamp) -> Option<Duration> {
    let seen = report.file.seen_at?;
    Some(elapsed(seen, report.reported_at.unwrap_or(now)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::Source;
    use crate::crd::Role;
    use proptest::prelude::*;

    const TTL: Duration = Duration::from_secs(1);
    const SET: &str = "kafka/kafka";

    fn expected() -> Expectation {
        Expectation {
            role: Role::Broker,
            revision: 7,
            ids: BTreeSet::from([3, 4]),
        }
    }

    fn ts(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn now() -> Timestamp {
        ts("2026-11-29T09:00:10Z")
    }

    /// A report of an agent without `--loaded-file` that has seen the file for 10 s.
    fn report(revision: Option<i64>, ids: &[NodeId], set: Option<&str>) -> Report {
        Report {
            file: Snapshot {
                seen_at: Some(ts("2026-11-29T09:00:00Z")),
                ..jvm(revision, ids, set)
            },
            jvm: None,
            reported_at: Some(ts("2026-11-29T09:00:10Z")),
        }
    }

    fn jvm(revision: Option<i64>, ids: &[NodeId], set: Option<&str>) -> Snapshot {
        Snapshot {
            revision,
            ids: Some(ids.to_vec()),
            observer_set: set.map(Into::into),
            source: Source::File,
            ..Default::default()
        }
    }

    fn verdict(r: &Report) -> Verdict {
        judge(r, SET, &expected(), TTL, now())
    }

    #[test]
    fn acknowledges_only_the_exact_revision_and_ids() {
        assert_eq!(
            verdict(&report(Some(7), &[4, 3], Some("kafka/kafka"))),
            Verdict::Acknowledged(Basis::FileAndTtl)
        );
        assert!(!verdict(&report(Some(6), &[3, 4], Some("kafka/kafka"))).is_acknowledged());
        assert!(!verdict(&report(Some(7), &[4], Some("kafka/kafka"))).is_acknowledged());
        assert!(!verdict(&report(None, &[3, 4], None)).is_acknowledged());
        assert!(!verdict(&report(Some(7), &[3, 4], Some("kafka/other"))).is_acknowledged());
    }

    #[test]
    fn behind_says_what_the_pod_reads() {
        let Verdict::Behind { basis, why } = verdict(&report(Some(6), &[4], Some("kafka/kafka")))
        else {
            panic!("expected Behind");
        };
        assert_eq!(basis, Basis::FileAndTtl);
        assert!(why.contains("revision 6") && why.contains("[4]"), "{why}");
    }

    #[test]
    fn a_jvm_report_is_the_only_thing_that_counts() {
        let mut r = report(Some(7), &[3, 4], Some("kafka/kafka"));
        // The file holds 7, the JVM still uses 6: not acknowledged, however old the file.
        r.jvm = Some(jvm(Some(6), &[4], Some("kafka/kafka")));
        let Verdict::Behind { basis, why } = verdict(&r) else {
            panic!("expected Behind");
        };
        assert_eq!(basis, Basis::Jvm);
        assert!(
            why.contains("JVM uses revision 6") && why.contains("file holds revision 7"),
            "{why}"
        );
        r.jvm = Some(jvm(Some(7), &[4, 3], Some("kafka/kafka")));
        assert_eq!(verdict(&r), Verdict::Acknowledged(Basis::Jvm));
        // Loaded before the agent saw the file (no TTL wait applies to a JVM report).
        r.file.seen_at = r.reported_at;
        assert_eq!(verdict(&r), Verdict::Acknowledged(Basis::Jvm));
        r.jvm = Some(jvm(Some(7), &[3, 4], Some("kafka/other")));
        assert!(!verdict(&r).is_acknowledged());
    }

    #[test]
    fn a_jvm_that_reported_nothing_yet_is_behind_and_says_what_to_fix() {
        let mut r = report(Some(7), &[3, 4], Some("kafka/kafka"));
        r.jvm = Some(Snapshot {
            source: Source::Missing,
            ..Default::default()
        });
        let Verdict::Behind { basis, why } = verdict(&r) else {
            panic!("expected Behind");
        };
        assert_eq!(basis, Basis::Jvm);
        assert!(
            why.contains("--loaded-file") && why.contains("missing"),
            "{why}"
        );
    }

    #[test]
    fn without_a_jvm_report_the_file_waits_out_the_cache_ttl() {
        let mut r = report(Some(7), &[3, 4], Some("kafka/kafka"));
        r.file.seen_at = Some(ts("2026-11-29T09:00:09.500Z"));
        let Verdict::Behind { basis, why } = verdict(&r) else {
            panic!("expected Behind");
        };
        assert_eq!(basis, Basis::FileAndTtl);
        assert!(
            why.contains(FILE_TTL_BASIS) && why.contains("500ms"),
            "{why}"
        );
        r.file.seen_at = Some(ts("2026-11-29T09:00:09Z"));
        assert_eq!(verdict(&r), Verdict::Acknowledged(Basis::FileAndTtl));
        // A zero TTL: the file alone, as before the JVM reported anything.
        r.file.seen_at = r.reported_at;
        assert!(judge(&r, SET, &expected(), Duration::ZERO, now()).is_acknowledged());
    }

    #[test]
    fn the_age_is_taken_on_the_agents_clock() {
        // The agent's clock is an hour behind the operator's: only its own stamps are compared.
        let mut r = report(Some(7), &[3, 4], Some("kafka/kafka"));
        r.file.seen_at = Some(ts("2026-11-29T08:00:09.800Z"));
        r.reported_at = Some(ts("2026-11-29T08:00:10Z"));
        assert!(!verdict(&r).is_acknowledged());
        // An agent that does not say when it answered: the operator's clock stands in.
        r.reported_at = None;
        assert!(verdict(&r).is_acknowledged());
        r.file.seen_at = None;
        let Verdict::Behind { why, .. } = verdict(&r) else {
            panic!("expected Behind");
        };
        assert!(why.contains("seenAt"), "{why}");
    }

    #[test]
    fn parses_the_agent_json() {
        let json = r#"{"revision":7,"ids":[4],"observerSet":"kafka/kafka","source":"file","path":"/x",
            "seenAt":"2026-11-29T09:00:00.000Z","sha256":"ab","reportedAt":"2026-11-29T09:00:10.000Z","jvm":null}"#;
        let parsed: Report = serde_json::from_str(json).unwrap();
        let mut want = report(Some(7), &[4], Some("kafka/kafka"));
        want.file.sha256 = Some("ab".into());
        want.file.seen_at = Some(ts("2026-11-29T09:00:00.000Z"));
        want.reported_at = Some(ts("2026-11-29T09:00:10.000Z"));
        assert_eq!(parsed, want);
        let missing = r#"{"revision":null,"ids":null,"observerSet":null,"source":"missing"}"#;
        let parsed: Report = serde_json::from_str(missing).unwrap();
        assert!(
            matches!(verdict(&parsed), Verdict::Behind { why, .. } if why.contains("no observer.ids"))
        );
        let with_jvm = r#"{"revision":7,"ids":[3,4],"observerSet":"kafka/kafka","source":"file",
            "jvm":{"revision":7,"ids":[3,4],"observerSet":"kafka/kafka","sha256":"ab","seenAt":"2026-11-29T09:00:00.000Z","source":"file"}}"#;
        let parsed: Report = serde_json::from_str(with_jvm).unwrap();
        assert_eq!(verdict(&parsed), Verdict::Acknowledged(Basis::Jvm));
    }

    proptest! {
        /// Whatever the file says and however long it has been seen, a pod whose JVM reports
        /// another revision (or ids, or ObserverSet) is never acknowledged.
        #[test]
        fn a_jvm_on_another_revision_is_never_acknowledged(
            file_revision in proptest::option::of(0i64..20),
            jvm_revision in proptest::option::of(0i64..20),
            jvm_ids in proptest::collection::vec(0i32..6, 0..4),
            same_set in any::<bool>(),
            age_ms in 0u64..120_000,
            ttl_ms in 0u64..60_000,
        ) {
            let mut r = report(file_revision, &[3, 4], Some("kafka/kafka"));
            let seen = now().checked_sub(k8s_openapi::jiff::SignedDuration::from_millis(age_ms as i64)).unwrap();
            r.file.seen_at = Some(seen);
            r.reported_at = Some(now());
            let set = if same_set { "kafka/kafka" } else { "kafka/other" };
            r.jvm = Some(jvm(jvm_revision, &jvm_ids, Some(set)));
            let verdict = judge(&r, SET, &expected(), Duration::from_millis(ttl_ms), now());
            let loaded = jvm_revision == Some(7) && sorted(&jvm_ids) == vec![3, 4] && same_set;
            prop_assert_eq!(verdict.is_acknowledged(), loaded);
            prop_assert_eq!(verdict.basis(), Some(Basis::Jvm));
        }

        /// Without a JVM report a matching file is acknowledged exactly when it has been seen
        /// for the cache TTL.
        #[test]
        fn without_a_jvm_report_never_before_the_ttl(
            age_ms in 0u64..120_000,
            ttl_ms in 0u64..60_000,
        ) {
            let mut r = report(Some(7), &[3, 4], Some("kafka/kafka"));
            let seen = now().checked_sub(k8s_openapi::jiff::SignedDuration::from_millis(age_ms as i64)).unwrap();
            r.file.seen_at = Some(seen);
            r.reported_at = Some(now());
            let verdict = judge(&r, SET, &expected(), Duration::from_millis(ttl_ms), now());
            prop_assert_eq!(verdict.is_acknowledged(), age_ms >= ttl_ms);
            prop_assert_eq!(verdict.basis(), Some(Basis::FileAndTtl));
        }
    }
}
