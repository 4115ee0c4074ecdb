//! Two ObserverSets that select the same pods would write competing observer lists and nudge the
//! same pods. The older one (by `creationTimestamp`, then name) keeps the pods; the newer one is
//! in conflict: phase `Conflict`, a condition naming the older one, and nothing written, nudged
//! or automated for it until the overlap is gone (the older one deleted or either selector
//! changed).
//!
//! Two sets overlap when a pod of their namespace is picked by a role selector of each (any
//! role of one, any role of the other), or when they have an identical role selector (which
//! picks the same pods even before any exist). An ObserverSet being deleted claims nothing: it
//! only runs its cleanup. The decision is pure ([`conflict_of`]); [`find`] reads its inputs.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, ListParams};
use kube::{Client, Resource, ResourceExt};

use super::pods::selects;
use crate::crd::{NodesSpec, ObserverSet};

/// At most this many shared pods are named in the condition.
const NAMED_PODS: usize = 5;

/// Why an ObserverSet must stand aside.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// Namespace of both sets.
    pub namespace: String,
    /// The older ObserverSet that keeps the pods.
    pub other: String,
    /// Pods both select, sorted (all of them; the message names the first few).
    pub shared_pods: Vec<String>,
    /// The two sets have an identical role selector.
    pub identical_selector: bool,
}

impl Conflict {
    /// The condition message: who holds the pods and what to change.
    pub fn message(&self) -> String {
        let what = if self.shared_pods.is_empty() {
            "has an identical pod selector".to_string()
        } else {
            let named: Vec<&str> = self
                .shared_pods
                .iter()
                .take(NAMED_PODS)
                .map(String::as_str)
                .collect();
            let more = self.shared_pods.len().saturating_sub(NAMED_PODS);
            format!(
                "already selects pod(s) {}{}",
                named.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            )
        };
        format!(
            "ObserverSet {}/{} (older) {what}: nothing is written, nudged or automated for this ObserverSet until its spec.nodes selectors pick other pods or {} is deleted",
            self.namespace, self.other, self.other
        )
    }
}

/// Ordering of claims: older first, the name breaks ties.
fn age_key(set: &ObserverSet) -> (Option<k8s_openapi::jiff::Timestamp>, String) {
    (
        set.meta().creation_timestamp.as_ref().map(|t| t.0),
        set.name_any(),
    )
}

fn role_selectors(set: &ObserverSet) -> Vec<&LabelSelector> {
    set.spec.role_nodes().map(|r| &r.selector).collect()
}

fn selected<'p>(set: &ObserverSet, pods: &'p [PodLabels]) -> Vec<&'p str> {
    let roles: Vec<_> = set.spec.role_nodes().collect();
    pods.iter()
        .filter(|p| roles.iter().any(|r| selects(r, &p.labels)))
        .map(|p| p.name.as_str())
        .collect()
}

/// A pod's name and labels: all the conflict decision needs of a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodLabels {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

/// The oldest ObserverSet of `subject`'s namespace that is older than `subject`, not being
/// deleted, and overlaps it (pure). `sets` may include `subject` itself and sets of other
/// namespaces; `pods` are the pods of `subject`'s namespace.
pub fn conflict_of(
    subject: &ObserverSet,
    sets: &[&ObserverSet],
    pods: &[PodLabels],
) -> Option<Conflict> {
    if subject.meta().deletion_timestamp.is_some() {
        return None;
    }
    let namespace = subject.namespace();
    let mine = selected(subject, pods);
    let my_selectors = role_selectors(subject);
    let mut older: Vec<&ObserverSet> = sets
        .iter()
        .copied()
        .filter(|s| s.namespace() == namespace)
        .filter(|s| s.meta().deletion_timestamp.is_none())
        .filter(|s| age_key(s) < age_key(subject))
        .collect();
    older.sort_by_key(|s| age_key(s));
    older.into_iter().find_map(|other| {
        let theirs = selected(other, pods);
        let mut shared_pods: Vec<String> = mine
            .iter()
            .filter(|p| theirs.contains(p))
            .map(|p| p.to_string())
            .collect();
        shared_pods.sort();
        let identical_selector = role_selectors(other)
            .iter()
            .any(|s| my_selectors.contains(s));
        (identical_selector || !shared_pods.is_empty()).then(|| Conflict {
            namespace: namespace.clone().unwrap_or_default(),
            other: other.name_any(),
            shared_pods,
            identical_selector,
        })
    })
}

/// Reads the ObserverSets and pods of `subject`'s namespace and decides.
pub async fn find(client: &Client, subject: &ObserverSet) -> Result<Option<Conflict>, kube::Error> {
    let namespace = subject.namespace().unwrap_or_default();
    let sets: Api<ObserverSet> = Api::namespaced(client.clone(), &namespace);
    let sets = sets.list(&ListParams::default()).await?;
    let refs: Vec<&ObserverSet> = sets.items.iter().collect();
    find_among(client, subject, &refs).await
}

/// Decides with `sets` as the ObserverSets (the controller's complete cache; `subject` is the
/// caller's own read), reading the pods of the namespace only when an older set that could
/// keep them exists there.
pub async fn find_among(
    client: &Client,
    subject: &ObserverSet,
    sets: &[&ObserverSet],
) -> Result<Option<Conflict>, kube::Error> {
    let namespace = subject.namespace();
    let any_older = sets.iter().any(|s| {
        s.namespace() == namespace
            && s.meta().deletion_timestamp.is_none()
            && age_key(s) < age_key(subject)
    });
    if !any_older {
        return Ok(None);
    }
    let namespace = namespace.unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    // From the watch cache, as the role pods are (dereference::list_role_pods says why); a pod
    // event wakes the conflict check again.
    let pods = pods
        .list_metadata(&ListParams::default().match_any())
        .await?;
    let pods: Vec<PodLabels> = pods
        .items
        .into_iter()
        .map(|p| PodLabels {
            name: p.name_any(),
            labels: p.metadata.labels.unwrap_or_default(),
        })
        .collect();
    Ok(conflict_of(subject, sets, &pods))
}

/// Whether an event on `changed` can change the conflict verdict of `sibling` (pure): a sibling
/// in conflict may be free now; a newer sibling may now overlap `changed`, unless `changed` is
/// being deleted (it then only frees pods). Without that exception, deleting a namespace of n
/// ObserverSets would wake n²/2 reconciles.
pub fn concerns(changed: &ObserverSet, sibling: &ObserverSet) -> bool {
    let frees_only = changed.meta().deletion_timestamp.is_some();
    sibling.namespace() == changed.namespace()
        && sibling.name_any() != changed.name_any()
        && (in_conflict(sibling) || (!frees_only && age_key(sibling) > age_key(changed)))
}

/// What of an ObserverSet can change a sibling's conflict verdict: the pods it selects, and
/// whether it still claims them (being deleted, it claims nothing).
#[derive(Clone, Debug, PartialEq)]
struct Claim {
    uid: Option<String>,
    nodes: Option<NodesSpec>,
    deleting: bool,
}

/// Each ObserverSet's claim as the sibling watch last saw it, so that only a change of claim
/// (a set created, its selectors changed, its deletion begun) wakes its siblings. Status writes
/// and observer-list changes do not: with 200 sets in one namespace, waking every newer sibling
/// on each of them queued up to 199 reconciles per change and took reconcile latency from
/// 0.1 s to 5 s (`make bench-operator`).
#[derive(Debug, Default)]
pub struct ClaimMemory {
    seen: Mutex<HashMap<(String, String), Claim>>,
}

impl ClaimMemory {
    /// Whether `set`'s claim differs from the last one seen (always the first time); records it.
    pub fn changed(&self, set: &ObserverSet) -> bool {
        let key = (set.namespace().unwrap_or_default(), set.name_any());
        let claim = Claim {
            uid: set.meta().uid.clone(),
            nodes: set.spec.nodes.clone(),
            deleting: set.meta().deletion_timestamp.is_some(),
        };
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.insert(key, claim.clone()).as_ref() != Some(&claim)
    }

    /// Drops what was seen of sets no longer in `present` (the controller's cache) once the
    /// memory holds more than twice as many: a deleted set's last claim is never looked at
    /// again, and a long-running operator must not keep one per set ever deleted.
    pub fn prune(&self, present: &[Arc<ObserverSet>]) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() <= 2 * present.len() + 16 {
            return;
        }
        let keep: HashSet<(String, String)> = present
            .iter()
            .map(|s| (s.namespace().unwrap_or_default(), s.name_any()))
            .collect();
        seen.retain(|key, _| keep.contains(key));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

/// The reconciler marked this ObserverSet as in conflict (its last verdict).
pub fn in_conflict(set: &ObserverSet) -> bool {
    set.status
        .as_ref()
        .is_some_and(|s| s.phase == Some(crate::crd::Phase::Conflict))
}

#[cfg(test)]
#[path = "conflict_tests.rs"]
mod tests;
