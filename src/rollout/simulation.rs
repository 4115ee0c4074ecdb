//! A model of the cluster around the planner, for the property tests: ConfigMaps, pods that
//! read them when the kubelet syncs, agents that may stop answering, a clock, and an operator
//! that may crash between any two of its writes and then resumes from the persisted status.
//!
//! The model checks the safety rules on every ConfigMap write, as it happens:
//! - the brokers' list never runs ahead of the controllers: when it is written with revision
//!   `n`, the controllers' list holds `n` or later and every running controller pod has read
//!   `n` or later (Agent mode), or has had `settleTime` to read it (Time mode);
//! - every written set was the desired set at some point (so an empty list only when the
//!   effective set really was empty);
//! - a controller the brokers' step goes on without (Agent mode) is one the model itself finds
//!   unreachable ([`Pod::unreachable`]), only in a promotion, and it holds a list containing
//!   every id of the brokers' new list: it is at least as conservative as the brokers;
//! - a demotion or mixed change completes (and each of its steps is acknowledged) only once
//!   every running pod of the step has read its revision;
//! - a pod counted as acknowledged has read the revision; acknowledged, pending and excused
//!   never overlap.
//!
//! Pods can become unreachable as in a zone outage: their node lost (not Ready, the kubelet
//! no longer syncs, the agent silent), being deleted, gone from Kafka; and they can return.
//!
//! The pods and lists may be spread over member clusters (docs/multi-cluster.md), and a whole
//! member may be lost (its apiserver and every node) and return. Then the checks also hold
//! across members: the brokers' list of any member never runs ahead of the controllers' list
//! of a member that answers nor of any running controller; nothing is written to or nudged in
//! a lost member; a demotion or mixed change neither starts nor takes a step while a member is
//! lost.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::*;
use crate::crd::{AckMode, NodeId, Role, RolloutKind};
use crate::observer_ids;

#[derive(Clone, Debug)]
pub struct Pod {
    pub name: String,
    pub role: Role,
    /// The member cluster the pod runs in.
    pub member: String,
    pub running: bool,
    /// The agent answers.
    pub responsive: bool,
    /// What the pod's file holds: (revision from the header, ids).
    pub seen: Option<(Option<i64>, BTreeSet<NodeId>)>,
    pub history: BTreeSet<(i64, BTreeSet<NodeId>)>,
    pub nudged: Option<i64>,
    pub nudged_at: Option<Timestamp>,
    /// Logical time (World::seq) of the pod's start.
    pub started_seq: Option<u64>,
    /// The Ready condition of the pod's node (`Some(false)`: lost; its kubelet syncs nothing).
    pub node_ready: Option<bool>,
    /// The pod has a deletion timestamp.
    pub terminating: bool,
    /// Whether Kafka lists the node as alive (`None`: unknown).
    pub kafka_alive: Option<bool>,
    /// Since when the agent has been silent (set by [`World::set_responsive`]; a test that sets
    /// `responsive` directly makes it silent "since now" on every pass).
    pub silent_since: Option<Timestamp>,
    /// The pod's file holds a hand-edited list (no operator can keep a pod from reading one).
    pub read_hand_edit: bool,
}

impl Pod {
    /// The pod's name in status and in the agents' answers.
    pub fn key(&self) -> String {
        pod_key(&self.member, &self.name)
    }

    /// The model's own account of "cannot be reached": agent silent and node lost, or being
    /// deleted, or silent while Kafka says gone. (The planner decides from the same facts;
    /// this is the reference the checks compare it with.)
    pub fn unreachable(&self) -> bool {
        if self.responsive || !self.running {
            return false;
        }
        self.node_ready == Some(false) || self.terminating || self.kafka_alive == Some(false)
    }
}

#[derive(Clone, Debug)]
pub struct World {
    pub roles: Vec<Role>,
    /// The (role, member) pairs that run pods of the role: one ConfigMap each. Roles in
    /// rollout order, members in the order given.
    pub layout: Vec<(Role, String)>,
    /// Members whose apiserver and nodes are gone.
    pub lost: BTreeSet<String>,
    pub pods: Vec<Pod>,
    pub lists: BTreeMap<(Role, String), LiveList>,
    /// When each member's controllers' list first carried each revision (Time-mode invariant).
    pub controller_revisions: BTreeMap<(String, i64), (Timestamp, u64)>,
    /// Logical clock ordering writes and pod starts that happen at the same `now`.
    pub seq: u64,
    /// The highest revision the brokers' list ever carried.
    pub broker_high: i64,
    pub status: RolloutState,
    pub desired: BTreeSet<NodeId>,
    pub desired_history: Vec<BTreeSet<NodeId>>,
    pub now: Timestamp,
    pub settings: RolloutSettings,
    pub happenings: Vec<Happening>,
    pub writes: Vec<ListWrite>,
    /// The kind of every rollout started (from its `RolloutStarted`).
    pub kinds: BTreeMap<i64, RolloutKind>,
    /// Lists holding a hand edit.
    pub edited: BTreeSet<(Role, String)>,
}

pub const NAMESPACE: &str = "kafka";

/// One thing that happens to the model, for the property tests' random histories.
#[derive(Clone, Debug)]
pub enum Op {
    /// A reconcile, crashing after that many actions (`None`: to the end).
    Reconcile(Option<usize>),
    Sync(usize),
    SyncAll,
    Desire(BTreeSet<NodeId>),
    Tick(u64),
    Running(usize, bool),
    Responsive(usize, bool),
    /// A drift of the brokers' (true) or controllers' (false) list.
    Drift(bool, Drift),
    /// The pod's node is lost (false) or returns (true).
    Node(usize, bool),
    Terminate(usize),
    KafkaAlive(usize, Option<bool>),
    LoseMember(String),
    ReturnMember(String),
    FenceMember(String),
}

/// What someone else does to a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drift {
    Delete,
    /// Hand edit of the ids (the revision annotation stays).
    Edit,
    /// Labels or owner reference removed (content intact).
    StripLabels,
}
pub const NAME: &str = "kafka";

impl World {
    /// `controllers` dedicated controller pods (0: combined mode, no controller role) and
    /// `brokers` broker pods. `seed`: the lists exist before the operator runs (as the bed seeds
    /// them, without header or revision) and the pods run.
    pub fn new(
        controllers: usize,
        brokers: usize,
        mode: AckMode,
        seed: Option<BTreeSet<NodeId>>,
    ) -> World {
        World::stretched(&[(LOCAL, controllers, brokers)], mode, seed)
    }

    /// Pods over member clusters: `(member, controllers, brokers)` each (a member with 0 of a
    /// role has no list of it).
    pub fn stretched(
        members: &[(&str, usize, usize)],
        mode: AckMode,
        seed: Option<BTreeSet<NodeId>>,
    ) -> World {
        let mut roles = vec![];
        let mut layout = vec![];
        let mut pods = vec![];
        for (role, prefix) in [(Role::Controller, "c"), (Role::Broker, "b")] {
            for &(member, controllers, brokers) in members {
                let count = if role == Role::Controller {
                    controllers
                } else {
                    brokers
                };
                if count == 0 {
                    continue;
                }
                if !roles.contains(&role) {
                    roles.push(role);
                }
                layout.push((role, member.to_string()));
                for i in 0..count {
                    pods.push(Pod {
                        name: format!("{prefix}-{i}"),
                        role,
                        member: member.to_string(),
                        running: false,
                        responsive: true,
                        seen: None,
                        history: BTreeSet::new(),
                        nudged: None,
                        nudged_at: None,
                        started_seq: None,
                        node_ready: Some(true),
                        terminating: false,
                        kafka_alive: None,
                        silent_since: None,
                        read_hand_edit: false,
                    });
                }
            }
        }
        let now: Timestamp = "2026-11-29T09:00:00Z".parse().unwrap();
        let mut world = World {
            roles,
            layout,
            lost: BTreeSet::new(),
            pods,
            lists: BTreeMap::new(),
            controller_revisions: BTreeMap::new(),
            seq: 0,
            broker_high: 0,
            status: RolloutState::default(),
            desired: BTreeSet::from([4]),
            desired_history: vec![BTreeSet::from([4])],
            now,
            settings: RolloutSettings {
                mode,
                settle: Duration::from_secs(3),
                timeout: Duration::from_secs(10),
            },
            happenings: vec![],
            writes: vec![],
            kinds: BTreeMap::new(),
            edited: BTreeSet::new(),
        };
        if let Some(ids) = seed {
            let text: String = ids.iter().map(|id| format!("{id}\n")).collect();
            for key in world.layout.clone() {
                world.lists.insert(
                    key,
                    LiveList {
                        revision: None,
                        content: Some(text.clone()),
                        managed: false,
                    },
                );
            }
            world.desired_history.push(ids);
            for i in 0..world.pods.len() {
                world.set_running(i, true);
            }
        }
        world
    }

    /// What the shell reads: per (role, member), its pods and list; a lost member's pods as
    /// last seen (their nodes unknown, their agents silent) and its list unknown.
    pub fn observe(&self) -> Vec<RoleObservation> {
        self.layout
            .iter()
            .map(|(role, member)| {
                let reachable = !self.lost.contains(member);
                RoleObservation {
                    role: *role,
                    member: member.clone(),
                    reachable,
                    pods: self
                        .pods
                        .iter()
                        .filter(|p| p.role == *role && &p.member == member)
                        .map(|p| PodObservation {
                            name: p.name.clone(),
                            running: p.running,
                            nudged_revision: p.nudged,
                            nudged_at: p.nudged_at,
                            terminating: p.terminating,
                            node_ready: p.node_ready.filter(|_| reachable),
                            agent_silent_since: (!p.responsive)
                                .then(|| p.silent_since.unwrap_or(self.now)),
                            kafka_alive: p.kafka_alive,
                        })
                        .collect(),
                    live: reachable
                        .then(|| self.lists.get(&(*role, member.clone())).cloned())
                        .flatten(),
                }
            })
            .collect()
    }

    /// What the agents answer for the awaited expectation.
    pub fn acks(&self) -> Option<Acknowledgements> {
        let expectation = awaited(&self.status)?;
        let pods = self
            .pods
            .iter()
            .filter(|p| p.role == expectation.role && p.running && p.responsive)
            .filter(|p| p.seen == Some((Some(expectation.revision), expectation.ids.clone())))
            .map(Pod::key)
            .collect();
        Some(Acknowledgements { expectation, pods })
    }

    pub fn decide(&self) -> RolloutDecision {
        let roles = self.observe();
        let acks = self.acks();
        advance(&RolloutInput {
            namespace: NAMESPACE,
            name: NAME,
            desired: &self.desired,
            state: &self.status,
            roles: &roles,
            acks: acks.as_ref(),
            settings: self.settings,
            now: self.now,
        })
    }

    /// One reconcile with the intent persisted before the first round's ConfigMap writes; see
    /// [`World::reconcile_ordered`].
    pub fn reconcile(&mut self, crash_after: Option<usize>) {
        self.reconcile_ordered(crash_after, false);
    }

    /// One reconcile, as the shell runs it (reconciler/reconcile.rs): a decision carried out,
    /// then, after a step write, decided again on what the cluster now holds, until nothing
    /// moves. The first round's status (the intent) is written side by side with its ConfigMap
    /// writes, so either may land first: `intent_last` puts it after them. The status is
    /// persisted once more after the last list; a step taken further in between is not
    /// persisted on its own. `crash_after`: stop after that many actions counted over the whole
    /// reconcile (0: before anything, 1: after the first write, status or ConfigMap, ... and the
    /// last: every list written, the final status not). The next reconcile starts from whatever
    /// was persisted, as a restarted operator would.
    pub fn reconcile_ordered(&mut self, crash_after: Option<usize>, intent_last: bool) {
        let mut roles = self.observe();
        let acks = self.acks();
        let mut decision = self.decide();
        // Counts an action; true when the operator stops before it.
        let mut actions = 0;
        let mut stops = || {
            actions += 1;
            crash_after == Some(actions - 1)
        };
        if !intent_last {
            if stops() {
                return;
            }
            self.status = decision.state.clone();
        }
        let mut finished = false;
        for round in 0..=roles.len() {
            self.check_decision(&decision);
            self.happenings.extend(decision.happenings.iter().cloned());
            let kind = decision.state.rollout.as_ref().map(|r| r.kind);
            for write in &decision.writes {
                if stops() {
                    return;
                }
                self.apply_write(write, kind);
            }
            for nudge in &decision.nudges {
                assert!(
                    !self.lost.contains(&nudge.member),
                    "nudged {} in lost member {}",
                    nudge.pod,
                    nudge.member
                );
            }
            if round == 0 && intent_last {
                if stops() {
                    return;
                }
                self.status = decision.state.clone();
            }
            for nudge in &decision.nudges {
                if let Some(pod) = self
                    .pods
                    .iter_mut()
                    .find(|p| p.name == nudge.pod && p.member == nudge.member)
                {
                    pod.nudged = Some(nudge.revision);
                    pod.nudged_at = Some(self.now);
                }
            }
            if !decision.wrote_step() {
                finished = true;
                break;
            }
            roles = applied(&roles, &decision, self.now);
            assert_eq!(roles, self.observe(), "applied() is what the cluster holds");
            let again = advance(&RolloutInput {
                namespace: NAMESPACE,
                name: NAME,
                desired: &self.desired,
                state: &decision.state,
                roles: &roles,
                acks: acks.as_ref(),
                settings: self.settings,
                now: self.now,
            });
            if again.adds_nothing_to(&decision) {
                finished = true;
                break;
            }
            decision = again;
        }
        assert!(
            finished,
            "a reconcile took more rounds than there are roles: {decision:#?}"
        );
        if stops() {
            return;
        }
        self.status = decision.state.clone();
    }

    /// What a decision claims about the pods, checked against the model: acknowledged pods
    /// have read the revision (Agent mode), no pod is in two of acknowledged, pending and
    /// excused, an excused pod is one the model finds unreachable in a promotion, and a
    /// demotion's or mixed change's step is acknowledged only by every running pod of it.
    fn check_decision(&mut self, d: &RolloutDecision) {
        let agent = self.settings.mode == AckMode::Agent;
        for h in &d.happenings {
            match h {
                Happening::RolloutStarted { revision, kind, .. } => {
                    assert!(
                        *kind == RolloutKind::Promotion || self.lost.is_empty(),
                        "a {kind:?} started while members {:?} are lost",
                        self.lost
                    );
                    self.kinds.insert(*revision, *kind);
                }
                Happening::StepAcknowledged { role, revision, .. } => {
                    if self.kinds.get(revision) == Some(&RolloutKind::Promotion) {
                        continue;
                    }
                    assert!(
                        self.lost.is_empty(),
                        "a {:?} step acknowledged while members {:?} are lost",
                        self.kinds.get(revision),
                        self.lost
                    );
                    if !agent {
                        continue;
                    }
                    for pod in self.pods.iter().filter(|p| p.role == *role && p.running) {
                        assert!(
                            pod.history.iter().any(|(r, _)| r >= revision),
                            "{:?} step of revision {revision} acknowledged without {} (history {:?})",
                            self.kinds.get(revision),
                            pod.name,
                            pod.history
                        );
                    }
                }
                Happening::StepWentOnWithout { revision, pods, .. } => {
                    assert_eq!(
                        self.kinds.get(revision),
                        Some(&RolloutKind::Promotion),
                        "went on without {pods:?}"
                    );
                }
                _ => {}
            }
        }
        // A role's record carried over unchanged from the persisted state was checked by the
        // reconcile that made it: it is history (an excused pod may have come back since).
        let roles = [&d.state.roles.controller, &d.state.roles.broker];
        let before = [&self.status.roles.controller, &self.status.roles.broker];
        for (rs, old) in roles.into_iter().zip(before) {
            let Some(rs) = rs.as_ref().filter(|&rs| old.as_ref() != Some(rs)) else {
                continue;
            };
            self.check_role(rs.revision, &rs.acknowledged, &rs.pending, &rs.excused);
        }
        if let Some(r) = &d.state.rollout {
            self.check_role(r.revision, &r.acknowledged, &r.pending, &r.excused);
            if !r.excused.is_empty() {
                assert_eq!(r.kind, RolloutKind::Promotion);
            }
        }
    }

    fn check_role(
        &self,
        revision: i64,
        acknowledged: &[String],
        pending: &[String],
        excused: &[crate::crd::ExcusedPod],
    ) {
        let excused: BTreeSet<&str> = excused.iter().map(|e| e.pod.as_str()).collect();
        for name in acknowledged {
            assert!(!excused.contains(name.as_str()) && !pending.contains(name));
            if self.settings.mode == AckMode::Agent {
                let pod = self.pods.iter().find(|p| &p.key() == name).unwrap();
                assert!(
                    pod.history.iter().any(|(r, _)| *r == revision),
                    "{name} counted as acknowledging {revision} without reading it ({:?})",
                    pod.history
                );
            }
        }
        for name in &excused {
            assert!(!pending.iter().any(|p| p == name));
            let pod = self.pods.iter().find(|p| p.key() == *name).unwrap();
            assert!(
                self.settings.mode == AckMode::Agent && pod.unreachable(),
                "{name} excused but reachable: {pod:?}"
            );
        }
    }

    fn apply_write(&mut self, w: &ListWrite, kind: Option<RolloutKind>) {
        assert!(
            self.desired_history.contains(&w.ids),
            "wrote {:?} to the {} list, never a desired set ({:?})",
            w.ids,
            w.role,
            self.desired_history
        );
        assert_eq!(observer_ids::parse_ids(&w.content), w.ids);
        assert!(
            !self.lost.contains(&w.member),
            "wrote the {} list of lost member {}",
            w.role,
            w.member
        );
        assert!(self.layout.contains(&(w.role, w.member.clone())));
        if w.role == Role::Broker && self.roles.contains(&Role::Controller) {
            self.check_brokers_not_ahead(w, kind);
        }
        let key = (w.role, w.member.clone());
        self.edited.remove(&key);
        if w.role == Role::Controller {
            self.seq += 1;
            self.controller_revisions
                .entry((w.member.clone(), w.revision))
                .or_insert((self.now, self.seq));
        } else {
            self.broker_high = self.broker_high.max(w.revision);
        }
        self.lists.insert(
            key,
            LiveList {
                revision: Some(w.revision),
                content: Some(w.content.clone()),
                managed: true,
            },
        );
        self.writes.push(w.clone());
    }

    /// Controllers first: the brokers' list never carries a revision that the controllers'
    /// list does not hold yet; a step write also waits until every running controller has read
    /// it (Agent mode) or had `settleTime` to read it (Time mode). Revisions only grow and each
    /// one has one content.
    fn check_brokers_not_ahead(&self, w: &ListWrite, kind: Option<RolloutKind>) {
        for (_, member) in self
            .layout
            .iter()
            .filter(|(role, m)| *role == Role::Controller && !self.lost.contains(m))
        {
            let controllers_list = self
                .lists
                .get(&(Role::Controller, member.clone()))
                .expect("controllers' list exists before the brokers'");
            assert!(
                controllers_list.revision >= Some(w.revision),
                "brokers of {:?} got revision {} before the controllers of {member:?}",
                w.member,
                w.revision
            );
        }
        if w.cause == WriteCause::Restore {
            // Putting back what the status records: its step was acknowledged when it was
            // first written (a controller may since read a hand-edited list, which no operator
            // can prevent).
            return;
        }
        let running = self
            .pods
            .iter()
            .filter(|p| p.role == Role::Controller && p.running);
        match self.settings.mode {
            AckMode::Agent => {
                for pod in running {
                    if pod.history.iter().any(|(r, _)| *r >= w.revision) {
                        continue;
                    }
                    // Only a promotion goes on without a controller, only one that cannot be
                    // reached, and only one whose list is at least as conservative as the
                    // brokers' new one (it still holds every id the brokers will hold).
                    assert!(
                        kind == Some(RolloutKind::Promotion) && pod.unreachable(),
                        "brokers written with revision {} {:?} ({kind:?}) before controller {} read it (history {:?}, {pod:?})",
                        w.revision,
                        w.ids,
                        pod.name,
                        pod.history
                    );
                    let holds = pod.seen.as_ref().map(|(_, ids)| ids);
                    assert!(
                        pod.read_hand_edit || holds.is_some_and(|ids| w.ids.is_subset(ids)),
                        "brokers written with {:?} while unreachable controller {} holds {holds:?}: it could elect an observer",
                        w.ids,
                        pod.name
                    );
                }
            }
            // Only new information counts in Time mode: restoring what the brokers already had
            // is not a step.
            AckMode::Time if w.revision > self.broker_high => {
                let running: Vec<&Pod> = running.collect();
                for (_, member) in self
                    .layout
                    .iter()
                    .filter(|(role, m)| *role == Role::Controller && !self.lost.contains(m))
                {
                    let (since, seq) = self
                        .controller_revisions
                        .iter()
                        .filter(|((m, r), _)| m == member && *r >= w.revision)
                        .map(|(_, at)| *at)
                        .min()
                        .unwrap();
                    // A pod that started after the list held the revision read it at start.
                    if !running
                        .iter()
                        .any(|p| &p.member == member && p.started_seq.is_some_and(|s| s < seq))
                    {
                        continue;
                    }
                    let waited = self.now.duration_since(since);
                    assert!(
                        waited >= SignedDuration::try_from(self.settings.settle).unwrap(),
                        "brokers written {waited:?} after the controllers, settle time is {:?} (controllers of member {member:?})",
                        self.settings.settle
                    );
                }
            }
            AckMode::Time => {}
        }
    }

    /// The kubelet refreshes the pod's volume.
    pub fn sync(&mut self, index: usize) {
        let Some(key) = self.pods.get(index).map(|p| (p.role, p.member.clone())) else {
            return;
        };
        let Some(list) = self.lists.get(&key).cloned() else {
            return;
        };
        let edited = self.edited.contains(&key);
        let pod = &mut self.pods[index];
        // A lost node's kubelet syncs nothing.
        if !pod.running || pod.node_ready == Some(false) {
            return;
        }
        pod.read_hand_edit = edited;
        let text = list.content.unwrap_or_default();
        let parsed = observer_ids::parse(&text);
        let revision = parsed.header.map(|h| h.revision);
        if let Some(r) = revision {
            pod.history.insert((r, parsed.ids.clone()));
        }
        pod.seen = Some((revision, parsed.ids));
    }

    pub fn sync_all(&mut self) {
        for i in 0..self.pods.len() {
            self.sync(i);
        }
    }

    /// A pod stops or starts. A pod starts only when its list exists (a ConfigMap volume that
    /// is missing keeps the pod from starting) and reads the current content at start.
    pub fn set_running(&mut self, index: usize, running: bool) {
        let Some(pod) = self.pods.get(index) else {
            return;
        };
        let can_mount = self
            .lists
            .get(&(pod.role, pod.member.clone()))
            .is_some_and(|l| l.content.is_some());
        if running && !can_mount {
            return;
        }
        if running && !self.pods[index].running {
            // A new pod (rescheduled): on a node that is Ready, not being deleted, Kafka's
            // view of it unknown until the next scan.
            let pod = &mut self.pods[index];
            pod.node_ready = Some(true);
            pod.terminating = false;
            pod.kafka_alive = None;
        }
        self.pods[index].running = running;
        self.seq += 1;
        self.pods[index].started_seq = running.then_some(self.seq);
        if running {
            self.sync(index);
        } else {
            self.pods[index].seen = None;
        }
    }

    /// The pod's agent stops or starts answering.
    pub fn set_responsive(&mut self, index: usize, responsive: bool) {
        let now = self.now;
        if let Some(pod) = self.pods.get_mut(index) {
            if pod.responsive && !responsive {
                pod.silent_since = Some(now);
            }
            if responsive {
                pod.silent_since = None;
            }
            pod.responsive = responsive;
        }
    }

    /// The pod's node is lost (its kubelet stops reporting: NotReady, no volume syncs, the
    /// agent silent) or returns (Ready, the agent answers; its volume syncs again, but only on
    /// the next [`World::sync`]).
    pub fn set_node_ready(&mut self, index: usize, ready: bool) {
        self.set_responsive(index, ready);
        if let Some(pod) = self.pods.get_mut(index) {
            pod.node_ready = Some(ready);
        }
    }

    /// The pod gets a deletion timestamp (it stays running until it is gone).
    pub fn terminate(&mut self, index: usize) {
        if let Some(pod) = self.pods.get_mut(index).filter(|p| p.running) {
            pod.terminating = true;
        }
    }

    pub fn set_kafka_alive(&mut self, index: usize, alive: Option<bool>) {
        if let Some(pod) = self.pods.get_mut(index) {
            pod.kafka_alive = alive;
        }
    }

    pub fn set_desired(&mut self, ids: BTreeSet<NodeId>) {
        self.desired_history.push(ids.clone());
        self.desired = ids;
    }

    pub fn tick(&mut self, secs: u64) {
        self.now = self
            .now
            .checked_add(SignedDuration::from_secs(secs as i64))
            .unwrap();
    }

    /// Someone else deletes a list or edits it by hand (the role's list in its first member).
    pub fn drift(&mut self, role: Role, kind: Drift) {
        let Some(key) = self.layout.iter().find(|(r, _)| *r == role).cloned() else {
            return;
        };
        match (kind, self.lists.get_mut(&key)) {
            (Drift::Delete, _) => {
                self.lists.remove(&key);
                self.edited.remove(&key);
            }
            (Drift::Edit, Some(list)) => {
                list.content = Some("1\n2\n".into());
                self.edited.insert(key);
            }
            (Drift::StripLabels, Some(list)) => list.managed = false,
            (_, None) => {}
        }
    }

    /// Carries out one [`Op`].
    pub fn apply(&mut self, op: Op) {
        match op {
            Op::Reconcile(crash) => self.reconcile(crash),
            Op::Sync(i) => self.sync(i),
            Op::SyncAll => self.sync_all(),
            Op::Desire(ids) => self.set_desired(ids),
            Op::Tick(s) => self.tick(s),
            Op::Running(i, r) => self.set_running(i, r),
            Op::Responsive(i, r) => self.set_responsive(i, r),
            Op::Node(i, ready) => self.set_node_ready(i, ready),
            Op::Terminate(i) => self.terminate(i),
            Op::KafkaAlive(i, alive) => self.set_kafka_alive(i, alive),
            Op::Drift(brokers, kind) => self.drift(
                if brokers {
                    Role::Broker
                } else {
                    Role::Controller
                },
                kind,
            ),
            Op::LoseMember(m) => self.lose_member(&m),
            Op::ReturnMember(m) => self.return_member(&m),
            Op::FenceMember(m) => self.fence_member(&m),
        }
    }

    /// The indices of `member`'s pods.
    fn member_pods(&self, member: &str) -> Vec<usize> {
        (0..self.pods.len())
            .filter(|&i| self.pods[i].member == member)
            .collect()
    }

    /// A whole member is lost: its apiserver stops answering and its nodes go with it (the
    /// kubelets sync nothing, the agents are silent; the pods still run there).
    pub fn lose_member(&mut self, member: &str) {
        if !self.layout.iter().any(|(_, m)| m == member) {
            return;
        }
        self.lost.insert(member.to_string());
        for i in self.member_pods(member) {
            self.set_node_ready(i, false);
        }
    }

    /// A lost member answers again: its nodes Ready, its agents answering; its pods still
    /// hold what they read before, until the operator writes their lists.
    pub fn return_member(&mut self, member: &str) {
        if !self.lost.remove(member) {
            return;
        }
        for i in self.member_pods(member) {
            self.set_node_ready(i, true);
            self.set_kafka_alive(i, None);
        }
    }

    /// Kafka fences the running pods of a lost member (its brokers miss their heartbeats; its
    /// controller leaves the quorum).
    pub fn fence_member(&mut self, member: &str) {
        if !self.lost.contains(member) {
            return;
        }
        for i in self.member_pods(member) {
            self.set_kafka_alive(i, Some(false));
        }
    }

    /// Reconciles, syncs every pod and lets a second pass, up to `rounds` times.
    pub fn quiesce(&mut self, rounds: usize) {
        for _ in 0..rounds {
            self.reconcile(None);
            self.sync_all();
            self.tick(1);
        }
        self.reconcile(None);
    }

    /// The lists hold `desired` at the status' revision, and the status says so.
    pub fn converged(&self) -> bool {
        let ids: Vec<NodeId> = self.desired.iter().copied().collect();
        let header = observer_ids::Header {
            namespace: NAMESPACE.into(),
            name: NAME.into(),
            revision: self.status.revision,
        };
        let text = observer_ids::render(&header, &self.desired);
        self.status.rollout.is_none()
            && self.status.effective == ids
            && self
                .layout
                .iter()
                .filter(|(_, m)| !self.lost.contains(m))
                .all(|(role, member)| {
                    self.lists.get(&(*role, member.clone()))
                        == Some(&LiveList {
                            revision: Some(self.status.revision),
                            content: Some(text.clone()),
                            managed: true,
                        })
                        && self.status.role(*role).is_some_and(|rs| {
                            rs.observers == ids && rs.revision == self.status.revision
                        })
                })
    }
}
