//! `status.partitions`: what the engine sees of the partitions it acts on (pure), bounded so a
//! cluster of 50,000 partitions cannot blow up the ObserverSet, and written only on a change.
//!
//! In view: watched partitions (the topic filter) hosted by an observer, promoted or not. Listed:
//! those offline, under min ISR, of unknown state or exactly at min ISR, counted in full and the
//! first [`MAX_ENTRIES`] kept, the most severe first. ISR and min ISR as the engine counts them:
//! live primaries in the ISR, observers never included.

use std::collections::BTreeSet;

use k8s_openapi::jiff::SignedDuration;

use crate::crd::{ObserverLag, PartitionCondition, PartitionEntry, PartitionsStatus};
use crate::promotion::{assess, BrokerId, ClusterSnapshot, Health, PartitionState, PolicyConfig};
use crate::time_format::to_micro;

/// Entries listed at most; the rest are counted in `omittedPartitions`.
pub const MAX_ENTRIES: usize = 50;
/// Observers listed per entry at most (replication factors above this are rare).
pub const MAX_OBSERVERS_PER_ENTRY: usize = 8;
/// A view that differs only in observer lags is written at most this often.
pub const LAG_REFRESH: SignedDuration = SignedDuration::from_secs(30);

/// The view of one scan. `auto_promoted`: the automation's promotions in force;
/// `reference_hw` what the engine measures a replica's lag against (`PolicyHistory::lag_reference`).
pub fn view(
    snapshot: &ClusterSnapshot,
    config: &PolicyConfig,
    auto_promoted: &BTreeSet<BrokerId>,
    reference_hw: impl Fn(&PartitionState) -> Option<i64>,
) -> PartitionsStatus {
    let observers_now: BTreeSet<BrokerId> = config
        .observers
        .iter()
        .copied()
        .filter(|id| !config.promoted.contains(id) && !auto_promoted.contains(id))
        .collect();
    let interesting: BTreeSet<BrokerId> = config
        .observers
        .iter()
        .chain(&config.promoted)
        .chain(auto_promoted)
        .copied()
        .collect();
    let mut out = PartitionsStatus {
        at: Some(to_micro(snapshot.taken_at)),
        ..PartitionsStatus::default()
    };
    let mut listed: Vec<(PartitionCondition, usize, u32)> = Vec::new();
    for (i, p) in snapshot.partitions.iter().enumerate() {
        if !config.topics.watches(&p.topic) || !p.replicas.iter().any(|r| interesting.contains(r)) {
            continue;
        }
        let live_isr = p
            .isr
            .iter()
            .filter(|&&r| !observers_now.contains(&r) && snapshot.is_alive(r))
            .count() as u32;
        let condition = match assess(p, snapshot, |b| observers_now.contains(&b)) {
            Health::Offline => PartitionCondition::Offline,
            Health::UnderMinIsr => PartitionCondition::UnderMinIsr,
            Health::Unknown => PartitionCondition::Unknown,
            Health::UnderReplicated | Health::Healthy if p.min_isr == Some(live_isr) => {
                PartitionCondition::AtMinIsr
            }
            Health::UnderReplicated | Health::Healthy => continue,
        };
        let count = match condition {
            PartitionCondition::Offline => &mut out.offline,
            PartitionCondition::UnderMinIsr => &mut out.under_min_isr,
            PartitionCondition::Unknown => &mut out.unknown,
            PartitionCondition::AtMinIsr => &mut out.at_min_isr,
        };
        *count += 1;
        listed.push((condition, i, live_isr));
    }
    let order = |a: &(PartitionCondition, usize, u32), b: &(PartitionCondition, usize, u32)| {
        let (pa, pb) = (&snapshot.partitions[a.1], &snapshot.partitions[b.1]);
        a.0.cmp(&b.0)
            .then_with(|| pa.topic.cmp(&pb.topic))
            .then(pa.partition.cmp(&pb.partition))
    };
    let total = listed.len();
    if total > MAX_ENTRIES {
        // Only the first MAX_ENTRIES need sorting: partial selection keeps 50,000 cheap.
        listed.select_nth_unstable_by(MAX_ENTRIES, order);
        listed.truncate(MAX_ENTRIES);
    }
    listed.sort_by(order);
    out.omitted_partitions = (total - listed.len()) as u32;
    out.entries = listed
        .into_iter()
        .map(|(state, i, isr)| {
            let p = &snapshot.partitions[i];
            let hw = reference_hw(p);
            PartitionEntry {
                topic: p.topic.clone(),
                partition: p.partition,
                state,
                isr,
                min_isr: p.min_isr,
                observers: p
                    .replicas
                    .iter()
                    .filter(|r| observers_now.contains(r))
                    .take(MAX_OBSERVERS_PER_ENTRY)
                    .map(|&r| ObserverLag {
                        node_id: r,
                        lag: p.lag_against(r, hw),
                    })
                    .collect(),
            }
        })
        .collect();
    out
}

/// The view without what changes on every scan under load: its time and the lags.
fn shape(v: &PartitionsStatus) -> PartitionsStatus {
    PartitionsStatus {
        at: None,
        entries: v
            .entries
            .iter()
            .map(|e| PartitionEntry {
                observers: e
                    .observers
                    .iter()
                    .map(|o| ObserverLag {
                        node_id: o.node_id,
                        lag: None,
                    })
                    .collect(),
                ..e.clone()
            })
            .collect(),
        ..v.clone()
    }
}

/// Whether `next` is worth a write over `current` (what the status holds): at once when
/// partitions change state, count or ISR; when only lags moved, at most every [`LAG_REFRESH`].
pub fn write_due(current: Option<&PartitionsStatus>, next: &PartitionsStatus) -> bool {
    let Some(current) = current else {
        return true;
    };
    if shape(current) != shape(next) {
        return true;
    }
    if current.entries == next.entries {
        return false;
    }
    match (&current.at, &next.at) {
        (Some(a), Some(b)) => b.0.duration_since(a.0) >= LAG_REFRESH,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::promotion::fixtures::{at, config, partition, snapshot};
    use crate::promotion::{BrokerState, PromotionPolicy};

    fn cfg() -> PolicyConfig {
        config(PromotionPolicy::UnderMinIsr)
    }

    /// Broker 2 lost; min ISR 2 everywhere (the fixture); observer 4 at 90 of 100 on b-0.
    fn lost_2() -> ClusterSnapshot {
        let mut parts = vec![
            partition("b", 0, &[1, 2, 4], &[1], Some(1), 100),
            partition("a", 0, &[1, 3, 4], &[1, 3], Some(1), 100),
            partition("a", 1, &[1, 3, 2], &[1, 3], Some(1), 100),
            partition("c", 0, &[1, 3, 2, 4], &[1, 3], Some(1), 100),
        ];
        parts[0].log_end_offsets.insert(4, 90);
        snapshot(at(0), &[2], parts)
    }

    #[test]
    fn lists_the_partitions_an_observer_hosts_most_severe_first() {
        let v = view(&lost_2(), &cfg(), &BTreeSet::new(), |p| p.high_watermark);
        assert_eq!(
            (v.offline, v.under_min_isr, v.at_min_isr, v.unknown),
            (0, 1, 2, 0)
        );
        let got: Vec<(&str, i32, PartitionCondition, u32)> = v
            .entries
            .iter()
            .map(|e| (e.topic.as_str(), e.partition, e.state, e.isr))
            .collect();
        assert_eq!(
            got,
            vec![
                ("b", 0, PartitionCondition::UnderMinIsr, 1),
                ("a", 0, PartitionCondition::AtMinIsr, 2),
                ("c", 0, PartitionCondition::AtMinIsr, 2),
            ],
            "a-1 is not hosted by an observer"
        );
        assert_eq!(
            v.entries[0].observers,
            vec![ObserverLag {
                node_id: 4,
                lag: Some(10)
            }]
        );
        assert_eq!(v.omitted_partitions, 0);
        // Promoted, 4 counts toward the ISR it is not in, and is no longer listed as observer.
        let v = view(&lost_2(), &cfg(), &BTreeSet::from([4]), |p| {
            p.high_watermark
        });
        assert_eq!(v.entries[0].observers, vec![]);
    }

    #[test]
    fn fifty_thousand_partitions_stay_small() {
        // Every partition under min ISR, topic names of Kafka's maximum length (249), nine
        // observers per partition.
        let topic = "t".repeat(249);
        let replicas: Vec<BrokerId> = (1..=11).collect();
        let parts: Vec<PartitionState> = (0..50_000)
            .map(|i| partition(&topic, i, &replicas, &[1], Some(1), i64::MAX))
            .collect();
        let mut s = snapshot(at(0), &[], parts);
        s.brokers = (1..=11)
            .map(|id| {
                let state = BrokerState {
                    registered: true,
                    reachable: true,
                };
                (id, state)
            })
            .collect();
        let mut c = cfg();
        c.observers = (3..=11).collect();
        let started = std::time::Instant::now();
        let v = view(&s, &c, &BTreeSet::new(), |p| p.high_watermark);
        let took = started.elapsed();
        let bytes = serde_json::to_vec(&v).unwrap().len();
        assert_eq!(v.under_min_isr, 50_000);
        assert_eq!(v.entries.len(), MAX_ENTRIES);
        assert_eq!(v.omitted_partitions, 50_000 - MAX_ENTRIES as u32);
        assert_eq!(v.entries[0].observers.len(), MAX_OBSERVERS_PER_ENTRY);
        assert_eq!(v.entries[0].partition, 0);
        assert_eq!(v.entries[49].partition, 49);
        // 50 entries of a 249-character topic and 8 observer lags each.
        assert!(bytes < 32 * 1024, "{bytes} bytes");
        println!("status.partitions of 50,000 partitions: {bytes} bytes in {took:?}");
    }

    #[test]
    fn written_on_a_change_lags_rate_limited() {
        let mut s = lost_2();
        let first = view(&s, &cfg(), &BTreeSet::new(), |p| p.high_watermark);
        assert!(write_due(None, &first));
        assert!(!write_due(Some(&first), &first));
        // The lag moves 5 s later: not yet; LAG_REFRESH later: yes.
        s.partitions[0].log_end_offsets.insert(4, 95);
        s.taken_at = at(5);
        let lagging = view(&s, &cfg(), &BTreeSet::new(), |p| p.high_watermark);
        assert!(!write_due(Some(&first), &lagging));
        s.taken_at = at(0) + LAG_REFRESH;
        let later = view(&s, &cfg(), &BTreeSet::new(), |p| p.high_watermark);
        assert!(write_due(Some(&first), &later));
        // Broker 2 is back: at once.
        let healed: Vec<PartitionState> = s
            .partitions
            .iter()
            .map(|p| {
                let mut p = p.clone();
                p.isr = p.replicas.iter().copied().filter(|&r| r != 4).collect();
                p
            })
            .collect();
        let healthy = view(
            &snapshot(at(1), &[], healed),
            &cfg(),
            &BTreeSet::new(),
            |p| p.high_watermark,
        );
        assert_eq!((healthy.under_min_isr, healthy.at_min_isr), (0, 2));
        assert!(write_due(Some(&first), &healthy));
        assert_eq!(first.at.as_ref().map(|t| t.0), Some(at(0)));
    }
}
