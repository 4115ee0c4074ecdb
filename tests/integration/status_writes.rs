//! The reconciler's status writes on the bed's real apiserver: each carries the
//! `resourceVersion` it was decided on, so a write decided on a read that anyone wrote after (a
//! former leader's late write, the promotion engine's fields in between) changes nothing and
//! says so; the status copies across members (docs/multi-cluster.md, step 8), with the test as
//! the only writer; and the bed's operator claiming an epoch per leadership, standing down on a
//! later one. Each test owns its namespaces.

use crate::support;

use kafka_observer_operator::k8s::{status, Error};
use kafka_observer_operator::writers::ROLLOUT_STATUS;
use serde_json::json;

use support::*;

#[tokio::test]
async fn a_status_write_decided_on_a_stale_read_never_lands() {
    let Some(bed) = bed().await else {
        return;
    };
    // The test is the only writer: the bed's operator would reconcile the set.
    let _paused = bed.pause_operator();
    let ns = bed.namespace("status-precondition").await;
    let sets = bed.observer_sets(&ns);
    let created = create_observer_set(&sets, bed.podless_observer_set("pre", &[4], &[])).await;
    let read_version = created.metadata.resource_version.clone();
    assert!(read_version.is_some(), "a created object has a version");
    let body = |revision: i64| {
        kafka_observer_operator::writers::status_body(
            json!({"phase": "RollingOut", "revision": revision}),
        )
    };
    // The successor's intent, decided on the current version, lands and returns the new one.
    let successor = status::apply(
        &sets,
        "pre",
        ROLLOUT_STATUS,
        &body(7),
        read_version.as_deref(),
    )
    .await
    .expect("a write on the current version lands");
    assert!(
        successor.is_some() && successor != read_version,
        "the write returned no new version ({successor:?} after {read_version:?})"
    );
    // Our late intent, decided on the first read: refused, nothing changed.
    let late = status::apply(
        &sets,
        "pre",
        ROLLOUT_STATUS,
        &body(6),
        read_version.as_deref(),
    )
    .await;
    assert!(
        matches!(late, Err(Error::Superseded { .. })),
        "a status write on a stale version was not refused: {late:?}"
    );
    let now = sets.get("pre").await.expect("the ObserverSet");
    assert_eq!(
        now.status.as_ref().map(|s| s.revision),
        Some(7),
        "the late write changed the status"
    );
    assert_eq!(now.metadata.resource_version, successor);
    // Chained writes of one reconcile: each on the version the previous returned.
    let third = status::apply(&sets, "pre", ROLLOUT_STATUS, &body(8), successor.as_deref())
        .await
        .expect("a write on the version our own last write returned lands");
    assert!(third.is_some() && third != successor);
    bed.drop_namespace(&ns).await;
}

/// Step 8 of docs/multi-cluster.md on the bed's apiserver: three namespaces stand in for three
/// member clusters' copies of one ObserverSet; a lost member is reached through a relay that
/// forwards nothing (timeouts, as from a lost region). A leader that dies after a minority
/// write, a successor resuming from a majority under a higher epoch, the lost member returning
/// with its stale copy, and the dead leader's late write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_copies_across_three_members() {
    use kafka_observer_operator::crd::{ObserverSet, ObserverSetStatus};
    use kafka_observer_operator::k8s::fence::{Fence, Term};
    use kafka_observer_operator::k8s::status_copies::{StatusCopies, StatusCopy, Versions};
    use kafka_observer_operator::reconciler::copies::{self, CopiesError};
    use kafka_observer_operator::writers::EPOCH_CLAIM;
    use kube::Api;

    let Some(bed) = bed().await else {
        return;
    };
    let _paused = bed.pause_operator();
    let direct = bed_config(&bed).await;
    let upstream = {
        let uri = &direct.cluster_url;
        let (host, port) = (uri.host().expect("host"), uri.port_u16().unwrap_or(443));
        tokio::net::lookup_host((host, port))
            .await
            .expect("resolve the apiserver")
            .next()
            .expect("an apiserver address")
    };
    let (_leading, leading) = tokio::sync::watch::channel(true);
    let fence = Fence::new(leading, Term::Unbounded);
    let live =
        kafka_observer_operator::k8s::client::build(direct.clone(), fence.clone()).expect("client");
    let (relay_addr, cut) = relay(upstream).await;
    cut.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut through_relay = direct.clone();
    through_relay.cluster_url = format!("https://{relay_addr}").parse().unwrap();
    let lost = kafka_observer_operator::k8s::client::build(through_relay, fence).expect("client");

    let members = ["east", "west", "tie"];
    let mut namespaces = Vec::new();
    for m in members {
        let ns = bed.namespace(&format!("copies-{m}")).await;
        create_observer_set(
            &bed.observer_sets(&ns),
            bed.podless_observer_set("rep", &[4], &[]),
        )
        .await;
        namespaces.push(ns);
    }
    // The copies as one leader reaches them: `reached[i]` false, member i is lost to it.
    let copies_for = |reached: [bool; 3]| {
        StatusCopies::new(
            (0..3)
                .map(|i| StatusCopy {
                    member: members[i].to_string(),
                    api: Api::namespaced(
                        if reached[i] {
                            live.clone()
                        } else {
                            lost.clone()
                        },
                        &namespaces[i],
                    ),
                })
                .collect(),
        )
    };
    let status = |epoch: i64, revision: i64, target: &[i32]| {
        kafka_observer_operator::writers::status_body(json!({
            "writerEpoch": epoch, "revision": revision, "desiredObservers": target,
        }))
    };
    let resume = |read: &[copies::Copy]| -> (copies::Recovered, Versions) {
        let r = copies::recover(read).expect("a majority answered");
        let versions = r.versions.clone();
        (r, versions)
    };

    // A leads with every member reachable: claims epoch 1, writes revision 1 everywhere.
    let all = copies_for([true, true, true]);
    let (r, mut a_versions) = resume(&all.read("rep").await);
    assert_eq!((r.epoch, r.latest.is_none()), (1, true));
    all.write("rep", EPOCH_CLAIM, &copies::claim(1), &mut a_versions)
        .await
        .expect("the claim on three of three");
    all.write("rep", ROLLOUT_STATUS, &status(1, 1, &[4]), &mut a_versions)
        .await
        .expect("revision 1 on three of three");

    // A loses west and tie, then writes revision 2 (target [] ) to east alone: not persisted.
    let a_cut = copies_for([true, false, false]);
    let started = std::time::Instant::now();
    let minority = a_cut
        .write("rep", ROLLOUT_STATUS, &status(1, 2, &[]), &mut a_versions)
        .await;
    assert!(
        matches!(&minority, Err(Error::NotPersisted { reason, .. }) if reason.contains("1 of 3")),
        "a write on one copy of three counted: {minority:?}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "the lost members held the write for {:?}",
        started.elapsed()
    );
    let east_late_version = a_versions.get("east").cloned().flatten();
    assert!(east_late_version.is_some(), "east accepted A's write");

    // B leads from west and tie, east lost: resumes revision 1 (never saw A's minority write),
    // claims epoch 2 on two of three, writes revision 2 with another target.
    let b = copies_for([false, true, true]);
    let (r, mut b_versions) = resume(&b.read("rep").await);
    assert_eq!(copies::progress(r.latest.as_ref()), (1, 1, 3));
    assert_eq!(r.epoch, 2);
    assert_eq!(r.unanswered.len(), 1, "{:?}", r.unanswered);
    b.write("rep", EPOCH_CLAIM, &copies::claim(2), &mut b_versions)
        .await
        .expect("the claim on two of three");
    b.write(
        "rep",
        ROLLOUT_STATUS,
        &status(2, 2, &[4, 5]),
        &mut b_versions,
    )
    .await
    .expect("revision 2 on two of three");

    // Only one member answering is no majority: nothing resumed.
    let alone = copies_for([true, false, false]).read("rep").await;
    assert!(matches!(
        copies::recover(&alone),
        Err(CopiesError::TooFewAnswered { answered: 1, .. })
    ));

    // East returns with A's minority copy at the same revision: B's epoch wins, east is behind
    // and is overwritten by the next leader's writes.
    let c = copies_for([true, true, true]);
    let (r, mut c_versions) = resume(&c.read("rep").await);
    let latest: &ObserverSetStatus = r.latest.as_ref().expect("a status");
    assert_eq!((latest.writer_epoch, latest.revision), (2, 2));
    assert_eq!(
        latest.desired_observers,
        vec![4, 5],
        "resumed from A's minority intent"
    );
    assert_eq!(r.behind, vec!["east".to_string()]);
    assert_eq!(r.epoch, 3);
    c.write("rep", EPOCH_CLAIM, &copies::claim(3), &mut c_versions)
        .await
        .expect("the claim");
    c.write(
        "rep",
        ROLLOUT_STATUS,
        &status(3, 2, &[4, 5]),
        &mut c_versions,
    )
    .await
    .expect("the write");
    let east: Api<ObserverSet> = Api::namespaced(live.clone(), &namespaces[0]);
    let now = east
        .get("rep")
        .await
        .expect("east's copy")
        .status
        .expect("a status");
    assert_eq!(
        (
            now.writer_epoch,
            now.leader_epoch,
            now.desired_observers.clone()
        ),
        (3, 3, vec![4, 5])
    );

    // A's late write to east, on the version it last saw: refused, east unchanged.
    let late = status::apply(
        &east,
        "rep",
        ROLLOUT_STATUS,
        &status(1, 3, &[]),
        east_late_version.as_deref(),
    )
    .await;
    assert!(matches!(late, Err(Error::Superseded { .. })), "{late:?}");
    let after = east
        .get("rep")
        .await
        .expect("east's copy")
        .status
        .expect("a status");
    assert_eq!(after, now, "the late write changed east's copy");
    for ns in &namespaces {
        bed.drop_namespace(ns).await;
    }
}

/// The bed's operator claims an epoch on the set before its first status write, writes its
/// rollout state under it, and a new leadership (the process killed and started again) claims
/// the next one.
#[tokio::test]
async fn every_leadership_claims_an_epoch_before_it_writes() {
    let Some(bed) = bed().await else {
        return;
    };
    const T: std::time::Duration = std::time::Duration::from_secs(60);
    bed.operator("up");
    let ns = bed.namespace("epoch").await;
    let sets = bed.observer_sets(&ns);
    create_observer_set(&sets, bed.podless_observer_set("ep", &[4], &[])).await;
    let epochs = |s: &serde_json::Value| {
        (
            s["writerEpoch"].as_i64().unwrap_or(0),
            s["leaderEpoch"].as_i64().unwrap_or(0),
        )
    };
    let first = wait_for(T, "ep Ready with an epoch", || async {
        let s = status_of(&sets, "ep").await;
        (phase(&s) == "Ready" && epochs(&s).0 > 0).then_some(s)
    })
    .await;
    let (written, claimed) = epochs(&first);
    assert_eq!(
        written, claimed,
        "rollout state written under another epoch than claimed: {first}"
    );
    bed.operator("kill");
    bed.operator("up");
    let second = wait_for(T, "a new leadership's epoch", || async {
        let s = status_of(&sets, "ep").await;
        (epochs(&s).0 > written).then_some(s)
    })
    .await;
    assert_eq!(epochs(&second), (written + 1, written + 1), "{second}");
    assert_eq!(phase(&second), "Ready");

    // A later leadership's claim (as a successor that this replica did not notice would write
    // it): the running operator then refuses to act on the set. A hand promotion is not
    // rolled out; the reconcile says why in a Warning Event.
    use k8s_openapi::api::events::v1::Event;
    use kafka_observer_operator::reconciler::copies;
    use kafka_observer_operator::writers::EPOCH_CLAIM;
    use kube::api::{ListParams, Patch, PatchParams};
    let successor = written + 10;
    status::apply(&sets, "ep", EPOCH_CLAIM, &copies::claim(successor), None)
        .await
        .expect("a successor's claim");
    sets.patch(
        "ep",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"promotion": {"promoted": [4]}}})),
    )
    .await
    .expect("promote 4 by hand");
    let events: kube::Api<Event> = kube::Api::namespaced(bed.client.clone(), &ns);
    let note = wait_for(
        T,
        "a Warning saying a later leadership took over",
        || async {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items.into_iter().find_map(|e| {
                let note = e.note.unwrap_or_default();
                (e.reason.as_deref() == Some("ReconcileFailed")
                    && note.contains(&format!("later operator leadership (epoch {successor})")))
                .then_some(note)
            })
        },
    )
    .await;
    let cms = bed.config_maps(&ns);
    for role in ["controller", "broker"] {
        let cm = get_cm(&cms, &format!("ep-observers-{role}"))
            .await
            .expect("the list");
        assert_eq!(
            listed_ids(&cm),
            Some(vec![4]),
            "the replaced leadership wrote the {role}s' list after it read a later epoch ({note})"
        );
    }
    let held = status_of(&sets, "ep").await;
    assert_eq!(epochs(&held), (written + 1, successor), "{held}");

    // A new leadership claims above it and rolls the promotion out.
    bed.operator("kill");
    bed.operator("up");
    wait_for(T, "the promotion rolled out under a new epoch", || async {
        let s = status_of(&sets, "ep").await;
        let cm = get_cm(&cms, "ep-observers-broker").await?;
        (epochs(&s) == (successor + 1, successor + 1)
            && phase(&s) == "Ready"
            && listed_ids(&cm) == Some(vec![]))
        .then_some(())
    })
    .await;
    bed.drop_namespace(&ns).await;
}

/// The promotion engine's write (`automation::status_write`) on the bed's apiserver: decided on
/// an old copy it is refused (409), and on the fresh copy `rebase` refuses to write it over
/// another engine's state (a former leader's late write, or a successor's), while a copy that
/// only the reconciler moved takes it.
#[tokio::test]
async fn an_engine_status_write_on_an_old_copy_never_lands() {
    use kafka_observer_operator::automation::status_write::{self, Stale};
    let Some(bed) = bed().await else {
        return;
    };
    let _paused = bed.pause_operator();
    let ns = bed.namespace("engine-precondition").await;
    let sets = bed.observer_sets(&ns);
    let created = create_observer_set(&sets, bed.podless_observer_set("eng", &[4], &[])).await;
    let body = |saved_at: &str, node: i64| {
        kafka_observer_operator::writers::status_body(json!({
            "autoPromotions": [{"nodeId": node, "at": saved_at, "reason": "test"}],
            "engineState": {"savedAt": saved_at},
        }))
    };
    let mark = status_write::engine_mark;
    // Our engine's first write, on the copy it decided on.
    let ours = "2026-12-06T10:00:00.000000Z";
    let v1 = status_write::apply(
        &sets,
        "eng",
        &body(ours, 4),
        created.metadata.resource_version.as_deref(),
    )
    .await
    .expect("a write on the current version lands");
    let after_ours = sets.get_status("eng").await.expect("the ObserverSet");
    let our_mark = mark(&after_ours);
    assert!(our_mark.is_some(), "our engine state was not stored");
    // The reconciler writes its fields: our next write on v1 is refused, and the fresh copy
    // takes the decision (same generation, our engine state still the stored one).
    status::apply(
        &sets,
        "eng",
        ROLLOUT_STATUS,
        &kafka_observer_operator::writers::status_body(json!({"phase": "Ready", "revision": 3})),
        v1.as_deref(),
    )
    .await
    .expect("the reconciler's write lands");
    let refused = status_write::apply(
        &sets,
        "eng",
        &body("2026-12-06T10:00:01.000000Z", 4),
        v1.as_deref(),
    )
    .await;
    assert!(
        refused.as_ref().is_err_and(status_write::superseded),
        "an engine write on an old copy was not refused: {refused:?}"
    );
    let fresh = sets.get_status("eng").await.expect("the ObserverSet");
    assert_eq!(
        mark(&fresh),
        our_mark,
        "the refused write changed the engine state"
    );
    assert_eq!(
        status_write::rebase(
            created.metadata.generation,
            fresh.metadata.generation,
            our_mark,
            mark(&fresh)
        ),
        Ok(())
    );
    // Another engine (a successor) writes its state: a decision of ours, refused on its old
    // copy, must not be written over it.
    status_write::apply(
        &sets,
        "eng",
        &body("2026-12-06T10:00:05.000000Z", 4),
        fresh.metadata.resource_version.as_deref(),
    )
    .await
    .expect("the successor's write lands");
    let late = status_write::apply(
        &sets,
        "eng",
        &body("2026-12-06T10:00:02.000000Z", 5),
        fresh.metadata.resource_version.as_deref(),
    )
    .await;
    assert!(
        late.as_ref().is_err_and(status_write::superseded),
        "{late:?}"
    );
    let after = sets.get_status("eng").await.expect("the ObserverSet");
    assert!(
        matches!(
            status_write::rebase(
                created.metadata.generation,
                after.metadata.generation,
                our_mark,
                mark(&after)
            ),
            Err(Stale::OtherEngine { .. })
        ),
        "the successor's engine state was not recognized as another engine's"
    );
    let promoted: Vec<i32> = after
        .status
        .as_ref()
        .map(|s| s.auto_promotions.iter().map(|p| p.node_id).collect())
        .unwrap_or_default();
    assert_eq!(
        promoted,
        vec![4],
        "the late write changed status.autoPromotions"
    );
    bed.drop_namespace(&ns).await;
}
