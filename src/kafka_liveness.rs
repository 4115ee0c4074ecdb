//! Which Kafka nodes the promotion automation's latest scan saw alive, per ObserverSet: the
//! automation (`crate::automation`) publishes, the reconciler reads it to tell a pod whose
//! agent is silent but whose broker Kafka still lists (wait for it) from one Kafka has dropped
//! (a promotion may go on without it: `crate::rollout::unreachable`).
//!
//! Brokers from the scan's metadata (registered, not fenced); KRaft controllers, which the
//! metadata does not list, from DescribeQuorum after the scan (`crate::kafka::quorum`: the
//! leader, and the voters it heard from within 2 s of the freshest). A controller whose voter
//! is not in the answer, or when DescribeQuorum failed, is unknown. A view older than
//! [`STALE_AFTER_SCANS`] scan intervals, or of a scan that failed, is unknown too: unknown never
//! excuses anyone.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use crate::crd::{NodeId, Role};

/// A view this many scan intervals old is no longer taken as Kafka's word.
pub const STALE_AFTER_SCANS: u32 = 3;

/// `(namespace, name)` of an ObserverSet.
pub type SetKey = (String, String);

/// What one scan saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LivenessView {
    /// When the scan finished.
    pub at: Instant,
    /// The ObserverSet's `scanInterval` at the time.
    pub interval: Duration,
    /// Broker ids the metadata listed (registered, not fenced by the controller).
    pub brokers: BTreeSet<NodeId>,
    /// KRaft voters and whether the quorum hears from them; empty when not known.
    pub voters: BTreeMap<NodeId, bool>,
}

impl LivenessView {
    /// Whether Kafka lists `node_id` of a `role` pod as alive, as of `now` (pure): unknown for
    /// a stale view and for a controller that is not a voter of the last answer.
    pub fn alive(&self, role: Role, node_id: NodeId, now: Instant) -> Option<bool> {
        let age = now.saturating_duration_since(self.at);
        if age > self.interval * STALE_AFTER_SCANS {
            return None;
        }
        match role {
            Role::Broker => Some(self.brokers.contains(&node_id)),
            Role::Controller => self.voters.get(&node_id).copied(),
        }
    }
}

/// The shared registry: cheap to clone, one writer per ObserverSet (its automation task).
#[derive(Clone, Debug, Default)]
pub struct KafkaLiveness {
    views: Arc<RwLock<HashMap<SetKey, LivenessView>>>,
}

impl KafkaLiveness {
    /// Records a healthy scan's view.
    pub fn publish(&self, key: SetKey, view: LivenessView) {
        self.views
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, view);
    }

    /// Adds the quorum's voters to a set's current view (none: nothing to add to).
    pub fn set_voters(&self, key: &SetKey, voters: BTreeMap<NodeId, bool>) {
        if let Some(view) = self
            .views
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(key)
        {
            view.voters = voters;
        }
    }

    /// Forgets a set's view (a failed scan, a stopped automation): its liveness is unknown.
    pub fn forget(&self, key: &SetKey) {
        self.views
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    pub fn view(&self, key: &SetKey) -> Option<LivenessView> {
        self.views
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(at: Instant) -> LivenessView {
        LivenessView {
            at,
            interval: Duration::from_secs(10),
            brokers: BTreeSet::from([1, 2]),
            voters: BTreeMap::new(),
        }
    }

    #[test]
    fn a_fresh_view_says_which_brokers_are_listed() {
        let at = Instant::now();
        let v = view(at);
        assert_eq!(v.alive(Role::Broker, 1, at), Some(true));
        assert_eq!(v.alive(Role::Broker, 3, at), Some(false));
        assert_eq!(
            v.alive(Role::Broker, 3, at + Duration::from_secs(30)),
            Some(false)
        );
    }

    #[test]
    fn stale_views_and_controllers_outside_the_quorum_answer_are_unknown() {
        let at = Instant::now();
        let mut v = view(at);
        assert_eq!(v.alive(Role::Broker, 3, at + Duration::from_secs(31)), None);
        assert_eq!(v.alive(Role::Controller, 101, at), None, "no quorum answer");
        v.voters = BTreeMap::from([(101, true), (102, false)]);
        assert_eq!(v.alive(Role::Controller, 101, at), Some(true));
        assert_eq!(v.alive(Role::Controller, 102, at), Some(false));
        assert_eq!(v.alive(Role::Controller, 103, at), None, "not a voter");
        assert_eq!(
            v.alive(Role::Controller, 102, at + Duration::from_secs(31)),
            None
        );
    }

    #[test]
    fn the_registry_keeps_the_latest_view_until_forgotten() {
        let registry = KafkaLiveness::default();
        let key = ("kafka".to_string(), "kafka".to_string());
        assert_eq!(registry.view(&key), None);
        let at = Instant::now();
        registry.set_voters(&key, BTreeMap::from([(101, true)]));
        assert_eq!(registry.view(&key), None, "no view to add voters to");
        registry.publish(key.clone(), view(at));
        assert_eq!(registry.view(&key), Some(view(at)));
        registry.set_voters(&key, BTreeMap::from([(101, true)]));
        assert!(registry.view(&key).unwrap().voters[&101]);
        registry.forget(&key);
        assert_eq!(registry.view(&key), None);
    }
}
