//! `kubectl observer explain ID`: for one broker, why it is or is not eligible for promotion
//! (an observer now) or demotion (promoted now) on this scan, rule by rule as in
//! docs/promotion-policies.md, with the engine's own decision and the manual pre-checks. Pure.

use std::collections::BTreeSet;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use super::explain_demotion::explain_demotion;
use super::memory::{broker_memory, from_now, BrokerMemory, MemoryView, OperatorMemory};
use super::plan_view::{memory_notes, policy_name};
use super::replica_table::ReplicaRole;
use crate::promotion::{
    assess, check_promotion, decide, BrokerId, ClusterSnapshot, Concern, Health, PartitionState,
    PolicyConfig, PolicyHistory, PromotionAction, PromotionDecision, PromotionPolicy, SourceHealth,
};
use crate::time_format::Text;

/// One rule and how this broker fares against it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    pub rule: &'static str,
    /// `None`: for information only (not decided on this scan alone).
    pub ok: Option<bool>,
    pub detail: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    pub node_id: BrokerId,
    pub role: ReplicaRole,
    pub declared_observer: bool,
    /// `promotion`, `demotion` or `none` (not a declared observer).
    pub question: &'static str,
    /// Whether the engine would act on it on this scan (promote, demote, or move leadership
    /// first).
    pub eligible: bool,
    pub verdict: String,
    pub checks: Vec<Check>,
    /// The engine's actions and reasons that name this broker, in its words.
    pub engine: Vec<String>,
    /// Where the engine's history came from (`status.engineState` restored or not).
    pub operator_memory: MemoryView,
    /// What the operator remembers of this broker: confirmations, window, cooldown.
    pub memory: BrokerMemory,
    pub notes: Vec<String>,
}

/// Which health states trigger a policy (docs/promotion-policies.md, "Policies").
fn triggers(policy: PromotionPolicy, h: Health) -> bool {
    match policy {
        PromotionPolicy::Manual => false,
        PromotionPolicy::LeaderIsObserver => h == Health::Offline,
        PromotionPolicy::UnderMinIsr => matches!(h, Health::Offline | Health::UnderMinIsr),
        PromotionPolicy::UnderReplicated => matches!(
            h,
            Health::Offline | Health::UnderMinIsr | Health::UnderReplicated
        ),
    }
}

fn names<'a>(parts: impl IntoIterator<Item = &'a PartitionState>) -> String {
    let all: Vec<String> = parts
        .into_iter()
        .map(|p| format!("{}-{}", p.topic, p.partition))
        .collect();
    if all.len() <= 3 {
        all.join(", ")
    } else {
        format!("{} and {} more", all[..3].join(", "), all.len() - 3)
    }
}

pub(super) fn check(rule: &'static str, ok: Option<bool>, detail: impl Into<String>) -> Check {
    Check {
        rule,
        ok,
        detail: detail.into(),
    }
}

/// The lag rule over every partition `x` hosts, watched or not (the engine's reference high
/// watermark: the live one while the partition has a leader).
fn lag_check(snapshot: &ClusterSnapshot, config: &PolicyConfig, x: BrokerId) -> Check {
    let (mut max, mut lagging, mut unknown, mut hosted) = (0, Vec::new(), Vec::new(), 0);
    for p in snapshot.partitions.iter().filter(|p| p.hosts(x)) {
        hosted += 1;
        let hw = p.leader.and(p.high_watermark);
        match p.lag_against(x, hw) {
            None => unknown.push(p),
            Some(l) => {
                max = max.max(l);
                if l > config.max_lag_messages {
                    lagging.push(p);
                }
            }
        }
    }
    let limit = config.max_lag_messages;
    if hosted == 0 {
        check(
            "caught up",
            Some(true),
            "hosts no partition: nothing to catch up on",
        )
    } else if !lagging.is_empty() {
        check(
            "caught up",
            Some(false),
            format!(
                "lagging: up to {max} messages (maxLagMessages {limit}) on {} of {hosted} partition(s): {}",
                lagging.len(),
                names(lagging)
            ),
        )
    } else if !unknown.is_empty() {
        check(
            "caught up",
            Some(false),
            format!(
                "lag unknown on {} of {hosted} partition(s): {}",
                unknown.len(),
                names(unknown.iter().copied())
            ),
        )
    } else {
        check(
            "caught up",
            Some(true),
            format!("caught up on all {hosted} partition(s) it hosts (max lag {max}, maxLagMessages {limit})"),
        )
    }
}

fn scan_check(snapshot: &ClusterSnapshot, config: &PolicyConfig, now: Timestamp) -> Check {
    if let SourceHealth::Unhealthy { reason } = &snapshot.source {
        return check(
            "scan trustworthy",
            Some(false),
            format!("the scan failed: {reason}"),
        );
    }
    let age = now.duration_since(snapshot.taken_at);
    let limit = SignedDuration::try_from(config.stale_after).unwrap_or(SignedDuration::MAX);
    if age > limit {
        return check(
            "scan trustworthy",
            Some(false),
            format!(
                "the scan is {}s old (limit {}s)",
                age.as_secs(),
                limit.as_secs()
            ),
        );
    }
    check("scan trustworthy", Some(true), "metadata read, scan fresh")
}

/// Explains broker `x`. `config` is the engine's (promoted = `spec.promotion.promoted` only),
/// `memory` the operator's history (`status.autoPromotions` and `status.engineState`).
pub fn explain(
    snapshot: &ClusterSnapshot,
    config: &PolicyConfig,
    memory: &OperatorMemory,
    now: Timestamp,
    x: BrokerId,
) -> Explanation {
    let history = &memory.history;
    let decision = decide(snapshot, config, history, now);
    let auto: BTreeSet<BrokerId> = history.auto_promotions.iter().map(|p| p.node_id).collect();
    let declared = config.observers.contains(&x);
    let by_hand = config.promoted.contains(&x);
    let role = match (declared, by_hand || auto.contains(&x)) {
        (true, true) => ReplicaRole::Promoted,
        (true, false) => ReplicaRole::Observer,
        _ => ReplicaRole::Primary,
    };
    let hosted: Vec<&PartitionState> = snapshot.partitions.iter().filter(|p| p.hosts(x)).collect();
    let engine: Vec<String> = decision
        .actions
        .iter()
        .filter(|a| a.node_id() == x)
        .map(|a| format!("action: {}", a.reason()))
        .chain(
            decision
                .reasons
                .iter()
                .filter(|r| r.broker() == Some(x) || r.concern == Concern::Scan)
                .map(ToString::to_string),
        )
        .collect();
    let mut checks = vec![scan_check(snapshot, config, now)];
    let alive = snapshot.is_alive(x);
    checks.push(check(
        "alive",
        Some(alive),
        match snapshot.brokers.get(&x) {
            Some(b) if b.is_alive() => "registered and answering".to_string(),
            Some(b) if b.registered => "registered but not answering the offset probe".to_string(),
            _ => "not registered with the controller".to_string(),
        },
    ));
    let mut out = Explanation {
        node_id: x,
        role,
        declared_observer: declared,
        question: "none",
        eligible: false,
        verdict: String::new(),
        checks,
        engine,
        operator_memory: memory.view.clone(),
        memory: broker_memory(history, &decision.next_history, config, now, x),
        notes: Vec::new(),
    };
    if !declared {
        out.verdict = format!(
            "broker {x} is not a declared observer (spec.observers): a primary replica, which the engine never promotes or demotes (it hosts {} partition(s))",
            hosted.len()
        );
        return out;
    }
    out.notes = memory_notes(config, history, &memory.view);
    match role {
        ReplicaRole::Observer => explain_promotion(
            snapshot, config, history, now, x, &hosted, &decision, &mut out,
        ),
        _ => explain_demotion(snapshot, config, now, x, by_hand, &decision, &mut out),
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn explain_promotion(
    snapshot: &ClusterSnapshot,
    config: &PolicyConfig,
    history: &PolicyHistory,
    now: Timestamp,
    x: BrokerId,
    hosted: &[&PartitionState],
    decision: &PromotionDecision,
    out: &mut Explanation,
) {
    let actions = &decision.actions;
    out.question = "promotion";
    let policy = policy_name(config.policy);
    out.checks.push(check(
        "policy",
        Some(config.policy != PromotionPolicy::Manual),
        if config.policy == PromotionPolicy::Manual {
            "Manual: the engine never promotes automatically (kubectl observer promote does it by hand)".to_string()
        } else {
            format!("{policy}{}", if config.dry_run { " (dry run: planned, never acted on)" } else { "" })
        },
    ));
    let watched: Vec<&PartitionState> = hosted
        .iter()
        .copied()
        .filter(|p| config.topics.watches(&p.topic))
        .collect();
    out.checks.push(check(
        "topic filters",
        Some(!watched.is_empty()),
        format!(
            "hosts {} partition(s), {} watched by topics include/exclude ({} excluded)",
            hosted.len(),
            watched.len(),
            hosted.len() - watched.len()
        ),
    ));
    let auto: BTreeSet<BrokerId> = history.auto_promotions.iter().map(|p| p.node_id).collect();
    let observer_now = |b: BrokerId| {
        config.observers.contains(&b) && !config.promoted.contains(&b) && !auto.contains(&b)
    };
    let health: Vec<(Health, &PartitionState)> = watched
        .iter()
        .map(|p| (assess(p, snapshot, observer_now), *p))
        .collect();
    let unknown: Vec<&PartitionState> = health
        .iter()
        .filter(|(h, _)| *h == Health::Unknown)
        .map(|(_, p)| *p)
        .collect();
    let triggered: Vec<&PartitionState> = health
        .iter()
        .filter(|(h, _)| triggers(config.policy, *h))
        .map(|(_, p)| *p)
        .collect();
    let count = |want: Health| health.iter().filter(|(h, _)| *h == want).count();
    let states = format!(
        "{} healthy, {} under-replicated, {} under min ISR, {} offline, {} unknown",
        count(Health::Healthy),
        count(Health::UnderReplicated),
        count(Health::UnderMinIsr),
        count(Health::Offline),
        count(Health::Unknown)
    );
    let needed = !triggered.is_empty();
    out.checks.push(check(
        "needed",
        Some(needed && unknown.is_empty()),
        if !unknown.is_empty() {
            format!(
                "state unknown for {} (the engine does not act): {states}",
                names(unknown.iter().copied())
            )
        } else if needed {
            format!(
                "{} watched partition(s) trigger policy {policy}: {}; {states}",
                triggered.len(),
                names(triggered.iter().copied())
            )
        } else {
            format!("no watched partition it hosts triggers policy {policy}: {states}")
        },
    ));
    let lag = lag_check(snapshot, config, x);
    let caught_up = lag.detail.clone();
    out.checks.push(lag);
    let promoted_now = actions
        .iter()
        .any(|a| matches!(a, PromotionAction::Promote { node_id, .. } if *node_id == x));
    out.checks.push(confirmation_check(
        config,
        &out.memory,
        &out.operator_memory,
        decision.next_history.promote_streak.get(&x).copied(),
        promoted_now,
    ));
    out.checks.push(cooldown_check(config, &out.memory, now));
    let in_force = history.auto_promotions.len();
    out.checks.push(check(
        "concurrency",
        Some(in_force < config.max_concurrent_promotions as usize),
        format!(
            "{in_force} automatic promotion(s) in force, maxConcurrentPromotions {}",
            config.max_concurrent_promotions
        ),
    ));
    let mut manual = config.clone();
    manual.promoted.extend(auto.iter().copied());
    let report = check_promotion(snapshot, &manual, x, now);
    out.checks.push(check(
        "manual promote pre-checks",
        Some(report.passed()),
        if report.passed() {
            "pass: kubectl observer promote would accept it".to_string()
        } else {
            report.problems.join("; ")
        },
    ));
    let promote = actions.iter().find_map(|a| match a {
        PromotionAction::Promote { node_id, reason } if *node_id == x => Some(reason.clone()),
        _ => None,
    });
    out.eligible = promote.is_some();
    out.verdict = match promote {
        Some(reason) => format!("observer {x}: would be promoted now ({reason})"),
        None if !needed && unknown.is_empty() => {
            format!("observer {x}: not needed (no watched partition it hosts triggers policy {policy}); {caught_up}")
        }
        None => {
            let failed: Vec<String> = out
                .checks
                .iter()
                .filter(|c| c.ok == Some(false) && c.rule != "manual promote pre-checks")
                .map(|c| format!("{}: {}", c.rule, c.detail))
                .collect();
            let failed = if failed.is_empty() {
                out.engine.join("; ")
            } else {
                failed.join("; ")
            };
            format!("observer {x}: not promoted now: {failed}")
        }
    };
}

/// The confirmations rule with the operator's count: what it counted before this scan (from
/// `status.engineState`) and where this scan leaves the count.
fn confirmation_check(
    config: &PolicyConfig,
    memory: &BrokerMemory,
    view: &MemoryView,
    after: Option<u32>,
    promoted_now: bool,
) -> Check {
    let n = config.confirmations;
    let counted = memory.confirmations_counted.unwrap_or(0);
    let before = if view.restored {
        format!("the operator has counted {counted} of {n} consecutive scans")
    } else {
        format!("the operator's count is unknown ({})", view.summary)
    };
    match (promoted_now, after) {
        (true, _) => check(
            "confirmations",
            Some(true),
            format!("{before}; this scan makes {} of {n}", counted + 1),
        ),
        (false, Some(k)) if view.restored => check(
            "confirmations",
            Some(k >= n),
            format!("{before}; this scan makes {k} of {n}"),
        ),
        (false, Some(k)) => check(
            "confirmations",
            None,
            format!("{before}; this scan alone makes {k} of {n}"),
        ),
        (false, None) => check(
            "confirmations",
            None,
            format!("{before}; not a candidate on this scan, so the count starts again"),
        ),
    }
}

/// The cooldown rule: from the last automatic action the operator remembers.
pub(super) fn cooldown_check(config: &PolicyConfig, m: &BrokerMemory, now: Timestamp) -> Check {
    match (m.cooldown_until, m.last_action, m.last_action_at) {
        (Some(until), Some(kind), Some(at)) => check(
            "cooldown",
            Some(false),
            format!(
                "cooldown runs until {} ({}): its last automatic action was {kind} at {}",
                Text(until),
                from_now(until, now),
                Text(at)
            ),
        ),
        _ => check(
            "cooldown",
            Some(true),
            format!(
                "no automatic action on it within cooldown {}s",
                config.cooldown.as_secs()
            ),
        ),
    }
}

/// The explanation as text: the verdict, then each rule.
pub fn render_explain(e: &Explanation) -> String {
    let mut out = format!("{}\n", e.verdict);
    for c in &e.checks {
        let mark = match c.ok {
            Some(true) => "ok",
            Some(false) => "NO",
            None => "--",
        };
        out += &format!("  [{mark}] {}: {}\n", c.rule, c.detail);
    }
    for l in &e.engine {
        out += &format!("  engine: {l}\n");
    }
    out += &super::memory::render_memory(&e.operator_memory);
    for n in &e.notes {
        out += &format!("  note: {n}\n");
    }
    out
}

#[cfg(test)]
#[path = "explain_tests.rs"]
mod tests;
