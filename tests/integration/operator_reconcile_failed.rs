//! A reconcile that fails on the Kubernetes API is visible where a user looks: a Warning Event
//! `ReconcileFailed` on the ObserverSet naming what failed, and it recovers by itself once the
//! cause is gone. The cause here is one real clusters have: a ResourceQuota that allows no more
//! ConfigMaps in the namespace, so the apiserver refuses the observer list.
//!
//! Owns its state: a fresh namespace with the quota and a pod-less ObserverSet (no pod to
//! wait for), deleted at the end. Uses the bed's shared operator.

use crate::support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, ResourceQuota};
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::Api;
use serde_json::json;

use support::*;

const T: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_refused_configmap_write_is_a_warning_event_and_heals() {
    let Some(bed) = bed().await else {
        return;
    };
    bed.operator("up");
    let ns = bed.namespace("quota").await;
    let quotas: Api<ResourceQuota> = Api::namespaced(bed.client.clone(), &ns);
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "no-configmaps"},
        "spec": {"hard": {"count/configmaps": "0"}}
    }))
    .unwrap();
    quotas
        .create(&PostParams::default(), &quota)
        .await
        .expect("create the ResourceQuota");
    // The quota admission refuses with "exceeded quota" once the quota controller has counted.
    wait_for(T, "the quota's status", || async {
        let q = quotas.get("no-configmaps").await.ok()?;
        q.status.and_then(|s| s.hard).filter(|h| !h.is_empty())
    })
    .await;

    let sets = bed.observer_sets(&ns);
    let cms: Api<ConfigMap> = bed.config_maps(&ns);
    create_observer_set(&sets, bed.podless_observer_set("quota", &[4], &[])).await;

    let events: Api<Event> = Api::namespaced(bed.client.clone(), &ns);
    let note = wait_for(T, "a ReconcileFailed Event on the ObserverSet", || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find_map(|e| {
            let about_it = e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("quota")
                && e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("ObserverSet");
            (about_it
                && e.reason.as_deref() == Some("ReconcileFailed")
                && e.type_.as_deref() == Some("Warning"))
            .then(|| e.note.unwrap_or_default())
        })
    })
    .await;
    assert!(
        note.contains("quota-observers-controller") && note.contains("exceeded quota"),
        "the Event must say which write failed and why: {note}"
    );
    assert!(
        get_cm(&cms, "quota-observers-controller").await.is_none()
            && get_cm(&cms, "quota-observers-broker").await.is_none(),
        "nothing written while the quota refuses"
    );

    // The cause removed: the retry writes both lists, controllers first as always.
    quotas
        .delete("no-configmaps", &DeleteParams::default())
        .await
        .expect("delete the ResourceQuota");
    for role in ["controller", "broker"] {
        let name = format!("quota-observers-{role}");
        let cm = wait_for(
            T,
            &format!("ConfigMap {ns}/{name} after the quota is gone"),
            || async { get_cm(&cms, &name).await },
        )
        .await;
        assert_eq!(listed_ids(&cm), Some(vec![4]), "{name}");
    }
    wait_for(T, "phase Ready", || async {
        (phase(&status_of(&sets, "quota").await) == "Ready").then_some(())
    })
    .await;
    bed.drop_namespace(&ns).await;
}
