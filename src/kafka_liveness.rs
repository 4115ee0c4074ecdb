//! Which Kafka nodes the promotion automation's latest scan saw alive, per ObserverSet: the
//! automation (`crate::automation`) publishes, the reconciler reads it to tell a pod whose
//! agent is silent but whose broker Kafka still lists (wait for it) from one Kafka has dropped
//! (a promotion may go on without it: `crate::rollout::unreachable`).
//!
//! Only brokers: the scan reads the cluster metadata, which lists brokers, not KRaft
//! controllers; a controller's liveness stays unknown (`None`), so a controller is excused
//! only for its node or its deletion. A view older than [`STALE_AFTER_SCANS`] scan intervals,
//! or of a scan that failed, is unknown too: unknown never excuses anyone.

use std::collections::{BTreeSet, HashMap};
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
}

impl LivenessView {
    /// Whether Kafka lists `node_id` of a `role` pod as alive, as of `now` (pure): unknown for
    /// a stale view and for controllers.
    pub fn alive(&self, role: Role, node_id: NodeId, now: Instant) -> Option<bool> {
        let age = now.saturating_duration_since(self.at);
        if role != Role::Broker || age > self.interval * STALE_AFTER_SCANS {
            return None;
        }
        Some(self.brokers.contains(&node_id))
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
    fn stale_views_and_controllers_are_unknown() {
        let at = Instant::now();
        let v = view(at);
        assert_eq!(v.alive(Role::Broker, 3, at + Duration::from_secs(31)), None);
        assert_eq!(v.alive(Role::Controller, 3, at), None);
    }

    #[test]
    fn the_registry_keeps_the_latest_view_until_forgotten() {
        let registry = KafkaLiveness::default();
        let key = ("kafka".to_string(), "kafka".to_string());
        assert_eq!(registry.view(&key), None);
        let at = Instant::now();
        registry.publish(key.clone(), view(at));
        assert_eq!(registry.view(&key), Some(view(at)));
        registry.forget(&key);
        assert_eq!(registry.view(&key), None);
    }
}
