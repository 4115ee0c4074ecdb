//! Unclean takeover: when every primary replica of a partition is lost, elect the promoted
//! observer by unclean election, only when allowed and only when it holds everything that was
//! acknowledged (its log end offset reaches the high watermark this operator read itself and
//! watched up to the loss, `super::witness`).

use std::collections::BTreeSet;

use super::action::PromotionAction;
use super::held_back::{Concern, HeldBack};
use super::listing::{list_partitions, summarize};
use super::scan::{DecisionDraft, Scan};
use super::snapshot::{BrokerId, PartitionState};

pub(super) fn plan(scan: &Scan, out: &mut DecisionDraft) {
    let config = scan.config;
    let auto = scan.history.auto_promotions.iter().map(|p| p.node_id);
    let promoted: BTreeSet<BrokerId> = config.promoted.iter().copied().chain(auto).collect();
    for x in promoted {
        let orphaned: Vec<&PartitionState> = scan
            .partitions_of(x)
            .map(|(_, p)| p)
            .filter(|p| config.topics.watches(&p.topic) && only_live_replica(scan, p, x))
            .collect();
        if orphaned.is_empty() {
            continue;
        }
        let names = list_partitions(orphaned.iter().copied());
        if !config.unclean_takeover {
            out.reasons.push(HeldBack::new(Concern::Takeover(x), format!("{names} offline with every primary lost; uncleanTakeover is disabled, not electing it")));
            continue;
        }
        if config.acknowledged_observers.contains(&x) {
            out.reasons.push(HeldBack::new(Concern::Takeover(x), format!("{names} offline; waiting until every pod acknowledged its promotion before electing it")));
            continue;
        }
        let mut elect = Vec::new();
        let mut refused = Vec::new();
        for p in orphaned {
            let name = format!("{}-{}", p.topic, p.partition);
            let witness = scan.history.hw_witness.get(&p.id());
            match (p.log_end_offsets.get(&x), witness) {
                (Some(&leo), Some(&hw)) if leo >= hw => elect.push(p),
                (Some(&leo), Some(&hw)) => refused.push(format!(
                    "{name}: log end offset {leo} < last known high watermark {hw}"
                )),
                (None, _) => refused.push(format!("{name}: its log end offset is unknown")),
                (_, None) => {
                    refused.push(unwitnessed(&name, scan.history.last_known_hw.get(&p.id())))
                }
            }
        }
        if !refused.is_empty() {
            out.reasons.push(HeldBack::new(
                Concern::Takeover(x),
                format!(
                    "not electing it by unclean election on {}",
                    summarize(&refused)
                ),
            ));
        }
        if !elect.is_empty() {
            out.actions.push(PromotionAction::UncleanElect {
                node_id: x,
                partitions: elect.iter().map(|p| p.id()).collect(),
                reason: format!(
                    "every primary replica lost; broker {x} holds every acknowledged message of {}",
                    list_partitions(elect.iter().copied())
                ),
            });
        }
    }
}

/// Why there is no bar to measure `x` against: the operator did not itself read the partition's
/// high watermark and keep watching it up to the loss (`super::witness`).
fn unwitnessed(name: &str, older: Option<&i64>) -> String {
    match older {
        Some(hw) => format!(
            "{name}: the last high watermark known ({hw}) was not read by this operator and watched without a gap up to the loss (restored from a predecessor's saved state, or a scan failed since): records acknowledged after it would be lost; elect by hand if you accept that"
        ),
        None => format!("{name}: no high watermark known since the operator started"),
    }
}

/// No leader, `x` alive, and every other replica that is not an observer gone from the cluster.
fn only_live_replica(scan: &Scan, p: &PartitionState, x: BrokerId) -> bool {
    p.leader.is_none()
        && scan.snapshot.is_alive(x)
        && p.replicas
            .iter()
            .filter(|&&r| r != x && !scan.observers_now.contains(&r))
            .all(|r| !scan.snapshot.brokers.get(r).is_some_and(|b| b.registered))
}
