//! Which observers to promote now: triggered, caught up, confirmed, out of cooldown, within the
//! concurrency limit.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::action::PromotionAction;
use super::health::Health;
use super::held_back::{Concern, HeldBack};
use super::history::{LastAction, PolicyHistory};
use super::listing::list_partitions;
use super::scan::{triggering, DecisionDraft, Scan};
use super::snapshot::{BrokerId, PartitionState};
use crate::crd::{AutoPromotion, EngineActionKind, PromotionPolicy};
use crate::time_format::Text;

enum Candidate<'a> {
    /// No watched partition it hosts needs it.
    NotNeeded,
    /// Needed, but promoting it now would break a rule.
    Blocked(HeldBack),
    Eligible {
        triggered: Vec<(Health, &'a PartitionState)>,
    },
}

pub(super) fn plan(scan: &Scan, next: &mut PolicyHistory, out: &mut DecisionDraft) {
    let config = scan.config;
    if config.policy == PromotionPolicy::Manual {
        next.promote_streak.clear();
        return;
    }
    let mut streaks = BTreeMap::new();
    let mut ready = Vec::new();
    for &x in &scan.observers_now {
        let triggered = match candidate(scan, x) {
            Candidate::NotNeeded => continue,
            Candidate::Blocked(why) => {
                out.reasons.push(why);
                continue;
            }
            Candidate::Eligible { triggered } => triggered,
        };
        let streak = scan
            .history
            .promote_streak
            .get(&x)
            .copied()
            .unwrap_or(0)
            .saturating_add(1);
        streaks.insert(x, streak);
        if streak < config.confirmations {
            out.reasons.push(HeldBack::new(
                Concern::Promotion(x),
                format!(
                    "promotion confirmed by {streak} of {} consecutive scans",
                    config.confirmations
                ),
            ));
            continue;
        }
        if let Some(until) = scan.cooling_until(x) {
            out.reasons.push(HeldBack::new(
                Concern::Promotion(x),
                format!(
                    "would be promoted, but its cooldown runs until {}",
                    Text(until)
                ),
            ));
            continue;
        }
        let worst = triggered
            .iter()
            .map(|(h, _)| *h)
            .min()
            .unwrap_or(Health::Healthy);
        let reason = format!(
            "{} partition(s) {}: {}",
            triggered.len(),
            worst.describe(),
            list_partitions(triggered.iter().map(|(_, p)| *p))
        );
        ready.push((triggered.len(), x, reason));
    }

    // Most affected partitions first, then the lowest id, so the choice is deterministic.
    ready.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut in_force = scan.history.auto_promotions.len();
    for (_, x, reason) in ready {
        if in_force >= config.max_concurrent_promotions as usize {
            out.reasons.push(HeldBack::new(Concern::Promotion(x), format!(
                "would be promoted ({reason}), but {in_force} automatic promotion(s) are in force (maxConcurrentPromotions {})",
                config.max_concurrent_promotions
            )));
            continue;
        }
        in_force += 1;
        if !config.dry_run {
            // In a dry run nothing happens, so the streak stands and the plan keeps showing the
            // promotion on every scan instead of flickering through the confirmations again.
            streaks.remove(&x);
        }
        next.auto_promotions.push(AutoPromotion {
            node_id: x,
            // Whole seconds, as status keeps it: a sub-second time in memory would differ from
            // the stored copy on every scan and rewrite the status each time
            // (`crate::automation::status::differs`).
            at: Time(Timestamp::from_second(scan.now.as_second()).unwrap_or(scan.now)),
            reason: reason.clone(),
        });
        next.last_action.insert(
            x,
            LastAction {
                kind: EngineActionKind::Promote,
                at: scan.now,
            },
        );
        out.actions
            .push(PromotionAction::Promote { node_id: x, reason });
    }
    next.promote_streak = streaks;
}

fn candidate<'a>(scan: &'a Scan, x: BrokerId) -> Candidate<'a> {
    let config = scan.config;
    let mut triggered = Vec::new();
    let mut unknown = Vec::new();
    for (i, p) in scan.partitions_of(x) {
        if !config.topics.watches(&p.topic) {
            continue;
        }
        match scan.health[i] {
            Health::Unknown => unknown.push(p),
            h if triggering(config, &scan.observers_now, p, h) => triggered.push((h, p)),
            _ => {}
        }
    }
    if !unknown.is_empty() {
        return Candidate::Blocked(HeldBack::new(
            Concern::Promotion(x),
            format!("not acting, state unknown for {}", list_partitions(unknown)),
        ));
    }
    if triggered.is_empty() {
        return Candidate::NotNeeded;
    }
    if !scan.snapshot.is_alive(x) {
        return Candidate::Blocked(HeldBack::new(
            Concern::Promotion(x),
            "needed but not alive (unregistered or unreachable), not promoting",
        ));
    }
    // The lag rule covers every partition the observer hosts, watched or not: once promoted it
    // joins the ISR of all of them.
    let mut lagging = Vec::new();
    let mut lag_unknown = Vec::new();
    let mut worst_lag = 0;
    for (_, p) in scan.partitions_of(x) {
        match p.lag_against(x, scan.lag_reference(p)) {
            None => lag_unknown.push(p),
            Some(lag) if lag > config.max_lag_messages => {
                worst_lag = worst_lag.max(lag);
                lagging.push(p);
            }
            Some(_) => {}
        }
    }
    if !lagging.is_empty() {
        return Candidate::Blocked(HeldBack::new(
            Concern::Promotion(x),
            format!(
                "needed but lagging (up to {worst_lag} messages, max {}) on {}",
                config.max_lag_messages,
                list_partitions(lagging)
            ),
        ));
    }
    if !lag_unknown.is_empty() {
        return Candidate::Blocked(HeldBack::new(
            Concern::Promotion(x),
            format!(
                "needed but its lag is unknown on {}",
                list_partitions(lag_unknown)
            ),
        ));
    }
    Candidate::Eligible { triggered }
}
