//! What the reconciler sends of an ObserverSet's status: its own fields, never the promotion
//! engine's, under its own field manager (`crate::writers::ROLLOUT_STATUS`). Pure;
//! `crate::k8s::status::apply` sends it.

use super::conditions::OWN_CONDITIONS;
use crate::crd::ObserverSetStatus;

/// Status fields the rollout's writer never sends: the promotion engine's, `leaderEpoch`
/// (the epoch claim's, `super::copies::claim`, under a field manager of its own) and
/// `localView` (each member's own replica's, `crate::leader::view_report`; a status resumed
/// from another member's copy carries that member's).
const FOREIGN_FIELDS: [&str; 6] = [
    "autoPromotions",
    "plan",
    "engineState",
    "partitions",
    "leaderEpoch",
    "localView",
];

/// The server-side-apply body for the reconciler's status fields: every field except
/// `autoPromotions`, `plan`, `engineState` and `partitions`, and of `history` only its own
/// entries (spec changes; the list is merged by key with the automation's). Fields and entries
/// the reconciler no longer sends (a finished rollout, a trimmed entry) disappear, because this
/// manager owned them.
pub fn status_patch(status: &ObserverSetStatus) -> serde_json::Value {
    let mut fields = serde_json::to_value(status).unwrap_or_default();
    if let Some(map) = fields.as_object_mut() {
        for key in FOREIGN_FIELDS {
            map.remove(key);
        }
        // Left out when empty (same effect under server-side apply: this manager's entries
        // go), so an operator upgraded before its CRD keeps rolling out.
        let own = crate::history::own(&status.history, false);
        if own.is_empty() {
            map.remove("history");
        } else {
            map.insert(
                "history".into(),
                serde_json::to_value(own).unwrap_or_default(),
            );
        }
    }
    if let Some(serde_json::Value::Array(conditions)) = fields.get_mut("conditions") {
        // Only the reconciler's own: the list is keyed by type, so another writer's entries
        // stay as that writer left them.
        conditions.retain(|c| {
            c.get("type")
                .and_then(serde_json::Value::as_str)
                .is_some_and(|t| OWN_CONDITIONS.contains(&t))
        });
    }
    crate::writers::status_body(fields)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn the_patch_holds_only_the_reconcilers_conditions() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
        let t0 = Timestamp::from_second(1_000).unwrap();
        let condition = |type_: &str| Condition {
            type_: type_.into(),
            status: "True".into(),
            reason: "R".into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(t0),
        };
        let status = ObserverSetStatus {
            conditions: ["Ready", "KafkaReachable", "Progressing", "Degraded"]
                .map(condition)
                .to_vec(),
            ..Default::default()
        };
        let patch = status_patch(&status);
        let types: Vec<&str> = patch["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["Ready", "Progressing", "Degraded"]);
    }

    #[test]
    fn status_patch_leaves_the_promotion_engine_fields_alone() {
        let status = ObserverSetStatus {
            revision: 3,
            auto_promotions: vec![crate::crd::AutoPromotion {
                node_id: 4,
                at: Time(at("2026-11-29T09:00:00Z")),
                reason: "x".into(),
            }],
            ..Default::default()
        };
        let patch = status_patch(&status);
        assert_eq!(patch["status"]["revision"], 3);
        assert!(patch["status"].get("autoPromotions").is_none(), "{patch}");
        assert!(patch["status"].get("plan").is_none());
        assert!(patch["status"].get("engineState").is_none());
        assert!(patch["status"].get("partitions").is_none());
        assert!(patch["status"].get("history").is_none());
        assert!(
            patch["status"].get("rollout").is_none(),
            "a finished rollout is dropped"
        );
    }

    #[test]
    fn status_patch_sends_only_the_reconcilers_history_entries() {
        use crate::crd::EngineActionKind;
        let at = |s: i64| Timestamp::from_second(1_800_000_000 + s).unwrap();
        let history = crate::history::record(
            &[],
            vec![
                crate::history::entry(at(1), EngineActionKind::Promote, 4, "p", "automation"),
                crate::history::entry(at(2), EngineActionKind::Demote, 5, "spec change", "kubectl"),
            ],
        );
        let status = ObserverSetStatus {
            last_action: crate::history::newest(&history),
            history,
            ..Default::default()
        };
        let patch = status_patch(&status);
        let sent = patch["status"]["history"].as_array().unwrap();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0]["who"], "kubectl");
        assert_eq!(patch["status"]["lastAction"]["nodeId"], 5);
    }
}
