//! `kubectl observer explain ID` for a promoted broker: whether its demotion is possible now
//! (by hand: `kubectl observer demote`'s pre-checks; automatic: the engine's demotion rules).

use k8s_openapi::jiff::Timestamp;

use super::explain::{check, cooldown_check, Check, Explanation};
use super::memory::{from_now, BrokerMemory, MemoryView};
use crate::promotion::{
    check_demotion, led_by, BrokerId, ClusterSnapshot, PolicyConfig, PromotionAction,
    PromotionDecision,
};
use crate::time_format::Text;

pub(super) fn explain_demotion(
    snapshot: &ClusterSnapshot,
    config: &PolicyConfig,
    now: Timestamp,
    x: BrokerId,
    by_hand: bool,
    decision: &PromotionDecision,
    out: &mut Explanation,
) {
    let actions = &decision.actions;
    out.question = "demotion";
    let led = led_by(snapshot, x);
    out.checks.push(check(
        "leads nothing",
        Some(led.is_empty()),
        if led.is_empty() {
            "leads no partition".to_string()
        } else {
            format!(
                "leads {} partition(s): a preferred leader election must move them first",
                led.len()
            )
        },
    ));
    let mut manual = config.clone();
    manual.promoted.insert(x);
    let report = check_demotion(snapshot, &manual, x, now);
    let without: Vec<&String> = report
        .problems
        .iter()
        .filter(|p| p.contains("under min ISR") || p.contains("state unknown"))
        .collect();
    out.checks.push(check(
        "safe without it",
        Some(without.is_empty()),
        if without.is_empty() {
            "no partition it hosts would drop under min ISR without it".to_string()
        } else {
            without
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        },
    ));
    if by_hand {
        out.verdict = format!(
            "broker {x} is promoted by hand (spec.promotion.promoted): the engine never demotes it; kubectl observer demote {x} {}",
            if report.passed() {
                "would accept it now".to_string()
            } else {
                format!("would refuse: {}", report.problems.join("; "))
            }
        );
        out.eligible = report.passed();
        return;
    }
    out.checks.push(match config.auto_demote_after {
        None => check(
            "autoDemote",
            Some(false),
            "autoDemote is disabled: it stays promoted",
        ),
        Some(w) => check(
            "autoDemote",
            Some(true),
            format!("enabled, stabilizationWindow {}s", w.as_secs()),
        ),
    });
    if config.auto_demote_after.is_some() {
        out.checks
            .push(window_check(&out.memory, &out.operator_memory, now));
    }
    out.checks.push(cooldown_check(config, &out.memory, now));
    let step = actions.iter().find(|a| a.node_id() == x);
    out.eligible = matches!(
        step,
        Some(
            PromotionAction::Demote { .. }
                | PromotionAction::MoveLeadership { .. }
                | PromotionAction::ReorderReplicas { .. }
        )
    );
    out.verdict = match step {
        Some(PromotionAction::Demote { reason, .. }) => {
            format!("broker {x}: would be demoted now ({reason})")
        }
        Some(
            PromotionAction::MoveLeadership { reason, .. }
            | PromotionAction::ReorderReplicas { reason, .. },
        ) => {
            format!("broker {x}: leadership moves first ({reason})")
        }
        _ if waiting(&out.memory, now).is_some() => {
            let (due, what) = waiting(&out.memory, now).unwrap_or((now, String::new()));
            format!(
                "broker {x}: automatically promoted, demotion {} at {} ({what})",
                from_now(due, now),
                Text(due)
            )
        }
        _ => {
            let why: Vec<&String> = out
                .engine
                .iter()
                .filter(|e| !e.starts_with("action:"))
                .collect();
            if why.is_empty() {
                format!("broker {x}: automatically promoted, stays promoted")
            } else {
                format!(
                    "broker {x}: automatically promoted, {}",
                    why.iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            }
        }
    };
}

/// The stabilization window: since when the cluster has been healthy without the broker (the
/// operator's timer from `status.engineState`, or this scan) and when the window ends.
fn window_check(m: &BrokerMemory, view: &MemoryView, now: Timestamp) -> Check {
    match (m.healthy_without_since, m.demotion_due_at) {
        (Some(since), Some(due)) => {
            let from = if since < now {
                "the operator's timer"
            } else if view.restored {
                "starting with this scan"
            } else {
                "starting with this scan; the operator's running timer is unknown without status.engineState"
            };
            check(
                "stabilization window",
                Some(due <= now),
                format!(
                    "healthy without it since {} ({from}): the window ends at {} ({})",
                    Text(since),
                    Text(due),
                    from_now(due, now)
                ),
            )
        }
        _ => check(
            "stabilization window",
            Some(false),
            "not running: the cluster is not healthy without it (see engine)",
        ),
    }
}

/// When the demotion of a broker healthy without it is due, and what it waits for: the
/// stabilization window, then the cooldown. `None` when it waits for neither.
fn waiting(m: &BrokerMemory, now: Timestamp) -> Option<(Timestamp, String)> {
    let (since, window_ends) = m.healthy_without_since.zip(m.demotion_due_at)?;
    let cooldown_ends = m.cooldown_until.filter(|u| *u > window_ends);
    let due = cooldown_ends.unwrap_or(window_ends);
    (due > now).then(|| {
        let window = format!("stabilization window since {}", Text(since));
        match cooldown_ends {
            Some(until) if window_ends > now => (
                due,
                format!("{window}, then the cooldown until {}", Text(until)),
            ),
            Some(until) => (due, format!("cooldown until {}", Text(until))),
            None => (due, window),
        }
    })
}
