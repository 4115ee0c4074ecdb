//! When the automation task wakes between two scans. Between scans it glances at the metadata
//! (cheap: no configs, no offsets) so that a partition newly triggering the policy starts the
//! next scan at once instead of up to a scan interval later; only full scans count as
//! confirmations. Kept apart from the task's Kafka and Kubernetes I/O, with the glance passed
//! in, so its timing is tested on tokio's paused clock.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// How often the task glances at the metadata between scans, unless glances take more than a
/// tenth of that (then ten times their cost: glances never take more than a tenth of the time).
pub const GLANCE_PERIOD: Duration = Duration::from_millis(100);

/// How many recent glances [`GlanceCosts`] remembers.
const COSTS_KEPT: usize = 5;

/// The cost of the last glances. The spacing follows the cheapest of them: a metadata answer
/// that is big is slow every time, while one glance slowed by the machine (a CPU-limited pod
/// throttled, a busy node: 30-60 ms glances among 1 ms ones on the bed) says nothing about
/// the cluster, and spacing the next glances by it left the operator blind for up to 0.6 s.
#[derive(Clone, Debug, Default)]
pub struct GlanceCosts {
    recent: std::collections::VecDeque<Duration>,
}

impl GlanceCosts {
    pub fn record(&mut self, cost: Duration) {
        if self.recent.len() == COSTS_KEPT {
            self.recent.pop_front();
        }
        self.recent.push_back(cost);
    }

    /// How long after a glance the next one starts.
    pub fn spacing(&self) -> Duration {
        let cheapest = self.recent.iter().min().copied().unwrap_or_default();
        GLANCE_PERIOD.max(cheapest * 10)
    }
}

/// The wait after a failed step before the next one.
pub const AFTER_ERROR: Duration = Duration::from_secs(5);

/// What one glance found, and what it cost the cluster when the glance knows better than its
/// duration (a wait on a broker that did not answer costs nobody anything: `kafka::glance_route`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Glanced {
    pub new_trigger: bool,
    /// `None`: the glance's duration.
    pub cost: Option<Duration>,
}

impl Glanced {
    /// Nothing new, at the cost of the glance's duration (a failed glance, or none to make).
    pub const NOTHING: Glanced = Glanced {
        new_trigger: false,
        cost: None,
    };
}

/// Sleeps until `scan_at`. While `glancing`, it calls `glance` every [`GlanceCosts::spacing`]
/// on the way (recording each glance's cost in `costs`), and returns early when a glance finds
/// a new trigger. Returns whether it ended early.
pub async fn wait_for_scan<G, F>(
    scan_at: Instant,
    glancing: bool,
    costs: &mut GlanceCosts,
    mut glance: G,
) -> bool
where
    G: FnMut() -> F,
    F: Future<Output = Glanced>,
{
    loop {
        let wake = Instant::now() + costs.spacing();
        if !glancing || wake >= scan_at {
            tokio::time::sleep_until(scan_at).await;
            return false;
        }
        tokio::time::sleep_until(wake).await;
        let started = Instant::now();
        let glanced = glance().await;
        let cost = glanced.cost.unwrap_or_else(|| started.elapsed());
        costs.record(cost);
        if cost > GLANCE_PERIOD / 10 {
            tracing::debug!(
                glance_ms = cost.as_millis() as u64,
                spacing_ms = costs.spacing().as_millis() as u64,
                "a slow glance"
            );
        }
        if glanced.new_trigger {
            return true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    const MS: Duration = Duration::from_millis(1);

    fn found(new_trigger: bool) -> Glanced {
        Glanced {
            new_trigger,
            cost: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn without_glancing_it_sleeps_to_the_scan_and_never_glances() {
        let start = Instant::now();
        let glances = Cell::new(0);
        let mut cost = GlanceCosts::default();
        let early = wait_for_scan(start + 1000 * MS, false, &mut cost, || async {
            glances.set(glances.get() + 1);
            found(true)
        })
        .await;
        assert!(!early);
        assert_eq!(glances.get(), 0);
        assert_eq!(start.elapsed(), 1000 * MS);
    }

    #[tokio::test(start_paused = true)]
    async fn quick_glances_come_every_period_until_the_scan() {
        let start = Instant::now();
        let at = std::cell::RefCell::new(Vec::new());
        let mut cost = GlanceCosts::default();
        let early = wait_for_scan(start + 1000 * MS, true, &mut cost, || {
            at.borrow_mut().push(start.elapsed());
            async { Glanced::NOTHING }
        })
        .await;
        assert!(!early);
        let expected: Vec<Duration> = (1..=9).map(|i| i * 100 * MS).collect();
        assert_eq!(
            *at.borrow(),
            expected,
            "a glance every 100 ms, none at the scan itself"
        );
        assert_eq!(start.elapsed(), 1000 * MS, "the scan is not delayed");
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_trigger_ends_the_wait_at_that_glance() {
        let start = Instant::now();
        let glances = Cell::new(0);
        let mut cost = GlanceCosts::default();
        let early = wait_for_scan(start + 5000 * MS, true, &mut cost, || {
            glances.set(glances.get() + 1);
            let n = glances.get();
            async move { found(n == 3) }
        })
        .await;
        assert!(early);
        assert_eq!(start.elapsed(), 300 * MS);
    }

    #[tokio::test(start_paused = true)]
    async fn slow_glances_are_spaced_to_a_tenth_of_the_time() {
        let start = Instant::now();
        let at = std::cell::RefCell::new(Vec::new());
        let mut cost = GlanceCosts::default();
        wait_for_scan(start + 2000 * MS, true, &mut cost, || {
            at.borrow_mut().push(start.elapsed());
            async {
                tokio::time::sleep(50 * MS).await;
                Glanced::NOTHING
            }
        })
        .await;
        // 100 ms, then each 10 x 50 ms after the previous glance ended: 150 + 500, 700 + 500,
        // 1250 + 500; the next (1800 + 500) would be after the scan.
        assert_eq!(*at.borrow(), vec![100 * MS, 650 * MS, 1200 * MS, 1750 * MS]);
        assert_eq!(cost.spacing(), 500 * MS);
        assert_eq!(start.elapsed(), 2000 * MS);
    }

    #[tokio::test(start_paused = true)]
    async fn a_glance_that_waited_on_a_silent_broker_is_spaced_by_its_cost_not_its_wait() {
        let start = Instant::now();
        let at = std::cell::RefCell::new(Vec::new());
        let mut cost = GlanceCosts::default();
        wait_for_scan(start + 1000 * MS, true, &mut cost, || {
            at.borrow_mut().push(start.elapsed());
            async {
                // 300 ms waiting for the hedge, 5 ms of work.
                tokio::time::sleep(305 * MS).await;
                Glanced {
                    new_trigger: false,
                    cost: Some(5 * MS),
                }
            }
        })
        .await;
        // 100, then 100 ms after each 305 ms glance: 505, 910; the next (1315) is after the scan.
        assert_eq!(*at.borrow(), vec![100 * MS, 505 * MS, 910 * MS]);
        assert_eq!(cost.spacing(), GLANCE_PERIOD);
    }

    #[tokio::test(start_paused = true)]
    async fn one_glance_slowed_by_the_machine_does_not_space_the_next_ones() {
        let start = Instant::now();
        let at = std::cell::RefCell::new(Vec::new());
        let mut cost = GlanceCosts::default();
        wait_for_scan(start + 1000 * MS, true, &mut cost, || {
            at.borrow_mut().push(start.elapsed());
            let slow = at.borrow().len() == 3;
            async move {
                tokio::time::sleep(if slow { 60 * MS } else { MS }).await;
                Glanced::NOTHING
            }
        })
        .await;
        // 100, 201, 302 (60 ms), then 100 ms after each: 462, 563, 664, 765, 866; 967 + 1 would
        // not end before the scan but starts before it.
        assert_eq!(
            *at.borrow(),
            vec![
                100 * MS,
                201 * MS,
                302 * MS,
                462 * MS,
                563 * MS,
                664 * MS,
                765 * MS,
                866 * MS,
                967 * MS
            ]
        );
    }

    #[test]
    fn the_spacing_follows_the_cheapest_of_the_last_five_glances() {
        let mut costs = GlanceCosts::default();
        assert_eq!(costs.spacing(), GLANCE_PERIOD);
        costs.record(50 * MS);
        assert_eq!(costs.spacing(), 500 * MS, "one sample: it is all we know");
        for _ in 0..4 {
            costs.record(80 * MS);
        }
        assert_eq!(costs.spacing(), 500 * MS);
        costs.record(80 * MS);
        assert_eq!(
            costs.spacing(),
            800 * MS,
            "the 50 ms glance is six glances old"
        );
        costs.record(2 * MS);
        assert_eq!(costs.spacing(), GLANCE_PERIOD);
    }
}
