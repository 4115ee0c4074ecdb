//! `plan` and `explain` with the operator's memory: a state saved by `engine_state::save` (what
//! the operator writes) restored by the operator's rules, and the decision it leads to.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::automation::engine_state::save;
use crate::cli::fixtures::{at, config, memory, partition, snapshot, stop};
use crate::cli::{explain, plan_view, render_explain, render_plan, Explanation};
use crate::promotion::{AutoPromotion, EngineActionKind, LastAction, PromotionPolicy};
use crate::time_format::Text;

fn promoted_at(secs: i64) -> PolicyHistory {
    PolicyHistory::from_auto_promotions(vec![AutoPromotion {
        node_id: 4,
        at: Time(at(secs)),
        reason: "r".into(),
    }])
}

fn detail<'a>(e: &'a Explanation, rule: &str) -> (&'a str, Option<bool>) {
    let c = e.checks.iter().find(|c| c.rule == rule).unwrap();
    (c.detail.as_str(), c.ok)
}

#[test]
fn without_a_saved_state_the_view_says_so() {
    let m = operator_memory(
        PolicyHistory::default(),
        None,
        &config(PromotionPolicy::UnderMinIsr),
        at(0),
    );
    assert!(!m.view.restored);
    assert_eq!(m.view.saved_at, None);
    assert_eq!(
        m.view.summary,
        "no status.engineState (the operator has not saved its engine's state for this ObserverSet): decided from status.autoPromotions only"
    );
}

#[test]
fn a_too_old_or_future_state_is_discarded_as_the_operator_discards_it() {
    let c = config(PromotionPolicy::UnderMinIsr);
    let mut h = PolicyHistory::default();
    h.promote_streak.insert(4, 1);
    let state = save(&h, &c, at(0));
    let old = operator_memory(PolicyHistory::default(), Some(&state), &c, at(601));
    assert!(!old.view.restored);
    assert_eq!(old.history, PolicyHistory::default());
    assert_eq!(old.view.saved_at, Some(at(0)));
    assert_eq!(
        old.view.summary,
        format!("discarded: status.engineState was saved at {}, 601s ago (more than the 600s a successor trusts): the engine starts afresh (only status.autoPromotions is kept)", Text(at(0)))
    );
    let future = operator_memory(PolicyHistory::default(), Some(&state), &c, at(-121));
    assert!(!future.view.restored);
    assert!(
        future.view.summary.starts_with(&format!(
            "discarded: status.engineState.savedAt {} is 121s ahead of this operator's clock",
            Text(at(0))
        )),
        "{}",
        future.view.summary
    );
    // The output says so, and keeps the single-scan notes.
    let s = snapshot(vec![partition("orders", 0, &[1, 2, 4])]);
    let text = render_plan(&plan_view(&s, &c, &old, at(601)));
    assert!(
        text.contains("  operator memory: discarded: status.engineState was saved at "),
        "{text}"
    );
}

#[test]
fn the_operators_confirmation_count_completes_the_promotion() {
    let mut s = snapshot(vec![partition("orders", 0, &[1, 2, 4])]);
    stop(&mut s, 2);
    s.taken_at = at(1);
    let c = config(PromotionPolicy::UnderMinIsr);
    let mut h = PolicyHistory::default();
    h.promote_streak.insert(4, 1);
    let m = operator_memory(
        PolicyHistory::default(),
        Some(&save(&h, &c, at(0))),
        &c,
        at(1),
    );
    assert!(m.view.restored);
    assert_eq!(m.view.summary, format!("restored the promotion engine's state saved at {} (1s ago): 1 confirmation streak(s), 0 stabilization timer(s), 0 last action(s), 0 high watermark(s)", Text(at(0))));
    let v = plan_view(&s, &c, &m, at(1));
    assert_eq!((v.actions[0].action, v.actions[0].node_id), ("promote", 4));
    assert!(v.notes.is_empty(), "{:?}", v.notes);
    assert_eq!(v.brokers.len(), 1);
    assert_eq!(v.brokers[0].text, vec!["confirmations counted 1 of 2"]);
    let e = explain(&s, &c, &m, at(1), 4);
    assert!(e.eligible);
    assert_eq!(e.memory.confirmations_counted, Some(1));
    assert_eq!(
        detail(&e, "confirmations"),
        (
            "the operator has counted 1 of 2 consecutive scans; this scan makes 2 of 2",
            Some(true)
        )
    );
    // Without the memory the same scan is only the first confirmation.
    let e = explain(&s, &c, &memory(PolicyHistory::default()), at(1), 4);
    assert!(!e.eligible);
    assert_eq!(detail(&e, "confirmations").1, None);
    assert!(
        detail(&e, "confirmations")
            .0
            .ends_with("; this scan alone makes 1 of 2"),
        "{:?}",
        detail(&e, "confirmations")
    );
}

#[test]
fn a_stale_streak_is_dropped_and_said_so() {
    let c = config(PromotionPolicy::UnderMinIsr);
    let mut h = PolicyHistory::default();
    h.promote_streak.insert(4, 1);
    let m = operator_memory(
        PolicyHistory::default(),
        Some(&save(&h, &c, at(0))),
        &c,
        at(10),
    );
    assert!(m.view.restored);
    assert!(m.history.promote_streak.is_empty());
    assert_eq!(
        m.view.dropped,
        vec!["observer 4: confirmation streak 1 not restored, the state is 10s old (confirmations must be consecutive scans, at most 3s apart)"]
    );
}

#[test]
fn the_running_stabilization_window_gives_the_demotion_time() {
    let s = snapshot(vec![partition("orders", 0, &[1, 2, 3, 4])]);
    let mut c = config(PromotionPolicy::UnderMinIsr);
    c.cooldown = Duration::ZERO;
    let mut h = promoted_at(-100);
    h.recovered_since.insert(4, at(-20));
    let m = operator_memory(promoted_at(-100), Some(&save(&h, &c, at(0))), &c, at(1));
    let e = explain(&s, &c, &m, at(1), 4);
    assert_eq!(e.question, "demotion");
    assert!(!e.eligible);
    assert_eq!(e.memory.healthy_without_since, Some(at(-20)));
    assert_eq!(e.memory.demotion_due_at, Some(at(40)));
    assert_eq!(
        detail(&e, "stabilization window"),
        (
            format!(
                "healthy without it since {} (the operator's timer): the window ends at {} (in 39 s)",
                Text(at(-20)),
                Text(at(40))
            )
            .as_str(),
            Some(false)
        )
    );
    assert_eq!(
        e.verdict,
        format!(
            "broker 4: automatically promoted, demotion in 39 s at {} (stabilization window since {})",
            Text(at(40)),
            Text(at(-20))
        )
    );
    let v = plan_view(&s, &c, &m, at(1));
    assert_eq!(
        v.brokers[0].text,
        vec![format!(
            "demotion due at {} (in 39 s; stabilization window since {})",
            Text(at(40)),
            Text(at(-20))
        )]
    );
    // Without the memory the window starts with this scan.
    let e = explain(&s, &c, &memory(promoted_at(-100)), at(1), 4);
    assert_eq!(e.memory.demotion_due_at, Some(at(61)));
    assert!(
        detail(&e, "stabilization window")
            .0
            .contains("starting with this scan; the operator's running timer is unknown"),
        "{}",
        render_explain(&e)
    );
}

#[test]
fn a_cooldown_after_a_demotion_holds_the_next_promotion() {
    let mut s = snapshot(vec![partition("orders", 0, &[1, 2, 4])]);
    stop(&mut s, 2);
    let mut c = config(PromotionPolicy::UnderMinIsr);
    c.confirmations = 1;
    let mut h = PolicyHistory::default();
    h.last_action.insert(
        4,
        LastAction {
            kind: EngineActionKind::Demote,
            at: at(-10),
        },
    );
    let m = operator_memory(
        PolicyHistory::default(),
        Some(&save(&h, &c, at(0))),
        &c,
        at(1),
    );
    let e = explain(&s, &c, &m, at(1), 4);
    assert!(!e.eligible);
    assert_eq!(
        (
            e.memory.last_action,
            e.memory.last_action_at,
            e.memory.cooldown_until
        ),
        (Some("demote"), Some(at(-10)), Some(at(290)))
    );
    assert_eq!(
        detail(&e, "cooldown"),
        (
            format!(
                "cooldown runs until {} (in 289 s): its last automatic action was demote at {}",
                Text(at(290)),
                Text(at(-10))
            )
            .as_str(),
            Some(false)
        )
    );
    let v = plan_view(&s, &c, &m, at(1));
    assert!(v.actions.is_empty());
    assert_eq!(
        v.reasons,
        vec![format!(
            "observer 4: would be promoted, but its cooldown runs until {}",
            Text(at(290))
        )]
    );
    // status.autoPromotions alone does not know of the demotion: it would promote.
    let v = plan_view(&s, &c, &memory(PolicyHistory::default()), at(1));
    assert_eq!(v.actions.len(), 1);
}

#[test]
fn a_takeover_is_not_planned_on_the_saved_high_watermark() {
    let mut s = snapshot(vec![partition("orders", 0, &[1, 2, 4])]);
    stop(&mut s, 1);
    stop(&mut s, 2);
    let mut c = config(PromotionPolicy::UnderMinIsr);
    c.unclean_takeover = true;
    c.acknowledged_observers.clear();
    let mut h = promoted_at(-100);
    h.last_known_hw.insert(s.partitions[0].id(), 100);
    let m = operator_memory(promoted_at(-100), Some(&save(&h, &c, at(0))), &c, at(1));
    let v = plan_view(&s, &c, &m, at(1));
    // The saved high watermark is known, but the plan elects on it no more than a successor
    // operator would (`promotion::witness`), and says so.
    assert!(v.actions.is_empty(), "{:?}", v.actions);
    assert!(
        v.reasons
            .iter()
            .any(|r| r.contains("last high watermark known (100)")),
        "{:?}",
        v.reasons
    );
    let v = plan_view(&s, &c, &memory(promoted_at(-100)), at(1));
    assert!(v.actions.is_empty());
    assert!(
        v.reasons
            .iter()
            .any(|r| r.contains("no high watermark known")),
        "{:?}",
        v.reasons
    );
    assert_eq!(
        v.reasons,
        vec![
            "broker 4: stays promoted, demoting it would put orders-0 under min ISR",
            "broker 4: not electing it by unclean election on orders-0: no high watermark known since the operator started"
        ]
    );
}
