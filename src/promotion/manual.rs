//! Pre-checks for promotions and demotions asked for by hand (`kubectl observer promote|demote`):
//! the same rules the engine applies to its own actions.

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::config::PolicyConfig;
use super::health::{assess, Health};
use super::snapshot::{BrokerId, ClusterSnapshot, PartitionState, SourceHealth};
use crate::time_format::Text;

/// Problems that forbid the change, and warnings that do not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    pub problems: Vec<String>,
    pub warnings: Vec<String>,
}

impl CheckReport {
    pub fn passed(&self) -> bool {
        self.problems.is_empty()
    }
}

fn fresh(
    snapshot: &ClusterSnapshot,
    config: &PolicyConfig,
    now: Timestamp,
    report: &mut CheckReport,
) -> bool {
    if let SourceHealth::Unhealthy { reason } = &snapshot.source {
        report
            .problems
            .push(format!("cannot read the cluster: {reason}"));
        return false;
    }
    if now.duration_since(snapshot.taken_at)
        > SignedDuration::try_from(config.stale_after).unwrap_or(SignedDuration::MAX)
    {
        report.problems.push(format!(
            "the cluster snapshot from {} is stale",
            Text(snapshot.taken_at)
        ));
        return false;
    }
    true
}

fn hosted(snapshot: &ClusterSnapshot, id: BrokerId) -> impl Iterator<Item = &PartitionState> {
    snapshot.partitions.iter().filter(move |p| p.hosts(id))
}

/// Promoting `id` by hand: it must be a declared observer not yet promoted, alive, and caught up
/// (lag at most maxLagMessages) on every partition it hosts that has a leader. Offline partitions
/// have no high watermark to compare with: they only warn (promotion itself elects nobody; an
/// unclean takeover has its own guard).
pub fn check_promotion(
    snapshot: &ClusterSnapshot,
    config: &PolicyConfig,
    id: BrokerId,
    now: Timestamp,
) -> CheckReport {
    let mut report = CheckReport::default();
    if !config.observers.contains(&id) {
        report.problems.push(format!(
            "broker {id} is not a declared observer (spec.observers)"
        ));
    }
    if config.promoted.contains(&id) {
        report
            .problems
            .push(format!("broker {id} is already promoted"));
    }
    if !fresh(snapshot, config, now, &mut report) {
        return report;
    }
    if !snapshot.is_alive(id) {
        report.problems.push(format!(
            "broker {id} is not alive (not registered, or not answering)"
        ));
    }
    for p in hosted(snapshot, id) {
        let name = format!("{}-{}", p.topic, p.partition);
        if p.leader.is_none() {
            report
                .warnings
                .push(format!("{name} has no leader: its lag cannot be measured"));
            continue;
        }
        match p.lag_against(id, p.high_watermark) {
            None => report
                .problems
                .push(format!("{name}: lag of broker {id} unknown")),
            Some(lag) if lag > config.max_lag_messages => report.problems.push(format!(
                "{name}: broker {id} lags {lag} messages (maxLagMessages {})",
                config.max_lag_messages
            )),
            Some(_) => {}
        }
    }
    report
}

/// Demoting `id` by hand: it must be in `promotion.promoted`, no partition may drop under min
/// ISR without it, and it must lead nothing (a leader never shrinks itself out of the ISR).
/// Returns also the partitions it leads, so the caller can move leadership first.
pub fn check_demotion(
    snapshot: &ClusterSnapshot,
    config: &PolicyConfig,
    id: BrokerId,
    now: Timestamp,
) -> CheckReport {
    let mut report = CheckReport::default();
    if !config.promoted.contains(&id) {
        report.problems.push(format!(
            "broker {id} is not in spec.promotion.promoted (automatic promotions are demoted by the operator)"
        ));
    }
    if !fresh(snapshot, config, now, &mut report) {
        return report;
    }
    let observers: std::collections::BTreeSet<BrokerId> = config
        .observers
        .iter()
        .copied()
        .filter(|o| *o == id || !config.promoted.contains(o))
        .collect();
    let mut led = Vec::new();
    for p in hosted(snapshot, id) {
        let name = format!("{}-{}", p.topic, p.partition);
        match assess(p, snapshot, |b| observers.contains(&b)) {
            Health::Unknown => report.problems.push(format!("{name}: state unknown")),
            Health::Offline | Health::UnderMinIsr => report
                .problems
                .push(format!("{name} would be under min ISR without broker {id}")),
            _ => {}
        }
        if p.leader == Some(id) {
            led.push(name);
        }
    }
    if !led.is_empty() {
        report.problems.push(format!(
            "broker {id} leads {}: move leadership first (preferred leader election, --move-leadership)",
            super::listing::summarize(&led)
        ));
    }
    report
}

/// Partitions `id` leads, for a preferred leader election before a manual demotion.
pub fn led_by(snapshot: &ClusterSnapshot, id: BrokerId) -> Vec<super::TopicPartition> {
    snapshot
        .partitions
        .iter()
        .filter(|p| p.leader == Some(id))
        .map(PartitionState::id)
        .collect()
}
