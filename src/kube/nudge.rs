//! Nudge: an annotation on the pod itself (never its template, which would restart it) makes the
//! kubelet sync the pod now and refresh its ConfigMap volume, instead of within its 60-90 s sync.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{json, Value};

use super::config_map::FIELD_MANAGER;
use super::error::{Error, Result};

/// Pod annotation carrying the revision the pod was last nudged for.
pub const REVISION_ANNOTATION: &str = "kafkaobserver.io/observer-ids-revision";

/// The merge patch that sets the nudge annotation (pure).
pub fn nudge_patch(revision: i64) -> Value {
    json!({ "metadata": { "annotations": { REVISION_ANNOTATION: revision.to_string() } } })
}

/// Sets the annotation on one pod. A merge patch touches only this key, so the pod's owner
/// (StatefulSet controller) and other writers keep theirs. A pod that is gone needs no nudge.
pub async fn nudge(api: &Api<Pod>, pod: &str, revision: i64) -> Result<()> {
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    match api
        .patch(pod, &params, &Patch::Merge(nudge_patch(revision)))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(e) => Err(Error::kube(format!(
            "nudging pod {pod} for revision {revision}"
        ))(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_touches_only_the_annotation() {
        assert_eq!(
            nudge_patch(8),
            json!({"metadata": {"annotations": {"kafkaobserver.io/observer-ids-revision": "8"}}})
        );
    }
}
