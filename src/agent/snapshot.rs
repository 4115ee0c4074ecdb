//! What the agent reports: the observer file as the Kafka node in the same pod reads it, and
//! (with `--loaded-file`) what the Kafka JVM reports it has loaded from it. [`Report`] is the
//! wire format of `GET /observer-ids` both ways: the agent serializes it, the operator
//! deserializes it (`AgentClient`, judged by `crate::rollout::acknowledgement`), tolerating what
//! older agents leave out.
//!
//! Pure: the shell reads the files and hands the outcome here; this module decides whether a
//! report changes. The ids are parsed with the broker patch's rules (see `crate::observer_ids`), so
//! the agent acknowledges exactly what Kafka will act on, and the header tells which
//! ObserverSet revision the content came from. The JVM's report (the patch's
//! `KAFKA_OBSERVER_IDS_LOADED_FILE`) holds the very bytes the JVM loaded, so it is parsed the same
//! way; when the JVM runs on a fallback (no observer.ids file) its first line says which.

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::observer_ids;

/// Where the reported ids come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The file was read (for the JVM's report: the JVM loaded an observer.ids file).
    File,
    /// No file: the broker patch would fall back to `KAFKA_OBSERVER_BROKER_IDS`, then to no
    /// observers at all. The operator must treat this as "not acknowledged". For the JVM's
    /// report: the JVM has not written one (yet, or never: a Kafka without our patch).
    Missing,
    /// The file exists but could not be read before any successful read (permissions, I/O).
    /// After a successful read an unreadable file keeps the last report, as the broker does.
    Unreadable,
    /// JVM report only: no observer.ids file, the JVM uses `KAFKA_OBSERVER_BROKER_IDS`.
    Env,
    /// JVM report only: no observer.ids file and no fallback (or its first read failed), the
    /// JVM uses the empty set.
    Empty,
    /// Read side only: a source this operator does not know (a newer agent), or none given.
    #[default]
    #[serde(other)]
    Unknown,
}

impl Source {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::File => "file",
            Source::Missing => "missing",
            Source::Unreadable => "unreadable",
            Source::Env => "env",
            Source::Empty => "empty",
            Source::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// First line of the JVM's report when it runs on a fallback (`LoadedReport.FALLBACK_MARKER` in
/// patches/src/io/kafkaobserver/patch/LoadedReport.java).
pub const FALLBACK_MARKER: &str = "# kafka-observer-patch loaded: source=";

/// One followed file as the agent reports it: the top level of `GET /observer-ids` for the
/// observer file, its `jvm` part for the JVM's report. Every field may be absent on the read
/// side (an older agent, a JVM that has reported nothing).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// Revision from the managed-file header; `None` without a file or header.
    #[serde(default)]
    pub revision: Option<i64>,
    /// `namespace/name` of the ObserverSet from the header.
    #[serde(default)]
    pub observer_set: Option<String>,
    /// Observer node ids, sorted and unique; `None` when there is no file.
    #[serde(default)]
    pub ids: Option<Vec<i32>>,
    /// Hex SHA-256 of the file's bytes; `None` when there is no file.
    #[serde(default)]
    pub sha256: Option<String>,
    /// When the agent first saw this content (not the time of the request). The agent always
    /// sets it; `None` only from an agent that does not send it.
    #[serde(default, with = "rfc3339")]
    pub seen_at: Option<Timestamp>,
    #[serde(default)]
    pub source: Source,
    /// Which report of this file since the agent started: 1 for its first read, one more on
    /// every change. Orders two reports exactly where the millisecond `seenAt` stamps of two
    /// quick changes may be equal (readers that do not know the field ignore it).
    #[serde(default)]
    pub sequence: u64,
}

/// The outcome of one read of the file.
#[derive(Debug)]
pub enum Observation {
    Content(Vec<u8>),
    Missing,
    Unreadable(String),
}

/// Reads an observation into a report (the observer file's or the JVM's).
pub type Reader = fn(&Observation, Timestamp) -> Snapshot;

/// The JSON body of `GET /observer-ids`: the file, the JVM's report and the agent's clock.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    #[serde(flatten)]
    pub file: Snapshot,
    /// What the Kafka JVM reports it has loaded; `null` when the agent runs without
    /// `--loaded-file` (the operator then falls back to the file plus the JVM's cache TTL).
    #[serde(default)]
    pub jvm: Option<Snapshot>,
    /// The agent's clock when it answered. `reportedAt - seenAt` is how long the content has
    /// been seen, without comparing the clocks of two machines. The agent always sets it;
    /// older agents do not send it.
    #[serde(default, with = "rfc3339")]
    pub reported_at: Option<Timestamp>,
}

impl Report {
    pub fn new(file: &Snapshot, jvm: Option<&Snapshot>, now: Timestamp) -> Self {
        Self {
            file: file.clone(),
            jvm: jvm.cloned(),
            reported_at: Some(now),
        }
    }
}

impl Snapshot {
    /// The JVM's report for `observation` of the loaded file, seen at `now`: like the observer
    /// file (header, ids, digest of the bytes), the source from the fallback marker if present.
    pub fn from_loaded(observation: &Observation, now: Timestamp) -> Self {
        let mut snap = Self::from_observation(observation, now);
        if let Observation::Content(bytes) = observation {
            let text = String::from_utf8_lossy(bytes);
            let first = text.lines().map(str::trim).find(|l| !l.is_empty());
            if let Some(source) = first.and_then(|l| l.strip_prefix(FALLBACK_MARKER)) {
                let token = source.split_whitespace().next().unwrap_or_default();
                snap.source = if token == "empty" {
                    Source::Empty
                } else {
                    Source::Env
                };
            }
        }
        snap
    }

    /// The report for `observation` seen at `now`, without regard to any previous report.
    pub fn from_observation(observation: &Observation, now: Timestamp) -> Self {
        match observation {
            Observation::Content(bytes) => {
                let text = String::from_utf8_lossy(bytes);
                let header = observer_ids::parse_header(&text);
                Self {
                    revision: header.as_ref().map(|h| h.revision),
                    observer_set: header.map(|h| format!("{}/{}", h.namespace, h.name)),
                    ids: Some(observer_ids::parse_ids(&text).into_iter().collect()),
                    sha256: Some(sha256_hex(bytes)),
                    seen_at: Some(now),
                    source: Source::File,
                    sequence: 1,
                }
            }
            Observation::Missing => Self::empty(Source::Missing, now),
            Observation::Unreadable(_) => Self::empty(Source::Unreadable, now),
        }
    }

    fn empty(source: Source, now: Timestamp) -> Self {
        Self {
            revision: None,
            observer_set: None,
            ids: None,
            sha256: None,
            seen_at: Some(now),
            source,
            sequence: 1,
        }
    }

    /// Same content and source, ignoring when it was seen.
    fn same_as(&self, other: &Snapshot) -> bool {
        self.source == other.source && self.sha256 == other.sha256
    }
}

/// The next report after `previous`, or `None` when the report stays as it is (content
/// unchanged, or the file became unreadable after a good read: keep the last value). `read`
/// is [`Snapshot::from_observation`] or [`Snapshot::from_loaded`].
pub fn next(
    read: Reader,
    previous: Option<&Snapshot>,
    observation: &Observation,
    now: Timestamp,
) -> Option<Snapshot> {
    if let (Some(prev), Observation::Unreadable(_)) = (previous, observation) {
        if matches!(prev.source, Source::File | Source::Env | Source::Empty) {
            return None;
        }
    }
    let candidate = read(observation, now);
    match previous {
        Some(prev) if prev.same_as(&candidate) => None,
        Some(prev) => Some(Snapshot {
            sequence: prev.sequence + 1,
            ..candidate
        }),
        None => Some(candidate),
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The agent's timestamps on the wire: RFC 3339 with milliseconds, always three digits
/// (`2027-01-15T08:00:00.000Z`); absent or `null` read as `None`, anything else not RFC 3339
/// is a malformed answer.
mod rfc3339 {
    use super::*;

    pub fn serialize<S: Serializer>(at: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
        match at {
            Some(at) => s.collect_str(&format_args!("{at:.3}")),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|text| text.parse().map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str =
        "# Managed by kafka-observer-operator: ObserverSet kafka/kafka, revision 7\n\
                        # One observer node id per line. Do not edit: changes are reverted.\n4\n";

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn content(s: &str) -> Observation {
        Observation::Content(s.as_bytes().to_vec())
    }

    #[test]
    fn a_managed_file_reports_revision_set_ids_and_digest() {
        let snap = Snapshot::from_observation(&content(FILE), at(0));
        assert_eq!(snap.revision, Some(7));
        assert_eq!(snap.observer_set.as_deref(), Some("kafka/kafka"));
        assert_eq!(snap.ids, Some(vec![4]));
        assert_eq!(snap.source, Source::File);
        let json = serde_json::to_value(&snap).unwrap();
        assert_eq!(json["observerSet"], "kafka/kafka");
        assert_eq!(json["seenAt"], "2027-01-15T08:00:00.000Z");
        assert_eq!(json["source"], "file");
        assert_eq!(json["sha256"].as_str().unwrap().len(), 64);
    }

    #[test]
    fn the_digest_is_sha256_of_the_bytes() {
        let snap = Snapshot::from_observation(&content("abc"), at(0));
        assert_eq!(
            snap.sha256.as_deref(),
            Some("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
    }

    #[test]
    fn a_hand_written_file_has_ids_but_no_revision() {
        let snap = Snapshot::from_observation(&content("3, 4\n# 5\n"), at(0));
        assert_eq!(snap.revision, None);
        assert_eq!(snap.observer_set, None);
        assert_eq!(snap.ids, Some(vec![3, 4]));
    }

    #[test]
    fn a_missing_file_reports_null_ids() {
        let snap = Snapshot::from_observation(&Observation::Missing, at(0));
        let json = serde_json::to_value(&snap).unwrap();
        assert_eq!(json["source"], "missing");
        assert!(json["ids"].is_null());
        assert!(json["revision"].is_null());
        assert!(json["sha256"].is_null());
    }

    #[test]
    fn unchanged_content_keeps_the_first_seen_time() {
        let first = next(Snapshot::from_observation, None, &content(FILE), at(0)).unwrap();
        assert_eq!(
            next(
                Snapshot::from_observation,
                Some(&first),
                &content(FILE),
                at(5)
            ),
            None
        );
        let changed = FILE.replace("revision 7", "revision 8");
        let second = next(
            Snapshot::from_observation,
            Some(&first),
            &content(&changed),
            at(9),
        )
        .unwrap();
        assert_eq!((second.revision, second.seen_at), (Some(8), Some(at(9))));
        // The sequence orders the two reports, whatever their stamps.
        assert_eq!((first.sequence, second.sequence), (1, 2));
        let same_ms = next(
            Snapshot::from_observation,
            Some(&second),
            &content(FILE),
            at(9),
        )
        .unwrap();
        assert_eq!((same_ms.seen_at, same_ms.sequence), (Some(at(9)), 3));
        assert_eq!(serde_json::to_value(&same_ms).unwrap()["sequence"], 3);
    }

    #[test]
    fn an_unreadable_file_keeps_the_last_good_report() {
        let first = next(Snapshot::from_observation, None, &content(FILE), at(0)).unwrap();
        let denied = Observation::Unreadable("permission denied".into());
        assert_eq!(
            next(Snapshot::from_observation, Some(&first), &denied, at(1)),
            None
        );
        let initial = next(Snapshot::from_observation, None, &denied, at(1)).unwrap();
        assert_eq!((initial.source, initial.ids), (Source::Unreadable, None));
    }

    #[test]
    fn the_jvm_report_of_a_file_is_read_like_the_file() {
        let file = Snapshot::from_observation(&content(FILE), at(0));
        let jvm = Snapshot::from_loaded(&content(FILE), at(1));
        assert_eq!(
            (jvm.revision, &jvm.observer_set, &jvm.ids, jvm.source),
            (Some(7), &file.observer_set, &file.ids, Source::File)
        );
        // Same bytes, same digest: the JVM loaded exactly what the volume holds.
        assert_eq!(jvm.sha256, file.sha256);
    }

    #[test]
    fn the_jvm_report_names_its_fallback() {
        let env = Snapshot::from_loaded(
            &content("# kafka-observer-patch loaded: source=env:KAFKA_OBSERVER_BROKER_IDS\n4\n5\n"),
            at(0),
        );
        assert_eq!(
            (env.source, env.revision, env.ids),
            (Source::Env, None, Some(vec![4, 5]))
        );
        let empty = Snapshot::from_loaded(
            &content("# kafka-observer-patch loaded: source=empty\n"),
            at(0),
        );
        assert_eq!(
            (empty.source, empty.ids.clone()),
            (Source::Empty, Some(vec![]))
        );
        let json = serde_json::to_value(&empty).unwrap();
        assert_eq!(json["source"], "empty");
        let missing = Snapshot::from_loaded(&Observation::Missing, at(0));
        assert_eq!((missing.source, missing.ids), (Source::Missing, None));
    }

    #[test]
    fn an_unreadable_jvm_report_keeps_the_last_one() {
        let first = next(Snapshot::from_loaded, None, &content(FILE), at(0)).unwrap();
        let denied = Observation::Unreadable("permission denied".into());
        assert_eq!(
            next(Snapshot::from_loaded, Some(&first), &denied, at(1)),
            None
        );
        let fallback = content("# kafka-observer-patch loaded: source=empty\n");
        let empty = next(Snapshot::from_loaded, Some(&first), &fallback, at(2)).unwrap();
        assert_eq!(
            next(Snapshot::from_loaded, Some(&empty), &denied, at(3)),
            None
        );
    }

    #[test]
    fn the_report_carries_both_parts_and_the_agent_clock() {
        let file = Snapshot::from_observation(&content(FILE), at(0));
        let jvm = Snapshot::from_loaded(&content(FILE), at(2));
        let json = serde_json::to_value(Report::new(&file, Some(&jvm), at(5))).unwrap();
        assert_eq!(json["revision"], 7);
        assert_eq!(json["seenAt"], "2027-01-15T08:00:00.000Z");
        assert_eq!(json["jvm"]["revision"], 7);
        assert_eq!(json["jvm"]["observerSet"], "kafka/kafka");
        assert_eq!(json["jvm"]["source"], "file");
        assert_eq!(json["jvm"]["seenAt"], "2027-01-15T08:00:02.000Z");
        assert_eq!(json["reportedAt"], "2027-01-15T08:00:05.000Z");
        let without = serde_json::to_value(Report::new(&file, None, at(5))).unwrap();
        assert!(without["jvm"].is_null() && without.as_object().unwrap().contains_key("jvm"));
    }

    #[test]
    fn deletion_and_recreation_are_changes() {
        let first = next(Snapshot::from_observation, None, &content(FILE), at(0)).unwrap();
        let gone = next(
            Snapshot::from_observation,
            Some(&first),
            &Observation::Missing,
            at(1),
        )
        .unwrap();
        assert_eq!(gone.source, Source::Missing);
        assert_eq!(
            next(
                Snapshot::from_observation,
                Some(&gone),
                &Observation::Missing,
                at(2)
            ),
            None
        );
        let back = next(
            Snapshot::from_observation,
            Some(&gone),
            &content(FILE),
            at(3),
        )
        .unwrap();
        assert_eq!(back.revision, Some(7));
        assert_eq!((gone.sequence, back.sequence), (2, 3));
    }
}
