//! `decide`: from a snapshot, the config and the history, the actions to take now and why.
//! Deterministic: no clock reads, no I/O, ordered collections only in the output.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use super::config::PolicyConfig;
use super::health::{assess, observer_only, triggers, Health};
use super::held_back::{Concern, HeldBack};
use super::history::PolicyHistory;
use super::snapshot::{BrokerId, ClusterSnapshot, PartitionState, SourceHealth, TopicPartition};
use super::{demotion, promote, takeover};
use crate::time_format::Text;

/// One thing the reconciler should do. Carry them out in the order given.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PromotionAction {
    /// Remove the broker from the effective observer set (record it in `status.autoPromotions`).
    Promote { node_id: BrokerId, reason: String },
    /// Put an automatically promoted broker back into the effective observer set.
    Demote { node_id: BrokerId, reason: String },
    /// Run a preferred leader election on these partitions so the broker stops leading them;
    /// the demotion follows on a later scan once it leads nothing.
    MoveLeadership {
        node_id: BrokerId,
        partitions: Vec<TopicPartition>,
        reason: String,
    },
    /// Elect the broker leader of these offline partitions by unclean election.
    UncleanElect {
        node_id: BrokerId,
        partitions: Vec<TopicPartition>,
        reason: String,
    },
}

impl PromotionAction {
    pub fn node_id(&self) -> BrokerId {
        match self {
            PromotionAction::Promote { node_id, .. }
            | PromotionAction::Demote { node_id, .. }
            | PromotionAction::MoveLeadership { node_id, .. }
            | PromotionAction::UncleanElect { node_id, .. } => *node_id,
        }
    }

    pub fn reason(&self) -> &str {
        match self {
            PromotionAction::Promote { reason, .. }
            | PromotionAction::Demote { reason, .. }
            | PromotionAction::MoveLeadership { reason, .. }
            | PromotionAction::UncleanElect { reason, .. } => reason,
        }
    }
}

/// The outcome of one decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromotionDecision {
    /// What to do now; empty means nothing. With `dry_run` these are only to be reported.
    pub actions: Vec<PromotionAction>,
    /// Why the engine did not act where it might have (held back, blocked, unknown state).
    pub reasons: Vec<HeldBack>,
    /// The history to keep for the next decision, assuming `actions` are carried out.
    pub next_history: PolicyHistory,
    pub dry_run: bool,
    /// Watched partitions whose state triggers the policy in this scan (none when the scan is
    /// not trustworthy): what the automation counts as detections, and compares its glances with.
    pub triggered: BTreeSet<TopicPartition>,
    /// Watched partitions with only observers as replicas (`observer_only_partitions`); `None`
    /// when the scan is not trustworthy, so a failed scan neither reports nor clears them.
    pub observer_only: Option<Vec<TopicPartition>>,
}

impl PromotionDecision {
    /// How many watched partitions trigger the policy in this scan.
    pub fn triggered_partitions(&self) -> usize {
        self.triggered.len()
    }
}

/// What every step of one decision reads.
pub(super) struct Scan<'a> {
    pub snapshot: &'a ClusterSnapshot,
    pub config: &'a PolicyConfig,
    pub history: &'a PolicyHistory,
    pub now: Timestamp,
    /// Brokers that are observers for trigger purposes: declared, not promoted by hand or by us.
    pub observers_now: BTreeSet<BrokerId>,
    /// Partition indexes hosted by each broker the engine may act on.
    pub hosted: HashMap<BrokerId, Vec<usize>>,
    /// `assess` of every partition with `observers_now`, by partition index.
    pub health: Vec<Health>,
    pub cooldown: SignedDuration,
}

impl<'a> Scan<'a> {
    pub fn partitions_of(
        &self,
        broker: BrokerId,
    ) -> impl Iterator<Item = (usize, &'a PartitionState)> + '_ {
        let all: &'a [PartitionState] = &self.snapshot.partitions;
        let idx = self.hosted.get(&broker).map(Vec::as_slice).unwrap_or(&[]);
        idx.iter().map(move |&i| (i, &all[i]))
    }

    /// High watermark to measure a replica's lag against: the live one, or for a partition
    /// without leader the last one seen while it had one.
    pub fn reference_hw(&self, p: &PartitionState) -> Option<i64> {
        self.history.reference_hw(p)
    }

    pub fn cooling_until(&self, broker: BrokerId) -> Option<Timestamp> {
        self.history.cooling_until(broker, self.cooldown, self.now)
    }
}

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

/// Whether a partition in this state counts toward the policy's trigger. A partition whose
/// replicas are all observers never does (see `health::observer_only`).
pub(super) fn triggering(
    config: &PolicyConfig,
    observers_now: &BTreeSet<BrokerId>,
    p: &PartitionState,
    health: Health,
) -> bool {
    config.topics.watches(&p.topic)
        && triggers(config.policy, health)
        && !observer_only(p, |b| observers_now.contains(&b))
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

/// Actions and reasons collected by the planning steps, in the order they were decided.
#[derive(Default)]
pub(super) struct DecisionDraft {
    pub actions: Vec<PromotionAction>,
    pub reasons: Vec<HeldBack>,
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

/// "t-0, t-1, t-2 and 4 more": partition lists in reasons stay short.
pub(super) fn list_partitions<'a>(parts: impl IntoIterator<Item = &'a PartitionState>) -> String {
    let names: Vec<String> = parts
        .into_iter()
        .map(|p| format!("{}-{}", p.topic, p.partition))
        .collect();
    summarize(&names)
}

pub(super) fn summarize(names: &[String]) -> String {
    const SHOWN: usize = 3;
    if names.len() <= SHOWN {
        names.join(", ")
    } else {
        format!(
            "{} and {} more",
            names[..SHOWN].join(", "),
            names.len() - SHOWN
        )
    }
}
