//! Leader elections (ElectLeaders v2), sent on the offset probe's connection (its TLS and SASL)
//! with the wire format of the `kafka-protocol` crate, as the reorder-only reassignments are.
//! Preferred elections move leadership off a broker before it is demoted; unclean elections are
//! the opt-in takeover when every primary replica is lost. Kafka forwards the request from any
//! broker to the active controller and answers once the elections are done (or its timeout).

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{ApiKey, ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use thiserror::Error;

use super::offset_probe::{OffsetProbe, ProbeError};
use super::probe_exchange::{error_text, ExchangeError, ForwardedError};
use crate::promotion::TopicPartition;

/// ElectLeaders v2 (Kafka 2.4 and later): the election type, flexible encoding.
const VERSION: i16 = 2;
/// Kafka's answer comes at the latest when its own timeout fires; the connection waits this
/// much longer before it gives up.
const ANSWER_GRACE: Duration = Duration::from_secs(2);

/// Which election Kafka runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElectionKind {
    /// Make the first assigned replica leader if it is in the ISR.
    Preferred,
    /// Elect a replica outside the ISR for a partition without leader (may lose data).
    Unclean,
}

impl ElectionKind {
    /// The request's `election_type`.
    fn code(self) -> i8 {
        match self {
            ElectionKind::Preferred => 0,
            ElectionKind::Unclean => 1,
        }
    }
}

/// One partition's election result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElectionOutcome {
    pub partition: TopicPartition,
    /// `Ok` when elected or nothing to do (`ELECTION_NOT_NEEDED`); else Kafka's error text.
    pub result: Result<(), String>,
}

#[derive(Debug, Error)]
pub enum ElectionError {
    #[error("no broker to send the leader election to (the metadata lists none)")]
    NoBroker,
    #[error("the offset probe is off (TLS or SASL set without Secrets), so no leader election can be sent: set spec.kafka.tls / spec.kafka.sasl")]
    NoProbe,
    #[error(transparent)]
    Connection(#[from] ProbeError),
    #[error(transparent)]
    Metadata(#[from] super::KafkaError),
    #[error("broker {broker}: {reason}")]
    Protocol { broker: i32, reason: String },
    #[error("the leader election request was refused: {0}")]
    Refused(String),
}

/// The request body: `partitions` grouped by topic, in the order given.
pub fn request(
    kind: ElectionKind,
    partitions: &[TopicPartition],
    timeout_ms: i32,
) -> ElectLeadersRequest {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for p in partitions {
        by_topic
            .entry(p.topic.as_str())
            .or_default()
            .push(p.partition);
    }
    ElectLeadersRequest::default()
        .with_election_type(kind.code())
        .with_timeout_ms(timeout_ms)
        .with_topic_partitions(Some(
            by_topic
                .into_iter()
                .map(|(topic, partitions)| {
                    TopicPartitions::default()
                        .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                        .with_partitions(partitions)
                })
                .collect(),
        ))
}

/// Per partition: `Ok` (elected, or `ELECTION_NOT_NEEDED`) or Kafka's error (code and
/// message); a top-level error refuses them all.
pub fn outcomes(response: &ElectLeadersResponse) -> Result<Vec<ElectionOutcome>, ElectionError> {
    if response.error_code != 0 {
        return Err(ElectionError::Refused(error_text(
            response.error_code,
            None,
        )));
    }
    let not_needed = ResponseError::ElectionNotNeeded.code();
    Ok(response
        .replica_election_results
        .iter()
        .flat_map(|t| {
            t.partition_result.iter().map(move |p| {
                let partition = TopicPartition {
                    topic: t.topic.to_string(),
                    partition: p.partition_id,
                };
                let result = match p.error_code {
                    0 => Ok(()),
                    code if code == not_needed => Ok(()),
                    code => Err(error_text(code, p.error_message.as_deref())),
                };
                ElectionOutcome { partition, result }
            })
        })
        .collect())
}

/// Runs a `kind` election for `partitions` through the first of `brokers` (id, `host:port`)
/// that answers; Kafka waits up to `timeout` for the elections. One outcome per partition Kafka
/// reported.
pub async fn elect(
    probe: &OffsetProbe,
    brokers: &[(i32, String)],
    kind: ElectionKind,
    partitions: &[TopicPartition],
    timeout: Duration,
) -> Result<Vec<ElectionOutcome>, ElectionError> {
    let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    let body = request(kind, partitions, timeout_ms);
    let api = (ApiKey::ElectLeaders, VERSION);
    probe
        .first_broker(brokers, api, &body, timeout + ANSWER_GRACE, outcomes)
        .await
}

impl ForwardedError for ElectionError {
    fn no_broker() -> Self {
        ElectionError::NoBroker
    }
    fn exchange(broker: i32, error: ExchangeError) -> Self {
        match error {
            ExchangeError::Connection(e) => ElectionError::Connection(e),
            ExchangeError::Protocol(reason) => ElectionError::Protocol { broker, reason },
        }
    }
    fn is_refusal(&self) -> bool {
        matches!(self, ElectionError::Refused(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::elect_leaders_response::{
        PartitionResult, ReplicaElectionResult,
    };
    use kafka_protocol::protocol::Encodable;

    fn tp(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }

    #[test]
    fn request_carries_the_kind_and_groups_partitions_by_topic() {
        let partitions = [tp("b", 1), tp("a", 0), tp("b", 0)];
        for (kind, code) in [(ElectionKind::Preferred, 0), (ElectionKind::Unclean, 1)] {
            let req = request(kind, &partitions, 30_000);
            assert_eq!(req.election_type, code);
            assert_eq!(req.timeout_ms, 30_000);
            let topics: Vec<(String, Vec<i32>)> = req
                .topic_partitions
                .as_ref()
                .unwrap()
                .iter()
                .map(|t| (t.topic.to_string(), t.partitions.clone()))
                .collect();
            assert_eq!(
                topics,
                vec![("a".to_string(), vec![0]), ("b".to_string(), vec![1, 0])]
            );
            // On the wire (v2, flexible: varint lengths, tagged fields): the election type
            // first, then 2 topics, "a" with 1 partition and "b" with 2, then the timeout.
            let mut buf = BytesMut::new();
            req.encode(&mut buf, VERSION).unwrap();
            let topic = |partitions: usize| (1 + 1) + (1 + 4 * partitions) + 1;
            assert_eq!(buf.len(), 1 + 1 + topic(1) + topic(2) + 4 + 1);
            assert_eq!(buf[0], code as u8);
            assert_eq!(buf[buf.len() - 5..buf.len() - 1], 30_000i32.to_be_bytes());
        }
    }

    #[test]
    fn outcomes_accept_not_needed_name_errors_per_partition_and_a_refusal_as_a_whole() {
        let partition = |id, code, message: Option<&str>| {
            PartitionResult::default()
                .with_partition_id(id)
                .with_error_code(code)
                .with_error_message(message.map(|m| StrBytes::from_string(m.into())))
        };
        let response = ElectLeadersResponse::default().with_replica_election_results(vec![
            ReplicaElectionResult::default()
                .with_topic(TopicName(StrBytes::from_static_str("t")))
                .with_partition_result(vec![
                    partition(0, 0, None),
                    partition(1, ResponseError::ElectionNotNeeded.code(), None),
                    partition(
                        2,
                        ResponseError::PreferredLeaderNotAvailable.code(),
                        Some("Failed to elect leader for partition t-2"),
                    ),
                ]),
        ]);
        let got = outcomes(&response).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].result, Ok(()));
        assert_eq!(got[1].result, Ok(()));
        assert_eq!(got[2].partition.to_string(), "t-2");
        let err = got[2].result.clone().unwrap_err();
        assert!(
            err.contains("PreferredLeaderNotAvailable") && err.contains("Failed to elect"),
            "{err}"
        );

        let refused = response.with_error_code(ResponseError::ClusterAuthorizationFailed.code());
        let e = outcomes(&refused).unwrap_err();
        assert!(e.to_string().contains("ClusterAuthorizationFailed"), "{e}");
    }
}
