//! Kubernetes Events on the ObserverSet: every change of the effective set, each rollout step,
//! timeouts and refusals. Publishing is best effort: a lost event never fails a reconcile.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::Client;

use crate::writers;

/// Reason strings (PascalCase, as `kubectl describe` shows them).
pub mod reason {
    /// The effective observer set changed: a new revision starts rolling out.
    pub const ROLLOUT_STARTED: &str = "RolloutStarted";
    /// One role's ConfigMap was written and its pods nudged.
    pub const STEP_WRITTEN: &str = "ObserverListWritten";
    /// Every pod of a role acknowledged the revision.
    pub const STEP_ACKNOWLEDGED: &str = "RoleAcknowledged";
    /// The whole rollout is done.
    pub const ROLLOUT_COMPLETE: &str = "RolloutComplete";
    /// A step was not acknowledged within `rollout.timeout`.
    pub const ROLLOUT_TIMED_OUT: &str = "RolloutTimedOut";
    /// A ConfigMap was edited or deleted by someone else and restored.
    pub const DRIFT_RESTORED: &str = "DriftRestored";
    /// The spec or the selected pods cannot be used.
    pub const INVALID: &str = "Invalid";
    /// An older ObserverSet selects the same pods; this one stands aside.
    pub const CONFLICT: &str = "Conflict";
    /// Deletion waits: pods still mount the ConfigMaps (deletionPolicy Delete).
    pub const DELETION_BLOCKED: &str = "DeletionBlocked";
    /// Deletion finished (ConfigMaps retained or deleted).
    pub const CLEANED_UP: &str = "CleanedUp";
    /// A reconcile failed; the note has the error.
    pub const RECONCILE_FAILED: &str = "ReconcileFailed";
}

/// The Event `action` of the reconciler (rollouts, drift, deletion).
pub const RECONCILE: &str = "Reconcile";
/// The Event `action` of the promotion automation.
pub const AUTOMATE: &str = "Automate";

/// Publishes events about ObserverSets, for both loops: one reporting controller, one instance
/// name (this replica's Lease identity).
#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
}

impl Events {
    pub fn new(client: Client, instance: Option<String>) -> Self {
        let reporter = Reporter {
            controller: writers::OPERATOR.into(),
            instance,
        };
        Events {
            recorder: Recorder::new(client, reporter),
        }
    }

    pub async fn normal(&self, regarding: &ObjectReference, reason: &str, note: String) {
        self.publish(regarding, EventType::Normal, reason, RECONCILE, note)
            .await
    }

    pub async fn warning(&self, regarding: &ObjectReference, reason: &str, note: String) {
        self.publish(regarding, EventType::Warning, reason, RECONCILE, note)
            .await
    }

    /// One Event about `regarding`; `action` says which loop acted ([`RECONCILE`] or
    /// [`AUTOMATE`]). Best effort: a failure is logged, never returned.
    pub async fn publish(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        // Event notes are limited to 1 KiB by the API server.
        let note: String = note.chars().take(1000).collect();
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: action.into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, regarding).await {
            tracing::warn!(error = %e, reason, "could not publish event");
        }
    }
}
