//! Leader election on a `coordination.k8s.io/v1` Lease, so that of several operator replicas
//! exactly one writes ConfigMaps and promotes or demotes at any time.
//!
//! `lease` is the rule for the Lease itself (expiry timed on the monotonic clock from the
//! moment a change was observed, every write conditional on the version it was decided on),
//! `campaign` its shell. This module adds the rule for *acting*: a replica acts only between
//! "acquired" and the first sign that it may no longer hold the lease (lost it, or a renewal
//! failed). Every API call of the campaign has a timeout shorter than the renewal grace period,
//! so a hung request surfaces as a failed renewal, and the replica stops acting, before the
//! lease can expire and another replica take over.

pub mod campaign;
pub mod lease;
pub mod quorum;
#[cfg(test)]
mod safety;
pub mod standing;
pub mod view_report;

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;

use crate::k8s::client::{self, Witness};
use crate::k8s::fence::{Fence, Term};
use crate::metrics::Metrics;
use crate::shutdown::Shutdown;

/// Leader election options, to be flattened into the operator's `run` command.
#[derive(Clone, Debug, clap::Args)]
pub struct LeaderArgs {
    /// Campaign for the Lease before acting (`on`/`off`, also `true`/`false`). Turn off only
    /// when exactly one replica runs.
    #[arg(
        long = "leader-election",
        alias = "leader-elect",
        env = "LEADER_ELECT",
        default_value = "on",
        value_name = "on|off",
        value_parser = parse_switch,
        action = clap::ArgAction::Set
    )]
    pub enabled: bool,
    /// Name of the Lease object.
    #[arg(long, env = "LEASE_NAME", default_value = "kafka-observer-operator")]
    pub lease_name: String,
    /// Namespace of the Lease (the chart passes the operator's own namespace).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pub lease_namespace: String,
    /// This replica's identity in the Lease; defaults to $HOSTNAME (the pod name).
    #[arg(long = "leader-identity", env = "POD_NAME")]
    pub identity: Option<String>,
    /// How long a lease stays valid after its last renewal (whole seconds). 4 s: a standby
    /// takes over about 4 to 4.5 s after the leader's last renewal (a duration from when it
    /// saw that renewal, then up to one poll of 500 ms), at the cost of one Lease update every
    /// 2 s and one read every 500 ms per standby.
    #[arg(long, env = "LEASE_DURATION", default_value = "4s", value_parser = crate::crd::parse_duration)]
    pub lease_duration: Duration,
    /// How long before expiry the holder renews; also the clock skew tolerated between nodes.
    #[arg(long, env = "LEASE_GRACE", default_value = "2s", value_parser = crate::crd::parse_duration)]
    pub lease_grace: Duration,
}

/// `on`/`off` (and `true`/`false`, `yes`/`no`, `1`/`0`) for switches set from the chart's values.
impl LeaderArgs {
    /// The name this replica holds Leases under: `--leader-identity`, else $HOSTNAME.
    pub fn campaign_identity(&self) -> Option<String> {
        self.identity
            .clone()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .filter(|id| !id.is_empty())
    }
}

pub fn parse_switch(value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        other => Err(format!("{other:?} is not a switch: write on or off")),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error(
        "--lease-grace must be at least 2s (it bounds each API call to half of it), got {0:?}"
    )]
    GraceTooShort(Duration),
    #[error("--lease-duration ({duration:?}) must be longer than --lease-grace ({grace:?})")]
    DurationNotAboveGrace { duration: Duration, grace: Duration },
    #[error(
        "no identity for the leader lease: set POD_NAME (the chart does) or --leader-identity"
    )]
    NoIdentity,
    #[error("cannot build the Kubernetes client for leader election: {0}")]
    Client(#[source] kube::Error),
    #[error("--members needs leader election (--leader-election on): the members' Leases decide which replica of which cluster acts")]
    MembersWithoutElection,
}

/// Validated lease timings, in the whole seconds the Lease API uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseTiming {
    pub duration_secs: u64,
    pub grace_secs: u64,
}

impl LeaseTiming {
    pub fn new(duration: Duration, grace: Duration) -> Result<Self, LeaderError> {
        let (duration_secs, grace_secs) = (duration.as_secs(), grace.as_secs());
        if grace_secs < 2 {
            return Err(LeaderError::GraceTooShort(grace));
        }
        if duration_secs <= grace_secs {
            return Err(LeaderError::DurationNotAboveGrace { duration, grace });
        }
        Ok(Self {
            duration_secs,
            grace_secs,
        })
    }

    /// Bound on every API call of the campaign: a renewal starts `grace` before expiry, so a
    /// call that gives up after half of it leaves the other half to stop acting.
    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.grace_secs * 1000 / 2)
    }

    /// What the write fence takes off a confirmed renewal's term (`crate::k8s::fence`): half
    /// the grace, like a call's bound. The holder renews `grace` before expiry, so a renewal
    /// that answers within its own bound extends the term before it lapses; one that does not
    /// leaves writes refused until the next succeeds. The margin also covers the clock skew a
    /// successor still timing the Lease by its wall clock (an older version, during an upgrade
    /// from one that used kube-lease-manager) may have.
    pub fn fence_margin(&self) -> Duration {
        self.request_timeout()
    }

    pub fn duration(&self) -> Duration {
        Duration::from_secs(self.duration_secs)
    }

    /// How often the holder renews: `grace` before the Lease would expire.
    pub fn renew_every(&self) -> Duration {
        Duration::from_secs(self.duration_secs - self.grace_secs)
    }

    /// How often a standby reads the Lease: an eighth of the duration, within 250 ms..1 s. A
    /// takeover comes at most this long after the Lease expired as the standby times it.
    pub fn poll(&self) -> Duration {
        (self.duration() / 8).clamp(Duration::from_millis(250), Duration::from_secs(1))
    }
}

/// Whether this replica currently acts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaderRole {
    Candidate,
    Leader,
}

/// What the campaign observed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    Acquired,
    Lost,
    /// A call to the API server failed or timed out: the lease may be expiring unseen.
    Failed,
}

/// What the replica does about an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaderAction {
    StartActing,
    StopActing,
    Nothing,
}

/// The decision rule, pure. After `Failed` the campaign reads the Lease again before any write,
/// so a lease still held is re-reported as `Acquired` by a fresh renewal.
pub fn decide(role: LeaderRole, event: Event) -> (LeaderRole, LeaderAction) {
    match (role, event) {
        (LeaderRole::Candidate, Event::Acquired) => (LeaderRole::Leader, LeaderAction::StartActing),
        (LeaderRole::Leader, Event::Lost | Event::Failed) => {
            (LeaderRole::Candidate, LeaderAction::StopActing)
        }
        (LeaderRole::Leader, Event::Acquired) => (LeaderRole::Leader, LeaderAction::Nothing),
        (LeaderRole::Candidate, Event::Lost | Event::Failed) => {
            (LeaderRole::Candidate, LeaderAction::Nothing)
        }
    }
}

/// A read-only view of the campaign: whether to act now, and waits for changes; and the
/// write fence that the main client checks before every write.
#[derive(Clone, Debug)]
pub struct Leadership {
    receiver: watch::Receiver<bool>,
    fence: Fence,
    /// What the campaign last saw of each Lease (`standing`); `None` without a campaign.
    sights: Option<watch::Receiver<Vec<standing::LeaseSight>>>,
}

impl Leadership {
    /// Always the leader: for `--leader-elect=false`.
    pub fn always() -> Self {
        let (sender, receiver) = watch::channel(true);
        // Keep the channel open for the life of the process: nothing ever changes it.
        std::mem::forget(sender);
        Self::new(receiver, Term::Unbounded)
    }

    fn new(receiver: watch::Receiver<bool>, term: Term) -> Self {
        let fence = Fence::new(receiver.clone(), term);
        Self {
            receiver,
            fence,
            sights: None,
        }
    }

    /// What the campaign saw of each Lease after its last round, on every change (for
    /// `view_report`); `None` when no campaign runs.
    pub fn sights(&self) -> Option<watch::Receiver<Vec<standing::LeaseSight>>> {
        self.sights.clone()
    }

    /// The fence for the main client (`crate::k8s::client::build`).
    pub fn fence(&self) -> Fence {
        self.fence.clone()
    }

    pub fn is_leader(&self) -> bool {
        *self.receiver.borrow()
    }

    /// Resolves once this replica leads; `false` if the campaign ended first.
    pub async fn acquired(&mut self) -> bool {
        self.receiver.wait_for(|leading| *leading).await.is_ok()
    }

    /// Resolves once this replica must stop acting (lost, failed renewal, campaign ended).
    pub async fn lost(&mut self) {
        let _ = self.receiver.wait_for(|leading| !*leading).await;
    }
}

/// Starts campaigning in a background task (until `shutdown`, which also releases the lease)
/// for one Lease in each of `members`: one for a single-cluster install
/// ([`LeaseMember::local`]), one per member cluster otherwise (`crate::k8s::members`).
pub fn campaign(
    members: Vec<LeaseMember>,
    args: &LeaderArgs,
    metrics: Metrics,
    shutdown: Shutdown,
) -> Result<Leadership, LeaderError> {
    if !args.enabled {
        if members.len() > 1 {
            return Err(LeaderError::MembersWithoutElection);
        }
        metrics.set_leader(true);
        return Ok(Leadership::always());
    }
    let timing = LeaseTiming::new(args.lease_duration, args.lease_grace)?;
    let identity = args.campaign_identity().ok_or(LeaderError::NoIdentity)?;
    campaign_over(
        members,
        &args.lease_name,
        identity,
        timing,
        metrics,
        shutdown,
    )
}

/// Where one of the campaign's Leases lives: an apiserver and a namespace, and the member
/// cluster's name for the logs (`rollout::LOCAL`, empty, in a single-cluster install).
pub struct LeaseMember {
    pub member: String,
    pub config: kube::Config,
    pub namespace: String,
}

impl LeaseMember {
    /// The Lease in the cluster this replica runs in, in `--lease-namespace`.
    pub fn local(member: &str, config: kube::Config, args: &LeaderArgs) -> Self {
        Self {
            member: member.into(),
            config,
            namespace: args.lease_namespace.clone(),
        }
    }
}

/// Campaigns for one Lease named `lease_name` in each of `members` (one per member cluster,
/// docs/multi-cluster.md), leading while a majority is held; the fence keeps one term per
/// Lease, each proved only by answers of that member's apiserver.
pub fn campaign_over(
    members: Vec<LeaseMember>,
    lease_name: &str,
    identity: String,
    timing: LeaseTiming,
    metrics: Metrics,
    shutdown: Shutdown,
) -> Result<Leadership, LeaderError> {
    let (sender, receiver) = watch::channel(false);
    let fence = Fence::over(receiver.clone(), vec![Term::Unproven; members.len()]);
    let (sights_sender, sights) = watch::channel(Vec::new());
    let leadership = Leadership {
        receiver,
        fence,
        sights: Some(sights),
    };
    let targets = members
        .into_iter()
        .enumerate()
        .map(|(lease, member)| {
            // Only a Lease write whose answer names us proves the term: not the campaign's
            // own conclusion, which a paused process keeps unchanged.
            let witness = Witness {
                fence: leadership.fence(),
                lease,
                identity: identity.as_str().into(),
                lease_duration: timing.duration(),
                margin: timing.fence_margin(),
            };
            let client = client::campaign(member.config, timing.request_timeout(), witness)
                .map_err(LeaderError::Client)?;
            Ok(campaign::LeaseTarget {
                member: member.member,
                api: kube::Api::namespaced(client, &member.namespace),
                name: lease_name.to_string(),
                identity: identity.clone(),
                timing,
            })
        })
        .collect::<Result<Vec<_>, LeaderError>>()?;
    tokio::spawn(campaign::run(
        targets,
        sender,
        sights_sender,
        metrics,
        shutdown,
    ));
    Ok(leadership)
}

/// Runs `work` only while leading: starts it on acquisition, drops (cancels) it on loss, and
/// starts it afresh on the next acquisition. Returns when `work` returns, or on shutdown: then
/// `work` (which watches the same shutdown) gets up to `grace` to finish what it is doing, as
/// long as the lease is still held; a loss cancels it at once.
pub async fn while_leader<F, Fut>(
    mut leadership: Leadership,
    shutdown: Shutdown,
    grace: Duration,
    mut work: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    loop {
        tokio::select! {
            _ = shutdown.wait() => return,
            acquired = leadership.acquired() => if !acquired { return },
        }
        tracing::info!("leading: starting to act");
        let mut watching = leadership.clone();
        let acting = work();
        tokio::pin!(acting);
        tokio::select! {
            _ = shutdown.wait() => {
                tokio::select! {
                    finished = tokio::time::timeout(grace, &mut acting) => if finished.is_err() {
                        tracing::warn!(?grace, "still acting after the shutdown grace period: stopped");
                    },
                    _ = watching.lost() => tracing::warn!("no longer leading during shutdown: stopped acting"),
                }
                return;
            }
            _ = &mut acting => return,
            _ = watching.lost() => tracing::warn!("no longer leading: stopped acting"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicI32, Ordering};
    use std::sync::Arc;

    #[test]
    fn only_acquisition_starts_acting_and_any_doubt_stops_it() {
        use Event::*;
        use LeaderAction::*;
        use LeaderRole::*;
        assert_eq!(decide(Candidate, Acquired), (Leader, StartActing));
        assert_eq!(decide(Leader, Acquired), (Leader, Nothing));
        assert_eq!(decide(Leader, Lost), (Candidate, StopActing));
        assert_eq!(decide(Leader, Failed), (Candidate, StopActing));
        assert_eq!(decide(Candidate, Lost), (Candidate, Nothing));
        assert_eq!(decide(Candidate, Failed), (Candidate, Nothing));
    }

    #[test]
    fn timings_leave_room_to_stop_before_expiry() {
        let t = LeaseTiming::new(Duration::from_secs(15), Duration::from_secs(5)).unwrap();
        assert_eq!(t.request_timeout(), Duration::from_millis(2500));
        assert!(t.request_timeout() < Duration::from_secs(t.grace_secs));
        assert!(matches!(
            LeaseTiming::new(Duration::from_secs(15), Duration::from_millis(1500)),
            Err(LeaderError::GraceTooShort(_))
        ));
        let err = LeaseTiming::new(Duration::from_secs(5), Duration::from_secs(5)).unwrap_err();
        assert!(err.to_string().contains("--lease-duration"), "{err}");
    }

    /// Counts live `work` futures: +1 when one starts, -1 when it is dropped.
    struct Running(Arc<AtomicI32>);

    impl Drop for Running {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }

    // Paused time: a timer fires only once every task is idle, so `settle` returns after the
    // runner has handled the change, however loaded the machine (no real sleeps).
    #[tokio::test(start_paused = true)]
    async fn work_runs_only_while_leading_and_restarts_on_reacquisition() {
        let (sender, receiver) = watch::channel(false);
        let leadership = Leadership::new(receiver, Term::Unbounded);
        let shutdown = Shutdown::new();
        let running = Arc::new(AtomicI32::new(0));
        let starts = Arc::new(AtomicI32::new(0));
        let runner = tokio::spawn(while_leader(
            leadership,
            shutdown.clone(),
            Duration::from_millis(100),
            {
                let (running, starts) = (running.clone(), starts.clone());
                move || {
                    running.fetch_add(1, Ordering::SeqCst);
                    starts.fetch_add(1, Ordering::SeqCst);
                    let guard = Running(running.clone());
                    async move {
                        let _guard = guard;
                        std::future::pending::<()>().await
                    }
                }
            },
        ));
        let settle = || tokio::time::sleep(Duration::from_millis(50));
        settle().await;
        assert_eq!(starts.load(Ordering::SeqCst), 0, "acts before leading");

        sender.send_replace(true);
        settle().await;
        assert_eq!(
            (
                starts.load(Ordering::SeqCst),
                running.load(Ordering::SeqCst)
            ),
            (1, 1)
        );

        sender.send_replace(false);
        settle().await;
        assert_eq!(
            running.load(Ordering::SeqCst),
            0,
            "still acting after the loss"
        );

        sender.send_replace(true);
        settle().await;
        assert_eq!(
            (
                starts.load(Ordering::SeqCst),
                running.load(Ordering::SeqCst)
            ),
            (2, 1)
        );

        shutdown.trigger();
        tokio::time::timeout(Duration::from_secs(1), runner)
            .await
            .expect("stops on shutdown, after the grace period at the latest")
            .unwrap();
        assert_eq!(running.load(Ordering::SeqCst), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn on_shutdown_work_may_finish_its_step() {
        let (_sender, receiver) = watch::channel(true);
        let shutdown = Shutdown::new();
        let finished = Arc::new(AtomicI32::new(0));
        let runner = tokio::spawn(while_leader(
            Leadership::new(receiver, Term::Unbounded),
            shutdown.clone(),
            Duration::from_secs(5),
            {
                let (finished, shutdown) = (finished.clone(), shutdown.clone());
                move || {
                    let (finished, shutdown) = (finished.clone(), shutdown.clone());
                    async move {
                        shutdown.wait().await;
                        // The in-flight step completes after the signal.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        finished.fetch_add(1, Ordering::SeqCst);
                    }
                }
            },
        ));
        tokio::time::sleep(Duration::from_millis(20)).await;
        shutdown.trigger();
        tokio::time::timeout(Duration::from_secs(2), runner)
            .await
            .expect("returns")
            .unwrap();
        assert_eq!(finished.load(Ordering::SeqCst), 1, "the step was cut off");
    }
}
