//! The promotion engine's memory in `status.engineState`, so a successor operator (leader
//! failover, restart) decides as the predecessor would have: confirmation streaks, stabilization
//! timers, cooldowns and the last known high watermark of every partition an observer hosts.
//!
//! Pure: [`save`] turns a [`PolicyHistory`] into the status field within [`MAX_STATE_BYTES`],
//! [`restore`] merges a saved state into the history rebuilt from `status.autoPromotions`,
//! [`write_due`] says when a write is worth its cost (on change, rate-limited). The task
//! (`task.rs`) reads and writes. docs/promotion-policies.md, "Engine state", gives the rules.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use thiserror::Error;

use crate::crd::{BrokerEngineState, EngineState, TopicHighWatermarks};
use crate::promotion::{
    BrokerId, ClusterSnapshot, LastAction, PolicyConfig, PolicyHistory, TopicPartition,
};
use crate::time_format::{to_micro, Text};

/// Upper bound of `status.engineState` as JSON. The apiserver refuses objects over ~1.5 MiB
/// (etcd's request limit); this leaves half of it to the rest of the ObserverSet.
pub const MAX_STATE_BYTES: usize = 768 * 1024;
/// A saved state older than this is discarded by a successor (its timers would describe a
/// cluster nobody watched for that long). The task writes at least every [`HEARTBEAT`].
pub const MAX_AGE: SignedDuration = SignedDuration::from_mins(10);
/// A saved state stamped further in the future than this (clocks of two nodes disagreeing) is
/// discarded; closer future timestamps are taken as "now".
pub const MAX_CLOCK_SKEW: SignedDuration = SignedDuration::from_mins(2);
/// Changed high watermarks alone are written at most this often.
pub const HIGH_WATERMARK_INTERVAL: SignedDuration = SignedDuration::from_secs(30);
/// An unchanged state is written again this often, so a successor does not find it too old.
pub const HEARTBEAT: SignedDuration = SignedDuration::from_mins(4);
/// No two writes of the state closer than this, whatever changed.
pub const MIN_WRITE_GAP: SignedDuration = SignedDuration::from_secs(1);

/// JSON bytes of one `highWatermarks` entry besides the topic name and the encoded partitions:
/// `{"topic":"","partitions":""},` (Kafka topic names need no JSON escaping).
const TOPIC_ENTRY_OVERHEAD: usize = 30;
/// JSON bytes of `savedAt`, the field names and `omittedHighWatermarks`, with room to spare.
const FIXED_OVERHEAD: usize = 256;

#[derive(Debug, Error, PartialEq)]
pub enum EngineStateError {
    #[error(
        "status.engineState.savedAt {} is {ahead_s}s ahead of this operator's clock (more than the {limit_s}s tolerated): check the clocks (NTP) of the nodes the operator runs on; the saved state is ignored",
        Text(*.saved_at)
    )]
    FromTheFuture {
        saved_at: Timestamp,
        ahead_s: i64,
        limit_s: i64,
    },
    #[error(
        "status.engineState was saved at {}, {age_s}s ago (more than the {limit_s}s a successor trusts): the engine starts afresh (only status.autoPromotions is kept)",
        Text(*.saved_at)
    )]
    TooOld {
        saved_at: Timestamp,
        age_s: i64,
        limit_s: i64,
    },
    #[error(
        "status.engineState.highWatermarks of topic {topic}: {detail}; this topic's high watermarks are ignored until the next scan (do not edit status.engineState by hand)"
    )]
    Corrupt { topic: String, detail: String },
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn take_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        let part = u64::from(b & 0x7f);
        if shift == 63 && part > 1 {
            return None;
        }
        v |= part << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Encodes one topic's `(partition, high watermark)` pairs. Pairs must be sorted by partition,
/// partitions distinct and >= 0, high watermarks >= 0 (what [`save`] passes).
pub fn encode_partitions(pairs: &[(i32, i64)]) -> String {
    let mut bytes = Vec::with_capacity(pairs.len() * 6);
    let mut previous: i64 = -1;
    for &(partition, hw) in pairs {
        put_varint(&mut bytes, (i64::from(partition) - previous - 1) as u64);
        put_varint(&mut bytes, hw as u64);
        previous = i64::from(partition);
    }
    BASE64.encode(bytes)
}

/// Decodes what [`encode_partitions`] wrote.
pub fn decode_partitions(topic: &str, text: &str) -> Result<Vec<(i32, i64)>, EngineStateError> {
    let corrupt = |detail: &str| EngineStateError::Corrupt {
        topic: topic.to_owned(),
        detail: detail.to_owned(),
    };
    let bytes = BASE64
        .decode(text)
        .map_err(|e| corrupt(&format!("not base64 ({e})")))?;
    let mut at = 0;
    let mut previous: i64 = -1;
    let mut out = Vec::new();
    while at < bytes.len() {
        let gap = take_varint(&bytes, &mut at).ok_or_else(|| corrupt("a truncated varint"))?;
        let hw = take_varint(&bytes, &mut at).ok_or_else(|| corrupt("a truncated varint"))?;
        let partition = i64::try_from(gap)
            .ok()
            .and_then(|g| previous.checked_add(g)?.checked_add(1))
            .and_then(|p| i32::try_from(p).ok())
            .ok_or_else(|| corrupt("a partition number beyond int32"))?;
        let hw = i64::try_from(hw).map_err(|_| corrupt("a high watermark beyond int64"))?;
        out.push((partition, hw));
        previous = i64::from(partition);
    }
    Ok(out)
}

/// The per-broker entries: streaks (capped at `confirmations`: a longer streak decides nothing
/// more, and an uncapped one would change, and be written, on every scan), stabilization timers,
/// and last actions whose cooldown still runs at `now`.
fn broker_entries(
    history: &PolicyHistory,
    config: &PolicyConfig,
    now: Timestamp,
) -> Vec<BrokerEngineState> {
    let cooldown = SignedDuration::try_from(config.cooldown).unwrap_or(SignedDuration::MAX);
    let cooling = |a: &LastAction| a.at.checked_add(cooldown).map_or(true, |u| u > now);
    let ids: BTreeSet<BrokerId> = history
        .promote_streak
        .keys()
        .chain(history.recovered_since.keys())
        .chain(
            history
                .last_action
                .iter()
                .filter(|(_, a)| cooling(a))
                .map(|(b, _)| b),
        )
        .copied()
        .collect();
    ids.into_iter()
        .map(|id| {
            let last = history.last_action.get(&id).filter(|a| cooling(a));
            BrokerEngineState {
                node_id: id,
                promote_streak: history
                    .promote_streak
                    .get(&id)
                    .map(|s| (*s).min(config.confirmations)),
                recovered_since: history.recovered_since.get(&id).map(|t| to_micro(*t)),
                last_action: last.map(|a| a.kind),
                last_action_at: last.map(|a| to_micro(a.at)),
            }
        })
        .collect()
}

/// The state to save after a decision at `now`. The high watermarks go topic by topic, in name
/// order, until the JSON would exceed [`MAX_STATE_BYTES`]; the partitions that do not fit are
/// counted in `omittedHighWatermarks` (a takeover on them waits until the HW is seen again).
pub fn save(history: &PolicyHistory, config: &PolicyConfig, now: Timestamp) -> EngineState {
    let brokers = broker_entries(history, config, now);
    let mut by_topic: BTreeMap<&str, Vec<(i32, i64)>> = BTreeMap::new();
    for (tp, &hw) in &history.last_known_hw {
        if tp.partition >= 0 && hw >= 0 {
            by_topic
                .entry(tp.topic.as_str())
                .or_default()
                .push((tp.partition, hw));
        }
    }
    let brokers_bytes = serde_json::to_vec(&brokers).map_or(0, |v| v.len());
    let mut budget = MAX_STATE_BYTES.saturating_sub(brokers_bytes + FIXED_OVERHEAD);
    let mut high_watermarks = Vec::with_capacity(by_topic.len());
    let mut omitted: u32 = 0;
    for (topic, mut pairs) in by_topic {
        pairs.sort_unstable();
        let partitions = encode_partitions(&pairs);
        let cost = topic.len() + partitions.len() + TOPIC_ENTRY_OVERHEAD;
        if cost > budget {
            omitted = omitted.saturating_add(u32::try_from(pairs.len()).unwrap_or(u32::MAX));
            continue;
        }
        budget -= cost;
        high_watermarks.push(TopicHighWatermarks {
            topic: topic.to_owned(),
            partitions,
        });
    }
    EngineState {
        saved_at: to_micro(now),
        brokers,
        high_watermarks,
        omitted_high_watermarks: omitted,
    }
}

/// A restored history and what the restore did, for the log and the event.
#[derive(Debug, PartialEq)]
pub struct Restored {
    pub history: PolicyHistory,
    /// One line: what was restored, from when.
    pub summary: String,
    /// What was left out and why (each worth a log line).
    pub dropped: Vec<String>,
}

/// Merges a saved state into `base` (the history rebuilt from `status.autoPromotions`) at `now`.
/// Timestamps are wall-clock times of the predecessor: ahead of `now` by at most
/// [`MAX_CLOCK_SKEW`] they count as `now` (which only delays the next action), further ahead or
/// older than [`MAX_AGE`] the whole state is refused. Streaks are kept only when the state is
/// younger than `stale_after` (three scan intervals: confirmations are consecutive scans);
/// stabilization timers only for brokers still in `status.autoPromotions`; of two last actions
/// on a broker, the later one.
pub fn restore(
    saved: &EngineState,
    base: PolicyHistory,
    now: Timestamp,
    stale_after: SignedDuration,
) -> Result<Restored, EngineStateError> {
    let saved_at = saved.saved_at.0;
    let age = now.duration_since(saved_at);
    if age < -MAX_CLOCK_SKEW {
        return Err(EngineStateError::FromTheFuture {
            saved_at,
            ahead_s: -age.as_secs(),
            limit_s: MAX_CLOCK_SKEW.as_secs(),
        });
    }
    if age > MAX_AGE {
        return Err(EngineStateError::TooOld {
            saved_at,
            age_s: age.as_secs(),
            limit_s: MAX_AGE.as_secs(),
        });
    }
    let clamp = |t: &MicroTime| t.0.min(now);
    let mut history = base;
    let mut dropped = Vec::new();
    let fresh = age <= stale_after;
    let (mut streaks, mut timers, mut cooldowns) = (0, 0, 0);
    for b in &saved.brokers {
        if let Some(streak) = b.promote_streak.filter(|s| *s > 0) {
            if !fresh {
                dropped.push(format!(
                    "observer {}: confirmation streak {streak} not restored, the state is {}s old (confirmations must be consecutive scans, at most {}s apart)",
                    b.node_id,
                    age.as_secs(),
                    stale_after.as_secs()
                ));
            } else if !history.is_auto_promoted(b.node_id) {
                history.promote_streak.insert(b.node_id, streak);
                streaks += 1;
            }
        }
        if let Some(since) = &b.recovered_since {
            if history.is_auto_promoted(b.node_id) {
                history.recovered_since.insert(b.node_id, clamp(since));
                timers += 1;
            } else {
                dropped.push(format!(
                    "broker {}: stabilization timer not restored, it is no longer in status.autoPromotions",
                    b.node_id
                ));
            }
        }
        if let (Some(kind), Some(at)) = (b.last_action, &b.last_action_at) {
            let restored = LastAction {
                kind,
                at: clamp(at),
            };
            let entry = history.last_action.entry(b.node_id).or_insert(restored);
            if restored.at > entry.at {
                *entry = restored;
            }
            cooldowns += 1;
        }
    }
    let mut hws = 0usize;
    for t in &saved.high_watermarks {
        match decode_partitions(&t.topic, &t.partitions) {
            Ok(pairs) => {
                for (partition, hw) in pairs {
                    let tp = TopicPartition {
                        topic: t.topic.clone(),
                        partition,
                    };
                    history.last_known_hw.entry(tp).or_insert(hw);
                    hws += 1;
                }
            }
            Err(e) => dropped.push(e.to_string()),
        }
    }
    if saved.omitted_high_watermarks > 0 {
        dropped.push(format!(
            "{} high watermark(s) were left out of the saved state to keep it under {MAX_STATE_BYTES} bytes: a takeover on those partitions waits until their high watermark is seen again",
            saved.omitted_high_watermarks
        ));
    }
    Ok(Restored {
        history,
        summary: format!(
            "restored the promotion engine's state saved at {} ({}s ago): {streaks} confirmation streak(s), {timers} stabilization timer(s), {cooldowns} last action(s), {hws} high watermark(s)",
            Text(saved_at),
            age.as_secs()
        ),
        dropped,
    })
}

/// Why a write of `status.engineState` is due (the label of `automation_state_writes_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteReason {
    /// Nothing saved yet by this task, or a streak, timer or last action changed.
    Decisions,
    /// A partition without leader has a high watermark the saved state does not hold: the one
    /// value a takeover after a failover needs exactly.
    FrozenHighWatermark,
    /// High watermarks moved, and the last write is [`HIGH_WATERMARK_INTERVAL`] old.
    HighWatermarks,
    /// Nothing changed for [`HEARTBEAT`].
    Heartbeat,
}

impl WriteReason {
    pub fn label(self) -> &'static str {
        match self {
            WriteReason::Decisions => "Decisions",
            WriteReason::FrozenHighWatermark => "FrozenHighWatermark",
            WriteReason::HighWatermarks => "HighWatermarks",
            WriteReason::Heartbeat => "Heartbeat",
        }
    }
}

/// What the task last wrote (or found in status when it started).
#[derive(Clone, Debug)]
pub struct LastWrite {
    pub at: Timestamp,
    pub state: EngineState,
    /// The high watermarks of `state`, decoded, to compare the frozen ones against.
    pub high_watermarks: HashMap<TopicPartition, i64>,
}

impl LastWrite {
    pub fn new(state: EngineState, high_watermarks: HashMap<TopicPartition, i64>) -> Self {
        LastWrite {
            at: state.saved_at.0,
            state,
            high_watermarks,
        }
    }
}

/// Whether a partition without leader in `snapshot` has a remembered high watermark that
/// `written` does not hold (the partition went offline since the last write).
pub fn frozen_unsaved(
    snapshot: &ClusterSnapshot,
    history: &PolicyHistory,
    written: &HashMap<TopicPartition, i64>,
) -> bool {
    snapshot
        .partitions
        .iter()
        .filter(|p| p.leader.is_none())
        .any(|p| {
            let id = p.id();
            history
                .last_known_hw
                .get(&id)
                .is_some_and(|hw| written.get(&id) != Some(hw))
        })
}

/// Whether to write `next` now: on a change of the decisions (streaks, timers, last actions) or
/// of a frozen high watermark at once, on other high watermark changes every
/// [`HIGH_WATERMARK_INTERVAL`], unchanged every [`HEARTBEAT`]; never twice within
/// [`MIN_WRITE_GAP`].
pub fn write_due(
    last: Option<&LastWrite>,
    next: &EngineState,
    frozen: bool,
    now: Timestamp,
) -> Option<WriteReason> {
    let Some(last) = last else {
        return Some(WriteReason::Decisions);
    };
    let since = now.duration_since(last.at);
    if since < MIN_WRITE_GAP {
        return None;
    }
    if next.brokers != last.state.brokers {
        return Some(WriteReason::Decisions);
    }
    if frozen {
        return Some(WriteReason::FrozenHighWatermark);
    }
    let moved = next.high_watermarks != last.state.high_watermarks
        || next.omitted_high_watermarks != last.state.omitted_high_watermarks;
    if moved && since >= HIGH_WATERMARK_INTERVAL {
        return Some(WriteReason::HighWatermarks);
    }
    (since >= HEARTBEAT).then_some(WriteReason::Heartbeat)
}

#[cfg(test)]
#[path = "engine_state_tests.rs"]
mod tests;
