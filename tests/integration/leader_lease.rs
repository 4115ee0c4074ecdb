//! The leader Lease (`src/leader/`) against the bed's real apiserver: two campaigns in this
//! process, one of them reaching the apiserver through a TCP relay the test can cut (a
//! partition: packets vanish, no reset), and a "ghost" holder the test writes by hand.
//!
//! What must hold: the two replicas' write fences never both admit a write at the same instant,
//! and a Lease another holder keeps renewing is never taken, however old its `renewTime` looks
//! to the wall clock. Each test owns a fresh namespace and its Lease, and deletes them.
//! Needs the bed (`KOO_TESTBED`), nothing of its Kafka.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use kafka_observer_operator::leader::{self, LeaderArgs, Leadership, LeaseMember};
use kafka_observer_operator::metrics::Metrics;
use kafka_observer_operator::shutdown::Shutdown;

use super::support::{self, bed_config, relay};

const LEASE: &str = "koo-it-leader";
const DURATION: Duration = Duration::from_secs(4);

fn args(ns: &str, identity: &str) -> LeaderArgs {
    LeaderArgs {
        enabled: true,
        lease_name: LEASE.into(),
        lease_namespace: ns.into(),
        identity: Some(identity.into()),
        lease_duration: DURATION,
        lease_grace: Duration::from_secs(2),
    }
}

/// Samples both fences every 10 ms until `until` holds or `timeout` passes; panics if both
/// admit a write at once. Returns (samples where a admitted, where b admitted).
async fn sample_fences(
    a: &Leadership,
    b: &Leadership,
    timeout: Duration,
    until: impl Fn() -> bool,
) -> (usize, usize) {
    let (fa, fb) = (a.fence(), b.fence());
    let (mut admitted_a, mut admitted_b) = (0, 0);
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline && !until() {
        let (ok_a, ok_b) = (fa.check().is_ok(), fb.check().is_ok());
        assert!(
            !(ok_a && ok_b),
            "both replicas' fences admit writes at once: a {:?}, b {:?}",
            fa.term(),
            fb.term()
        );
        admitted_a += usize::from(ok_a);
        admitted_b += usize::from(ok_b);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    (admitted_a, admitted_b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_leader_is_fenced_before_its_successor_may_write() {
    let Some(bed) = support::bed().await else {
        return;
    };
    let ns = bed.namespace("lease-cut").await;
    let direct = bed_config(&bed).await;
    let upstream: SocketAddr = {
        let uri = &direct.cluster_url;
        let host = uri.host().expect("apiserver host");
        let port = uri.port_u16().unwrap_or(443);
        tokio::net::lookup_host((host, port))
            .await
            .expect("resolve the apiserver")
            .next()
            .expect("an apiserver address")
    };
    let (relay_addr, cut) = relay(upstream).await;
    let mut relayed = direct.clone();
    relayed.cluster_url = format!("https://{relay_addr}").parse().unwrap();

    let (down_a, down_b) = (Shutdown::new(), Shutdown::new());
    let args_a = args(&ns, "a");
    let local_a = vec![LeaseMember::local("", relayed, &args_a)];
    let a = leader::campaign(local_a, &args_a, Metrics::new(), down_a.clone()).expect("campaign a");
    let mut waiting = a.clone();
    tokio::time::timeout(Duration::from_secs(20), waiting.acquired())
        .await
        .expect("a acquires the free Lease within 20 s");
    let args_b = args(&ns, "b");
    let local_b = vec![LeaseMember::local("", direct, &args_b)];
    let b = leader::campaign(local_b, &args_b, Metrics::new(), down_b.clone()).expect("campaign b");

    // A renews through the relay: b stands by for longer than a lease duration.
    let (held_a, held_b) = sample_fences(&a, &b, Duration::from_secs(6), || false).await;
    assert!(held_a > 0, "a's fence never admitted a write while leading");
    assert_eq!(held_b, 0, "b admitted writes while a renewed");
    assert!(!b.is_leader(), "b leads while a renews");

    cut.store(true, Ordering::SeqCst);
    let cut_at = Instant::now();
    let b_leads = {
        let b = b.clone();
        move || b.is_leader()
    };
    sample_fences(&a, &b, Duration::from_secs(20), b_leads).await;
    let takeover = cut_at.elapsed();
    assert!(b.is_leader(), "b did not take over within 20 s of the cut");
    // And on for a while: a, still cut off, must stay fenced.
    let (_, after_b) = sample_fences(&a, &b, Duration::from_secs(2), || false).await;
    assert!(after_b > 0, "b leads but its fence never admitted a write");
    assert!(
        a.fence().check().is_err(),
        "a's fence still admits writes 2 s after b took over"
    );
    println!("leader_lease: cut -> b leads {takeover:.2?} (lease duration {DURATION:?})");

    down_a.trigger();
    down_b.trigger();
    bed.drop_namespace(&ns).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_its_holder_renews_is_never_taken_whatever_its_renew_time() {
    let Some(bed) = support::bed().await else {
        return;
    };
    let ns = bed.namespace("lease-ghost").await;
    let leases: Api<Lease> = Api::namespaced(bed.client.clone(), &ns);
    // Held by a replica whose renewTime reads as 26 years old: a candidate timing expiry by
    // the wall clock would take it at once.
    let ghost: Lease = serde_json::from_value(json!({
        "metadata": {"name": LEASE},
        "spec": {"holderIdentity": "ghost", "leaseDurationSeconds": 4,
                 "renewTime": "2000-01-01T00:00:00.000000Z", "leaseTransitions": 0}
    }))
    .unwrap();
    leases
        .create(&PostParams::default(), &ghost)
        .await
        .expect("create the ghost's Lease");

    let down = Shutdown::new();
    let args_b = args(&ns, "b");
    let local_b = vec![LeaseMember::local("", bed_config(&bed).await, &args_b)];
    let b = leader::campaign(local_b, &args_b, Metrics::new(), down.clone()).expect("campaign b");

    // The ghost renews every second for 7 s, always with the same old renewTime: only the
    // Lease's version changes, and that alone must restart b's wait.
    let mut last_renewal_sent = Instant::now();
    for i in 0..7 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!b.is_leader(), "b took a renewed Lease after {i} renewals");
        last_renewal_sent = Instant::now();
        let patch = json!({"metadata": {"annotations": {"renewal": i.to_string()}}, "spec": {"holderIdentity": "ghost"}});
        leases
            .patch(LEASE, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("the ghost renews");
    }
    let mut waiting = b.clone();
    tokio::time::timeout(Duration::from_secs(15), waiting.acquired())
        .await
        .expect("b takes the Lease once the ghost stops renewing");
    let after = last_renewal_sent.elapsed();
    assert!(
        after >= DURATION,
        "b took the Lease {after:?} after the ghost's last renewal, less than a lease duration"
    );
    let lease = leases.get(LEASE).await.expect("read the Lease");
    let spec = lease.spec.expect("a Lease spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(
        spec.lease_transitions,
        Some(1),
        "a takeover counts a transition"
    );
    println!("leader_lease: ghost's last renewal -> b leads {after:.2?}");

    // A clean shutdown releases it: no holder left.
    down.trigger();
    support::wait_for(Duration::from_secs(10), "the Lease released", || async {
        let lease = leases.get(LEASE).await.ok()?;
        lease
            .spec
            .and_then(|s| s.holder_identity)
            .is_none()
            .then_some(())
    })
    .await;
    bed.drop_namespace(&ns).await;
}

/// The majority rule over three Leases (what docs/multi-cluster.md gives one per member
/// cluster), here three namespaces of the bed's apiserver, each reached by each replica through
/// a relay of its own, so that each replica's way to each "member" can be cut alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_majority_of_leases_leads_and_a_minority_never_writes() {
    use kafka_observer_operator::leader::{campaign_over, LeaseTiming};

    let Some(bed) = support::bed().await else {
        return;
    };
    let direct = bed_config(&bed).await;
    let upstream: SocketAddr = {
        let uri = &direct.cluster_url;
        let host = uri.host().expect("apiserver host");
        let port = uri.port_u16().unwrap_or(443);
        tokio::net::lookup_host((host, port))
            .await
            .expect("resolve the apiserver")
            .next()
            .expect("an apiserver address")
    };
    let mut namespaces = Vec::new();
    for i in 0..3 {
        namespaces.push(bed.namespace(&format!("quorum{i}")).await);
    }
    let timing = LeaseTiming::new(DURATION, Duration::from_secs(2)).unwrap();
    // Per replica: one relay per member, and its cut switches.
    let mut replicas = Vec::new();
    let mut cuts = Vec::new();
    for identity in ["a", "b"] {
        let mut members = Vec::new();
        let mut switches = Vec::new();
        for ns in &namespaces {
            let (addr, cut) = relay(upstream).await;
            let mut config = direct.clone();
            config.cluster_url = format!("https://{addr}").parse().unwrap();
            members.push(LeaseMember {
                member: ns.clone(),
                config,
                namespace: ns.clone(),
            });
            switches.push(cut);
        }
        let down = Shutdown::new();
        let leadership = campaign_over(
            members,
            LEASE,
            identity.into(),
            timing,
            Metrics::new(),
            down.clone(),
        )
        .expect("campaign over three Leases");
        replicas.push((leadership, down));
        cuts.push(switches);
        if identity == "a" {
            let mut waiting = replicas[0].0.clone();
            tokio::time::timeout(Duration::from_secs(20), waiting.acquired())
                .await
                .expect("a gathers the three free Leases within 20 s");
        }
    }
    let (a, b) = (replicas[0].0.clone(), replicas[1].0.clone());

    // a loses its way to member 2: two of three still hold, a keeps leading, b stays out.
    cuts[0][2].store(true, Ordering::SeqCst);
    let (held_a, held_b) = sample_fences(&a, &b, Duration::from_secs(8), || false).await;
    assert!(a.is_leader(), "a stepped down holding two Leases of three");
    assert!(
        held_a > 0,
        "a's fence admitted nothing while holding a majority"
    );
    assert_eq!(held_b, 0, "b admitted writes while a held a majority");

    // And to member 1: a reaches only member 0, a minority. b takes Leases 1 and 2 once they
    // stood still a duration; the fences never overlap.
    cuts[0][1].store(true, Ordering::SeqCst);
    let cut_at = Instant::now();
    let b_leads = {
        let b = b.clone();
        move || b.is_leader()
    };
    sample_fences(&a, &b, Duration::from_secs(20), b_leads).await;
    let takeover = cut_at.elapsed();
    assert!(b.is_leader(), "b did not gather a majority within 20 s");
    let (_, after_b) = sample_fences(&a, &b, Duration::from_secs(2), || false).await;
    assert!(after_b > 0, "b leads but its fence never admitted a write");
    assert!(!a.is_leader(), "a still leads on one Lease of three");
    for (i, ns) in namespaces.iter().enumerate().skip(1) {
        let leases: Api<Lease> = Api::namespaced(bed.client.clone(), ns);
        let holder = leases
            .get(LEASE)
            .await
            .expect("read a member's Lease")
            .spec
            .and_then(|s| s.holder_identity);
        assert_eq!(holder.as_deref(), Some("b"), "member {i}'s Lease");
    }
    println!("leader_lease: a cut to a minority -> b leads with a majority {takeover:.2?}");

    for (_, down) in &replicas {
        down.trigger();
    }
    for ns in &namespaces {
        bed.drop_namespace(ns).await;
    }
}
