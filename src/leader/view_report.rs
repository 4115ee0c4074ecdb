//! The shell of `super::standing`: writes this replica's view of the leadership to
//! `status.localView` of every ObserverSet with `spec.clusters` in its own member cluster, and
//! publishes `NoAuthority` (Warning) and `AuthorityVisible` (Normal) Events there when its
//! standing goes to or from "no one with authority". Over member clusters only.
//!
//! Why a client the write fence does not guard: the fence closes every write of a replica that
//! does not lead, and saying so is exactly what a replica without authority must still do. This
//! task writes nothing but `status.localView` (field manager [`writers::LOCAL_VIEW`], a field no
//! other writer sends, no precondition) and Events; no list and no rollout state depends on it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use tokio::sync::watch;

use super::standing::{self, Announce, Current, LeaseSight, Standing};
use crate::crd::{LocalView, ObserverSet};
use crate::k8s::events::{reason, Events, CAMPAIGN};
use crate::k8s::scope::WatchScope;
use crate::shutdown::Shutdown;
use crate::writers;

/// How often the copies are listed again without a change of view: a set created since gets
/// the view, a copy another replica of this member wrote over gets it back when ours is newer.
const REPAIR_EVERY: Duration = Duration::from_secs(5);
/// How often the standing is looked at without a new sight (a pending `NoAuthority`'s hold).
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// Who reports, and where.
pub struct ViewReport {
    /// A client of this replica's own cluster whose writes no fence guards (see the module).
    pub client: Client,
    pub scope: WatchScope,
    /// The member this replica runs in.
    pub member: String,
    /// The replica's Lease identity.
    pub identity: String,
    /// How long "no one with authority" must last before it is reported (`standing::settle`).
    pub hold: Duration,
    pub events: Events,
}

/// Runs until `shutdown`.
pub async fn run(
    report: ViewReport,
    mut sights: watch::Receiver<Vec<LeaseSight>>,
    shutdown: Shutdown,
) {
    let mut current: Option<Current> = None;
    // Per copy (namespace/name): the revision last written there.
    let mut written: BTreeMap<String, u64> = BTreeMap::new();
    let mut listed_at: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = shutdown.wait() => return,
            changed = sights.changed() => if changed.is_err() { return },
            // A standing pending its hold is looked at again without a new sight.
            _ = tokio::time::sleep(LOOK_EVERY) => {}
        }
        let looked = sights.borrow_and_update().clone();
        if looked.is_empty() {
            continue;
        }
        let revised = standing::fold(
            &mut current,
            &report.identity,
            &report.member,
            report.hold,
            &looked,
            Instant::now(),
            Time(Timestamp::now()),
        )
        .inspect(|c| tracing::info!(standing = c.reported.standing.name(), view = %c.view.message, "this replica's view of the leadership changed"))
        .is_some();
        let repair_due = listed_at.is_none_or(|at| at.elapsed() >= REPAIR_EVERY);
        if let Some(current) = current.as_ref().filter(|c| c.revision > 0) {
            if revised || repair_due {
                write_copies(&report, current, &mut written).await;
                listed_at = Some(Instant::now());
            }
        }
    }
}

/// Writes the current view to every copy in this member that lacks it: where this revision was
/// not written yet, and where the copy holds no view or this replica's own older one. A copy
/// another replica of this member wrote after our last change keeps that replica's view.
async fn write_copies(report: &ViewReport, current: &Current, written: &mut BTreeMap<String, u64>) {
    for api in report.scope.apis::<ObserverSet>(&report.client) {
        let sets = match api.list(&ListParams::default()).await {
            Ok(list) => list.items,
            Err(error) => {
                tracing::warn!(%error, "listing the ObserverSets for this replica's view failed; again in a few seconds");
                continue;
            }
        };
        for set in sets
            .iter()
            .filter(|s| s.spec.clusters.as_ref().is_some_and(|c| !c.is_empty()))
        {
            let key = format!("{}/{}", set.namespace().unwrap_or_default(), set.name_any());
            let stored = set.status.as_ref().and_then(|s| s.local_view.as_ref());
            let new_here = written.get(&key).is_none_or(|r| *r < current.revision);
            // A rollout in flight there: its writes carry preconditions, and a view written in
            // between would cost it a 409 and a pass; the view waits for the next pass after it
            // (never "no one with authority", which no leader's rollout reaches anyway).
            let rolling = set.status.as_ref().is_some_and(|s| s.rollout.is_some());
            if rolling && current.reported.standing != Standing::NoAuthority {
                continue;
            }
            let ours_or_none = stored.is_none_or(|v| v.replica == report.identity);
            let differs = stored.is_none_or(|v| !same_view(v, &current.view));
            if !(differs && (new_here || ours_or_none)) {
                written.insert(key, current.revision);
                continue;
            }
            if let Err(error) = apply(set, &report.client, &current.view).await {
                tracing::warn!(%error, observerset = %key, "writing this replica's view of the leadership failed; again in a few seconds");
                continue;
            }
            written.insert(key, current.revision);
            if let (Some(event), true) = (current.event, new_here) {
                let (type_, reason) = match event {
                    Announce::NoAuthority => (EventType::Warning, reason::NO_AUTHORITY),
                    Announce::AuthorityVisible => (EventType::Normal, reason::AUTHORITY_VISIBLE),
                };
                report
                    .events
                    .publish(
                        &set.object_ref(&()),
                        type_,
                        reason,
                        CAMPAIGN,
                        current.view.message.clone(),
                    )
                    .await;
            }
        }
    }
}

/// The same view but for its timestamp.
fn same_view(a: &LocalView, b: &LocalView) -> bool {
    a.replica == b.replica
        && a.standing == b.standing
        && a.leader == b.leader
        && a.leases
            .iter()
            .map(|l| (&l.member, l.reached))
            .eq(b.leases.iter().map(|l| (&l.member, l.reached)))
}

async fn apply(set: &ObserverSet, client: &Client, view: &LocalView) -> Result<(), kube::Error> {
    let api: Api<ObserverSet> =
        Api::namespaced(client.clone(), &set.namespace().unwrap_or_default());
    let body = writers::status_body(json!({ "localView": view }));
    api.patch_status(
        &set.name_any(),
        &PatchParams::apply(writers::LOCAL_VIEW).force(),
        &Patch::Apply(&body),
    )
    .await
    .map(|_| ())
}
