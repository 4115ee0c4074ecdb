//! Acceptance of the local test bed (issue 2): control plane, the seven Kafka pods and the
//! kubelet stand-in's status, readiness and volume timing. Needs `KOO_TESTBED` (see
//! e2e/README.md); `KOO_TESTBED=off` skips. The tests share one bed, so they run one at a time.
//! Broker kills go through `e2e/testbed/kafka.sh` and are always undone (restart on drop).

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Patch, PatchParams};
use kube::Api;
use serde_json::json;

use koo_testbed::{
    wait_until_async, KafkaNode, TestBed, BROKER_IDS, CONTROLLER_IDS, KAFKA_NAMESPACE,
};

/// Async-aware: each tokio test has its own runtime, and the guard lives across awaits.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const PROBE_NAMESPACE: &str = "koo-testbed";
const PROBE_POD: &str = "testbed-probe";
const PROBE_CONFIGMAP: &str = "testbed-probe";

/// The default of `NAME="${NAME:-value}"` in e2e/versions.env.
fn pinned(bed: &TestBed, name: &str) -> String {
    let text = std::fs::read_to_string(bed.repo_root().join("e2e/versions.env")).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{name}=")))
        .unwrap_or_else(|| panic!("{name} in e2e/versions.env"));
    let start = line.find(":-").expect("a ${NAME:-default} line") + 2;
    line[start..].trim_end_matches("}\"").to_string()
}

#[test]
fn control_plane_is_ready_and_runs_the_pinned_versions() {
    let Some(bed) = TestBed::require() else {
        return;
    };
    let _serial = SERIAL.blocking_lock();
    let readyz = bed
        .run_tool("kubectl", &["get", "--raw", "/readyz"])
        .unwrap();
    assert_eq!(readyz.trim(), "ok");
    let version: serde_json::Value =
        serde_json::from_str(&bed.run_tool("kubectl", &["version", "-o", "json"]).unwrap())
            .unwrap();
    let k8s = pinned(&bed, "K8S_VERSION");
    assert_eq!(
        version["serverVersion"]["gitVersion"],
        k8s.as_str(),
        "{version}"
    );
    assert_eq!(
        version["clientVersion"]["gitVersion"],
        k8s.as_str(),
        "{version}"
    );
    let helm = bed.run_tool("helm", &["version", "--short"]).unwrap();
    assert!(
        helm.starts_with(&pinned(&bed, "HELM_VERSION")),
        "helm version --short: {helm}"
    );
}

fn ready(pod: &Pod) -> Option<bool> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let ready = conditions.iter().find(|c| c.type_ == "Ready")?;
    Some(ready.status == "True")
}

fn restarts(pod: &Pod, container: &str) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == container))
        .map(|c| c.restart_count)
        .unwrap_or(-1)
}

#[tokio::test]
async fn seven_kafka_pods_run_on_their_loopback_addresses_with_projected_observer_ids() {
    let Some(bed) = TestBed::require() else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let client = bed.client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), KAFKA_NAMESPACE);
    let configmaps: Api<ConfigMap> = Api::namespaced(client, KAFKA_NAMESPACE);
    for node in KafkaNode::all() {
        let pod = pods.get(&node.pod).await.unwrap();
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get("kafkaobserver.io/node-id"),
            Some(&node.id.to_string())
        );
        assert_eq!(
            labels
                .get("app.kubernetes.io/component")
                .map(String::as_str),
            Some(node.role.as_str())
        );
        let status = pod.status.clone().unwrap_or_default();
        assert_eq!(status.phase.as_deref(), Some("Running"), "{}", node.pod);
        assert_eq!(
            status.pod_ip,
            Some(node.address.to_string()),
            "{}",
            node.pod
        );
        let spec = pod.spec.clone().unwrap();
        let names: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["kafka", "observer-agent"]);
        let kafka_env = spec.containers[0].env.clone().unwrap_or_default();
        assert!(kafka_env.iter().any(|e| e.name == "KAFKA_OBSERVER_IDS_FILE"
            && e.value.as_deref() == Some("/etc/kafka/observer/observer.ids")));
        let cm_name = format!("kafka-observers-{}", node.role.as_str());
        let volume = spec
            .volumes
            .unwrap_or_default()
            .into_iter()
            .find(|v| v.name == "observer-ids")
            .unwrap();
        assert_eq!(volume.config_map.unwrap().name, cm_name);

        // The projected file: kubelet layout, and the ConfigMap's content (after at most one
        // periodic sync, if the ConfigMap was changed without a nudge just now).
        let dir = bed.pod_volume_dir(KAFKA_NAMESPACE, &node.pod, "observer-ids");
        assert_eq!(
            std::fs::read_link(dir.join("observer.ids")).unwrap(),
            Path::new("..data/observer.ids")
        );
        let version = std::fs::read_link(dir.join("..data")).unwrap();
        assert!(version.to_string_lossy().starts_with("..20"), "{version:?}");
        // Compared with the ConfigMap as it is at each poll: drills may change it meanwhile.
        let file = dir.join("observer.ids");
        let what = format!("{} to equal ConfigMap {cm_name}", file.display());
        wait_until_async(
            &what,
            Duration::from_secs(100),
            Duration::from_millis(500),
            || {
                let (configmaps, cm_name, file) =
                    (configmaps.clone(), cm_name.clone(), file.clone());
                async move {
                    let cm = configmaps.get(&cm_name).await.ok()?;
                    let want = cm.data?.get("observer.ids").cloned()?;
                    let got = std::fs::read_to_string(&file).ok()?;
                    (got == want).then_some(())
                }
            },
        )
        .await
        .unwrap();
    }
    let all = pods.list(&Default::default()).await.unwrap();
    assert_eq!(all.items.len(), CONTROLLER_IDS.len() + BROKER_IDS.len());
}

#[tokio::test]
async fn a_killed_broker_pod_is_not_ready_within_5s_and_ready_again_after_restart() {
    let Some(bed) = TestBed::require() else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let node = KafkaNode::get(3).unwrap();
    let pods: Api<Pod> = Api::namespaced(bed.client().await.unwrap(), KAFKA_NAMESPACE);
    let poll = Duration::from_millis(100);
    let pod_ready = |want: bool| {
        let pods = pods.clone();
        let name = node.pod.clone();
        move || {
            let pods = pods.clone();
            let name = name.clone();
            async move {
                let pod = pods.get(&name).await.ok()?;
                (ready(&pod) == Some(want)).then_some(pod)
            }
        }
    };
    let before = wait_until_async(
        "broker pod Ready before the kill",
        Duration::from_secs(120),
        poll,
        pod_ready(true),
    )
    .await
    .unwrap();

    let killed_at = Instant::now();
    let guard = bed.kill_node(node.id).unwrap();
    wait_until_async(
        "pod NotReady after kill -9",
        Duration::from_secs(5),
        poll,
        pod_ready(false),
    )
    .await
    .unwrap();
    println!(
        "pod {} NotReady {:?} after kill -9 of node {}",
        node.pod,
        killed_at.elapsed(),
        node.id
    );

    guard.start().unwrap();
    let after = wait_until_async(
        "pod Ready after restart",
        Duration::from_secs(60),
        poll,
        pod_ready(true),
    )
    .await
    .unwrap();
    assert_eq!(
        restarts(&after, "kafka"),
        restarts(&before, "kafka") + 1,
        "one restart counted"
    );
}

/// The stand-in's `--sync-period` and `--jitter`, as recorded by e2e/testbed/standin.sh.
fn sync_settings(bed: &TestBed) -> (Duration, f64) {
    let args = std::fs::read_to_string(bed.dir().join("standin/args")).unwrap();
    let args: Vec<&str> = args.lines().collect();
    let value = |flag: &str| args[args.iter().position(|a| *a == flag).unwrap() + 1];
    let period = value("--sync-period");
    let period = match period.strip_suffix("ms") {
        Some(ms) => Duration::from_millis(ms.parse().unwrap()),
        None => match period.strip_suffix('m') {
            Some(m) => Duration::from_secs(60 * m.parse::<u64>().unwrap()),
            None => Duration::from_secs_f64(period.trim_end_matches('s').parse().unwrap()),
        },
    };
    (period, value("--jitter").parse().unwrap())
}

#[tokio::test]
async fn configmap_changes_reach_the_pod_at_once_with_an_annotation_and_with_the_periodic_sync_without(
) {
    let Some(bed) = TestBed::require() else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let client = bed.client().await.unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), PROBE_NAMESPACE);
    let pods: Api<Pod> = Api::namespaced(client, PROBE_NAMESPACE);
    let file = bed
        .pod_volume_dir(PROBE_NAMESPACE, PROBE_POD, "probe")
        .join("value");
    let params = PatchParams::apply("koo-testbed-acceptance").force();
    let nonce = |tag: &str| format!("{tag}-{}-{:?}", std::process::id(), Instant::now());
    let set_value = |value: String| {
        let configmaps = configmaps.clone();
        let params = params.clone();
        async move {
            let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": PROBE_CONFIGMAP}, "data": {"value": value}});
            configmaps
                .patch(PROBE_CONFIGMAP, &params, &Patch::Apply(cm))
                .await
                .unwrap();
        }
    };
    let shows = |value: String| {
        let file = file.clone();
        move || {
            let got = std::fs::read_to_string(&file).ok();
            let value = value.clone();
            async move { (got.as_deref() == Some(value.as_str())).then_some(Instant::now()) }
        }
    };

    // ConfigMap update + pod annotation: the pod syncs at once.
    let first = nonce("annotated");
    let started = Instant::now();
    set_value(first.clone()).await;
    let annotation =
        json!({"metadata": {"annotations": {"testbed.kafkaobserver.io/nudge": first}}});
    pods.patch(
        PROBE_POD,
        &PatchParams::default(),
        &Patch::Merge(annotation),
    )
    .await
    .unwrap();
    let seen = wait_until_async(
        "annotated update in the volume",
        Duration::from_secs(2),
        Duration::from_millis(20),
        shows(first.clone()),
    )
    .await
    .unwrap();
    println!(
        "ConfigMap update + annotation: new content after {:?}",
        seen - started
    );

    // Without the annotation: not before the next periodic sync, at the latest after period * (1 + jitter).
    let (period, jitter) = sync_settings(&bed);
    let second = nonce("periodic");
    set_value(second.clone()).await;
    let earliest = seen + period - Duration::from_millis(500);
    let latest = seen + period.mul_f64(1.0 + jitter) + Duration::from_secs(3);
    let arrived = wait_until_async(
        "periodic sync",
        latest - Instant::now(),
        Duration::from_millis(100),
        shows(second),
    )
    .await
    .unwrap();
    assert!(
        arrived >= earliest,
        "arrived {:?} after the last sync, before the sync period {period:?}",
        arrived - seen
    );
    println!("ConfigMap update without annotation: arrived {:?} after the last sync (period {period:?}, jitter {jitter})", arrived - seen);
}

#[tokio::test]
async fn a_deleted_configmap_leaves_the_last_projected_content_in_place() {
    let Some(bed) = TestBed::require() else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let client = bed.client().await.unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), PROBE_NAMESPACE);
    let pods: Api<Pod> = Api::namespaced(client, PROBE_NAMESPACE);
    let file = bed
        .pod_volume_dir(PROBE_NAMESPACE, PROBE_POD, "probe")
        .join("value");
    let params = PatchParams::apply("koo-testbed-acceptance").force();
    let nudge = |value: String| {
        let pods = pods.clone();
        async move {
            let patch =
                json!({"metadata": {"annotations": {"testbed.kafkaobserver.io/nudge": value}}});
            pods.patch(PROBE_POD, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .unwrap();
        }
    };
    let set_and_see = |value: String| {
        let (configmaps, params, file) = (configmaps.clone(), params.clone(), file.clone());
        async move {
            let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": PROBE_CONFIGMAP}, "data": {"value": value}});
            configmaps
                .patch(PROBE_CONFIGMAP, &params, &Patch::Apply(cm))
                .await
                .unwrap();
            nudge(format!("set-{value}")).await;
            wait_until_async(
                "the new value",
                Duration::from_secs(2),
                Duration::from_millis(20),
                || {
                    let ok = std::fs::read_to_string(&file).ok().as_deref() == Some(value.as_str());
                    async move { ok.then_some(()) }
                },
            )
            .await
            .unwrap();
        }
    };
    let last = format!("last-{}", std::process::id());
    set_and_see(last.clone()).await;

    configmaps
        .delete(PROBE_CONFIGMAP, &Default::default())
        .await
        .unwrap();
    nudge(format!("deleted-{}", std::process::id())).await;
    // The nudge makes the stand-in sync at once; give it ample time to (wrongly) act.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        last,
        "content kept after the ConfigMap was deleted"
    );
    let pod = pods.get(PROBE_POD).await.unwrap();
    assert_eq!(
        pod.status.and_then(|s| s.phase).as_deref(),
        Some("Running"),
        "the pod keeps running"
    );

    // Re-created: the volume follows again.
    set_and_see(format!("restored-{}", std::process::id())).await;
}
