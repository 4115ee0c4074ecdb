//! Deletion of an ObserverSet. Deleting the observer lists would promote every observer at once
//! (the patched Kafka treats a missing file as "no observers"), so:
//! - Retain (default): remove our owner references; the ConfigMaps and their content stay.
//! - Delete: delete the ConfigMaps, but only once no pod mounts them; until then the finalizer
//!   stays and a Warning event says which pods block it.

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams};

use super::config_map::{self, config_map_name};
use super::error::{Error, Result};
use crate::crd::{DeletionPolicy, Role};

/// Finalizer the operator puts on every ObserverSet it manages.
pub const FINALIZER: &str = "kafkaobserver.io/observer-lists";

/// Names of the pods whose volumes mount the ConfigMap `name` (pure).
pub fn pods_mounting(pods: &[Pod], name: &str) -> Vec<String> {
    pods.iter()
        .filter(|pod| {
            let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
            volumes.into_iter().flatten().any(|v| {
                let direct = v.config_map.as_ref().is_some_and(|c| c.name == name);
                let projected = v
                    .projected
                    .as_ref()
                    .and_then(|p| p.sources.as_ref())
                    .into_iter()
                    .flatten()
                    .any(|s| s.config_map.as_ref().is_some_and(|c| c.name == name));
                direct || projected
            })
        })
        .filter_map(|pod| pod.metadata.name.clone())
        .collect()
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ConfigMapProjection, ConfigMapVolumeSource, PodSpec, ProjectedVolumeSource, Volume,
        VolumeProjection,
    };
    use kube::api::ObjectMeta;

    fn pod(name: &str, volumes: Vec<Volume>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                volumes: Some(volumes),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn finds_direct_and_projected_mounts() {
        let direct = Volume {
            name: "observer-ids".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: "kafka-observers-broker".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let projected = Volume {
            name: "all".into(),
            projected: Some(ProjectedVolumeSource {
                sources: Some(vec![VolumeProjection {
                    config_map: Some(ConfigMapProjection {
                        name: "kafka-observers-broker".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let other = Volume {
            name: "x".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: "unrelated".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let pods = [
            pod("b-0", vec![direct]),
            pod("b-1", vec![projected]),
            pod("c-0", vec![other]),
            pod("none", vec![]),
        ];
        assert_eq!(
            pods_mounting(&pods, "kafka-observers-broker"),
            ["b-0", "b-1"]
        );
    }
}
