//! The observer ConfigMaps, one per role, key `observer.ids`: their names, labels and bodies,
//! and the pods that mount them. Pure: `crate::k8s::config_map` applies, releases and deletes
//! them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::crd::Role;
use crate::writers;

/// Key of the observer list inside the ConfigMap (the file name in the mounted directory).
pub const DATA_KEY: &str = "observer.ids";
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const LABEL_OBSERVER_SET: &str = "kafkaobserver.io/observerset";
pub const LABEL_ROLE: &str = "kafkaobserver.io/role";
pub const ANNOTATION_REVISION: &str = "kafkaobserver.io/revision";

/// `<observerset>-observers-<role>`, the name the pods' volumes refer to.
pub fn config_map_name(observer_set: &str, role: Role) -> String {
    format!("{observer_set}-observers-{}", role.as_str())
}

/// The ObserverSet a ConfigMap belongs to.
#[derive(Clone, Debug, PartialEq)]
pub struct Owner {
    pub namespace: String,
    pub name: String,
    /// Controller owner reference; lets `Controller::owns` route ConfigMap events back to us.
    /// `None` over member clusters: a member's lists must not be garbage-collected with that
    /// member's copy of the set, which no finalizer guards (docs/multi-cluster.md).
    pub reference: Option<OwnerReference>,
}

/// The full desired ConfigMap of one role at one revision.
pub fn build(owner: &Owner, role: Role, revision: i64, content: String) -> ConfigMap {
    let labels = BTreeMap::from([
        (LABEL_MANAGED_BY.to_string(), writers::OPERATOR.to_string()),
        (LABEL_OBSERVER_SET.to_string(), owner.name.clone()),
        (LABEL_ROLE.to_string(), role.as_str().to_string()),
    ]);
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(config_map_name(&owner.name, role)),
            namespace: Some(owner.namespace.clone()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([(
                ANNOTATION_REVISION.to_string(),
                revision.to_string(),
            )])),
            owner_references: owner.reference.clone().map(|r| vec![r]),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(DATA_KEY.to_string(), content)])),
        ..Default::default()
    }
}

/// Revision annotation and content of a live ConfigMap, if it has them.
pub fn revision_of(config_map: &ConfigMap) -> Option<i64> {
    config_map
        .metadata
        .annotations
        .as_ref()?
        .get(ANNOTATION_REVISION)?
        .parse()
        .ok()
}

/// Names of the pods whose volumes mount the ConfigMap `name`.
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

/// The owner of the test fixtures: ObserverSet kafka/kafka.
#[cfg(test)]
pub(crate) fn test_owner() -> Owner {
    Owner {
        namespace: "kafka".into(),
        name: "kafka".into(),
        reference: Some(OwnerReference {
            api_version: "kafkaobserver.io/v1alpha1".into(),
            kind: "ObserverSet".into(),
            name: "kafka".into(),
            uid: "u-1".into(),
            controller: Some(true),
            ..Default::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ConfigMapProjection, ConfigMapVolumeSource, PodSpec, ProjectedVolumeSource, Volume,
        VolumeProjection,
    };

    use super::test_owner as owner;

    #[test]
    fn names_follow_the_pods_volume_contract() {
        assert_eq!(
            config_map_name("kafka", Role::Controller),
            "kafka-observers-controller"
        );
        assert_eq!(
            config_map_name("kafka", Role::Broker),
            "kafka-observers-broker"
        );
    }

    #[test]
    fn built_config_map_carries_labels_revision_owner_and_content() {
        let cm = build(&owner(), Role::Broker, 7, "4\n".into());
        let json = serde_json::to_value(&cm).unwrap();
        assert_eq!(
            json["apiVersion"], "v1",
            "server-side apply needs apiVersion and kind"
        );
        assert_eq!(json["kind"], "ConfigMap");
        assert_eq!(json["metadata"]["name"], "kafka-observers-broker");
        assert_eq!(json["metadata"]["namespace"], "kafka");
        assert_eq!(
            json["metadata"]["labels"][LABEL_MANAGED_BY],
            writers::OPERATOR
        );
        assert_eq!(json["metadata"]["labels"][LABEL_OBSERVER_SET], "kafka");
        assert_eq!(json["metadata"]["labels"][LABEL_ROLE], "broker");
        assert_eq!(json["metadata"]["annotations"][ANNOTATION_REVISION], "7");
        assert_eq!(json["metadata"]["ownerReferences"][0]["uid"], "u-1");
        assert_eq!(json["data"][DATA_KEY], "4\n");
        assert_eq!(revision_of(&cm), Some(7));
    }

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
