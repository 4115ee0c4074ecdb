//! Sidecar containers as supervised local processes.
//!
//! Each runs with a cleared environment (its container env only), its output
//! appended to `<logsDir>/<pod>-<container>.log`, and its pid in
//! `<pidsDir>/<pod>-<container>.pid` so the bed can clean up after a crashed
//! stand-in. An exited sidecar is restarted after a back-off that doubles from
//! 1 s to 30 s and resets after 60 s of running (the kubelet uses 10 s to 5 min;
//! shorter suits a test bed). Children get SIGKILL when the stand-in dies.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use tokio::process::{Child, Command};

use crate::local_command::LocalCommand;
use crate::status::ContainerView;

const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
const STABLE_AFTER: Duration = Duration::from_secs(60);
const STOP_GRACE: Duration = Duration::from_secs(3);

/// `(pod key, container name)`.
pub type SidecarKey = (String, String);

enum State {
    Running {
        child: Child,
        pid: u32,
        started_at: Timestamp,
        since: Instant,
    },
    BackOff {
        until: Instant,
        reason: &'static str,
        message: String,
    },
}

struct Sidecar {
    pod_name: String,
    pod_dir: PathBuf,
    command: LocalCommand,
    state: State,
    restarts: i32,
    backoff: Duration,
}

/// All sidecars of all pods.
pub struct Sidecars {
    logs_dir: PathBuf,
    pids_dir: PathBuf,
    entries: BTreeMap<SidecarKey, Sidecar>,
}

impl Sidecars {
    pub fn new(logs_dir: PathBuf, pids_dir: PathBuf) -> Self {
        Self {
            logs_dir,
            pids_dir,
            entries: BTreeMap::new(),
        }
    }

    /// Starts the sidecar if it is not supervised yet; restarts it if its command changed.
    /// `earlier_restarts` is the restart count already reported for the container (a restarted
    /// stand-in carries it on, as the kubelet does from its runtime).
    pub async fn ensure(
        &mut self,
        key: SidecarKey,
        pod_name: &str,
        pod_dir: &Path,
        command: LocalCommand,
        earlier_restarts: i32,
    ) {
        if let Some(existing) = self.entries.get(&key) {
            if existing.command == command {
                return;
            }
            tracing::info!(pod = %key.0, container = %key.1, "sidecar command changed, restarting");
        }
        let restarts = match self.entries.remove(&key) {
            Some(old) => {
                let restarts = old.restarts + 1;
                self.stop(&key, old).await;
                restarts
            }
            None => earlier_restarts.max(0),
        };
        let mut sidecar = Sidecar {
            pod_name: pod_name.to_string(),
            pod_dir: pod_dir.to_path_buf(),
            command,
            state: State::BackOff {
                until: Instant::now(),
                reason: "ContainerCreating",
                message: String::new(),
            },
            restarts,
            backoff: INITIAL_BACKOFF,
        };
        sidecar.state = self.spawn(&key, &sidecar);
        self.entries.insert(key, sidecar);
    }

    /// Reaps exited sidecars and restarts those whose back-off has passed.
    pub fn poll(&mut self) {
        let now = Instant::now();
        let keys: Vec<SidecarKey> = self.entries.keys().cloned().collect();
        let mut due = Vec::new();
        for key in keys {
            let Some(sidecar) = self.entries.get_mut(&key) else {
                continue;
            };
            match &mut sidecar.state {
                State::Running {
                    child, pid, since, ..
                } => {
                    let Ok(Some(exit)) = child.try_wait() else {
                        continue;
                    };
                    let pid = *pid;
                    if since.elapsed() >= STABLE_AFTER {
                        sidecar.backoff = INITIAL_BACKOFF;
                    }
                    let delay = sidecar.backoff;
                    sidecar.backoff = (sidecar.backoff * 2).min(MAX_BACKOFF);
                    sidecar.restarts += 1;
                    tracing::warn!(pod = %key.0, container = %key.1, pid, %exit, ?delay, "sidecar exited, restarting after back-off");
                    let _ =
                        std::fs::remove_file(pid_path(&self.pids_dir, &sidecar.pod_name, &key.1));
                    sidecar.state = State::BackOff {
                        until: now + delay,
                        reason: "CrashLoopBackOff",
                        message: format!(
                            "back-off {delay:?} restarting failed container={} pod={} ({exit})",
                            key.1, key.0
                        ),
                    };
                }
                State::BackOff { until, .. } if *until <= now => due.push(key),
                State::BackOff { .. } => {}
            }
        }
        for key in due {
            let state = self.spawn(&key, &self.entries[&key]);
            if let Some(sidecar) = self.entries.get_mut(&key) {
                // A start that failed (e.g. a missing binary) backs off like a crash.
                if matches!(state, State::BackOff { .. }) {
                    sidecar.backoff = (sidecar.backoff * 2).min(MAX_BACKOFF);
                }
                sidecar.state = state;
            }
        }
    }

    /// The container's state for the pod status, if supervised.
    pub fn view(&self, key: &SidecarKey) -> Option<(ContainerView, i32)> {
        let sidecar = self.entries.get(key)?;
        let view = match &sidecar.state {
            State::Running {
                pid, started_at, ..
            } => ContainerView::Running {
                container_id: format!("standin://{pid}"),
                started_at: Some(*started_at),
                ready: true,
            },
            State::BackOff {
                reason, message, ..
            } => ContainerView::Waiting {
                reason: reason.to_string(),
                message: Some(message.clone()).filter(|m| !m.is_empty()),
            },
        };
        Some((view, sidecar.restarts))
    }

    /// Stops every sidecar whose key `keep` rejects.
    pub async fn retain(&mut self, keep: impl Fn(&SidecarKey) -> bool) {
        let gone: Vec<SidecarKey> = self.entries.keys().filter(|k| !keep(k)).cloned().collect();
        for key in gone {
            if let Some(sidecar) = self.entries.remove(&key) {
                self.stop(&key, sidecar).await;
            }
        }
    }

    /// Stops all sidecars (stand-in shutdown).
    pub async fn stop_all(&mut self) {
        self.retain(|_| false).await;
    }

    fn pid_file(&self, pod_name: &str, container: &str) -> PathBuf {
        pid_path(&self.pids_dir, pod_name, container)
    }

    fn spawn(&self, key: &SidecarKey, sidecar: &Sidecar) -> State {
        match self.try_spawn(key, sidecar) {
            Ok(state) => state,
            Err(error) => {
                tracing::warn!(pod = %key.0, container = %key.1, %error, "sidecar failed to start");
                State::BackOff {
                    until: Instant::now() + sidecar.backoff,
                    reason: "RunContainerError",
                    message: error,
                }
            }
        }
    }

    fn try_spawn(&self, key: &SidecarKey, sidecar: &Sidecar) -> Result<State, String> {
        let log_path = self
            .logs_dir
            .join(format!("{}-{}.log", sidecar.pod_name, key.1));
        let mut log =
            open_log(&log_path).map_err(|e| format!("cannot open {}: {e}", log_path.display()))?;
        let cmd = &sidecar.command;
        let _ = writeln!(
            log,
            "--- kubelet-standin {} starting {} {}",
            Timestamp::now(),
            cmd.program.display(),
            cmd.args.join(" ")
        );
        let stderr = log.try_clone().map_err(|e| e.to_string())?;
        let mut command = Command::new(&cmd.program);
        command
            .args(&cmd.args)
            .env_clear()
            .envs(&cmd.env)
            .current_dir(&sidecar.pod_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(stderr))
            .kill_on_drop(true);
        // SAFETY: prctl is async-signal-safe; it only asks the kernel to SIGKILL the
        // child when the stand-in's thread dies, so no sidecar outlives a kill -9 of it.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", cmd.program.display()))?;
        let pid = child.id().unwrap_or_default();
        let pid_file = self.pid_file(&sidecar.pod_name, &key.1);
        if let Err(e) = std::fs::write(&pid_file, format!("{pid}\n")) {
            tracing::warn!(path = %pid_file.display(), error = %e, "cannot write sidecar pid file");
        }
        tracing::info!(pod = %key.0, container = %key.1, pid, log = %log_path.display(), "sidecar started");
        Ok(State::Running {
            child,
            pid,
            started_at: Timestamp::now(),
            since: Instant::now(),
        })
    }

    async fn stop(&self, key: &SidecarKey, sidecar: Sidecar) {
        let _ = std::fs::remove_file(self.pid_file(&sidecar.pod_name, &key.1));
        let State::Running { mut child, pid, .. } = sidecar.state else {
            return;
        };
        // SAFETY: kill(2) on our own child's pid, which we have not reaped yet.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGTERM);
        }
        if tokio::time::timeout(STOP_GRACE, child.wait())
            .await
            .is_err()
        {
            let _ = child.kill().await;
        }
        tracing::info!(pod = %key.0, container = %key.1, pid, "sidecar stopped");
    }
}

/// `<pidsDir>/<pod>-<container>.pid`.
fn pid_path(pids_dir: &Path, pod_name: &str, container: &str) -> PathBuf {
    pids_dir.join(format!("{pod_name}-{container}.pid"))
}

fn open_log(path: &Path) -> std::io::Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    OpenOptions::new().create(true).append(true).open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(program: &str, args: &[&str]) -> LocalCommand {
        LocalCommand {
            program: PathBuf::from(program),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: BTreeMap::from([("GREETING".to_string(), "hi".to_string())]),
        }
    }

    fn key() -> SidecarKey {
        ("kafka/p0".to_string(), "agent".to_string())
    }

    #[tokio::test]
    async fn runs_logs_restarts_after_exit_and_stops() {
        let dir = tempfile::tempdir().unwrap();
        let mut sidecars = Sidecars::new(dir.path().join("logs"), dir.path().to_path_buf());
        let cmd = command("/bin/sh", &["-c", "echo $GREETING; exit 3"]);
        sidecars.ensure(key(), "p0", dir.path(), cmd, 0).await;
        let pid_file = dir.path().join("p0-agent.pid");
        assert!(pid_file.exists());

        // Wait for the exit to be reaped: back-off with a restart counted.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            sidecars.poll();
            if let Some((ContainerView::Waiting { reason, .. }, restarts)) = sidecars.view(&key()) {
                assert_eq!((reason.as_str(), restarts), ("CrashLoopBackOff", 1));
                break;
            }
            assert!(Instant::now() < deadline, "sidecar exit not seen");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // After the 1 s back-off it runs again.
        tokio::time::sleep(INITIAL_BACKOFF + Duration::from_millis(100)).await;
        sidecars.poll();
        let log = std::fs::read_to_string(dir.path().join("logs/p0-agent.log")).unwrap();
        assert!(log.contains("hi\n"), "env reached the process: {log}");
        assert_eq!(log.matches("--- kubelet-standin").count(), 2, "{log}");
        sidecars.stop_all().await;
        assert!(sidecars.view(&key()).is_none());
    }

    #[tokio::test]
    async fn a_long_running_sidecar_is_running_and_is_killed_on_stop() {
        let dir = tempfile::tempdir().unwrap();
        let mut sidecars = Sidecars::new(dir.path().join("logs"), dir.path().to_path_buf());
        sidecars
            .ensure(key(), "p0", dir.path(), command("/bin/sleep", &["300"]), 3)
            .await;
        sidecars.poll();
        let Some((ContainerView::Running { container_id, .. }, 3)) = sidecars.view(&key()) else {
            panic!("expected running, with the earlier restart count carried on");
        };
        let pid: u32 = container_id
            .trim_start_matches("standin://")
            .parse()
            .unwrap();
        assert!(Path::new(&format!("/proc/{pid}")).exists());
        sidecars.stop_all().await;
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "sidecar killed and reaped"
        );
        assert!(!dir.path().join("p0-agent.pid").exists());
    }

    #[tokio::test]
    async fn a_missing_binary_backs_off_with_run_container_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut sidecars = Sidecars::new(dir.path().join("logs"), dir.path().to_path_buf());
        sidecars
            .ensure(key(), "p0", dir.path(), command("/nonexistent/bin", &[]), 0)
            .await;
        let Some((ContainerView::Waiting { reason, .. }, _)) = sidecars.view(&key()) else {
            panic!("expected waiting");
        };
        assert_eq!(reason, "RunContainerError");
    }
}
