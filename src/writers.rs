//! Who writes what: the field managers of every server-side apply and patch the operator sends,
//! and the apply body of an ObserverSet's status. One place for both loops (the reconciler and
//! the automation write the same ObserverSet), so neither clobbers the other's fields and both
//! name the object the same way.

use kube::Resource;
use serde_json::{json, Value};

use crate::crd::ObserverSet;

/// The operator's own objects: the observer ConfigMaps (also their `app.kubernetes.io/managed-by`
/// label), the pod nudges, and the reporting controller of its Events.
pub const OPERATOR: &str = "kafka-observer-operator";
/// The reconciler's status fields (`reconciler::status_patch`).
pub const ROLLOUT_STATUS: &str = "kafka-observer-operator-rollout";
/// The epoch claim of a new operator leadership, `status.leaderEpoch` only
/// (`reconciler::copies`): its own manager, so the claim and the rollout state never remove
/// each other's fields.
pub const EPOCH_CLAIM: &str = "kafka-observer-operator-epoch";
/// The automation's status fields: `autoPromotions`, `plan`, `engineState`, `partitions` and
/// its own `history` entries (`automation::status`).
pub const AUTOMATION_STATUS: &str = "kafka-observer-operator-automation";
/// The automation's `KafkaReachable` condition (`automation::kafka_health`): its own manager,
/// so the engine's status writes and this condition never remove each other.
pub const KAFKA_HEALTH: &str = "kafka-observer-operator-kafka-health";
/// The automation's `ObserversAvailable` condition (`automation::observer_health`), likewise.
pub const OBSERVER_HEALTH: &str = "kafka-observer-operator-observer-health";

/// `status.localView` of the copy in a replica's own member (`leader::view_report`): written by
/// a replica whether it leads or not, through a client no fence guards, so no other writer may
/// share it.
pub const LOCAL_VIEW: &str = "kafka-observer-operator-view";

/// The server-side-apply body that sets `fields` as an ObserverSet's status (apiVersion and kind
/// from the CRD type, so a new API version cannot leave one writer behind).
pub fn status_body(fields: Value) -> Value {
    json!({
        "apiVersion": ObserverSet::api_version(&()),
        "kind": ObserverSet::kind(&()),
        "status": fields,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_body_names_the_crd_type() {
        assert_eq!(
            status_body(json!({"phase": "Ready"})),
            json!({"apiVersion": "kafkaobserver.io/v1alpha1", "kind": "ObserverSet", "status": {"phase": "Ready"}})
        );
    }

    #[test]
    fn each_writer_has_its_own_manager() {
        assert_ne!(ROLLOUT_STATUS, AUTOMATION_STATUS);
        assert_ne!(OPERATOR, ROLLOUT_STATUS);
        assert_ne!(OPERATOR, AUTOMATION_STATUS);
        for m in [
            OPERATOR,
            ROLLOUT_STATUS,
            AUTOMATION_STATUS,
            KAFKA_HEALTH,
            OBSERVER_HEALTH,
        ] {
            assert_ne!(m, EPOCH_CLAIM);
        }
        for m in [OPERATOR, ROLLOUT_STATUS, AUTOMATION_STATUS] {
            assert_ne!(m, KAFKA_HEALTH);
            assert_ne!(m, OBSERVER_HEALTH);
        }
        assert_ne!(KAFKA_HEALTH, OBSERVER_HEALTH);
        for m in [
            OPERATOR,
            ROLLOUT_STATUS,
            EPOCH_CLAIM,
            AUTOMATION_STATUS,
            KAFKA_HEALTH,
            OBSERVER_HEALTH,
        ] {
            assert_ne!(m, LOCAL_VIEW);
        }
    }
}
