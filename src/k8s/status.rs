//! Status: the server-side apply of the reconciler's status fields (the body is
//! `crate::reconciler`'s).

use kube::api::{Api, Patch, PatchParams};
use serde_json::Value;

use super::error::{Error, Result};
use crate::crd::ObserverSet;

/// Writes the reconciler's status fields with server-side apply.
pub async fn apply(api: &Api<ObserverSet>, name: &str, body: &Value) -> Result<()> {
    let params = PatchParams::apply(crate::writers::ROLLOUT_STATUS).force();
    api.patch_status(name, &params, &Patch::Apply(body))
        .await
        .map_err(|e| {
            let hint = match super::error::stale_crd(&e) {
                Some(_) => " (the installed ObserverSet CRD is older than this operator: apply the CRD of this version first, kubectl apply --server-side -f crds/observerset.yaml; helm never upgrades crds/)",
                None => "",
            };
            Error::kube(format!("writing the status of ObserverSet {name}{hint}"))(e)
        })?;
    Ok(())
}
