//! Deletion of an ObserverSet. Deleting the observer lists would promote every observer at once
//! (the patched Kafka treats a missing file as "no observers"), so:
//! - Retain (default): remove our owner references; the ConfigMaps and their content stay.
//! - Delete: delete the ConfigMaps, but only once no pod mounts them; until then the finalizer
//!   stays and a Warning event says which pods block it.

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams};

use super::config_map;
use super::error::{Error, Result};
use crate::crd::{DeletionPolicy, Role};
use crate::rollout::config_map::{config_map_name, pods_mounting};

/// Finalizer the operator puts on every ObserverSet it manages.
pub const FINALIZER: &str = "kafkaobserver.io/observer-lists";

/// What the cleanup did, for the event.
#[derive(Debug, PartialEq, Eq)]
pub enum Cleanup {
    Retained(Vec<String>),
    Deleted(Vec<String>),
}

/// Releases or deletes both roles' ConfigMaps according to `policy`.
pub async fn clean_up(
    config_maps: &Api<ConfigMap>,
    pods: &Api<Pod>,
    namespace: &str,
    name: &str,
    uid: &str,
    policy: DeletionPolicy,
) -> Result<Cleanup> {
    let names: Vec<String> = Role::ROLLOUT_ORDER
        .iter()
        .map(|&role| config_map_name(name, role))
        .collect();
    match policy {
        DeletionPolicy::Retain => {
            for cm in &names {
                config_map::release(config_maps, cm, uid).await?;
            }
            Ok(Cleanup::Retained(names))
        }
        DeletionPolicy::Delete => {
            let all = pods
                .list(&ListParams::default())
                .await
                .map_err(Error::kube(format!("listing pods in {namespace}")))?;
            let blocking: Vec<String> = names
                .iter()
                .flat_map(|cm| {
                    pods_mounting(&all.items, cm)
                        .into_iter()
                        .map(move |pod| format!("{pod} mounts {cm}"))
                })
                .collect();
            if !blocking.is_empty() {
                return Err(Error::Finalizer {
                    object: format!("{namespace}/{name}"),
                    message: format!(
                        "not deleting the observer lists while pods mount them ({}): deleting them would promote every observer; delete those pods first or set deletionPolicy: Retain",
                        blocking.join(", ")
                    ),
                });
            }
            for cm in &names {
                config_map::delete(config_maps, cm).await?;
            }
            Ok(Cleanup::Deleted(names))
        }
    }
}
