//! The engine's status write on the copy it decided on: `status.autoPromotions`, `plan`,
//! `engineState`, `history` and `partitions` applied with the `resourceVersion` of the
//! ObserverSet the scan decided from, so that a write decided on an old copy never lands
//! unexamined.
//!
//! Why: the fence (`crate::k8s::fence`) keeps a paused replica's writes in the process, but a
//! write sent just before a pause can still arrive after a successor's; and the watch copy a
//! step decides on may be older than what is stored. On a lost precondition (409) the task reads
//! the status once and writes again on that copy only when [`rebase`] says the decision still
//! holds on it; otherwise nothing is recorded and the next scan decides again.

use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use serde_json::Value;

use crate::crd::ObserverSet;
pub use crate::k8s::status::{superseded, with_version};
use crate::writers;

/// Server-side apply of the engine's `body` (field manager [`writers::AUTOMATION_STATUS`]),
/// onto `expected` when given (the apiserver answers 409 when the object moved on). Returns
/// the new `resourceVersion`.
pub async fn apply(
    api: &Api<ObserverSet>,
    name: &str,
    body: &Value,
    expected: Option<&str>,
) -> Result<Option<String>, kube::Error> {
    let written = api
        .patch_status(
            name,
            &PatchParams::apply(writers::AUTOMATION_STATUS).force(),
            &Patch::Apply(&with_version(body, expected)),
        )
        .await?;
    Ok(written.metadata.resource_version)
}

/// `status.engineState.savedAt` of a copy: whose engine state it holds ([`rebase`]).
pub fn engine_mark(obs: &ObserverSet) -> Option<Timestamp> {
    obs.status
        .as_ref()
        .and_then(|s| s.engine_state.as_ref())
        .map(|s| s.saved_at.0)
}

/// Why a decision cannot be written onto a fresher copy.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Stale {
    /// The spec changed: the decision's inputs (observers, policy, promotions by hand) did.
    #[error("the spec changed since the scan's copy (generation {decided:?} -> {stored:?})")]
    SpecChanged {
        decided: Option<i64>,
        stored: Option<i64>,
    },
    /// Someone else wrote the engine's fields: another replica's engine (a former leader's
    /// late write, or a successor's), whose memory this task does not have.
    #[error("another writer of the promotion engine's fields wrote status.engineState (saved at {stored:?}; this replica last knew {known:?}): another operator replica acts or acted on this ObserverSet")]
    OtherEngine {
        known: Option<Timestamp>,
        stored: Option<Timestamp>,
    },
    /// The fresh copy moved on again before the second write landed.
    #[error("the status moved on again while it was written a second time")]
    Raced,
}

/// Whether the decision made on a copy of generation `decided` may be written onto a fresher
/// copy of generation `stored` whose `status.engineState.savedAt` is `stored_mark`, given that
/// this task last wrote (or found) `known_mark`. Pure. The reconciler's status fields may
/// move in between (it writes its own; the engine's decision does not read them).
pub fn rebase(
    decided: Option<i64>,
    stored: Option<i64>,
    known_mark: Option<Timestamp>,
    stored_mark: Option<Timestamp>,
) -> Result<(), Stale> {
    if decided != stored {
        return Err(Stale::SpecChanged { decided, stored });
    }
    if known_mark != stored_mark {
        return Err(Stale::OtherEngine {
            known: known_mark,
            stored: stored_mark,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(s: i64) -> Option<Timestamp> {
        Some(Timestamp::from_second(s).unwrap())
    }

    #[test]
    fn the_version_goes_into_the_body_only_when_given() {
        let body = json!({"apiVersion": "v", "kind": "ObserverSet", "status": {"plan": []}});
        assert_eq!(with_version(&body, None), body);
        let versioned = with_version(&body, Some("42"));
        assert_eq!(versioned["metadata"]["resourceVersion"], "42");
        assert_eq!(versioned["status"], body["status"]);
    }

    #[test]
    fn only_a_conflict_is_a_superseded_write() {
        let status = |code: u16| {
            kube::Error::Api(Box::new(
                serde_json::from_value(json!({"status": "Failure", "code": code})).unwrap(),
            ))
        };
        assert!(superseded(&status(409)));
        assert!(!superseded(&status(422)));
        assert!(!superseded(&kube::Error::LinesCodecMaxLineLengthExceeded));
    }

    #[test]
    fn a_fresher_copy_takes_the_decision_only_when_nothing_it_rests_on_moved() {
        // Only the reconciler wrote (or the watch lagged behind our own write): write again.
        assert_eq!(rebase(Some(3), Some(3), t(10), t(10)), Ok(()));
        assert_eq!(rebase(Some(3), Some(3), None, None), Ok(()));
        // A spec edit: decide again on it.
        assert!(matches!(
            rebase(Some(3), Some(4), t(10), t(10)),
            Err(Stale::SpecChanged { .. })
        ));
        // Another engine wrote its state since ours (a former leader's late write, or a
        // successor's): never overwrite it with a decision made without its memory.
        assert!(matches!(
            rebase(Some(3), Some(3), t(10), t(11)),
            Err(Stale::OtherEngine { .. })
        ));
        assert!(matches!(
            rebase(Some(3), Some(3), None, t(11)),
            Err(Stale::OtherEngine { .. })
        ));
    }
}
