//! Errors of the test-bed helpers; each message says what to check.

use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("KOO_TESTBED={0:?} is not an absolute path to a .testbed directory: run `make testbed-up` and export KOO_TESTBED=$PWD/.testbed")]
    NotAbsolute(PathBuf),
    #[error("KOO_TESTBED is not set: run `make testbed-up` and export KOO_TESTBED=$PWD/.testbed (or run `make test`); KOO_TESTBED=off skips bed tests")]
    Unset,
    #[error("no test bed at {0}: run `make testbed-up` (or `make test`)")]
    Missing(PathBuf),
    #[error("cannot read {}: {source}; is the bed up? (`make testbed-status`)", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot load the bed's kubeconfig {}: {source}; run `make testbed-up`", path.display())]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("cannot build a Kubernetes client: {0}")]
    Client(#[source] kube::Error),
    #[error("cannot run {command}: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}` failed ({status}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}")]
    Failed {
        command: String,
        status: std::process::ExitStatus,
        stdout: String,
        stderr: String,
    },
    #[error("unknown Kafka node id {0}: controllers are 101-103, brokers 1-4")]
    UnknownNode(i32),
    #[error(
        "no IP for pod kafka/{pod} ({reason}); is it running? (`e2e/testbed/kafka.sh status`)"
    )]
    NoPodIp { pod: String, reason: String },
    #[error("unexpected output of `{command}`: {detail}")]
    Output { command: String, detail: String },
    #[error("timed out after {timeout:?} waiting for {what}")]
    Timeout { what: String, timeout: Duration },
}
