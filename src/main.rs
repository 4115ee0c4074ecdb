//! Entry point: wiring only. `run` starts the operator, `agent` the observer-agent sidecar,
//! `crd` prints the CustomResourceDefinition. Flags are documented in docs/operator.md.

// No unsafe code: the Kafka requests librdkafka does not wrap go through kafka-protocol.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::CustomResourceExt;

use kafka_observer_operator::agent::{self, AgentArgs};
use kafka_observer_operator::crd::{parse_duration, ObserverSet};
use kafka_observer_operator::http::{self, HttpArgs, ProbeFlags};
use kafka_observer_operator::k8s::events::Events;
use kafka_observer_operator::k8s::members::{self, MemberArgs, MemberPlan};
use kafka_observer_operator::k8s::scope::WatchScope;
use kafka_observer_operator::leader::{self, LeaderArgs, LeaseMember};
use kafka_observer_operator::metrics::Metrics;
use kafka_observer_operator::shutdown::Shutdown;
use kafka_observer_operator::telemetry::{self, LogFormat};
use kafka_observer_operator::{automation, reconciler};

/// How long in-flight reconciles may take to finish after SIGTERM (the chart's termination
/// grace period is longer).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

#[derive(Parser)]
#[command(
    name = "kafka-observer-operator",
    version,
    about = "Kubernetes operator for Kafka observer replicas"
)]
struct Cli {
    /// Log line format (the filter comes from RUST_LOG, default `info`).
    #[arg(long, global = true, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the operator: reconciler, promotion automation, /metrics /healthz /readyz, leader election.
    Run(Box<RunArgs>),
    /// Run the observer-agent sidecar: report the observer.ids file a pod reads over HTTP.
    Agent(AgentArgs),
    /// Print the ObserverSet CustomResourceDefinition as YAML.
    Crd,
}

#[derive(Clone, Debug, clap::Args)]
struct RunArgs {
    /// Kubeconfig file (also $KUBECONFIG); without either: ~/.kube/config, else the in-cluster config.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Watch ObserverSets (and their pods and ConfigMaps) in these namespaces only, comma-separated
    /// or the flag repeated (`--namespace` is the same flag); none: every namespace.
    #[arg(
        long = "watch-namespaces",
        visible_alias = "namespace",
        env = "WATCH_NAMESPACES",
        value_delimiter = ','
    )]
    watch_namespaces: Vec<String>,
    /// Only pods with these labels are watched and taken as a role's pods (kubectl's
    /// equality-based syntax, e.g. `app.kubernetes.io/name=kafka`); empty: every pod.
    #[arg(long, env = "POD_SELECTOR", default_value = "")]
    pod_selector: String,
    /// Requeue of an ObserverSet with nothing in flight (changes are picked up by watches at once).
    #[arg(long, env = "RESYNC_INTERVAL", default_value = "5m", value_parser = parse_duration)]
    resync: Duration,
    #[command(flatten)]
    http: HttpArgs,
    #[command(flatten)]
    leader: LeaderArgs,
    #[command(flatten)]
    members: MemberArgs,
    /// The operator's own namespace, where the members' kubeconfig Secrets are read.
    #[arg(
        long = "operator-namespace",
        env = "POD_NAMESPACE",
        default_value = "default"
    )]
    operator_namespace: String,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Crd => {
            print!("{}", serde_norway::to_string(&ObserverSet::crd())?);
            Ok(())
        }
        Command::Agent(args) => {
            telemetry::init(cli.log_format)?;
            runtime()?.block_on(agent::run(args))
        }
        Command::Run(args) => {
            telemetry::init(cli.log_format)?;
            runtime()?.block_on(operate(*args))
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

async fn kube_config(args: &RunArgs) -> anyhow::Result<kube::Config> {
    // A `KUBECONFIG` list (`a:b`) is left to kube's own inference, which merges the files.
    let single = args
        .kubeconfig
        .as_ref()
        .filter(|p| !p.to_string_lossy().contains(':'));
    match single {
        Some(path) => {
            let file = Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .with_context(|| format!("using kubeconfig {}", path.display()))
        }
        None => kube::Config::infer().await.context(
            "no Kubernetes configuration: run in a pod, or pass --kubeconfig / set KUBECONFIG",
        ),
    }
}

async fn operate(args: RunArgs) -> anyhow::Result<()> {
    let shutdown = Shutdown::on_signals().context("installing the SIGTERM/SIGINT handlers")?;
    let metrics = Metrics::new();
    let health = ProbeFlags::new();
    let listener = http::bind(args.http.metrics_listen).await?;
    let server = tokio::spawn(http::serve(
        listener,
        metrics.clone(),
        health.clone(),
        shutdown.clone(),
    ));

    let scope = WatchScope::new(&args.watch_namespaces, &args.pod_selector)?;
    let config = kube_config(&args).await?;
    let plan = MemberPlan::new(&args.members)?;
    let (lease_members, remotes) = lease_members(&args, &config, plan.as_ref()).await?;
    // The campaign stops on its own signal, after the work below has stopped acting: the lease
    // is held until in-flight reconciles finished, then released for the next replica.
    let campaign_stop = Shutdown::new();
    let leadership = leader::campaign(
        lease_members,
        &args.leader,
        metrics.clone(),
        campaign_stop.clone(),
    )?;
    // Timeouts on every call; every write through the leadership's fence.
    let client = kafka_observer_operator::k8s::client::build(config.clone(), leadership.fence())
        .context("building the Kubernetes client")?;
    // Each member's client through the same fence: no write to any member once it is closed.
    let member_clients = match &plan {
        Some(plan) => {
            let mut clients = Vec::new();
            for member in plan.members() {
                if member == plan.local() {
                    clients.push((member.clone(), client.clone(), None));
                } else if let Some(remote) = remotes.iter().find(|r| &r.name == member) {
                    let remote_client = kafka_observer_operator::k8s::client::build(
                        remote.config.clone(),
                        leadership.fence(),
                    )
                    .with_context(|| format!("building the client of member {member}"))?;
                    clients.push((
                        member.clone(),
                        remote_client,
                        Some(remote.namespace.clone()),
                    ));
                }
            }
            Some(members::MemberClients {
                local: plan.local().to_string(),
                clients,
            })
        }
        None => None,
    };
    // The same fence for the engine's Kafka writes (elections, reorderings).
    let kafka_fence = leadership.fence();
    let mut stepping_down = leadership.clone();
    let instance = args
        .leader
        .identity
        .clone()
        .or_else(|| std::env::var("HOSTNAME").ok());
    // The promotion engine: over members it scans every set with spec.clusters (so that the
    // reconciler knows which brokers and voters Kafka still lists, whatever the policy) and
    // writes its record to every member's copy.
    let engine_members = member_clients.clone();
    let ctx = Arc::new(
        reconciler::Context::new(client.clone(), metrics.clone(), instance, args.resync)
            .with_pod_filter(scope.pods.clone())
            .with_members(member_clients),
    );
    health.set_ready(true);
    tracing::info!(namespaces = %scope.describe(), pods = %scope.pods, "operator started");
    // Over members, leading or not: this replica's view of the leadership in its own member's
    // copies (status.localView, Events), through a client of its own that no fence closes.
    if let (Some(plan), Some(sights), Some(identity)) =
        (&plan, leadership.sights(), args.leader.campaign_identity())
    {
        let view_client = kafka_observer_operator::k8s::client::build(
            config.clone(),
            leader::Leadership::always().fence(),
        )
        .context("building the client of this replica's view")?;
        let report = leader::view_report::ViewReport {
            events: Events::new(view_client.clone(), Some(identity.clone()), metrics.clone()),
            client: view_client,
            scope: scope.clone(),
            member: plan.local().to_string(),
            identity,
            hold: 2 * args.leader.lease_duration,
        };
        tokio::spawn(leader::view_report::run(report, sights, shutdown.clone()));
    }
    // Leading or not: a replica that takes over must not wait on the cluster DNS.
    tokio::spawn(automation::standby::keep_names_resolved(
        client.clone(),
        scope.clone(),
        shutdown.clone(),
    ));

    leader::while_leader(leadership, shutdown.clone(), SHUTDOWN_GRACE, || {
        let (client, ctx, metrics, shutdown, scope) = (
            client.clone(),
            ctx.clone(),
            metrics.clone(),
            shutdown.clone(),
            scope.clone(),
        );
        let events = ctx.events.clone();
        // The automation's scans tell the reconciler which brokers Kafka lists.
        let liveness = ctx.liveness.clone();
        let fence = kafka_fence.clone();
        let engine_members = engine_members.clone();
        async move {
            let promotions = automation::run(
                client.clone(),
                &scope,
                metrics,
                events,
                liveness,
                fence,
                engine_members,
            );
            // The reconciler and the promotion automation act only together, only while
            // leading. On shutdown the reconciler finishes its in-flight reconciles and returns;
            // the automation is then dropped.
            tokio::select! {
                _ = reconciler::run(client.clone(), scope.clone(), ctx, shutdown) => {}
                _ = promotions => tracing::warn!("the promotion automation stopped"),
            }
        }
    })
    .await;

    shutdown.trigger();
    campaign_stop.trigger();
    let released = tokio::time::timeout(Duration::from_secs(3), stepping_down.lost());
    if args.leader.enabled && released.await.is_err() {
        tracing::warn!("the leader Lease was not released in time; it expires by itself");
    }
    health.set_ready(false);
    server.await.context("HTTP server task")??;
    tracing::info!("operator stopped");
    Ok(())
}

/// One Lease per member cluster, in `--members` order: the local one in `--lease-namespace`,
/// each other member's in the namespace its kubeconfig Secret names. Without members, the one
/// local Lease.
async fn lease_members(
    args: &RunArgs,
    config: &kube::Config,
    plan: Option<&MemberPlan>,
) -> anyhow::Result<(Vec<LeaseMember>, Vec<members::RemoteMember>)> {
    let Some(plan) = plan else {
        return Ok((
            vec![LeaseMember::local("", config.clone(), &args.leader)],
            Vec::new(),
        ));
    };
    // Reads only (the Secrets), before any fence exists.
    let reader =
        kube::Client::try_from(config.clone()).context("building the Kubernetes client")?;
    // `load` gives the other members in `--members` order: put ours in its place.
    let remotes = members::load(
        &reader,
        &args.operator_namespace,
        plan,
        &args.members.secret_prefix,
    )
    .await?;
    let mut leases = Vec::new();
    let mut next = remotes.iter();
    for member in plan.members() {
        if member == plan.local() {
            leases.push(LeaseMember::local(member, config.clone(), &args.leader));
        } else if let Some(remote) = next.next() {
            tracing::info!(member = %remote.name, namespace = %remote.namespace, server = %remote.config.cluster_url, "member cluster");
            leases.push(LeaseMember {
                member: remote.name.clone(),
                config: remote.config.clone(),
                namespace: remote.namespace.clone(),
            });
        }
    }
    Ok((leases, remotes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flags docs/operator.md promises, as the chart, the test bed and the tests pass them.
    #[test]
    fn documented_run_flags_parse() {
        let cli = Cli::try_parse_from([
            "kafka-observer-operator",
            "--log-format",
            "json",
            "run",
            "--kubeconfig",
            "/tmp/kubeconfig",
            "--namespace",
            "kafka",
            "--metrics-listen",
            "0.0.0.0:8080",
            "--leader-election",
            "off",
            "--lease-name",
            "l",
            "--lease-namespace",
            "ops",
            "--resync",
            "30s",
        ])
        .unwrap();
        assert_eq!(cli.log_format, LogFormat::Json);
        let Command::Run(args) = cli.command else {
            panic!("run")
        };
        assert_eq!(
            args.kubeconfig.as_deref(),
            Some(std::path::Path::new("/tmp/kubeconfig"))
        );
        assert_eq!(args.watch_namespaces, ["kafka"]);
        assert_eq!(args.pod_selector, "");
        assert_eq!(args.http.metrics_listen.to_string(), "0.0.0.0:8080");
        assert!(!args.leader.enabled);
        assert_eq!(
            (
                args.leader.lease_name.as_str(),
                args.leader.lease_namespace.as_str()
            ),
            ("l", "ops")
        );
        assert_eq!(args.resync, Duration::from_secs(30));

        let cli = Cli::try_parse_from([
            "x",
            "run",
            "--health-listen",
            "127.0.0.1:9",
            "--leader-election",
            "on",
        ])
        .unwrap();
        let Command::Run(args) = cli.command else {
            panic!("run")
        };
        assert!(args.leader.enabled);
        assert_eq!(args.http.metrics_listen.to_string(), "127.0.0.1:9");
        assert!(Cli::try_parse_from(["x", "run", "--leader-election", "maybe"]).is_err());
    }

    /// The chart passes the members as environment; `run` reads them as a plan.
    #[test]
    fn member_flags_parse_into_a_plan() {
        let cli =
            Cli::try_parse_from(["x", "run", "--member", "tie", "--members", "east,west,tie"])
                .unwrap();
        let Command::Run(args) = cli.command else {
            panic!("run")
        };
        let plan = MemberPlan::new(&args.members).unwrap().unwrap();
        assert_eq!(plan.remotes().collect::<Vec<_>>(), ["east", "west"]);
        assert_eq!(args.members.secret_prefix, "kafka-observer-member-");
        let single = Cli::try_parse_from(["x", "run"]).unwrap();
        let Command::Run(args) = single.command else {
            panic!("run")
        };
        assert_eq!(MemberPlan::new(&args.members), Ok(None));
    }

    /// A namespaced install lists its namespaces comma-separated (the chart) or repeats the flag.
    #[test]
    fn watch_namespaces_and_pod_selector_parse() {
        let parse = |extra: &[&str]| {
            let cli = Cli::try_parse_from(["x", "run"].iter().chain(extra)).unwrap();
            let Command::Run(args) = cli.command else {
                panic!("run")
            };
            args
        };
        let args = parse(&["--watch-namespaces", "kafka,kafka-2"]);
        assert_eq!(args.watch_namespaces, ["kafka", "kafka-2"]);
        let args = parse(&[
            "--watch-namespaces",
            "kafka",
            "--watch-namespaces",
            "kafka-2",
            "--pod-selector",
            "app.kubernetes.io/name=kafka",
        ]);
        assert_eq!(args.watch_namespaces, ["kafka", "kafka-2"]);
        assert_eq!(args.pod_selector, "app.kubernetes.io/name=kafka");
        assert!(parse(&[]).watch_namespaces.is_empty());
    }

    #[test]
    fn agent_flags_parse_as_the_stand_in_passes_them() {
        let cli = Cli::try_parse_from([
            "x",
            "agent",
            "--dir",
            "/pods/p/volumes/observer-ids",
            "--listen",
            "127.0.1.4:9180",
        ])
        .unwrap();
        let Command::Agent(args) = cli.command else {
            panic!("agent")
        };
        assert_eq!(args.listen.to_string(), "127.0.1.4:9180");
        assert_eq!(
            args.dir,
            std::path::PathBuf::from("/pods/p/volumes/observer-ids")
        );
    }
}
