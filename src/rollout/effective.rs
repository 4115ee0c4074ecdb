//! The effective observer set: the ids written to the observer.ids files.
//!
//! `effective = observers − promotion.promoted − status.autoPromotions[*].nodeId` (docs/api.md).
//! Promotion removes an id from the set (the replica becomes electable and may join the ISR);
//! demotion puts it back.

use std::collections::BTreeSet;

use crate::crd::{NodeId, RolloutKind};

/// The set every pod should read now.
pub fn effective_set(
    observers: &BTreeSet<NodeId>,
    promoted: &BTreeSet<NodeId>,
    auto_promoted: impl IntoIterator<Item = NodeId>,
) -> BTreeSet<NodeId> {
    let auto: BTreeSet<NodeId> = auto_promoted.into_iter().collect();
    observers
        .iter()
        .copied()
        .filter(|id| !promoted.contains(id) && !auto.contains(id))
        .collect()
}

/// How a change from `from` to `to` is classified: losing ids promotes them, gaining ids demotes.
/// A rewrite of the same set (a role added, a superseded rollout that came back) counts as Mixed.
pub fn rollout_kind(from: &BTreeSet<NodeId>, to: &BTreeSet<NodeId>) -> RolloutKind {
    let gains = to.difference(from).next().is_some();
    let losses = from.difference(to).next().is_some();
    match (gains, losses) {
        (false, true) => RolloutKind::Promotion,
        (true, false) => RolloutKind::Demotion,
        _ => RolloutKind::Mixed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn set(ids: &[NodeId]) -> BTreeSet<NodeId> {
        ids.iter().copied().collect()
    }

    #[test]
    fn manual_and_automatic_promotions_leave_the_set() {
        assert_eq!(effective_set(&set(&[3, 4, 5]), &set(&[4]), [5]), set(&[3]));
        assert_eq!(effective_set(&set(&[3, 4]), &set(&[]), []), set(&[3, 4]));
        // Everything promoted: the deliberate empty set.
        assert_eq!(effective_set(&set(&[4]), &set(&[4]), [4]), set(&[]));
        // An automatic promotion of an id that is no longer declared changes nothing.
        assert_eq!(effective_set(&set(&[3]), &set(&[]), [9]), set(&[3]));
    }

    #[test]
    fn kinds() {
        assert_eq!(rollout_kind(&set(&[4]), &set(&[])), RolloutKind::Promotion);
        assert_eq!(rollout_kind(&set(&[]), &set(&[4])), RolloutKind::Demotion);
        assert_eq!(rollout_kind(&set(&[3]), &set(&[4])), RolloutKind::Mixed);
        assert_eq!(rollout_kind(&set(&[3]), &set(&[3])), RolloutKind::Mixed);
    }

    proptest! {
        #[test]
        fn effective_is_observers_minus_promotions(
            observers in proptest::collection::btree_set(0..20i32, 0..10),
            promoted in proptest::collection::btree_set(0..20i32, 0..10),
            auto in proptest::collection::vec(0..20i32, 0..5),
        ) {
            let got = effective_set(&observers, &promoted, auto.iter().copied());
            prop_assert!(got.is_subset(&observers));
            for id in &observers {
                let expect = !promoted.contains(id) && !auto.contains(id);
                prop_assert_eq!(got.contains(id), expect);
            }
        }
    }
}
