//! One reconcile of one ObserverSet: dereference -> validate -> plan -> apply.
//!
//! Apply order: the status first (the planner's intent: a new revision or step is recorded
//! before anything is written), then the ConfigMaps with server-side apply, then the pod
//! nudges. A step with nothing to wait for is planned again at once on what the API then holds
//! (`rollout::applied`), so one reconcile may carry out several decisions in that order; their
//! ConfigMaps are written one after the other and the status once more after the last. Events
//! and metrics come once, at the end. A crash anywhere in between is resumed by the next
//! reconcile from the persisted status; the planner is idempotent on it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::finalizer::{finalizer, Error as FinalizerError, Event as Finalized};
use kube::{Resource, ResourceExt};

use super::conditions;
use super::conflict::{self, Conflict};
use super::copies;
use super::member_reach;
use super::members::{self, MemberApis};
use super::observe::{self, ObservedRole};
use super::outcome;
use super::silence;
use super::status_patch::status_patch;
use super::Context;
use crate::crd::{validate_over, ObserverSet, ObserverSetStatus, Phase, Role};
use crate::history::{self, SpecChange};
use crate::k8s::config_map;
use crate::k8s::dereference::node_readiness;
use crate::k8s::events::{reason, RECONCILE};
use crate::k8s::finalizer::{clean_up, Cleanup, FINALIZER};
use crate::k8s::members::MemberClients;
use crate::k8s::status_copies::{StatusCopies, StatusCopy, Versions};
use crate::k8s::{nudge, status, Error, Result};
use crate::metrics::{ObserverSetLabels, ObserverSetState};
use crate::rollout::config_map::{build, Owner};
use crate::rollout::pods::KafkaPod;
use crate::rollout::{
    self, effective_set, Happening, RoleObservation, RolloutDecision, RolloutInput, RolloutSettings,
};

/// How long a Node's Ready condition read for a silent pod is reused.
const NODE_READ_EVERY: Duration = Duration::from_secs(1);

/// Retry when the selected pods cannot be used (a pod without a node id): pods change without
/// the ObserverSet changing, and the pod watch may not see a label fix on an unrelated pod.
const INVALID_PODS_RETRY: Duration = Duration::from_secs(30);

/// Retry while the members' copies do not agree, or a member is unreachable: no watch of the
/// other members wakes the reconcile when the user applies the missing copies or a member
/// answers again.
const AGREEMENT_RETRY: Duration = members::LOST_LOOK;

/// The entry point `Controller::run` calls.
pub async fn reconcile(obj: Arc<ObserverSet>, ctx: Arc<Context>) -> Result<Action> {
    let started = Instant::now();
    let namespace = obj.namespace().ok_or(Error::MissingMetadata("namespace"))?;
    let api: Api<ObserverSet> = Api::namespaced(ctx.client.clone(), &namespace);
    let result = finalizer(&api, FINALIZER, obj, |event| async {
        match event {
            Finalized::Apply(obj) => apply_on_latest(&obj, &ctx).await,
            Finalized::Cleanup(obj) => cleanup(&obj, &ctx).await,
        }
    })
    .await
    .map_err(|e| match e {
        FinalizerError::ApplyFailed(e) | FinalizerError::CleanupFailed(e) => e,
        other => Error::Finalizer {
            object: namespace.clone(),
            message: other.to_string(),
        },
    });
    ctx.metrics.reconciled(started.elapsed());
    result
}

/// How many times one reconcile plans again at once when a write lost its precondition.
const SUPERSEDED_ATTEMPTS: usize = 3;

/// [`apply`], planned again at once on a fresh read when a write lost its precondition (the
/// promotion engine wrote its status fields between our read and our write, or a former
/// leader's write landed): the first such loss is routine, not a failure. Persistent losses go
/// to the error policy.
async fn apply_on_latest(obj: &ObserverSet, ctx: &Context) -> Result<Action> {
    let mut attempt = 1;
    loop {
        match apply(obj, ctx).await {
            Err(Error::Superseded { object }) if attempt < SUPERSEDED_ATTEMPTS => {
                tracing::info!(observerset = %format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any()), %object, attempt, "changed after this reconcile read it; planning again on a fresh read");
                attempt += 1;
            }
            result => return result,
        }
    }
}

async fn apply(obj: &ObserverSet, ctx: &Context) -> Result<Action> {
    let name = obj.name_any();
    let namespace = obj.namespace().ok_or(Error::MissingMetadata("namespace"))?;
    let object = format!("{namespace}/{name}");
    let api: Api<ObserverSet> = Api::namespaced(ctx.client.clone(), &namespace);
    // Every member's APIs (one, the local cluster, without members).
    let mut apis = members::apis(&ctx.client, ctx.members.as_ref(), &namespace);
    // A member that did not answer a moment ago is not waited for again on every pass.
    let resting = {
        let failed = ctx
            .member_failures
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        members::resting(&failed, Instant::now())
    };
    for a in &mut apis {
        a.resting = resting.contains(&a.member);
    }
    let member_names = ctx.members.as_ref().map(MemberClients::names);
    let local_member = ctx
        .members
        .as_ref()
        .map_or(rollout::LOCAL.to_string(), |m| m.local.clone());
    let remote_apis: Vec<_> = apis
        .iter()
        .filter(|a| a.member != local_member)
        .cloned()
        .collect();
    let validate_here = |o: &ObserverSet| validate_over(o, member_names.as_deref());
    // Every read of the reconcile at once: a fresh (quorum) read of the ObserverSet, since the
    // planner must resume from the latest persisted status, never from a cache that may lag
    // behind our own last write (over members, every member's copy); and, going by the cached
    // object's spec, the conflict check and the pods and ConfigMaps. Those two are only used
    // if the fresh spec is the same.
    let early = async {
        let validated = validate_here(obj).ok()?;
        Some(tokio::join!(
            find_conflict(ctx, obj),
            observe::roles(&validated, &apis, &ctx.pod_filter)
        ))
    };
    let (fresh, early, remote_copies) = tokio::join!(
        api.get_opt(&name),
        early,
        members::read_copies(&remote_apis, &name)
    );
    let Some(fresh) = fresh.map_err(Error::kube(format!("reading ObserverSet {object}")))? else {
        return Ok(Action::await_change());
    };
    // Over members: every copy as read, in --members order, ours among them.
    let copy_reads: Option<Vec<members::CopyRead>> = ctx.members.as_ref().map(|_| {
        let mut remote = remote_copies.into_iter();
        apis.iter()
            .filter_map(|a| {
                if a.member == local_member {
                    Some((a.member.clone(), Ok(Some(fresh.clone()))))
                } else {
                    remote.next()
                }
            })
            .collect()
    });
    if let Some(reads) = &copy_reads {
        let mut failed = ctx
            .member_failures
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        members::note_answers(&mut failed, reads, Instant::now());
    }
    // What to resume from: our copy, or over members the copy furthest on among a majority.
    let recovered =
        match &copy_reads {
            None => None,
            Some(reads) => Some(copies::recover(&members::as_copies(reads)).map_err(|e| {
                Error::NoMajority {
                    object: object.clone(),
                    reason: e.to_string(),
                }
            })?),
        };
    let mut previous = match &recovered {
        None => fresh.status.clone().unwrap_or_default(),
        Some(r) => r.latest.clone().unwrap_or_default(),
    };
    // Over members the engine's promotions come from its latest record a majority holds, which
    // need not be on the copy furthest on for the rollout (a member back from an outage holds an
    // old one).
    if let Some(reads) = &copy_reads {
        if let Some(promotions) = copies::engine_promotions(&members::as_copies(reads)) {
            previous.auto_promotions = promotions;
        }
    }
    let now = Timestamp::now();
    // A later leadership's epoch on the set (on any copy read): this replica was replaced
    // without noticing yet (paused or cut off past its Lease); it writes nothing, whatever its
    // fence says.
    let uid = fresh.metadata.uid.clone().unwrap_or_default();
    let claimed = ctx.claimed_epoch(&uid);
    let statuses: Vec<&ObserverSetStatus> = match &copy_reads {
        None => vec![&previous],
        Some(reads) => reads
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok()?.as_ref()?.status.as_ref())
            .collect(),
    };
    if let Some(theirs) = statuses
        .iter()
        .filter_map(|s| copies::later_epoch(claimed, s))
        .max()
    {
        return Err(Error::Deposed {
            object,
            ours: claimed.unwrap_or_default(),
            theirs,
        });
    }

    let validated = match validate_here(&fresh) {
        Ok(v) => v,
        Err(e) => return invalid(&api, &fresh, &previous, e.to_string(), None, ctx).await,
    };
    if let Some(reads) = &copy_reads {
        let not_granted = ctx
            .members
            .as_ref()
            .map(|m| m.not_granted(&namespace))
            .unwrap_or_default();
        if !not_granted.is_empty() {
            let problem = format!(
                "ObserverSet {object} is in namespace {namespace}, but the operator's identity in member {} is granted another namespace: apply the ObserverSet in the Kafka namespace the members' kubeconfig Secrets name (the same in every member)",
                not_granted.join(", ")
            );
            return invalid(&api, &fresh, &previous, problem, None, ctx).await;
        }
        if let Err(problem) = members::spec_agreed(&fresh.spec, reads) {
            let retry = Some(AGREEMENT_RETRY);
            return invalid(&api, &fresh, &previous, problem, retry, ctx).await;
        }
    }
    let early = early.filter(|_| fresh.spec == obj.spec && fresh.metadata.uid == obj.metadata.uid);
    let (conflict, observed) = match early {
        Some(read) => read,
        None => tokio::join!(
            find_conflict(ctx, &fresh),
            observe::roles(&validated, &apis, &ctx.pod_filter)
        ),
    };
    // An older ObserverSet selecting the same pods keeps them: write nothing but our phase.
    let conflict = conflict.map_err(Error::kube(format!(
        "listing the ObserverSets and pods of namespace {namespace} (conflict check)"
    )))?;
    if let Some(conflict) = conflict {
        return conflicted(&api, &fresh, &previous, &conflict, ctx).await;
    }
    let mut observed = match observed {
        Ok(observed) => observed,
        Err(e @ (Error::Dereference(_) | Error::Selector { .. })) => {
            return invalid(
                &api,
                &fresh,
                &previous,
                e.to_string(),
                Some(INVALID_PODS_RETRY),
                ctx,
            )
            .await;
        }
        Err(e) => return Err(e),
    };
    // Members whose copy did not answer or is missing get no write this pass; the pods of
    // every unreachable member are the ones last seen there.
    if let Some(reads) = &copy_reads {
        observe::mark_unreachable(&mut observed, &members::unreachable(reads));
        remember_member_pods(ctx, &uid, &mut observed);
    }
    if let Some(problem) = observe::every_broker_an_observer(&validated.observers, &observed) {
        let retry = Some(INVALID_PODS_RETRY);
        return invalid(&api, &fresh, &previous, problem, retry, ctx).await;
    }
    // The quorum as the automation last read it; none known refuses nothing.
    let voters = ctx
        .liveness
        .view(&(namespace.clone(), name.clone()))
        .map(|v| v.voters.into_keys().collect::<Vec<_>>())
        .unwrap_or_default();
    let combined = validated.roles.iter().any(|r| r.combined);
    if let Some(problem) = observe::combined_without_controllers(combined, &voters, &observed) {
        let retry = Some(INVALID_PODS_RETRY);
        return invalid(&api, &fresh, &previous, problem, retry, ctx).await;
    }

    let desired = effective_set(
        &validated.observers,
        &validated.promotion.promoted,
        previous.auto_promotions.iter().map(|a| a.node_id),
    );
    let state = outcome::state_of(&previous);
    let awaited = rollout::awaited(&state);
    let quick = quick_asks(ctx, &namespace, &name, &observed, awaited.as_ref());
    let gathered =
        observe::acknowledgements(&validated, &observed, awaited, &ctx.agents, &quick).await;
    let acks = gathered.as_ref().map(|g| g.acks.clone());
    let basis = gathered.as_ref().map(|g| &g.basis);
    let facts = facts(ctx, &namespace, &name, &observed, gathered.as_ref(), now).await;
    let mut roles: Vec<RoleObservation> = observed.iter().map(|o| o.to_plan(&facts)).collect();
    let settings = RolloutSettings {
        mode: validated.rollout.acknowledgement,
        settle: validated.rollout.settle_time,
        timeout: validated.rollout.timeout,
    };
    let plan_on = |state: &rollout::RolloutState, roles: &[RoleObservation]| {
        rollout::advance(&RolloutInput {
            namespace: &namespace,
            name: &name,
            desired: &desired,
            state,
            roles,
            acks: acks.as_ref(),
            settings,
            now,
        })
    };
    let mut decision = plan_on(&state, &roles);
    // Over members: the members not read or not written this pass, with why.
    let lost = copy_reads
        .as_ref()
        .map(|reads| lost_members(reads, &observed));
    // status.members and the Events of its changes, from this pass's reads.
    let reach = lost.as_ref().zip(copy_reads.as_ref()).map(|(lost, reads)| {
        let names: Vec<String> = reads.iter().map(|(m, _)| m.clone()).collect();
        member_reach::reach(&previous.members, &names, lost, now)
    });
    let members_condition = |next: &mut ObserverSetStatus, decision: &RolloutDecision| {
        if let Some(lost) = &lost {
            let value = conditions::members_reachable(lost, !decision.held_for.is_empty());
            conditions::set_condition(&mut next.conditions, &value, fresh.metadata.generation, now);
        }
        if let Some((entries, _)) = &reach {
            next.members.clone_from(entries);
        }
    };
    let mut next = outcome::status_after(
        &previous,
        fresh.metadata.generation,
        &desired,
        &decision,
        basis,
        now,
    );
    members_condition(&mut next, &decision);
    // A spec change of the effective set is a manual action for status.history (not on the
    // first reconcile, which only records the initial set).
    let manual = if previous.observed_generation.is_some() {
        let auto_promoted = previous.auto_promotions.iter().map(|a| a.node_id).collect();
        history::manual_entries(
            &SpecChange {
                before: &previous.desired_observers,
                after: &desired,
                promoted: &validated.promotion.promoted,
                auto_promoted: &auto_promoted,
                managed: fresh.metadata.managed_fields.as_deref().unwrap_or_default(),
            },
            &previous.history,
            Timestamp::now(),
        )
    } else {
        Vec::new()
    };
    with_history(&mut next, manual);

    // Each member's ConfigMaps are owned by that member's copy of the set (its own uid there).
    let copies_of: Vec<(String, &ObserverSet)> = match &copy_reads {
        None => vec![(rollout::LOCAL.to_string(), &fresh)],
        Some(reads) => reads
            .iter()
            .filter_map(|(m, r)| Some((m.clone(), r.as_ref().ok()?.as_ref()?)))
            .collect(),
    };
    let mut targets = BTreeMap::new();
    for (member, copy) in copies_of {
        let Some(apis) = apis.iter().find(|a| a.member == member) else {
            continue;
        };
        let owner = Owner {
            namespace: namespace.clone(),
            name: name.clone(),
            reference: match &copy_reads {
                // One cluster: the set owns its lists (garbage-collected with it, Retain
                // releases them).
                None => Some(
                    copy.controller_owner_ref(&())
                        .ok_or(Error::MissingMetadata("uid"))?,
                ),
                // Over members: no owner, so deleting a member's copy never deletes that
                // member's lists (no finalizer guards the remote copies).
                Some(_) => None,
            },
        };
        targets.insert(member, (owner, apis.clone()));
    }
    let copies = StatusCopies::new(
        apis.iter()
            .map(|a| StatusCopy {
                member: a.member.clone(),
                api: a.sets.clone(),
            })
            .collect(),
    );
    let mut writer = Writer {
        copies: &copies,
        targets: &targets,
        name: &name,
        object: &object,
        now,
        status_versions: match &recovered {
            None => [(
                rollout::LOCAL.to_string(),
                fresh.metadata.resource_version.clone(),
            )]
            .into(),
            Some(r) => r.versions.clone(),
        },
        epoch_floor: recovered.as_ref().map_or(0, |r| r.epoch - 1),
        // A copy behind the one resumed from (a member that was away, a former leader's
        // minority write) gets the whole status this pass even if nothing changed: a member
        // that returns gets the current status before anything else.
        copies_behind: recovered.as_ref().is_some_and(|r| !r.behind.is_empty()),
        versions: observed
            .iter()
            .filter(|o| o.reachable)
            .map(|o| {
                let version = o.config_map.as_ref();
                (
                    (o.member.clone(), o.role),
                    version.and_then(|c| c.metadata.resource_version.clone()),
                )
            })
            .collect(),
    };
    // What the API holds of the status. The intent goes there before the first ConfigMap
    // write; a step taken further in this reconcile is persisted once, after its list is
    // written (`persist` below). A crash in between resumes from the intent, which the planner
    // takes on from what the lists then hold (`rollout::simulation` crashes there too). That
    // saves one status round trip per chained step on the path to the brokers' list.
    let mut persisted = previous.clone();
    let mut happenings = Vec::new();
    // A new leadership claims its epoch on this set before anything else, and writes its
    // rollout state under it (`super::copies`).
    let mut carried = match claimed {
        Some(epoch) => Ok(epoch),
        None => writer.claim(&mut persisted).await.inspect(|&epoch| {
            tracing::info!(observerset = %format!("{namespace}/{name}"), epoch, "leadership epoch claimed");
            ctx.claim_epoch(uid.clone(), epoch);
        }),
    }
    .map(|epoch| next.writer_epoch = epoch);
    if carried.is_ok() {
        carried = writer.persist(&next, &mut persisted).await;
    }
    // Each round carries out one decision; a step written with nothing to wait for (Time mode
    // without a settle time, a role without running pods) is taken further in the same
    // reconcile, on what the API now holds. Every round but the last moves the rollout on by a
    // step, so there are at most as many rounds as roles, plus the one that finishes.
    for _ in 0..=roles.len() {
        if carried.is_err() {
            break;
        }
        carried = writer.carry_out(&decision).await;
        if carried.is_err() {
            break;
        }
        happenings.extend(decision.happenings.iter().cloned());
        if !decision.wrote_step() {
            break;
        }
        roles = rollout::applied(&roles, &decision, now);
        let again = plan_on(&decision.state, &roles);
        if again.adds_nothing_to(&decision) {
            break;
        }
        next = outcome::status_after(
            &next,
            fresh.metadata.generation,
            &desired,
            &again,
            basis,
            now,
        );
        members_condition(&mut next, &again);
        with_history(&mut next, Vec::new());
        decision = again;
    }
    if carried.is_ok() {
        carried = writer.persist(&next, &mut persisted).await;
    }
    // Events and metrics once the writes are done (they are not on the rollout's path), also
    // for the rounds carried out before a failed one.
    let mut notes = outcome::notes(&name, &happenings, basis);
    if let Some((_, changes)) = &reach {
        notes.extend(outcome::member_notes(changes));
    }
    report(
        ctx,
        &fresh,
        &namespace,
        &name,
        &happenings,
        notes,
        &persisted,
    )
    .await;
    carried?;
    let planned = decision.requeue_after(now).unwrap_or(ctx.resync);
    let requeue = members::next_pass(
        planned,
        lost.as_ref().map(|l| !l.is_empty()),
        writer.copies_behind,
    );
    Ok(Action::requeue(requeue))
}

/// The pods of the awaited role asked with the short budget this pass
/// ([`observe::quick_asks`]), from the Nodes' readiness as last read and the automation's
/// latest view of Kafka.
fn quick_asks(
    ctx: &Context,
    namespace: &str,
    name: &str,
    observed: &[ObservedRole],
    awaited: Option<&rollout::Expectation>,
) -> BTreeSet<String> {
    let Some(expected) = awaited else {
        return BTreeSet::new();
    };
    let facts = observe::Facts {
        node_ready: local_node_readiness(ctx),
        kafka: ctx
            .liveness
            .view(&(namespace.to_string(), name.to_string())),
        now: Some(Instant::now()),
        ..observe::Facts::default()
    };
    observed
        .iter()
        .filter(|o| o.role == expected.role)
        .flat_map(|o| observe::quick_asks(o, &facts))
        .collect()
}

/// The member whose Nodes this replica can read (its own: the remote identities are granted
/// nothing cluster-scoped), `rollout::LOCAL` in a single-cluster install.
fn local_member(ctx: &Context) -> &str {
    ctx.members.as_ref().map_or(rollout::LOCAL, |m| &m.local)
}

/// The Nodes' readiness as last read, by `rollout::pod_key(member, node)`, for the local
/// member's Nodes.
fn local_node_readiness(ctx: &Context) -> BTreeMap<String, bool> {
    let member = local_member(ctx);
    let nodes = ctx.nodes.lock().unwrap_or_else(|e| e.into_inner());
    nodes
        .iter()
        .map(|(n, (_, ready))| (rollout::pod_key(member, n), *ready))
        .collect()
}

/// The members not read or not written this pass, with why (pure): a copy that did not answer
/// or does not exist, or pods and ConfigMaps that could not be read.
fn lost_members(reads: &[members::CopyRead], observed: &[ObservedRole]) -> Vec<(String, String)> {
    let mut lost: Vec<(String, String)> = reads
        .iter()
        .filter_map(|(m, read)| match read {
            Ok(Some(_)) => None,
            Ok(None) => Some((m.clone(), "no copy of this ObserverSet there".into())),
            Err(why) => Some((m.clone(), why.clone())),
        })
        .collect();
    for role in observed.iter().filter(|r| !r.reachable) {
        if !lost.iter().any(|(m, _)| *m == role.member) {
            lost.push((
                role.member.clone(),
                "its pods or ConfigMaps could not be read".into(),
            ));
        }
    }
    lost
}

/// Keeps the pods of every member read this pass, and gives an unreachable member's roles
/// the pods last seen there (by the set's uid: a new set of the same name starts empty).
fn remember_member_pods(ctx: &Context, uid: &str, observed: &mut [ObservedRole]) {
    let mut memory = ctx.member_pods.lock().unwrap_or_else(|e| e.into_inner());
    for role in observed.iter_mut() {
        let key = (uid.to_string(), role.member.clone(), role.role);
        if role.reachable {
            memory.insert(key, role.pods.clone());
        } else if let Some(seen) = memory.get(&key) {
            role.pods = seen.clone();
        }
    }
}

/// What `crate::rollout::unreachable` decides from, for the pods asked this pass: since when
/// each silent agent has been silent (the context's memory, by pod uid), the readiness of the
/// silent pods' Nodes (read only when some agent is silent) and the automation's latest view
/// of the brokers Kafka lists. Without answers gathered (Time mode, no step awaited) nothing is
/// known, and nobody is excused.
async fn facts(
    ctx: &Context,
    namespace: &str,
    name: &str,
    observed: &[ObservedRole],
    gathered: Option<&observe::Gathered>,
    now: Timestamp,
) -> observe::Facts {
    let Some(gathered) = gathered else {
        return observe::Facts::default();
    };
    // The awaited role's pods of every member, by the name status gives them.
    let pods: Vec<(String, &str, &KafkaPod)> = observed
        .iter()
        .filter(|o| o.role == gathered.basis.role)
        .flat_map(|o| o.keyed_pods().map(move |(k, p)| (k, o.member.as_str(), p)))
        .collect();
    let key_of = |pod: &str| {
        pods.iter()
            .find(|(k, _, _)| k == pod)
            .and_then(|(_, _, p)| p.uid.clone())
            .unwrap_or_else(|| pod.to_string())
    };
    let round: Vec<(String, bool)> = gathered
        .asked
        .iter()
        .map(|(pod, unreachable)| (key_of(pod), *unreachable))
        .collect();
    let silent_by_uid = {
        let mut memory = ctx.silence.lock().unwrap_or_else(|e| e.into_inner());
        silence::record(&mut memory, &round, now)
    };
    let silent_since: BTreeMap<String, Timestamp> = gathered
        .asked
        .iter()
        .filter_map(|(pod, _)| Some((pod.clone(), *silent_by_uid.get(&key_of(pod))?)))
        .collect();
    // Only this replica's member's Nodes: the other members' are not granted to it (their
    // silent pods are excused by Kafka alone).
    let local = local_member(ctx);
    let nodes: BTreeSet<String> = pods
        .iter()
        .filter(|(k, m, _)| *m == local && silent_since.contains_key(k))
        .filter_map(|(_, _, p)| p.node_name.clone())
        .collect();
    // A step polls every 20 ms at first: a Node's readiness is read at most once a second.
    let stale: BTreeSet<String> = {
        let cache = ctx.nodes.lock().unwrap_or_else(|e| e.into_inner());
        nodes
            .iter()
            .filter(|n| {
                cache
                    .get(*n)
                    .is_none_or(|(at, _)| at.elapsed() >= NODE_READ_EVERY)
            })
            .cloned()
            .collect()
    };
    if !stale.is_empty() {
        let (ready, errors) = node_readiness(&Api::<Node>::all(ctx.client.clone()), &stale).await;
        for error in errors {
            tracing::warn!(observerset = %format!("{namespace}/{name}"), %error, "node readiness unknown: its pods are not excused for it");
        }
        let mut cache = ctx.nodes.lock().unwrap_or_else(|e| e.into_inner());
        for n in &stale {
            match ready.get(n) {
                Some(&r) => cache.insert(n.clone(), (Instant::now(), r)),
                // Unreadable or without a Ready condition: unknown, asked again next pass.
                None => cache.remove(n),
            };
        }
    }
    let node_ready: BTreeMap<String, bool> = {
        let cache = ctx.nodes.lock().unwrap_or_else(|e| e.into_inner());
        nodes
            .iter()
            .filter_map(|n| Some((rollout::pod_key(local, n), cache.get(n)?.1)))
            .collect()
    };
    observe::Facts {
        silent_since,
        node_ready,
        kafka: ctx
            .liveness
            .view(&(namespace.to_string(), name.to_string())),
        now: Some(Instant::now()),
    }
}

/// The older ObserverSet that selects some of `subject`'s pods, if any: from the controller's
/// cache once it is ready, else listed.
async fn find_conflict(
    ctx: &Context,
    subject: &ObserverSet,
) -> std::result::Result<Option<Conflict>, kube::Error> {
    match ctx.ready_sets(&subject.namespace().unwrap_or_default()) {
        Some(store) => {
            let cached = store.state();
            let refs: Vec<&ObserverSet> = cached.iter().map(AsRef::as_ref).collect();
            conflict::find_among(&ctx.client, subject, &refs).await
        }
        None => conflict::find(&ctx.client, subject).await,
    }
}

/// What one reconcile writes to, and when.
struct Writer<'a> {
    copies: &'a StatusCopies,
    /// Per member: the owner of its ConfigMaps (its copy of the set) and its APIs.
    targets: &'a BTreeMap<String, (Owner, MemberApis)>,
    /// The set's name (the same in every member) and `namespace/name`, for logs.
    name: &'a str,
    object: &'a str,
    now: Timestamp,
    /// The ObserverSet's `resourceVersion` per copy as read fresh or last written by this
    /// reconcile: the precondition of its next status write.
    status_versions: Versions,
    /// Every epoch any copy showed (claimed or written): a claim goes above it.
    epoch_floor: i64,
    /// Some copy holds less than the one resumed from: the next status write goes out even if
    /// the status did not change.
    copies_behind: bool,
    /// Each (member, role)'s ConfigMap `resourceVersion` as last read or written by this
    /// reconcile: the precondition of its next write (`None`: absent when read).
    versions: BTreeMap<(String, Role), Option<String>>,
}

impl Writer<'_> {
    /// Claims this leadership's epoch: one above every epoch the copies hold, `leaderEpoch`
    /// only (`super::copies`). Returns it; `persisted` follows.
    async fn claim(&mut self, persisted: &mut ObserverSetStatus) -> Result<i64> {
        let epoch = persisted
            .writer_epoch
            .max(persisted.leader_epoch)
            .max(self.epoch_floor)
            + 1;
        self.copies
            .write(
                self.name,
                crate::writers::EPOCH_CLAIM,
                &copies::claim(epoch),
                &mut self.status_versions,
            )
            .await?;
        persisted.leader_epoch = epoch;
        Ok(epoch)
    }

    /// The status when it differs from what the API holds (`persisted`, updated on success).
    async fn persist(
        &mut self,
        next: &ObserverSetStatus,
        persisted: &mut ObserverSetStatus,
    ) -> Result<()> {
        if next != persisted || self.copies_behind {
            // The copies whose version we hold: a copy that refuses the write is dropped.
            let held = |versions: &Versions| versions.values().filter(|v| v.is_some()).count();
            let before = held(&self.status_versions);
            self.copies
                .write(
                    self.name,
                    crate::writers::ROLLOUT_STATUS,
                    &status_patch(next),
                    &mut self.status_versions,
                )
                .await?;
            *persisted = next.clone();
            // Counted on a majority, but a copy that was read may have refused it (it moved in
            // between: the engine writes there too): that copy is behind until the next pass.
            self.copies_behind = held(&self.status_versions) < before;
        }
        Ok(())
    }

    /// One decision's writes, in the apply order of the module documentation (its status is
    /// persisted by the caller): the ConfigMaps, then the nudges. The planner writes and nudges
    /// only in members that answered; a member without a target (no copy read) fails the
    /// write, which the next pass retries.
    async fn carry_out(&mut self, decision: &RolloutDecision) -> Result<()> {
        let object = self.object;
        for write in &decision.writes {
            let (owner, apis) = self.target(&write.member)?;
            let key = (write.member.clone(), write.role);
            let expected = self.versions.get(&key).cloned().flatten();
            let written = config_map::apply(
                &apis.config_maps,
                &build(owner, write.role, write.revision, write.content.clone()),
                expected.as_deref(),
            )
            .await?;
            self.versions.insert(key, written.metadata.resource_version);
            tracing::info!(observerset = %object, member = %write.member, role = %write.role, revision = write.revision, ids = ?write.ids, cause = ?write.cause, "observer list written");
        }
        // The kubelet refreshes the volume now instead of within its sync period. All pods at
        // once: the step's latency is one round trip, not one per pod.
        let mut nudges = Vec::new();
        for n in &decision.nudges {
            let (_, apis) = self.target(&n.member)?;
            nudges.push(nudge::nudge(&apis.pods, &n.pod, n.revision, self.now));
        }
        futures::future::try_join_all(nudges).await?;
        Ok(())
    }

    fn target(&self, member: &str) -> Result<(&Owner, &MemberApis)> {
        self.targets
            .get(member)
            .map(|(o, a)| (o, a))
            .ok_or_else(|| Error::NotPersisted {
                object: self.object.to_string(),
                reason: format!(
                    "member {member} holds no copy of the set this pass: nothing written there"
                ),
            })
    }
}

/// Phase Invalid with a Ready=False message saying what to fix; the ConfigMaps keep their
/// content. Counted as a reconcile error of category `invalid_spec`.
async fn invalid(
    api: &Api<ObserverSet>,
    fresh: &ObserverSet,
    previous: &ObserverSetStatus,
    problem: String,
    retry: Option<Duration>,
    ctx: &Context,
) -> Result<Action> {
    let name = fresh.name_any();
    let namespace = fresh.namespace().unwrap_or_default();
    let mut next = outcome::status_invalid(
        previous,
        fresh.metadata.generation,
        &problem,
        Timestamp::now(),
    );
    with_history(&mut next, Vec::new());
    tracing::warn!(observerset = %format!("{namespace}/{name}"), %problem, "ObserverSet cannot be used");
    ctx.metrics.reconcile_failed("invalid_spec");
    if next != *previous {
        write_verdict(api, fresh, &next).await?;
        ctx.events
            .warning(&fresh.object_ref(&()), reason::INVALID, problem)
            .await;
    }
    Ok(retry
        .map(Action::requeue)
        .unwrap_or_else(Action::await_change))
}

/// The status of a set this reconcile refuses to roll out (invalid, conflicting), on the version
/// it was read at.
async fn write_verdict(
    api: &Api<ObserverSet>,
    fresh: &ObserverSet,
    next: &ObserverSetStatus,
) -> Result<()> {
    status::apply(
        api,
        &fresh.name_any(),
        crate::writers::ROLLOUT_STATUS,
        &status_patch(next),
        fresh.metadata.resource_version.as_deref(),
    )
    .await?;
    Ok(())
}

/// Phase Conflict with a Ready=False message naming the older ObserverSet; nothing else is
/// written (no ConfigMap, no nudge; the automation stands aside on the phase). A Warning Event
/// when the verdict is new. Requeued at the resync interval; the sibling watch normally
/// triggers the next reconcile sooner (the other set deleted or changed).
async fn conflicted(
    api: &Api<ObserverSet>,
    fresh: &ObserverSet,
    previous: &ObserverSetStatus,
    conflict: &Conflict,
    ctx: &Context,
) -> Result<Action> {
    let name = fresh.name_any();
    let namespace = fresh.namespace().unwrap_or_default();
    let message = conflict.message();
    let mut next = outcome::status_conflict(
        previous,
        fresh.metadata.generation,
        &message,
        Timestamp::now(),
    );
    with_history(&mut next, Vec::new());
    if next != *previous {
        tracing::warn!(observerset = %format!("{namespace}/{name}"), other = %conflict.other, "{message}");
        write_verdict(api, fresh, &next).await?;
        ctx.events
            .warning(&fresh.object_ref(&()), reason::CONFLICT, message)
            .await;
    }
    Ok(Action::requeue(ctx.resync))
}

/// Adds the reconciler's new history entries, trims its own that fell out of the newest
/// `history::LIMIT` (the automation trims its own), and sets `status.lastAction` to the newest
/// entry of both loops: a change of the automation's entries wakes the reconciler (`super::wake`),
/// so it follows them too.
fn with_history(next: &mut ObserverSetStatus, manual: Vec<crate::crd::HistoryEntry>) {
    let merged = history::record(&next.history, manual);
    let mut kept = history::own(&next.history, true);
    kept.extend(history::own(&merged, false));
    next.history = kept;
    next.last_action = history::newest(&next.history);
}

/// Events, logs and metrics of one pass: `notes` (the rollout's happenings', then the member
/// clusters' changes) and the rollout's metrics.
async fn report(
    ctx: &Context,
    obj: &ObserverSet,
    namespace: &str,
    name: &str,
    happenings: &[Happening],
    notes: Vec<outcome::Note>,
    status: &ObserverSetStatus,
) {
    let labels = ObserverSetLabels::new(namespace, name);
    let reference = obj.object_ref(&());
    for happening in happenings {
        if let Happening::StepAcknowledged { role, took, .. } = happening {
            ctx.metrics.rollout_step_finished(role.as_str(), *took);
        }
    }
    let copies: Vec<(EventType, String, String)> = notes
        .iter()
        .map(|n| (n.event_type(), n.reason.to_string(), n.text.clone()))
        .collect();
    ctx.member_events.send(namespace, name, RECONCILE, &copies);
    for note in notes {
        if note.warning {
            tracing::warn!(observerset = %format!("{namespace}/{name}"), reason = note.reason, "{}", note.text);
        } else {
            tracing::info!(observerset = %format!("{namespace}/{name}"), reason = note.reason, "{}", note.text);
        }
        ctx.events
            .publish(
                &reference,
                note.event_type(),
                note.reason,
                RECONCILE,
                note.text,
            )
            .await;
    }
    ctx.metrics.set_observer_set_state(
        &labels,
        ObserverSetState {
            desired_observers: status.desired_observers.len(),
            effective_observers: status.effective_observers.len(),
            rollout_in_progress: status.rollout.is_some(),
            degraded: status.phase == Some(Phase::Degraded),
        },
    );
}

/// Deletion: Retain releases the ConfigMaps (content kept), Delete removes them once no pod
/// mounts them. Until then the finalizer stays and a Warning says which pods block it.
async fn cleanup(obj: &ObserverSet, ctx: &Context) -> Result<Action> {
    let name = obj.name_any();
    let namespace = obj.namespace().ok_or(Error::MissingMetadata("namespace"))?;
    let uid = obj.uid().ok_or(Error::MissingMetadata("uid"))?;
    let config_maps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &namespace);
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let reference = obj.object_ref(&());
    let labels = ObserverSetLabels::new(&namespace, &name);
    let list = |names: &[String]| match names {
        [] => "(none)".to_string(),
        names => names.join(", "),
    };
    match clean_up(
        &config_maps,
        &pods,
        &namespace,
        &name,
        &uid,
        obj.spec.deletion_policy,
    )
    .await
    {
        Ok(done) => {
            let note = match done {
                Cleanup::Retained(names) => format!(
                    "deletionPolicy Retain: ConfigMaps {} kept with their content, owner reference removed",
                    names.join(", ")
                ),
                Cleanup::Deleted { deleted, not_owned } if not_owned.is_empty() => {
                    format!("deletionPolicy Delete: ConfigMaps {} deleted", list(&deleted))
                }
                Cleanup::Deleted { deleted, not_owned } => format!(
                    "deletionPolicy Delete: ConfigMaps {} deleted; {} kept: not owned by this ObserverSet (no owner reference with its uid), so not ours to delete",
                    list(&deleted),
                    not_owned.join(", ")
                ),
            };
            crate::crd::memo::TOPIC_FILTERS.forget(&uid);
            tracing::info!(observerset = %format!("{namespace}/{name}"), "{note}");
            ctx.events
                .normal(&reference, reason::CLEANED_UP, note)
                .await;
            ctx.metrics.forget_observer_set(&labels);
            Ok(Action::await_change())
        }
        Err(e @ Error::Finalizer { .. }) => {
            ctx.events
                .warning(&reference, reason::DELETION_BLOCKED, e.to_string())
                .await;
            Err(e)
        }
        Err(e) => Err(e),
    }
}
