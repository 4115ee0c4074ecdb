//! Observing a pod's externally managed main process: its pid file, whether the
//! pid is alive (Linux `/proc`), when it started, and the TCP readiness check.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

/// A live process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessInfo {
    pub pid: u32,
    /// From `/proc/<pid>/stat` starttime and the boot time; `None` if unreadable.
    pub started_at: Option<Timestamp>,
}

/// The live process named by `pid_file`, if the file exists and the pid runs.
pub fn observe(pid_file: &Path) -> Option<ProcessInfo> {
    let pid = read_pid_file(pid_file)?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields = stat_fields(&stat)?;
    // Zombies and dead tasks have exited; only their parent has not reaped them yet.
    if matches!(fields.first().copied(), Some("Z") | Some("X") | Some("x")) {
        return None;
    }
    Some(ProcessInfo {
        pid,
        started_at: start_time(&fields),
    })
}

/// The pid in `path` (first whitespace-separated token), if present and numeric.
pub fn read_pid_file(path: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(path).ok()?;
    text.split_whitespace()
        .next()?
        .parse()
        .ok()
        .filter(|pid| *pid > 0)
}

/// Fields after the `(comm)` of `/proc/<pid>/stat`, starting with the state.
/// The command name may hold spaces and parentheses, so split after the last `)`.
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let after = &stat[stat.rfind(')')? + 1..];
    Some(after.split_whitespace().collect())
}

fn start_time(fields: &[&str]) -> Option<Timestamp> {
    // Field 22 of stat is starttime; `fields` starts at field 3.
    let ticks: u64 = fields.get(19)?.parse().ok()?;
    let boot = boot_time()?;
    let hz = clock_ticks_per_second();
    let nanos = i128::from(ticks) * 1_000_000_000 / i128::from(hz);
    Timestamp::from_nanosecond(i128::from(boot) * 1_000_000_000 + nanos).ok()
}

fn boot_time() -> Option<i64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions; it only reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

/// True when `ip:port` accepts a TCP connection within `timeout` (the kubelet's tcpSocket probe).
pub async fn port_open(ip: IpAddr, port: u16, timeout: Duration) -> bool {
    let connect = tokio::net::TcpStream::connect(SocketAddr::new(ip, port));
    matches!(tokio::time::timeout(timeout, connect).await, Ok(Ok(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observes_this_test_process_and_not_a_missing_pid_file() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("self.pid");
        std::fs::write(&pid_file, format!("{}\n", std::process::id())).unwrap();
        let info = observe(&pid_file).expect("own pid is alive");
        assert_eq!(info.pid, std::process::id());
        let started = info.started_at.expect("start time readable");
        let age = Timestamp::now().duration_since(started);
        assert!(age.as_secs() >= 0 && age.as_secs() < 3600, "age {age:?}");
        assert_eq!(observe(&dir.path().join("missing.pid")), None);
    }

    #[test]
    fn a_reaped_child_is_not_alive() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("child.pid");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        std::fs::write(&pid_file, child.id().to_string()).unwrap();
        child.wait().unwrap();
        assert_eq!(observe(&pid_file), None);
    }

    #[test]
    fn parses_stat_with_spaces_and_parens_in_the_command_name() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 777 0";
        let fields = stat_fields(stat).unwrap();
        assert_eq!(fields[0], "S");
        assert_eq!(fields[19], "777");
    }

    #[tokio::test]
    async fn port_check_sees_a_listener_and_a_closed_port() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(port_open(ip, port, Duration::from_millis(500)).await);
        drop(listener);
        assert!(!port_open(ip, port, Duration::from_millis(500)).await);
    }
}
