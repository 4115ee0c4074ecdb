//! `kubectl observer`: replica status, manual promotion and demotion with the engine's
//! pre-checks, and the engine's latest plan. Reads the ObserverSet through the kubeconfig and
//! the Kafka cluster directly (one watcher scan).

mod commands;
mod replica_table;

use clap::{Parser, Subcommand, ValueEnum};
use thiserror::Error;

pub use commands::run;
pub use replica_table::{render_table, replica_rows, ReplicaRole, ReplicaRow};

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
    /// Kafka bootstrap servers to use instead of spec.kafka.bootstrapServers (plaintext listener).
    #[arg(long, global = true)]
    pub bootstrap: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Replica status per partition and replica: leader, observer, in ISR, caught up, lag.
    Status {
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
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
    /// The promotion engine's latest plan (status.plan) and automatic promotions.
    Plan {
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Table,
    Json,
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
    #[error(
        "spec.kafka uses TLS or SASL, which this plugin does not speak: pass --bootstrap with a plaintext listener"
    )]
    SecureConnection,
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
}
