//! The bed named by `KOO_TESTBED`: paths, client, tools, Kafka node control.

use std::path::{Path, PathBuf};
use std::process::Command;

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::error::Error;
use crate::kafka::{KafkaNode, NodeAction, RestartOnDrop};

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

    /// Broker bootstrap string (`.testbed/kafka/bootstrap`), e.g. `127.0.1.1:9092,...`.
    pub fn kafka_bootstrap(&self) -> String {
        self.read_trimmed("kafka/bootstrap")
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Controller quorum bootstrap (`.testbed/kafka/controller-bootstrap`).
    pub fn controller_bootstrap(&self) -> String {
        self.read_trimmed("kafka/controller-bootstrap")
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// `.testbed/bin` (kubectl, helm, kafka-topics, kafka-node, ...).
    pub fn bin_dir(&self) -> PathBuf {
        self.dir.join("bin")
    }

    /// `.testbed/logs/<name>.log`.
    pub fn log_file(&self, name: &str) -> PathBuf {
        self.dir.join("logs").join(format!("{name}.log"))
    }

    /// Where the kubelet stand-in projects a pod's volume:
    /// `.testbed/pods/<namespace>/<pod>/volumes/<volume>/`.
    pub fn pod_volume_dir(&self, namespace: &str, pod: &str, volume: &str) -> PathBuf {
        self.dir
            .join("pods")
            .join(namespace)
            .join(pod)
            .join("volumes")
            .join(volume)
    }

    /// Where the real kubelet of node `koo-node` (e2e/testbed/node.sh, `--root-dir
    /// .testbed/node/kubelet`) mounts a pod's ConfigMap volume: the very directory the container
    /// sees at its mount path.
    pub fn node_configmap_volume_dir(&self, pod_uid: &str, volume: &str) -> PathBuf {
        self.dir
            .join("node/kubelet/pods")
            .join(pod_uid)
            .join("volumes/kubernetes.io~configmap")
            .join(volume)
    }

    /// The projected `observer.ids` file a Kafka node reads (its `KAFKA_OBSERVER_IDS_FILE`).
    pub fn observer_ids_file(&self, node_id: i32) -> Result<PathBuf, Error> {
        let node = KafkaNode::get(node_id)?;
        Ok(self
            .pod_volume_dir(crate::kafka::KAFKA_NAMESPACE, &node.pod, "observer-ids")
            .join("observer.ids"))
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

    /// `e2e/testbed/kafka.sh <action> <id>` of this bed's work tree.
    pub fn kafka_node_action(&self, action: NodeAction, id: i32) -> Result<(), Error> {
        KafkaNode::get(id)?;
        let script = self.repo_root().join("e2e/testbed/kafka.sh");
        let mut command = Command::new("bash");
        command
            .arg(&script)
            .arg(action.as_str())
            .arg(id.to_string());
        run(command, &format!("kafka.sh {} {id}", action.as_str())).map(|_| ())
    }

    /// `kill -9` of a Kafka node; it is started again when the guard drops.
    pub fn kill_node(&self, id: i32) -> Result<RestartOnDrop<'_>, Error> {
        self.kafka_node_action(NodeAction::Kill, id)?;
        Ok(RestartOnDrop::new(self, id))
    }

    /// Controlled shutdown of a Kafka node; it is started again when the guard drops.
    pub fn stop_node(&self, id: i32) -> Result<RestartOnDrop<'_>, Error> {
        self.kafka_node_action(NodeAction::Stop, id)?;
        Ok(RestartOnDrop::new(self, id))
    }

    /// Starts a Kafka node (no-op when running) and waits until it is started.
    pub fn start_node(&self, id: i32) -> Result<(), Error> {
        self.kafka_node_action(NodeAction::Start, id)
    }

    /// Stops and starts a Kafka node.
    pub fn restart_node(&self, id: i32) -> Result<(), Error> {
        self.kafka_node_action(NodeAction::Restart, id)
    }

    /// The pid of a running Kafka node (from `.testbed/pids/kafka-<id>.pid`), if alive.
    pub fn kafka_pid(&self, id: i32) -> Option<u32> {
        let text =
            std::fs::read_to_string(self.dir.join("pids").join(format!("kafka-{id}.pid"))).ok()?;
        let pid: u32 = text.trim().parse().ok()?;
        Path::new(&format!("/proc/{pid}")).exists().then_some(pid)
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
            bed.pod_volume_dir("kafka", "kafka-broker-3", "observer-ids"),
            tmp.path()
                .join("pods/kafka/kafka-broker-3/volumes/observer-ids")
        );
        assert_eq!(
            bed.observer_ids_file(4).unwrap(),
            tmp.path()
                .join("pods/kafka/kafka-broker-3/volumes/observer-ids/observer.ids")
        );
        assert_eq!(bed.repo_root(), tmp.path().parent().unwrap());
    }
}
