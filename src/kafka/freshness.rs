//! Metadata freshness: a partition whose answer shows a leader epoch older than one this
//! watcher already saw is stale (the broker that answered lags the controller: cut off, or
//! behind on the metadata log), and its state is unknown for that scan, never used.
//!
//! Why a floor and not two brokers compared: the hedge takes the first broker that answers
//! (`hedged_metadata`), because waiting for a second during a zone loss is the wait the hedge
//! removes. A leader epoch only grows (KRaft bumps it on every leader change), so an answer below
//! the highest seen is provably old whatever broker gave it. What it cannot see: a lagging
//! broker whose view is older than every answer seen so far, and ISR changes without a leader
//! change (the Metadata API carries no partition epoch). Both can only show a partition as it
//! was a moment ago; the engine's confirmation scans (two, from whichever broker answers first
//! each time) and the demotion's stabilization window are what cover that.
//!
//! Answers without epochs (librdkafka's, the hedge's backup) are neither checked nor raise the
//! floor. A topic deleted and created again under the same name restarts its epochs: the floor is
//! kept per topic id and dropped when the id changes.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::scan::Metadata;

/// A partition as the floor knows it.
pub(super) type PartitionKey = (Arc<str>, i32);

/// The highest leader epoch seen per partition, with the topic id it was seen under.
#[derive(Debug, Default)]
pub(super) struct EpochFloor {
    seen: HashMap<PartitionKey, (Option<u128>, i32)>,
}

impl EpochFloor {
    /// The partitions of `md` whose leader epoch is below the floor (stale); raises the floor
    /// with the others. Partitions absent from `md` are forgotten (bounded by the cluster).
    pub fn check(&mut self, md: &Metadata) -> HashSet<PartitionKey> {
        let mut stale = HashSet::new();
        let mut next = HashMap::with_capacity(md.partitions.len());
        for p in &md.partitions {
            let key = (p.topic.clone(), p.partition);
            // An answer without the topic's id (librdkafka's) cannot tell a recreated topic.
            let known = self
                .seen
                .get(&key)
                .copied()
                .filter(|(id, _)| id.is_none() || p.topic_id.is_none() || *id == p.topic_id);
            let id = p.topic_id.or(known.and_then(|(id, _)| id));
            let floor = match (known, p.leader_epoch) {
                (Some((_, floor)), Some(epoch)) if epoch < floor => {
                    stale.insert(key.clone());
                    Some(floor)
                }
                (Some((_, floor)), Some(epoch)) => Some(floor.max(epoch)),
                (None, Some(epoch)) => Some(epoch),
                (Some((_, floor)), None) => Some(floor),
                (None, None) => None,
            };
            if let Some(floor) = floor {
                next.insert(key, (id, floor));
            }
        }
        // A stale answer may lack a topic another broker showed: keep what it cannot speak for
        // only while the topic is listed (the map is rebuilt from each answer).
        self.seen = next;
        stale
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::scan::MetaPartition;
    use std::collections::BTreeMap;

    fn md(parts: &[(&str, i32, Option<u128>, Option<i32>)]) -> Metadata {
        Metadata {
            brokers: BTreeMap::new(),
            partitions: parts
                .iter()
                .map(|&(t, p, id, epoch)| MetaPartition {
                    topic: Arc::from(t),
                    partition: p,
                    leader: Some(1),
                    replicas: vec![1, 2, 4],
                    isr: vec![1, 2],
                    topic_id: id,
                    leader_epoch: epoch,
                })
                .collect(),
            undescribed: Vec::new(),
        }
    }

    fn key(t: &str, p: i32) -> PartitionKey {
        (Arc::from(t), p)
    }

    #[test]
    fn an_answer_below_an_epoch_already_seen_is_stale_and_never_lowers_the_floor() {
        let mut floor = EpochFloor::default();
        assert!(floor
            .check(&md(&[
                ("a", 0, Some(7), Some(3)),
                ("a", 1, Some(7), Some(5))
            ]))
            .is_empty());
        // A lagging broker: partition 0 one leader change behind.
        let stale = floor.check(&md(&[
            ("a", 0, Some(7), Some(2)),
            ("a", 1, Some(7), Some(5)),
        ]));
        assert_eq!(stale, HashSet::from([key("a", 0)]));
        // The floor stayed at 3: the same old answer again is still stale, a fresh one is not.
        assert_eq!(
            floor.check(&md(&[("a", 0, Some(7), Some(2))])),
            HashSet::from([key("a", 0)])
        );
        assert!(floor.check(&md(&[("a", 0, Some(7), Some(4))])).is_empty());
        assert_eq!(
            floor.check(&md(&[("a", 0, Some(7), Some(3))])),
            HashSet::from([key("a", 0)])
        );
    }

    #[test]
    fn answers_without_epochs_are_not_judged_and_keep_the_floor() {
        let mut floor = EpochFloor::default();
        floor.check(&md(&[("a", 0, Some(7), Some(3))]));
        // librdkafka's answer: no epoch, nothing to judge.
        assert!(floor.check(&md(&[("a", 0, None, None)])).is_empty());
        // The floor is still 3 for the next answer with epochs.
        assert_eq!(
            floor.check(&md(&[("a", 0, Some(7), Some(1))])),
            HashSet::from([key("a", 0)])
        );
    }

    #[test]
    fn a_topic_created_again_under_its_name_starts_a_new_floor() {
        let mut floor = EpochFloor::default();
        floor.check(&md(&[("a", 0, Some(7), Some(9))]));
        assert!(floor.check(&md(&[("a", 0, Some(8), Some(0))])).is_empty());
        assert_eq!(
            floor.check(&md(&[("a", 0, Some(8), Some(-1).filter(|e| *e >= 0))])),
            HashSet::new()
        );
    }

    #[test]
    fn partitions_gone_from_the_answer_are_forgotten() {
        let mut floor = EpochFloor::default();
        floor.check(&md(&[
            ("a", 0, Some(7), Some(9)),
            ("b", 0, Some(8), Some(4)),
        ]));
        floor.check(&md(&[("b", 0, Some(8), Some(4))]));
        assert_eq!(floor.seen.len(), 1);
    }
}
