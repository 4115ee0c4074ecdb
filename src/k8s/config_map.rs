//! Writes the observer ConfigMaps (`crate::rollout::config_map` builds them) with server-side
//! apply, so a foreign edit of a field we own is reverted on the next apply; releases or deletes
//! them when their ObserverSet goes.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::json;

use super::error::{Error, Result};
use crate::writers;

/// Server-side apply, forcing ownership: the operator is the only writer of these fields, so a
/// field-manager conflict means someone edited the list by hand, and that edit is the drift to
/// undo.
///
/// `expected` is the `resourceVersion` the write was decided on (`None`: the ConfigMap was
/// absent). The apiserver applies only onto that version and answers 409 otherwise: a write
/// decided on a read that anyone wrote after (a former leader's late write arriving after its
/// successor's, or a hand edit in between) never lands, and the reconcile reads again.
pub async fn apply(
    api: &Api<ConfigMap>,
    desired: &ConfigMap,
    expected: Option<&str>,
) -> Result<ConfigMap> {
    let name = desired.metadata.name.clone().unwrap_or_default();
    let mut body = desired.clone();
    body.metadata.resource_version = expected.map(str::to_string);
    match api
        .patch(
            &name,
            &PatchParams::apply(writers::OPERATOR).force(),
            &Patch::Apply(&body),
        )
        .await
    {
        Err(kube::Error::Api(status)) if status.code == 409 && expected.is_some() => {
            Err(Error::Superseded {
                object: format!("ConfigMap {name}"),
            })
        }
        result => result.map_err(Error::kube(format!("applying ConfigMap {name}"))),
    }
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

/// Deletes a ConfigMap (Delete policy, once no pod mounts it), only the object of uid `uid`
/// (the one read and found ours: a same-named ConfigMap created since is not deleted). Absent
/// is fine; a replaced one (409 on the precondition) is left alone.
pub async fn delete(api: &Api<ConfigMap>, name: &str, uid: &str) -> Result<()> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() || status.code == 409 => Ok(()),
        Err(e) => Err(Error::kube(format!("deleting ConfigMap {name}"))(e)),
    }
}
