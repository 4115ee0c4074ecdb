//! When the automation task wakes between two scans. Between scans it glances at the metadata
//! (cheap: no configs, no offsets) so that a partition newly triggering the policy starts the
//! next scan at once instead of up to a scan interval later; only full scans count as
//! confirmations. Kept apart from the task's Kafka and Kubernetes I/O, with the glance passed
//! in, so its timing is tested on tokio's paused clock.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// How often the task glances at the metadata between scans, unless a glance takes more than a
/// tenth of that (then ten times its duration: glances never take more than a tenth of the time).
pub const GLANCE_PERIOD: Duration = Duration::from_millis(100);

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

/// Sleeps until `scan_at`. While `glancing`, it calls `glance` every [`GLANCE_PERIOD`] (or ten
/// times the last glance's cost, kept in `glance_cost`) on the way, and returns early when a
/// glance finds a new trigger. Returns whether it ended early.
pub async fn wait_for_scan<G, F>(
    scan_at: Instant,
    glancing: bool,
    glance_cost: &mut Duration,
    mut glance: G,
) -> bool
where
    G: FnMut() -> F,
    F: Future<Output = Glanced>,
{
    loop {
        let wake = Instant::now() + GLANCE_PERIOD.max(*glance_cost * 10);
        if !glancing || wake >= scan_at {
            tokio::time::sleep_until(scan_at).await;
            return false;
        }
        tokio::time::sleep_until(wake).await;
        let started = Instant::now();
        let glanced = glance().await;
        *glance_cost = glanced.cost.unwrap_or_else(|| started.elapsed());
        if *glance_cost > GLANCE_PERIOD / 10 {
            tracing::debug!(
                glance_ms = glance_cost.as_millis() as u64,
                "a slow glance spaces the next ones"
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
        let mut cost = Duration::ZERO;
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
        let mut cost = Duration::ZERO;
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
        let mut cost = Duration::ZERO;
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
        let mut cost = Duration::ZERO;
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
        assert_eq!(cost, 50 * MS);
        assert_eq!(start.elapsed(), 2000 * MS);
    }

    #[tokio::test(start_paused = true)]
    async fn a_glance_that_waited_on_a_silent_broker_is_spaced_by_its_cost_not_its_wait() {
        let start = Instant::now();
        let at = std::cell::RefCell::new(Vec::new());
        let mut cost = Duration::ZERO;
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
        assert_eq!(cost, 5 * MS);
    }
}
