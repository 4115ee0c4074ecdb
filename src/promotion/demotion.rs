//! Undoing automatic promotions: only once every watched partition the broker hosts is fully
//! replicated without it for the stabilization window, never below min ISR anywhere, and only
//! after its leaderships have moved elsewhere: by a preferred election, preceded by a
//! reorder-only reassignment where the broker is itself the preferred leader.

use std::collections::BTreeMap;

use k8s_openapi::jiff::SignedDuration;

use super::action::{PromotionAction, ReplicaOrder};
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
            let mut stuck = Vec::new();
            let mut orders = Vec::new();
            for p in &led {
                match leadership_move(scan, p, x) {
                    LeadershipMove::Elect => {}
                    LeadershipMove::ReorderThenElect(order) => orders.push(order),
                    LeadershipMove::Stuck(why) => stuck.push(why),
                }
            }
            if !stuck.is_empty() {
                out.reasons.push(HeldBack::new(
                    Concern::Demotion(x),
                    format!(
                        "cannot be demoted, leadership cannot move off it: {}",
                        summarize(&stuck)
                    ),
                ));
                continue;
            }
            if !orders.is_empty() {
                let reordered = orders
                    .iter()
                    .map(|o| format!("{} to {}", o.partition, join_ids(&o.replicas)))
                    .collect::<Vec<_>>();
                out.actions.push(PromotionAction::ReorderReplicas {
                    node_id: x,
                    reason: format!(
                        "broker {x} is the preferred leader of what it leads; reordering the replicas (same brokers, no data moved): {}",
                        summarize(&reordered)
                    ),
                    orders,
                });
            }
            out.actions.push(PromotionAction::MoveLeadership {
                node_id: x,
                partitions: led.iter().map(|p| p.id()).collect(),
                reason: format!("broker {x} leads {}; moving leadership to the preferred leaders before demoting it", list_partitions(led)),
            });
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
    // A topic the metadata could not describe may have partitions on `x` that the checks below
    // would never see.
    let undescribed = &scan.snapshot.undescribed_topics;
    if !undescribed.is_empty() {
        let shown: Vec<&str> = undescribed.iter().take(5).map(String::as_str).collect();
        return Err(format!(
            "the metadata could not describe {} topic(s) ({}{}), whose partitions may be on it",
            undescribed.len(),
            shown.join(", "),
            if undescribed.len() > shown.len() {
                ", ..."
            } else {
                ""
            }
        ));
    }
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

/// How leadership of a partition `x` leads can move off it.
enum LeadershipMove {
    /// A preferred election moves it: the preferred leader is a live primary in the ISR.
    Elect,
    /// `x` is the preferred leader: reorder the replicas first, then elect.
    ReorderThenElect(ReplicaOrder),
    /// Neither can: why.
    Stuck(String),
}

fn leadership_move(scan: &Scan, p: &PartitionState, x: BrokerId) -> LeadershipMove {
    let name = format!("{}-{}", p.topic, p.partition);
    let eligible = |b: BrokerId| {
        b != x && !scan.observers_now.contains(&b) && p.in_isr(b) && scan.snapshot.is_alive(b)
    };
    match p.replicas.first().copied() {
        None => LeadershipMove::Stuck(format!("{name} has no replicas")),
        Some(pref) if pref == x => match reordered(&p.replicas, x, eligible) {
            Some(replicas) => LeadershipMove::ReorderThenElect(ReplicaOrder {
                partition: p.id(),
                replicas,
            }),
            None => LeadershipMove::Stuck(format!(
                "{name}: broker {x} is its preferred leader and no other replica is a live primary in the ISR"
            )),
        },
        Some(pref) if scan.observers_now.contains(&pref) => {
            LeadershipMove::Stuck(format!("{name}: preferred leader {pref} is an observer"))
        }
        Some(pref) if !eligible(pref) => LeadershipMove::Stuck(format!(
            "{name}: preferred leader {pref} is not a live ISR member"
        )),
        Some(_) => LeadershipMove::Elect,
    }
}

/// The same replicas with the first `eligible` one first and `x` last, the others in their
/// order; `None` when no replica is eligible.
pub(super) fn reordered(
    replicas: &[BrokerId],
    x: BrokerId,
    eligible: impl Fn(BrokerId) -> bool,
) -> Option<Vec<BrokerId>> {
    let first = replicas.iter().copied().find(|&b| eligible(b))?;
    let mut order = vec![first];
    order.extend(replicas.iter().copied().filter(|&b| b != first && b != x));
    order.push(x);
    Some(order)
}

fn join_ids(ids: &[BrokerId]) -> String {
    ids.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(":")
}
