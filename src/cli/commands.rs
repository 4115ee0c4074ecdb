//! The plugin's commands: the I/O around the pure checks and views.

use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use regex::Regex;
use serde::Serialize;
use serde_json::{json, Value};

use super::memory::{operator_memory, OperatorMemory};
use super::{
    explain, members_view, plan_view, render_explain, render_members, render_plan, render_summary,
    render_table, replica_rows, summarize, Cli, CliError, Command, MemberRead, Output, Roles,
    StatusArgs, StatusFilter,
};
use crate::crd::{validate, ObserverSet, ValidatedObserverSet};
use crate::k8s::secrets::connection_settings;
use crate::kafka::{ConnectionSettings, ElectionKind, KafkaWatcher, WatcherOptions};
use crate::promotion::{
    assess, auto_promotions_in, check_demotion, check_promotion, led_by, CheckReport,
    ClusterSnapshot, Health, PolicyConfig, PolicyHistory, SourceHealth,
};
use crate::time_format::Rfc3339;

/// How long one member cluster's copy may take to read with `status --context`.
const MEMBER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs one plugin invocation.
pub async fn run(cli: Cli) -> Result<(), CliError> {
    if let Command::Status(args) = &cli.command {
        if !args.contexts.is_empty() {
            return status_across(&cli, args).await;
        }
    }
    let client = kube::Client::try_default().await?;
    let namespace = cli
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_string());
    let api: Api<ObserverSet> = Api::namespaced(client, &namespace);
    let obs = find(&api, &namespace, cli.observerset.as_deref()).await?;
    match cli.command {
        Command::Status(ref args) => status(&cli, &api, obs, args).await,
        Command::Promote { node_id, force } => promote(&cli, &api, &obs, node_id, force).await,
        Command::Demote {
            node_id,
            move_leadership,
            force,
        } => demote(&cli, &api, &obs, node_id, move_leadership, force).await,
        Command::Plan { output } => plan(&cli, &api, &obs, output).await,
        Command::Explain { node_id, output } => {
            explain_broker(&cli, &api, &obs, node_id, output).await
        }
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
    let mut config = PolicyConfig::from_validated(&validated, acknowledged);
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

/// A watcher of the set's cluster, connected as the operator connects: with TLS or SASL the
/// Secrets `spec.kafka` names are read from the set's namespace with the user's kubeconfig, each
/// only if it opted in to the set (`kafka::secret_opt_in`), as the operator reads them.
/// `--bootstrap` replaces all of it with a plaintext listener.
async fn watcher(
    cli: &Cli,
    api: &Api<ObserverSet>,
    obs: &ObserverSet,
    validated: &ValidatedObserverSet,
) -> Result<KafkaWatcher, CliError> {
    let settings = match &cli.bootstrap {
        Some(b) => ConnectionSettings::from_bootstrap(b),
        None => {
            let namespace = kube::ResourceExt::namespace(obs).unwrap_or_default();
            let name = kube::ResourceExt::name_any(obs);
            let client = api.clone().into_client();
            // The operator's rule, with the user's credentials: only Secrets that opted in.
            connection_settings(
                &client,
                &namespace,
                &name,
                &obs.spec.kafka,
                &validated.kafka,
            )
            .await?
        }
    };
    let mut watcher = KafkaWatcher::new(&settings, WatcherOptions::default())?;
    watcher.set_observers(obs.spec.observers.iter().copied());
    Ok(watcher)
}

/// The engine's config and history exactly as the automation builds them when its task starts:
/// `spec.promotion.promoted` only (automatic promotions are in the history), the history rebuilt
/// from `status.autoPromotions` and merged with `status.engineState` by the same rules.
struct EngineInputs {
    config: PolicyConfig,
    memory: OperatorMemory,
}

fn engine_inputs(obs: &ObserverSet, now: Timestamp) -> Result<EngineInputs, CliError> {
    let validated = validate(obs).map_err(|e| CliError::Invalid(e.to_string()))?;
    let acknowledged = obs
        .status
        .as_ref()
        .map(|s| s.effective_observers.iter().copied().collect())
        .unwrap_or_default();
    let config = PolicyConfig::from_validated(&validated, acknowledged);
    let auto = auto_promotions_in(obs.status.as_ref());
    let saved = obs.status.as_ref().and_then(|s| s.engine_state.as_ref());
    let memory = operator_memory(
        PolicyHistory::from_auto_promotions(auto),
        saved,
        &config,
        now,
    );
    Ok(EngineInputs { config, memory })
}

fn print_doc(doc: &impl Serialize, output: Output) -> Result<(), CliError> {
    match output {
        Output::Yaml => print!("{}", serde_norway::to_string(doc)?),
        _ => println!("{}", serde_json::to_string_pretty(doc)?),
    }
    Ok(())
}

/// `{"observerSet": <name>, ...view}`: the view's fields at the top level.
fn with_name(obs: &ObserverSet, view: &impl Serialize) -> Result<Value, CliError> {
    let mut doc = json!({"observerSet": obs.metadata.name});
    if let Value::Object(fields) = serde_json::to_value(view)? {
        doc.as_object_mut().expect("an object").extend(fields);
    }
    Ok(doc)
}

async fn status(
    cli: &Cli,
    api: &Api<ObserverSet>,
    mut obs: ObserverSet,
    args: &StatusArgs,
) -> Result<(), CliError> {
    let filter = StatusFilter {
        topic: match &args.topic {
            Some(t) => Some(Regex::new(t).map_err(|source| CliError::TopicRegex {
                pattern: t.clone(),
                source,
            })?),
            None => None,
        },
        broker: args.broker,
        under_min_isr: args.under_min_isr,
    };
    let (validated, _) = policy_config(&obs)?;
    let mut watcher = watcher(cli, api, &obs, &validated).await?;
    let clear = args.watch && args.output == Output::Table && std::io::stdout().is_terminal();
    loop {
        // The roles may change between scans (promotions): the ObserverSet is read every time.
        let (validated, config) = policy_config(&obs)?;
        let snapshot = watcher.scan().await;
        let printed = print_status(&obs, &config, &snapshot, &filter, args, clear);
        match printed {
            Err(e) if args.watch => eprintln!("error: {e}"),
            other => other?,
        }
        if !args.watch {
            return Ok(());
        }
        let interval = validated
            .promotion
            .scan_interval
            .max(Duration::from_millis(500));
        tokio::select! {
            _ = tokio::signal::ctrl_c() => return Ok(()),
            _ = tokio::time::sleep(interval) => {}
        }
        if let Some(name) = &obs.metadata.name {
            obs = api.get(name).await?;
        }
    }
}

/// `status --context ...`: every member's copy compared, then (table output) the summary read
/// through the member a leader would resume from.
async fn status_across(cli: &Cli, args: &StatusArgs) -> Result<(), CliError> {
    if args.watch {
        return Err(CliError::Usage(
            "--watch reads one cluster: leave out --context, or --watch",
        ));
    }
    let reads = futures::future::join_all(args.contexts.iter().map(|c| read_member(cli, c))).await;
    let view = members_view(&reads.iter().map(|(r, _)| r.clone()).collect::<Vec<_>>());
    if args.output != Output::Table {
        return print_doc(&view, args.output);
    }
    print!("{}", render_members(&view));
    let Some(from) = &view.resume_from else {
        return Ok(());
    };
    let Some((api, obs)) = reads
        .into_iter()
        .find(|(r, _)| &r.context == from)
        .and_then(|(_, found)| found)
    else {
        return Ok(());
    };
    println!("\nthrough {from}:");
    status(cli, &api, obs, args).await
}

/// One context's copy of the ObserverSet, bounded by [`MEMBER_READ_TIMEOUT`]; also the API and
/// object to go on with when it answered.
async fn read_member(
    cli: &Cli,
    context: &str,
) -> (MemberRead, Option<(Api<ObserverSet>, ObserverSet)>) {
    let started = std::time::Instant::now();
    let read = async {
        let options = kube::config::KubeConfigOptions {
            context: Some(context.to_string()),
            ..Default::default()
        };
        let config = kube::Config::from_kubeconfig(&options)
            .await
            .map_err(|e| format!("kubeconfig context {context}: {e}"))?;
        let namespace = cli
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = kube::Client::try_from(config).map_err(|e| e.to_string())?;
        let api: Api<ObserverSet> = Api::namespaced(client, &namespace);
        let obs = find(&api, &namespace, cli.observerset.as_deref())
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>((api, obs))
    };
    let outcome = match tokio::time::timeout(MEMBER_READ_TIMEOUT, read).await {
        Ok(outcome) => outcome,
        Err(_) => Err(format!("no answer within {MEMBER_READ_TIMEOUT:?}")),
    };
    let member = MemberRead {
        context: context.to_string(),
        took: started.elapsed(),
        outcome: outcome
            .as_ref()
            .map(|(_, o)| (o.status.clone(), o.metadata.resource_version.clone()))
            .map_err(Clone::clone),
    };
    (member, outcome.ok())
}

fn print_status(
    obs: &ObserverSet,
    config: &PolicyConfig,
    snapshot: &ClusterSnapshot,
    filter: &StatusFilter,
    args: &StatusArgs,
    clear: bool,
) -> Result<(), CliError> {
    if let SourceHealth::Unhealthy { reason } = &snapshot.source {
        return Err(CliError::Scan(reason.clone()));
    }
    let roles = Roles {
        observers: config.observers.clone(),
        promoted: config.promoted.clone(),
        max_lag_messages: config.max_lag_messages,
    };
    if clear {
        print!("\x1b[H\x1b[2J");
    }
    if args.partitions {
        let mut view = snapshot.clone();
        view.partitions.retain(|p| {
            filter.covers(p)
                && (!filter.under_min_isr
                    || matches!(
                        assess(p, snapshot, |b| roles.is_observer_now(b)),
                        Health::UnderMinIsr | Health::Offline
                    ))
        });
        let mut rows = replica_rows(
            &view,
            &config.observers,
            &config.promoted,
            config.max_lag_messages,
        );
        if let Some(b) = filter.broker {
            rows.retain(|r| r.replica == b);
        }
        match args.output {
            Output::Table => print!("{}", render_table(&rows)),
            output => print_doc(
                &json!({"observerSet": obs.metadata.name, "takenAt": Rfc3339(snapshot.taken_at), "replicas": rows}),
                output,
            )?,
        }
        return Ok(());
    }
    let history = obs.status.as_ref().map(|s| s.history.as_slice());
    let summary = summarize(snapshot, &roles, filter, args.limit)
        .with_history(history.unwrap_or_default(), args.history)
        .with_excused(
            &obs.status
                .as_ref()
                .map(|s| s.roles.clone())
                .unwrap_or_default(),
        )
        .with_members(
            obs.status
                .as_ref()
                .map_or(&[][..], |s| s.members.as_slice()),
        );
    match args.output {
        Output::Table => print!("{}", render_summary(&summary, config.max_lag_messages)),
        output => print_doc(&with_name(obs, &summary)?, output)?,
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
    let snapshot = watcher(cli, api, obs, &validated).await?.scan().await;
    enforce(
        &check_promotion(&snapshot, &config, node_id, Timestamp::now()),
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
    let mut watcher = watcher(cli, api, obs, &validated).await?;
    let mut snapshot = watcher.scan().await;
    if move_leadership {
        snapshot = move_leadership_off(&mut watcher, snapshot, node_id).await?;
    }
    let mut config = config;
    // Only hand promotions are demoted here; automatic ones belong to the operator.
    config.promoted = obs.spec.promotion.promoted.iter().copied().collect();
    enforce(
        &check_demotion(&snapshot, &config, node_id, Timestamp::now()),
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
    for outcome in watcher
        .elect_leaders(ElectionKind::Preferred, &led, Duration::from_secs(30))
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

async fn plan(
    cli: &Cli,
    api: &Api<ObserverSet>,
    obs: &ObserverSet,
    output: Output,
) -> Result<(), CliError> {
    let validated = validate(obs).map_err(|e| CliError::Invalid(e.to_string()))?;
    let snapshot = watcher(cli, api, obs, &validated).await?.scan().await;
    // The memory is restored at the decision's time, as the operator's task does.
    let now = Timestamp::now();
    let inputs = engine_inputs(obs, now)?;
    let view = plan_view(&snapshot, &inputs.config, &inputs.memory, now);
    let status = obs.status.clone().unwrap_or_default();
    if output != Output::Table {
        let doc = json!({
            "observerSet": obs.metadata.name,
            "now": view,
            "plan": status.plan,
            "autoPromotions": status.auto_promotions,
        });
        return print_doc(&doc, output);
    }
    print!("{}", render_plan(&view));
    match &status.plan {
        None => println!(
            "recorded plan (status.plan): none yet (the operator has not decided anything for this ObserverSet)"
        ),
        Some(plan) => {
            println!(
                "recorded plan (status.plan) at {}{}",
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

async fn explain_broker(
    cli: &Cli,
    api: &Api<ObserverSet>,
    obs: &ObserverSet,
    node_id: i32,
    output: Output,
) -> Result<(), CliError> {
    let validated = validate(obs).map_err(|e| CliError::Invalid(e.to_string()))?;
    let snapshot = watcher(cli, api, obs, &validated).await?.scan().await;
    let now = Timestamp::now();
    let inputs = engine_inputs(obs, now)?;
    let e = explain(&snapshot, &inputs.config, &inputs.memory, now, node_id);
    match output {
        Output::Table => print!("{}", render_explain(&e)),
        output => print_doc(&with_name(obs, &e)?, output)?,
    }
    Ok(())
}
