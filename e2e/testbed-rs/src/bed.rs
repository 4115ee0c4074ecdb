//! The bed named by `KOO_TESTBED`: paths, client, tools, Kafka node control.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::error::Error;
use crate::kafka::{Down, KafkaNode, NodeAction, RestartOnDrop, KAFKA_NAMESPACE};
use crate::wait::wait_until;

/// What a test needs of a Kafka pod's state (from `kubectl get pod -o json`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodState {
    pub uid: String,
    /// `status.phase` (`Pending`, `Running`, ...).
    pub phase: String,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// `restartCount` of the `kafka` container (-1 before it has a status).
    pub restarts: i32,
    pub pod_ip: Option<String>,
}

impl PodState {
    fn parse(json: &str) -> Result<Self, String> {
        let pod: serde_json::Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
        let status = &pod["status"];
        let ready = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        let restarts = status["containerStatuses"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["name"] == "kafka")
            .and_then(|c| c["restartCount"].as_i64())
            .map_or(-1, |n| n as i32);
        Ok(Self {
            uid: pod["metadata"]["uid"]
                .as_str()
                .ok_or("no metadata.uid")?
                .to_string(),
            phase: status["phase"].as_str().unwrap_or("").to_string(),
            ready,
            restarts,
            pod_ip: status["podIP"]
                .as_str()
                .filter(|ip| !ip.is_empty())
                .map(str::to_string),
        })
    }
}

/// The environment variable naming the bed.
pub const ENV_VAR: &str = "KOO_TESTBED";

/// A running test bed (`.testbed/` of a work tree).
#[derive(Debug, Clone)]
pub struct TestBed {
    dir: PathBuf,
}

impl TestBed {
    /// The bed for an integration test. `KOO_TESTBED=off`: prints `SKIP <test>: ...` and returns
    /// `None`. Unset or not a bed: panics, saying how to bring the bed up.
    pub fn require() -> Option<Self> {
        let test = std::thread::current().name().unwrap_or("test").to_string();
        match Self::from_env() {
            Ok(Some(bed)) => Some(bed),
            Ok(None) => {
                println!("SKIP {test}: KOO_TESTBED=off (the test bed was explicitly not requested; `make test` runs it)");
                None
            }
            Err(error) => panic!("{test} needs the test bed: {error}"),
        }
    }

    /// `Ok(None)` for `KOO_TESTBED=off`; an error when unset or not a bed directory.
    pub fn from_env() -> Result<Option<Self>, Error> {
        match std::env::var_os(ENV_VAR) {
            None => Err(Error::Unset),
            Some(v) if v == "off" => Ok(None),
            Some(v) => Self::at(PathBuf::from(v)).map(Some),
        }
    }

    /// The bed at `dir` (absolute path of a `.testbed/` holding a kubeconfig).
    pub fn at(dir: PathBuf) -> Result<Self, Error> {
        if !dir.is_absolute() {
            return Err(Error::NotAbsolute(dir));
        }
        if !dir.join("kubeconfig").is_file() {
            return Err(Error::Missing(dir));
        }
        Ok(Self { dir })
    }

    /// The `.testbed/` directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The work tree the bed belongs to (the parent of `.testbed/`), where `e2e/` lives.
    pub fn repo_root(&self) -> PathBuf {
        self.dir
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| self.dir.clone())
    }

    /// `.testbed/kubeconfig` (admin, TLS, https://10.214.0.1:6443: the node address).
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// An admin client from the bed's kubeconfig (never `$KUBECONFIG`).
    pub async fn client(&self) -> Result<kube::Client, Error> {
        let path = self.kubeconfig();
        let kubeconfig_error = |source| Error::Kubeconfig {
            path: path.clone(),
            source,
        };
        let kubeconfig = Kubeconfig::read_from(&path).map_err(kubeconfig_error)?;
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(kubeconfig_error)?;
        kube::Client::try_from(config).map_err(Error::Client)
    }

    /// Broker bootstrap (`.testbed/kafka/bootstrap`, written by `kafka.sh up`): the
    /// `kafka-bootstrap` Service's `ClusterIP:9092`, reached from the machine through kube-proxy.
    /// Stable while the Service exists; clients then talk to the brokers' pod IPs they advertise.
    pub fn kafka_bootstrap(&self) -> String {
        self.read_trimmed("kafka/bootstrap")
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Controller quorum bootstrap, `podIP:9093,...` of the controllers' pods as they are now
    /// (`kafka.sh controller-bootstrap`): a replaced pod has a new IP, so never cached.
    pub fn controller_bootstrap(&self) -> String {
        let out = self
            .kafka_sh(&["controller-bootstrap"])
            .unwrap_or_else(|e| panic!("{e}"));
        let bootstrap = out.trim().to_string();
        assert!(
            !bootstrap.is_empty(),
            "kafka.sh controller-bootstrap: no controller pod has an IP"
        );
        bootstrap
    }

    /// `.testbed/bin` (kubectl, helm, kafka-topics, kafka-node, ...).
    pub fn bin_dir(&self) -> PathBuf {
        self.dir.join("bin")
    }

    /// `.testbed/logs/<name>.log`.
    pub fn log_file(&self, name: &str) -> PathBuf {
        self.dir.join("logs").join(format!("{name}.log"))
    }

    /// Where the real kubelet of the bed node `node` (`koo-<zone>`, e2e/testbed/node.sh,
    /// `--root-dir .testbed/node/<zone>/kubelet`) mounts a pod's ConfigMap volume: the very
    /// directory the container sees at its mount path.
    pub fn node_configmap_volume_dir(&self, node: &str, pod_uid: &str, volume: &str) -> PathBuf {
        let zone = node.strip_prefix("koo-").unwrap_or(node);
        self.dir
            .join("node")
            .join(zone)
            .join("kubelet/pods")
            .join(pod_uid)
            .join("volumes/kubernetes.io~configmap")
            .join(volume)
    }

    /// The projected `observer.ids` a Kafka node reads (its `KAFKA_OBSERVER_IDS_FILE`), on the
    /// host: in the ConfigMap volume `observer-ids` of the node's current pod
    /// (`kafka.sh observer-dir`; a replaced pod has a new directory).
    pub fn observer_ids_file(&self, node_id: i32) -> Result<PathBuf, Error> {
        KafkaNode::get(node_id)?;
        let out = self.kafka_sh(&["observer-dir", &node_id.to_string()])?;
        Ok(PathBuf::from(out.trim()).join("observer.ids"))
    }

    /// Runs `.testbed/bin/<tool> args...`; its stdout on success, [`Error::Failed`] otherwise.
    pub fn run_tool(&self, tool: &str, args: &[&str]) -> Result<String, Error> {
        let mut command = Command::new(self.bin_dir().join(tool));
        command.args(args);
        run(command, &format!("{tool} {}", args.join(" ")))
    }

    /// [`TestBed::run_tool`] with `input` written to the tool's stdin (e.g. a console producer).
    pub fn run_tool_with_input(
        &self,
        tool: &str,
        args: &[&str],
        input: &str,
    ) -> Result<String, Error> {
        use std::io::Write;
        use std::process::Stdio;
        let label = format!("{tool} {}", args.join(" "));
        let spawn_error = |source| Error::Spawn {
            command: label.clone(),
            source,
        };
        let mut child = Command::new(self.bin_dir().join(tool))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(spawn_error)?;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        stdin.write_all(input.as_bytes()).map_err(spawn_error)?;
        drop(stdin);
        let output = child.wait_with_output().map_err(spawn_error)?;
        finish(output, &label)
    }

    /// `e2e/testbed/kafka.sh args...` of this bed's work tree, for namespace [`KAFKA_NAMESPACE`];
    /// its stdout.
    fn kafka_sh(&self, args: &[&str]) -> Result<String, Error> {
        let script = self.repo_root().join("e2e/testbed/kafka.sh");
        let mut command = Command::new("bash");
        command
            .arg(&script)
            .args(args)
            .env("KOO_KAFKA_NAMESPACE", KAFKA_NAMESPACE);
        run(command, &format!("kafka.sh {}", args.join(" ")))
    }

    /// `e2e/testbed/kafka.sh <action> <id>` of this bed's work tree.
    pub fn kafka_node_action(&self, action: NodeAction, id: i32) -> Result<(), Error> {
        KafkaNode::get(id)?;
        self.kafka_sh(&[action.as_str(), &id.to_string()])
            .map(|_| ())
    }

    /// A crash: SIGKILL of the node's JVM (`kafka.sh kill`). The kubelet restarts the container
    /// within seconds, in the same pod (same IP); the guard waits for that (restart counted, pod
    /// Ready). For a node that must stay down, use [`TestBed::stop_node`]. Until the guard has
    /// brought the node back, the bed's ObserverSet is held at a Manual policy
    /// ([`TestBed::hold_manual_policy`]).
    pub fn kill_node(&self, id: i32) -> Result<RestartOnDrop<'_>, Error> {
        let node = KafkaNode::get(id)?;
        let restarts_before = self.kafka_pod_state(&node)?.restarts;
        let hold = self.hold_manual_policy()?;
        // On failure the hold is dropped (the policy given back) before the error is returned.
        self.kafka_node_action(NodeAction::Kill, id)?;
        Ok(RestartOnDrop::new(
            self,
            id,
            Down::Killed { restarts_before },
            hold,
        ))
    }

    /// A lost zone, the kind way (`kafka.sh stop`): the pod's bed node labelled to hold the
    /// namespace's pods, the JVM killed with SIGKILL (no controlled shutdown), the pod
    /// force-deleted; its replacement stays Pending until the
    /// guard drops or [`RestartOnDrop::start`] (`kafka.sh start`: label removed, wait Ready). The
    /// replacement pod has a new IP. Until then the bed's ObserverSet is held at a Manual policy
    /// ([`TestBed::hold_manual_policy`]).
    pub fn stop_node(&self, id: i32) -> Result<RestartOnDrop<'_>, Error> {
        KafkaNode::get(id)?;
        // A `stop` that failed half way (the node labelled, the JVM perhaps killed) is undone
        // (and the policy given back) by the guard, dropped before the error is returned.
        let hold = self.hold_manual_policy()?;
        let guard = RestartOnDrop::new(self, id, Down::Stopped, hold);
        self.kafka_node_action(NodeAction::Stop, id)?;
        Ok(guard)
    }

    /// Starts a node stopped by [`TestBed::stop_node`] (`kafka.sh start`: releases its bed node)
    /// and waits until its pod is Ready.
    pub fn start_node(&self, id: i32) -> Result<(), Error> {
        self.kafka_node_action(NodeAction::Start, id)
    }

    /// Graceful restart (`kafka.sh restart`): the pod is deleted (SIGTERM: a controlled
    /// shutdown), waits until its replacement (new IP) is Ready. The bed's ObserverSet is held at
    /// a Manual policy meanwhile, given back once no partition is under min ISR.
    pub fn restart_node(&self, id: i32) -> Result<(), Error> {
        KafkaNode::get(id)?;
        let hold = self.hold_manual_policy()?;
        let restarted = self.kafka_node_action(NodeAction::Restart, id);
        restarted.and(hold.release())
    }

    /// The host pid of the node's running JVM (`kafka.sh jvm-pid`), if its container runs.
    pub fn kafka_pid(&self, id: i32) -> Option<u32> {
        KafkaNode::get(id).ok()?;
        self.kafka_sh(&["jvm-pid", &id.to_string()])
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// The node's pod as the API has it now.
    pub fn kafka_pod_state(&self, node: &KafkaNode) -> Result<PodState, Error> {
        let args = ["-n", KAFKA_NAMESPACE, "get", "pod", &node.pod, "-o", "json"];
        let out = self.run_tool("kubectl", &args)?;
        PodState::parse(&out).map_err(|detail| Error::Output {
            command: format!("kubectl {}", args.join(" ")),
            detail,
        })
    }

    /// Waits until the kubelet has restarted node `id`'s kafka container (restart count above
    /// `restarts_before`, same pod) and the pod is Ready again; `KAFKA_START_TIMEOUT_S` (180).
    pub(crate) fn wait_restarted(&self, id: i32, restarts_before: i32) -> Result<PodState, Error> {
        let node = KafkaNode::get(id)?;
        let timeout = std::env::var("KAFKA_START_TIMEOUT_S")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(180);
        wait_until(
            &format!(
                "pod {} Ready after the kubelet restarted its kafka container",
                node.pod
            ),
            Duration::from_secs(timeout),
            Duration::from_millis(500),
            || {
                self.kafka_pod_state(&node)
                    .ok()
                    .filter(|s| s.restarts > restarts_before && s.ready)
            },
        )
    }

    fn read_trimmed(&self, rel: &str) -> Result<String, Error> {
        let path = self.dir.join(rel);
        std::fs::read_to_string(&path)
            .map(|s| s.trim().to_string())
            .map_err(|source| Error::Read { path, source })
    }
}

fn run(mut command: Command, label: &str) -> Result<String, Error> {
    let output = command.output().map_err(|source| Error::Spawn {
        command: label.to_string(),
        source,
    })?;
    finish(output, label)
}

fn finish(output: std::process::Output, label: &str) -> Result<String, Error> {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if output.status.success() {
        Ok(stdout)
    } else {
        Err(Error::Failed {
            command: label.to_string(),
            status: output.status,
            stdout,
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bed_needs_an_absolute_dir_with_a_kubeconfig() {
        assert!(matches!(
            TestBed::at("rel/.testbed".into()),
            Err(Error::NotAbsolute(_))
        ));
        let tmp = tempfile::tempdir().unwrap();
        assert!(matches!(
            TestBed::at(tmp.path().into()),
            Err(Error::Missing(_))
        ));
        std::fs::write(tmp.path().join("kubeconfig"), "").unwrap();
        let bed = TestBed::at(tmp.path().into()).unwrap();
        assert_eq!(
            bed.node_configmap_volume_dir("koo-b", "uid-1", "observer-ids"),
            tmp.path()
                .join("node/b/kubelet/pods/uid-1/volumes/kubernetes.io~configmap/observer-ids")
        );
        assert!(matches!(
            bed.observer_ids_file(5),
            Err(Error::UnknownNode(5))
        ));
        assert_eq!(bed.repo_root(), tmp.path().parent().unwrap());
    }

    #[test]
    fn pod_state_reads_readiness_restarts_and_ip() {
        let json = r#"{"metadata": {"uid": "u1"}, "status": {"phase": "Running",
            "podIP": "10.214.0.12",
            "conditions": [{"type": "Initialized", "status": "True"},
                           {"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "kafka", "restartCount": 2}],
            "initContainerStatuses": [{"name": "observer-agent", "restartCount": 5}]}}"#;
        let state = PodState::parse(json).unwrap();
        assert_eq!(
            state,
            PodState {
                uid: "u1".into(),
                phase: "Running".into(),
                ready: true,
                restarts: 2,
                pod_ip: Some("10.214.0.12".into()),
            }
        );
        let pending = r#"{"metadata": {"uid": "u2"}, "status": {"phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False"}]}}"#;
        let state = PodState::parse(pending).unwrap();
        assert_eq!(
            (state.ready, state.restarts, state.pod_ip),
            (false, -1, None)
        );
        assert!(PodState::parse("{}").is_err());
    }
}
