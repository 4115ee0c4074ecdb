//! `kubectl observer plan`: what the engine would do now and why. Pure: the engine's own
//! `promotion::decide` on one fresh scan, with the config and history the operator's automation
//! has (spec, `status.effectiveObservers`, `status.autoPromotions` and `status.engineState`:
//! [`super::memory`]).

use std::collections::BTreeSet;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use super::memory::{
    action_name, broker_memory, from_now, render_memory, BrokerMemory, MemoryView, OperatorMemory,
};
use crate::promotion::{
    decide, BrokerId, ClusterSnapshot, PolicyConfig, PolicyHistory, PromotionPolicy,
};
use crate::time_format::{self, Text};

/// One action the engine would take, in the order it would take them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedAction {
    /// `promote`, `demote`, `moveLeadership` or `uncleanElect`.
    pub action: &'static str,
    pub node_id: i32,
    /// The partitions of a leader election; empty for promotions and demotions.
    pub partitions: Vec<String>,
    pub reason: String,
}

/// The engine's decision on this scan, for people.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanView {
    #[serde(serialize_with = "time_format::serialize")]
    pub decided_at: Timestamp,
    #[serde(serialize_with = "time_format::serialize")]
    pub scanned_at: Timestamp,
    pub policy: String,
    pub dry_run: bool,
    /// One line: "no action: ..." or "<n> action(s)".
    pub verdict: String,
    pub actions: Vec<PlannedAction>,
    /// Why the engine held back where it might have acted (its own words).
    pub reasons: Vec<String>,
    /// Watched partitions whose state triggers the policy in this scan.
    pub triggered_partitions: usize,
    /// Where the engine's history came from (`status.engineState` restored or not).
    pub operator_memory: MemoryView,
    /// The timers and counts the operator keeps per broker, for every broker it remembers.
    pub brokers: Vec<BrokerTimers>,
    /// What the plugin cannot know without the operator's memory.
    pub notes: Vec<String>,
}

/// One broker's entry of [`PlanView::brokers`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerTimers {
    pub node_id: BrokerId,
    #[serde(flatten)]
    pub memory: BrokerMemory,
    /// The same, for people (the text view).
    #[serde(skip)]
    pub text: Vec<String>,
}

pub fn policy_name(p: PromotionPolicy) -> String {
    format!("{p:?}")
}

/// Without `status.engineState` the history only holds what `status.autoPromotions` records:
/// these limits apply (with it, the counts and timers are the operator's own).
pub fn memory_notes(
    config: &PolicyConfig,
    history: &PolicyHistory,
    memory: &MemoryView,
) -> Vec<String> {
    let mut notes = Vec::new();
    if memory.restored {
        return notes;
    }
    if config.confirmations > 1 && config.policy != PromotionPolicy::Manual {
        notes.push(format!(
            "without the operator's memory this scan counts as 1 of the {} confirmations a promotion needs; the operator may have counted more",
            config.confirmations
        ));
    }
    if !history.auto_promotions.is_empty() && config.auto_demote_after.is_some() {
        notes.push(
            "without the operator's memory the stabilization window of a demotion is counted from this scan; the operator's running window may be further along"
                .into(),
        );
    }
    notes
}

/// The per-broker text of a [`BrokerMemory`]: confirmations, window, cooldown.
pub fn describe_memory(m: &BrokerMemory, config: &PolicyConfig, now: Timestamp) -> Vec<String> {
    let mut parts = Vec::new();
    if let Some(k) = m.confirmations_counted {
        parts.push(format!(
            "confirmations counted {k} of {}",
            config.confirmations
        ));
    }
    if let (Some(since), Some(due)) = (m.healthy_without_since, m.demotion_due_at) {
        parts.push(format!(
            "demotion due at {} ({}; stabilization window since {})",
            Text(due),
            from_now(due, now),
            Text(since)
        ));
    }
    if let (Some(until), Some(kind), Some(at)) = (m.cooldown_until, m.last_action, m.last_action_at)
    {
        parts.push(format!(
            "cooldown until {} ({}; after its {kind} at {})",
            Text(until),
            from_now(until, now),
            Text(at)
        ));
    }
    parts
}

/// Runs the engine's decision on `snapshot` and describes it.
pub fn plan_view(
    snapshot: &ClusterSnapshot,
    config: &PolicyConfig,
    memory: &OperatorMemory,
    now: Timestamp,
) -> PlanView {
    let history = &memory.history;
    let decision = decide(snapshot, config, history, now);
    let next = &decision.next_history;
    let remembered: BTreeSet<BrokerId> = history
        .promote_streak
        .keys()
        .chain(next.recovered_since.keys())
        .chain(history.last_action.keys())
        .copied()
        .collect();
    let brokers: Vec<BrokerTimers> = remembered
        .into_iter()
        .map(|node_id| {
            let memory = broker_memory(history, next, config, now, node_id);
            let text = describe_memory(&memory, config, now);
            BrokerTimers {
                node_id,
                memory,
                text,
            }
        })
        .filter(|b| !b.text.is_empty())
        .collect();
    let actions: Vec<PlannedAction> = decision
        .actions
        .iter()
        .map(|a| PlannedAction {
            action: action_name(a.kind()),
            node_id: a.node_id(),
            partitions: a.partitions().iter().map(ToString::to_string).collect(),
            reason: a.reason().to_owned(),
        })
        .collect();
    let policy = policy_name(config.policy);
    let verdict = if !actions.is_empty() {
        format!("{} action(s)", actions.len())
    } else if !decision.reasons.is_empty() {
        "no action: the engine holds back (why below)".to_string()
    } else if config.policy == PromotionPolicy::Manual && history.auto_promotions.is_empty() {
        "no action: policy Manual promotes nothing automatically, and no automatic promotion is in force".to_string()
    } else if decision.triggered_partitions() == 0 {
        format!("no action: no watched partition triggers policy {policy}, and no automatic promotion is due for demotion")
    } else {
        "no action".to_string()
    };
    PlanView {
        decided_at: now,
        scanned_at: snapshot.taken_at,
        policy,
        dry_run: config.dry_run,
        verdict,
        actions,
        triggered_partitions: decision.triggered_partitions(),
        reasons: decision.reasons.iter().map(ToString::to_string).collect(),
        operator_memory: memory.view.clone(),
        brokers,
        notes: memory_notes(config, history, &memory.view),
    }
}

pub fn render_plan(v: &PlanView) -> String {
    let mut out = format!(
        "engine decision now (policy {}{}, scan at {}): {}\n",
        v.policy,
        if v.dry_run { ", dry run" } else { "" },
        v.scanned_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        v.verdict
    );
    for a in &v.actions {
        out += &format!("  {} broker {}", a.action, a.node_id);
        if !a.partitions.is_empty() {
            out += &format!(" on {}", a.partitions.join(", "));
        }
        out += &format!(": {}\n", a.reason);
    }
    for r in &v.reasons {
        out += &format!("  why: {r}\n");
    }
    out += &format!(
        "  watched partitions triggering the policy: {}\n",
        v.triggered_partitions
    );
    out += &render_memory(&v.operator_memory);
    for b in &v.brokers {
        out += &format!("  broker {}: {}\n", b.node_id, b.text.join("; "));
    }
    for n in &v.notes {
        out += &format!("  note: {n}\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::fixtures::{at, config, memory, partition, snapshot, stop};

    #[test]
    fn healthy_manual_cluster_plans_nothing() {
        let s = snapshot(vec![partition("orders", 0, &[1, 2, 4])]);
        let v = plan_view(
            &s,
            &config(PromotionPolicy::Manual),
            &memory(PolicyHistory::default()),
            at(1),
        );
        assert!(v.actions.is_empty());
        assert!(
            v.verdict.starts_with("no action: policy Manual"),
            "{}",
            v.verdict
        );
        assert!(render_plan(&v).contains("no action"));
    }

    #[test]
    fn under_min_isr_with_one_confirmation_promotes_the_observer() {
        let mut s = snapshot(vec![partition("orders", 0, &[1, 2, 4])]);
        stop(&mut s, 2);
        let mut c = config(PromotionPolicy::UnderMinIsr);
        c.confirmations = 1;
        let v = plan_view(&s, &c, &memory(PolicyHistory::default()), at(1));
        assert_eq!(v.verdict, "1 action(s)");
        assert_eq!((v.actions[0].action, v.actions[0].node_id), ("promote", 4));
        assert!(v.notes.is_empty());
        let text = render_plan(&v);
        assert!(
            text.contains("promote broker 4: 1 partition(s) under min ISR: orders-0"),
            "{text}"
        );
    }

    #[test]
    fn two_confirmations_hold_back_and_say_so() {
        let mut s = snapshot(vec![partition("orders", 0, &[1, 2, 4])]);
        stop(&mut s, 2);
        let v = plan_view(
            &s,
            &config(PromotionPolicy::UnderMinIsr),
            &memory(PolicyHistory::default()),
            at(1),
        );
        assert!(v.actions.is_empty());
        assert_eq!(
            v.reasons,
            vec!["observer 4: promotion confirmed by 1 of 2 consecutive scans"]
        );
        assert_eq!(v.notes.len(), 1);
        assert_eq!(v.triggered_partitions, 1);
    }

    #[test]
    fn stale_scan_is_not_acted_on() {
        let s = snapshot(vec![partition("orders", 0, &[1, 2, 4])]);
        let v = plan_view(
            &s,
            &config(PromotionPolicy::UnderMinIsr),
            &memory(PolicyHistory::default()),
            at(60),
        );
        assert!(
            v.reasons[0].starts_with("not acting: the cluster snapshot"),
            "{:?}",
            v.reasons
        );
        assert!(v.verdict.starts_with("no action: the engine holds back"));
    }
}
