//! The high watermark an unclean takeover may measure the observer against: one this process read
//! itself from the partition's live leader, and watched since without a gap in which the leader
//! could have acknowledged more.
//!
//! `acks=all` records are acknowledged only by a leader with at least `min.insync.replicas` in the
//! ISR, and only up to its high watermark. So once the operator has read a high watermark, later
//! acknowledged records can only come from a leader that was alive, answering, and not under min
//! ISR. The witness survives the scans that rule that out (no leader; a leader that did not answer
//! us; a partition under min ISR, where writes are refused) and is dropped by any other scan that
//! did not read a new one, and by a scan that failed. A restored or older sample is never a
//! witness (`PolicyHistory::hw_witness` is not saved). What is left: records acknowledged by a
//! leader that stopped answering the operator but still reached its followers, in the time until
//! it was lost too (docs/promotion-policies.md, "Unclean takeover").

use std::collections::{BTreeSet, HashMap};

use super::health::{assess, Health};
use super::snapshot::{BrokerId, ClusterSnapshot, PartitionState, TopicPartition};

/// The witnesses after this (trusted) scan, for the partitions an `interesting` broker hosts.
pub(super) fn witnessed(
    snapshot: &ClusterSnapshot,
    before: &HashMap<TopicPartition, i64>,
    interesting: &BTreeSet<BrokerId>,
    observers_now: &BTreeSet<BrokerId>,
) -> HashMap<TopicPartition, i64> {
    let mut out = HashMap::new();
    for p in snapshot
        .partitions
        .iter()
        .filter(|p| p.replicas.iter().any(|r| interesting.contains(r)))
    {
        let id = p.id();
        match read_from_live_leader(snapshot, p) {
            Some(hw) => {
                out.insert(id, hw);
            }
            None if nothing_acknowledged_unseen(snapshot, p, observers_now) => {
                if let Some(&hw) = before.get(&id) {
                    out.insert(id, hw);
                }
            }
            None => {}
        }
    }
    out
}

/// The high watermark this scan read from the partition's leader, when that leader answered.
fn read_from_live_leader(snapshot: &ClusterSnapshot, p: &PartitionState) -> Option<i64> {
    let leader = p.leader?;
    snapshot
        .is_alive(leader)
        .then_some(p.high_watermark)
        .flatten()
}

/// Whether this scan shows that no record was acknowledged that the operator could not see: no
/// leader, a leader that did not answer (the documented residual), or writes refused.
fn nothing_acknowledged_unseen(
    snapshot: &ClusterSnapshot,
    p: &PartitionState,
    observers_now: &BTreeSet<BrokerId>,
) -> bool {
    match p.leader {
        None => true,
        Some(leader) if !snapshot.is_alive(leader) => true,
        Some(_) => matches!(
            assess(p, snapshot, |b| observers_now.contains(&b)),
            Health::UnderMinIsr | Health::Offline
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::promotion::fixtures::partition;
    use crate::promotion::snapshot::BrokerState;
    use k8s_openapi::jiff::Timestamp;
    use std::collections::BTreeMap;

    fn snapshot(parts: Vec<PartitionState>, dead: &[BrokerId]) -> ClusterSnapshot {
        let brokers: BTreeMap<BrokerId, BrokerState> = [1, 2, 3, 4]
            .into_iter()
            .map(|b| {
                (
                    b,
                    BrokerState {
                        registered: true,
                        reachable: !dead.contains(&b),
                    },
                )
            })
            .collect();
        ClusterSnapshot {
            undescribed_topics: Vec::new(),
            taken_at: Timestamp::UNIX_EPOCH,
            source: crate::promotion::SourceHealth::Healthy,
            brokers,
            partitions: parts,
        }
    }

    fn interesting() -> BTreeSet<BrokerId> {
        BTreeSet::from([4])
    }

    fn led(hw: Option<i64>, isr: &[BrokerId]) -> PartitionState {
        let mut p = partition("t", 0, &[1, 2, 4], isr, Some(1), 100);
        p.high_watermark = hw;
        p
    }

    #[test]
    fn a_live_leader_answer_is_the_witness() {
        let s = snapshot(vec![led(Some(90), &[1, 2])], &[]);
        let w = witnessed(&s, &HashMap::new(), &interesting(), &interesting());
        assert_eq!(w.get(&s.partitions[0].id()), Some(&90));
    }

    #[test]
    fn kept_while_no_leader_or_a_silent_one_could_acknowledge() {
        let before = HashMap::from([(led(None, &[]).id(), 90)]);
        let mut leaderless = led(None, &[1]);
        leaderless.leader = None;
        for s in [
            snapshot(vec![leaderless], &[]),
            // The leader is registered but did not answer us.
            snapshot(vec![led(None, &[1, 2])], &[1]),
            // A leader with only itself in the ISR (min ISR 2): writes are refused.
            snapshot(vec![led(None, &[1])], &[]),
        ] {
            let w = witnessed(&s, &before, &interesting(), &interesting());
            assert_eq!(w.get(&s.partitions[0].id()), Some(&90), "{s:?}");
        }
    }

    #[test]
    fn dropped_when_a_writable_leader_answered_without_one() {
        let before = HashMap::from([(led(None, &[]).id(), 90)]);
        let s = snapshot(vec![led(None, &[1, 2])], &[]);
        let w = witnessed(&s, &before, &interesting(), &interesting());
        assert!(w.is_empty(), "{w:?}");
    }

    #[test]
    fn only_partitions_an_interesting_broker_hosts() {
        let mut p = partition("u", 0, &[1, 2, 3], &[1, 2, 3], Some(1), 100);
        p.high_watermark = Some(5);
        let s = snapshot(vec![p], &[]);
        assert!(witnessed(&s, &HashMap::new(), &interesting(), &interesting()).is_empty());
    }
}
