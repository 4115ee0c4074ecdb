//! Nudge: sets the nudge annotations (`crate::rollout::nudge`) on a pod, so the kubelet refreshes
//! its ConfigMap volume now.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};

use super::error::{Error, Result};
use crate::rollout::nudge::nudge_patch;
use crate::writers;

/// Sets the annotations on one pod. A merge patch touches only these keys, so the pod's owner
/// (StatefulSet controller) and other writers keep theirs. A pod that is gone needs no nudge.
pub async fn nudge(api: &Api<Pod>, pod: &str, revision: i64, at: Timestamp) -> Result<()> {
    let params = PatchParams {
        field_manager: Some(writers::OPERATOR.into()),
        ..Default::default()
    };
    match api
        .patch(pod, &params, &Patch::Merge(nudge_patch(revision, at)))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(e) => Err(Error::kube(format!(
            "nudging pod {pod} for revision {revision}"
        ))(e)),
    }
}
