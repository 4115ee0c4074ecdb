//! Operator benchmark against the bed's real apiserver (run by e2e/bench/operator.sh).
//!
//! Creates N ObserverSets in a namespace of their own, each naming pods that do not exist
//! (selectors match nothing), so a step has no pod to wait for: what is measured is the
//! operator's own pipeline (watch, validate, plan, write two ConfigMaps, status), not the kubelet
//! or the agents. Then changes one ObserverSet's spec at a time and times, from sending the patch
//! until this process sees both of its ConfigMaps with the new list through a
//! watch: first each change on an idle operator (a pause before it), then back to back.
//! Prints p50/p90/p99/max of both; also the time to first write all N, and a burst (all N
//! changed at once, time until all 2N ConfigMaps follow).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Parser;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, Config};
use serde_json::json;

use kafka_observer_operator::crd::ObserverSet;
use kafka_observer_operator::observer_ids;

#[derive(Parser)]
struct Args {
    /// The bed's admin kubeconfig.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// The ObserverSets' `spec.kafka.bootstrapServers`: the bed's Kafka bootstrap address
    /// (`.testbed/kafka/bootstrap`, the kafka-bootstrap Service's ClusterIP:9092), reachable by
    /// the operator running on the machine.
    #[arg(long)]
    bootstrap: String,
    #[arg(long, default_value = "koo-bench")]
    namespace: String,
    /// How many ObserverSets to create.
    #[arg(long, default_value_t = 200)]
    sets: usize,
    /// How many single-spec-change samples to time.
    #[arg(long, default_value_t = 100)]
    samples: usize,
    /// Pause before each change of the idle-operator samples (the back-to-back ones follow).
    #[arg(long, default_value_t = 250)]
    pause_ms: u64,
    /// Give up on one sample after this many seconds.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// Keep the namespace afterwards (the shell reads the operator's RSS at N sets, then deletes it).
    #[arg(long)]
    keep: bool,
}

/// Latest ids per ConfigMap name, as seen through the watch.
type Seen = Arc<Mutex<HashMap<String, Vec<i32>>>>;

fn ids_of(cm: &ConfigMap) -> Option<Vec<i32>> {
    let text = cm.data.as_ref()?.get("observer.ids")?;
    Some(observer_ids::parse_ids(text).into_iter().collect())
}

fn observer_set(name: &str, observers: &[i32], bootstrap: &str) -> anyhow::Result<ObserverSet> {
    let v = json!({
        "apiVersion": "kafkaobserver.io/v1alpha1", "kind": "ObserverSet",
        "metadata": {"name": name},
        "spec": {
            "kafka": {"bootstrapServers": bootstrap},
            "nodes": {
                "controllers": {"selector": {"matchLabels": {"koo-bench/set": name, "koo-bench/role": "controller"}}, "nodeId": {"ordinalOffset": 101}},
                "brokers": {"selector": {"matchLabels": {"koo-bench/set": name, "koo-bench/role": "broker"}}, "nodeId": {"ordinalOffset": 1}}
            },
            "observers": observers,
            "promotion": {"policy": "Manual"},
            "rollout": {"acknowledgement": "Agent", "timeout": "30s"}
        }
    });
    Ok(serde_json::from_value(v)?)
}

fn watch_configmaps(api: Api<ConfigMap>, seen: Seen) {
    tokio::spawn(async move {
        let cfg = watcher::Config::default()
            .labels("app.kubernetes.io/managed-by=kafka-observer-operator");
        let mut stream = watcher(api, cfg).applied_objects().boxed();
        while let Some(ev) = stream.next().await {
            if let Ok(cm) = ev {
                if let (Some(name), Some(ids)) = (cm.metadata.name.clone(), ids_of(&cm)) {
                    seen.lock().unwrap().insert(name, ids);
                }
            }
        }
    });
}

fn written(seen: &Seen, set: &str, ids: &[i32]) -> bool {
    let seen = seen.lock().unwrap();
    ["controller", "broker"].iter().all(|r| {
        seen.get(&format!("{set}-observers-{r}"))
            .is_some_and(|v| v == ids)
    })
}

async fn wait_written(
    seen: &Seen,
    sets: &[String],
    ids: &[i32],
    timeout: Duration,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    while !sets.iter().all(|s| written(seen, s, ids)) {
        if start.elapsed() > timeout {
            let missing = sets.iter().filter(|s| !written(seen, s, ids)).count();
            bail!(
                "{missing} of {} ObserverSets not written with {ids:?} after {timeout:?}",
                sets.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Ok(start.elapsed())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let kc = Kubeconfig::read_from(&args.kubeconfig).context("read kubeconfig")?;
    let client =
        Client::try_from(Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?)?;
    let ns_api: Api<Namespace> = Api::all(client.clone());
    if ns_api.get_opt(&args.namespace).await?.is_some() {
        bail!(
            "namespace {} exists (a previous run?): delete it first",
            args.namespace
        );
    }
    ns_api
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": args.namespace}}))?,
        )
        .await?;
    let sets_api: Api<ObserverSet> = Api::namespaced(client.clone(), &args.namespace);
    let seen: Seen = Arc::default();
    watch_configmaps(
        Api::namespaced(client.clone(), &args.namespace),
        seen.clone(),
    );
    let timeout = Duration::from_secs(args.timeout);

    let names: Vec<String> = (0..args.sets).map(|i| format!("bench-{i:03}")).collect();
    let start = Instant::now();
    for name in &names {
        sets_api
            .create(
                &PostParams::default(),
                &observer_set(name, &[4], &args.bootstrap)?,
            )
            .await?;
    }
    let created = start.elapsed();
    let all = wait_written(&seen, &names, &[4], timeout.max(Duration::from_secs(300))).await?;
    println!(
        "BENCH create {} ObserverSets: {} ms to create, all {} ConfigMaps written {} ms after the last create ({} ms total)",
        args.sets,
        ms(created),
        2 * args.sets,
        ms(all),
        ms(created + all)
    );

    // Single changes, one at a time: spec change to both ConfigMaps written. First each change
    // on an idle operator (the previous change's final status write, Events and follow-up
    // reconcile, about 40-70 ms on the bed, are done before it), which is the latency of one
    // change; then back to back, where each change also waits behind that tail of the one before.
    let pp = PatchParams::default();
    let mut state: HashMap<String, bool> = HashMap::new();
    let mut offset = 0;
    for (label, pause) in [
        (
            "one change on an idle operator",
            Duration::from_millis(args.pause_ms),
        ),
        ("back to back", Duration::ZERO),
    ] {
        let mut lat = Vec::with_capacity(args.samples);
        for i in offset..offset + args.samples {
            let name = &names[(i * 7919) % names.len()];
            let flip = state.entry(name.clone()).or_insert(false);
            *flip = !*flip;
            let ids: Vec<i32> = if *flip { vec![4, 5] } else { vec![4] };
            tokio::time::sleep(pause).await;
            let t = Instant::now();
            sets_api
                .patch(
                    name,
                    &pp,
                    &Patch::Merge(json!({"spec": {"observers": ids}})),
                )
                .await?;
            wait_written(&seen, std::slice::from_ref(name), &ids, timeout).await?;
            lat.push(t.elapsed());
        }
        offset += args.samples;
        lat.sort();
        println!(
            "BENCH reconcile latency, {label} (spec change -> both ConfigMaps written, {} sets, {} samples): p50 {} ms, p90 {} ms, p99 {} ms, max {} ms",
            args.sets,
            lat.len(),
            ms(percentile(&lat, 0.5)),
            ms(percentile(&lat, 0.9)),
            ms(percentile(&lat, 0.99)),
            ms(*lat.last().unwrap())
        );
    }

    // Burst: every set changes at once.
    for name in &names {
        let flipped = state.get(name).copied().unwrap_or(false);
        if flipped {
            sets_api
                .patch(
                    name,
                    &pp,
                    &Patch::Merge(json!({"spec": {"observers": [4]}})),
                )
                .await?;
        }
    }
    wait_written(&seen, &names, &[4], timeout.max(Duration::from_secs(300))).await?;
    let t = Instant::now();
    for name in &names {
        sets_api
            .patch(
                name,
                &pp,
                &Patch::Merge(json!({"spec": {"observers": [4, 6]}})),
            )
            .await?;
    }
    let sent = t.elapsed();
    let all = wait_written(
        &seen,
        &names,
        &[4, 6],
        timeout.max(Duration::from_secs(300)),
    )
    .await?;
    println!(
        "BENCH burst: {} spec changes sent in {} ms, all {} ConfigMaps written {} ms after the first change",
        args.sets,
        ms(sent),
        2 * args.sets,
        ms(sent + all)
    );

    if !args.keep {
        ns_api
            .delete(&args.namespace, &DeleteParams::default())
            .await?;
    }
    Ok(())
}
