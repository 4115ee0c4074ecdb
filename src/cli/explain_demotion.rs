//! `kubectl observer explain ID` for a promoted broker: whether its demotion is possible now
//! (by hand: `kubectl observer demote`'s pre-checks; automatic: the engine's demotion rules).

use chrono::{DateTime, TimeDelta, Utc};

use super::explain::{check, Explanation};
use crate::policy::{
    check_demotion, led_by, Action, BrokerId, ClusterSnapshot, PolicyConfig, PolicyHistory,
};

#[allow(clippy::too_many_arguments)]
pub(super) fn explain_demotion(
    snapshot: &ClusterSnapshot,
    config: &PolicyConfig,
    history: &PolicyHistory,
    now: DateTime<Utc>,
    x: BrokerId,
    by_hand: bool,
    actions: &[Action],
    out: &mut Explanation,
) {
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
    let cooldown = TimeDelta::from_std(config.cooldown).unwrap_or(TimeDelta::MAX);
    out.checks
        .push(match history.cooling_until(x, cooldown, now) {
            Some(until) => check(
                "cooldown",
                Some(false),
                format!("cooldown runs until {until}"),
            ),
            None => check(
                "cooldown",
                Some(true),
                format!(
                    "cooldown {}s passed since its promotion",
                    config.cooldown.as_secs()
                ),
            ),
        });
    let step = actions.iter().find(|a| a.node_id() == x);
    out.eligible = matches!(
        step,
        Some(Action::Demote { .. } | Action::MoveLeadership { .. })
    );
    out.verdict = match step {
        Some(Action::Demote { reason, .. }) => {
            format!("broker {x}: would be demoted now ({reason})")
        }
        Some(Action::MoveLeadership { reason, .. }) => {
            format!("broker {x}: leadership moves first ({reason})")
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
