//! `kubectl observer`: a status summary (brokers, partitions needing attention), the
//! per-replica table, manual promotion and demotion with the engine's pre-checks, what the
//! engine would do now (`plan`) and why a broker is or is not eligible (`explain`). Reads the
//! ObserverSet through the kubeconfig and the Kafka cluster directly (one watcher scan).

mod commands;
mod explain;
mod explain_demotion;
#[cfg(test)]
mod fixtures;
mod members_view;
mod memory;
mod plan_view;
mod replica_table;
mod status_view;

use clap::{Args, Parser, Subcommand, ValueEnum};
use thiserror::Error;

pub use commands::run;
pub use explain::{explain, render_explain, Check, Explanation};
pub use members_view::{members_view, render_members, MemberLine, MemberRead, MembersView};
pub use memory::{operator_memory, BrokerMemory, MemoryView, OperatorMemory};
pub use plan_view::{plan_view, render_plan, BrokerTimers, PlanView, PlannedAction};
pub use replica_table::{render_table, replica_rows, ReplicaRole, ReplicaRow};
pub use status_view::{
    render_summary, summarize, Attention, AttentionLine, BrokerLine, Roles, StatusFilter,
    StatusSummary,
};

#[derive(Debug, Parser)]
#[command(
    name = "kubectl-observer",
    version,
    about = "Observer replicas of a Kafka cluster managed by an ObserverSet"
)]
pub struct Cli {
    /// Namespace of the ObserverSet (default: the kubeconfig's namespace).
    #[arg(short, long, global = true)]
    pub namespace: Option<String>,
    /// The ObserverSet (default: the only one in the namespace).
    #[arg(short = 's', long, global = true)]
    pub observerset: Option<String>,
    /// Kafka bootstrap servers to use instead of spec.kafka.bootstrapServers (plaintext listener),
    /// for example from outside the cluster.
    #[arg(long, global = true, env = "KUBECTL_OBSERVER_BOOTSTRAP")]
    pub bootstrap: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// A summary: one line per broker, then the partitions that need attention (under or at
    /// min ISR, an observer lagging past maxLagMessages, a promoted observer leading).
    Status(StatusArgs),
    /// Promote an observer by hand (adds it to spec.promotion.promoted).
    Promote {
        node_id: i32,
        /// Promote even when a pre-check fails (for example a lagging observer).
        #[arg(long)]
        force: bool,
    },
    /// Demote a hand-promoted observer (removes it from spec.promotion.promoted).
    Demote {
        node_id: i32,
        /// Run a preferred leader election first if the broker leads partitions.
        #[arg(long)]
        move_leadership: bool,
        /// Demote even when a pre-check fails.
        #[arg(long)]
        force: bool,
    },
    /// What the promotion engine would do now and why (its decision on a fresh scan, no
    /// writes), then the last plan the operator recorded (status.plan).
    Plan {
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Why one broker is or is not eligible for promotion or demotion right now.
    Explain {
        node_id: i32,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// The per-replica table instead of the summary: one row per partition and replica.
    #[arg(long)]
    pub partitions: bool,
    /// Only topics matching this regex.
    #[arg(long, value_name = "REGEX")]
    pub topic: Option<String>,
    /// Only this broker's line and the partitions it hosts (with --partitions: its replicas).
    #[arg(long, value_name = "ID")]
    pub broker: Option<i32>,
    /// Only partitions under min ISR (or offline).
    #[arg(long)]
    pub under_min_isr: bool,
    /// At most this many partitions needing attention in the summary (0: all).
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// The newest this many automatic and manual actions of status.history (0: none).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub history: usize,
    /// Scan and print again every spec.promotion.scanInterval until interrupted (Ctrl-C).
    #[arg(short, long)]
    pub watch: bool,
    /// Read the ObserverSet through this kubeconfig context; repeat it once per member cluster
    /// (docs/multi-cluster.md): each copy is compared (answered or not, phase, revision, step,
    /// epochs, acknowledgements) and which one an operator leader resumes from is named; the
    /// table output then goes on with the summary read through that member.
    #[arg(long = "context", value_name = "CONTEXT")]
    pub contexts: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Text for people.
    #[value(alias = "text")]
    Table,
    Json,
    Yaml,
}

#[derive(Debug, Error)]
pub enum CliError {
    #[error("Kubernetes API: {0} (is KUBECONFIG set and the ObserverSet CRD installed?)")]
    Kube(#[from] kube::Error),
    #[error("no ObserverSet in namespace {0}: check -n/--namespace")]
    NotFound(String),
    #[error(
        "namespace {namespace} has several ObserverSets ({names}): pick one with -s/--observerset"
    )]
    Ambiguous { namespace: String, names: String },
    #[error("ObserverSet is invalid: {0}")]
    Invalid(String),
    /// A Secret `spec.kafka` names cannot be read with the user's kubeconfig or cannot be used.
    #[error("cannot connect to Kafka with the Secrets spec.kafka names (read with your kubeconfig; --bootstrap takes a plaintext listener instead): {0}")]
    Secret(#[from] crate::kafka::security::SecretError),
    #[error(transparent)]
    Kafka(#[from] crate::kafka::KafkaError),
    #[error(transparent)]
    Election(#[from] crate::kafka::ElectionError),
    #[error("refusing to {action} broker {node_id}:\n  - {problems}\n(use --force to override)")]
    Refused {
        action: &'static str,
        node_id: i32,
        problems: String,
    },
    #[error("broker {node_id} still leads {partitions} after the preferred leader election")]
    LeadershipStuck { node_id: i32, partitions: String },
    #[error("cannot print JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("cannot print YAML: {0}")]
    Yaml(#[from] serde_norway::Error),
    #[error("--topic {pattern:?} is not a valid regex: {source}")]
    TopicRegex {
        pattern: String,
        #[source]
        source: regex::Error,
    },
    #[error("cannot read the Kafka cluster: {0} (is --bootstrap or spec.kafka.bootstrapServers reachable from here?)")]
    Scan(String),
    #[error("{0}")]
    Usage(&'static str),
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn flags_parse() {
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from([
            "kubectl-observer",
            "-n",
            "kafka",
            "status",
            "--partitions",
            "--topic",
            "^orders",
            "--broker",
            "4",
            "--under-min-isr",
            "--limit",
            "0",
            "-o",
            "yaml",
            "-w",
        ])
        .unwrap();
        let Command::Status(a) = cli.command else {
            panic!("status expected");
        };
        assert!(a.partitions && a.under_min_isr && a.watch);
        assert_eq!(
            (a.topic.as_deref(), a.broker, a.limit, a.output),
            (Some("^orders"), Some(4), 0, Output::Yaml)
        );
        let cli = Cli::try_parse_from(["kubectl-observer", "explain", "3", "-o", "text"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Explain {
                node_id: 3,
                output: Output::Table
            }
        ));
        let defaults = Cli::try_parse_from(["kubectl-observer", "status"]).unwrap();
        let Command::Status(a) = defaults.command else {
            panic!("status expected");
        };
        assert_eq!(
            (a.limit, a.output, a.partitions),
            (20, Output::Table, false)
        );
    }
}
