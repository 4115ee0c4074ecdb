//! Kubernetes Events on the ObserverSet: every change of the effective set, each rollout step,
//! timeouts and refusals. Publishing is best effort: a lost event never fails a reconcile.
//!
//! kube-runtime's `Recorder` folds every Event with the same type, reason and action about the
//! same object into one series for six minutes and keeps the *first* note: a second
//! `PromotionHeldBack` saying "lags 4000 messages" would only bump the count of an earlier one
//! saying "confirmed by 1 of 2 scans". client-go's events/v1 recorder keys on the note too, and
//! so does this module: one `Recorder` per distinct (reason, note), so only identical
//! repetitions become a series, and a changed note is a new Event.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::Api;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};

use crate::crd::ObserverSet;
use crate::k8s::members::MemberClients;
use crate::metrics::{Metrics, ObserverSetLabels};
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
    /// A promotion's step went on without running pods that cannot be reached (node not Ready,
    /// terminating, gone from Kafka); the note names them and why.
    pub const STEP_WENT_ON_WITHOUT: &str = "StepWentOnWithout";
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
    /// Over members: a member cluster's copy, pods or ConfigMaps did not answer the leader.
    pub const MEMBER_UNREACHABLE: &str = "MemberUnreachable";
    /// Over members: a member cluster not reached before answers again.
    pub const MEMBER_RETURNED: &str = "MemberReturned";
    /// Over members: this member's operator replica sees no one holding a majority of the
    /// Leases it reaches (`leader::view_report`).
    pub const NO_AUTHORITY: &str = "NoAuthority";
    /// Over members: after `NoAuthority`, a majority holder is in sight again.
    pub const AUTHORITY_VISIBLE: &str = "AuthorityVisible";
}

/// The Event `action` of the reconciler (rollouts, drift, deletion).
pub const RECONCILE: &str = "Reconcile";
/// The Event `action` of the promotion automation.
pub const AUTOMATE: &str = "Automate";
/// The Events of a replica's view of the leadership (`leader::view_report`).
pub const CAMPAIGN: &str = "Campaign";

/// How long a (reason, note) keeps its recorder after its last use: the `Recorder`'s own series
/// window, after which it would start a new Event anyway.
const RECORDER_TTL: Duration = Duration::from_secs(6 * 60);

/// Most (reason, note) recorders kept at once, whatever the TTL says.
const MAX_RECORDERS: usize = 1024;

/// The API server refuses an Event whose note is over 1 KiB (bytes, not characters).
const MAX_NOTE_BYTES: usize = 1000;

/// The note cut to [`MAX_NOTE_BYTES`] at a character boundary.
fn bounded_note(mut note: String) -> String {
    if note.len() > MAX_NOTE_BYTES {
        let mut end = MAX_NOTE_BYTES;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
    }
    note
}

/// A recorder per (reason, note), with when it was last used.
type Recorders = HashMap<(String, String), (Recorder, Instant)>;

/// Publishes events about ObserverSets, for both loops: one reporting controller, one instance
/// name (this replica's Lease identity). The one path every Event takes, so every one is
/// counted in `kafka_observer_events_total`.
#[derive(Clone)]
pub struct Events {
    client: Client,
    reporter: Reporter,
    metrics: Metrics,
    /// Whether `kafka_observer_events_total` counts what this publisher sends: not for the
    /// copies of an Event sent to the other member clusters ([`Events::copies_to`]), counted
    /// once where the leader runs.
    counted: bool,
    /// One recorder per (reason, note) published within [`RECORDER_TTL`], with its last use.
    recorders: Arc<Mutex<Recorders>>,
}

impl Events {
    pub fn new(client: Client, instance: Option<String>, metrics: Metrics) -> Self {
        Events {
            client,
            reporter: Reporter {
                controller: writers::OPERATOR.into(),
                instance,
            },
            metrics,
            counted: true,
            recorders: Arc::default(),
        }
    }

    /// A publisher through `client` (another member cluster's) that sends the same Events
    /// under the same reporter and counts none of them.
    pub fn copies_to(&self, client: Client) -> Self {
        Events {
            client,
            reporter: self.reporter.clone(),
            metrics: self.metrics.clone(),
            counted: false,
            recorders: Arc::default(),
        }
    }

    /// The recorder for this (reason, note): the one that published it last (so a repetition
    /// joins that Event's series) or a new one; forgets those unused for [`RECORDER_TTL`].
    fn recorder(&self, reason: &str, note: &str, now: Instant) -> Recorder {
        let mut recorders = self.recorders.lock().unwrap_or_else(|e| e.into_inner());
        recorders.retain(|_, (_, used)| now.duration_since(*used) < RECORDER_TTL);
        let key = (reason.to_string(), note.to_string());
        if recorders.len() >= MAX_RECORDERS && !recorders.contains_key(&key) {
            // Notes come from tenants' specs and clusters: a stream of distinct ones must not
            // grow the map without bound. The least recently used series ends early.
            if let Some(oldest) = recorders
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone())
            {
                recorders.remove(&oldest);
            }
        }
        let (recorder, used) = recorders.entry(key).or_insert_with(|| {
            (
                Recorder::new(self.client.clone(), self.reporter.clone()),
                now,
            )
        });
        *used = now;
        recorder.clone()
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
    /// [`AUTOMATE`]). Counted whether or not the apiserver takes it (the count is of what
    /// the operator had to say). Best effort: a failure is logged, never returned.
    pub async fn publish(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        if self.counted {
            self.metrics.event_published(
                &ObserverSetLabels::new(
                    regarding.namespace.as_deref().unwrap_or_default(),
                    regarding.name.as_deref().unwrap_or_default(),
                ),
                reason,
            );
        }
        let note = bounded_note(note);
        let recorder = self.recorder(reason, &note, Instant::now());
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: action.into(),
            secondary: None,
        };
        if let Err(e) = recorder.publish(&event, regarding).await {
            tracing::warn!(error = %e, reason, "could not publish event");
        }
    }
}

/// The other member clusters' Event publishers (each [`Events::copies_to`] its client): an
/// Event about an ObserverSet goes to every member's copy of it too, so that each cluster's users
/// see it in `kubectl describe` there. Empty in a single-cluster install.
#[derive(Clone, Default)]
pub struct MemberEvents {
    members: Vec<(String, Client, Events)>,
}

impl MemberEvents {
    /// One publisher per remote member of `members` (the local one has `events` itself).
    pub fn new(events: &Events, members: Option<&MemberClients>) -> Self {
        let Some(members) = members else {
            return Self::default();
        };
        MemberEvents {
            members: members
                .clients
                .iter()
                .filter(|(member, _, granted)| granted.is_some() && *member != members.local)
                .map(|(member, client, _)| {
                    (
                        member.clone(),
                        client.clone(),
                        events.copies_to(client.clone()),
                    )
                })
                .collect(),
        }
    }

    /// Sends `notes` (type, reason, note) about the set `namespace/name` to each other member's
    /// copy, in the background: best effort, as every Event (a member that does not answer holds
    /// up nothing and misses them). Each copy is read first for its uid, which `kubectl
    /// describe` matches Events on.
    pub fn send(
        &self,
        namespace: &str,
        name: &str,
        action: &'static str,
        notes: &[(EventType, String, String)],
    ) {
        if notes.is_empty() {
            return;
        }
        for (member, client, events) in &self.members {
            let api: Api<ObserverSet> = Api::namespaced(client.clone(), namespace);
            let (member, events, name, notes) = (
                member.clone(),
                events.clone(),
                name.to_string(),
                notes.to_vec(),
            );
            tokio::spawn(async move {
                let copy = match api.get_opt(&name).await {
                    Ok(Some(copy)) => copy,
                    Ok(None) => return,
                    Err(error) => {
                        tracing::debug!(%error, member, "the member's copy was not read for its Events");
                        return;
                    }
                };
                let reference = copy.object_ref(&());
                for (type_, reason, note) in notes {
                    events
                        .publish(&reference, type_, &reason, action, note)
                        .await;
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events() -> Events {
        // Never contacted: the test only looks at which recorder a note gets.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        Events::new(
            Client::try_from(config).unwrap(),
            Some("pod-0".into()),
            Metrics::new(),
        )
    }

    #[tokio::test]
    async fn every_event_is_counted_by_its_set_and_reason_even_one_the_apiserver_refuses() {
        let metrics = Metrics::new();
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let events = Events::new(Client::try_from(config).unwrap(), None, metrics.clone());
        let regarding = ObjectReference {
            namespace: Some("team-a".into()),
            name: Some("orders".into()),
            ..Default::default()
        };
        for reason in ["AutoPromoted", "AutoPromoted", "RolloutStarted"] {
            events
                .publish(&regarding, EventType::Normal, reason, AUTOMATE, "x".into())
                .await;
        }
        let text = metrics.render();
        let series = |reason: &str| {
            format!("kafka_observer_events_total{{namespace=\"team-a\",observerset=\"orders\",reason=\"{reason}\"}}")
        };
        assert!(
            text.contains(&format!("{} 2", series("AutoPromoted"))),
            "{text}"
        );
        assert!(
            text.contains(&format!("{} 1", series("RolloutStarted"))),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_new_note_gets_its_own_recorder_and_a_repeated_one_the_same() {
        let (events, now) = (events(), Instant::now());
        events.recorder("PromotionHeldBack", "confirmed by 1 of 2 scans", now);
        events.recorder("PromotionHeldBack", "confirmed by 1 of 2 scans", now);
        assert_eq!(
            events.recorders.lock().unwrap().len(),
            1,
            "a repetition joins the series"
        );
        events.recorder("PromotionHeldBack", "observer 4 lags 4000 messages", now);
        events.recorder("AutomationFailed", "confirmed by 1 of 2 scans", now);
        assert_eq!(
            events.recorders.lock().unwrap().len(),
            3,
            "another note or reason: another Event"
        );
    }

    #[test]
    fn notes_are_cut_to_the_api_servers_limit_in_bytes_at_a_character_boundary() {
        let short = "observer 4 lags".to_string();
        assert_eq!(bounded_note(short.clone()), short);
        // 600 three-byte characters: 1800 bytes, under 1000 characters.
        let wide = "\u{20ac}".repeat(600);
        let cut = bounded_note(wide);
        assert!(cut.len() <= MAX_NOTE_BYTES, "{} bytes", cut.len());
        assert_eq!(cut.len(), 999, "333 whole characters");
        assert!(cut.chars().all(|c| c == '\u{20ac}'));
    }

    #[tokio::test]
    async fn distinct_notes_never_keep_more_than_the_cap_of_recorders() {
        let (events, now) = (events(), Instant::now());
        for i in 0..MAX_RECORDERS + 50 {
            events.recorder(
                "A",
                &format!("note {i}"),
                now + Duration::from_millis(i as u64),
            );
        }
        let recorders = events.recorders.lock().unwrap();
        assert_eq!(recorders.len(), MAX_RECORDERS);
        assert!(
            !recorders.contains_key(&("A".to_string(), "note 0".to_string())),
            "the least recently used went first"
        );
        assert!(recorders.contains_key(&("A".to_string(), format!("note {}", MAX_RECORDERS + 49))));
    }

    #[tokio::test]
    async fn recorders_unused_for_the_series_window_are_forgotten() {
        let (events, now) = (events(), Instant::now());
        events.recorder("A", "old", now);
        events.recorder("A", "recent", now + RECORDER_TTL / 2);
        events.recorder("A", "new", now + RECORDER_TTL + Duration::from_secs(1));
        let recorders = events.recorders.lock().unwrap();
        let mut notes: Vec<&str> = recorders.keys().map(|(_, n)| n.as_str()).collect();
        notes.sort();
        assert_eq!(notes, ["new", "recent"]);
    }
}
