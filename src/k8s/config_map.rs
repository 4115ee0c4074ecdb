//! The observer ConfigMaps: one per role, key `observer.ids`. Building them is pure; applying
//! uses server-side apply so a foreign edit of a field we own is reverted on the next apply.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams};
use serde_json::json;

use super::error::{Error, Result};
use super::writers;
use crate::crd::Role;

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
    pub reference: OwnerReference,
}

/// The full desired ConfigMap of one role at one revision (pure).
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
            owner_references: Some(vec![owner.reference.clone()]),
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

/// Server-side apply, forcing ownership: the operator is the only writer of these fields, so a
/// conflict means someone edited the list by hand, and that edit is the drift to undo.
pub async fn apply(api: &Api<ConfigMap>, desired: &ConfigMap) -> Result<ConfigMap> {
    let name = desired.metadata.name.clone().unwrap_or_default();
    api.patch(
        &name,
        &PatchParams::apply(writers::OPERATOR).force(),
        &Patch::Apply(desired),
    )
    .await
    .map_err(Error::kube(format!("applying ConfigMap {name}")))
}

/// Removes our owner reference (Retain): the garbage collector then leaves the ConfigMap and
/// the pods keep their observer list after the ObserverSet is gone. A strategic merge patch
/// deletes just the entry with our uid.
pub async fn release(api: &Api<ConfigMap>, name: &str, owner_uid: &str) -> Result<()> {
    let patch =
        json!({ "metadata": { "ownerReferences": [ { "$patch": "delete", "uid": owner_uid } ] } });
    match api
        .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(e) => Err(Error::kube(format!(
            "removing the owner reference from ConfigMap {name}"
        ))(e)),
    }
}

/// Deletes a ConfigMap (Delete policy, once no pod mounts it). Absent is fine.
pub async fn delete(api: &Api<ConfigMap>, name: &str) -> Result<()> {
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(e) => Err(Error::kube(format!("deleting ConfigMap {name}"))(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> Owner {
        Owner {
            namespace: "kafka".into(),
            name: "kafka".into(),
            reference: OwnerReference {
                api_version: "kafkaobserver.io/v1alpha1".into(),
                kind: "ObserverSet".into(),
                name: "kafka".into(),
                uid: "u-1".into(),
                controller: Some(true),
                ..Default::default()
            },
        }
    }

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
}
