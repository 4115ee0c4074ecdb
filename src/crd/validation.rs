//! Validate once: turn a raw ObserverSet into the model every later stage works from.
//!
//! The apiserver already enforces the same rules through the schema and CEL; this is defence in
//! depth (an old CRD installed, a rule that CEL cannot express such as regex syntax) and the
//! only place the rest of the code learns about the spec. Downstream code takes
//! [`ValidatedObserverSet`], never the raw spec.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::ResourceExt;

use super::bootstrap::{parse_bootstrap_servers, BootstrapError};
use super::bounds::{
    time_mode_settle_message, DurationFieldError, AGENT_PORT, CONFIRMATIONS, COOLDOWN,
    JVM_CACHE_TTL, MAX_CONCURRENT, MAX_IDS, MAX_NODE_ID, MAX_TOPIC_PATTERNS, ROLLOUT_TIMEOUT,
    SCAN_INTERVAL, SETTLE_TIME, STABILIZATION_WINDOW, TIME_MODE_MIN_SETTLE,
    TOPIC_FILTER_MAX_COMPILED_BYTES,
};
use super::clusters::{self, ClustersViolation};
use super::kafka::{SaslSpec, TlsSpec};
use super::memo;
use super::nodes::{NodeIdSource, RoleNodes};
use super::promotion::PromotionPolicy;
use super::rollout::AckMode;
use super::spec::{DeletionPolicy, ObserverSet};
use super::topic_filter::CompiledTopicFilter;
use super::{NodeId, Role};

/// One thing wrong with a spec, worded as what to change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecViolation {
    #[error("metadata.name {0:?} has {len} characters: use at most 63 (it becomes a label value of the observer ConfigMaps)", len = .0.len())]
    NameTooLong(String),
    #[error(transparent)]
    Bootstrap(#[from] BootstrapError),
    #[error(
        "spec.nodes has neither controllers nor brokers: add a selector for at least one role"
    )]
    NoRoles,
    #[error("spec.nodes is missing: add the selectors of the controllers' and brokers' pods")]
    NoNodes,
    #[error("spec.nodes and spec.clusters are both set: give nodes for the pods of one Kubernetes cluster, or clusters for one Kafka cluster over several, not both")]
    NodesAndClusters,
    #[error(transparent)]
    Clusters(#[from] ClustersViolation),
    #[error("spec.nodes describes the pods of one Kubernetes cluster, but this operator runs over the member clusters {0}: give spec.clusters, the pods of each member (docs/multi-cluster.md), or manage this set with an operator installed without multiCluster.members")]
    NodesOverMembers(String),
    #[error("spec.nodes.controllers is missing but the brokers are not combined-mode: add controllers or set brokers.combined: true")]
    ControllersMissing,
    #[error("spec.nodes.{0}s.selector is empty and would match every pod: add matchLabels or matchExpressions")]
    EmptySelector(Role),
    #[error("spec.nodes.{0}s.selector is not a valid label selector ({1}): use operators In, NotIn, Exists or DoesNotExist with values only for In and NotIn")]
    BadSelector(Role, String),
    #[error("spec.nodes.{0}s.nodeId must set exactly one of label or ordinalOffset")]
    NodeIdSource(Role),
    #[error("spec.nodes.{0}s.nodeId.label {1:?} is not a label key: write [prefix/]name, for example kafkaobserver.io/node-id")]
    NodeIdLabel(Role, String),
    #[error(
        "spec.nodes.{0}s.nodeId.ordinalOffset is {1}: use a value between 0 and {MAX_NODE_ID}"
    )]
    NegativeOffset(Role, i32),
    #[error("spec.{field} contains {id}: Kafka node ids are between 0 and {MAX_NODE_ID}")]
    NodeIdOutOfRange { field: &'static str, id: NodeId },
    #[error("spec.{field} lists {count} ids: list at most {MAX_IDS}")]
    TooManyIds { field: &'static str, count: usize },
    #[error("spec.observers lists {0} more than once: list each node id once")]
    DuplicateObserver(NodeId),
    #[error("spec.promotion.promoted lists {0}, which is not in spec.observers: promote only declared observers")]
    PromotedNotObserver(NodeId),
    #[error("spec.promotion.promoted lists {0} more than once: list each node id once")]
    DuplicatePromoted(NodeId),
    #[error("spec.promotion.confirmations is {0}: use {min} to {max}", min = CONFIRMATIONS.0, max = CONFIRMATIONS.1)]
    Confirmations(i32),
    #[error("spec.promotion.maxConcurrentPromotions is {0}: use {min} to {max}", min = MAX_CONCURRENT.0, max = MAX_CONCURRENT.1)]
    MaxConcurrent(i32),
    #[error("spec.promotion.maxLagMessages is {0}: use 0 or more")]
    MaxLag(i64),
    #[error(transparent)]
    Duration(#[from] DurationFieldError),
    #[error("spec.promotion.topics.{list} has {count} patterns: use at most {MAX_TOPIC_PATTERNS}")]
    TooManyTopicPatterns { list: &'static str, count: usize },
    #[error("spec.promotion.topics.{list}[{index}] {pattern:?} is not a valid regex: {message}")]
    TopicRegex {
        list: &'static str,
        index: usize,
        pattern: String,
        message: String,
    },
    #[error("spec.promotion.topics.{list} compiles to more than {} KiB: use fewer or simpler patterns (each Unicode class such as \\w costs tens of KiB and a counted repetition such as {{100}} multiplies it; topic names are ASCII, so write [a-zA-Z0-9._-] or (?-u:\\w))", TOPIC_FILTER_MAX_COMPILED_BYTES >> 10)]
    TopicFilterTooLarge { list: &'static str },
    #[error("spec.rollout.agentPort is {0}: use a port between {min} and {max}", min = AGENT_PORT.0, max = AGENT_PORT.1)]
    AgentPort(i32),
    #[error(
        "spec.rollout.timeout must be longer than settleTime, or Time-mode rollouts always degrade"
    )]
    TimeoutNotAfterSettle,
    #[error("spec.{}", time_mode_settle_message())]
    SettleTooShortForTime,
    #[error("{SASL_WITHOUT_TLS}")]
    SaslWithoutTls,
}

/// Why `sasl` needs `tls`, as the CRD's CEL rule and the operator both say it.
pub const SASL_WITHOUT_TLS: &str = "spec.kafka.sasl needs spec.kafka.tls: without TLS the operator would send the Secret's credentials (with PLAIN the password itself, in clear text) to whatever host bootstrapServers names; add kafka.tls.caSecretRef with the CA that signed the brokers' certificates";

/// Every problem found in a spec, so the user fixes them in one edit rather than one per reconcile.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", violations.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct SpecError {
    pub violations: Vec<SpecViolation>,
}

/// How a pod's node id is derived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeIdRule {
    Label(String),
    OrdinalOffset(i32),
}

/// The pods of one role, as the pod reader needs them.
#[derive(Debug, Clone, PartialEq)]
pub struct RoleSelection {
    pub role: Role,
    /// The member cluster whose pods these are: `crate::rollout::LOCAL` for `spec.nodes`, a
    /// name of `spec.clusters` otherwise.
    pub member: String,
    pub selector: LabelSelector,
    pub node_id: NodeIdRule,
    /// Broker pods that also run a controller (their single file serves both).
    pub combined: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ValidatedKafka {
    pub bootstrap_servers: Vec<String>,
    pub tls: Option<TlsSpec>,
    pub sasl: Option<SaslSpec>,
}

#[derive(Debug, Clone)]
pub struct ValidatedPromotion {
    pub policy: PromotionPolicy,
    pub promoted: BTreeSet<NodeId>,
    pub max_lag_messages: i64,
    pub confirmations: u32,
    pub scan_interval: Duration,
    pub cooldown: Duration,
    pub max_concurrent_promotions: u32,
    pub topics: CompiledTopicFilter,
    pub dry_run: bool,
    /// `None` when automatic demotion is disabled.
    pub auto_demote_after: Option<Duration>,
    pub unclean_takeover: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ValidatedRollout {
    pub acknowledgement: AckMode,
    pub agent_port: u16,
    pub settle_time: Duration,
    pub timeout: Duration,
    pub jvm_cache_ttl: Duration,
}

/// An ObserverSet whose spec passed every rule; the only model later stages read.
#[derive(Debug, Clone)]
pub struct ValidatedObserverSet {
    pub name: String,
    pub namespace: String,
    pub generation: Option<i64>,
    pub kafka: ValidatedKafka,
    /// Configured roles in rollout order (controllers first).
    pub roles: Vec<RoleSelection>,
    pub observers: BTreeSet<NodeId>,
    pub promotion: ValidatedPromotion,
    pub rollout: ValidatedRollout,
    pub deletion_policy: DeletionPolicy,
}

impl ValidatedObserverSet {
    /// Whether the given role has pods to write to.
    pub fn has_role(&self, role: Role) -> bool {
        self.roles.iter().any(|r| r.role == role)
    }
}

/// Checks every rule of docs/api.md and returns the validated model or every violation, for an
/// operator of one Kubernetes cluster: a set with `spec.clusters` is refused.
pub fn validate(obs: &ObserverSet) -> Result<ValidatedObserverSet, SpecError> {
    validate_over(obs, None)
}

/// [`validate`] for an operator run over member clusters (`--members`, in that order): the set
/// must then give `spec.clusters` naming exactly those members, and its roles come one per
/// (role, member), controllers of every member first. `None`: one cluster, as [`validate`].
pub fn validate_over(
    obs: &ObserverSet,
    members: Option<&[String]>,
) -> Result<ValidatedObserverSet, SpecError> {
    let spec = &obs.spec;
    let mut errors = Vec::new();

    let name = obs.name_any();
    if name.len() > 63 {
        errors.push(SpecViolation::NameTooLong(name.clone()));
    }
    let bootstrap_servers =
        parse_bootstrap_servers(&spec.kafka.bootstrap_servers).unwrap_or_else(|bad| {
            errors.extend(bad.into_iter().map(SpecViolation::from));
            Vec::new()
        });

    let roles = match (&spec.nodes, &spec.clusters) {
        (Some(_), None) if members.is_some() => {
            errors.push(SpecViolation::NodesOverMembers(
                members.unwrap_or_default().join(", "),
            ));
            Vec::new()
        }
        (Some(nodes), None) => role_selections(
            nodes.controllers.as_ref(),
            nodes.brokers.as_ref(),
            &mut errors,
        ),
        (Some(_), Some(_)) => {
            errors.push(SpecViolation::NodesAndClusters);
            Vec::new()
        }
        (None, None) => {
            errors.push(SpecViolation::NoNodes);
            Vec::new()
        }
        // Checked as far as the object allows, then against the operator's members.
        (None, Some(clusters)) => {
            match clusters::selections(clusters, members, spec.deletion_policy) {
                Ok(roles) => roles,
                Err(found) => {
                    errors.extend(found.into_iter().map(SpecViolation::from));
                    Vec::new()
                }
            }
        }
    };

    let observers = node_ids("observers", &spec.observers, &mut errors);
    let observers = unique_ids(&observers, SpecViolation::DuplicateObserver, &mut errors);
    let p = &spec.promotion;
    let promoted = node_ids("promotion.promoted", &p.promoted, &mut errors);
    let promoted = unique_ids(&promoted, SpecViolation::DuplicatePromoted, &mut errors);
    for &id in promoted.iter().filter(|id| !observers.contains(id)) {
        errors.push(SpecViolation::PromotedNotObserver(id));
    }
    if !(CONFIRMATIONS.0..=CONFIRMATIONS.1).contains(&p.confirmations) {
        errors.push(SpecViolation::Confirmations(p.confirmations));
    }
    if !(MAX_CONCURRENT.0..=MAX_CONCURRENT.1).contains(&p.max_concurrent_promotions) {
        errors.push(SpecViolation::MaxConcurrent(p.max_concurrent_promotions));
    }
    if p.max_lag_messages < 0 {
        errors.push(SpecViolation::MaxLag(p.max_lag_messages));
    }
    let mut duration = |bounds: super::bounds::DurationBounds, value: &str| {
        bounds.parse(value).unwrap_or_else(|e| {
            errors.push(e.into());
            Duration::ZERO
        })
    };
    let scan_interval = duration(SCAN_INTERVAL, &p.scan_interval);
    let cooldown = duration(COOLDOWN, &p.cooldown);
    let stabilization = duration(STABILIZATION_WINDOW, &p.auto_demote.stabilization_window);
    let settle_time = duration(SETTLE_TIME, &spec.rollout.settle_time);
    let timeout = duration(ROLLOUT_TIMEOUT, &spec.rollout.timeout);
    let jvm_cache_ttl = duration(JVM_CACHE_TTL, &spec.rollout.jvm_cache_ttl);
    let compiled = memo::TOPIC_FILTERS.compile(
        obs.metadata.uid.as_deref(),
        obs.metadata.generation,
        &p.topics,
    );
    let topics = compiled.unwrap_or_else(|bad| {
        errors.extend(bad);
        CompiledTopicFilter::all()
    });

    let agent_port = u16::try_from(spec.rollout.agent_port)
        .ok()
        .filter(|_| (AGENT_PORT.0..=AGENT_PORT.1).contains(&spec.rollout.agent_port));
    if agent_port.is_none() {
        errors.push(SpecViolation::AgentPort(spec.rollout.agent_port));
    }
    if spec.kafka.sasl.is_some() && spec.kafka.tls.is_none() {
        errors.push(SpecViolation::SaslWithoutTls);
    }
    let time_mode = spec.rollout.acknowledgement == AckMode::Time;
    if time_mode && timeout <= settle_time {
        errors.push(SpecViolation::TimeoutNotAfterSettle);
    }
    if time_mode && settle_time < TIME_MODE_MIN_SETTLE {
        errors.push(SpecViolation::SettleTooShortForTime);
    }

    if !errors.is_empty() {
        return Err(SpecError { violations: errors });
    }
    Ok(ValidatedObserverSet {
        name,
        namespace: obs.namespace().unwrap_or_default(),
        generation: obs.metadata.generation,
        kafka: ValidatedKafka {
            bootstrap_servers,
            tls: spec.kafka.tls.clone(),
            sasl: spec.kafka.sasl.clone(),
        },
        roles,
        observers,
        promotion: ValidatedPromotion {
            policy: p.policy,
            promoted,
            max_lag_messages: p.max_lag_messages,
            confirmations: p.confirmations as u32,
            scan_interval,
            cooldown,
            max_concurrent_promotions: p.max_concurrent_promotions as u32,
            topics,
            dry_run: p.dry_run,
            auto_demote_after: p.auto_demote.enabled.then_some(stabilization),
            unclean_takeover: p.unclean_takeover,
        },
        rollout: ValidatedRollout {
            acknowledgement: spec.rollout.acknowledgement,
            agent_port: agent_port.unwrap_or_default(),
            settle_time,
            timeout,
            jvm_cache_ttl,
        },
        deletion_policy: spec.deletion_policy,
    })
}

pub(super) fn role_selections(
    controllers: Option<&RoleNodes>,
    brokers: Option<&RoleNodes>,
    errors: &mut Vec<SpecViolation>,
) -> Vec<RoleSelection> {
    match (controllers, brokers) {
        (None, None) => errors.push(SpecViolation::NoRoles),
        (None, Some(b)) if !b.combined => errors.push(SpecViolation::ControllersMissing),
        _ => {}
    }
    [(Role::Controller, controllers), (Role::Broker, brokers)]
        .into_iter()
        .filter_map(|(role, nodes)| nodes.map(|n| (role, n)))
        .filter_map(|(role, nodes)| role_selection(role, nodes, errors))
        .collect()
}

fn role_selection(
    role: Role,
    nodes: &RoleNodes,
    errors: &mut Vec<SpecViolation>,
) -> Option<RoleSelection> {
    let sel = &nodes.selector;
    let has_labels = sel.match_labels.as_ref().is_some_and(|m| !m.is_empty());
    let has_exprs = sel
        .match_expressions
        .as_ref()
        .is_some_and(|e| !e.is_empty());
    if !has_labels && !has_exprs {
        errors.push(SpecViolation::EmptySelector(role));
    } else if let Err(e) = kube::core::Selector::try_from(sel.clone()) {
        errors.push(SpecViolation::BadSelector(role, e.to_string()));
    }
    let node_id = match &nodes.node_id {
        NodeIdSource {
            label: Some(label),
            ordinal_offset: None,
        } if is_label_key(label) => NodeIdRule::Label(label.clone()),
        NodeIdSource {
            label: Some(label),
            ordinal_offset: None,
        } => {
            errors.push(SpecViolation::NodeIdLabel(role, label.clone()));
            return None;
        }
        NodeIdSource {
            label: None,
            ordinal_offset: Some(offset),
        } if *offset >= 0 => NodeIdRule::OrdinalOffset(*offset),
        NodeIdSource {
            label: None,
            ordinal_offset: Some(offset),
        } => {
            errors.push(SpecViolation::NegativeOffset(role, *offset));
            return None;
        }
        _ => {
            errors.push(SpecViolation::NodeIdSource(role));
            return None;
        }
    };
    Some(RoleSelection {
        role,
        member: crate::rollout::LOCAL.to_string(),
        selector: sel.clone(),
        node_id,
        combined: nodes.combined,
    })
}

/// The ids that are Kafka node ids; reports the others and an over-long list.
fn node_ids(field: &'static str, ids: &[NodeId], errors: &mut Vec<SpecViolation>) -> Vec<NodeId> {
    if ids.len() > MAX_IDS {
        errors.push(SpecViolation::TooManyIds {
            field,
            count: ids.len(),
        });
    }
    let (good, bad): (Vec<NodeId>, Vec<NodeId>) = ids.iter().partition(|&&id| id >= 0);
    errors.extend(
        bad.into_iter()
            .map(|id| SpecViolation::NodeIdOutOfRange { field, id }),
    );
    good
}

/// A Kubernetes label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters (alphanumerics, `-`, `_`, `.`; alphanumeric at both ends).
pub fn is_label_key(key: &str) -> bool {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && l.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            })
    });
    name_ok && prefix_ok
}

fn unique_ids(
    ids: &[NodeId],
    dup: fn(NodeId) -> SpecViolation,
    errors: &mut Vec<SpecViolation>,
) -> BTreeSet<NodeId> {
    let mut seen = BTreeSet::new();
    let mut reported = BTreeSet::new();
    for &id in ids {
        if !seen.insert(id) && reported.insert(id) {
            errors.push(dup(id));
        }
    }
    seen
}

#[cfg(test)]
#[path = "validation_tests.rs"]
mod tests;
