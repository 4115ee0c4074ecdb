//! Over member clusters, the engine's record (`status.autoPromotions`, `plan`, `engineState`,
//! its `history` entries, `partitions`) goes to every member's copy of the ObserverSet, not only
//! to the copy of the member the leader runs in: a successor in another member restores from the
//! newest record a majority holds (`crate::reconciler::copies::engine_source`), and so does the
//! reconciler when it derives the effective set. A record counts once a majority of the copies
//! took it; short of that the scan reports an error and the next one writes again.
//!
//! Each remote copy is written on the `resourceVersion` just read from it, so a write never lands
//! on a copy that moved in between unexamined (the engine's local write has its own precondition
//! and rebase, `super::status_write`).

use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::Value;

use super::status_write;
use crate::crd::ObserverSet;
use crate::k8s::error::brief;
use crate::reconciler::copies::{self, CopiesError};
use crate::reconciler::members::{CopyRead, MemberApis};

/// What each remote member did with the record: `Err` says why it did not take it.
pub type Replies = Vec<(String, Result<(), String>)>;

/// Why a member's answer was not waited for.
pub const NOT_AWAITED: &str = "not awaited: a majority answered first";

/// Writes `body` (the engine's server-side-apply body) to `name` in every member of `remotes`,
/// in parallel, each on the version just read there; returns once the record would count with
/// the local copy's (a majority of all members) or every member answered. A lost member costs its
/// client's connect timeout only when the record cannot count without it.
pub async fn to_members(remotes: &[MemberApis], name: &str, body: &Value) -> Replies {
    // Each write in a task of its own: the ones not awaited still finish (within their client's
    // timeouts), so every member that answers ends up with the record.
    let (sender, mut answers) = tokio::sync::mpsc::unbounded_channel();
    for m in remotes {
        let (m, name, body, sender) = (m.clone(), name.to_string(), body.clone(), sender.clone());
        tokio::spawn(async move {
            // A copy that moved between the read and the write (the reconciler writes its own
            // fields there too) is read and written once more.
            let mut result = write_on_fresh(&m, &name, &body).await;
            if matches!(&result, Err((true, _))) {
                result = write_on_fresh(&m, &name, &body).await;
            }
            // The receiver is gone once a majority answered: nobody waits for this one.
            let _ = sender.send((m.member.clone(), result.map_err(|(_, why)| why)));
        });
    }
    drop(sender);
    let mut replies = Vec::new();
    while let Some(reply) = answers.recv().await {
        replies.push(reply);
        if counted(&replies, remotes.len()).is_ok() {
            break;
        }
    }
    for m in remotes {
        if !replies.iter().any(|(r, _)| r == &m.member) {
            replies.push((m.member.clone(), Err(NOT_AWAITED.to_string())));
        }
    }
    replies
}

/// `body` applied to `name` in member `m` on the `resourceVersion` just read there; `Err`
/// says whether the copy moved in between (409) and why it failed.
async fn write_on_fresh(m: &MemberApis, name: &str, body: &Value) -> Result<(), (bool, String)> {
    let copy = match m.sets.get_opt(name).await {
        Ok(Some(copy)) => copy,
        Ok(None) => {
            return Err((
                false,
                "the ObserverSet does not exist in this member".to_string(),
            ))
        }
        Err(e) => return Err((false, brief(&e))),
    };
    let version = copy.metadata.resource_version.clone();
    status_write::apply(&m.sets, name, body, version.as_deref())
        .await
        .map(|_| ())
        .map_err(|e| (status_write::superseded(&e), brief(&e)))
}

/// Whether a record counts with the local copy's, given the remote `replies` so far out of
/// `remotes` members: a majority of all members, the local one included. Pure.
pub fn counted(replies: &Replies, remotes: usize) -> Result<(), CopiesError> {
    let refused: Vec<(String, String)> = replies
        .iter()
        .filter_map(|(m, r)| r.as_ref().err().map(|why| (m.clone(), why.clone())))
        .collect();
    let accepted = 1 + replies.len() - refused.len();
    copies::persisted(remotes + 1, accepted, &refused)
}

/// Every member's copy of `name` read in parallel until a majority answered (or all did): what
/// the engine restores from. Two majorities share a copy, so the newest record that counted is
/// among the answers (`copies::engine_source`); a member not waited for reads as unanswered.
pub async fn read_majority(apis: &[MemberApis], name: &str) -> Vec<CopyRead> {
    let needed = copies::needed(apis.len());
    let mut pending: FuturesUnordered<_> = apis
        .iter()
        .map(|a| async move {
            let read: Result<Option<ObserverSet>, String> =
                a.sets.get_opt(name).await.map_err(|e| brief(&e));
            (a.member.clone(), read)
        })
        .collect();
    let mut reads: Vec<CopyRead> = Vec::new();
    while let Some(read) = pending.next().await {
        reads.push(read);
        if reads.iter().filter(|(_, r)| r.is_ok()).count() >= needed {
            break;
        }
    }
    apis.iter()
        .map(|a| {
            reads
                .iter()
                .find(|(m, _)| m == &a.member)
                .cloned()
                .unwrap_or_else(|| (a.member.clone(), Err(NOT_AWAITED.to_string())))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(member: &str, ok: bool) -> (String, Result<(), String>) {
        let result = if ok {
            Ok(())
        } else {
            Err("connect timeout".into())
        };
        (member.to_string(), result)
    }

    #[test]
    fn a_record_counts_on_a_majority_with_the_local_copy() {
        assert!(counted(&vec![reply("west", true), reply("tie", false)], 2).is_ok());
        assert!(counted(&vec![reply("west", false), reply("tie", true)], 2).is_ok());
        // One answer of two so far, accepted: already a majority with the local copy.
        assert!(counted(&vec![reply("tie", true)], 2).is_ok());
        assert!(counted(&vec![reply("tie", false)], 2).is_err());
        let short = counted(&vec![reply("west", false), reply("tie", false)], 2).unwrap_err();
        let text = short.to_string();
        assert!(
            text.contains("accepted by 1 of 3") && text.contains("west: connect timeout"),
            "{text}"
        );
        // Five members: the local copy and two others.
        let five = vec![
            reply("b", true),
            reply("c", true),
            reply("d", false),
            reply("e", false),
        ];
        assert!(counted(&five, 4).is_ok());
        let five = vec![
            reply("b", true),
            reply("c", false),
            reply("d", false),
            reply("e", false),
        ];
        assert!(counted(&five, 4).is_err());
        // Five members, two remote answers so far, one accepted: not yet.
        assert!(counted(&vec![reply("b", true), reply("c", false)], 4).is_err());
    }
}
