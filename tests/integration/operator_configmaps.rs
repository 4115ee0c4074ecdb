//! The operator writes one observer.ids ConfigMap per role for an ObserverSet, in the safe
//! format, restores them after an edit or a deletion by someone else, follows spec changes, and
//! keeps them (without owner references) when the ObserverSet is deleted with deletionPolicy
//! Retain. Runs in its own namespace, with no Kafka pods (a rollout has no pod to wait for).

use crate::support;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

use support::*;

const T: Duration = Duration::from_secs(30);

#[tokio::test]
async fn configmaps_written_restored_and_retained() {
    let Some(bed) = bed().await else {
        return;
    };
    bed.operator("up");
    let ns = bed.namespace("cm").await;
    let sets = bed.observer_sets(&ns);
    let cms = bed.config_maps(&ns);
    create_observer_set(&sets, bed.podless_observer_set("alpha", &[4, 5], &[])).await;

    // Written: both roles, ids one per line, a header naming the ObserverSet, labels, revision.
    for role in ["controller", "broker"] {
        let name = format!("alpha-observers-{role}");
        let cm = wait_for(T, &format!("ConfigMap {ns}/{name}"), || async {
            get_cm(&cms, &name).await
        })
        .await;
        let text = cm
            .data
            .as_ref()
            .and_then(|d| d.get("observer.ids"))
            .cloned()
            .unwrap_or_default();
        assert_eq!(listed_ids(&cm), Some(vec![4, 5]), "{name}:\n{text}");
        assert!(
            text.contains(&format!("ObserverSet {ns}/alpha")),
            "header must name the ObserverSet:\n{text}"
        );
        assert!(
            text.lines().any(|l| l.trim() == "4") && text.lines().any(|l| l.trim() == "5"),
            "one id per line:\n{text}"
        );
        let labels = cm.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels
                .get("kafkaobserver.io/observerset")
                .map(String::as_str),
            Some("alpha")
        );
        assert_eq!(
            labels.get("kafkaobserver.io/role").map(String::as_str),
            Some(role)
        );
        assert_eq!(
            labels
                .get("app.kubernetes.io/managed-by")
                .map(String::as_str),
            Some("kafka-observer-operator")
        );
        assert!(
            revision_of(&cm).is_some(),
            "{name} has no kafkaobserver.io/revision annotation"
        );
    }
    let status = wait_for(T, "alpha Ready", || async {
        let s = status_of(&sets, "alpha").await;
        (phase(&s) == "Ready").then_some(s)
    })
    .await;
    assert_eq!(
        status["desiredObservers"],
        json!([4, 5]),
        "status: {status}"
    );

    // Drift: an edit by someone else is reverted.
    let name = "alpha-observers-broker";
    let pp = PatchParams::default();
    cms.patch(
        name,
        &pp,
        &Patch::Merge(json!({"data": {"observer.ids": "# edited by hand\n5\n"}})),
    )
    .await
    .expect("edit");
    wait_for(T, "edited ConfigMap restored", || async {
        let cm = get_cm(&cms, name).await?;
        (listed_ids(&cm) == Some(vec![4, 5])).then_some(())
    })
    .await;

    // Drift: a deletion is reverted (the brokers must never lose their list).
    cms.delete("alpha-observers-controller", &DeleteParams::default())
        .await
        .expect("delete");
    wait_for(T, "deleted ConfigMap re-created", || async {
        let cm = get_cm(&cms, "alpha-observers-controller").await?;
        (listed_ids(&cm) == Some(vec![4, 5])).then_some(())
    })
    .await;

    // A spec change: promote 5 by hand; both lists follow, the revision moves on.
    let before = revision_of(&get_cm(&cms, name).await.unwrap()).unwrap();
    sets.patch(
        "alpha",
        &pp,
        &Patch::Merge(json!({"spec": {"promotion": {"promoted": [5]}}})),
    )
    .await
    .expect("promote 5");
    for role in ["controller", "broker"] {
        let n = format!("alpha-observers-{role}");
        let cm = wait_for(T, &format!("{n} without 5"), || async {
            let cm = get_cm(&cms, &n).await?;
            (listed_ids(&cm) == Some(vec![4])).then_some(cm)
        })
        .await;
        assert!(
            revision_of(&cm).unwrap() > before,
            "{n}: revision did not move past {before}"
        );
    }

    // Promote everything: an empty list is written only because the effective set is empty.
    sets.patch(
        "alpha",
        &pp,
        &Patch::Merge(json!({"spec": {"promotion": {"promoted": [4, 5]}}})),
    )
    .await
    .expect("promote all");
    let cm = wait_for(T, "empty effective set", || async {
        let cm = get_cm(&cms, name).await?;
        (listed_ids(&cm) == Some(vec![])).then_some(cm)
    })
    .await;
    let text = cm.data.unwrap()["observer.ids"].clone();
    assert!(
        text.contains("ObserverSet"),
        "an empty list still carries its header:\n{text}"
    );

    // Delete with the default policy (Retain): the lists stay, content unchanged, no owner refs
    // (the garbage collector must not delete them).
    sets.delete("alpha", &DeleteParams::default())
        .await
        .expect("delete ObserverSet");
    wait_for(T, "ObserverSet gone", || async {
        sets.get_opt("alpha").await.unwrap().is_none().then_some(())
    })
    .await;
    // No wait needed: the finalizer goes only after the owner references are dropped, so once
    // the set is gone the lists are final (and without owners the garbage collector has nothing
    // to delete).
    for role in ["controller", "broker"] {
        let n = format!("alpha-observers-{role}");
        let cm: ConfigMap = get_cm(&cms, &n)
            .await
            .unwrap_or_else(|| panic!("{n} deleted despite deletionPolicy Retain"));
        assert_eq!(
            listed_ids(&cm),
            Some(vec![]),
            "{n} content changed on deletion"
        );
        assert!(
            cm.metadata.owner_references.unwrap_or_default().is_empty(),
            "{n} still has owner references"
        );
    }
    bed.drop_namespace(&ns).await;
}

#[tokio::test]
async fn deletion_policy_delete_removes_the_configmaps() {
    let Some(bed) = bed().await else {
        return;
    };
    bed.operator("up");
    let ns = bed.namespace("del").await;
    let sets = bed.observer_sets(&ns);
    let cms = bed.config_maps(&ns);
    let mut body = bed.podless_observer_set("beta", &[3], &[]);
    body["spec"]["deletionPolicy"] = json!("Delete");
    create_observer_set(&sets, body).await;
    wait_for(T, "beta's ConfigMaps", || async {
        let a = get_cm(&cms, "beta-observers-controller").await?;
        let b = get_cm(&cms, "beta-observers-broker").await?;
        (listed_ids(&a) == Some(vec![3]) && listed_ids(&b) == Some(vec![3])).then_some(())
    })
    .await;
    sets.delete("beta", &DeleteParams::default())
        .await
        .expect("delete ObserverSet");
    wait_for(T, "beta's ConfigMaps deleted", || async {
        let a = get_cm(&cms, "beta-observers-controller").await;
        let b = get_cm(&cms, "beta-observers-broker").await;
        (a.is_none() && b.is_none()).then_some(())
    })
    .await;
    bed.drop_namespace(&ns).await;
}

/// The list write's precondition, on the real apiserver: a write decided on a version someone
/// wrote after (a former leader's late write, a hand edit in between) changes nothing and says
/// so; one decided on the current version lands.
#[tokio::test]
async fn a_list_write_decided_on_a_stale_read_never_lands() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kafka_observer_operator::k8s::config_map;
    use kafka_observer_operator::k8s::Error;
    use kube::api::PostParams;

    let Some(bed) = bed().await else {
        return;
    };
    let ns = bed.namespace("cm-precondition").await;
    let cms = bed.config_maps(&ns);
    let list = |ids: &str| -> ConfigMap {
        serde_json::from_value(json!({
            "metadata": {"name": "pre-observers-broker"},
            "data": {"observer.ids": ids}
        }))
        .unwrap()
    };
    let created = cms
        .create(&PostParams::default(), &list("4\n"))
        .await
        .expect("create the ConfigMap");
    let read_version = created.metadata.resource_version.clone();
    // Someone writes after our read: the successor's list.
    let successor = config_map::apply(&cms, &list("4\n5\n"), read_version.as_deref())
        .await
        .expect("a write on the current version lands");
    // Our late write, decided on the first read.
    let late = config_map::apply(&cms, &list("\n"), read_version.as_deref()).await;
    assert!(
        matches!(late, Err(Error::Superseded { .. })),
        "a write on a stale version was not refused: {late:?}"
    );
    let now = get_cm(&cms, "pre-observers-broker")
        .await
        .expect("the ConfigMap");
    assert_eq!(
        listed_ids(&now),
        Some(vec![4, 5]),
        "the late write changed the list"
    );
    assert_eq!(
        now.metadata.resource_version,
        successor.metadata.resource_version
    );
    bed.drop_namespace(&ns).await;
}
