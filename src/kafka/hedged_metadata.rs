//! The metadata on the offset probe's connection (its TLS and SASL; Metadata API 3, v12, the
//! `kafka-protocol` crate's), and the hedge that races two reads.
//!
//! librdkafka sends a metadata request to one connected broker of its choice. That broker may
//! be a bad one to ask (`read_order`): cut off with its zone, it keeps its TCP connection "up"
//! (nothing answers, nothing resets), so the request waits out `socket.timeout.ms` (5 s) while
//! partitions go under min ISR (measured on the bed: the operator saw the zone's loss 5 to 10 s
//! after the brokers did, D15, D17, D20); an observer behind a slow link answers at once, but
//! with an ISR that is seconds old (D19). So once a scan has answered, the watcher reads the
//! metadata here, from [`HEDGE_FANOUT`] brokers that answered and are not observers, the first
//! answer winning, and librdkafka's read only as the hedge after [`HEDGE_AFTER`]. Before any
//! scan has answered, librdkafka reads first and the bootstrap servers are the hedge.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::select_ok;
use kafka_protocol::messages::{ApiKey, MetadataRequest, MetadataResponse};

use super::offset_probe::{OffsetProbe, ProbeError, MAX_RESPONSE_BYTES};
use super::probe_exchange::ExchangeError;
use super::scan::{MetaPartition, Metadata};

/// How long the first metadata read may take before the hedge starts too: far above a
/// healthy answer (milliseconds), far below `socket.timeout.ms`.
pub const HEDGE_AFTER: Duration = Duration::from_millis(300);

/// How many brokers the probe asks at once: one lost zone holds one broker of the example's
/// layout, so two reach at least one that answers.
pub const HEDGE_FANOUT: usize = 2;

/// Metadata v12: every supported Kafka (4.x serves v0-v13, less the versions KIP-896 removed).
const VERSION: i16 = 12;

/// `primary`, unless it is not done after `after`: then `backup` starts too, and whichever
/// answers first wins. A backup that fails (`None`) leaves the primary's answer, whatever it is;
/// a primary that fails leaves the backup's, if it has one. A primary that fails before
/// `after` (the brokers it asked refused at once: lost with their zone) starts the backup at
/// once, not after the delay: a failed scan would drop what the engine watches without a gap
/// (`crate::promotion::witness`).
pub async fn hedge<T, E, P, B, BF>(primary: P, after: Duration, backup: B) -> Result<T, E>
where
    P: Future<Output = Result<T, E>>,
    B: FnOnce() -> BF,
    BF: Future<Output = Option<T>>,
{
    tokio::pin!(primary);
    tokio::select! {
        done = &mut primary => return match done {
            Ok(answer) => Ok(answer),
            Err(e) => backup().await.ok_or(e),
        },
        () = tokio::time::sleep(after) => {}
    }
    let second = backup();
    tokio::pin!(second);
    tokio::select! {
        done = &mut primary => match done {
            Ok(answer) => Ok(answer),
            Err(e) => second.await.ok_or(e),
        },
        other = &mut second => match other {
            Some(answer) => Ok(answer),
            None => primary.await,
        },
    }
}

/// All topics, no topic creation, no ACL operations.
pub fn request() -> MetadataRequest {
    MetadataRequest::default()
        .with_topics(None)
        .with_allow_auto_topic_creation(false)
}

/// The scan's view of an answer: what `scan::read_metadata` takes from librdkafka's (registered
/// brokers, and the partitions of every topic that came without an error).
pub(super) fn to_metadata(response: &MetadataResponse) -> Metadata {
    let brokers = response
        .brokers
        .iter()
        .map(|b| (b.node_id.0, format!("{}:{}", b.host, b.port)))
        .collect::<BTreeMap<_, _>>();
    let mut partitions = Vec::new();
    let undescribed = response
        .topics
        .iter()
        .filter(|t| t.error_code != 0)
        .map(|t| {
            t.name
                .as_ref()
                .map_or_else(|| "(unnamed)".to_string(), |n| n.to_string())
        })
        .collect();
    for t in response.topics.iter().filter(|t| t.error_code == 0) {
        let Some(name) = &t.name else { continue };
        let topic: Arc<str> = Arc::from(name.as_str());
        for p in &t.partitions {
            partitions.push(MetaPartition {
                topic: topic.clone(),
                partition: p.partition_index,
                leader: (p.leader_id.0 >= 0).then_some(p.leader_id.0),
                replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
                isr: p.isr_nodes.iter().map(|b| b.0).collect(),
                topic_id: (!t.topic_id.is_nil()).then(|| t.topic_id.as_u128()),
                leader_epoch: (p.leader_epoch >= 0).then_some(p.leader_epoch),
            });
        }
    }
    Metadata {
        brokers,
        partitions,
        undescribed,
    }
}

/// The metadata as broker `broker` at `address` answers it on the probe's connection.
pub(super) async fn ask(
    probe: &OffsetProbe,
    broker: i32,
    address: &str,
) -> Result<Metadata, ProbeError> {
    let answer: Result<MetadataResponse, _> = probe
        .exchange(
            broker,
            address,
            (ApiKey::Metadata, VERSION),
            &request(),
            MAX_RESPONSE_BYTES,
        )
        .await;
    match answer {
        Ok(response) => Ok(to_metadata(&response)),
        Err(ExchangeError::Connection(e)) => Err(e),
        Err(ExchangeError::Protocol(reason)) => Err(ProbeError::Io {
            broker,
            address: address.to_string(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, reason),
        }),
    }
}

/// Whom the probe asks before a scan has answered (a task just started, as on a new leader
/// after its zone was lost): the bootstrap servers, repeated up to [`HEDGE_FANOUT`] connections
/// (ids -1, -2, ...: not brokers). Two connections to one bootstrap Service are balanced
/// independently by kube-proxy, so both land on a cut-off broker only with the chance of one
/// squared.
pub(super) fn bootstrap_candidates(bootstrap: &[String]) -> Vec<(i32, String)> {
    bootstrap
        .iter()
        .cycle()
        .take(HEDGE_FANOUT.max(bootstrap.len()))
        .zip(1..)
        .map(|(address, n)| (-n, address.clone()))
        .collect()
}

/// The first answer of the first [`HEDGE_FANOUT`] of `brokers` (id, `host:port`), asked at once;
/// `None` without a broker to ask.
pub(super) async fn first_answer(
    probe: &OffsetProbe,
    brokers: &[(i32, String)],
) -> Option<Result<Metadata, ProbeError>> {
    if brokers.is_empty() {
        return None;
    }
    let asks = brokers
        .iter()
        .take(HEDGE_FANOUT)
        .map(|(b, address)| Box::pin(ask(probe, *b, address)));
    Some(select_ok(asks).await.map(|(md, _)| md))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use kafka_protocol::messages::{BrokerId, TopicName};
    use kafka_protocol::protocol::{Encodable, StrBytes};
    use std::cell::Cell;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn one_bootstrap_server_is_asked_twice() {
        let bootstrap = vec!["kafka-bootstrap.kafka.svc:9092".to_string()];
        assert_eq!(
            bootstrap_candidates(&bootstrap),
            vec![
                (-1, "kafka-bootstrap.kafka.svc:9092".to_string()),
                (-2, "kafka-bootstrap.kafka.svc:9092".to_string())
            ]
        );
        let three: Vec<String> = ["a:1", "b:2", "c:3"].map(String::from).to_vec();
        let got = bootstrap_candidates(&three);
        assert_eq!(
            got.iter().map(|(_, a)| a.as_str()).collect::<Vec<_>>(),
            vec!["a:1", "b:2", "c:3"]
        );
        assert!(got.iter().all(|(id, _)| *id < 0), "{got:?}");
        assert!(bootstrap_candidates(&[]).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_quick_primary_never_starts_the_backup() {
        let started = Cell::new(false);
        let got: Result<u8, ()> = hedge(async { Ok(1) }, 300 * MS, || {
            started.set(true);
            async { Some(2) }
        })
        .await;
        assert_eq!(got, Ok(1));
        assert!(!started.get());
    }

    #[tokio::test(start_paused = true)]
    async fn a_hung_primary_is_overtaken_by_the_backup_after_the_delay() {
        let t0 = tokio::time::Instant::now();
        let got: Result<u8, ()> = hedge(std::future::pending(), 300 * MS, || async {
            tokio::time::sleep(10 * MS).await;
            Some(2)
        })
        .await;
        assert_eq!(got, Ok(2));
        assert_eq!(t0.elapsed(), 310 * MS);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_backup_leaves_the_primarys_answer_and_a_failed_primary_the_backups() {
        let slow_ok = async {
            tokio::time::sleep(2000 * MS).await;
            Ok::<u8, &str>(1)
        };
        assert_eq!(hedge(slow_ok, 300 * MS, || async { None }).await, Ok(1));

        let slow_err = async {
            tokio::time::sleep(400 * MS).await;
            Err::<u8, &str>("timed out")
        };
        let backup = || async {
            tokio::time::sleep(1000 * MS).await;
            Some(2)
        };
        assert_eq!(hedge(slow_err, 300 * MS, backup).await, Ok(2));

        let both_fail = async {
            tokio::time::sleep(400 * MS).await;
            Err::<u8, &str>("timed out")
        };
        assert_eq!(
            hedge(both_fail, 300 * MS, || async { None }).await,
            Err("timed out")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_primary_refused_at_once_asks_the_backup_at_once() {
        let t0 = tokio::time::Instant::now();
        let refused = async { Err::<u8, &str>("connection refused") };
        let backup = || async {
            tokio::time::sleep(10 * MS).await;
            Some(2)
        };
        assert_eq!(hedge(refused, 300 * MS, backup).await, Ok(2));
        assert_eq!(t0.elapsed(), 10 * MS, "the backup waited for the delay");
        let refused = async { Err::<u8, &str>("connection refused") };
        assert_eq!(
            hedge(refused, 300 * MS, || async { None }).await,
            Err("connection refused")
        );
    }

    #[test]
    fn the_request_asks_for_every_topic_and_creates_none() {
        let r = request();
        assert!(r.topics.is_none(), "null topics: all of them");
        assert!(!r.allow_auto_topic_creation);
        let mut buf = BytesMut::new();
        r.encode(&mut buf, VERSION).unwrap();
        assert!(!buf.is_empty());
    }

    #[test]
    fn an_answer_becomes_the_scans_metadata_without_the_topics_that_failed() {
        let partition = |index, leader, replicas: &[i32], isr: &[i32]| {
            MetadataResponsePartition::default()
                .with_partition_index(index)
                .with_leader_id(BrokerId(leader))
                .with_replica_nodes(replicas.iter().map(|&b| BrokerId(b)).collect())
                .with_isr_nodes(isr.iter().map(|&b| BrokerId(b)).collect())
        };
        let topic = |name: &'static str, code, partitions| {
            MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str(name))))
                .with_error_code(code)
                .with_partitions(partitions)
        };
        let response = MetadataResponse::default()
            .with_brokers(vec![
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(1))
                    .with_host(StrBytes::from_static_str("10.0.0.1"))
                    .with_port(9092),
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(4))
                    .with_host(StrBytes::from_static_str("kafka-broker-3.kafka"))
                    .with_port(9092),
            ])
            .with_topics(vec![
                topic(
                    "t",
                    0,
                    vec![
                        partition(0, 1, &[1, 2, 4], &[1, 2]),
                        partition(1, -1, &[2, 3, 4], &[]),
                    ],
                ),
                // UNKNOWN_TOPIC_OR_PARTITION (a topic being deleted): left out, as librdkafka's.
                topic("gone", 3, vec![partition(0, 1, &[1], &[1])]),
            ]);
        let md = to_metadata(&response);
        assert_eq!(
            md.brokers,
            BTreeMap::from([
                (1, "10.0.0.1:9092".to_string()),
                (4, "kafka-broker-3.kafka:9092".to_string())
            ])
        );
        assert_eq!(md.partitions.len(), 2);
        let (p0, p1) = (&md.partitions[0], &md.partitions[1]);
        assert_eq!((&*p0.topic, p0.partition, p0.leader), ("t", 0, Some(1)));
        assert_eq!(
            (p0.replicas.as_slice(), p0.isr.as_slice()),
            (&[1, 2, 4][..], &[1, 2][..])
        );
        assert_eq!((p1.partition, p1.leader), (1, None), "leader -1: none");
        assert!(p1.isr.is_empty());
    }

    /// A listener that accepts and never answers: a broker cut off with its zone.
    async fn silent_broker() -> (String, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((s, _)) = listener.accept().await {
                held.push(s);
            }
        });
        (address, task)
    }

    #[tokio::test]
    async fn brokers_that_never_answer_fail_within_the_probe_timeout() {
        let (a, ta) = silent_broker().await;
        let (b, tb) = silent_broker().await;
        let probe = OffsetProbe::new("t", 200 * MS);
        let started = std::time::Instant::now();
        let got = first_answer(&probe, &[(1, a), (2, b), (3, "127.0.0.1:1".into())]).await;
        assert!(
            matches!(got, Some(Err(ProbeError::Timeout { .. }))),
            "{:?}",
            got.map(|r| r.map(|m| m.brokers))
        );
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(first_answer(&probe, &[]).await.is_none());
        ta.abort();
        tb.abort();
    }
}
