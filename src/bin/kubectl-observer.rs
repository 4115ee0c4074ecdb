//! `kubectl observer`: the kubectl plugin for ObserverSets (status, promote, demote, plan).

// No unsafe code: the Kafka requests librdkafka does not wrap go through kafka-protocol.
#![forbid(unsafe_code)]

use clap::Parser;
use kafka_observer_operator::cli::{run, Cli};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
