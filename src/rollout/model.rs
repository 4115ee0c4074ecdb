//! What the rollout planner reads and what it decides: plain data, no I/O.
//!
//! The shell fills a [`RolloutInput`] from the API (pods, ConfigMaps, agent reports, the
//! ObserverSet's status), calls [`super::advance`] and carries out the [`RolloutDecision`]: first the
//! new status (the intent), then the ConfigMap writes, then the pod nudges.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::crd::{
    AckMode, ExcusedPod, NodeId, Phase, Role, RoleStatus, RolesStatus, RolloutKind, RolloutStatus,
    RolloutStep,
};

/// One selected pod of a role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodObservation {
    pub name: String,
    /// Only running pods must acknowledge: a pod that starts later mounts the current content.
    pub running: bool,
    /// The revision of the pod's nudge annotation.
    pub nudged_revision: Option<i64>,
    /// When the pod was last nudged (a second annotation).
    pub nudged_at: Option<Timestamp>,
    /// `metadata.deletionTimestamp` is set: the pod is being deleted (it stays `Running` until
    /// its node confirms, which a lost node never does).
    pub terminating: bool,
    /// The Ready condition of the pod's Node: `Some(false)` for False or Unknown, `None` when
    /// not known (not scheduled, Node not read).
    pub node_ready: Option<bool>,
    /// Since when the pod's agent has answered nothing, over consecutive rounds of asking;
    /// `None` when it answered in the latest round or was not asked in this pass.
    pub agent_silent_since: Option<Timestamp>,
    /// Whether Kafka still lists the pod's node id as alive; `None`: not known.
    pub kafka_alive: Option<bool>,
}

/// A role's live ConfigMap as read from the API; `None` in [`RoleObservation::live`] means absent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveList {
    /// The `kafkaobserver.io/revision` annotation, if present and numeric.
    pub revision: Option<i64>,
    /// The `observer.ids` key, if present.
    pub content: Option<String>,
    /// Labels and controller owner reference are as the operator writes them (the ConfigMap
    /// watch and garbage collection depend on them).
    pub managed: bool,
}

/// The member cluster of a single-cluster install: its pods keep their plain names in status.
pub const LOCAL: &str = "";

/// How a pod is named in status and in the agents' answers: `<member>/<pod>` when the install
/// spans member clusters (pod names are not unique across clusters), the plain name otherwise.
pub fn pod_key(member: &str, pod: &str) -> String {
    if member.is_empty() {
        pod.to_string()
    } else {
        format!("{member}/{pod}")
    }
}

/// A configured role in one member cluster: its pods and its ConfigMap there. A single-cluster
/// install has one per role, in member [`LOCAL`]; a stretched one has one per (role, member)
/// that runs pods of the role (docs/multi-cluster.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleObservation {
    pub role: Role,
    /// The member cluster these pods and this ConfigMap are in.
    pub member: String,
    /// Whether the member's apiserver answered this pass. When it did not, `pods` are the last
    /// ones seen there (assumed still running: an unreachable member is not an empty one) and
    /// `live` is unknown (`None`); nothing is written to it or nudged in it.
    pub reachable: bool,
    pub pods: Vec<PodObservation>,
    pub live: Option<LiveList>,
}

impl RoleObservation {
    /// A role of a single-cluster install (member [`LOCAL`], reachable).
    pub fn local(role: Role, pods: Vec<PodObservation>, live: Option<LiveList>) -> Self {
        RoleObservation {
            role,
            member: LOCAL.to_string(),
            reachable: true,
            pods,
            live,
        }
    }
}

/// What to ask the agents of a role: has every pod read this revision with these ids?
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expectation {
    pub role: Role,
    pub revision: i64,
    pub ids: BTreeSet<NodeId>,
}

/// Agent-mode answers: the pods that reported exactly `expectation`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acknowledgements {
    pub expectation: Expectation,
    pub pods: BTreeSet<String>,
}

/// How steps are acknowledged and how long they may take (from `spec.rollout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RolloutSettings {
    pub mode: AckMode,
    pub settle: Duration,
    pub timeout: Duration,
}

/// The part of `status` the planner owns. Everything the rollout needs to resume after a
/// restart is here, so the planner itself keeps no memory.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RolloutState {
    /// Last revision allocated (and written, or about to be written, to a ConfigMap).
    pub revision: i64,
    /// The set every pod of every role acknowledged (`status.effectiveObservers`).
    pub effective: Vec<NodeId>,
    pub roles: RolesStatus,
    pub rollout: Option<RolloutStatus>,
}

impl RolloutState {
    pub fn role(&self, role: Role) -> Option<&RoleStatus> {
        match role {
            Role::Controller => self.roles.controller.as_ref(),
            Role::Broker => self.roles.broker.as_ref(),
        }
    }

    pub fn set_role(&mut self, role: Role, status: RoleStatus) {
        match role {
            Role::Controller => self.roles.controller = Some(status),
            Role::Broker => self.roles.broker = Some(status),
        }
    }

    /// Ready, RollingOut or Degraded (Invalid is decided by the shell, before planning).
    pub fn phase(&self) -> Phase {
        match &self.rollout {
            None => Phase::Ready,
            Some(r) if r.timed_out => Phase::Degraded,
            Some(_) => Phase::RollingOut,
        }
    }
}

/// Everything [`super::advance`] looks at.
#[derive(Clone, Debug)]
pub struct RolloutInput<'a> {
    /// `<namespace>` and `<name>` of the ObserverSet, for the file header.
    pub namespace: &'a str,
    pub name: &'a str,
    /// The effective set wanted now.
    pub desired: &'a BTreeSet<NodeId>,
    pub state: &'a RolloutState,
    /// Configured roles in rollout order (controllers first).
    pub roles: &'a [RoleObservation],
    /// Agent answers for [`super::awaited`], if gathered.
    pub acks: Option<&'a Acknowledgements>,
    pub settings: RolloutSettings,
    pub now: Timestamp,
}

/// Why a ConfigMap is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteCause {
    /// A rollout step: the role learns a new revision.
    Step,
    /// The live ConfigMap differs from what the operator wrote (edited or deleted): put it back.
    Restore,
}

/// Write this content to the role's ConfigMap in `member`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListWrite {
    pub role: Role,
    pub member: String,
    pub revision: i64,
    pub ids: BTreeSet<NodeId>,
    pub content: String,
    pub cause: WriteCause,
}

/// Set the nudge annotation of this pod (in `member`) to `revision`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodNudge {
    pub role: Role,
    pub member: String,
    pub pod: String,
    pub revision: i64,
}

/// Something worth an Event and a log line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Happening {
    RolloutStarted {
        revision: i64,
        kind: RolloutKind,
        from: Vec<NodeId>,
        to: Vec<NodeId>,
        /// The revision this rollout replaces, when the desired set changed mid-rollout.
        superseded: Option<i64>,
    },
    StepWritten {
        role: Role,
        /// The member cluster whose ConfigMap is written ([`LOCAL`] in a single cluster).
        member: String,
        revision: i64,
        pods: usize,
    },
    StepAcknowledged {
        role: Role,
        revision: i64,
        took: Duration,
    },
    StepTimedOut {
        role: Role,
        revision: i64,
        pending: Vec<String>,
    },
    /// A promotion's step completed without these unreachable pods (`super::unreachable`).
    StepWentOnWithout {
        role: Role,
        revision: i64,
        pods: Vec<ExcusedPod>,
    },
    RolloutComplete {
        revision: i64,
        observers: Vec<NodeId>,
        took: Duration,
    },
    DriftRestored {
        role: Role,
        revision: i64,
    },
}

/// What to do now. Apply in order: `state` (status), `writes`, `nudges`.
#[derive(Clone, Debug, PartialEq)]
pub struct RolloutDecision {
    pub state: RolloutState,
    pub writes: Vec<ListWrite>,
    pub nudges: Vec<PodNudge>,
    pub happenings: Vec<Happening>,
    /// The unreachable member clusters a demotion or mixed change waits for (it neither starts
    /// nor takes a step while any member is unreachable); empty otherwise.
    pub held_for: Vec<String>,
}

/// How often a rollout step looks for acknowledgements in its first [`FAST_POLL_FOR`]: the
/// agents' answers are no Kubernetes events, so only a requeue sees them, and a promotion waits
/// for two steps in a row (measured on the bed: a nudged list reaches the JVMs 0.2-0.3 s after
/// its write, so each poll period adds about half of itself to every step). Cheap: one small
/// HTTP GET per pod per poll, and only during a step's first 5 s.
pub const FAST_POLL: Duration = Duration::from_millis(20);
/// After this long in a step, the usual once a second.
pub const FAST_POLL_FOR: Duration = Duration::from_secs(5);

impl RolloutDecision {
    /// Whether this decision writes a step's list: once carried out, the shell decides again at
    /// once on `rollout::applied` (a step with nothing to wait for moves on).
    pub fn wrote_step(&self) -> bool {
        self.writes.iter().any(|w| w.cause == WriteCause::Step)
    }

    /// Whether this decision, taken again after `previous` was carried out, has nothing left
    /// to do: the same state, no writes, no nudges.
    pub fn adds_nothing_to(&self, previous: &RolloutDecision) -> bool {
        self.state == previous.state && self.writes.is_empty() && self.nudges.is_empty()
    }

    /// While a rollout waits for acknowledgements, look again soon: every 20 ms in the step's
    /// first 5 s, then every second, and every five once the step timed out and waits on pods
    /// that are probably broken.
    ///
    /// Right after writing a step's list, at once: a step with nothing to wait for (no pods to
    /// ask, or Time acknowledgement without settle time) then advances on the next pass instead
    /// of one poll period later, and a step with pods costs one early look at their agents.
    /// Restoring a drifted list never requeues at once (an editor fighting the operator must not
    /// make it spin).
    pub fn requeue_after(&self, now: Timestamp) -> Option<Duration> {
        if self.wrote_step() {
            return Some(Duration::ZERO);
        }
        self.state.rollout.as_ref().map(|r| {
            if r.timed_out {
                Duration::from_secs(5)
            } else if now.duration_since(r.step_started_at.0).as_secs_f64()
                < FAST_POLL_FOR.as_secs_f64()
            {
                FAST_POLL
            } else {
                Duration::from_secs(1)
            }
        })
    }
}

/// Rollout steps and roles are the same thing seen from status and from the cluster.
pub fn role_of(step: RolloutStep) -> Role {
    match step {
        RolloutStep::Controllers => Role::Controller,
        RolloutStep::Brokers => Role::Broker,
    }
}

pub fn step_of(role: Role) -> RolloutStep {
    match role {
        Role::Controller => RolloutStep::Controllers,
        Role::Broker => RolloutStep::Brokers,
    }
}
