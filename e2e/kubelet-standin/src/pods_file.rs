//! The stand-in's input: `.testbed/standin/pods.json`, written by the test bed.
//!
//! It lists the pods whose main container is a local process the bed manages
//! (a Kafka node), and where their local state lives. The pod *spec* comes from
//! the apiserver; this file only says how a pod maps onto the local machine.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::Error;

/// Schema version this build understands.
pub const SCHEMA_VERSION: u32 = 1;

/// The whole file.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodsFile {
    /// Must equal [`SCHEMA_VERSION`].
    pub version: u32,
    /// Directory for sidecar logs: `<logsDir>/<pod>-<container>.log`.
    pub logs_dir: PathBuf,
    /// Directory for sidecar pid files: `<pidsDir>/<pod>-<container>.pid`, so that
    /// `testbed-down` can kill them even if the stand-in itself died.
    pub pids_dir: PathBuf,
    /// One entry per local pod.
    pub pods: Vec<LocalPod>,
}

/// How one pod maps onto local processes and directories.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalPod {
    pub namespace: String,
    pub name: String,
    /// Loopback address standing in for the pod IP (`127.0.1.<node id>`).
    #[serde(rename = "podIP")]
    pub pod_ip: Ipv4Addr,
    /// Container whose process the bed runs (its pid is in `pidFile`).
    pub main_container: String,
    /// Pid file of the externally managed main process.
    pub pid_file: PathBuf,
    /// TCP port on `podIP` that must accept connections for the pod to be Ready.
    pub readiness_port: u16,
    /// Root of the pod's volumes: `<volumesDir>/<volume name>/`.
    pub volumes_dir: PathBuf,
    /// Container mount path -> local directory, used to rewrite sidecar arguments.
    /// Mounts not listed here default to `<volumesDir>/<volume name>`.
    #[serde(default)]
    pub mounts: BTreeMap<String, PathBuf>,
}

impl LocalPod {
    /// `namespace/name`, the key used throughout the stand-in.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Directory holding per-pod state beside the volumes (the parent of `volumesDir`).
    pub fn pod_dir(&self) -> PathBuf {
        self.volumes_dir
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| self.volumes_dir.clone())
    }
}

impl PodsFile {
    /// Reads and validates the file.
    pub fn load(path: &Path) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::PodsFileRead {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text).map_err(|reason| Error::PodsFileInvalid {
            path: path.to_path_buf(),
            reason,
        })
    }

    /// Parses and validates the JSON text; the error is a sentence for the user.
    pub fn parse(text: &str) -> Result<Self, String> {
        let file: PodsFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
        file.validate()?;
        Ok(file)
    }

    fn validate(&self) -> Result<(), String> {
        if self.version != SCHEMA_VERSION {
            return Err(format!(
                "version is {}, this stand-in reads version {SCHEMA_VERSION}",
                self.version
            ));
        }
        require_absolute("logsDir", &self.logs_dir)?;
        require_absolute("pidsDir", &self.pids_dir)?;
        let mut seen = std::collections::BTreeSet::new();
        for pod in &self.pods {
            if !seen.insert(pod.key()) {
                return Err(format!("pod {} is listed twice", pod.key()));
            }
            if !pod.pod_ip.is_loopback() {
                return Err(format!(
                    "pod {}: podIP {} is not a loopback address; the bed only uses 127.0.0.0/8",
                    pod.key(),
                    pod.pod_ip
                ));
            }
            require_absolute(&format!("{}: pidFile", pod.key()), &pod.pid_file)?;
            require_absolute(&format!("{}: volumesDir", pod.key()), &pod.volumes_dir)?;
            for (mount, dir) in &pod.mounts {
                if !mount.starts_with('/') {
                    return Err(format!(
                        "pod {}: mount path {mount:?} is not absolute",
                        pod.key()
                    ));
                }
                require_absolute(&format!("{}: mounts[{mount}]", pod.key()), dir)?;
            }
        }
        Ok(())
    }

    /// Namespaces the stand-in has to watch.
    pub fn namespaces(&self) -> Vec<String> {
        let set: std::collections::BTreeSet<_> =
            self.pods.iter().map(|p| p.namespace.clone()).collect();
        set.into_iter().collect()
    }
}

fn require_absolute(what: &str, path: &Path) -> Result<(), String> {
    if path.is_absolute() {
        Ok(())
    } else {
        Err(format!(
            "{what} must be an absolute path, got {}",
            path.display()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = r#"{
      "version": 1,
      "logsDir": "/tb/logs",
      "pidsDir": "/tb/pids",
      "pods": [{
        "namespace": "kafka", "name": "kafka-broker-0", "podIP": "127.0.1.1",
        "mainContainer": "kafka", "pidFile": "/tb/pids/kafka-1.pid", "readinessPort": 9092,
        "volumesDir": "/tb/pods/kafka/kafka-broker-0/volumes",
        "mounts": {"/etc/kafka/observer": "/tb/pods/kafka/kafka-broker-0/volumes/observer-ids"}
      }]
    }"#;

    #[test]
    fn parses_the_documented_example() {
        let file = PodsFile::parse(VALID).unwrap();
        assert_eq!(file.pods[0].key(), "kafka/kafka-broker-0");
        assert_eq!(file.pods[0].pod_ip, Ipv4Addr::new(127, 0, 1, 1));
        assert_eq!(
            file.pods[0].pod_dir(),
            PathBuf::from("/tb/pods/kafka/kafka-broker-0")
        );
        assert_eq!(file.namespaces(), vec!["kafka".to_string()]);
    }

    #[test]
    fn rejects_non_loopback_pod_ip() {
        let text = VALID.replace("127.0.1.1", "10.0.0.1");
        assert!(PodsFile::parse(&text)
            .unwrap_err()
            .contains("not a loopback"));
    }

    #[test]
    fn rejects_relative_paths_and_duplicates() {
        let text = VALID.replace("\"/tb/pids/kafka-1.pid\"", "\"pids/kafka-1.pid\"");
        assert!(PodsFile::parse(&text).unwrap_err().contains("absolute"));
        let mut file = PodsFile::parse(VALID).unwrap();
        file.pods.push(file.pods[0].clone());
        assert!(file.validate().unwrap_err().contains("listed twice"));
    }

    #[test]
    fn rejects_other_schema_versions() {
        let text = VALID.replace("\"version\": 1", "\"version\": 2");
        assert!(PodsFile::parse(&text).unwrap_err().contains("version"));
    }
}
