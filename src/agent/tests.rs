//! The agent end to end: a kubelet-style atomic-writer directory on disk, the real agent, real
//! HTTP on an ephemeral loopback port.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::*;
use crate::http::tests::get;

/// Writes a ConfigMap volume the way the kubelet's atomic writer does: a fresh `..<ts>`
/// directory, a `..data_tmp` symlink renamed over `..data`, the key a symlink through `..data`.
struct AtomicDir {
    root: PathBuf,
    generation: u32,
}

impl AtomicDir {
    fn new(root: &Path) -> Self {
        std::fs::create_dir_all(root).unwrap();
        Self {
            root: root.to_owned(),
            generation: 0,
        }
    }

    fn publish(&mut self, content: &str) {
        self.generation += 1;
        let old = self.root.join(format!("..gen_{}", self.generation - 1));
        let name = format!("..gen_{}", self.generation);
        let new = self.root.join(&name);
        std::fs::create_dir(&new).unwrap();
        std::fs::write(new.join("observer.ids"), content).unwrap();
        let tmp = self.root.join("..data_tmp");
        std::os::unix::fs::symlink(&name, &tmp).unwrap();
        std::fs::rename(&tmp, self.root.join("..data")).unwrap();
        let visible = self.root.join("observer.ids");
        if std::fs::symlink_metadata(&visible).is_err() {
            std::os::unix::fs::symlink("..data/observer.ids", &visible).unwrap();
        }
        if old.exists() {
            std::fs::remove_dir_all(old).unwrap();
        }
    }
}

fn managed(revision: i64, ids: &str) -> String {
    format!(
        "# Managed by kafka-observer-operator: ObserverSet kafka/kafka, revision {revision}\n\
         # One observer node id per line. Do not edit: changes are reverted.\n{ids}"
    )
}

struct Running {
    addr: SocketAddr,
    shutdown: Shutdown,
    task: tokio::task::JoinHandle<Result<(), AgentError>>,
}

async fn start(dir: &Path, resync: Duration) -> Running {
    start_with(dir, resync, None).await
}

async fn start_with(dir: &Path, resync: Duration, loaded_file: Option<PathBuf>) -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = Shutdown::new();
    let args = AgentArgs {
        dir: dir.to_owned(),
        key: "observer.ids".into(),
        listen: addr,
        resync,
        loaded_file,
    };
    let task = tokio::spawn(serve(args, listener, shutdown.clone()));
    Running {
        addr,
        shutdown,
        task,
    }
}

async fn report(addr: SocketAddr) -> serde_json::Value {
    let (status, body) = get(addr, "/observer-ids").await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// Polls until `accept` holds or `limit` passes; returns how long it took.
async fn wait_for(
    addr: SocketAddr,
    limit: Duration,
    accept: impl Fn(&serde_json::Value) -> bool,
) -> Duration {
    let started = Instant::now();
    loop {
        let body = report(addr).await;
        if accept(&body) {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < limit,
            "not seen within {limit:?}; last report: {body}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_swapped_data_link_is_reported_through_inotify() {
    let tmp = tempfile::tempdir().unwrap();
    let mut volume = AtomicDir::new(tmp.path());
    volume.publish(&managed(7, "4\n"));
    // A resync of 600 s: only inotify can report within the 30 s limit below. The limit is
    // generous on purpose (a loaded machine); how fast it is, is printed, not asserted.
    let agent = start(tmp.path(), Duration::from_secs(600)).await;

    let first = report(agent.addr).await;
    assert!(first["jvm"].is_null(), "no --loaded-file: {first}");
    assert_eq!(first["revision"], 7);
    assert_eq!(first["observerSet"], "kafka/kafka");
    assert_eq!(first["ids"], serde_json::json!([4]));
    assert_eq!(first["source"], "file");

    volume.publish(&managed(8, ""));
    let took = wait_for(agent.addr, Duration::from_secs(30), |r| r["revision"] == 8).await;
    let second = report(agent.addr).await;
    assert_eq!(second["ids"], serde_json::json!([]));
    assert_ne!(second["sha256"], first["sha256"]);
    // The agent's sequence orders its reports exactly (two millisecond `seenAt` stamps of quick
    // changes may be equal): the first read is 1, the swap the one change after it.
    assert_eq!(
        (first["sequence"].as_u64(), second["sequence"].as_u64()),
        (Some(1), Some(2))
    );
    eprintln!("revision 8 reported {took:?} after the ..data swap");

    std::fs::remove_file(tmp.path().join("observer.ids")).unwrap();
    wait_for(agent.addr, Duration::from_secs(30), |r| {
        r["source"] == "missing" && r["ids"].is_null() && r["revision"].is_null()
    })
    .await;

    let (status, body) = get(agent.addr, "/healthz").await;
    assert_eq!((status, body.as_str()), (200, "ok\n"));

    agent.shutdown.trigger();
    tokio::time::timeout(Duration::from_secs(2), agent.task)
        .await
        .expect("agent stops on shutdown")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_directory_mounted_after_start_is_picked_up_by_the_resync() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("observer");
    let agent = start(&dir, Duration::from_millis(100)).await;
    assert_eq!(report(agent.addr).await["source"], "missing");

    AtomicDir::new(&dir).publish(&managed(3, "4\n5\n"));
    wait_for(agent.addr, Duration::from_secs(30), |r| r["revision"] == 3).await;
    assert_eq!(report(agent.addr).await["ids"], serde_json::json!([4, 5]));

    agent.shutdown.trigger();
    agent.task.await.unwrap().unwrap();
}

#[test]
fn keys_must_be_plain_file_names() {
    assert!(parse_key("observer.ids").is_ok());
    for bad in ["", "a/b", "..", "."] {
        let err = parse_key(bad).unwrap_err();
        assert!(err.contains("plain file name"), "{err}");
    }
}

/// Writes the JVM's report the way the patch does: a temporary file renamed over the report.
fn jvm_writes(path: &Path, content: &str) {
    let tmp = path.with_file_name(".observer.ids.tmp");
    std::fs::write(&tmp, content).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[tokio::test]
async fn the_jvm_report_is_served_as_jvm_through_inotify() {
    let tmp = tempfile::tempdir().unwrap();
    let mut volume = AtomicDir::new(&tmp.path().join("observer"));
    volume.publish(&managed(7, "4\n"));
    let loaded_dir = tmp.path().join("observer-loaded");
    std::fs::create_dir(&loaded_dir).unwrap();
    let loaded = loaded_dir.join("observer.ids");
    // 600 s resync: only inotify can report within the limits below.
    let agent = start_with(
        &tmp.path().join("observer"),
        Duration::from_secs(600),
        Some(loaded.clone()),
    )
    .await;

    // The JVM has not written its report yet.
    let first = report(agent.addr).await;
    assert_eq!(first["revision"], 7);
    assert_eq!(first["jvm"]["source"], "missing", "{first}");
    assert!(first["jvm"]["revision"].is_null());
    assert!(first["reportedAt"].is_string());

    jvm_writes(&loaded, &managed(7, "4\n"));
    wait_for(agent.addr, Duration::from_secs(30), |r| {
        r["jvm"]["revision"] == 7
    })
    .await;
    let loaded7 = report(agent.addr).await;
    assert_eq!(loaded7["jvm"]["ids"], serde_json::json!([4]));
    assert_eq!(loaded7["jvm"]["observerSet"], "kafka/kafka");
    assert_eq!(loaded7["jvm"]["source"], "file");
    assert_eq!(loaded7["jvm"]["sha256"], loaded7["sha256"]);

    // The volume moves on first; the JVM's report follows one cache TTL later.
    volume.publish(&managed(8, ""));
    wait_for(agent.addr, Duration::from_secs(30), |r| r["revision"] == 8).await;
    assert_eq!(report(agent.addr).await["jvm"]["revision"], 7);
    jvm_writes(&loaded, &managed(8, ""));
    let took = wait_for(agent.addr, Duration::from_secs(30), |r| {
        r["jvm"]["revision"] == 8
    })
    .await;
    eprintln!("the JVM's revision 8 reported {took:?} after its rename");

    jvm_writes(&loaded, "# kafka-observer-patch loaded: source=empty\n");
    wait_for(agent.addr, Duration::from_secs(30), |r| {
        r["jvm"]["source"] == "empty"
    })
    .await;
    let empty = report(agent.addr).await;
    assert!(empty["jvm"]["revision"].is_null(), "{empty}");
    assert_eq!(empty["jvm"]["ids"], serde_json::json!([]));

    agent.shutdown.trigger();
    agent.task.await.unwrap().unwrap();
}

#[test]
fn a_loaded_file_must_name_a_file() {
    assert!(parse_loaded_file("/var/run/observer-loaded/observer.ids").is_ok());
    let err = parse_loaded_file("/").unwrap_err();
    assert!(err.contains("KAFKA_OBSERVER_IDS_LOADED_FILE"), "{err}");
}
