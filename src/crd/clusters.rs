//! `spec.clusters`: one Kafka cluster over several Kubernetes clusters, the pods of each member
//! cluster (docs/multi-cluster.md, "One ObserverSet per member, the same spec").
//!
//! The schema and `validate` check what can be checked in the object alone (names, the per-member
//! node rules, an ordinal offset two members share), then the members against the operator's
//! `--members`: an operator of one cluster refuses the set, one over other members too. What
//! the operator does not do across members yet (the promotion engine) is refused by name.

use std::collections::BTreeSet;

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use super::nodes::NodesSpec;
use super::spec::DeletionPolicy;
use super::validation::{role_selections, RoleSelection};
use super::Role;

/// At most this many members: each is one more Lease to renew and one more apiserver on every
/// step of a rollout. Five tolerate two lost clusters.
pub const MAX_CLUSTERS: usize = 5;

/// How many members a stretched cluster may have, in `spec.clusters` and `--members` alike: an
/// odd number from 3 to `MAX_CLUSTERS` (a majority of them decides which replica acts; an even
/// number tolerates no more lost members than one fewer).
pub fn is_member_count(count: usize) -> bool {
    (3..=MAX_CLUSTERS).contains(&count) && !count.is_multiple_of(2)
}

/// CEL: an odd number of members from 3 to `MAX_CLUSTERS`, each named once.
pub const CLUSTERS_COUNT_RULE: &str = "size(self) >= 3 && size(self) % 2 == 1";
pub const CLUSTERS_UNIQUE_RULE: &str = "self.all(c, self.filter(x, x.name == c.name).size() == 1)";

/// The pods of one member cluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberCluster {
    /// The member's name, as the operator's `--members` gives it (a DNS label).
    #[schemars(length(min = 1, max = 63))]
    #[x_kube(validation = Rule::new("self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')").message("clusters[].name must be a DNS label (lower-case letters, digits and '-'), as in the operator's --members"))]
    pub name: String,
    /// Which pods of this member run controllers and brokers, and their node ids (as
    /// `spec.nodes` for one cluster).
    pub nodes: NodesSpec,
}

/// What is wrong with `spec.clusters`, worded as what to change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClustersViolation {
    #[error("spec.clusters names {0} member clusters: name an odd number, 3 or 5 (a majority of them decides which operator replica acts)")]
    Count(usize),
    #[error("spec.clusters[].name {0:?} is not a DNS label (lower-case letters, digits and '-', at most 63): use the member's name from the operator's --members")]
    Name(String),
    #[error("spec.clusters names member {0:?} twice: name each member once")]
    Duplicate(String),
    /// A `spec.nodes` rule broken inside one member, reported at its path there.
    #[error("{}", .violation.replacen("spec.nodes", &format!("spec.clusters[{}].nodes", .member), 1))]
    InMember { member: String, violation: String },
    #[error("spec.clusters[{first}].nodes.{first_role}s and spec.clusters[{second}].nodes.{second_role}s both use nodeId.ordinalOffset {offset}: pod ordinal 0 of each would claim node id {offset}; give each member's StatefulSets their own node id range")]
    SharedOffset {
        offset: i32,
        first: String,
        first_role: Role,
        second: String,
        second_role: Role,
    },
    #[error("spec.clusters ({0}) describes one Kafka cluster over several Kubernetes clusters, and this operator manages one cluster (it was not given --members): nothing is written for this ObserverSet; install the operator in every member with the chart's multiCluster values (docs/multi-cluster.md), or use spec.nodes for the pods of one cluster")]
    NotManagedYet(String),
    #[error("spec.clusters names the members {spec}, but the operator runs over {operator} (--members): name exactly the operator's members, each once")]
    MembersDiffer { spec: String, operator: String },
    #[error("spec.deletionPolicy is Delete: across member clusters the lists carry no owner reference (deleting one member's copy must not delete that member's lists), so deleting the ObserverSet cannot delete them yet; set deletionPolicy Retain and delete the ConfigMaps yourself when the Kafka cluster is gone")]
    DeleteAcrossMembers,
}

/// The role selections of `clusters`, one per (role, member) with pods of that role, controllers
/// of every member first, each role's members in `members`' order; or every violation:
/// first what is wrong in the object itself, else against the operator's members (`None`: an
/// operator of one cluster, [`ClustersViolation::NotManagedYet`]).
pub(super) fn selections(
    clusters: &[MemberCluster],
    members: Option<&[String]>,
    deletion: DeletionPolicy,
) -> Result<Vec<RoleSelection>, Vec<ClustersViolation>> {
    let found = violations(clusters);
    if !found.is_empty() {
        return Err(found);
    }
    let names: Vec<&str> = clusters.iter().map(|c| c.name.as_str()).collect();
    let Some(members) = members else {
        return Err(vec![ClustersViolation::NotManagedYet(names.join(", "))]);
    };
    let mut found = Vec::new();
    let spec_set: BTreeSet<&str> = names.iter().copied().collect();
    let operator_set: BTreeSet<&str> = members.iter().map(String::as_str).collect();
    if spec_set != operator_set {
        found.push(ClustersViolation::MembersDiffer {
            spec: names.join(", "),
            operator: members.join(", "),
        });
    }
    if deletion == DeletionPolicy::Delete {
        found.push(ClustersViolation::DeleteAcrossMembers);
    }
    if !found.is_empty() {
        return Err(found);
    }
    let mut roles = Vec::new();
    for member in members {
        let Some(cluster) = clusters.iter().find(|c| &c.name == member) else {
            continue;
        };
        let nodes = &cluster.nodes;
        let mut inner = Vec::new();
        for mut selection in role_selections(
            nodes.controllers.as_ref(),
            nodes.brokers.as_ref(),
            &mut inner,
        ) {
            selection.member = member.clone();
            roles.push(selection);
        }
    }
    // Stable: within a role, the members' order.
    roles.sort_by_key(|r| r.role != Role::Controller);
    Ok(roles)
}

/// Every violation of `clusters` the object alone shows.
fn violations(clusters: &[MemberCluster]) -> Vec<ClustersViolation> {
    let mut found = Vec::new();
    if !is_member_count(clusters.len()) {
        found.push(ClustersViolation::Count(clusters.len()));
    }
    let mut names = BTreeSet::new();
    let mut offsets: Vec<(i32, &str, Role)> = Vec::new();
    for member in clusters {
        if !is_dns_label(&member.name) {
            found.push(ClustersViolation::Name(member.name.clone()));
        }
        if !names.insert(member.name.as_str()) {
            found.push(ClustersViolation::Duplicate(member.name.clone()));
        }
        let mut inner = Vec::new();
        let nodes = &member.nodes;
        role_selections(
            nodes.controllers.as_ref(),
            nodes.brokers.as_ref(),
            &mut inner,
        );
        found.extend(inner.into_iter().map(|v| ClustersViolation::InMember {
            member: member.name.clone(),
            violation: v.to_string(),
        }));
        for (role, nodes) in [
            (Role::Controller, nodes.controllers.as_ref()),
            (Role::Broker, nodes.brokers.as_ref()),
        ] {
            let Some(offset) = nodes.and_then(|n| n.node_id.ordinal_offset) else {
                continue;
            };
            // Two roles of one member sharing an offset is the single-cluster rule's business
            // (combined mode); across members the same offset always collides at ordinal 0.
            if let Some((_, first, first_role)) = offsets
                .iter()
                .find(|(o, m, _)| *o == offset && *m != member.name)
            {
                found.push(ClustersViolation::SharedOffset {
                    offset,
                    first: first.to_string(),
                    first_role: *first_role,
                    second: member.name.clone(),
                    second_role: role,
                });
            }
            offsets.push((offset, &member.name, role));
        }
    }
    found
}

/// A DNS label (RFC 1123): what member names must be, in the CRD and in `--members`.
pub fn is_dns_label(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

#[cfg(test)]
#[path = "clusters_tests.rs"]
mod tests;
