//! Access to the local e2e test bed (`.testbed/`, see `e2e/README.md`) from integration tests.
//!
//! Every bed-backed test starts the same way:
//!
//! ```no_run
//! # async fn t() {
//! let Some(bed) = koo_testbed::TestBed::require() else { return };
//! let client = bed.client().await.unwrap();
//! let bootstrap = bed.kafka_bootstrap();
//! # }
//! ```
//!
//! `KOO_TESTBED` names the bed (absolute path of its `.testbed/` directory). `KOO_TESTBED=off`
//! means "explicitly not requested": [`TestBed::require`] prints a skip line and returns `None`.
//! Unset, it panics with a message saying to run `make testbed-up` (or `make test`).
//!
//! The API is deliberately small and stable: paths, a client, the Kafka node table (pod names;
//! addresses are the pods' IPs, looked up through the API when needed), node control through
//! `e2e/testbed/kafka.sh` (`kill`: a crash the kubelet undoes in seconds; `stop`: down until
//! started again; `restart`: graceful; meanwhile the bed's own ObserverSet is held at a Manual
//! policy so it does not promote on the real cluster), running the `.testbed/bin` tools, and
//! waiting.

mod bed;
mod error;
mod hold;
mod kafka;
mod wait;

pub use bed::{PodState, TestBed, ENV_VAR};
pub use error::Error;
pub use hold::ManualPolicy;
pub use kafka::{
    KafkaNode, NodeAction, RestartOnDrop, Role, AGENT_PORT, BROKER_IDS, CONTROLLER_IDS,
    KAFKA_NAMESPACE,
};
pub use wait::{wait_until, wait_until_async};
