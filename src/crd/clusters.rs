//! `spec.clusters`: one Kafka cluster over several Kubernetes clusters, the pods of each member
//! cluster (docs/multi-cluster.md, "One ObserverSet per member, the same spec").
//!
//! The schema and `validate` check what can be checked in the object alone (names, the per-member
//! node rules, an ordinal offset two members share); the operator does not yet write observer
//! lists across members, so `validate` then refuses the set with a message saying so, and no
//! stage after it ever sees `clusters`.

use std::collections::BTreeSet;

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use super::nodes::NodesSpec;
use super::validation::role_selections;
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
    #[error("spec.clusters ({0}) describes one Kafka cluster over several Kubernetes clusters, and this operator version does not write observer lists across member clusters yet (docs/multi-cluster.md, build order step 9): nothing is written for this ObserverSet; use spec.nodes for the pods of one cluster")]
    NotManagedYet(String),
}

/// Every violation of `clusters`; with none found, [`ClustersViolation::NotManagedYet`].
pub(super) fn violations(clusters: &[MemberCluster]) -> Vec<ClustersViolation> {
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
    if found.is_empty() {
        let names: Vec<&str> = clusters.iter().map(|c| c.name.as_str()).collect();
        found.push(ClustersViolation::NotManagedYet(names.join(", ")));
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
