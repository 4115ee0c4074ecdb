//! Dereference: what the validated ObserverSet refers to, read from the API and reduced to the
//! planner's inputs (pods per role, the live ConfigMaps, the agents' answers).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::core::Selector;

use k8s_openapi::jiff::Timestamp;

use super::members::MemberApis;
use crate::agent::AgentClient;
use crate::crd::{AckMode, Role, ValidatedObserverSet};
use crate::k8s::dereference::list_role_pods;
use crate::k8s::{Error, Result};
use crate::kafka_liveness::LivenessView;
use crate::rollout::acknowledgement::{judge, Basis, Verdict};
use crate::rollout::config_map::{
    self, config_map_name, DATA_KEY, LABEL_MANAGED_BY, LABEL_OBSERVER_SET, LABEL_ROLE,
};
use crate::rollout::pods::KafkaPod;
use crate::rollout::{
    pod_key, Acknowledgements, Expectation, LiveList, PodObservation, RoleObservation,
};

/// One configured role as found in one member cluster.
#[derive(Clone, Debug)]
pub struct ObservedRole {
    /// Name of the ObserverSet (the ConfigMap's expected labels and owner).
    pub observer_set: String,
    pub role: Role,
    /// The member cluster (`crate::rollout::LOCAL` in a single-cluster install).
    pub member: String,
    /// Whether the member was read this pass; when not, `pods` are the last seen there and
    /// `config_map` is unknown.
    pub reachable: bool,
    pub pods: Vec<KafkaPod>,
    pub config_map: Option<ConfigMap>,
}

/// What the shell learnt about the pods this pass, beyond the pods themselves: the facts
/// `crate::rollout::unreachable` decides from.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    /// Pod (`rollout::pod_key`) -> since when its agent has answered nothing (pods asked this
    /// pass only).
    pub silent_since: BTreeMap<String, Timestamp>,
    /// Node (`rollout::pod_key` of member and node name) -> its Ready condition (the Nodes of
    /// silent pods only).
    pub node_ready: BTreeMap<String, bool>,
    /// The automation's latest view of which brokers Kafka lists, if any.
    pub kafka: Option<LivenessView>,
    /// When `kafka` is judged (its age).
    pub now: Option<Instant>,
}

impl ObservedRole {
    /// The planner's view (pure).
    pub fn to_plan(&self, facts: &Facts) -> RoleObservation {
        RoleObservation {
            role: self.role,
            member: self.member.clone(),
            reachable: self.reachable,
            pods: self
                .pods
                .iter()
                .map(|p| PodObservation {
                    name: p.name.clone(),
                    running: p.running,
                    nudged_revision: p.nudged_revision,
                    nudged_at: p.nudged_at,
                    terminating: p.terminating,
                    node_ready: p
                        .node_name
                        .as_ref()
                        .and_then(|n| facts.node_ready.get(&pod_key(&self.member, n)).copied()),
                    agent_silent_since: facts
                        .silent_since
                        .get(&pod_key(&self.member, &p.name))
                        .copied(),
                    kafka_alive: facts
                        .kafka
                        .as_ref()
                        .zip(facts.now)
                        .and_then(|(k, now)| k.alive(self.role, p.node_id, now)),
                })
                .collect(),
            live: self
                .config_map
                .as_ref()
                .filter(|_| self.reachable)
                .map(|cm| {
                    // Over members the lists carry no owner reference (`Owner::reference`).
                    let owner_required = self.member == crate::rollout::LOCAL;
                    live_list(cm, &self.observer_set, self.role, owner_required)
                }),
        }
    }

    /// The role's pods with the names status and the agents' answers give them.
    pub fn keyed_pods(&self) -> impl Iterator<Item = (String, &KafkaPod)> {
        self.pods
            .iter()
            .map(|p| (pod_key(&self.member, &p.name), p))
    }
}

/// Revision annotation, content and ownership of a live ConfigMap (pure).
pub fn live_list(cm: &ConfigMap, observer_set: &str, role: Role, owner_required: bool) -> LiveList {
    let label = |key: &str| {
        cm.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(key))
            .map(String::as_str)
    };
    let labelled = label(LABEL_MANAGED_BY) == Some(crate::writers::OPERATOR)
        && label(LABEL_OBSERVER_SET) == Some(observer_set)
        && label(LABEL_ROLE) == Some(role.as_str());
    let owned =
        cm.metadata.owner_references.iter().flatten().any(|o| {
            o.kind == "ObserverSet" && o.name == observer_set && o.controller == Some(true)
        });
    LiveList {
        revision: config_map::revision_of(cm),
        content: cm.data.as_ref().and_then(|d| d.get(DATA_KEY)).cloned(),
        managed: labelled && (owned || !owner_required),
    }
}

/// Pods and ConfigMap of every configured role in every member, in rollout order. The reads
/// run side by side: every reconcile pass of a rollout step starts with them, so their round
/// trips add directly to the promotion's latency. Over members (more than one), a member whose
/// apiserver fails a read is unreachable this pass (its roles come back with no pods, for the
/// caller to fill from what it last saw), not an error: an unreachable member is not an empty
/// one, and the others' rollout goes on where the rules allow.
pub async fn roles(
    obs: &ValidatedObserverSet,
    members: &[MemberApis],
    pod_filter: &Selector,
) -> Result<Vec<ObservedRole>> {
    let over_members = members.len() > 1;
    let per_member = members.iter().map(|apis| async move {
        if over_members && apis.resting {
            return Ok(unreached(obs, &apis.member));
        }
        let read = role_reads(obs, apis, pod_filter).await;
        match read {
            Err(Error::Kube { action, source }) if over_members => {
                tracing::warn!(observerset = %format!("{}/{}", obs.namespace, obs.name), member = %apis.member, %action, error = %crate::k8s::error::brief(&source), "member cluster unreachable this pass");
                Ok(unreached(obs, &apis.member))
            }
            other => other,
        }
    });
    let found = futures::future::try_join_all(per_member).await?;
    let mut roles: Vec<ObservedRole> = found.into_iter().flatten().collect();
    // Rollout order: every member's controllers first (stable: members keep their order).
    roles.sort_by_key(|r| r.role != Role::Controller);
    Ok(roles)
}

/// The roles of `obs` in one member, read through that member's APIs.
async fn role_reads(
    obs: &ValidatedObserverSet,
    apis: &MemberApis,
    pod_filter: &Selector,
) -> Result<Vec<ObservedRole>> {
    let selections = obs.roles.iter().filter(|r| r.member == apis.member);
    futures::future::try_join_all(selections.map(|selection| async move {
        let mut selector =
            Selector::try_from(selection.selector.clone()).map_err(|e| Error::Selector {
                object: format!("{}/{}", obs.namespace, obs.name),
                role: selection.role,
                message: e.to_string(),
            })?;
        // Only the pods the operator watches (--pod-selector): a pod outside the watch would
        // be acted on without its changes ever waking a reconcile.
        selector.extend(pod_filter.clone());
        let name = config_map_name(&obs.name, selection.role);
        let in_member = match apis.member.as_str() {
            "" => String::new(),
            m => format!(" in member {m}"),
        };
        let (role_pods, config_map) = tokio::try_join!(
            list_role_pods(&apis.pods, selection.role, &selector, &selection.node_id),
            async {
                apis.config_maps
                    .get_opt(&name)
                    .await
                    .map_err(Error::kube(format!(
                        "reading ConfigMap {}/{name}{in_member}",
                        obs.namespace
                    )))
            }
        )?;
        Ok(ObservedRole {
            observer_set: obs.name.clone(),
            role: selection.role,
            member: apis.member.clone(),
            reachable: true,
            pods: role_pods,
            config_map,
        })
    }))
    .await
}

/// The roles of `member`, unread this pass.
fn unreached(obs: &ValidatedObserverSet, member: &str) -> Vec<ObservedRole> {
    obs.roles
        .iter()
        .filter(|r| r.member == member)
        .map(|r| ObservedRole {
            observer_set: obs.name.clone(),
            role: r.role,
            member: member.to_string(),
            reachable: false,
            pods: Vec::new(),
            config_map: None,
        })
        .collect()
}

/// Marks the roles of `members` unreachable (read perhaps, but not to be written this pass:
/// their copy of the set did not answer or does not exist), forgetting what was read there.
pub fn mark_unreachable(roles: &mut [ObservedRole], members: &BTreeSet<String>) {
    for role in roles.iter_mut().filter(|r| members.contains(&r.member)) {
        role.reachable = false;
        role.pods.clear();
        role.config_map = None;
    }
}

/// Refuses an observer list that names every broker the set selects: an observer never joins
/// an ISR, so with every broker one no partition could take an `acks=all` write (nor, once
/// promoted, would the list be of any use). Pods of every phase count: a broker whose pod is
/// still Pending is a broker. No brokers selected (yet) is no verdict.
pub fn every_broker_an_observer(
    observers: &BTreeSet<crate::crd::NodeId>,
    roles: &[ObservedRole],
) -> Option<String> {
    let brokers: BTreeSet<_> = roles
        .iter()
        .filter(|r| r.role == Role::Broker)
        .flat_map(|r| r.pods.iter().map(|p| p.node_id))
        .collect();
    if brokers.is_empty() || !brokers.is_subset(observers) {
        return None;
    }
    let ids: Vec<String> = brokers.iter().map(ToString::to_string).collect();
    Some(format!(
        "spec.observers lists every broker the set selects ({}): an observer never joins an ISR, so no partition could take acks=all writes; list only the brokers that should follow from afar",
        ids.join(", ")
    ))
}

/// Refuses `combined: true` when Kafka's controller quorum shares no node id with the selected
/// brokers: the brokers are then not combined-mode nodes, the controllers are dedicated and
/// would never get the observer list (only the brokers' ConfigMap is written for a combined
/// set). `voters` are the KRaft voters the operator last read (DescribeQuorum, through the
/// automation's liveness view). When they are unknown (no view, DescribeQuorum failed, the
/// automation not running) nothing is refused on this ground: unknown is no evidence. No
/// brokers selected (yet) is no verdict either.
pub fn combined_without_controllers<'a>(
    combined: bool,
    voters: impl IntoIterator<Item = &'a crate::crd::NodeId>,
    roles: &[ObservedRole],
) -> Option<String> {
    let voters: BTreeSet<_> = voters.into_iter().copied().collect();
    let brokers: BTreeSet<_> = roles
        .iter()
        .filter(|r| r.role == Role::Broker)
        .flat_map(|r| r.pods.iter().map(|p| p.node_id))
        .collect();
    if !combined || voters.is_empty() || brokers.is_empty() || !voters.is_disjoint(&brokers) {
        return None;
    }
    let list = |ids: &BTreeSet<crate::crd::NodeId>| {
        ids.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    Some(format!(
        "spec.nodes.brokers.combined is true but Kafka's controller quorum ({}) shares no node id with the selected brokers ({}): the controllers are dedicated and would never get the observer list; set combined: false and add spec.nodes.controllers selecting the controller pods",
        list(&voters),
        list(&brokers)
    ))
}

/// How the pods of the awaited step were judged in this pass: the pods whose JVM reports
/// nothing, acknowledged (or waited for) on the file plus `rollout.jvmCacheTtl`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AckBasis {
    pub role: Role,
    pub revision: i64,
    pub file_ttl: BTreeSet<String>,
}

/// The agents' answers for the awaited step: the planner's input and how they were judged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gathered {
    pub acks: Acknowledgements,
    pub basis: AckBasis,
    /// Every pod asked, and whether its agent answered nothing (`Verdict::Unreachable`).
    pub asked: Vec<(String, bool)>,
}

/// The planner's acknowledgements and the basis of each verdict (pure).
pub fn gather(expectation: Expectation, verdicts: &[(String, Verdict)]) -> Gathered {
    let pods = verdicts
        .iter()
        .filter(|(_, v)| v.is_acknowledged())
        .map(|(pod, _)| pod.clone())
        .collect();
    let file_ttl = verdicts
        .iter()
        .filter(|(_, v)| v.basis() == Some(Basis::FileAndTtl))
        .map(|(pod, _)| pod.clone())
        .collect();
    let asked = verdicts
        .iter()
        .map(|(pod, v)| (pod.clone(), matches!(v, Verdict::Unreachable(_))))
        .collect();
    Gathered {
        asked,
        basis: AckBasis {
            role: expectation.role,
            revision: expectation.revision,
            file_ttl,
        },
        acks: Acknowledgements { expectation, pods },
    }
}

/// Agent mode: asks the running pods of the awaited role whether they use the expected
/// revision and ids. Time mode needs no answers.
/// `quick` names the pods asked with [`crate::agent::QUICK_TIMEOUT`] ([`quick_asks`]).
pub async fn acknowledgements(
    obs: &ValidatedObserverSet,
    observed: &[ObservedRole],
    awaited: Option<Expectation>,
    agents: &AgentClient,
    quick: &BTreeSet<String>,
) -> Option<Gathered> {
    let expectation = awaited?;
    if obs.rollout.acknowledgement != AckMode::Agent {
        return None;
    }
    // Every member's running pods of the role, an unreachable member's last seen ones too:
    // their agents may still answer over the pod network.
    let running: Vec<(String, KafkaPod)> = observed
        .iter()
        .filter(|o| o.role == expectation.role)
        .flat_map(|o| o.keyed_pods())
        .filter(|(_, p)| p.running)
        .map(|(key, p)| (key, p.clone()))
        .collect();
    let verdicts = verdicts(
        agents,
        &running,
        obs.rollout.agent_port,
        &format!("{}/{}", obs.namespace, obs.name),
        &expectation,
        obs.rollout.jvm_cache_ttl,
        quick,
    )
    .await;
    for (pod, verdict) in verdicts.iter().filter(|(_, v)| !v.is_acknowledged()) {
        tracing::debug!(
            pod,
            ?verdict,
            revision = expectation.revision,
            "not acknowledged yet"
        );
    }
    Some(gather(expectation, &verdicts))
}

/// The pods of `role` whose agent is asked with the short budget: those the planner would
/// excuse if they stay silent, by the same facts ([`crate::rollout::unreachable::lost`]: being
/// deleted, the node not Ready as last read, or Kafka no longer listing the node). Such a pod can
/// only hold the pass up (every other answer waits for the slowest), never make the step go on
/// sooner; if it answers late it stays excused for this step, which is what happens to any pod
/// that cannot be reached. A pod Kafka lists as alive on a Ready node (or whose state is not
/// known) is always asked with the full timeout: it is waited for.
pub fn quick_asks(role: &ObservedRole, facts: &Facts) -> BTreeSet<String> {
    role.to_plan(facts)
        .pods
        .into_iter()
        .filter(|p| p.running && crate::rollout::unreachable::lost(p).is_some())
        .map(|p| pod_key(&role.member, &p.name))
        .collect()
}

/// Asks every pod's agent at once and judges each answer; the pods in `quick` get
/// [`crate::agent::QUICK_TIMEOUT`]. Pods come with, and verdicts go by, their
/// `rollout::pod_key`.
pub async fn verdicts(
    agents: &AgentClient,
    pods: &[(String, KafkaPod)],
    port: u16,
    observer_set: &str,
    expected: &Expectation,
    jvm_cache_ttl: Duration,
    quick: &BTreeSet<String>,
) -> Vec<(String, Verdict)> {
    let asks = pods.iter().map(|(key, pod)| async move {
        let budget = match quick.contains(key) {
            true => crate::agent::QUICK_TIMEOUT,
            false => Duration::MAX,
        };
        let verdict = match &pod.ip {
            None => Verdict::Unreachable("pod has no IP yet".into()),
            Some(ip) => match agents.report_within(ip, port, budget).await {
                Ok(report) => judge(
                    &report,
                    observer_set,
                    expected,
                    jvm_cache_ttl,
                    Timestamp::now(),
                ),
                Err(e) => Verdict::Unreachable(e),
            },
        };
        (key.clone(), verdict)
    });
    futures::future::join_all(asks).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn built() -> ConfigMap {
        let owner = crate::rollout::config_map::test_owner();
        config_map::build(&owner, Role::Broker, 7, "4\n".into())
    }

    #[test]
    fn what_the_operator_builds_reads_back_as_managed() {
        let live = live_list(&built(), "kafka", Role::Broker, true);
        assert_eq!(
            live,
            LiveList {
                revision: Some(7),
                content: Some("4\n".into()),
                managed: true
            }
        );
        // The other role's name or another ObserverSet: not ours as it stands.
        assert!(!live_list(&built(), "kafka", Role::Controller, true).managed);
        assert!(!live_list(&built(), "other", Role::Broker, true).managed);
        // Over members the lists are written without an owner: labelled is managed there,
        // and not in one cluster.
        let mut unowned = built();
        unowned.metadata.owner_references = None;
        assert!(live_list(&unowned, "kafka", Role::Broker, false).managed);
        assert!(!live_list(&unowned, "kafka", Role::Broker, true).managed);
    }

    fn role_with(role: Role, ids: &[crate::crd::NodeId]) -> ObservedRole {
        ObservedRole {
            observer_set: "kafka".into(),
            role,
            member: crate::rollout::LOCAL.into(),
            reachable: true,
            pods: ids
                .iter()
                .map(|&node_id| KafkaPod::bare(&format!("{role}-{node_id}"), node_id))
                .collect(),
            config_map: None,
        }
    }

    #[test]
    fn only_pods_excusable_by_kubernetes_or_kafka_are_asked_quickly() {
        let mut role = role_with(Role::Broker, &[1, 2, 3, 4]);
        for (i, p) in role.pods.iter_mut().enumerate() {
            p.running = true;
            p.node_name = Some(format!("node-{}", i + 1));
        }
        role.pods[2].terminating = true; // broker 3 being deleted
        let now = Instant::now();
        let kafka = LivenessView {
            at: now,
            interval: Duration::from_secs(1),
            brokers: BTreeSet::from([1, 3, 4]), // 2 fenced
            voters: BTreeMap::new(),
        };
        let nodes = (1..=4).map(|i| (format!("node-{i}"), i != 4)); // 4's node NotReady
        let facts = Facts {
            node_ready: nodes.collect(),
            kafka: Some(kafka),
            now: Some(now),
            ..Facts::default()
        };
        let quick = quick_asks(&role, &facts);
        // 1: listed by Kafka, node Ready, not deleted: waited for, the full timeout.
        assert_eq!(
            quick,
            BTreeSet::from(["broker-2".into(), "broker-3".into(), "broker-4".into()])
        );
        // Kafka's view stale and the nodes' readiness unknown: only the deleted pod.
        let stale = Facts {
            now: Some(now + Duration::from_secs(10)),
            node_ready: BTreeMap::new(),
            ..facts
        };
        let quick = quick_asks(&role, &stale);
        assert_eq!(quick, BTreeSet::from(["broker-3".into()]));
        // Not running: not asked at all, so not in the set.
        role.pods[2].running = false;
        let quick = quick_asks(&role, &Facts::default());
        assert!(quick.is_empty(), "{quick:?}");
    }

    #[tokio::test]
    async fn a_quick_ask_gives_up_after_its_budget_not_the_connect_timeout() {
        // A listener that accepts and never answers: the full budget would be 800 ms.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        let mut role = role_with(Role::Broker, &[1]);
        role.pods[0].ip = Some("127.0.0.1".into());
        role.pods[0].running = true;
        let expected = Expectation {
            role: Role::Broker,
            revision: 7,
            ids: BTreeSet::from([4]),
        };
        let quick = BTreeSet::from(["broker-1".to_string()]);
        let started = Instant::now();
        let pods: Vec<(String, KafkaPod)> =
            role.keyed_pods().map(|(k, p)| (k, p.clone())).collect();
        let got = verdicts(
            &AgentClient::default(),
            &pods,
            port,
            "kafka/kafka",
            &expected,
            Duration::from_secs(1),
            &quick,
        )
        .await;
        let took = started.elapsed();
        match &got[0].1 {
            Verdict::Unreachable(why) => assert!(why.contains("no answer within 100ms"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(took < Duration::from_millis(700), "took {took:?}");
    }

    #[test]
    fn combined_is_refused_only_when_the_quorum_shares_no_broker() {
        let roles = [role_with(Role::Broker, &[1, 2, 3])];
        let dedicated = [101, 102, 103];
        let problem = combined_without_controllers(true, &dedicated, &roles).expect("refused");
        assert!(
            problem.starts_with("spec.nodes.brokers.combined is true"),
            "{problem}"
        );
        assert!(
            problem.contains("(101, 102, 103)") && problem.contains("(1, 2, 3)"),
            "{problem}"
        );
        assert!(problem.contains("add spec.nodes.controllers"), "{problem}");
        // Combined nodes: some voter is a selected broker.
        assert_eq!(combined_without_controllers(true, &[1, 2, 3], &roles), None);
        assert_eq!(combined_without_controllers(true, &[3, 101], &roles), None);
        // Not combined, quorum unknown, or no broker selected: no verdict.
        assert_eq!(
            combined_without_controllers(false, &dedicated, &roles),
            None
        );
        assert_eq!(combined_without_controllers(true, &[], &roles), None);
        assert_eq!(combined_without_controllers(true, &dedicated, &[]), None);
    }

    #[test]
    fn an_observer_list_naming_every_selected_broker_is_refused() {
        let observers = BTreeSet::from([1, 2, 3, 4]);
        let roles = [
            role_with(Role::Controller, &[101, 102, 103]),
            role_with(Role::Broker, &[1, 2, 3, 4]),
        ];
        let problem = every_broker_an_observer(&observers, &roles).expect("refused");
        assert!(
            problem.contains("every broker the set selects (1, 2, 3, 4)"),
            "{problem}"
        );
        // One broker left to hold the ISR: accepted, as is a list naming brokers not selected.
        let roles = [role_with(Role::Broker, &[1, 2, 3, 4, 5])];
        assert_eq!(every_broker_an_observer(&observers, &roles), None);
        assert_eq!(
            every_broker_an_observer(&BTreeSet::from([4]), &[role_with(Role::Broker, &[1, 4])]),
            None
        );
        // No broker pods yet: nothing to judge (controllers are never brokers here).
        let roles = [
            role_with(Role::Controller, &[1, 2]),
            role_with(Role::Broker, &[]),
        ];
        assert_eq!(
            every_broker_an_observer(&BTreeSet::from([1, 2]), &roles),
            None
        );
    }

    #[test]
    fn stripped_labels_or_owner_count_as_drift() {
        let mut no_labels = built();
        no_labels.metadata.labels = None;
        assert!(!live_list(&no_labels, "kafka", Role::Broker, true).managed);
        let mut released = built();
        released.metadata.owner_references = None;
        assert!(!live_list(&released, "kafka", Role::Broker, true).managed);
    }

    #[test]
    fn gathering_keeps_the_basis_of_every_answered_pod() {
        let expectation = Expectation {
            role: Role::Controller,
            revision: 8,
            ids: BTreeSet::from([4]),
        };
        let verdicts = vec![
            ("c-0".to_string(), Verdict::Acknowledged(Basis::Jvm)),
            ("c-1".to_string(), Verdict::Acknowledged(Basis::FileAndTtl)),
            (
                "c-2".to_string(),
                Verdict::Behind {
                    basis: Basis::FileAndTtl,
                    why: "waiting".into(),
                },
            ),
            ("c-3".to_string(), Verdict::Unreachable("refused".into())),
        ];
        let g = gather(expectation.clone(), &verdicts);
        assert_eq!(
            g.acks,
            Acknowledgements {
                expectation,
                pods: BTreeSet::from(["c-0".to_string(), "c-1".to_string()])
            }
        );
        assert_eq!(
            g.basis.file_ttl,
            BTreeSet::from(["c-1".to_string(), "c-2".to_string()])
        );
        assert_eq!((g.basis.role, g.basis.revision), (Role::Controller, 8));
        assert_eq!(
            g.asked,
            [
                ("c-0", false),
                ("c-1", false),
                ("c-2", false),
                ("c-3", true)
            ]
            .map(|(p, u)| (p.to_string(), u))
        );
    }

    #[test]
    fn facts_reach_the_planner_by_pod_node_and_role() {
        let pod = |name: &str, node_id, node: Option<&str>| KafkaPod {
            name: name.into(),
            node_id,
            ip: None,
            nudged_revision: None,
            nudged_at: None,
            running: true,
            terminating: name == "b-1",
            node_name: node.map(Into::into),
            uid: None,
        };
        let since: Timestamp = "2026-12-03T09:00:00Z".parse().unwrap();
        let now = Instant::now();
        let facts = Facts {
            silent_since: BTreeMap::from([("b-0".to_string(), since)]),
            node_ready: BTreeMap::from([("zone-b".to_string(), false)]),
            kafka: Some(LivenessView {
                at: now,
                interval: Duration::from_secs(10),
                brokers: BTreeSet::from([2]),
                voters: BTreeMap::new(),
            }),
            now: Some(now),
        };
        let observed = |role| ObservedRole {
            observer_set: "kafka".into(),
            role,
            member: crate::rollout::LOCAL.into(),
            reachable: true,
            pods: vec![pod("b-0", 1, Some("zone-b")), pod("b-1", 2, None)],
            config_map: None,
        };
        let plan = observed(Role::Broker).to_plan(&facts);
        let (b0, b1) = (&plan.pods[0], &plan.pods[1]);
        assert_eq!(
            (
                b0.agent_silent_since,
                b0.node_ready,
                b0.kafka_alive,
                b0.terminating
            ),
            (Some(since), Some(false), Some(false), false)
        );
        assert_eq!(
            (
                b1.agent_silent_since,
                b1.node_ready,
                b1.kafka_alive,
                b1.terminating
            ),
            (None, None, Some(true), true)
        );
        // The metadata lists brokers only; without a quorum answer a controller is unknown.
        let plan = observed(Role::Controller).to_plan(&facts);
        assert_eq!(plan.pods[0].kafka_alive, None);
    }

    #[test]
    fn hand_made_maps_keep_their_content() {
        // The test bed seeds its lists without annotation or labels.
        let seeded = ConfigMap {
            data: built().data,
            ..Default::default()
        };
        assert_eq!(
            live_list(&seeded, "kafka", Role::Broker, true),
            LiveList {
                revision: None,
                content: Some("4\n".into()),
                managed: false
            }
        );
    }

    #[tokio::test]
    async fn unreachable_agent_is_reported_not_fatal() {
        // A port on loopback with no listener: refused at once.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let pods = [(
            "p".to_string(),
            KafkaPod {
                ip: Some("127.0.0.1".into()),
                running: true,
                ..KafkaPod::bare("p", 1)
            },
        )];
        let expected = Expectation {
            role: Role::Broker,
            revision: 7,
            ids: BTreeSet::from([3, 4]),
        };
        let got = verdicts(
            &AgentClient::default(),
            &pods,
            port,
            "kafka/kafka",
            &expected,
            Duration::from_secs(1),
            &BTreeSet::new(),
        )
        .await;
        assert!(matches!(&got[0].1, Verdict::Unreachable(_)), "{got:?}");
        assert_eq!(got[0].1.basis(), None);
    }
}
