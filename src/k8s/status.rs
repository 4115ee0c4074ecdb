//! Status: the server-side apply of the reconciler's status fields (the body is
//! `crate::reconciler`'s).

use kube::api::{Api, Patch, PatchParams};
use serde_json::Value;

use super::error::{Error, Result};
use crate::crd::ObserverSet;

/// Writes the reconciler's status fields with server-side apply.
pub async fn apply(api: &Api<ObserverSet>, name: &str, body: &Value) -> Result<()> {
    send(api, name, body).await.map_err(|e| failed(name, e))?;
    Ok(())
}

/// Whether a guarded write ([`apply_at`]) happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Guarded {
    Written,
    /// The ObserverSet is no longer at the given resourceVersion: nothing was written.
    Stale,
}

/// [`apply`] with `resource_version` as a precondition: the apiserver refuses the write with
/// 409 Conflict if the object changed since (the optimistic concurrency of every write that
/// names a resourceVersion, server-side apply included).
pub async fn apply_at(
    api: &Api<ObserverSet>,
    name: &str,
    body: &Value,
    resource_version: &str,
) -> Result<Guarded> {
    let mut body = body.clone();
    body["metadata"]["resourceVersion"] = Value::String(resource_version.to_owned());
    match send(api, name, &body).await {
        Ok(()) => Ok(Guarded::Written),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(Guarded::Stale),
        Err(e) => Err(failed(name, e)),
    }
}

async fn send(api: &Api<ObserverSet>, name: &str, body: &Value) -> kube::Result<()> {
    let params = PatchParams::apply(crate::writers::ROLLOUT_STATUS).force();
    api.patch_status(name, &params, &Patch::Apply(body)).await?;
    Ok(())
}

fn failed(name: &str, e: kube::Error) -> Error {
    let hint = match super::error::stale_crd(&e) {
        Some(_) => " (the installed ObserverSet CRD is older than this operator: apply the CRD of this version first, kubectl apply --server-side -f crds/observerset.yaml; helm never upgrades crds/)",
        None => "",
    };
    Error::kube(format!("writing the status of ObserverSet {name}{hint}"))(e)
}
