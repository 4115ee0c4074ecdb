//! What the stand-in remembers about one pod between ticks, and how an
//! observation of the main process turns into a status input.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::local_command::{CommandError, LocalCommand};
use crate::main_process::{self, ProcessInfo};
use crate::pods_file::LocalPod;
use crate::sidecars::Sidecars;
use crate::status::{ContainerInput, ContainerView, StatusInput};

/// How long the readiness TCP check may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(300);

/// Per-pod memory, reset when the pod's UID changes (a recreated pod).
#[derive(Debug)]
pub struct PodState {
    pub uid: String,
    /// Labels, annotations and spec as last seen: a change means "sync now".
    pub fingerprint: String,
    /// Result of the last volume sync; `None` before the first one.
    pub volumes: Option<Result<(), String>>,
    /// Resolved sidecar commands by container name, from the last sync.
    pub commands: BTreeMap<String, Result<LocalCommand, CommandError>>,
    pub main_restarts: i32,
    /// The last live main pid, kept while the process is down to count the restart.
    pub last_main_pid: Option<u32>,
    pub start_time: Timestamp,
    /// Status as last written, to write only changes.
    pub written: Option<PodStatus>,
    /// Deletion already handled for this UID.
    pub deleting: bool,
}

/// One observation of a pod's main process.
#[derive(Debug, Clone, Copy)]
pub struct MainObservation {
    pub process: Option<ProcessInfo>,
    pub port_open: bool,
}

impl PodState {
    /// Fresh state for `pod`, picking up restart count and start time the
    /// apiserver already has (from an earlier run of the stand-in).
    pub fn new(pod: &Pod, main_container: &str) -> Self {
        let status = pod.status.as_ref();
        let main_restarts = status
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.name == main_container))
            .map(|c| c.restart_count)
            .unwrap_or(0);
        let start_time = status
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0)
            .unwrap_or_else(Timestamp::now);
        Self {
            uid: pod.uid().unwrap_or_default(),
            fingerprint: fingerprint(pod),
            volumes: None,
            commands: BTreeMap::new(),
            main_restarts,
            last_main_pid: None,
            start_time,
            written: None,
            deleting: false,
        }
    }

    /// Counts a restart when a live main pid differs from the last live one.
    pub fn record_main(&mut self, observation: &MainObservation) {
        if let Some(process) = observation.process {
            if self.last_main_pid.is_some_and(|pid| pid != process.pid) {
                self.main_restarts += 1;
            }
            self.last_main_pid = Some(process.pid);
        }
    }

    /// The status input for this tick.
    pub fn status_input(
        &self,
        local: &LocalPod,
        pod: &Pod,
        host_ip: &str,
        main: &MainObservation,
        sidecars: &Sidecars,
    ) -> StatusInput {
        let key = local.key();
        let containers = pod
            .spec
            .iter()
            .flat_map(|s| s.containers.iter())
            .map(|c| {
                let image = c.image.clone().unwrap_or_default();
                let (view, restart_count) = if c.name == local.main_container {
                    (main_view(local, main), self.main_restarts)
                } else {
                    self.sidecar_view(&key, &c.name, sidecars)
                };
                ContainerInput {
                    name: c.name.clone(),
                    image,
                    view,
                    restart_count,
                }
            })
            .collect();
        StatusInput {
            pod_ip: local.pod_ip.to_string(),
            host_ip: host_ip.to_string(),
            start_time: self.start_time,
            volumes: self
                .volumes
                .clone()
                .unwrap_or_else(|| Err("volumes not set up yet".to_string())),
            main_container: local.main_container.clone(),
            containers,
        }
    }

    fn sidecar_view(
        &self,
        key: &str,
        container: &str,
        sidecars: &Sidecars,
    ) -> (ContainerView, i32) {
        match self.commands.get(container) {
            Some(Err(error)) => (
                ContainerView::Waiting {
                    reason: error.reason().to_string(),
                    message: Some(error.to_string()),
                },
                0,
            ),
            _ => sidecars
                .view(&(key.to_string(), container.to_string()))
                .unwrap_or((
                    ContainerView::Waiting {
                        reason: "ContainerCreating".to_string(),
                        message: None,
                    },
                    0,
                )),
        }
    }
}

fn main_view(local: &LocalPod, main: &MainObservation) -> ContainerView {
    match main.process {
        Some(process) => ContainerView::Running {
            container_id: format!("standin://{}", process.pid),
            started_at: process.started_at,
            ready: main.port_open,
        },
        None => ContainerView::Waiting {
            reason: "ProcessNotRunning".to_string(),
            message: Some(format!(
                "no live process in {} (the bed starts it: e2e/testbed/kafka.sh)",
                local.pid_file.display()
            )),
        },
    }
}

/// Observes the main process: alive per its pid file, and its port answering.
pub async fn observe_main(local: &LocalPod) -> MainObservation {
    let process = main_process::observe(&local.pid_file);
    let port_open = match process {
        Some(_) => {
            main_process::port_open(
                IpAddr::V4(local.pod_ip),
                local.readiness_port,
                PROBE_TIMEOUT,
            )
            .await
        }
        None => false,
    };
    MainObservation { process, port_open }
}

/// What of the pod makes the kubelet sync it at once when it changes: labels,
/// annotations and spec, not status (the stand-in's own writes).
pub fn fingerprint(pod: &Pod) -> String {
    serde_json::to_string(&(&pod.metadata.labels, &pod.metadata.annotations, &pod.spec))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn a_new_main_pid_counts_one_restart_even_after_a_gap() {
        let mut state = PodState::new(&Pod::default(), "kafka");
        let alive = |pid| MainObservation {
            process: Some(ProcessInfo {
                pid,
                started_at: None,
            }),
            port_open: true,
        };
        let dead = MainObservation {
            process: None,
            port_open: false,
        };
        state.record_main(&alive(10));
        state.record_main(&alive(10));
        state.record_main(&dead);
        state.record_main(&alive(11));
        state.record_main(&alive(11));
        assert_eq!(state.main_restarts, 1);
    }

    #[test]
    fn fingerprint_changes_with_annotations_but_not_status() {
        let mut pod = Pod::default();
        let before = fingerprint(&pod);
        pod.status = Some(PodStatus {
            phase: Some("Running".into()),
            ..Default::default()
        });
        assert_eq!(fingerprint(&pod), before);
        pod.metadata.annotations = Some(BTreeMap::from([("k".to_string(), "v".to_string())]));
        assert_ne!(fingerprint(&pod), before);
    }
}
