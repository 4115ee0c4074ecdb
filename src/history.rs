//! `status.history`: the last automatic and manual actions, bounded (pure).
//!
//! Two loops write it, each under its own server-side-apply field manager: the automation its
//! `who: automation` entries, the reconciler the spec changes it rolls out. The CRD declares the
//! list a map keyed by (`at`, `nodeId`, `action`, `who`), so the apiserver merges the two
//! writers' entries instead of letting the last apply replace the list; each writer therefore
//! sends only its own entries ([`own`]). A writer that omits an entry it owns removes it: that is
//! how the cap is enforced, each writer trimming its own entries that fell out of the newest
//! [`LIMIT`] of the whole history it sees.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use k8s_openapi::jiff::Timestamp;

use crate::crd::{EngineActionKind, HistoryEntry, NodeId};
use crate::time_format::to_micro;

/// Entries kept: the newest 20 of both writers together. Until the other writer trims its own
/// entries on its next write, the status may briefly hold up to twice as many.
pub const LIMIT: usize = 20;
/// `who` of the automation's entries.
pub const AUTOMATION: &str = "automation";
/// `who` of a manual entry when `metadata.managedFields` names nobody for the field.
pub const SPEC: &str = "spec";
/// Reasons longer than this are cut (with "..."): the engine's reasons name at most three
/// partitions, so this only bounds pathological topic names.
pub const REASON_MAX: usize = 512;

/// Whether the entry is the automation's (else the reconciler's: a spec change).
pub fn is_automatic(e: &HistoryEntry) -> bool {
    e.who == AUTOMATION
}

/// A new entry, its reason bounded.
pub fn entry(
    at: Timestamp,
    action: EngineActionKind,
    node_id: NodeId,
    reason: &str,
    who: &str,
) -> HistoryEntry {
    let reason = if reason.chars().count() > REASON_MAX {
        let cut: String = reason.chars().take(REASON_MAX - 3).collect();
        cut + "..."
    } else {
        reason.to_owned()
    };
    HistoryEntry {
        at: to_micro(at),
        action,
        node_id,
        reason,
        who: who.to_owned(),
    }
}

type Key = (i64, NodeId, EngineActionKind, String);

fn key(e: &HistoryEntry) -> Key {
    (e.at.0.as_microsecond(), e.node_id, e.action, e.who.clone())
}

/// Newest first; ties broken by the rest of the key so the order is total.
fn newest_first(a: &HistoryEntry, b: &HistoryEntry) -> std::cmp::Ordering {
    key(b).cmp(&key(a))
}

/// The history after adding `new` to `current` (the whole history as read, both writers'
/// entries): newest first, at most [`LIMIT`] entries, no two with the same key. A new entry
/// that repeats the newest entry of its node from the same writer (same action and reason:
/// a leader election the engine retries every scan) is not added again.
pub fn record(current: &[HistoryEntry], new: Vec<HistoryEntry>) -> Vec<HistoryEntry> {
    let mut all: Vec<HistoryEntry> = current.to_vec();
    all.sort_by(newest_first);
    for e in new {
        let latest_of_node = all
            .iter()
            .filter(|o| o.node_id == e.node_id && is_automatic(o) == is_automatic(&e))
            .max_by(|a, b| newest_first(b, a));
        if latest_of_node.is_some_and(|o| o.action == e.action && o.reason == e.reason) {
            continue;
        }
        all.push(e);
        all.sort_by(newest_first);
    }
    let mut seen = BTreeSet::new();
    all.retain(|e| seen.insert(key(e)));
    all.truncate(LIMIT);
    all
}

/// The entries of `history` one writer sends: the automation's or the reconciler's.
pub fn own(history: &[HistoryEntry], automatic: bool) -> Vec<HistoryEntry> {
    history
        .iter()
        .filter(|e| is_automatic(e) == automatic)
        .cloned()
        .collect()
}

/// The newest entry (what `status.lastAction` shows).
pub fn newest(history: &[HistoryEntry]) -> Option<HistoryEntry> {
    history.iter().min_by(|a, b| newest_first(a, b)).cloned()
}

/// Which spec field a manual change went through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecField {
    Observers,
    Promoted,
}

impl SpecField {
    fn path(self) -> &'static [&'static str] {
        match self {
            SpecField::Observers => &["f:spec", "f:observers"],
            SpecField::Promoted => &["f:spec", "f:promotion", "f:promoted"],
        }
    }
}

/// The field manager that last wrote `field` of the spec, from `metadata.managedFields`: among
/// the main-resource entries (not `status`) whose `fieldsV1` holds the field, the newest. `None`
/// when no entry holds it (an object created without managed fields, or a field nobody set).
pub fn spec_manager(managed: &[ManagedFieldsEntry], field: SpecField) -> Option<String> {
    managed
        .iter()
        .filter(|m| m.subresource.as_deref().unwrap_or("").is_empty())
        .filter(|m| {
            let mut node = m.fields_v1.as_ref().map(|f| &f.0);
            for step in field.path() {
                node = node.and_then(|n| n.get(step));
            }
            node.is_some()
        })
        .max_by_key(|m| m.time.as_ref().map(|t| t.0))
        .and_then(|m| m.manager.clone())
}

/// A spec change the reconciler rolls out: the ids that left and joined the effective set.
#[derive(Clone, Debug)]
pub struct SpecChange<'a> {
    /// `status.desiredObservers` before.
    pub before: &'a [NodeId],
    /// The desired set now.
    pub after: &'a BTreeSet<NodeId>,
    /// `spec.promotion.promoted` now.
    pub promoted: &'a BTreeSet<NodeId>,
    /// `status.autoPromotions` now: ids that left the set by the automation's doing.
    pub auto_promoted: &'a BTreeSet<NodeId>,
    pub managed: &'a [ManagedFieldsEntry],
}

/// The manual entries for a change of the desired set (pure). An id that left it is a manual
/// promotion unless it is automatically promoted; an id that joined it is a manual demotion
/// unless the newest history entry of that id is the automation's demotion (the automation
/// writes that entry with the status change the reconciler is rolling out).
pub fn manual_entries(
    change: &SpecChange,
    history: &[HistoryEntry],
    now: Timestamp,
) -> Vec<HistoryEntry> {
    let before: BTreeSet<NodeId> = change.before.iter().copied().collect();
    let who = |field| spec_manager(change.managed, field).unwrap_or_else(|| SPEC.to_owned());
    let mut out = Vec::new();
    for &id in before.difference(change.after) {
        if change.auto_promoted.contains(&id) {
            continue;
        }
        let (reason, field) = if change.promoted.contains(&id) {
            (
                "spec change: listed in spec.promotion.promoted",
                SpecField::Promoted,
            )
        } else {
            (
                "spec change: no longer in spec.observers",
                SpecField::Observers,
            )
        };
        out.push(entry(
            now,
            EngineActionKind::Promote,
            id,
            reason,
            &who(field),
        ));
    }
    for &id in change.after.difference(&before) {
        let newest_of_id = history
            .iter()
            .filter(|e| e.node_id == id)
            .min_by(|a, b| newest_first(a, b));
        if newest_of_id.is_some_and(|e| is_automatic(e) && e.action == EngineActionKind::Demote) {
            continue;
        }
        let by_promoted = newest_of_id.is_some_and(|e| {
            !is_automatic(e)
                && e.action == EngineActionKind::Promote
                && e.reason.contains("promoted")
        });
        // Joining the set means it is in spec.observers and not promoted: either it was
        // promoted by hand before, or it is newly declared.
        let (reason, field) = if by_promoted {
            (
                "spec change: removed from spec.promotion.promoted",
                SpecField::Promoted,
            )
        } else {
            (
                "spec change: listed in spec.observers",
                SpecField::Observers,
            )
        };
        out.push(entry(
            now,
            EngineActionKind::Demote,
            id,
            reason,
            &who(field),
        ));
    }
    out
}

#[cfg(test)]
#[path = "history_tests.rs"]
mod tests;
