//! How a change of the observer set reaches the pods (`spec.rollout`).

use serde::{Deserialize, Serialize};

use kube::KubeSchema;

use super::bounds::{
    agent_port_message, agent_port_rule, time_mode_settle_message, time_mode_settle_rule,
    time_mode_timeout_rule, JVM_CACHE_TTL, ROLLOUT_TIMEOUT, SETTLE_TIME, TIME_MODE_TIMEOUT_MESSAGE,
};
use super::duration::DURATION_PATTERN;

/// Rollout settings; every field has a default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(time_mode_timeout_rule()).message(TIME_MODE_TIMEOUT_MESSAGE))]
#[x_kube(validation = Rule::new(time_mode_settle_rule()).message(Message::Message(time_mode_settle_message())))]
pub struct RolloutSpec {
    /// How the operator learns that a pod has seen a revision.
    #[serde(default)]
    pub acknowledgement: AckMode,
    /// Port of the observer-agent sidecar (Agent mode).
    #[serde(default = "default_agent_port")]
    #[schemars(range(min = 1, max = 65535))]
    #[x_kube(validation = Rule::new(agent_port_rule()).message(Message::Message(agent_port_message())))]
    pub agent_port: i32,
    /// Time mode: how long after the write and nudge a pod counts as acknowledged; at least 10s
    /// in Time mode (the JVMs' observer.ids cache must have expired before the next role's
    /// list is written), shorter than `timeout`.
    #[serde(default = "default_settle_time")]
    #[schemars(regex(pattern = DURATION_PATTERN), length(max = 11))]
    #[x_kube(validation = Rule::new(SETTLE_TIME.cel_rule()).message(Message::Message(SETTLE_TIME.cel_message())))]
    pub settle_time: String,
    /// A step not acknowledged by every pod within this time sets the Degraded phase.
    #[serde(default = "default_timeout")]
    #[schemars(regex(pattern = DURATION_PATTERN), length(max = 11))]
    #[x_kube(validation = Rule::new(ROLLOUT_TIMEOUT.cel_rule()).message(Message::Message(ROLLOUT_TIMEOUT.cel_message())))]
    pub timeout: String,
    /// Agent mode, pods whose Kafka JVM does not report what it has loaded (an agent without
    /// `--loaded-file`, or a Kafka with the public patch set): the JVM's observer.ids cache TTL.
    /// Such a pod counts as acknowledged once its agent has seen the revision in the file for
    /// this long ("file + cache TTL"). Set it to the TTL the JVMs use
    /// (`KAFKA_OBSERVER_IDS_TTL_MS` of this project's patch, default 1000 ms; the public patch
    /// set re-reads every 5 s: `5s`). Pods whose JVM reports what it loaded (our patch with
    /// `KAFKA_OBSERVER_IDS_LOADED_FILE` and the agent's `--loaded-file`) acknowledge when the JVM
    /// reports the revision, and this setting does not apply to them.
    #[serde(default = "default_jvm_cache_ttl")]
    #[schemars(regex(pattern = DURATION_PATTERN), length(max = 11))]
    #[x_kube(validation = Rule::new(JVM_CACHE_TTL.cel_rule()).message(Message::Message(JVM_CACHE_TTL.cel_message())))]
    pub jvm_cache_ttl: String,
}

impl Default for RolloutSpec {
    fn default() -> Self {
        RolloutSpec {
            acknowledgement: AckMode::default(),
            agent_port: default_agent_port(),
            settle_time: default_settle_time(),
            timeout: default_timeout(),
            jvm_cache_ttl: default_jvm_cache_ttl(),
        }
    }
}

fn default_agent_port() -> i32 {
    9180
}

fn default_settle_time() -> String {
    "15s".into()
}

fn default_timeout() -> String {
    "120s".into()
}

fn default_jvm_cache_ttl() -> String {
    "1s".into()
}

/// Acknowledgement mode of a rollout step.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub enum AckMode {
    /// The observer-agent sidecar reports the revision the Kafka JVM has loaded (or, when the
    /// JVM does not report it, the revision in the mounted file plus `jvmCacheTtl`).
    #[default]
    Agent,
    /// No sidecar: a pod counts as acknowledged `settleTime` after the write and nudge.
    Time,
}
