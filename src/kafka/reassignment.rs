//! Reorder-only partition reassignments (AlterPartitionReassignments v0), sent on the offset
//! probe's connection (its TLS and SASL) because librdkafka has no reassignment API. Kafka
//! forwards the request from any broker to the active controller; a reassignment that keeps
//! the same replicas completes at once and moves no data: only the preferred leader changes.
//! The wire format is the `kafka-protocol` crate's.

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ApiKey, BrokerId,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use thiserror::Error;

use super::offset_probe::{OffsetProbe, ProbeError};
use super::probe_exchange::{error_text, ExchangeError, ForwardedError};
use crate::promotion::{ReplicaOrder, TopicPartition};

const VERSION: i16 = 0;

#[derive(Debug, Error)]
pub enum ReassignmentError {
    #[error("no broker to send the reassignment to (the metadata lists none)")]
    NoBroker,
    #[error("the offset probe is off (TLS or SASL set without Secrets), so no reassignment can be sent: set spec.kafka.tls / spec.kafka.sasl")]
    NoProbe,
    #[error(transparent)]
    Connection(#[from] ProbeError),
    #[error(transparent)]
    Metadata(#[from] super::KafkaError),
    #[error("broker {broker}: {reason}")]
    Protocol { broker: i32, reason: String },
    #[error("the reassignment request was refused: {0}")]
    Refused(String),
}

/// One partition's reordering result: `Ok`, or Kafka's error (code name and message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReorderOutcome {
    pub partition: TopicPartition,
    pub result: Result<(), String>,
}

/// The request body for `orders`, grouped by topic.
pub fn request(orders: &[ReplicaOrder], timeout_ms: i32) -> AlterPartitionReassignmentsRequest {
    let mut by_topic: BTreeMap<&str, Vec<ReassignablePartition>> = BTreeMap::new();
    for o in orders {
        by_topic
            .entry(o.partition.topic.as_str())
            .or_default()
            .push(
                ReassignablePartition::default()
                    .with_partition_index(o.partition.partition)
                    .with_replicas(Some(o.replicas.iter().map(|&b| BrokerId(b)).collect())),
            );
    }
    AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(timeout_ms)
        .with_topics(
            by_topic
                .into_iter()
                .map(|(topic, partitions)| {
                    ReassignableTopic::default()
                        .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                        .with_partitions(partitions)
                })
                .collect(),
        )
}

/// Per partition: `Ok` or Kafka's error (code and message); a top-level error refuses them all.
pub fn outcomes(
    response: &AlterPartitionReassignmentsResponse,
) -> Result<Vec<ReorderOutcome>, ReassignmentError> {
    if response.error_code != 0 {
        return Err(ReassignmentError::Refused(error_text(
            response.error_code,
            response.error_message.as_deref(),
        )));
    }
    Ok(response
        .responses
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                let partition = TopicPartition {
                    topic: t.name.to_string(),
                    partition: p.partition_index,
                };
                let result = match p.error_code {
                    0 => Ok(()),
                    code => Err(error_text(code, p.error_message.as_deref())),
                };
                ReorderOutcome { partition, result }
            })
        })
        .collect())
}

/// Sends `orders` to the first of `brokers` (id, `host:port`, in the order to try them) that
/// answers.
pub async fn reorder(
    probe: &OffsetProbe,
    brokers: &[(i32, String)],
    orders: &[ReplicaOrder],
) -> Result<Vec<ReorderOutcome>, ReassignmentError> {
    let timeout = probe.timeout();
    let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    let body = request(orders, timeout_ms);
    let api = (ApiKey::AlterPartitionReassignments, VERSION);
    probe
        .first_broker(brokers, api, &body, timeout, outcomes)
        .await
}

impl ForwardedError for ReassignmentError {
    fn no_broker() -> Self {
        ReassignmentError::NoBroker
    }
    fn exchange(broker: i32, error: ExchangeError) -> Self {
        match error {
            ExchangeError::Connection(e) => ReassignmentError::Connection(e),
            ExchangeError::Protocol(reason) => ReassignmentError::Protocol { broker, reason },
        }
    }
    fn is_refusal(&self) -> bool {
        matches!(self, ReassignmentError::Refused(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::alter_partition_reassignments_response::{
        ReassignablePartitionResponse, ReassignableTopicResponse,
    };
    use kafka_protocol::protocol::Encodable;

    fn order(topic: &str, partition: i32, replicas: &[i32]) -> ReplicaOrder {
        ReplicaOrder {
            partition: TopicPartition {
                topic: topic.into(),
                partition,
            },
            replicas: replicas.to_vec(),
        }
    }

    #[test]
    fn request_groups_partitions_by_topic_and_keeps_the_order_given() {
        let req = request(
            &[
                order("b", 1, &[1, 2, 4]),
                order("a", 0, &[2, 1, 4]),
                order("b", 0, &[3, 1, 4]),
            ],
            5000,
        );
        let mut buf = BytesMut::new();
        req.encode(&mut buf, VERSION).unwrap();
        // v0 is a flexible version (varint lengths, tagged fields): timeout, 2 topics; "a" with
        // 1 partition of 3 replicas, "b" with 2. A partition: index, replicas, no tags.
        let partition = 4 + (1 + 3 * 4) + 1;
        let topic = |partitions: usize| (1 + 1) + 1 + partitions * partition + 1;
        assert_eq!(buf.len(), 4 + 1 + topic(1) + topic(2) + 1);
        assert_eq!(req.timeout_ms, 5000);
        type Layout = Vec<(String, Vec<(i32, Vec<i32>)>)>;
        let topics: Layout = req
            .topics
            .iter()
            .map(|t| {
                let parts = t
                    .partitions
                    .iter()
                    .map(|p| {
                        let replicas = p.replicas.as_ref().unwrap().iter().map(|b| b.0).collect();
                        (p.partition_index, replicas)
                    })
                    .collect();
                (t.name.to_string(), parts)
            })
            .collect();
        assert_eq!(
            topics,
            vec![
                ("a".to_string(), vec![(0, vec![2, 1, 4])]),
                (
                    "b".to_string(),
                    vec![(1, vec![1, 2, 4]), (0, vec![3, 1, 4])]
                ),
            ]
        );
    }

    #[test]
    fn outcomes_name_kafkas_errors_per_partition_and_a_refusal_as_a_whole() {
        let partition = |index, code, message: Option<&str>| {
            ReassignablePartitionResponse::default()
                .with_partition_index(index)
                .with_error_code(code)
                .with_error_message(message.map(|m| StrBytes::from_string(m.into())))
        };
        let response = AlterPartitionReassignmentsResponse::default().with_responses(vec![
            ReassignableTopicResponse::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![
                    partition(0, 0, None),
                    partition(1, 39, Some("Replica 9 is not alive")),
                ]),
        ]);
        let got = outcomes(&response).unwrap();
        assert_eq!(got[0].result, Ok(()));
        assert_eq!(got[1].partition.to_string(), "t-1");
        let err = got[1].result.clone().unwrap_err();
        assert!(
            err.contains("InvalidReplicaAssignment") && err.contains("not alive"),
            "{err}"
        );

        let refused = response.with_error_code(31);
        let e = outcomes(&refused).unwrap_err();
        assert!(e.to_string().contains("ClusterAuthorizationFailed"), "{e}");
    }
}
