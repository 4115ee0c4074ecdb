//! Dereference: lists the pods each role's selector picks and reduces them to
//! [`KafkaPod`]s (`crate::rollout::pods`), and reads the readiness of their Nodes.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use kube::core::Selector;

use super::error::{Error, Result};
use crate::crd::{NodeIdRule, Role};
use crate::rollout::pods::{kafka_pods, node_ready, KafkaPod};

/// Lists the pods `selector` picks in the namespace (terminating pods included: they still read
/// their file until they are gone).
///
/// Served from the apiserver's watch cache (`resourceVersion=0`, what an informer sees), not as a
/// consistent read: since Kubernetes 1.31 a consistent list waits for the cache to catch up with
/// etcd, up to 100 ms per list, and every reconcile pass of a rollout step lists the pods.
/// Safe because each pass lists again: a pod the cache has not shown yet is waited for by the
/// next pass, and a pod that starts after a list mounts the list already written. The ObserverSet
/// and its ConfigMaps, which the planner's own writes change, are still read from etcd.
pub async fn list_role_pods(
    api: &Api<Pod>,
    role: Role,
    selector: &Selector,
    rule: &NodeIdRule,
) -> Result<Vec<KafkaPod>> {
    let pods = api
        .list(&ListParams::default().labels_from(selector).match_any())
        .await
        .map_err(Error::kube(format!("listing {role} pods ({selector})")))?;
    Ok(kafka_pods(&pods.items, role, rule)?)
}

/// The Ready condition of each named Node (`crate::rollout::pods::node_ready`), read side by
/// side by name (RBAC: `nodes` `get`). Asked only for the Nodes of pods whose agent is silent,
/// so a healthy rollout reads no Node. A Node that is gone or reports no Ready condition is
/// left out, and so is one that cannot be read (its error is returned for the log): a pod
/// whose node readiness is unknown is never excused for it.
pub async fn node_readiness(
    api: &Api<Node>,
    names: &BTreeSet<String>,
) -> (BTreeMap<String, bool>, Vec<Error>) {
    let reads = names.iter().map(|name| async move {
        let node = api
            .get_opt(name)
            .await
            .map_err(Error::kube(format!("reading Node {name}")));
        (name.clone(), node)
    });
    let mut ready = BTreeMap::new();
    let mut errors = Vec::new();
    for (name, node) in futures::future::join_all(reads).await {
        match node {
            Ok(Some(node)) => {
                if let Some(r) = node_ready(&node) {
                    ready.insert(name, r);
                }
            }
            Ok(None) => {}
            Err(e) => errors.push(e),
        }
    }
    (ready, errors)
}
