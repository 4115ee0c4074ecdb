//! The default view of `kubectl observer status`: one line per broker, then only the partitions
//! that need attention, capped, the pods a rollout step went on without (unreachable), then the
//! newest actions of `status.history`. Pure: the view model from a snapshot, text from the model. The
//! JSON and YAML outputs serialize the same model.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::Timestamp;
use regex::Regex;
use serde::Serialize;

use super::replica_table::ReplicaRole;
use crate::crd::{HistoryEntry, MemberReach, RolesStatus};
use crate::promotion::{assess, BrokerId, ClusterSnapshot, Health, PartitionState};
use crate::time_format;

/// Which partitions and brokers a view covers (`--topic`, `--broker`, `--under-min-isr`).
#[derive(Clone, Debug, Default)]
pub struct StatusFilter {
    pub topic: Option<Regex>,
    pub broker: Option<BrokerId>,
    /// Only partitions under min ISR (or offline) are listed as needing attention.
    pub under_min_isr: bool,
}

impl StatusFilter {
    /// Whether the partition is in the view (topic regex and broker), before `under_min_isr`.
    pub fn covers(&self, p: &PartitionState) -> bool {
        self.topic.as_ref().is_none_or(|re| re.is_match(&p.topic))
            && self.broker.is_none_or(|b| p.hosts(b))
    }
}

/// Who the brokers are for the ObserverSet right now.
#[derive(Clone, Debug, Default)]
pub struct Roles {
    /// `spec.observers`.
    pub observers: BTreeSet<BrokerId>,
    /// Promoted now: `spec.promotion.promoted` plus `status.autoPromotions`.
    pub promoted: BTreeSet<BrokerId>,
    pub max_lag_messages: i64,
}

impl Roles {
    pub fn role(&self, id: BrokerId) -> ReplicaRole {
        match (self.observers.contains(&id), self.promoted.contains(&id)) {
            (true, true) => ReplicaRole::Promoted,
            (true, false) => ReplicaRole::Observer,
            _ => ReplicaRole::Primary,
        }
    }

    /// An observer now: declared and not promoted. It never counts toward the ISR.
    pub fn is_observer_now(&self, id: BrokerId) -> bool {
        self.role(id) == ReplicaRole::Observer
    }
}

/// One broker's line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerLine {
    pub id: BrokerId,
    pub role: ReplicaRole,
    /// Registered with the controller and answering the offset probe.
    pub alive: bool,
    /// Listed in the cluster metadata (false: gone, or a declared observer never seen).
    pub registered: bool,
    /// Replicas it hosts (among the partitions in view).
    pub partitions: usize,
    /// Of those, how many list it in the ISR.
    pub in_isr: usize,
    /// Largest known lag over those replicas; `None` when none is known.
    pub max_lag: Option<i64>,
    /// Replicas whose lag is unknown.
    pub lag_unknown: usize,
    /// Partitions it leads.
    pub leading: usize,
}

/// Why a partition needs attention, most severe first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Attention {
    /// No leader and no live primary replica.
    Offline,
    /// Live primary ISR below `min.insync.replicas`: `acks=all` writes fail.
    UnderMinIsr { live_isr: usize, min_isr: u32 },
    /// A replica's broker is registered but not answering, or min ISR could not be read.
    Unknown,
    /// Live primary ISR exactly at min ISR: one more loss stops `acks=all` writes.
    AtMinIsr { live_isr: usize, min_isr: u32 },
    /// An observer lagging past `maxLagMessages` (it would not be promoted).
    ObserverLagging { broker: BrokerId, lag: i64 },
    /// A promoted observer leads the partition (a demotion must move leadership first).
    PromotedLeading { broker: BrokerId },
}

impl Attention {
    fn describe(&self, max_lag: i64) -> String {
        match self {
            Attention::Offline => "offline (no leader, no live primary)".into(),
            Attention::UnderMinIsr { live_isr, min_isr } => {
                format!("under min ISR ({live_isr} of {min_isr})")
            }
            Attention::Unknown => "state unknown".into(),
            Attention::AtMinIsr { live_isr, min_isr } => {
                format!("at min ISR ({live_isr} of {min_isr})")
            }
            Attention::ObserverLagging { broker, lag } => {
                format!("observer {broker} lags {lag} (max {max_lag})")
            }
            Attention::PromotedLeading { broker } => format!("promoted {broker} leads"),
        }
    }

    fn is_under_min_isr(&self) -> bool {
        matches!(self, Attention::Offline | Attention::UnderMinIsr { .. })
    }
}

/// A partition that needs attention.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttentionLine {
    pub topic: String,
    pub partition: i32,
    pub leader: Option<BrokerId>,
    pub replicas: Vec<BrokerId>,
    pub isr: Vec<BrokerId>,
    pub min_isr: Option<u32>,
    pub reasons: Vec<Attention>,
}

/// The whole summary view.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusSummary {
    #[serde(serialize_with = "time_format::serialize")]
    pub taken_at: Timestamp,
    /// Partitions in view (after `--topic` / `--broker`).
    pub partitions: usize,
    pub brokers: Vec<BrokerLine>,
    /// Partitions needing attention in view, all of them (before the cap).
    pub attention_total: usize,
    /// The first of them, most severe first, then by topic and partition.
    pub attention: Vec<AttentionLine>,
    /// `attention_total - attention.len()`: left out by the cap.
    pub attention_omitted: usize,
    /// The newest entries of `status.history`, newest first (`None`: not asked for).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<HistoryEntry>>,
    /// Pods the latest step of each role went on without (`status.roles.*.excused`): they
    /// may still hold an older list.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub went_on_without: Vec<ExcusedLine>,
    /// Over member clusters: each member as the operator's leader last saw it
    /// (`status.members`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<MemberReach>,
}

/// A pod a promotion's step went on without, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExcusedLine {
    pub role: String,
    pub revision: i64,
    pub pod: String,
    pub reason: String,
    pub message: String,
}

impl StatusSummary {
    /// With the pods the latest step of each role went on without.
    pub fn with_excused(mut self, roles: &RolesStatus) -> Self {
        let roles = [("controller", &roles.controller), ("broker", &roles.broker)];
        self.went_on_without = roles
            .into_iter()
            .filter_map(|(role, rs)| Some((role, rs.as_ref()?)))
            .flat_map(|(role, rs)| {
                rs.excused.iter().map(move |e| ExcusedLine {
                    role: role.to_string(),
                    revision: rs.revision,
                    pod: e.pod.clone(),
                    reason: e.reason.to_string(),
                    message: e.message.clone(),
                })
            })
            .collect();
        self
    }

    /// With each member cluster as the operator's leader last saw it (`status.members`).
    pub fn with_members(mut self, members: &[MemberReach]) -> Self {
        self.members = members.to_vec();
        self
    }

    /// With the newest `n` entries of `status.history` (none asked for when `n` is 0). The
    /// status holds two writers' entries merged by the apiserver, in no guaranteed order.
    pub fn with_history(mut self, history: &[HistoryEntry], n: usize) -> Self {
        if n == 0 {
            self.history = None;
            return self;
        }
        let mut newest = history.to_vec();
        newest.sort_by(|a, b| {
            (b.at.0, b.node_id, b.action, &b.who).cmp(&(a.at.0, a.node_id, a.action, &a.who))
        });
        newest.truncate(n);
        self.history = Some(newest);
        self
    }
}

/// What needs attention in one partition; empty when nothing does.
fn attention_of(p: &PartitionState, snapshot: &ClusterSnapshot, roles: &Roles) -> Vec<Attention> {
    let mut out = Vec::new();
    let live_isr = p
        .isr
        .iter()
        .filter(|&&r| !roles.is_observer_now(r) && snapshot.is_alive(r))
        .count();
    match assess(p, snapshot, |b| roles.is_observer_now(b)) {
        Health::Offline => out.push(Attention::Offline),
        Health::UnderMinIsr => out.push(Attention::UnderMinIsr {
            live_isr,
            min_isr: p.min_isr.unwrap_or(0),
        }),
        Health::Unknown => out.push(Attention::Unknown),
        Health::UnderReplicated | Health::Healthy => {
            if let Some(min_isr) = p.min_isr.filter(|&m| live_isr == m as usize) {
                out.push(Attention::AtMinIsr { live_isr, min_isr });
            }
        }
    }
    for &r in &p.replicas {
        match roles.role(r) {
            ReplicaRole::Observer => {
                if let Some(lag) = p
                    .lag_against(r, p.high_watermark)
                    .filter(|&l| l > roles.max_lag_messages)
                {
                    out.push(Attention::ObserverLagging { broker: r, lag });
                }
            }
            ReplicaRole::Promoted if p.leader == Some(r) => {
                out.push(Attention::PromotedLeading { broker: r })
            }
            _ => {}
        }
    }
    out
}

/// Builds the summary: broker lines for every broker the snapshot knows plus the declared
/// observers (only `filter.broker` when set), and at most `limit` partitions needing attention
/// (`limit` 0: all).
pub fn summarize(
    snapshot: &ClusterSnapshot,
    roles: &Roles,
    filter: &StatusFilter,
    limit: usize,
) -> StatusSummary {
    let mut lines: BTreeMap<BrokerId, BrokerLine> = snapshot
        .brokers
        .keys()
        .chain(&roles.observers)
        .filter(|&&id| filter.broker.is_none_or(|b| b == id))
        .map(|&id| {
            let state = snapshot.brokers.get(&id);
            let line = BrokerLine {
                id,
                role: roles.role(id),
                alive: snapshot.is_alive(id),
                registered: state.is_some_and(|s| s.registered),
                partitions: 0,
                in_isr: 0,
                max_lag: None,
                lag_unknown: 0,
                leading: 0,
            };
            (id, line)
        })
        .collect();
    let mut in_view = 0;
    // (severity, partition index, reasons): materialized as lines only for the ones shown.
    let mut needing: Vec<(Attention, usize, Vec<Attention>)> = Vec::new();
    for (i, p) in snapshot.partitions.iter().enumerate() {
        if !filter.covers(p) {
            continue;
        }
        in_view += 1;
        for &r in &p.replicas {
            let Some(line) = lines.get_mut(&r) else {
                continue;
            };
            line.partitions += 1;
            line.in_isr += usize::from(p.in_isr(r));
            line.leading += usize::from(p.leader == Some(r));
            match p.lag_against(r, p.high_watermark) {
                Some(lag) => line.max_lag = Some(line.max_lag.map_or(lag, |m| m.max(lag))),
                None => line.lag_unknown += 1,
            }
        }
        let reasons = attention_of(p, snapshot, roles);
        if reasons.is_empty() || (filter.under_min_isr && !reasons[0].is_under_min_isr()) {
            continue;
        }
        needing.push((reasons[0].clone(), i, reasons));
    }
    let attention_total = needing.len();
    let shown = if limit == 0 {
        attention_total
    } else {
        limit.min(attention_total)
    };
    let rank = |a: &Attention| match a {
        Attention::Offline => 0,
        Attention::UnderMinIsr { .. } => 1,
        Attention::Unknown => 2,
        Attention::AtMinIsr { .. } => 3,
        Attention::ObserverLagging { .. } => 4,
        Attention::PromotedLeading { .. } => 5,
    };
    let order = |a: &(Attention, usize, Vec<Attention>), b: &(Attention, usize, Vec<Attention>)| {
        let (pa, pb) = (&snapshot.partitions[a.1], &snapshot.partitions[b.1]);
        rank(&a.0)
            .cmp(&rank(&b.0))
            .then_with(|| pa.topic.cmp(&pb.topic))
            .then(pa.partition.cmp(&pb.partition))
    };
    if shown < attention_total {
        // Only the first `shown` need sorting: partial selection keeps 50,000 partitions cheap.
        needing.select_nth_unstable_by(shown, order);
        needing.truncate(shown);
    }
    needing.sort_by(order);
    let attention = needing
        .into_iter()
        .map(|(_, i, reasons)| {
            let p = &snapshot.partitions[i];
            AttentionLine {
                topic: p.topic.clone(),
                partition: p.partition,
                leader: p.leader,
                replicas: p.replicas.clone(),
                isr: p.isr.clone(),
                min_isr: p.min_isr,
                reasons,
            }
        })
        .collect::<Vec<_>>();
    StatusSummary {
        taken_at: snapshot.taken_at,
        partitions: in_view,
        brokers: lines.into_values().collect(),
        attention_omitted: attention_total - attention.len(),
        attention_total,
        attention,
        history: None,
        went_on_without: Vec::new(),
        members: Vec::new(),
    }
}

fn ids(v: &[BrokerId]) -> String {
    if v.is_empty() {
        return "-".into();
    }
    v.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Left-aligned columns separated by two spaces, trailing blanks trimmed.
pub(super) fn columns(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out += &line(row.iter().map(String::as_str).collect());
    }
    out
}

/// The history lines, newest first.
fn render_history(history: &[HistoryEntry]) -> String {
    if history.is_empty() {
        return "\nno action recorded in status.history yet\n".into();
    }
    let rows: Vec<Vec<String>> = history
        .iter()
        .map(|e| {
            vec![
                e.at.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
                format!("{:?}", e.action),
                e.node_id.to_string(),
                e.who.clone(),
                e.reason.clone(),
            ]
        })
        .collect();
    format!(
        "\nlast {} action(s), newest first (status.history):\n",
        history.len()
    ) + &columns(&["AT", "ACTION", "NODE", "WHO", "WHY"], &rows)
}

/// The summary as text: the broker table, the partitions needing attention, the history.
pub fn render_summary(s: &StatusSummary, max_lag: i64) -> String {
    let mut out = render_state(s, max_lag);
    out += &render_members(&s.members);
    out += &render_excused(&s.went_on_without);
    if let Some(h) = &s.history {
        out += &render_history(h);
    }
    out
}

fn render_members(members: &[MemberReach]) -> String {
    if members.is_empty() {
        return String::new();
    }
    let rows: Vec<Vec<String>> = members
        .iter()
        .map(|m| {
            vec![
                m.name.clone(),
                if m.reachable { "yes" } else { "NO" }.into(),
                m.since.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
                m.message.clone().unwrap_or_default(),
            ]
        })
        .collect();
    "
member clusters, as the operator's leader last saw them (status.members):
"
    .to_string()
        + &columns(&["MEMBER", "REACHED", "SINCE", "WHY"], &rows)
}

fn render_excused(lines: &[ExcusedLine]) -> String {
    if lines.is_empty() {
        return String::new();
    }
    let rows: Vec<Vec<String>> = lines
        .iter()
        .map(|l| {
            vec![
                l.role.clone(),
                l.revision.to_string(),
                l.pod.clone(),
                l.reason.clone(),
                l.message.clone(),
            ]
        })
        .collect();
    let mut out = format!(
        "\nthe rollout went on without {} unreachable pod(s) (they read the list when they return; a demotion waits for them):\n",
        lines.len()
    );
    out += &columns(&["ROLE", "REVISION", "POD", "REASON", "WHY"], &rows);
    out
}

fn render_state(s: &StatusSummary, max_lag: i64) -> String {
    let brokers: Vec<Vec<String>> = s
        .brokers
        .iter()
        .map(|b| {
            let lag = match (b.max_lag, b.lag_unknown) {
                (Some(l), 0) => l.to_string(),
                (Some(l), n) => format!("{l} ({n} unknown)"),
                (None, 0) => "-".into(),
                (None, _) => "?".into(),
            };
            vec![
                b.id.to_string(),
                format!("{:?}", b.role).to_lowercase(),
                if b.alive {
                    "yes".into()
                } else if b.registered {
                    "no (not answering)".into()
                } else {
                    "no (not registered)".into()
                },
                b.partitions.to_string(),
                b.in_isr.to_string(),
                lag,
                b.leading.to_string(),
            ]
        })
        .collect();
    let mut out = format!(
        "scanned at {}: {} partition(s)\n",
        s.taken_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        s.partitions
    );
    out += &columns(
        &[
            "BROKER",
            "ROLE",
            "ALIVE",
            "PARTITIONS",
            "IN-ISR",
            "MAX-LAG",
            "LEADING",
        ],
        &brokers,
    );
    out += "\n";
    if s.attention_total == 0 {
        out += "no partition needs attention\n";
        return out;
    }
    out += &format!("{} partition(s) need attention:\n", s.attention_total);
    let rows: Vec<Vec<String>> = s
        .attention
        .iter()
        .map(|a| {
            vec![
                a.topic.clone(),
                a.partition.to_string(),
                a.leader.map_or_else(|| "none".into(), |l| l.to_string()),
                ids(&a.replicas),
                ids(&a.isr),
                a.min_isr.map_or_else(|| "?".into(), |m| m.to_string()),
                a.reasons
                    .iter()
                    .map(|r| r.describe(max_lag))
                    .collect::<Vec<_>>()
                    .join("; "),
            ]
        })
        .collect();
    out += &columns(
        &[
            "TOPIC",
            "PARTITION",
            "LEADER",
            "REPLICAS",
            "ISR",
            "MIN-ISR",
            "WHY",
        ],
        &rows,
    );
    if s.attention_omitted > 0 {
        out += &format!(
            "... and {} more (--limit 0 shows all, --partitions the per-replica table)\n",
            s.attention_omitted
        );
    }
    out
}

#[cfg(test)]
#[path = "status_view_tests.rs"]
mod tests;
