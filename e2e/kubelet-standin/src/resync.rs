//! When each pod is synced next, the way the kubelet's pod workers decide it.
//!
//! After a pod sync finishes, the kubelet re-enqueues the pod after
//! `wait.Jitter(syncFrequency, 0.5)`, i.e. uniformly in `[period, period * 1.5)`
//! (`pkg/kubelet/pod_workers.go`, `workerResyncIntervalJitterFactor`). An update
//! of the pod itself makes it due at once. A ConfigMap change does not: the new
//! content waits for the pod's next sync. A failed sync (e.g. a missing
//! ConfigMap) is retried after `wait.Jitter(10s, 0.5)` (`backOffPeriod`).
//! Pure bookkeeping; the caller owns time.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use rand::Rng;

/// The kubelet's retry delay after a failed pod sync (before jitter).
pub const ERROR_BACKOFF: Duration = Duration::from_secs(10);

/// Per-key due times.
#[derive(Debug)]
pub struct ResyncSchedule<K> {
    period: Duration,
    jitter: f64,
    due: HashMap<K, Instant>,
}

impl<K: Hash + Eq + Clone + Ord> ResyncSchedule<K> {
    /// `jitter` is the maximum extra delay as a fraction of `period` (0.5 = up to 50 %).
    pub fn new(period: Duration, jitter: f64) -> Self {
        assert!(jitter.is_finite() && jitter >= 0.0, "jitter must be >= 0");
        Self {
            period,
            jitter,
            due: HashMap::new(),
        }
    }

    /// One delay drawn from `[period, period * (1 + jitter))`.
    pub fn jittered_delay(&self, rng: &mut impl Rng) -> Duration {
        jittered(self.period, self.jitter, rng)
    }

    /// Records a failed sync of `key`: retried after the error back-off, jittered.
    pub fn failed(&mut self, key: K, now: Instant, rng: &mut impl Rng) {
        let at = now + jittered(ERROR_BACKOFF, self.jitter, rng);
        self.due.insert(key, at);
    }

    /// Records a finished sync of `key` at `now` and schedules the next one.
    pub fn synced(&mut self, key: K, now: Instant, rng: &mut impl Rng) {
        let at = now + self.jittered_delay(rng);
        self.due.insert(key, at);
    }

    /// Makes `key` due immediately (a new pod, or an update of the pod itself).
    pub fn request_now(&mut self, key: K, now: Instant) {
        self.due.insert(key, now);
    }

    /// Stops tracking `key` (the pod is gone).
    pub fn forget(&mut self, key: &K) {
        self.due.remove(key);
    }

    /// Keys due at `now`, in key order. They stay due until [`Self::synced`] is called,
    /// so a failed sync is retried on the next poll.
    pub fn due(&self, now: Instant) -> Vec<K> {
        let mut keys: Vec<K> = self
            .due
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(k, _)| k.clone())
            .collect();
        keys.sort();
        keys
    }

    /// When `key` is due next, if tracked.
    #[cfg(test)]
    pub fn due_at(&self, key: &K) -> Option<Instant> {
        self.due.get(key).copied()
    }
}

fn jittered(base: Duration, jitter: f64, rng: &mut impl Rng) -> Duration {
    if jitter == 0.0 {
        return base;
    }
    base + base.mul_f64(rng.random_range(0.0..jitter))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn delays_stay_within_period_and_period_times_one_and_a_half() {
        let schedule = ResyncSchedule::<u8>::new(MINUTE, 0.5);
        let mut rng = StdRng::seed_from_u64(7);
        let delays: Vec<Duration> = (0..10_000)
            .map(|_| schedule.jittered_delay(&mut rng))
            .collect();
        assert!(delays
            .iter()
            .all(|d| *d >= MINUTE && *d < MINUTE.mul_f64(1.5)));
        // Uniform spread: both ends of the window are reached.
        assert!(delays.iter().any(|d| *d < MINUTE + Duration::from_secs(1)));
        assert!(delays.iter().any(|d| *d > MINUTE + Duration::from_secs(29)));
        let mean = delays.iter().sum::<Duration>() / delays.len() as u32;
        let expected = MINUTE + Duration::from_secs(15);
        assert!(
            mean.abs_diff(expected) < Duration::from_millis(500),
            "mean {mean:?}"
        );
    }

    #[test]
    fn zero_jitter_is_exactly_the_period() {
        let schedule = ResyncSchedule::<u8>::new(MINUTE, 0.0);
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(schedule.jittered_delay(&mut rng), MINUTE);
    }

    #[test]
    fn a_synced_pod_is_not_due_before_the_period_and_is_due_after_the_window() {
        let mut schedule = ResyncSchedule::new(MINUTE, 0.5);
        let mut rng = StdRng::seed_from_u64(3);
        let t0 = Instant::now();
        schedule.synced("a", t0, &mut rng);
        assert!(schedule
            .due(t0 + MINUTE - Duration::from_millis(1))
            .is_empty());
        assert_eq!(schedule.due(t0 + MINUTE.mul_f64(1.5)), vec!["a"]);
    }

    #[test]
    fn request_now_overrides_a_later_due_time_and_due_keys_stay_until_synced() {
        let mut schedule = ResyncSchedule::new(MINUTE, 0.5);
        let mut rng = StdRng::seed_from_u64(4);
        let t0 = Instant::now();
        schedule.synced("a", t0, &mut rng);
        schedule.synced("b", t0, &mut rng);
        let t1 = t0 + Duration::from_secs(5);
        schedule.request_now("b", t1);
        assert_eq!(schedule.due(t1), vec!["b"]);
        // Not marked synced (e.g. the sync failed): still due on the next poll.
        assert_eq!(schedule.due(t1 + Duration::from_millis(500)), vec!["b"]);
        schedule.synced("b", t1, &mut rng);
        assert!(schedule.due(t1 + Duration::from_secs(1)).is_empty());
        assert!(schedule.due_at(&"b").unwrap() >= t1 + MINUTE);
    }

    #[test]
    fn a_failed_sync_is_retried_after_the_error_backoff_not_the_period() {
        let mut schedule = ResyncSchedule::new(MINUTE, 0.5);
        let mut rng = StdRng::seed_from_u64(6);
        let t0 = Instant::now();
        schedule.failed("a", t0, &mut rng);
        let at = schedule.due_at(&"a").unwrap();
        assert!(at >= t0 + ERROR_BACKOFF && at < t0 + ERROR_BACKOFF.mul_f64(1.5));
    }

    #[test]
    fn pods_get_independent_phases() {
        let mut schedule = ResyncSchedule::new(MINUTE, 0.5);
        let mut rng = StdRng::seed_from_u64(5);
        let t0 = Instant::now();
        for key in 0..7u8 {
            schedule.synced(key, t0, &mut rng);
        }
        let distinct: std::collections::BTreeSet<_> =
            (0..7u8).map(|k| schedule.due_at(&k).unwrap()).collect();
        assert_eq!(distinct.len(), 7, "each pod draws its own jitter");
        schedule.forget(&3);
        assert_eq!(schedule.due_at(&3), None);
    }
}
