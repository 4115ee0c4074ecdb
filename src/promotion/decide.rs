//! `decide`: from a snapshot, the config and the history, the actions to take now and why.
//! Deterministic: no clock reads, no I/O, ordered collections only in the output.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::action::PromotionDecision;
use super::config::PolicyConfig;
use super::health::{assess, observer_only, Health};
use super::held_back::{Concern, HeldBack};
use super::history::PolicyHistory;
use super::listing::summarize;
use super::scan::{triggering, DecisionDraft, Scan};
use super::snapshot::{BrokerId, ClusterSnapshot, PartitionState, SourceHealth, TopicPartition};
use super::{demotion, promote, takeover, witness};
use crate::time_format::Text;

/// Decides what to do about observers now. See docs/promotion-policies.md for the rules.
pub fn decide(
    snapshot: &ClusterSnapshot,
    config: &PolicyConfig,
    history: &PolicyHistory,
    now: Timestamp,
) -> PromotionDecision {
    let mut next = history.clone();
    if let Some(why) = untrustworthy(snapshot, config, now) {
        // An unknown scan breaks every streak: confirmations must be consecutive known scans.
        next.promote_streak.clear();
        next.recovered_since.clear();
        // Nothing is known of what the leaders acknowledged meanwhile.
        next.hw_witness.clear();
        return PromotionDecision {
            actions: Vec::new(),
            reasons: vec![why],
            next_history: next,
            dry_run: config.dry_run,
            triggered: BTreeSet::new(),
            observer_only: None,
        };
    }

    let auto: BTreeSet<BrokerId> = history.auto_promotions.iter().map(|p| p.node_id).collect();
    let observers_now = observers_now(config, history);
    let interesting: BTreeSet<BrokerId> = config
        .observers
        .iter()
        .chain(&config.promoted)
        .chain(&auto)
        .copied()
        .collect();
    next.last_known_hw = remember_high_watermarks(snapshot, history, &interesting);
    next.hw_witness =
        witness::witnessed(snapshot, &history.hw_witness, &interesting, &observers_now);
    let mut hosted: HashMap<BrokerId, Vec<usize>> = HashMap::new();
    for (i, p) in snapshot.partitions.iter().enumerate() {
        for r in &p.replicas {
            if interesting.contains(r) {
                hosted.entry(*r).or_default().push(i);
            }
        }
    }
    let health: Vec<Health> = snapshot
        .partitions
        .iter()
        .map(|p| assess(p, snapshot, |b| observers_now.contains(&b)))
        .collect();
    let triggered = snapshot
        .partitions
        .iter()
        .zip(&health)
        .filter(|(p, h)| triggering(config, &observers_now, p, **h))
        .map(|(p, _)| p.id())
        .collect();
    let scan = Scan {
        snapshot,
        config,
        history,
        now,
        observers_now,
        hosted,
        health,
        cooldown: SignedDuration::try_from(config.cooldown).unwrap_or(SignedDuration::MAX),
    };

    let mut out = DecisionDraft::default();
    let misplaced = observer_only_among(snapshot, config, &scan.observers_now);
    if !misplaced.is_empty() {
        out.reasons.push(HeldBack::new(
            Concern::Placement,
            misplaced_reason(&misplaced),
        ));
    }
    let observer_only = Some(misplaced);
    demotion::plan(&scan, &mut next, &mut out);
    promote::plan(&scan, &mut next, &mut out);
    takeover::plan(&scan, &mut out);

    if config.dry_run {
        // Nothing is carried out, so nothing is recorded; the streaks still count.
        next.auto_promotions = history.auto_promotions.clone();
        next.last_action = history.last_action.clone();
    }
    PromotionDecision {
        actions: out.actions,
        reasons: out.reasons,
        next_history: next,
        dry_run: config.dry_run,
        triggered,
        observer_only,
    }
}

/// Brokers that count as observers now: declared, and promoted neither by hand nor by us (the
/// effective set the reconciler writes, from the engine's own history).
fn observers_now(config: &PolicyConfig, history: &PolicyHistory) -> BTreeSet<BrokerId> {
    crate::rollout::effective::effective_set(
        &config.observers,
        &config.promoted,
        history.auto_promotions.iter().map(|p| p.node_id),
    )
}

/// Watched partitions whose replicas are all observers right now: a placement to fix by
/// reassignment, which the engine reports and never answers with a promotion.
pub fn observer_only_partitions(
    snapshot: &ClusterSnapshot,
    config: &PolicyConfig,
    history: &PolicyHistory,
) -> Vec<TopicPartition> {
    observer_only_among(snapshot, config, &observers_now(config, history))
}

/// `observer_only_partitions` with the observers already known (`decide` has them).
fn observer_only_among(
    snapshot: &ClusterSnapshot,
    config: &PolicyConfig,
    observers: &BTreeSet<BrokerId>,
) -> Vec<TopicPartition> {
    snapshot
        .partitions
        .iter()
        .filter(|p| config.topics.watches(&p.topic))
        .filter(|p| observer_only(p, |b| observers.contains(&b)))
        .map(PartitionState::id)
        .collect()
}

/// The engine's reason for the partitions `observer_only_partitions` found.
pub fn misplaced_reason(partitions: &[TopicPartition]) -> String {
    let names: Vec<String> = partitions.iter().map(ToString::to_string).collect();
    format!(
        "{} {} only observers as replicas: the observer patch lets an observer lead such a partition, and promoting it would make it a primary everywhere, so these do not trigger a promotion; reassign them to primary brokers (kafka-reassign-partitions)",
        summarize(&names),
        if partitions.len() == 1 { "has" } else { "have" }
    )
}

/// The watched partitions whose state triggers the policy in `snapshot`: the same judgement
/// `decide` counts in `triggered_partitions`, without deciding anything. The automation runs it
/// on metadata glances between scans to notice a new trigger at once (a hint to scan now; the
/// decision still needs full scans and their confirmations).
pub fn triggered(
    snapshot: &ClusterSnapshot,
    config: &PolicyConfig,
    history: &PolicyHistory,
) -> BTreeSet<TopicPartition> {
    let observers = observers_now(config, history);
    snapshot
        .partitions
        .iter()
        .filter(|p| {
            let health = assess(p, snapshot, |b| observers.contains(&b));
            triggering(config, &observers, p, health)
        })
        .map(PartitionState::id)
        .collect()
}

fn untrustworthy(
    snapshot: &ClusterSnapshot,
    config: &PolicyConfig,
    now: Timestamp,
) -> Option<HeldBack> {
    if let SourceHealth::Unhealthy { reason } = &snapshot.source {
        return Some(HeldBack::new(
            Concern::Scan,
            format!("the last scan failed ({reason})"),
        ));
    }
    let age = now.duration_since(snapshot.taken_at);
    let limit = SignedDuration::try_from(config.stale_after).unwrap_or(SignedDuration::MAX);
    (age > limit).then(|| {
        HeldBack::new(
            Concern::Scan,
            format!(
                "the cluster snapshot from {} is stale ({}s old, limit {}s)",
                Text(snapshot.taken_at),
                age.as_secs(),
                limit.as_secs()
            ),
        )
    })
}

/// The high watermark to remember for each partition hosted by an `interesting` broker (an
/// observer, promoted or not): the only partitions whose lag or takeover needs one. Bounding the
/// map to them keeps `status.engineState` small (crate::automation::engine_state).
fn remember_high_watermarks(
    snapshot: &ClusterSnapshot,
    history: &PolicyHistory,
    interesting: &BTreeSet<BrokerId>,
) -> HashMap<TopicPartition, i64> {
    let mut hw = HashMap::new();
    for p in snapshot
        .partitions
        .iter()
        .filter(|p| p.replicas.iter().any(|r| interesting.contains(r)))
    {
        if let Some(h) = history.reference_hw(p) {
            hw.insert(p.id(), h);
        }
    }
    hw
}
