//! Acceptance of the local test bed: the control plane, and the seven Kafka pods of
//! `examples/kafka/` (e2e/testbed/kafka.sh) on the bed's real node `koo-node`: Ready, with their
//! projected observer lists and their observer agents, and a killed broker restarted by the
//! kubelet. The real kubelet's ConfigMap projection timing is node_acceptance.rs's. Needs
//! `KOO_TESTBED` (see e2e/README.md); `KOO_TESTBED=off` skips. The tests share one bed, so they
//! run one at a time. A killed broker is always waited for until it is back (guard on drop).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Api;

use koo_testbed::{
    wait_until, wait_until_async, KafkaNode, TestBed, AGENT_PORT, BROKER_IDS, CONTROLLER_IDS,
    KAFKA_NAMESPACE,
};

/// Async-aware: each tokio test has its own runtime, and the guard lives across awaits.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The bed's zones (e2e/lib.sh ZONES): ordinal i of either StatefulSet runs on node
/// `koo-<ZONES[i]>`, whose pods are on 10.214.<i+1>.0/24 (e2e/testbed/node.sh).
const ZONES: [&str; 4] = ["a", "b", "c", "d"];

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

/// Node ids in an observer.ids text, read independently of the operator's parser: lines whose
/// trimmed text starts with '#' are comments, ids are separated by commas and/or whitespace.
fn ids_in(text: &str) -> Vec<i64> {
    let mut ids: Vec<i64> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .flat_map(|l| l.split([',', ' ', '\t']))
        .filter_map(|t| t.trim().parse().ok())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// `GET /observer-ids` of an agent over HTTP/1.0: the JSON body of a 200 answer.
fn agent_snapshot(addr: &str) -> Option<serde_json::Value> {
    let mut stream =
        TcpStream::connect_timeout(&addr.parse().ok()?, Duration::from_secs(3)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
    write!(stream, "GET /observer-ids HTTP/1.0\r\nHost: agent\r\n\r\n").ok()?;
    let mut out = String::new();
    stream.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    if !head.lines().next()?.contains(" 200 ") {
        return None;
    }
    serde_json::from_str(body.trim()).ok()
}

#[tokio::test]
async fn seven_kafka_pods_are_ready_on_the_real_node_with_projected_observer_ids_and_agents() {
    let Some(bed) = TestBed::require() else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let client = bed.client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), KAFKA_NAMESPACE);
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), KAFKA_NAMESPACE);
    for node in KafkaNode::all() {
        let pod = pods.get(&node.pod).await.unwrap();
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get("app.kubernetes.io/name").map(String::as_str),
            Some("kafka"),
            "{}",
            node.pod
        );
        assert_eq!(
            labels
                .get("app.kubernetes.io/component")
                .map(String::as_str),
            Some(node.role.as_str()),
            "{}",
            node.pod
        );
        // The node id the ObserverSet derives (nodeId.ordinalOffset) is the StatefulSet ordinal.
        assert_eq!(
            labels.get("apps.kubernetes.io/pod-index"),
            Some(&node.ordinal.to_string()),
            "{}",
            node.pod
        );
        let status = pod.status.clone().unwrap_or_default();
        assert_eq!(status.phase.as_deref(), Some("Running"), "{}", node.pod);
        assert_eq!(ready(&pod), Some(true), "{} Ready", node.pod);
        let ip = status.pod_ip.clone().unwrap_or_default();
        let zone = node.ordinal as usize % ZONES.len();
        let pod_network = format!("10.214.{}.", zone + 1);
        assert!(ip.starts_with(&pod_network), "{}: pod IP {ip:?}", node.pod);
        assert_eq!(
            node.pod_ip(&client).await.unwrap().to_string(),
            ip,
            "{}",
            node.pod
        );
        let uid = pod.metadata.uid.clone().unwrap();
        let spec = pod.spec.clone().unwrap();
        let bed_node = format!("koo-{}", ZONES[zone]);
        assert_eq!(
            spec.node_name.as_deref(),
            Some(bed_node.as_str()),
            "{}: the pod runs in its zone",
            node.pod
        );

        // The Kafka container and the observer agent as a native sidecar.
        let names: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["kafka"], "{}", node.pod);
        let init = spec.init_containers.clone().unwrap_or_default();
        let agent = init
            .iter()
            .find(|c| c.name == "observer-agent")
            .unwrap_or_else(|| panic!("{}: no observer-agent", node.pod));
        assert_eq!(agent.restart_policy.as_deref(), Some("Always"), "sidecar");
        let kafka = &spec.containers[0];
        let env = kafka.env.clone().unwrap_or_default();
        let var = |name: &str| {
            env.iter()
                .find(|e| e.name == name)
                .and_then(|e| e.value.clone())
        };
        assert_eq!(
            var("KAFKA_OBSERVER_IDS_FILE").as_deref(),
            Some("/etc/kafka/observer/observer.ids"),
            "{}",
            node.pod
        );
        let offset: i32 = var("KAFKA_NODE_ID_OFFSET").unwrap().parse().unwrap();
        assert_eq!(offset + node.ordinal, node.id, "{}: node id", node.pod);
        for container in [kafka, agent] {
            let mounts = container.volume_mounts.clone().unwrap_or_default();
            assert!(
                mounts
                    .iter()
                    .any(|m| m.name == "observer-ids" && m.mount_path == "/etc/kafka/observer"),
                "{}/{}: {mounts:?}",
                node.pod,
                container.name
            );
        }
        let cm_name = format!("kafka-observers-{}", node.role.as_str());
        let volume = spec
            .volumes
            .unwrap_or_default()
            .into_iter()
            .find(|v| v.name == "observer-ids")
            .unwrap();
        assert_eq!(volume.config_map.unwrap().name, cm_name);
        assert!(
            bed.kafka_pid(node.id).is_some(),
            "{}: no running JVM (kafka.sh jvm-pid)",
            node.pod
        );

        // The projected file: the kubelet's layout, in the pod's own volume directory, and the
        // ConfigMap's content (after at most one periodic pod sync, 1m + jitter, if the ConfigMap
        // was changed without a nudge just now).
        let dir = bed.node_configmap_volume_dir(&bed_node, &uid, "observer-ids");
        assert_eq!(
            bed.observer_ids_file(node.id).unwrap(),
            dir.join("observer.ids")
        );
        assert_eq!(
            std::fs::read_link(dir.join("observer.ids")).unwrap(),
            Path::new("..data/observer.ids")
        );
        let version = std::fs::read_link(dir.join("..data")).unwrap();
        assert!(version.to_string_lossy().starts_with("..20"), "{version:?}");
        // Compared with the ConfigMap as it is at each poll: drills may change it meanwhile.
        let file = dir.join("observer.ids");
        let what = format!("{} to equal ConfigMap {cm_name}", file.display());
        let text = wait_until_async(
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
                    (got == want).then_some(got)
                }
            },
        )
        .await
        .unwrap();

        // The pod's agent, on the pod IP, reports what the projected file lists.
        let addr = node.agent_address(&client).await.unwrap();
        assert_eq!(addr, format!("{ip}:{AGENT_PORT}"));
        let want = serde_json::json!(ids_in(&text));
        let snapshot = wait_until(
            &format!("agent of {} at {addr} reporting {want}", node.pod),
            Duration::from_secs(10),
            Duration::from_millis(200),
            || agent_snapshot(&addr).filter(|s| s["ids"] == want),
        )
        .unwrap();
        assert_eq!(snapshot["source"], "file", "{}: {snapshot}", node.pod);
    }
    let all = pods.list(&Default::default()).await.unwrap();
    assert_eq!(all.items.len(), CONTROLLER_IDS.len() + BROKER_IDS.len());
}

#[tokio::test]
async fn a_killed_broker_pod_is_not_ready_within_5s_and_ready_again_after_the_kubelet_restarts_it()
{
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
    let pid_before = bed.kafka_pid(node.id).expect("the broker's JVM runs");

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

    // Nobody starts it: the kubelet restarts the container in the same pod.
    let after = wait_until_async(
        "pod Ready again after the kubelet restarted the container",
        Duration::from_secs(120),
        poll,
        pod_ready(true),
    )
    .await
    .unwrap();
    println!(
        "pod {} Ready again {:?} after the kill",
        node.pod,
        killed_at.elapsed()
    );
    assert_eq!(
        restarts(&after, "kafka"),
        restarts(&before, "kafka") + 1,
        "one restart counted"
    );
    assert_eq!(after.metadata.uid, before.metadata.uid, "the same pod");
    assert_eq!(
        after.status.as_ref().and_then(|s| s.pod_ip.clone()),
        before.status.as_ref().and_then(|s| s.pod_ip.clone()),
        "the same pod IP"
    );
    let pid_after = bed.kafka_pid(node.id).expect("the restarted JVM runs");
    assert_ne!(pid_after, pid_before, "a new JVM");
    // Already back: the guard returns at once.
    guard.start().unwrap();
}
