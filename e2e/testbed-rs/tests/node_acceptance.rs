//! Acceptance of the bed's real nodes `koo-a`..`koo-d`, one per zone (e2e/testbed/node.sh): the
//! kubelet, containerd, runc, kube-scheduler, kube-proxy and CoreDNS run what users deploy. Each test owns a pod of its
//! own in namespace `koo-node-test` (scheduled, not bound by name) and deletes it at the end.
//! Needs `KOO_TESTBED` (see e2e/README.md); `KOO_TESTBED=off` skips.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, Service};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::json;

use koo_testbed::{wait_until_async, TestBed};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const NAMESPACE: &str = "koo-node-test";
/// The bed's nodes, one per zone, with their addresses (10.214.0.<10+i>) and pod subnets
/// (10.214.<i>.0/24), i = the zone's position.
const NODES: [(&str, &str, &str); 4] = [
    ("koo-a", "10.214.0.11", "10.214.1."),
    ("koo-b", "10.214.0.12", "10.214.2."),
    ("koo-c", "10.214.0.13", "10.214.3."),
    ("koo-d", "10.214.0.14", "10.214.4."),
];
const FIELD_MANAGER: &str = "koo-node-acceptance";

/// A pod of one test: the operator image's `agent` (an HTTP server on :9180 serving the
/// projected ConfigMap), its ConfigMap and a Service in front of it. Deleted on drop.
struct Probe {
    name: String,
    /// The bed node the scheduler placed it on.
    node: String,
    uid: String,
    pods: Api<Pod>,
    configmaps: Api<ConfigMap>,
    services: Api<Service>,
}

impl Probe {
    async fn create(client: kube::Client, name: &str) -> Probe {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
        namespaces
            .patch(
                NAMESPACE,
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Apply(ns),
            )
            .await
            .unwrap();
        let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
        let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
        let services: Api<Service> = Api::namespaced(client, NAMESPACE);
        // A leftover of an interrupted run goes first: the test owns this name.
        let _ = pods
            .delete(name, &DeleteParams::default().grace_period(0))
            .await;
        wait_until_async(
            "the previous probe pod gone",
            Duration::from_secs(60),
            Duration::from_millis(200),
            || {
                let pods = pods.clone();
                let name = name.to_string();
                async move { pods.get_opt(&name).await.ok()?.is_none().then_some(()) }
            },
        )
        .await
        .unwrap();
        set_value(&configmaps, name, "initial").await;
        let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"koo.io/probe": name},
                     "ports": [{"port": 9180, "targetPort": 9180, "protocol": "TCP"}]}});
        services
            .patch(
                name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(service),
            )
            .await
            .unwrap();
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"koo.io/probe": name}},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{
                    "name": "agent",
                    "image": "kafka-observer-operator:dev",
                    "imagePullPolicy": "Never",
                    "args": ["agent", "--dir", "/etc/probe", "--key", "value", "--listen", "0.0.0.0:9180"],
                    "ports": [{"containerPort": 9180}],
                    "volumeMounts": [{"name": "probe", "mountPath": "/etc/probe", "readOnly": true}],
                    "securityContext": {"readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false}
                }],
                "volumes": [{"name": "probe", "configMap": {"name": name}}]
            }
        }))
        .unwrap();
        let created = pods.create(&PostParams::default(), &pod).await.unwrap();
        let uid = created.metadata.uid.unwrap();
        let running = wait_until_async(
            "the probe pod Running and Ready",
            Duration::from_secs(120),
            Duration::from_millis(200),
            || {
                let pods = pods.clone();
                let name = name.to_string();
                async move {
                    let pod = pods.get(&name).await.ok()?;
                    let status = pod.status.clone()?;
                    let ready = status
                        .conditions?
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True");
                    (status.phase.as_deref() == Some("Running") && ready).then_some(pod)
                }
            },
        )
        .await
        .unwrap();
        assert_eq!(
            running.metadata.uid.as_deref(),
            Some(uid.as_str()),
            "same pod"
        );
        Probe {
            name: name.to_string(),
            node: running.spec.as_ref().unwrap().node_name.clone().unwrap(),
            uid,
            pods,
            configmaps,
            services,
        }
    }

    /// `kubectl exec` in the pod: the command's output.
    fn exec(&self, bed: &TestBed, command: &[&str]) -> String {
        let mut args = vec!["-n", NAMESPACE, "exec", &self.name, "--"];
        args.extend_from_slice(command);
        kubectl(bed, &args)
    }

    async fn get(&self) -> Pod {
        self.pods.get(&self.name).await.unwrap()
    }

    async fn nudge(&self, value: &str) {
        let patch = json!({"metadata": {"annotations": {"testbed.kafkaobserver.io/nudge": value}}});
        self.pods
            .patch(&self.name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap();
    }

    async fn delete(self) {
        let dp = DeleteParams::default().grace_period(0);
        let _ = self.pods.delete(&self.name, &dp).await;
        let _ = self.services.delete(&self.name, &dp).await;
        let _ = self.configmaps.delete(&self.name, &dp).await;
    }
}

async fn set_value(configmaps: &Api<ConfigMap>, name: &str, value: &str) {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name}, "data": {"value": value}});
    configmaps
        .patch(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(cm),
        )
        .await
        .unwrap();
}

/// `GET path` over plain HTTP/1.0; the status line and body.
fn http_get(addr: &str, path: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect_timeout(&addr.parse().unwrap(), Duration::from_secs(3))?;
    stream.set_read_timeout(Some(Duration::from_secs(3)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: probe\r\n\r\n")?;
    let mut out = String::new();
    stream.read_to_string(&mut out)?;
    Ok(out)
}

fn is_ok(response: &str) -> bool {
    response.starts_with("HTTP/1.") && response.lines().next().is_some_and(|l| l.contains(" 200 "))
}

fn kubectl(bed: &TestBed, args: &[&str]) -> String {
    bed.run_tool("kubectl", args).unwrap()
}

struct KillOnDrop(Child);
impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn pinned_k8s(bed: &TestBed) -> String {
    let text = std::fs::read_to_string(bed.repo_root().join("e2e/versions.env")).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("K8S_VERSION="))
        .unwrap();
    let start = line.find(":-").unwrap() + 2;
    line[start..].trim_end_matches("}\"").to_string()
}

#[tokio::test]
async fn the_real_node_is_ready_schedules_pods_and_serves_logs_exec_port_forward_dns_and_services()
{
    let Some(bed) = TestBed::require() else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let client = bed.client().await.unwrap();

    for (name, ip, _) in NODES {
        let node = Api::<Node>::all(client.clone()).get(name).await.unwrap();
        let zone = node
            .metadata
            .labels
            .clone()
            .unwrap_or_default()
            .get("topology.kubernetes.io/zone")
            .cloned();
        assert_eq!(
            zone.as_deref(),
            name.strip_prefix("koo-"),
            "{name}'s zone label"
        );
        let status = node.status.unwrap();
        let ready = status.conditions.unwrap_or_default();
        assert!(
            ready
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True"),
            "{name}: {ready:?}"
        );
        let addresses = status.addresses.unwrap_or_default();
        assert!(
            addresses
                .iter()
                .any(|a| a.type_ == "InternalIP" && a.address == ip),
            "{name}: {addresses:?}"
        );
        let info = status.node_info.unwrap();
        assert_eq!(info.kubelet_version, pinned_k8s(&bed));
        assert!(
            info.container_runtime_version.starts_with("containerd://"),
            "{}",
            info.container_runtime_version
        );
    }

    let probe = Probe::create(client.clone(), "probe-node").await;
    let pod = probe.get().await;
    let placed = pod.spec.as_ref().unwrap().node_name.clone();
    let (_, _, subnet) = NODES
        .iter()
        .find(|(name, _, _)| Some(*name) == placed.as_deref())
        .unwrap_or_else(|| panic!("placed by the scheduler on a bed node, not {placed:?}"));
    let pod_ip = pod.status.unwrap().pod_ip.unwrap();
    assert!(pod_ip.starts_with(subnet), "pod IP {pod_ip} on {placed:?}");

    // exec: the ServiceAccount token is mounted.
    let ns = probe.exec(
        &bed,
        &[
            "cat",
            "/var/run/secrets/kubernetes.io/serviceaccount/namespace",
        ],
    );
    assert_eq!(ns, NAMESPACE);
    // Cluster DNS: a Service name and the apiserver's Service resolve inside the pod.
    let svc = probe.services.get(&probe.name).await.unwrap();
    let cluster_ip = svc.spec.unwrap().cluster_ip.unwrap();
    let fqdn = format!("{}.{NAMESPACE}.svc.cluster.local", probe.name);
    let hosts = probe.exec(&bed, &["getent", "hosts", &fqdn]);
    assert!(
        hosts.starts_with(&cluster_ip),
        "getent hosts {fqdn}: {hosts}"
    );
    let hosts = probe.exec(&bed, &["getent", "hosts", "kubernetes.default"]);
    assert!(
        hosts.starts_with("10.96.0.1 "),
        "kubernetes.default: {hosts}"
    );

    // The Service through kube-proxy, from the machine.
    // kube-proxy writes the new Service's rules within its sync period (the bed routes the
    // service range to koo0, so nothing leaves the machine meanwhile).
    let service_addr = format!("{cluster_ip}:9180");
    let via_service = wait_until_async(
        "the Service answering through kube-proxy",
        Duration::from_secs(30),
        Duration::from_millis(200),
        || {
            let addr = service_addr.clone();
            async move { http_get(&addr, "/observer-ids").ok().filter(|r| is_ok(r)) }
        },
    )
    .await
    .unwrap();
    assert!(is_ok(&via_service), "{via_service}");

    // port-forward.
    let child = Command::new(bed.bin_dir().join("kubectl"))
        .args([
            "-n",
            NAMESPACE,
            "port-forward",
            "--address",
            "127.0.0.1",
            &format!("pod/{}", probe.name),
            "19180:9180",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _forward = KillOnDrop(child);
    let forwarded = wait_until_async(
        "port-forward answering",
        Duration::from_secs(20),
        Duration::from_millis(200),
        || async { http_get("127.0.0.1:19180", "/observer-ids").ok() },
    )
    .await
    .unwrap();
    assert!(is_ok(&forwarded), "{forwarded}");

    // logs.
    let logs = kubectl(&bed, &["-n", NAMESPACE, "logs", &probe.name]);
    assert!(!logs.trim().is_empty(), "kubectl logs is empty");
    probe.delete().await;
}

/// `count` ConfigMap writes, each followed after `settle` by the pod annotation; for each, the
/// time until `file` shows the new value, from the write (no settle) or from the annotation.
async fn nudge_latencies(
    probe: &Probe,
    file: &Path,
    tag: &str,
    count: usize,
    settle: Duration,
) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(count);
    for i in 0..count {
        let value = format!("{tag}-{}-{i}", std::process::id());
        let written = Instant::now();
        set_value(&probe.configmaps, &probe.name, &value).await;
        tokio::time::sleep(settle).await;
        let nudged = Instant::now();
        probe.nudge(&value).await;
        let seen = wait_until_async(
            "annotated update in the volume",
            Duration::from_secs(10),
            Duration::from_millis(10),
            || {
                let shown = std::fs::read_to_string(file).ok().as_deref() == Some(value.as_str());
                async move { shown.then(Instant::now) }
            },
        )
        .await
        .unwrap();
        samples.push(seen - if settle.is_zero() { written } else { nudged });
        FROM_WRITE.with(|w| w.borrow_mut().push(seen - written));
    }
    samples
}

thread_local! {
    /// The last [`nudge_latencies`] samples measured from the ConfigMap write (the sweep below).
    static FROM_WRITE: std::cell::RefCell<Vec<Duration>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn p50_max(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    (samples[samples.len() / 2], *samples.last().unwrap())
}

#[tokio::test]
async fn configmap_changes_reach_the_container_at_once_with_a_pod_annotation_and_on_the_kubelet_sync_without(
) {
    let Some(bed) = TestBed::require() else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let client = bed.client().await.unwrap();
    let probe = Probe::create(client, "probe-volume").await;
    let file = bed
        .node_configmap_volume_dir(&probe.node, &probe.uid, "probe")
        .join("value");
    let shows = |value: String| {
        let file = file.clone();
        move || {
            let got = std::fs::read_to_string(&file).ok();
            let value = value.clone();
            async move { (got.as_deref() == Some(value.as_str())).then_some(Instant::now()) }
        }
    };
    let run = std::process::id();

    // Without an annotation the change waits for the kubelet's periodic pod sync (syncFrequency
    // 1m, +up to 50 % jitter). The pod started just now and its last syncs
    // (its start) are at least 3 s old, so the next periodic sync is at least 50 s away. First,
    // before any nudge.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let value = format!("periodic-{run}");
    let changed = Instant::now();
    set_value(&probe.configmaps, &probe.name, &value).await;
    let arrived = wait_until_async(
        "the kubelet's periodic sync",
        Duration::from_secs(95),
        Duration::from_millis(100),
        shows(value),
    )
    .await
    .unwrap();
    assert!(
        arrived - changed >= Duration::from_secs(10),
        "an unannotated change arrived {:?} after the write: the kubelet does not sync on ConfigMap events",
        arrived - changed
    );
    println!(
        "NODE configmap write without annotation -> file: {:?} (the kubelet's periodic sync)",
        arrived - changed
    );

    // ConfigMap update, then at once the pod annotation (what the operator does), 20 times.
    // The kubelet reads ConfigMaps from its own watch: a pod sync that runs before the
    // ConfigMap's watch event arrived projects the old content; the new one came about a second
    // later in every measurement here (a follow-up pod sync).
    let at_once = nudge_latencies(&probe, &file, "annotated", 20, Duration::ZERO).await;
    // The host path is the container's mount: the container reads the same content.
    let inside = probe.exec(&bed, &["cat", "/etc/probe/value"]);
    assert_eq!(inside, format!("annotated-{run}-19"));
    // The annotation 2 s after the ConfigMap write (the kubelet's cache has the new content):
    // the nudge alone.
    let settled = nudge_latencies(&probe, &file, "settled", 10, Duration::from_secs(2)).await;
    let (p50, max) = p50_max(at_once);
    println!("NODE configmap write + annotation at once -> file in the container: p50 {p50:?}, max {max:?} (20 changes)");
    let (p50, max) = p50_max(settled);
    println!("NODE annotation 2 s after the configmap write -> file: p50 {p50:?}, max {max:?} (10 changes)");

    probe.delete().await;
}

#[tokio::test]
async fn a_deleted_configmap_leaves_the_last_content_in_the_container() {
    let Some(bed) = TestBed::require() else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let client = bed.client().await.unwrap();
    let probe = Probe::create(client, "probe-deleted").await;
    let file = bed
        .node_configmap_volume_dir(&probe.node, &probe.uid, "probe")
        .join("value");
    let last = format!("last-{}", std::process::id());
    set_value(&probe.configmaps, &probe.name, &last).await;
    probe.nudge(&last).await;
    wait_until_async(
        "the last value",
        Duration::from_secs(10),
        Duration::from_millis(20),
        || {
            let ok = std::fs::read_to_string(&file).ok().as_deref() == Some(last.as_str());
            async move { ok.then_some(()) }
        },
    )
    .await
    .unwrap();

    probe
        .configmaps
        .delete(&probe.name, &DeleteParams::default())
        .await
        .unwrap();
    probe.nudge("deleted").await;
    // The nudge makes the kubelet sync the pod at once; give it ample time to (wrongly) act.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(std::fs::read_to_string(&file).unwrap(), last);
    let inside = probe.exec(&bed, &["cat", "/etc/probe/value"]);
    assert_eq!(inside, last, "the container keeps the last content");
    let pod = probe.get().await;
    assert_eq!(
        pod.status.and_then(|s| s.phase).as_deref(),
        Some("Running"),
        "the pod keeps running"
    );
    probe.delete().await;
}

/// How long the operator should wait between a ConfigMap write and the pod annotation: for each
/// delay, write -> new content in the volume (p50, max over 10 changes). Prints numbers only
/// (`make bench-node`); the delivery the operator gets is the delay plus the nudge's sync.
#[tokio::test(flavor = "current_thread")]
async fn nudge_delay_sweep_write_to_file() {
    let Some(bed) = TestBed::require() else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let client = bed.client().await.unwrap();
    let probe = Probe::create(client, "probe-sweep").await;
    let file = bed
        .node_configmap_volume_dir(&probe.node, &probe.uid, "probe")
        .join("value");
    for ms in [0u64, 50, 100, 200, 400] {
        FROM_WRITE.with(|w| w.borrow_mut().clear());
        nudge_latencies(
            &probe,
            &file,
            &format!("sweep{ms}"),
            10,
            Duration::from_millis(ms),
        )
        .await;
        let (p50, max) = p50_max(FROM_WRITE.with(|w| w.borrow().clone()));
        println!("NODE annotation {ms} ms after the configmap write -> file, from the write: p50 {p50:?}, max {max:?} (10 changes)");
    }
    probe.delete().await;
}
