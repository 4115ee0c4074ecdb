//! The nudge annotations: an annotation on the pod itself (never its template, which would
//! restart it) makes the kubelet sync the pod now and refresh its ConfigMap volume, instead of
//! within its 60-90 s sync. A pod still pending after `machine::RENUDGE_AFTER` is nudged again (a
//! new time value), in case the kubelet synced before its ConfigMap cache had the new content.
//! Pure: `crate::k8s::nudge` sends the patch, `pods` reads the annotations back.

use k8s_openapi::jiff::Timestamp;
use serde_json::{json, Value};

/// Pod annotation carrying the revision the pod was last nudged for.
pub const REVISION_ANNOTATION: &str = "kafkaobserver.io/observer-ids-revision";
/// Pod annotation carrying when the pod was last nudged (RFC 3339).
pub const NUDGED_AT_ANNOTATION: &str = "kafkaobserver.io/observer-ids-nudged-at";

/// The merge patch that sets the nudge annotations.
pub fn nudge_patch(revision: i64, at: Timestamp) -> Value {
    json!({ "metadata": { "annotations": {
        REVISION_ANNOTATION: revision.to_string(),
        NUDGED_AT_ANNOTATION: at.to_string(),
    } } })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_touches_only_the_annotations() {
        let at: Timestamp = "2026-11-29T09:00:00.5Z".parse().unwrap();
        assert_eq!(
            nudge_patch(8, at),
            json!({"metadata": {"annotations": {
                "kafkaobserver.io/observer-ids-revision": "8",
                "kafkaobserver.io/observer-ids-nudged-at": "2026-11-29T09:00:00.5Z",
            }}})
        );
        assert_eq!(
            "2026-11-29T09:00:00.5Z".parse::<Timestamp>().ok(),
            Some(at),
            "read back by dereference"
        );
    }
}
