//! Whom a glance between scans asks for the metadata, and what a glance cost. Pure: the
//! watcher keeps one [`GlanceRoute`] and tells it how long each glance took.
//!
//! Glances go to librdkafka first: it keeps its connections, so ten glances a second open
//! none. But when a zone is cut off (not killed: nothing resets its TCP connections),
//! librdkafka may send the request to a broker of that zone and wait for it, and the glance only
//! answers through the hedge [`HEDGE_AFTER`] later. Two things then went wrong on the bed
//! (D15): the next glances waited on the same silent broker, and the wait counted as the
//! glance's cost, which spaces glances to ten times their cost (`automation::schedule`), three
//! seconds and more, so the scan a second later saw the partitions under min ISR instead of a
//! glance. So after a glance that needed the hedge, glances read through the probe first (the
//! scans' route: brokers that answered the last scan, observers last) for
//! [`PROBE_FIRST_FOR`], and the wait on a silent broker is not counted as cost.

use std::time::{Duration, Instant};

use super::hedged_metadata::HEDGE_AFTER;

/// How long glances use the probe first after one needed the hedge: about twice librdkafka's
/// `socket.timeout.ms` (5 s), after which it has given up on the silent broker and sends its
/// requests to another one.
pub const PROBE_FIRST_FOR: Duration = Duration::from_secs(10);

/// Which read a glance starts with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// librdkafka's connections, the probe as the hedge.
    LibrdkafkaFirst,
    /// Fresh probe connections to brokers that answered the last scan, librdkafka as the hedge.
    ProbeFirst,
}

/// The glances' route, as the last glances left it.
#[derive(Clone, Debug, Default)]
pub struct GlanceRoute {
    probe_first_until: Option<Instant>,
}

impl GlanceRoute {
    /// The route of a glance starting `now`.
    pub fn route(&self, now: Instant) -> Route {
        match self.probe_first_until {
            Some(until) if now < until => Route::ProbeFirst,
            _ => Route::LibrdkafkaFirst,
        }
    }

    /// Records a glance that started `at` on `route` and took `took`; returns its cost to the
    /// cluster: the time of the read that answered, without the wait for the hedge.
    pub fn glanced(&mut self, route: Route, at: Instant, took: Duration) -> Duration {
        let hedged = took >= HEDGE_AFTER;
        if hedged && route == Route::LibrdkafkaFirst {
            self.probe_first_until = Some(at + took + PROBE_FIRST_FOR);
        }
        if hedged {
            took - HEDGE_AFTER
        } else {
            took
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn quick_glances_stay_on_librdkafka_and_cost_what_they_took() {
        let start = Instant::now();
        let mut r = GlanceRoute::default();
        assert_eq!(r.route(start), Route::LibrdkafkaFirst);
        assert_eq!(r.glanced(Route::LibrdkafkaFirst, start, 4 * MS), 4 * MS);
        assert_eq!(r.route(start + 100 * MS), Route::LibrdkafkaFirst);
    }

    #[test]
    fn a_hedged_glance_sends_the_next_ones_to_the_probe_for_a_while() {
        let start = Instant::now();
        let mut r = GlanceRoute::default();
        let cost = r.glanced(Route::LibrdkafkaFirst, start, HEDGE_AFTER + 7 * MS);
        assert_eq!(
            cost,
            7 * MS,
            "the wait for the hedge is no cost to the cluster"
        );
        let done = start + HEDGE_AFTER + 7 * MS;
        assert_eq!(r.route(done), Route::ProbeFirst);
        assert_eq!(r.route(done + PROBE_FIRST_FOR - MS), Route::ProbeFirst);
        assert_eq!(
            r.route(done + PROBE_FIRST_FOR),
            Route::LibrdkafkaFirst,
            "librdkafka gets its turn again once it has given up on the silent broker"
        );
    }

    #[test]
    fn probe_glances_neither_extend_nor_end_the_probe_period() {
        let start = Instant::now();
        let mut r = GlanceRoute::default();
        r.glanced(Route::LibrdkafkaFirst, start, HEDGE_AFTER);
        let until = start + HEDGE_AFTER + PROBE_FIRST_FOR;
        let later = start + Duration::from_secs(1);
        assert_eq!(r.glanced(Route::ProbeFirst, later, HEDGE_AFTER + MS), MS);
        assert_eq!(r.glanced(Route::ProbeFirst, later, 3 * MS), 3 * MS);
        assert_eq!(r.route(until - MS), Route::ProbeFirst);
        assert_eq!(r.route(until), Route::LibrdkafkaFirst);
    }
}
