//! The plugin's commands: the I/O around the pure checks and the replica table.

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::Utc;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use super::{render_table, replica_rows, Cli, CliError, Command, Output};
use crate::crd::{validate, ObserverSet, ValidatedObserverSet};
use crate::kafka::{elect_leaders, ConnectionSettings, ElectionKind, KafkaWatcher, WatcherOptions};
use crate::policy::{
    check_demotion, check_promotion, led_by, CheckReport, ClusterSnapshot, PolicyConfig,
};

/// Runs one plugin invocation.
pub async fn run(cli: Cli) -> Result<(), CliError> {
    let client = kube::Client::try_default().await?;
    let namespace = cli
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_string());
    let api: Api<ObserverSet> = Api::namespaced(client, &namespace);
    let obs = find(&api, &namespace, cli.observerset.as_deref()).await?;
    match cli.command {
        Command::Status { output } => status(&cli, &obs, output).await,
        Command::Promote { node_id, force } => promote(&cli, &api, &obs, node_id, force).await,
        Command::Demote {
            node_id,
            move_leadership,
            force,
        } => demote(&cli, &api, &obs, node_id, move_leadership, force).await,
        Command::Plan { output } => plan(&obs, output),
    }
}

async fn find(
    api: &Api<ObserverSet>,
    namespace: &str,
    name: Option<&str>,
) -> Result<ObserverSet, CliError> {
    if let Some(name) = name {
        return Ok(api.get(name).await?);
    }
    let mut all = api.list(&ListParams::default()).await?.items;
    match all.len() {
        0 => Err(CliError::NotFound(namespace.to_string())),
        1 => Ok(all.remove(0)),
        _ => Err(CliError::Ambiguous {
            namespace: namespace.to_string(),
            names: all
                .iter()
                .filter_map(|o| o.metadata.name.clone())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// The validated model and the engine's config as the operator would build them.
fn policy_config(obs: &ObserverSet) -> Result<(ValidatedObserverSet, PolicyConfig), CliError> {
    let validated = validate(obs).map_err(|e| CliError::Invalid(e.to_string()))?;
    let acknowledged = obs
        .status
        .as_ref()
        .map(|s| s.effective_observers.iter().copied().collect())
        .unwrap_or_default();
    let mut config = PolicyConfig::from_validated(&validated, acknowledged)
        .map_err(|e| CliError::Invalid(e.to_string()))?;
    // Automatic promotions count as promoted for the checks and the table.
    config.promoted.extend(auto_promoted(obs));
    Ok((validated, config))
}

fn auto_promoted(obs: &ObserverSet) -> BTreeSet<i32> {
    obs.status
        .iter()
        .flat_map(|s| s.auto_promotions.iter().map(|p| p.node_id))
        .collect()
}

async fn watcher(cli: &Cli, validated: &ValidatedObserverSet) -> Result<KafkaWatcher, CliError> {
    let settings = match &cli.bootstrap {
        Some(b) => ConnectionSettings::from_bootstrap(b),
        None if validated.kafka.tls.is_some() || validated.kafka.sasl.is_some() => {
            return Err(CliError::SecureConnection);
        }
        None => ConnectionSettings::plaintext(validated.kafka.bootstrap_servers.iter().cloned()),
    };
    Ok(KafkaWatcher::new(&settings, WatcherOptions::default())?)
}

async fn status(cli: &Cli, obs: &ObserverSet, output: Output) -> Result<(), CliError> {
    let (validated, config) = policy_config(obs)?;
    let snapshot = watcher(cli, &validated).await?.scan().await;
    if let crate::policy::SourceHealth::Unhealthy { reason } = &snapshot.source {
        return Err(CliError::Kafka(crate::kafka::KafkaError::Metadata(
            reason.clone(),
        )));
    }
    let rows = replica_rows(
        &snapshot,
        &config.observers,
        &config.promoted,
        config.max_lag_messages,
    );
    match output {
        Output::Json => {
            let doc = json!({"observerSet": obs.metadata.name, "takenAt": snapshot.taken_at, "replicas": rows});
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
        Output::Table => print!("{}", render_table(&rows)),
    }
    Ok(())
}

fn enforce(
    report: &CheckReport,
    action: &'static str,
    node_id: i32,
    force: bool,
) -> Result<(), CliError> {
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    if report.passed() {
        return Ok(());
    }
    if force {
        for p in &report.problems {
            eprintln!("warning (forced): {p}");
        }
        return Ok(());
    }
    Err(CliError::Refused {
        action,
        node_id,
        problems: report.problems.join("\n  - "),
    })
}

async fn promote(
    cli: &Cli,
    api: &Api<ObserverSet>,
    obs: &ObserverSet,
    node_id: i32,
    force: bool,
) -> Result<(), CliError> {
    let (validated, config) = policy_config(obs)?;
    let snapshot = watcher(cli, &validated).await?.scan().await;
    enforce(
        &check_promotion(&snapshot, &config, node_id, Utc::now()),
        "promote",
        node_id,
        force,
    )?;
    edit_promoted(api, obs, node_id, |promoted| {
        promoted.insert(node_id);
    })
    .await?;
    println!(
        "broker {node_id} promoted; the operator rolls the change out (controllers first, then brokers)"
    );
    Ok(())
}

async fn demote(
    cli: &Cli,
    api: &Api<ObserverSet>,
    obs: &ObserverSet,
    node_id: i32,
    move_leadership: bool,
    force: bool,
) -> Result<(), CliError> {
    let (validated, config) = policy_config(obs)?;
    let mut watcher = watcher(cli, &validated).await?;
    let mut snapshot = watcher.scan().await;
    if move_leadership {
        snapshot = move_leadership_off(&mut watcher, snapshot, node_id).await?;
    }
    let mut config = config;
    // Only hand promotions are demoted here; automatic ones belong to the operator.
    config.promoted = obs.spec.promotion.promoted.iter().copied().collect();
    enforce(
        &check_demotion(&snapshot, &config, node_id, Utc::now()),
        "demote",
        node_id,
        force,
    )?;
    edit_promoted(api, obs, node_id, |promoted| {
        promoted.remove(&node_id);
    })
    .await?;
    println!(
        "broker {node_id} demoted; the operator rolls the change out (controllers first, then brokers)"
    );
    Ok(())
}

/// Runs a preferred leader election for the partitions `node_id` leads and waits (up to 30 s)
/// until the metadata shows it leads none of them.
async fn move_leadership_off(
    watcher: &mut KafkaWatcher,
    snapshot: ClusterSnapshot,
    node_id: i32,
) -> Result<ClusterSnapshot, CliError> {
    let led = led_by(&snapshot, node_id);
    if led.is_empty() {
        return Ok(snapshot);
    }
    for outcome in elect_leaders(
        watcher.admin(),
        ElectionKind::Preferred,
        led,
        Duration::from_secs(30),
    )
    .await?
    {
        if let Err(e) = outcome.result {
            eprintln!(
                "warning: preferred election for {} failed: {e}",
                outcome.partition
            );
        }
    }
    let mut latest = snapshot;
    for _ in 0..30 {
        latest = watcher.scan().await;
        if led_by(&latest, node_id).is_empty() {
            return Ok(latest);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let still: Vec<String> = led_by(&latest, node_id)
        .iter()
        .map(ToString::to_string)
        .collect();
    Err(CliError::LeadershipStuck {
        node_id,
        partitions: still.join(", "),
    })
}

/// Writes `spec.promotion.promoted` as `edit` changes it, guarded by the resourceVersion read, so a
/// concurrent edit is never overwritten. The operator's own status writes also move the
/// resourceVersion, so a conflict re-reads the object, re-validates it (the node must still be a
/// declared observer) and applies the same edit to the fresh list, a few times at most.
async fn edit_promoted(
    api: &Api<ObserverSet>,
    obs: &ObserverSet,
    node_id: i32,
    edit: impl Fn(&mut BTreeSet<i32>),
) -> Result<(), CliError> {
    const ATTEMPTS: usize = 5;
    let name = obs.metadata.name.clone().unwrap_or_default();
    let mut current = obs.clone();
    for attempt in 1..=ATTEMPTS {
        let mut promoted: BTreeSet<i32> = current.spec.promotion.promoted.iter().copied().collect();
        edit(&mut promoted);
        let patch = json!({
            "metadata": {"resourceVersion": current.metadata.resource_version},
            "spec": {"promotion": {"promoted": promoted.into_iter().collect::<Vec<_>>()}}
        });
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 && attempt < ATTEMPTS => {
                current = api.get(&name).await?;
                policy_config(&current)?;
                if !current.spec.observers.contains(&node_id) {
                    return Err(CliError::Invalid(format!(
                        "node {node_id} is no longer a declared observer of {name}: the ObserverSet changed while this command ran"
                    )));
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    unreachable!("the last attempt returns")
}

fn plan(obs: &ObserverSet, output: Output) -> Result<(), CliError> {
    let status = obs.status.clone().unwrap_or_default();
    if output == Output::Json {
        let doc = json!({"plan": status.plan, "autoPromotions": status.auto_promotions});
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    match &status.plan {
        None => {
            println!("no plan yet (the operator has not decided anything for this ObserverSet)")
        }
        Some(plan) => {
            println!(
                "plan at {}{}",
                plan.at.0,
                if plan.dry_run {
                    " (dry run: not acted on)"
                } else {
                    ""
                }
            );
            if plan.actions.is_empty() {
                println!("  nothing to do");
            }
            for a in &plan.actions {
                println!("  {:?} broker {}: {}", a.action, a.node_id, a.reason);
            }
        }
    }
    for p in &status.auto_promotions {
        println!(
            "automatically promoted: broker {} at {}: {}",
            p.node_id, p.at.0, p.reason
        );
    }
    Ok(())
}
