//! Acknowledged means loaded, on real JVMs: a second copy of the example cluster
//! (examples/kafka/) in namespace `kafka-j` of the bed, its controllers re-reading observer.ids
//! only every 30 s (`KAFKA_OBSERVER_IDS_TTL_MS=30000`, directory watch off with
//! `KAFKA_OBSERVER_IDS_WATCH=false`), an ObserverSet `kafka-j/kafka` and the
//! bed's operator. A promotion is superseded by a demotion right after the controllers' JVMs
//! reported it, so at least one controller's JVM loads the demotion's revision close to 30 s after
//! its file holds it. Asserted for every revision: when the brokers' ConfigMap changes, every
//! controller's agent already relays a JVM report of that revision; and for the demotion: the
//! controllers' JVM reports lag their files by up to the TTL (at least 10 s for one of them), and
//! the brokers' write waits for the JVMs, not for the files.
//!
//! Heavy (a second Kafka: 3 controllers and 4 brokers on the 2-core node), so it runs only with
//! `KOO_JVM_ACK_TEST=1`; otherwise it prints a skip line. It brings `kafka-j` up itself
//! (`KOO_KAFKA_NAMESPACE=kafka-j e2e/testbed/kafka.sh up`) when it is not running and takes its
//! workloads down at the end (`kafka.sh down`: claims and volumes kept) unless
//! `KOO_JVM_ACK_KEEP=1`. It needs the bed's operator built from this tree (it uses
//! `e2e/testbed/operator.sh up`, as integration.sh runs it) and the node's images rebuilt
//! (`e2e/build/images.sh build && images.sh import`): the example pods run the agent with
//! `--loaded-file` and the patch with `KAFKA_OBSERVER_IDS_LOADED_FILE`.

use crate::support;

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Api;
use serde_json::{json, Value};

use support::*;

const NS: &str = "kafka-j";
const OPT_IN: &str = "KOO_JVM_ACK_TEST";
const KEEP: &str = "KOO_JVM_ACK_KEEP";
const TTL: Duration = Duration::from_secs(30);
const T: Duration = Duration::from_secs(240);
/// The controllers' agents are asked this often.
const POLL: Duration = Duration::from_millis(150);
/// Appended to the ordering failures: the likeliest cause on a shared bed.
const OLD_OPERATOR: &str =
    " (is the bed's operator built from this tree? One older than the JVM report \
     acknowledges on the files: cargo build --release, then e2e/testbed/operator.sh restart)";

/// What the agents of the controllers said, first time each (pod, revision) was seen.
#[derive(Default, Debug)]
struct Timeline {
    /// (pod, revision) -> seconds since the test's epoch when the agent's file showed it.
    file: BTreeMap<(String, i64), f64>,
    /// (pod, revision) -> same, for the JVM's report.
    jvm: BTreeMap<(String, i64), f64>,
}

/// A write of the brokers' list as the test saw it, and what the controllers' agents relayed
/// from their JVMs at that moment.
#[derive(Clone, Debug)]
struct BrokerWrite {
    at: f64,
    revision: i64,
    controllers_jvm: Vec<(String, Option<i64>)>,
}

fn kafka_sh(bed: &Bed, args: &[&str]) {
    let out = Command::new("bash")
        .arg(repo_root().join("e2e/testbed/kafka.sh"))
        .args(args)
        .env("KOO_TESTBED", &bed.dir)
        .env("KOO_KAFKA_NAMESPACE", NS)
        .output()
        .expect("run e2e/testbed/kafka.sh");
    assert!(
        out.status.success(),
        "KOO_KAFKA_NAMESPACE={NS} kafka.sh {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn ready_pods(bed: &Bed) -> usize {
    let pods: Api<Pod> = Api::namespaced(bed.client.clone(), NS);
    let Ok(list) = pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=kafka"))
        .await
    else {
        return 0;
    };
    list.items
        .iter()
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .count()
}

/// The controllers re-read observer.ids every 30 s; waits until the StatefulSet rolled.
async fn slow_controllers(bed: &Bed) {
    let sets: Api<StatefulSet> = Api::namespaced(bed.client.clone(), NS);
    let patch = json!({"spec": {"template": {"spec": {"containers": [{
        "name": "kafka",
        "env": [
            {"name": "KAFKA_OBSERVER_IDS_TTL_MS", "value": TTL.as_millis().to_string()},
            // Without the directory watch, a JVM re-reads its file only every TTL.
            {"name": "KAFKA_OBSERVER_IDS_WATCH", "value": "false"}
        ]
    }]}}}});
    sets.patch(
        "kafka-controller",
        &PatchParams::default(),
        &Patch::Strategic(&patch),
    )
    .await
    .expect("patch the controllers' TTL");
    wait_for(T, "the controllers rolled with a 30 s TTL", || {
        let sets = sets.clone();
        async move {
            let set = sets.get("kafka-controller").await.ok()?;
            let s = set.status?;
            let rolled = s.observed_generation.is_some()
                && s.observed_generation == set.metadata.generation
                && s.current_revision.is_some()
                && s.current_revision == s.update_revision
                && s.updated_replicas == Some(3)
                && s.ready_replicas == Some(3);
            rolled.then_some(())
        }
    })
    .await;
    wait_for(T, &format!("7 pods Ready in {NS}"), || async {
        (ready_pods(bed).await == 7).then_some(())
    })
    .await;
}

async fn bootstrap(bed: &Bed) -> String {
    let services: Api<Service> = Api::namespaced(bed.client.clone(), NS);
    let ip = services
        .get("kafka-bootstrap")
        .await
        .expect("Service kafka-bootstrap")
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("a ClusterIP");
    format!("{ip}:9092")
}

/// The example ObserverSet for `kafka-j`, Manual policy, `promoted` as given.
async fn observer_set(bed: &Bed, promoted: &[i32]) -> Value {
    let mut v = bed.example_observer_set();
    v["metadata"]["namespace"] = json!(NS);
    v["spec"]["kafka"]["bootstrapServers"] = json!(bootstrap(bed).await);
    v["spec"]["promotion"]["policy"] = json!("Manual");
    v["spec"]["promotion"]["promoted"] = json!(promoted);
    v["spec"]["rollout"]["timeout"] = json!("180s");
    v
}

/// `(pod, agent address)` of the controllers as they are now.
async fn controller_agents(bed: &Bed) -> Vec<(String, String)> {
    let pods: Api<Pod> = Api::namespaced(bed.client.clone(), NS);
    let list = pods
        .list(&ListParams::default().labels("app.kubernetes.io/component=controller"))
        .await
        .expect("list the controllers");
    let mut out: Vec<(String, String)> = list
        .items
        .iter()
        .filter_map(|p| {
            let ip = p.status.as_ref()?.pod_ip.clone()?;
            Some((p.metadata.name.clone()?, format!("{ip}:9180")))
        })
        .collect();
    out.sort();
    assert_eq!(out.len(), 3, "three controllers with an IP: {out:?}");
    out
}

fn revision(v: &Value) -> Option<i64> {
    v.get("revision").and_then(Value::as_i64)
}

/// Waits until `kafka-j/kafka` is Ready with `ids` in both lists; returns its revision.
async fn ready_with(bed: &Bed, ids: &[i32]) -> i64 {
    let sets = bed.observer_sets(NS);
    let cms = bed.config_maps(NS);
    wait_for(T, &format!("{NS}/kafka Ready with {ids:?}"), || {
        let (sets, cms) = (sets.clone(), cms.clone());
        async move {
            let status = status_of(&sets, "kafka").await;
            if phase(&status) != "Ready" || status["effectiveObservers"] != json!(ids) {
                return None;
            }
            for role in ["controller", "broker"] {
                let cm = get_cm(&cms, &format!("kafka-observers-{role}")).await?;
                if listed_ids(&cm)? != ids {
                    return None;
                }
            }
            status["revision"].as_i64()
        }
    })
    .await
}

async fn set_promoted(bed: &Bed, promoted: &[i32]) {
    apply_observer_set(&bed.observer_sets(NS), &observer_set(bed, promoted).await).await;
}

/// StepAcknowledged Events of `kafka-j/kafka` (their text says what the acknowledgement rests on).
async fn step_notes(bed: &Bed) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(bed.client.clone(), NS);
    let list = events
        .list(&ListParams::default())
        .await
        .expect("list Events");
    list.items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("RoleAcknowledged"))
        .filter_map(|e| e.note)
        .collect()
}

#[tokio::test]
async fn brokers_wait_until_the_controllers_jvms_report_the_revision() {
    let Some(bed) = bed().await else { return };
    if std::env::var(OPT_IN).ok().as_deref() != Some("1") {
        println!(
            "SKIP brokers_wait_until_the_controllers_jvms_report_the_revision: {OPT_IN}=1 runs it (a second Kafka in namespace {NS}, controllers with a 30 s observer.ids TTL)"
        );
        return;
    }
    let epoch = Instant::now();
    let secs = move || epoch.elapsed().as_secs_f64();

    if ready_pods(&bed).await < 7 {
        kafka_sh(&bed, &["up"]);
    }
    eprintln!("{NS}: 7 pods Ready after {:.1} s", secs());
    slow_controllers(&bed).await;
    eprintln!("{NS}: controllers on a 30 s TTL after {:.1} s", secs());
    bed.operator("up");

    set_promoted(&bed, &[]).await;
    let base = ready_with(&bed, &[4]).await;
    eprintln!("{NS}/kafka Ready at revision {base} after {:.1} s", secs());

    // The controllers' agents, polled throughout; the brokers' list, watched.
    let agents = controller_agents(&bed).await;
    let timeline = Arc::new(Mutex::new(Timeline::default()));
    let writes = Arc::new(Mutex::new(Vec::<BrokerWrite>::new()));
    let poller = {
        let (agents, timeline) = (agents.clone(), timeline.clone());
        tokio::spawn(async move {
            loop {
                for (pod, addr) in &agents {
                    let Some(r) = agent_snapshot(addr).await else {
                        continue;
                    };
                    let at = secs();
                    let mut t = timeline.lock().unwrap();
                    if let Some(rev) = revision(&r) {
                        t.file.entry((pod.clone(), rev)).or_insert(at);
                    }
                    if let Some(rev) = revision(&r["jvm"]) {
                        t.jvm.entry((pod.clone(), rev)).or_insert(at);
                    }
                }
                tokio::time::sleep(POLL).await;
            }
        })
    };
    let watch = {
        let (agents, writes) = (agents.clone(), writes.clone());
        let api = bed.config_maps(NS);
        let cfg = watcher::Config::default().fields("metadata.name=kafka-observers-broker");
        tokio::spawn(async move {
            let mut stream = watcher(api, cfg).applied_objects().boxed();
            let mut last = None;
            while let Some(ev) = stream.next().await {
                let Ok(cm) = ev else { continue };
                let at = secs();
                let Some(rev) = revision_of(&cm).map(|r| r as i64) else {
                    continue;
                };
                if last == Some(rev) {
                    continue;
                }
                last = Some(rev);
                // Asked right away: a JVM report only moves forward, so what the agents say now
                // is at most what they said when the operator decided to write.
                let mut controllers_jvm = Vec::new();
                for (pod, addr) in &agents {
                    let r = agent_snapshot(addr).await.unwrap_or(Value::Null);
                    controllers_jvm.push((pod.clone(), revision(&r["jvm"])));
                }
                writes.lock().unwrap().push(BrokerWrite {
                    at,
                    revision: rev,
                    controllers_jvm,
                });
            }
        })
    };

    // Promotion (revision n) ...
    let n = base + 1;
    set_promoted(&bed, &[4]).await;
    wait_for(
        T,
        &format!("every controller's JVM reports revision {n}"),
        || {
            let t = timeline.clone();
            let agents = agents.clone();
            async move {
                let t = t.lock().unwrap();
                agents
                    .iter()
                    .all(|(pod, _)| t.jvm.contains_key(&(pod.clone(), n)))
                    .then_some(())
            }
        },
    )
    .await;
    // ... superseded by a demotion (revision n + 1) at once: the controller whose JVM read last
    // reads again only a TTL later, so its report of n + 1 lags its file by most of the TTL.
    set_promoted(&bed, &[]).await;
    let last = ready_with(&bed, &[4]).await;
    assert_eq!(last, n + 1, "the demotion superseded the promotion");
    // The watch and the poller record asynchronously: wait until they hold what the checks
    // below read (the brokers' write of n + 1, every controller's file and JVM at n + 1).
    let last = n + 1;
    wait_for(
        T,
        &format!("the watch and the poller to record revision {last}"),
        || {
            let (t, writes, agents) = (timeline.clone(), writes.clone(), agents.clone());
            async move {
                let t = t.lock().unwrap();
                let written = writes.lock().unwrap().iter().any(|w| w.revision == last);
                (written
                    && agents.iter().all(|(pod, _)| {
                        let k = (pod.clone(), last);
                        t.file.contains_key(&k) && t.jvm.contains_key(&k)
                    }))
                .then_some(())
            }
        },
    )
    .await;
    poller.abort();
    watch.abort();
    // Diagnostics only: the Recorder folds repeated Events into a series that keeps its first note.
    eprintln!("RoleAcknowledged notes: {:?}", step_notes(&bed).await);

    let t = timeline.lock().unwrap();
    let writes = writes.lock().unwrap().clone();
    eprintln!("controllers (test clock, s): file {:?}", t.file);
    eprintln!("controllers (test clock, s): jvm  {:?}", t.jvm);
    eprintln!("brokers' list writes: {writes:?}");

    for w in &writes {
        for (pod, jvm) in &w.controllers_jvm {
            assert!(
                jvm.is_some_and(|j| j >= w.revision),
                "the brokers' list got revision {} while {pod}'s JVM reported {jvm:?}{OLD_OPERATOR}",
                w.revision
            );
        }
    }
    for rev in [n, n + 1] {
        let Some(w) = writes.iter().find(|w| w.revision == rev) else {
            eprintln!("revision {rev}: never written to the brokers (superseded)");
            continue;
        };
        let jvm_max = agents
            .iter()
            .map(|(pod, _)| t.jvm.get(&(pod.clone(), rev)).copied().unwrap_or(f64::MAX))
            .fold(f64::MIN, f64::max);
        // The watch event and the agents' poll are two clocks of one test: 0.5 s of slack.
        assert!(
            w.at + 0.5 >= jvm_max,
            "revision {rev}: brokers' list at {:.2} s, before the last controller JVM report at {jvm_max:.2} s{OLD_OPERATOR}",
            w.at
        );
    }

    let rev = n + 1;
    let mut lags = Vec::new();
    for (pod, _) in &agents {
        let file = t.file[&(pod.clone(), rev)];
        let jvm = t.jvm[&(pod.clone(), rev)];
        eprintln!(
            "revision {rev}: {pod} file at {file:.2} s, JVM at {jvm:.2} s: lag {:.2} s",
            jvm - file
        );
        assert!(
            jvm - file <= TTL.as_secs_f64() + 5.0,
            "{pod}: its JVM reported revision {rev} {:.1} s after its file, more than the 30 s TTL",
            jvm - file
        );
        lags.push(jvm - file);
    }
    let max_lag = lags.iter().copied().fold(0.0, f64::max);
    let at = |m: &BTreeMap<(String, i64), f64>| {
        agents
            .iter()
            .map(|(pod, _)| m[&(pod.clone(), rev)])
            .fold(f64::MIN, f64::max)
    };
    let (file_max, jvm_max) = (at(&t.file), at(&t.jvm));
    let w = writes
        .iter()
        .find(|w| w.revision == rev)
        .expect("the demotion reached the brokers");
    eprintln!(
        "revision {rev}: last controller file at {file_max:.2} s, last controller JVM at {jvm_max:.2} s \
         ({:.2} s later; max lag of one controller {max_lag:.2} s), brokers' list at {:.2} s ({:.2} s after \
         the last file); test took {:.1} s",
        jvm_max - file_max,
        w.at,
        w.at - file_max,
        secs()
    );
    // The point: with a 30 s TTL the JVMs run well behind their files, and the brokers' list
    // waits for the JVMs (an acknowledgement on the files would have written it ~1 s after them).
    assert!(
        jvm_max - file_max >= 10.0,
        "the last controller JVM reported revision {rev} only {:.1} s after the last controller file: \
         the test did not catch a JVM between two reads of its 30 s TTL (lags {lags:?})",
        jvm_max - file_max
    );
    assert!(
        w.at + 0.5 >= jvm_max,
        "revision {rev}: the brokers' list came {:.1} s after the controllers' files, before the last JVM report ({:.1} s after them){OLD_OPERATOR}",
        w.at - file_max,
        jvm_max - file_max
    );
    drop(t);

    if std::env::var(KEEP).ok().as_deref() != Some("1") {
        kafka_sh(&bed, &["down"]);
        eprintln!("{NS}: workloads down after {:.1} s", secs());
    }
}
