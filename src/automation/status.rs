//! Pure mapping between the engine's history and decision and the status fields the automation
//! owns: `status.autoPromotions`, `status.plan`, `status.engineState` (encoded by
//! `super::engine_state`), `status.partitions` (`super::partitions`) and its own entries of
//! `status.history` (`crate::history`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{json, Value};

use crate::crd::{
    AutoPromotion, EngineState, HistoryEntry, ObserverSetStatus, PartitionsStatus, PlanAction,
    PlanActionKind, PlanStatus,
};
use crate::history;
use crate::promotion::{auto_promotions_in, PromotionAction, PromotionDecision};

/// `status.plan` for a decision. The status schema knows Promote and Demote only: leadership
/// moves, reorderings and unclean elections are steps of those and show in the event stream and the logs.
/// A plan with no action carries the first reason the engine gave for holding back, if any,
/// so a dry run tells why nothing would happen.
pub fn plan(decision: &PromotionDecision, at: Timestamp) -> PlanStatus {
    let actions = decision
        .actions
        .iter()
        .filter_map(|a| {
            let kind = match a {
                PromotionAction::Promote { .. } => PlanActionKind::Promote,
                PromotionAction::Demote { .. } => PlanActionKind::Demote,
                PromotionAction::MoveLeadership { .. }
                | PromotionAction::ReorderReplicas { .. }
                | PromotionAction::UncleanElect { .. } => return None,
            };
            Some(PlanAction {
                action: kind,
                node_id: a.node_id(),
                reason: a.reason().to_owned(),
            })
        })
        .collect();
    PlanStatus {
        at: Time(at),
        dry_run: decision.dry_run,
        actions,
    }
}

/// The history entries of the actions a live decision carries out (none in a dry run).
pub fn history_entries(decision: &PromotionDecision, at: Timestamp) -> Vec<HistoryEntry> {
    if decision.dry_run {
        return Vec::new();
    }
    decision
        .actions
        .iter()
        .map(|a| history::entry(at, a.kind(), a.node_id(), a.reason(), history::AUTOMATION))
        .collect()
}

/// Whether writing `plan` and `auto` would change what the status holds (the plan's time aside):
/// the automation writes only on a change, not once a scan.
pub fn differs(
    status: Option<&ObserverSetStatus>,
    plan: &PlanStatus,
    auto: &[AutoPromotion],
) -> bool {
    let current_auto = auto_promotions_in(status);
    let current_plan = status.and_then(|s| s.plan.as_ref());
    current_auto != auto
        || current_plan.is_none_or(|c| c.dry_run != plan.dry_run || c.actions != plan.actions)
}

/// What one automation write sends besides the plan.
pub struct Owned<'a> {
    pub auto: &'a [AutoPromotion],
    pub engine_state: &'a EngineState,
    /// The automation's own entries of `status.history` (`history::own`).
    pub history: &'a [HistoryEntry],
    pub partitions: Option<&'a PartitionsStatus>,
}

/// The server-side apply body: only the fields this field manager owns, all of them every time
/// (a field this manager owns and leaves out of an apply is removed; so is an entry of
/// `status.history` it owns and leaves out, which is how its entries are trimmed).
pub fn apply_body(plan: &PlanStatus, owned: &Owned) -> Value {
    let mut status = json!({
        "autoPromotions": owned.auto,
        "plan": plan,
        "engineState": owned.engine_state,
    });
    // Left out when empty, which removes the entries this manager owned just as `[]` would,
    // and keeps an operator whose CRD predates the field writing until it has something to say.
    if !owned.history.is_empty() {
        status["history"] = json!(owned.history);
    }
    if let Some(p) = owned.partitions {
        status["partitions"] = json!(p);
    }
    crate::writers::status_body(status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::EngineActionKind;
    use crate::promotion::PolicyHistory;

    fn decision(actions: Vec<PromotionAction>, dry_run: bool) -> PromotionDecision {
        PromotionDecision {
            actions,
            reasons: vec![],
            next_history: PolicyHistory::default(),
            dry_run,
            triggered: Default::default(),
            observer_only: None,
        }
    }

    #[test]
    fn plan_keeps_promotions_and_demotions_in_order() {
        let d = decision(
            vec![
                PromotionAction::MoveLeadership {
                    node_id: 5,
                    partitions: vec![],
                    reason: "m".into(),
                },
                PromotionAction::Demote {
                    node_id: 5,
                    reason: "d".into(),
                },
                PromotionAction::Promote {
                    node_id: 4,
                    reason: "p".into(),
                },
            ],
            true,
        );
        let p = plan(&d, Timestamp::now());
        assert!(p.dry_run);
        assert_eq!(
            p.actions,
            vec![
                PlanAction {
                    action: PlanActionKind::Demote,
                    node_id: 5,
                    reason: "d".into()
                },
                PlanAction {
                    action: PlanActionKind::Promote,
                    node_id: 4,
                    reason: "p".into()
                },
            ]
        );
    }

    #[test]
    fn history_records_live_actions_only() {
        let actions = vec![
            PromotionAction::MoveLeadership {
                node_id: 5,
                partitions: vec![],
                reason: "m".into(),
            },
            PromotionAction::Promote {
                node_id: 4,
                reason: "p".into(),
            },
        ];
        let at = Timestamp::from_second(1_800_000_000).unwrap();
        assert_eq!(
            history_entries(&decision(actions.clone(), true), at),
            vec![]
        );
        let got: Vec<(EngineActionKind, i32, String, String)> =
            history_entries(&decision(actions, false), at)
                .into_iter()
                .map(|e| (e.action, e.node_id, e.reason, e.who))
                .collect();
        assert_eq!(
            got,
            vec![
                (
                    EngineActionKind::MoveLeadership,
                    5,
                    "m".into(),
                    "automation".into()
                ),
                (
                    EngineActionKind::Promote,
                    4,
                    "p".into(),
                    "automation".into()
                ),
            ]
        );
    }

    #[test]
    fn writes_only_on_a_change() {
        let at = Timestamp::from_second(1_800_000_000).unwrap();
        let auto = vec![AutoPromotion {
            node_id: 4,
            at: Time(at),
            reason: "r".into(),
        }];
        let p = plan(&decision(vec![], false), at);
        assert!(differs(None, &p, &auto));
        let status = ObserverSetStatus {
            auto_promotions: auto.clone(),
            plan: Some(p.clone()),
            ..ObserverSetStatus::default()
        };
        let later = plan(
            &decision(vec![], false),
            at + k8s_openapi::jiff::SignedDuration::from_secs(5),
        );
        assert!(
            !differs(Some(&status), &later, &auto),
            "only the plan's time changed"
        );
        assert!(
            differs(Some(&status), &later, &[]),
            "a demotion empties the list"
        );
        let dry = plan(&decision(vec![], true), at);
        assert!(differs(Some(&status), &dry, &auto));
    }

    #[test]
    fn apply_body_names_the_kind_and_sends_an_empty_list_explicitly() {
        let state = EngineState {
            saved_at: k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
                Timestamp::UNIX_EPOCH,
            ),
            brokers: vec![],
            high_watermarks: vec![],
            omitted_high_watermarks: 0,
        };
        let body = apply_body(
            &plan(&decision(vec![], false), Timestamp::now()),
            &Owned {
                auto: &[],
                engine_state: &state,
                history: &[],
                partitions: None,
            },
        );
        assert_eq!(body["kind"], "ObserverSet");
        assert!(body["status"]["engineState"]["savedAt"].is_string());
        assert_eq!(body["status"]["autoPromotions"], json!([]));
        assert!(
            body["status"].get("history").is_none(),
            "left out, it removes the entries this manager owned, as an empty list would"
        );
        assert!(body["status"]["plan"]["at"].is_string());
        assert!(body["status"].get("partitions").is_none());
    }
}
