//! The bootstrap names' last good addresses, for a lookup that is slow when it matters.
//!
//! The bootstrap name is the one lookup the operator makes (brokers advertise pod IPs), and a
//! new leader makes it first thing, when the old leader's zone was lost. That zone may hold one
//! of the cluster's CoreDNS replicas, still in its Service until its node is marked NotReady;
//! a lookup kube-proxy sends there waits out the resolver's timeout, once per search domain
//! tried. On the bed the new leader's first scan failed after 5 s that way (D17). So every
//! replica, leader or standby, resolves the ObserverSets' bootstrap names every
//! [`WARM_EVERY`] (`warm`), and [`resolve`] gives a live lookup [`LIVE_FIRST`] before it
//! answers from those addresses instead, leaving the lookup to refresh them. A Service's
//! ClusterIP does not change; a headless name's addresses may, so an entry older than
//! [`MAX_AGE`] is never used.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

/// How long a live lookup has before the cached addresses are used: a healthy cluster DNS
/// answers in milliseconds.
pub const LIVE_FIRST: Duration = Duration::from_millis(200);
/// How often every replica resolves the bootstrap names of the ObserverSets it can see.
pub const WARM_EVERY: Duration = Duration::from_secs(60);
/// Cached addresses older than this are not used.
pub const MAX_AGE: Duration = Duration::from_secs(600);
/// At most this many names are kept (each ObserverSet has a few; a bound against many sets).
const MAX_NAMES: usize = 4096;

static CACHE: LazyLock<Mutex<NameCache>> = LazyLock::new(|| Mutex::new(NameCache::default()));

/// `host:port` -> its addresses and when they were resolved.
#[derive(Default)]
pub struct NameCache {
    entries: HashMap<String, (Vec<SocketAddr>, Instant)>,
}

impl NameCache {
    /// Keeps `addresses` for `name`, resolved at `at`; forgets the oldest entry when full.
    pub fn put(&mut self, name: &str, addresses: Vec<SocketAddr>, at: Instant) {
        if addresses.is_empty() {
            return;
        }
        if !self.entries.contains_key(name) && self.entries.len() >= MAX_NAMES {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, (_, t))| *t)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.entries.remove(&k);
            }
        }
        self.entries.insert(name.to_string(), (addresses, at));
    }

    /// `name`'s addresses if they were resolved less than [`MAX_AGE`] before `now`.
    pub fn get(&self, name: &str, now: Instant) -> Option<Vec<SocketAddr>> {
        self.entries
            .get(name)
            .filter(|(_, at)| now.saturating_duration_since(*at) < MAX_AGE)
            .map(|(a, _)| a.clone())
    }
}

fn cache() -> std::sync::MutexGuard<'static, NameCache> {
    // A panic while holding the lock leaves a plain map behind: still usable.
    CACHE.lock().unwrap_or_else(|e| e.into_inner())
}

async fn lookup(address: String) -> std::io::Result<Vec<SocketAddr>> {
    let found: Vec<SocketAddr> = tokio::net::lookup_host(address.as_str()).await?.collect();
    cache().put(&address, found.clone(), Instant::now());
    Ok(found)
}

/// The addresses of `address` (`host:port`): an IP literal as it is; a name by a live lookup,
/// or by the cached addresses when the lookup has not answered within [`LIVE_FIRST`] (it goes on
/// in the background and refreshes them). Without cached addresses, the lookup's answer.
pub async fn resolve(address: &str) -> std::io::Result<Vec<SocketAddr>> {
    if let Ok(ip) = address.parse::<SocketAddr>() {
        return Ok(vec![ip]);
    }
    let live = tokio::spawn(lookup(address.to_string()));
    let live = async { live.await.unwrap_or_else(|e| Err(std::io::Error::other(e))) };
    live_or_cached(live, || cache().get(address, Instant::now())).await
}

/// `live`'s answer if it comes within [`LIVE_FIRST`], else `cached()` if there is one, else
/// `live`'s answer whenever it comes.
async fn live_or_cached<F>(
    live: F,
    cached: impl FnOnce() -> Option<Vec<SocketAddr>>,
) -> std::io::Result<Vec<SocketAddr>>
where
    F: std::future::Future<Output = std::io::Result<Vec<SocketAddr>>>,
{
    tokio::pin!(live);
    tokio::select! {
        done = &mut live => return done,
        () = tokio::time::sleep(LIVE_FIRST) => {}
    }
    match cached() {
        Some(addresses) => {
            tracing::debug!(
                "a lookup has not answered within {LIVE_FIRST:?}: using the addresses resolved before"
            );
            Ok(addresses)
        }
        None => live.await,
    }
}

/// Resolves each of `addresses` once (refreshing the cache); failures are left for the
/// watcher to report when it connects.
pub async fn warm(addresses: impl IntoIterator<Item = String>) {
    for address in addresses {
        if address.parse::<SocketAddr>().is_err() {
            let _ = lookup(address).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_entry_is_used_until_it_is_too_old() {
        let mut c = NameCache::default();
        let t0 = Instant::now();
        c.put("kafka:9092", vec![addr("10.0.0.1:9092")], t0);
        assert_eq!(
            c.get("kafka:9092", t0 + MAX_AGE - Duration::from_secs(1)),
            Some(vec![addr("10.0.0.1:9092")])
        );
        assert_eq!(c.get("kafka:9092", t0 + MAX_AGE), None);
        assert_eq!(c.get("other:9092", t0), None);
    }

    #[test]
    fn an_empty_answer_never_replaces_good_addresses() {
        let mut c = NameCache::default();
        let t0 = Instant::now();
        c.put("kafka:9092", vec![addr("10.0.0.1:9092")], t0);
        c.put("kafka:9092", vec![], t0 + Duration::from_secs(1));
        assert_eq!(c.get("kafka:9092", t0), Some(vec![addr("10.0.0.1:9092")]));
    }

    #[test]
    fn the_cache_is_bounded_and_forgets_the_oldest() {
        let mut c = NameCache::default();
        let t0 = Instant::now();
        for i in 0..=MAX_NAMES {
            c.put(
                &format!("n{i}:1"),
                vec![addr("10.0.0.1:1")],
                t0 + Duration::from_millis(i as u64),
            );
        }
        assert_eq!(c.entries.len(), MAX_NAMES);
        assert!(c.get("n0:1", t0).is_none(), "the oldest went");
        assert!(c.get(&format!("n{MAX_NAMES}:1"), t0).is_some());
    }

    async fn slow(after: Duration, answer: &str) -> std::io::Result<Vec<SocketAddr>> {
        tokio::time::sleep(after).await;
        Ok(vec![addr(answer)])
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_lookup_gives_way_to_cached_addresses_and_a_quick_one_wins() {
        let t0 = tokio::time::Instant::now();
        let cached = || Some(vec![addr("10.0.0.1:9092")]);
        let got = live_or_cached(slow(Duration::from_secs(5), "10.0.0.2:9092"), cached).await;
        assert_eq!(got.unwrap(), vec![addr("10.0.0.1:9092")]);
        assert_eq!(t0.elapsed(), LIVE_FIRST);

        let t0 = tokio::time::Instant::now();
        let got = live_or_cached(slow(Duration::from_millis(10), "10.0.0.2:9092"), cached).await;
        assert_eq!(got.unwrap(), vec![addr("10.0.0.2:9092")]);
        assert_eq!(t0.elapsed(), Duration::from_millis(10));

        let t0 = tokio::time::Instant::now();
        let got = live_or_cached(slow(Duration::from_secs(5), "10.0.0.2:9092"), || None).await;
        assert_eq!(
            got.unwrap(),
            vec![addr("10.0.0.2:9092")],
            "nothing cached: the lookup's answer"
        );
        assert_eq!(t0.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test]
    async fn ip_literals_and_localhost_resolve() {
        assert_eq!(
            resolve("127.0.0.1:9092").await.unwrap(),
            vec![addr("127.0.0.1:9092")]
        );
        let local = resolve("localhost:9092").await.unwrap();
        assert!(
            local
                .iter()
                .all(|a| a.ip().is_loopback() && a.port() == 9092),
            "{local:?}"
        );
        assert!(
            cache().get("localhost:9092", Instant::now()).is_some(),
            "a live answer is kept"
        );
    }
}
