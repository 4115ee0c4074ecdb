//! The copies of one ObserverSet's status across member clusters (docs/multi-cluster.md, "The
//! status, replicated"): which copy a leader resumes from, which copies are behind, and when a
//! write counts as persisted. Pure; `crate::k8s::status_copies` reads and writes the copies.
//!
//! Why majorities on both sides: a write counts only once a majority of the copies accepted
//! it, and a new leader resumes only from a read that a majority answered. Two majorities share
//! a copy, so the read sees every write that counted, and a list is written only after its
//! intent counted. A write that reached a minority never reached a list, so whether the reader
//! sees it does not matter.
//!
//! Epochs order the copies of different leaderships. A new leader first claims an epoch one
//! above every epoch its majority read holds (`leaderEpoch`, on a majority, nothing else
//! changed), and only then writes rollout state under it (`writerEpoch`). A claim that reached
//! only a minority may be claimed again by the next leader, but its claimant wrote nothing under
//! it; a claim on a majority is seen by every later leader, which claims above it. So each
//! `writerEpoch` belongs to one leadership, later ones higher, and within one leadership the
//! rollout's revision and step order the copies. (Without the separate claim, a leader whose
//! first write reached a minority and a successor that did not read that copy would write two
//! different intents under one epoch and one revision: the property test below finds it.)

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

use crate::crd::{AutoPromotion, ObserverSetStatus, RolloutStep};

/// One member's copy as read.
#[derive(Clone, Debug, PartialEq)]
pub struct Copy {
    pub member: String,
    pub read: Read,
}

// At most five per read (one per member): the size of a status is no cost worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Read {
    /// The member answered: its copy's status (`None`: never written) and `resourceVersion`
    /// (`None`: the ObserverSet does not exist there).
    Answered {
        status: Option<ObserverSetStatus>,
        version: Option<String>,
    },
    /// The member did not answer; why, for status and logs.
    Unanswered(String),
}

/// How many copies make a majority of `members`.
pub fn needed(members: usize) -> usize {
    members / 2 + 1
}

/// How far a copy's writer got: (writer epoch, revision, step), a finished rollout after both
/// steps of its revision. Compared as a tuple: a later leadership first, then a later revision,
/// then a later step.
pub fn progress(status: Option<&ObserverSetStatus>) -> (i64, i64, u8) {
    let Some(s) = status else {
        return (0, 0, 0);
    };
    let step = match s.rollout.as_ref().map(|r| r.step) {
        Some(RolloutStep::Controllers) => 1,
        Some(RolloutStep::Brokers) => 2,
        None => 3,
    };
    (s.writer_epoch, s.revision, step)
}

/// What a leader resumes from.
#[derive(Clone, Debug, PartialEq)]
pub struct Recovered {
    /// The copy furthest on (`None`: no copy holds a status yet).
    pub latest: Option<ObserverSetStatus>,
    /// The member it was read from.
    pub from: String,
    /// The epoch this leadership claims: one above every epoch read (claimed or written).
    pub epoch: i64,
    /// Each answering member's `resourceVersion`: the preconditions of the next writes.
    pub versions: BTreeMap<String, Option<String>>,
    /// Answering members whose copy differs from the latest (a minority write of a former
    /// leader, a member that was away): overwritten by the next write.
    pub behind: Vec<String>,
    /// Members that did not answer, with why.
    pub unanswered: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CopiesError {
    #[error("only {answered} of {members} member clusters answered for the status of this ObserverSet ({needed} needed; {unanswered}): nothing is resumed or written until a majority answers")]
    TooFewAnswered {
        answered: usize,
        members: usize,
        needed: usize,
        unanswered: String,
    },
    #[error("the status was accepted by {accepted} of {members} member clusters ({needed} needed; {refused}): no list is written on an intent a majority does not hold")]
    TooFewAccepted {
        accepted: usize,
        members: usize,
        needed: usize,
        refused: String,
    },
}

fn describe(failures: &[(String, String)]) -> String {
    if failures.is_empty() {
        return "none failed".into();
    }
    failures
        .iter()
        .map(|(member, why)| format!("{member}: {why}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The copy a leader resumes from, once a majority of `copies` (one per member) answered.
/// Copies level in [`progress`] differ only in what their step has seen so far
/// (acknowledgements, conditions), which the next pass asks the agents again: the first in
/// member order is taken.
pub fn recover(copies: &[Copy]) -> Result<Recovered, CopiesError> {
    let mut versions = BTreeMap::new();
    let mut unanswered = Vec::new();
    let mut latest: Option<(&str, Option<&ObserverSetStatus>)> = None;
    for copy in copies {
        match &copy.read {
            Read::Unanswered(why) => unanswered.push((copy.member.clone(), why.clone())),
            Read::Answered { status, version } => {
                versions.insert(copy.member.clone(), version.clone());
                let further = latest.is_none_or(|(_, l)| progress(status.as_ref()) > progress(l));
                if further {
                    latest = Some((&copy.member, status.as_ref()));
                }
            }
        }
    }
    let needed = needed(copies.len());
    let Some((from, status)) = latest.filter(|_| versions.len() >= needed) else {
        return Err(CopiesError::TooFewAnswered {
            answered: versions.len(),
            members: copies.len(),
            needed,
            unanswered: describe(&unanswered),
        });
    };
    let behind = copies
        .iter()
        .filter(|c| match &c.read {
            Read::Answered { status: s, .. } => replicated(s.as_ref()) != replicated(status),
            Read::Unanswered(_) => false,
        })
        .map(|c| c.member.clone())
        .collect();
    let epoch = copies
        .iter()
        .filter_map(|c| match &c.read {
            Read::Answered { status, .. } => {
                status.as_ref().map(|s| s.writer_epoch.max(s.leader_epoch))
            }
            Read::Unanswered(_) => None,
        })
        .max()
        .unwrap_or(0)
        + 1;
    Ok(Recovered {
        latest: status.cloned(),
        from: from.to_string(),
        epoch,
        versions,
        behind,
        unanswered,
    })
}

/// What of a copy is replicated: all of it but `localView`, which each member's own operator
/// replica writes in its own copy (`crate::leader::view_report`), so the copies differ there by
/// design and no write of the leader makes them agree.
fn replicated(status: Option<&ObserverSetStatus>) -> Option<ObserverSetStatus> {
    status.map(|s| ObserverSetStatus {
        local_view: None,
        ..s.clone()
    })
}

/// The status holding the promotion engine's latest record (`autoPromotions`, `engineState`),
/// once a majority of `copies` answered: the newest `status.engineState.savedAt`, the first in
/// member order among equals (`None`: no copy holds any engine record yet). The engine writes
/// its fields to a majority as well (`crate::automation::replicate`), so a majority read sees
/// its last write that counted, whichever copy the rollout's state is resumed from. Marks of
/// different leaderships are ordered by their clocks: a successor writes only after it read
/// the mark it follows, so it is later unless the clocks disagree by more than the time between
/// (the restore refuses a mark more than two minutes in its future).
pub fn engine_source(copies: &[Copy]) -> Result<Option<&ObserverSetStatus>, CopiesError> {
    let answered = answered(copies);
    let needed = needed(copies.len());
    if answered.len() < needed {
        let unanswered: Vec<(String, String)> = copies
            .iter()
            .filter_map(|c| match &c.read {
                Read::Unanswered(why) => Some((c.member.clone(), why.clone())),
                Read::Answered { .. } => None,
            })
            .collect();
        return Err(CopiesError::TooFewAnswered {
            answered: answered.len(),
            members: copies.len(),
            needed,
            unanswered: describe(&unanswered),
        });
    }
    let mut newest: Option<&ObserverSetStatus> = None;
    for status in answered.into_iter().flatten() {
        if saved_at(status).is_some() && newest.is_none_or(|n| saved_at(status) > saved_at(n)) {
            newest = Some(status);
        }
    }
    Ok(newest)
}

/// The statuses of the copies that answered, in member order (`None`: a copy without status).
fn answered(copies: &[Copy]) -> Vec<Option<&ObserverSetStatus>> {
    copies
        .iter()
        .filter_map(|c| match &c.read {
            Read::Answered { status, .. } => Some(status.as_ref()),
            Read::Unanswered(_) => None,
        })
        .collect()
}

/// When the engine saved the record `status` holds, if it holds one.
fn saved_at(status: &ObserverSetStatus) -> Option<&MicroTime> {
    status.engine_state.as_ref().map(|e| &e.saved_at)
}

/// The engine's promotions the reconciler acts on over members: those of the newest record
/// (`engineState.savedAt`) whose promoted node ids a majority of all members' copies hold, so
/// that no list is written on a promotion a majority does not hold (the engine writes the other
/// members' copies before its own, whose change wakes the reconciler). `None` when no record's
/// ids are on a majority yet: the rollout's resumed copy's stand until the engine writes again.
/// Pure.
pub fn engine_promotions(copies: &[Copy]) -> Option<Vec<AutoPromotion>> {
    let answered: Vec<&ObserverSetStatus> = answered(copies).into_iter().flatten().collect();
    let ids = |s: &ObserverSetStatus| {
        let mut ids: Vec<i32> = s.auto_promotions.iter().map(|p| p.node_id).collect();
        ids.sort_unstable();
        ids
    };
    let mut records: Vec<&ObserverSetStatus> = answered
        .iter()
        .copied()
        .filter(|s| s.engine_state.is_some())
        .collect();
    // Newest first; among equal marks the first in member order (a stable sort).
    records.sort_by_key(|r| std::cmp::Reverse(saved_at(r)));
    let needed = needed(copies.len());
    records
        .into_iter()
        .find(|r| answered.iter().filter(|s| ids(s) == ids(r)).count() >= needed)
        .map(|r| r.auto_promotions.clone())
}

/// The later epoch `status` shows when a leadership that claimed `claimed` reads it: another
/// leadership claimed or wrote after this one, which therefore no longer leads, whatever its
/// Lease says (a process paused past its term resumes with its old conclusion). `None`: not
/// claimed yet, or no later epoch.
pub fn later_epoch(claimed: Option<i64>, status: &ObserverSetStatus) -> Option<i64> {
    let seen = status.writer_epoch.max(status.leader_epoch);
    claimed.filter(|ours| seen > *ours).map(|_| seen)
}

/// The claim's only field, `leaderEpoch` (sent under a field manager of its own, so that the
/// rollout state's manager keeps its fields).
pub fn claim(epoch: i64) -> serde_json::Value {
    crate::writers::status_body(serde_json::json!({ "leaderEpoch": epoch }))
}

/// Whether a write that `accepted` members took (of `members`) counts: a majority.
pub fn persisted(
    members: usize,
    accepted: usize,
    refused: &[(String, String)],
) -> Result<(), CopiesError> {
    let needed = needed(members);
    if accepted >= needed {
        return Ok(());
    }
    Err(CopiesError::TooFewAccepted {
        accepted,
        members,
        needed,
        refused: describe(refused),
    })
}

#[cfg(test)]
#[path = "copies_tests.rs"]
mod tests;
