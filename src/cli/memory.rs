//! The operator's memory as `plan` and `explain` use it: the history the automation rebuilds
//! from `status.autoPromotions`, merged with `status.engineState` by the automation's own
//! restore rules (`automation::engine_state::restore`: a state older than 10 minutes or from
//! the future is discarded, streaks older than three scan intervals are dropped). The engine's
//! decision on a fresh scan with this history is the decision the operator makes on its next
//! scan: confirmations counted so far, the running stabilization window, cooldowns after
//! demotions, the high watermark a takeover needs. Pure.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use crate::automation::engine_state;
use crate::crd::EngineState;
use crate::promotion::{BrokerId, EngineActionKind, PolicyConfig, PolicyHistory};
use crate::time_format;

/// Where the history came from, for people (`plan` and `explain` print it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryView {
    /// Whether `status.engineState` was merged in.
    pub restored: bool,
    /// `status.engineState.savedAt`, when there is one.
    #[serde(serialize_with = "time_format::serialize_option")]
    pub saved_at: Option<Timestamp>,
    /// One line: what was restored, or why nothing was.
    pub summary: String,
    /// What the restore left out and why.
    pub dropped: Vec<String>,
}

/// The history the operator decides with, and where it came from.
pub struct OperatorMemory {
    pub history: PolicyHistory,
    pub view: MemoryView,
}

/// `base` is the history rebuilt from `status.autoPromotions`; `saved` is `status.engineState`.
pub fn operator_memory(
    base: PolicyHistory,
    saved: Option<&EngineState>,
    config: &PolicyConfig,
    now: Timestamp,
) -> OperatorMemory {
    let Some(saved) = saved else {
        return OperatorMemory {
            history: base,
            view: MemoryView {
                restored: false,
                saved_at: None,
                summary: "no status.engineState (the operator has not saved its engine's state for this ObserverSet): decided from status.autoPromotions only".into(),
                dropped: Vec::new(),
            },
        };
    };
    let stale_after = SignedDuration::try_from(config.stale_after).unwrap_or(SignedDuration::MAX);
    let saved_at = Some(saved.saved_at.0);
    match engine_state::restore(saved, base.clone(), now, stale_after) {
        Ok(r) => OperatorMemory {
            history: r.history,
            view: MemoryView {
                restored: true,
                saved_at,
                summary: r.summary,
                dropped: r.dropped,
            },
        },
        // The operator would discard it too: decided from status.autoPromotions, as it would.
        Err(e) => OperatorMemory {
            history: base,
            view: MemoryView {
                restored: false,
                saved_at,
                summary: format!("discarded: {e}"),
                dropped: Vec::new(),
            },
        },
    }
}

/// What the operator remembers of one broker, and the times that follow from it at `now`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerMemory {
    /// Consecutive scans the operator has counted it a promotion candidate (before this scan).
    pub confirmations_counted: Option<u32>,
    /// Since when the cluster has been healthy without this auto-promoted broker (after this
    /// scan: the stabilization window runs from here).
    #[serde(serialize_with = "time_format::serialize_option")]
    pub healthy_without_since: Option<Timestamp>,
    /// When that window ends.
    #[serde(serialize_with = "time_format::serialize_option")]
    pub demotion_due_at: Option<Timestamp>,
    /// The last automatic action on it: `promote`, `demote`, `moveLeadership`, `uncleanElect`.
    pub last_action: Option<&'static str>,
    #[serde(serialize_with = "time_format::serialize_option")]
    pub last_action_at: Option<Timestamp>,
    /// When its cooldown ends, if it still runs.
    #[serde(serialize_with = "time_format::serialize_option")]
    pub cooldown_until: Option<Timestamp>,
}

pub fn action_name(kind: EngineActionKind) -> &'static str {
    match kind {
        EngineActionKind::Promote => "promote",
        EngineActionKind::Demote => "demote",
        EngineActionKind::MoveLeadership => "moveLeadership",
        EngineActionKind::ReorderReplicas => "reorderReplicas",
        EngineActionKind::UncleanElect => "uncleanElect",
    }
}

/// Broker `x`'s memory: `history` is what the decision started from, `next` what it leaves
/// (the running stabilization window is in `next`: it starts or ends with this scan).
pub fn broker_memory(
    history: &PolicyHistory,
    next: &PolicyHistory,
    config: &PolicyConfig,
    now: Timestamp,
    x: BrokerId,
) -> BrokerMemory {
    let window = config
        .auto_demote_after
        .map(|w| SignedDuration::try_from(w).unwrap_or(SignedDuration::MAX));
    let since = next.recovered_since.get(&x).copied();
    let last = history.last_action.get(&x);
    let cooldown = SignedDuration::try_from(config.cooldown).unwrap_or(SignedDuration::MAX);
    BrokerMemory {
        confirmations_counted: history.promote_streak.get(&x).copied(),
        healthy_without_since: since,
        demotion_due_at: since
            .zip(window)
            .map(|(s, w)| s.checked_add(w).unwrap_or(Timestamp::MAX)),
        last_action: last.map(|a| action_name(a.kind)),
        last_action_at: last.map(|a| a.at),
        cooldown_until: history.cooling_until(x, cooldown, now),
    }
}

/// "in 37 s" / "now": how far `t` is from `now`, for the text views.
pub fn from_now(t: Timestamp, now: Timestamp) -> String {
    let s = t.duration_since(now).as_secs();
    if s > 0 {
        format!("in {s} s")
    } else {
        "now".into()
    }
}

/// The text line about the memory: `operator memory: <summary>` and what was dropped.
pub fn render_memory(v: &MemoryView) -> String {
    let mut out = format!("  operator memory: {}\n", v.summary);
    for d in &v.dropped {
        out += &format!("  operator memory left out: {d}\n");
    }
    out
}

#[cfg(test)]
#[path = "memory_tests.rs"]
mod tests;
