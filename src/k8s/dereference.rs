//! Dereference: lists the pods each role's selector picks and reduces them to
//! [`KafkaPod`]s (`crate::rollout::pods`).

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::core::Selector;

use super::error::{Error, Result};
use crate::crd::{NodeIdRule, Role};
use crate::rollout::pods::{kafka_pods, KafkaPod};

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
