use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::cli::fixtures::{at, config, memory, partition, snapshot, stop};
use crate::promotion::AutoPromotion;

fn ok(e: &Explanation, rule: &str) -> Option<bool> {
    e.checks.iter().find(|c| c.rule == rule).unwrap().ok
}

#[test]
fn healthy_observer_is_not_needed_and_caught_up() {
    let s = snapshot(vec![partition("orders", 0, &[1, 2, 4])]);
    let e = explain(
        &s,
        &config(PromotionPolicy::Manual),
        &memory(PolicyHistory::default()),
        at(1),
        4,
    );
    assert_eq!(
        (e.role, e.question, e.eligible),
        (ReplicaRole::Observer, "promotion", false)
    );
    assert_eq!(
        e.verdict,
        "observer 4: not needed (no watched partition it hosts triggers policy Manual); caught up on all 1 partition(s) it hosts (max lag 0, maxLagMessages 1000)"
    );
    assert_eq!(ok(&e, "policy"), Some(false));
    assert_eq!(ok(&e, "manual promote pre-checks"), Some(true));
}

#[test]
fn a_primary_is_not_a_declared_observer() {
    let s = snapshot(vec![partition("orders", 0, &[1, 2, 4])]);
    let e = explain(
        &s,
        &config(PromotionPolicy::UnderMinIsr),
        &memory(PolicyHistory::default()),
        at(1),
        3,
    );
    assert_eq!((e.role, e.question), (ReplicaRole::Primary, "none"));
    assert!(
        e.verdict.starts_with("broker 3 is not a declared observer"),
        "{}",
        e.verdict
    );
}

#[test]
fn needed_but_lagging_observer_is_not_promoted() {
    let mut s = snapshot(vec![
        partition("orders", 0, &[1, 2, 4]),
        partition("__x", 0, &[1, 3, 4]),
    ]);
    s.partitions[1].log_end_offsets.insert(4, 10);
    stop(&mut s, 2);
    let mut c = config(PromotionPolicy::UnderMinIsr);
    c.max_lag_messages = 10;
    let e = explain(&s, &c, &memory(PolicyHistory::default()), at(1), 4);
    assert_eq!(ok(&e, "needed"), Some(true));
    assert_eq!(ok(&e, "caught up"), Some(false));
    assert_eq!(ok(&e, "topic filters"), Some(true));
    assert!(e
        .checks
        .iter()
        .any(|c| c.detail
            == "hosts 2 partition(s), 1 watched by topics include/exclude (1 excluded)"));
    assert!(
        e.verdict.starts_with("observer 4: not promoted now: ")
            && e.verdict.contains(
                "caught up: lagging: up to 90 messages (maxLagMessages 10) on 1 of 2 partition(s): __x-0"
            ),
        "{}",
        e.verdict
    );
    assert!(
        e.engine.iter().any(|r| r.contains("needed but lagging")),
        "{:?}",
        e.engine
    );
}

#[test]
fn needed_caught_up_observer_is_promoted_with_one_confirmation() {
    let mut s = snapshot(vec![partition("orders", 0, &[1, 2, 4])]);
    stop(&mut s, 2);
    let mut c = config(PromotionPolicy::UnderMinIsr);
    c.confirmations = 1;
    let e = explain(&s, &c, &memory(PolicyHistory::default()), at(1), 4);
    assert!(e.eligible);
    assert!(
        e.verdict.starts_with("observer 4: would be promoted now"),
        "{}",
        e.verdict
    );
    let c2 = config(PromotionPolicy::UnderMinIsr);
    let e = explain(&s, &c2, &memory(PolicyHistory::default()), at(1), 4);
    assert!(!e.eligible);
    assert!(
        e.verdict.contains("promotion confirmed by 1 of 2"),
        "{}",
        e.verdict
    );
}

#[test]
fn auto_promoted_broker_waits_for_cooldown_and_leadership() {
    let mut p = partition("orders", 0, &[4, 1, 2]);
    p.isr = vec![4, 1, 2];
    let s = snapshot(vec![p]);
    let history = PolicyHistory::from_auto_promotions(vec![AutoPromotion {
        node_id: 4,
        at: Time(at(-10)),
        reason: "r".into(),
    }]);
    let e = explain(
        &s,
        &config(PromotionPolicy::UnderMinIsr),
        &memory(history),
        at(1),
        4,
    );
    assert_eq!(
        (e.role, e.question, e.eligible),
        (ReplicaRole::Promoted, "demotion", false)
    );
    assert_eq!(ok(&e, "cooldown"), Some(false));
    assert_eq!(ok(&e, "leads nothing"), Some(false));
    assert!(
        e.verdict.starts_with("broker 4: automatically promoted"),
        "{}",
        e.verdict
    );
}

#[test]
fn hand_promoted_broker_is_never_demoted_by_the_engine() {
    let s = snapshot(vec![partition("orders", 0, &[1, 2, 3, 4])]);
    let mut c = config(PromotionPolicy::UnderMinIsr);
    c.promoted.insert(4);
    let e = explain(&s, &c, &memory(PolicyHistory::default()), at(1), 4);
    assert_eq!(e.question, "demotion");
    assert!(
        e.verdict
            .contains("the engine never demotes it; kubectl observer demote 4 would accept it now"),
        "{}",
        e.verdict
    );
}
