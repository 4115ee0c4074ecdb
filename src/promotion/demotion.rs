//! Undoing automatic promotions: only once every watched partition the broker hosts is fully
//! replicated without it for the stabilization window, never below min ISR anywhere, and only
//! after its leaderships have moved elsewhere.

use std::collections::BTreeMap;

use k8s_openapi::jiff::SignedDuration;

use super::action::PromotionAction;
use super::health::{assess, Health};
use super::held_back::{Concern, HeldBack};
use super::history::{LastAction, PolicyHistory};
use super::listing::{list_partitions, summarize};
use super::scan::{DecisionDraft, Scan};
use super::snapshot::{BrokerId, PartitionState};
use crate::crd::EngineActionKind;
use crate::time_format::Text;

pub(super) fn plan(scan: &Scan, next: &mut PolicyHistory, out: &mut DecisionDraft) {
    let config = scan.config;
    let Some(window) = config.auto_demote_after else {
        next.recovered_since.clear();
        return;
    };
    let window = SignedDuration::try_from(window).unwrap_or(SignedDuration::MAX);
    let mut recovered = BTreeMap::new();
    for promotion in &scan.history.auto_promotions {
        let x = promotion.node_id;
        if !config.observers.contains(&x) {
            // No longer declared an observer: there is nothing to demote it back to.
            next.auto_promotions.retain(|p| p.node_id != x);
            continue;
        }
        if config.promoted.contains(&x) {
            out.reasons.push(HeldBack::new(
                Concern::Demotion(x),
                "also promoted by hand (promotion.promoted), not demoting it automatically",
            ));
            continue;
        }
        if let Err(why) = recovered_without(scan, x) {
            out.reasons.push(HeldBack::new(
                Concern::Demotion(x),
                format!("stays promoted, {why}"),
            ));
            continue;
        }
        let since = scan
            .history
            .recovered_since
            .get(&x)
            .copied()
            .unwrap_or(scan.now);
        recovered.insert(x, since);
        if scan.now.duration_since(since) < window {
            out.reasons.push(HeldBack::new(
                Concern::Demotion(x),
                format!(
                    "cluster healthy without it since {}, demotion after the stabilization window",
                    Text(since)
                ),
            ));
            continue;
        }
        if let Some(until) = scan.cooling_until(x) {
            out.reasons.push(HeldBack::new(
                Concern::Demotion(x),
                format!(
                    "would be demoted, but its cooldown runs until {}",
                    Text(until)
                ),
            ));
            continue;
        }
        let led: Vec<&PartitionState> = scan
            .partitions_of(x)
            .map(|(_, p)| p)
            .filter(|p| p.leader == Some(x))
            .collect();
        if !led.is_empty() {
            // A leader never shrinks itself out of the ISR, so its leaderships must go first.
            let stuck: Vec<String> = led
                .iter()
                .filter_map(|p| why_leadership_stuck(scan, p, x))
                .collect();
            if stuck.is_empty() {
                out.actions.push(PromotionAction::MoveLeadership {
                    node_id: x,
                    partitions: led.iter().map(|p| p.id()).collect(),
                    reason: format!("broker {x} leads {}; moving leadership to the preferred leaders before demoting it", list_partitions(led)),
                });
            } else {
                out.reasons.push(HeldBack::new(
                    Concern::Demotion(x),
                    format!(
                        "cannot be demoted, leadership cannot move off it: {}",
                        summarize(&stuck)
                    ),
                ));
            }
            continue;
        }
        recovered.remove(&x);
        next.auto_promotions.retain(|p| p.node_id != x);
        next.last_action.insert(
            x,
            LastAction {
                kind: EngineActionKind::Demote,
                at: scan.now,
            },
        );
        out.actions.push(PromotionAction::Demote {
            node_id: x,
            reason: format!(
                "every partition it hosts has been fully replicated without it since {}",
                Text(since)
            ),
        });
    }
    next.recovered_since = recovered;
}

/// Ok when the broker can go back to being an observer: every watched partition it hosts would
/// be healthy (all primaries in the ISR) and no partition at all would drop under min ISR.
fn recovered_without(scan: &Scan, x: BrokerId) -> Result<(), String> {
    let mut unknown = Vec::new();
    let mut below_min = Vec::new();
    let mut not_recovered = Vec::new();
    for (_, p) in scan.partitions_of(x) {
        match assess(p, scan.snapshot, |b| {
            b == x || scan.observers_now.contains(&b)
        }) {
            Health::Unknown => unknown.push(p),
            Health::Offline | Health::UnderMinIsr => below_min.push(p),
            Health::UnderReplicated if scan.config.topics.watches(&p.topic) => {
                not_recovered.push(p)
            }
            _ => {}
        }
    }
    if !unknown.is_empty() {
        return Err(format!("state unknown for {}", list_partitions(unknown)));
    }
    if !below_min.is_empty() {
        return Err(format!(
            "demoting it would put {} under min ISR",
            list_partitions(below_min)
        ));
    }
    if !not_recovered.is_empty() {
        return Err(format!(
            "{} would be under-replicated without it",
            list_partitions(not_recovered)
        ));
    }
    Ok(())
}

/// Why a preferred leader election would not move leadership of `p` off `x`, if it would not.
fn why_leadership_stuck(scan: &Scan, p: &PartitionState, x: BrokerId) -> Option<String> {
    let name = format!("{}-{}", p.topic, p.partition);
    match p.replicas.first().copied() {
        None => Some(format!("{name} has no replicas")),
        Some(pref) if pref == x => Some(format!(
            "{name}: broker {x} is its preferred leader (reassign the partition or restart the broker)"
        )),
        Some(pref) if scan.observers_now.contains(&pref) => {
            Some(format!("{name}: preferred leader {pref} is an observer"))
        }
        Some(pref) if !p.in_isr(pref) || !scan.snapshot.is_alive(pref) => Some(format!(
            "{name}: preferred leader {pref} is not a live ISR member"
        )),
        Some(_) => None,
    }
}
