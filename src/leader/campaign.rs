//! The campaign's shell: reads and writes the Lease as `super::lease` decides, and publishes
//! whether this replica acts.
//!
//! Every write is a JSON merge patch carrying the `resourceVersion` it was decided on (the
//! apiserver refuses it with 409 Conflict when anyone wrote since), or a create (refused when
//! the Lease exists). The campaign client's `Witness` layer (`crate::k8s::client`) turns each
//! answer naming us into a fenced term: this module never extends the fence itself.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::watch;

use super::lease::{self, Seen, Step, Watching};
use super::quorum::{self, Holding, Minority};
use super::standing::LeaseSight;
use super::{decide, Event, LeaderAction, LeaderRole, LeaseTiming};
use crate::metrics::Metrics;
use crate::shutdown::Shutdown;

/// The Lease this replica campaigns for.
pub struct LeaseTarget {
    /// The member cluster the Lease is in (empty in a single-cluster install), for the logs.
    pub member: String,
    pub api: Api<Lease>,
    pub name: String,
    pub identity: String,
    pub timing: LeaseTiming,
}

/// What one write did.
enum Written {
    /// The answer names us: this replica holds the Lease at `Seen::version`.
    Held(Seen),
    /// Someone wrote first (409) or created it first: read again.
    Raced,
}

impl LeaseTarget {
    pub async fn read(&self) -> Result<Option<Seen>, kube::Error> {
        Ok(self.api.get_opt(&self.name).await?.map(|l| seen(&l)))
    }

    async fn create(&self) -> Result<Written, kube::Error> {
        let now = MicroTime(Timestamp::now());
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(k8s_openapi::api::coordination::v1::LeaseSpec {
                holder_identity: Some(self.identity.clone()),
                lease_duration_seconds: Some(self.duration_secs()),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..Default::default()
            }),
        };
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(created) => Ok(Written::Held(seen(&created))),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(Written::Raced),
            Err(error) => Err(error),
        }
    }

    /// Renews (`taken: None`) or takes (`Some(transitions)` as read) the Lease at `version`.
    async fn write(&self, version: &str, taken: Option<i32>) -> Result<Written, kube::Error> {
        let now = serde_json::to_value(MicroTime(Timestamp::now())).unwrap_or_default();
        let mut spec = json!({
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.duration_secs(),
            "renewTime": now,
        });
        if let Some(transitions) = taken {
            spec["acquireTime"] = now;
            spec["leaseTransitions"] = json!(transitions.saturating_add(1));
        }
        let patch = json!({"metadata": {"resourceVersion": version}, "spec": spec});
        self.patch(&patch).await
    }

    /// Gives the Lease up at `version`, so a standby takes it at once instead of a duration on.
    async fn release(&self, version: &str) -> Result<(), kube::Error> {
        let patch = json!({
            "metadata": {"resourceVersion": version},
            "spec": {"holderIdentity": null, "leaseDurationSeconds": 1},
        });
        self.patch(&patch).await.map(|_| ())
    }

    async fn patch(&self, patch: &serde_json::Value) -> Result<Written, kube::Error> {
        let params = PatchParams::default();
        match self
            .api
            .patch(&self.name, &params, &Patch::Merge(patch))
            .await
        {
            Ok(lease) => {
                let now = seen(&lease);
                Ok(
                    match now.holder.as_deref() == Some(self.identity.as_str()) {
                        true => Written::Held(now),
                        false => Written::Raced,
                    },
                )
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(Written::Raced),
            Err(error) => Err(error),
        }
    }

    fn duration_secs(&self) -> i32 {
        i32::try_from(self.timing.duration_secs).unwrap_or(i32::MAX)
    }
}

fn seen(lease: &Lease) -> Seen {
    let spec = lease.spec.as_ref();
    Seen {
        holder: spec
            .and_then(|s| s.holder_identity.clone())
            .filter(|h| !h.is_empty()),
        version: lease.metadata.resource_version.clone().unwrap_or_default(),
        transitions: spec.and_then(|s| s.lease_transitions).unwrap_or(0),
    }
}

/// After a write lost a race: read again soon, not in a tight loop.
const RACED_RETRY: Duration = Duration::from_millis(100);

/// One Lease of the campaign and what this replica knows of it.
struct Member {
    target: LeaseTarget,
    watching: Option<Watching>,
    /// The Lease as our last write left it: the holder renews on that version without a read.
    held: Option<Seen>,
    holding: Holding,
    /// Who holds it with a running term as the last turn found (`super::standing`).
    holder: Option<String>,
    /// The last answered holding and when it came (`quorum::as_known`).
    answered: (Holding, Instant),
    next_at: Instant,
}

impl Member {
    /// One turn on this Lease, and when the next is due: a renewal `renew_every` after this
    /// one was sent (timed from the turn's start, however long the answer took), a read one
    /// poll on, or sooner when the other holder's Lease expires first.
    async fn take_turn(&mut self, may_take: bool) {
        let started = Instant::now();
        let timing = self.target.timing;
        let done = turn(&self.target, &mut self.watching, &mut self.held, may_take).await;
        let (holding, wait, holder) = match done {
            Ok(Turn::Holding) => (
                Holding::Held,
                timing.renew_every(),
                Some(self.target.identity.clone()),
            ),
            Ok(Turn::Raced) => (Holding::Other, RACED_RETRY, None),
            Ok(Turn::Waiting(expires_in, holder)) => {
                (Holding::Other, expires_in.min(timing.poll()), holder)
            }
            Err(error) => {
                tracing::warn!(%error, lease = %self.target.name, member = %self.target.member, "leader Lease call failed");
                self.held = None;
                // The last answered holder stays what this replica knows (`sight`).
                (Holding::Unreachable, timing.poll(), self.holder.take())
            }
        };
        self.holding = holding;
        self.holder = holder;
        if holding != Holding::Unreachable {
            self.answered = (holding, Instant::now());
        }
        self.next_at = started + wait;
    }

    async fn release(&mut self) {
        if let Some(lease) = self.held.take() {
            if let Err(error) = self.target.release(&lease.version).await {
                tracing::warn!(%error, lease = %self.target.name, member = %self.target.member, "could not release the leader Lease; it expires by itself");
            }
        }
        self.holding = Holding::Other;
        self.holder = None;
    }

    /// What this replica knows of the Lease at `now`: as `quorum::as_known` reads it, one that
    /// stopped answering less than a lease duration ago is still reached, with its last answered
    /// holder (a slow answer of a live apiserver on a loaded machine is not a lost member, and
    /// must not rewrite `status.localView` every second); never ourselves once our own renewal
    /// failed.
    fn sight(&self, now: Instant) -> LeaseSight {
        let duration = self.target.timing.duration();
        let unanswered = self.holding == Holding::Unreachable;
        let reached = !unanswered || now.saturating_duration_since(self.answered.1) < duration;
        let ours = self.holder.as_deref() == Some(self.target.identity.as_str());
        LeaseSight {
            member: self.target.member.clone(),
            reached,
            holder: self
                .holder
                .clone()
                .filter(|_| reached && !(unanswered && ours)),
        }
    }
}

/// Up to one lease duration, drawn afresh for each minority (std's randomly keyed hasher: no
/// random-number crate for one draw now and then).
fn jitter(duration: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let draw = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    duration.mul_f64((draw % 1000) as f64 / 1000.0)
}

/// Campaigns for every Lease of `targets` (one per member cluster; one in a single cluster)
/// until `shutdown`, leading while a majority is held; then stops acting and releases what it
/// holds. After each round, what it saw of each Lease goes to `sights` (on a change).
pub async fn run(
    targets: Vec<LeaseTarget>,
    sender: watch::Sender<bool>,
    sights: watch::Sender<Vec<LeaseSight>>,
    metrics: Metrics,
    shutdown: Shutdown,
) {
    let Some(duration) = targets.first().map(|t| t.timing.duration()) else {
        return;
    };
    let mut role = LeaderRole::Candidate;
    let publish = |role: LeaderRole| {
        let leading = role == LeaderRole::Leader;
        sender.send_replace(leading);
        metrics.set_leader(leading);
    };
    let start = Instant::now();
    let mut members: Vec<Member> = targets
        .into_iter()
        .map(|target| Member {
            target,
            watching: None,
            held: None,
            holding: Holding::Other,
            holder: None,
            // As if the last answer were a duration old: a Lease silent from the start does
            // not hold up the ones after it.
            answered: (Holding::Other, start.checked_sub(duration).unwrap_or(start)),
            next_at: start,
        })
        .collect();
    let mut minority = Minority::None;
    let mut patience = jitter(duration);
    let mut aside_until = start;
    while !shutdown.is_triggered() {
        let now = Instant::now();
        let before: Vec<Holding> = members.iter().map(|m| m.holding).collect();
        let known: Vec<Holding> = members
            .iter()
            .map(|m| quorum::as_known(m.holding, m.answered, duration, now))
            .collect();
        let aside = now < aside_until;
        let may_take = quorum::may_take(&known)
            .into_iter()
            .map(|open| open && !aside);
        futures::future::join_all(
            members
                .iter_mut()
                .zip(may_take)
                .filter(|(m, _)| m.next_at <= now)
                .map(|(m, may)| m.take_turn(may)),
        )
        .await;
        // A Lease just won opens the ones after it (`quorum::may_take`): their turn is now.
        if let Some(won) = (0..members.len())
            .find(|&i| before[i] != Holding::Held && members[i].holding == Holding::Held)
        {
            let now = Instant::now();
            for member in members.iter_mut().skip(won + 1) {
                if member.holding != Holding::Held {
                    member.next_at = now;
                }
            }
        }
        let holdings: Vec<Holding> = members.iter().map(|m| m.holding).collect();
        let event = if quorum::leads(&holdings) {
            Event::Acquired
        } else if holdings.contains(&Holding::Unreachable) {
            Event::Failed
        } else {
            Event::Lost
        };
        let (next, action) = decide(role, event);
        role = next;
        match action {
            LeaderAction::StartActing => {
                tracing::info!(
                    leases = members.len(),
                    "acquired the leader Lease (a majority)"
                )
            }
            LeaderAction::StopActing => tracing::warn!(?event, ?holdings, "stepping down"),
            LeaderAction::Nothing => {}
        }
        publish(role);
        let now = Instant::now();
        let looked: Vec<LeaseSight> = members.iter().map(|m| m.sight(now)).collect();
        sights.send_if_modified(|last| {
            let changed = *last != looked;
            *last = looked;
            changed
        });
        minority = quorum::minority(minority, &holdings, Instant::now());
        if quorum::release_due(minority, duration, patience, Instant::now()) {
            tracing::warn!(?holdings, "a minority of the leader Leases for too long: releasing it so another replica can gather a majority");
            for member in members.iter_mut() {
                member.release().await;
            }
            minority = Minority::None;
            patience = jitter(duration);
            aside_until = Instant::now() + duration * quorum::STAND_ASIDE;
        }
        let until = members.iter().map(|m| m.next_at).min().unwrap_or(now);
        tokio::select! {
            _ = shutdown.wait() => {}
            _ = tokio::time::sleep_until(until.into()) => {}
        }
    }
    // Stop acting before the Leases go: after the release a standby may act at once.
    publish(LeaderRole::Candidate);
    for member in members.iter_mut() {
        member.release().await;
    }
}

enum Turn {
    Holding,
    Raced,
    /// Read again after the wait; the Lease's holder with a running term, if another's.
    Waiting(Duration, Option<String>),
}

/// One read-decide-write round; a take or create only when `may_take` (`quorum::may_take`),
/// else a look again one poll on.
async fn turn(
    target: &LeaseTarget,
    watching: &mut Option<Watching>,
    held: &mut Option<Seen>,
    may_take: bool,
) -> Result<Turn, kube::Error> {
    let current = match held.take() {
        Some(ours) => Some(ours),
        None => {
            let read = target.read().await?;
            if let Some(s) = &read {
                *watching = Some(lease::observe(watching.take(), s, Instant::now()));
            }
            read
        }
    };
    let step = lease::step(
        &target.identity,
        current.as_ref(),
        watching.as_ref(),
        target.timing.duration(),
        Instant::now(),
    );
    let written = match step {
        Step::Wait { expires_in } => {
            let holder = current.and_then(|s| s.holder);
            return Ok(Turn::Waiting(expires_in, holder));
        }
        // Free or lapsed: no one's term runs on it.
        Step::Create | Step::Take { .. } if !may_take => {
            return Ok(Turn::Waiting(target.timing.poll(), None))
        }
        Step::Create => target.create().await?,
        Step::Renew { version } => target.write(&version, None).await?,
        Step::Take {
            version,
            transitions,
        } => target.write(&version, Some(transitions)).await?,
    };
    Ok(match written {
        Written::Held(now) => {
            *held = Some(now);
            Turn::Holding
        }
        Written::Raced => Turn::Raced,
    })
}
