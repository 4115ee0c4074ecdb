//! The integration tests, one test binary (`cargo test --test integration`): one crate compiles
//! and links the library once for all of them, where a binary per file took about five minutes
//! more of CI's release build. Each module is one concern; its own doc says what it needs
//! (most need the bed, `KOO_TESTBED`, and skip with `KOO_TESTBED=off`; `secure_kafka` runs its own
//! local Kafka). libtest runs them in module order, one at a time with `--test-threads=1`, as
//! e2e/integration.sh does: they share the bed's Kafka pods and its ObserverSet kafka/kafka.
//!
//! One test alone: `cargo test --release --test integration operator_rollout::`.

mod support;

mod automation_glue;
mod credential_recorder;
mod engine_state_failover;
mod leader_lease;
mod member_secrets;
mod observer_only_partitions;
mod operator_configmaps;
mod operator_conflict;
mod operator_jvm_ack;
mod operator_reconcile_failed;
mod operator_rollout;
mod operator_validation;
mod policy_automation;
mod policy_cli;
mod reconcile_glue;
mod secure_automation;
mod secure_kafka;
mod status_history;
mod status_writes;
mod watcher_bed;
