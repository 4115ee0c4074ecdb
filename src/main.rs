//! Entry point: wiring only. `run` starts the operator, `agent` the observer-agent sidecar,
//! `crd` prints the CustomResourceDefinition.

use clap::{Parser, Subcommand};
use kube::CustomResourceExt;

use kafka_observer_operator::crd::ObserverSet;

#[derive(Parser)]
#[command(name = "kafka-observer-operator", version, about = "Kubernetes operator for Kafka observer replicas")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the ObserverSet CustomResourceDefinition as YAML.
    Crd,
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Crd => {
            print!("{}", serde_yaml::to_string(&ObserverSet::crd())?);
            Ok(())
        }
    }
}
