//! The rollout state machine: from the persisted state, the desired set and what the cluster
//! shows, decide the next writes, nudges and the new state. Pure; the whole state lives in
//! `status`, so re-running from the persisted state after a crash or restart resumes exactly
//! where the previous run stopped.
//!
//! Rules (docs/api.md, "Rollout order"):
//! - A change of the effective set allocates a new revision `n` and rolls out role by role in
//!   [`Role::ROLLOUT_ORDER`]: controllers first, then brokers, for promotion, demotion and mixed
//!   changes alike. A role's ConfigMap is written with `n` only once every running pod of the
//!   previous role acknowledged `n` (or, in a promotion, was excused as unreachable: below).
//! - A change of the desired set during a rollout supersedes it: a new revision `n+1` starts
//!   again from the controllers' step. A role never learns a revision before the roles ahead of
//!   it have acknowledged that same revision.
//! - A promotion whose every list a pod may hold contains its target may go on without a running
//!   pod that cannot be reached (node not Ready, terminating, or gone from Kafka, while its agent
//!   is silent: [`super::unreachable`]). Such a pod is neither acknowledged nor pending but
//!   `excused`, still nudged, and waited for again as soon as its agent answers. Demotions and
//!   mixed changes wait for every running pod.
//! - A step that is not acknowledged within the timeout marks the rollout timed out (phase
//!   Degraded, naming the pending pods) and keeps waiting: moving on would skip the safety.
//! - A step is acknowledged only by a decision that found its ConfigMap already in place (never
//!   by the decision that writes it), so the persisted "acknowledged" never runs ahead of the
//!   API. The shell may decide again at once on [`applied`] (what the API holds once a
//!   decision's writes and nudges succeeded): a step with nothing to wait for then moves on in
//!   the same reconcile instead of a pass later.
//! - Outside the current step, each role's ConfigMap is kept at the revision and content the
//!   status records for it (drift is restored); a drifted role ahead of the current step sends
//!   the rollout back to that role's step. Writes are ordered controllers first. Nothing is ever
//!   deleted, and a list is empty only when the set it carries is empty.
//! - Across member clusters (docs/multi-cluster.md), a role is its ConfigMap and pods in every
//!   member: a step writes every member's list and waits for every member's running pods. An
//!   unreachable member gets no writes and no nudges; its last-known pods count as running
//!   (excused in a promotion only by the rule above) and its lists as unknown, so it never
//!   counts as drifted and never holds a step by its list alone. A demotion or mixed change
//!   does not start, and one in flight takes no step, while any member is unreachable. A member
//!   that answers again is read like any other: a role ahead of the step whose list there is
//!   old sends the rollout back to that role's step, so it gets the current lists controllers
//!   first before its brokers count.
//!
//! The property tests in `tests.rs` drive this against the cluster model in `simulation.rs`.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;

use super::effective::rollout_kind;
use super::model::*;
use super::unreachable::{excuse, may_excuse};
use crate::crd::{AckMode, ExcusedPod, NodeId, Role, RoleStatus, RolloutKind, RolloutStatus};
use crate::observer_ids::{self, Header};

/// A pod still pending this long after its last nudge is nudged again: a kubelet may have
/// synced the pod before its ConfigMap cache saw the new content.
pub const RENUDGE_AFTER: Duration = Duration::from_secs(10);

/// The acknowledgement the current step waits for, if a rollout is in flight.
pub fn awaited(state: &RolloutState) -> Option<Expectation> {
    state.rollout.as_ref().map(|r| Expectation {
        role: role_of(r.step),
        revision: r.revision,
        ids: r.target.iter().copied().collect(),
    })
}

/// The file content for `ids` at `revision`.
pub fn content(input: &RolloutInput<'_>, revision: i64, ids: &BTreeSet<NodeId>) -> String {
    let header = Header {
        namespace: input.namespace.into(),
        name: input.name.into(),
        revision,
    };
    observer_ids::render(&header, ids)
}

/// What the cluster holds once `decision`'s writes and nudges succeeded at `now`: `roles` with
/// each written list in place and each nudged pod annotated. Deciding again on it is deciding
/// on a fresh read, without the read.
pub fn applied(
    roles: &[RoleObservation],
    decision: &RolloutDecision,
    now: Timestamp,
) -> Vec<RoleObservation> {
    let mut roles = roles.to_vec();
    for observed in &mut roles {
        if let Some(w) = decision
            .writes
            .iter()
            .rfind(|w| w.role == observed.role && w.member == observed.member)
        {
            observed.live = Some(LiveList {
                revision: Some(w.revision),
                content: Some(w.content.clone()),
                managed: true,
            });
        }
        for pod in &mut observed.pods {
            if let Some(n) = decision.nudges.iter().rfind(|n| {
                n.role == observed.role && n.member == observed.member && n.pod == pod.name
            }) {
                pod.nudged_revision = Some(n.revision);
                pod.nudged_at = Some(now);
            }
        }
    }
    roles
}

/// One step of the state machine. See the module documentation for the rules.
pub fn advance(input: &RolloutInput<'_>) -> RolloutDecision {
    let mut d = RolloutDecision {
        state: input.state.clone(),
        writes: vec![],
        nudges: vec![],
        happenings: vec![],
        held_for: vec![],
    };
    let mut configured: Vec<Role> = input.roles.iter().map(|r| r.role).collect();
    configured.sort();
    configured.dedup();
    if configured.is_empty() {
        return d;
    }
    let unreachable = unreachable_members(input);
    let desired: Vec<NodeId> = input.desired.iter().copied().collect();
    let restart = match &d.state.rollout {
        Some(r) => r.target != desired || !configured.contains(&role_of(r.step)),
        None => !steady(&d.state, &desired, &configured),
    };
    let from: BTreeSet<NodeId> = d.state.effective.iter().copied().collect();
    // A demotion or mixed change waits for every member's pods, and an unreachable member's
    // pods must be assumed running with the old list: starting it now would only make a later
    // promotion wait for them too (`may_excuse`). A rollout in flight goes on towards its own
    // target meanwhile.
    let start_held = restart
        && !unreachable.is_empty()
        && rollout_kind(&from, input.desired) != RolloutKind::Promotion;
    if restart && !start_held {
        start(input, &mut d, &configured, desired);
    } else {
        step_back_on_drift(input, &mut d, &configured);
    }
    let in_flight_held = d
        .state
        .rollout
        .as_ref()
        .is_some_and(|r| r.kind != RolloutKind::Promotion);
    if start_held || in_flight_held {
        d.held_for = unreachable;
    }
    progress(input, &mut d, &configured);
    restore_drift(input, &mut d);
    d
}

/// The members whose apiserver did not answer this pass, sorted.
fn unreachable_members(input: &RolloutInput<'_>) -> Vec<String> {
    let mut members: Vec<String> = input
        .roles
        .iter()
        .filter(|o| !o.reachable)
        .map(|o| o.member.clone())
        .collect();
    members.sort();
    members.dedup();
    members
}

/// The observations of `role`, one per member that runs it.
fn of_role<'a>(input: &'a RolloutInput<'_>, role: Role) -> Vec<&'a RoleObservation> {
    input.roles.iter().filter(|o| o.role == role).collect()
}

/// No rollout, and every configured role holds the desired set at the current revision.
fn steady(state: &RolloutState, desired: &[NodeId], configured: &[Role]) -> bool {
    configured.iter().all(|&role| {
        state
            .role(role)
            .is_some_and(|rs| rs.revision == state.revision && rs.observers == desired)
    })
}

fn start(
    input: &RolloutInput<'_>,
    d: &mut RolloutDecision,
    configured: &[Role],
    desired: Vec<NodeId>,
) {
    let live_max = input
        .roles
        .iter()
        .filter(|o| o.reachable)
        .filter_map(|o| o.live.as_ref()?.revision)
        .max()
        .unwrap_or(0);
    let superseded = d.state.rollout.as_ref().map(|r| r.revision);
    let revision = d.state.revision.max(superseded.unwrap_or(0)).max(live_max) + 1;
    let from: BTreeSet<NodeId> = d.state.effective.iter().copied().collect();
    let kind = rollout_kind(&from, input.desired);
    let may_excuse = may_excuse(kind, &from, input.desired, d.state.rollout.as_ref());
    d.happenings.push(Happening::RolloutStarted {
        revision,
        kind,
        from: d.state.effective.clone(),
        to: desired.clone(),
        superseded,
    });
    d.state.revision = revision;
    d.state.rollout = Some(RolloutStatus {
        revision,
        kind,
        step: step_of(configured[0]),
        started_at: stamp(input.now),
        step_started_at: stamp(input.now),
        target: desired,
        acknowledged: vec![],
        pending: vec![],
        excused: vec![],
        timed_out: false,
        may_excuse,
    });
}

/// A role ahead of the current step whose list no longer holds the rollout's revision (edited
/// or deleted by someone else) must be written and acknowledged again before the later roles
/// go on: the rollout goes back to that role's step.
fn step_back_on_drift(input: &RolloutInput<'_>, d: &mut RolloutDecision, configured: &[Role]) {
    let Some(r) = d.state.rollout.as_mut() else {
        return;
    };
    let ids: BTreeSet<NodeId> = r.target.iter().copied().collect();
    let text = content(input, r.revision, &ids);
    let current = role_of(r.step);
    // Only a member that answered can show drift: an unreachable one's lists are unknown.
    let drifted = configured
        .iter()
        .take_while(|&&role| role != current)
        .find(|&&role| {
            of_role(input, role)
                .iter()
                .any(|o| o.reachable && !holds(o.live.as_ref(), r.revision, &text))
        });
    if let Some(&role) = drifted {
        r.step = step_of(role);
        r.step_started_at = stamp(input.now);
        r.timed_out = false;
        d.happenings.push(Happening::DriftRestored {
            role,
            revision: r.revision,
        });
    }
}

/// Writes, nudges and acknowledges the current step; moves on (possibly several steps, when a
/// role has nothing to wait for) or finishes the rollout.
fn progress(input: &RolloutInput<'_>, d: &mut RolloutDecision, configured: &[Role]) {
    while let Some(rollout) = d.state.rollout.clone() {
        let role = role_of(rollout.step);
        let observed = of_role(input, role);
        if observed.is_empty() {
            return;
        }
        let target: BTreeSet<NodeId> = rollout.target.iter().copied().collect();
        let text = content(input, rollout.revision, &target);
        let mut r = rollout.clone();
        let entering = d
            .state
            .role(role)
            .is_none_or(|rs| rs.revision != rollout.revision);
        let mut writing = false;
        for o in observed
            .iter()
            .filter(|o| o.reachable && !holds(o.live.as_ref(), rollout.revision, &text))
        {
            writing = true;
            d.writes.push(ListWrite {
                role,
                member: o.member.clone(),
                revision: rollout.revision,
                ids: target.clone(),
                content: text.clone(),
                cause: WriteCause::Step,
            });
            d.happenings.push(Happening::StepWritten {
                role,
                member: o.member.clone(),
                revision: rollout.revision,
                pods: o.pods.len(),
            });
        }
        if writing && !entering {
            // A rewrite inside the step (a ConfigMap was edited or deleted, or a member
            // answered again): the clock of Time mode restarts, since no pod can have read
            // this content before now.
            r.step_started_at = stamp(input.now);
            r.timed_out = false;
        }
        let (acknowledged, pending, excused) =
            acknowledgements(input, &r, role, &target, &observed);
        // Excused pods are nudged again too: the annotation change is what makes their kubelet
        // remount at once when their node returns. Only in members that answer.
        for o in observed.iter().filter(|o| o.reachable) {
            let renudge = |p: &PodObservation| {
                let key = pod_key(&o.member, &p.name);
                (pending.contains(&key) || excused.iter().any(|e| e.pod == key))
                    && p.nudged_at
                        .is_none_or(|at| elapsed(at, input.now) >= RENUDGE_AFTER)
            };
            for pod in o
                .pods
                .iter()
                .filter(|p| p.nudged_revision != Some(rollout.revision) || renudge(p))
            {
                d.nudges.push(PodNudge {
                    role,
                    member: o.member.clone(),
                    pod: pod.name.clone(),
                    revision: rollout.revision,
                });
            }
        }
        r.acknowledged = acknowledged.clone();
        r.pending = pending.clone();
        r.excused = excused.clone();
        d.state.set_role(
            role,
            RoleStatus {
                revision: r.revision,
                observers: r.target.clone(),
                acknowledged,
                pending,
                excused,
            },
        );
        if writing {
            // A step is acknowledged only in a later pass that saw its list in place: the
            // persisted "acknowledged" then never runs ahead of what the API holds, even if
            // the operator stops between the status write and the ConfigMap write.
            d.state.rollout = Some(r);
            return;
        }
        if !r.pending.is_empty() {
            let waited = elapsed(r.step_started_at.0, input.now);
            if !r.timed_out && waited >= input.settings.timeout {
                r.timed_out = true;
                d.happenings.push(Happening::StepTimedOut {
                    role,
                    revision: r.revision,
                    pending: r.pending.clone(),
                });
            }
            d.state.rollout = Some(r);
            return;
        }
        if r.kind != RolloutKind::Promotion && !d.held_for.is_empty() {
            // Pods of an unreachable member that were never seen, or not seen running, may
            // still run with the old list: a demotion's step waits for the member to answer.
            d.state.rollout = Some(r);
            return;
        }
        if !r.excused.is_empty() {
            d.happenings.push(Happening::StepWentOnWithout {
                role,
                revision: r.revision,
                pods: r.excused.clone(),
            });
        }
        d.happenings.push(Happening::StepAcknowledged {
            role,
            revision: r.revision,
            took: elapsed(r.step_started_at.0, input.now),
        });
        let next = configured
            .iter()
            .skip_while(|&&c| c != role)
            .nth(1)
            .copied();
        match next {
            Some(next) => {
                r.step = step_of(next);
                r.step_started_at = stamp(input.now);
                r.timed_out = false;
                r.acknowledged = vec![];
                r.pending = vec![];
                r.excused = vec![];
                d.state.rollout = Some(r);
            }
            None => {
                d.happenings.push(Happening::RolloutComplete {
                    revision: r.revision,
                    observers: r.target.clone(),
                    took: elapsed(r.started_at.0, input.now),
                });
                d.state.effective = r.target;
                d.state.rollout = None;
            }
        }
    }
}

/// Running pods of the step that acknowledged, those still pending and those the step goes on
/// without (all sorted by pod name). A pod is excused only if it has not acknowledged.
fn acknowledgements(
    input: &RolloutInput<'_>,
    r: &RolloutStatus,
    role: Role,
    target: &BTreeSet<NodeId>,
    observed: &[&RoleObservation],
) -> (Vec<String>, Vec<String>, Vec<ExcusedPod>) {
    let expected = Expectation {
        role,
        revision: r.revision,
        ids: target.clone(),
    };
    let agent_acks = input
        .acks
        .filter(|a| a.expectation == expected)
        .map(|a| &a.pods);
    let settled = settled(r.step_started_at.0, input.now, input.settings.settle);
    // Every member's running pods, by the name status gives them; an unreachable member's
    // last-known pods included.
    let mut running: Vec<(String, &PodObservation)> = observed
        .iter()
        .flat_map(|o| {
            o.pods
                .iter()
                .filter(|p| p.running)
                .map(|p| (pod_key(&o.member, &p.name), p))
        })
        .collect();
    running.sort_by(|a, b| a.0.cmp(&b.0));
    let (acked, pending): (Vec<_>, Vec<_>) = running.into_iter().partition(|(key, _)| match input
        .settings
        .mode
    {
        AckMode::Agent => agent_acks.is_some_and(|pods| pods.contains(key)),
        AckMode::Time => settled,
    });
    let (excused, pending): (Vec<_>, Vec<_>) = pending
        .into_iter()
        .map(|(key, p)| {
            let excused = excuse(r, input.settings.mode, p).map(|e| ExcusedPod {
                pod: key.clone(),
                ..e
            });
            (key, excused)
        })
        .partition(|(_, e)| e.is_some());
    let excused = excused.into_iter().filter_map(|(_, e)| e).collect();
    let names = |pods: Vec<(String, _)>| pods.into_iter().map(|(key, _)| key).collect();
    let pending = pending.into_iter().map(|(key, _)| key).collect();
    (names(acked), pending, excused)
}

/// Keeps every role outside the current step at what its status records.
fn restore_drift(input: &RolloutInput<'_>, d: &mut RolloutDecision) {
    let current = d
        .state
        .rollout
        .as_ref()
        .map(|r| (role_of(r.step), r.revision));
    let written: Vec<(Role, String)> = d
        .writes
        .iter()
        .map(|w| (w.role, w.member.clone()))
        .collect();
    // An unreachable member's lists are unknown and cannot be written: restored once it answers.
    for observed in input.roles.iter().filter(|o| {
        o.reachable
            && current.map(|c| c.0) != Some(o.role)
            && !written.contains(&(o.role, o.member.clone()))
    }) {
        let Some(rs) = d.state.role(observed.role) else {
            continue;
        };
        // A later role already recorded at the rollout's revision (the rollout stepped back to
        // an earlier role) gets that revision in its own step, not as a restore.
        if current.is_some_and(|(step, revision)| observed.role > step && rs.revision >= revision) {
            continue;
        }
        let ids: BTreeSet<NodeId> = rs.observers.iter().copied().collect();
        let text = content(input, rs.revision, &ids);
        if !holds(observed.live.as_ref(), rs.revision, &text) {
            let (role, revision) = (observed.role, rs.revision);
            d.writes.push(ListWrite {
                role,
                member: observed.member.clone(),
                revision,
                ids,
                content: text,
                cause: WriteCause::Restore,
            });
            d.happenings
                .push(Happening::DriftRestored { role, revision });
        }
    }
    // Roles in rollout order: a restored controllers' list lands before a brokers' step write.
    d.writes.sort_by_key(|w| w.role);
}

fn holds(live: Option<&LiveList>, revision: i64, text: &str) -> bool {
    live.is_some_and(|l| {
        l.managed && l.revision == Some(revision) && l.content.as_deref() == Some(text)
    })
}

/// Time mode: a pod counts as acknowledged once `settle` has passed since the step's write+nudge.
pub fn settled(step_started_at: Timestamp, now: Timestamp, settle: Duration) -> bool {
    settle.is_zero() || elapsed(step_started_at, now) >= settle
}

/// Time from `since` to `now`, zero if `now` is earlier (clocks of two machines).
pub fn elapsed(since: Timestamp, now: Timestamp) -> Duration {
    let span = now.duration_since(since);
    if span.is_negative() {
        Duration::ZERO
    } else {
        span.unsigned_abs()
    }
}

/// A status timestamp for `now` (kept to the microsecond when stored).
fn stamp(now: Timestamp) -> MicroTime {
    MicroTime(now)
}
