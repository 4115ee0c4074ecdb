//! The replica status table of `kubectl observer status`: one row per partition and replica.
//! Pure: rows from a snapshot, text from rows.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::promotion::{BrokerId, ClusterSnapshot};

/// What a replica's broker is for the ObserverSet right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ReplicaRole {
    /// A normal replica.
    Primary,
    /// A declared observer in the effective set.
    Observer,
    /// A declared observer currently promoted (by hand or automatically).
    Promoted,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaRow {
    pub topic: String,
    pub partition: i32,
    pub replica: BrokerId,
    pub role: ReplicaRole,
    pub leader: bool,
    pub in_isr: bool,
    /// `None` when the lag is unknown.
    pub caught_up: Option<bool>,
    pub lag: Option<i64>,
    pub log_end_offset: Option<i64>,
    pub high_watermark: Option<i64>,
    pub alive: bool,
    pub min_isr: Option<u32>,
}

/// Rows for every replica, in snapshot order. `caught_up` means a lag of at most `max_lag`.
pub fn replica_rows(
    snapshot: &ClusterSnapshot,
    observers: &BTreeSet<BrokerId>,
    promoted: &BTreeSet<BrokerId>,
    max_lag: i64,
) -> Vec<ReplicaRow> {
    let mut rows = Vec::new();
    for p in &snapshot.partitions {
        for &r in &p.replicas {
            let lag = p.lag_against(r, p.high_watermark);
            let role = match (observers.contains(&r), promoted.contains(&r)) {
                (true, true) => ReplicaRole::Promoted,
                (true, false) => ReplicaRole::Observer,
                _ => ReplicaRole::Primary,
            };
            rows.push(ReplicaRow {
                topic: p.topic.clone(),
                partition: p.partition,
                replica: r,
                role,
                leader: p.leader == Some(r),
                in_isr: p.in_isr(r),
                caught_up: lag.map(|l| l <= max_lag),
                lag,
                log_end_offset: p.log_end_offsets.get(&r).copied(),
                high_watermark: p.high_watermark,
                alive: snapshot.is_alive(r),
                min_isr: p.min_isr,
            });
        }
    }
    rows
}

/// A fixed-width text table with a header.
pub fn render_table(rows: &[ReplicaRow]) -> String {
    let header = [
        "TOPIC",
        "PARTITION",
        "REPLICA",
        "ROLE",
        "LEADER",
        "IN-ISR",
        "CAUGHT-UP",
        "LAG",
        "LEO",
        "HW",
        "ALIVE",
    ];
    let opt = |v: Option<i64>| v.map_or_else(|| "?".to_string(), |v| v.to_string());
    let yes = |b: bool| if b { "yes" } else { "no" }.to_string();
    let cells: Vec<[String; 11]> = rows
        .iter()
        .map(|r| {
            [
                r.topic.clone(),
                r.partition.to_string(),
                r.replica.to_string(),
                format!("{:?}", r.role).to_lowercase(),
                yes(r.leader),
                yes(r.in_isr),
                r.caught_up.map_or_else(|| "?".to_string(), yes),
                opt(r.lag),
                opt(r.log_end_offset),
                opt(r.high_watermark),
                yes(r.alive),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let line = |items: Vec<&str>| {
        let padded: Vec<String> = items
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in &cells {
        out += &line(row.iter().map(String::as_str).collect());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::promotion::{BrokerState, PartitionState, SourceHealth};
    use k8s_openapi::jiff::Timestamp;

    fn snapshot() -> ClusterSnapshot {
        ClusterSnapshot {
            undescribed_topics: Vec::new(),
            taken_at: Timestamp::now(),
            source: SourceHealth::Healthy,
            brokers: (1..=4)
                .map(|b| {
                    (
                        b,
                        BrokerState {
                            registered: b != 2,
                            reachable: b != 2,
                        },
                    )
                })
                .collect(),
            partitions: vec![PartitionState {
                topic: "orders".into(),
                partition: 0,
                replicas: vec![1, 2, 4],
                isr: vec![1],
                leader: Some(1),
                min_isr: Some(2),
                high_watermark: Some(500),
                log_end_offsets: [(1, 500), (4, 480)].into_iter().collect(),
                metadata_stale: false,
            }],
        }
    }

    #[test]
    fn rows_describe_each_replica() {
        let rows = replica_rows(&snapshot(), &BTreeSet::from([4]), &BTreeSet::new(), 10);
        assert_eq!(rows.len(), 3);
        assert!(rows[0].leader && rows[0].in_isr && rows[0].caught_up == Some(true));
        assert_eq!(
            (rows[1].alive, rows[1].lag, rows[1].caught_up),
            (false, None, None)
        );
        assert_eq!(
            (rows[2].role, rows[2].lag, rows[2].caught_up),
            (ReplicaRole::Observer, Some(20), Some(false))
        );
    }

    #[test]
    fn table_has_aligned_columns() {
        let text = render_table(&replica_rows(
            &snapshot(),
            &BTreeSet::from([4]),
            &BTreeSet::from([4]),
            10,
        ));
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("TOPIC   PARTITION  REPLICA  ROLE"),
            "{text}"
        );
        assert!(
            lines[3].starts_with("orders  0          4        promoted"),
            "{text}"
        );
        assert!(lines[3].contains("20"), "{text}");
    }
}
