//! Status: the server-side apply of the reconciler's status fields (the body is
//! `crate::reconciler`'s), on the version the reconcile decided from.

use kube::api::{Api, Patch, PatchParams};
use serde_json::Value;

use super::error::{Error, Result};
use crate::crd::ObserverSet;

/// Writes the reconciler's status fields with server-side apply, as field manager `manager`
/// (`crate::writers`), and returns the object's new `resourceVersion`.
///
/// `expected` is the `resourceVersion` the write was decided on (the reconcile's fresh read, or
/// its own previous write). The apiserver applies only onto that version and answers 409
/// otherwise: a rollout intent decided on a read that anyone wrote after (a former leader's late
/// write arriving after its successor's, the promotion engine's fields in between) never lands,
/// and the reconcile reads again ([`Error::Superseded`]).
pub async fn apply(
    api: &Api<ObserverSet>,
    name: &str,
    manager: &str,
    body: &Value,
    expected: Option<&str>,
) -> Result<Option<String>> {
    let params = PatchParams::apply(manager).force();
    let body = with_version(body, expected);
    match api.patch_status(name, &params, &Patch::Apply(&body)).await {
        Ok(written) => Ok(written.metadata.resource_version),
        Err(e) if superseded(&e) && expected.is_some() => Err(Error::Superseded {
            object: format!("the status of ObserverSet {name}"),
        }),
        Err(e) => {
            let hint = match super::error::stale_crd(&e) {
                Some(_) => " (the installed ObserverSet CRD is older than this operator: apply the CRD of this version first, kubectl apply --server-side -f crds/observerset.yaml; helm never upgrades crds/)",
                None => "",
            };
            Err(Error::kube(format!(
                "writing the status of ObserverSet {name}{hint}"
            ))(e))
        }
    }
}

/// `body` with `metadata.resourceVersion` set to `expected` (unchanged without one): the
/// precondition of a server-side apply.
pub fn with_version(body: &Value, expected: Option<&str>) -> Value {
    let mut body = body.clone();
    if let (Some(version), Some(map)) = (expected, body.as_object_mut()) {
        map.insert(
            "metadata".into(),
            serde_json::json!({ "resourceVersion": version }),
        );
    }
    body
}

/// Whether the apiserver refused a write because the object moved on since its precondition.
pub fn superseded(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == 409)
}
