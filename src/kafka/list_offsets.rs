//! Kafka's ListOffsets request, version 2, the one Kafka request that returns a *follower's* log
//! end offset: with replica id -2 ("debugging replica") a broker answers from its local replica,
//! leader or not, and for timestamp -1 (latest) without an isolation level it returns the local
//! log end offset (Kafka 4.1 `ReplicaManager.fetchOffsetForTimestamp`,
//! `Partition.fetchOffsetForTimestamp`). librdkafka always sends replica id -1 to the leader, so
//! the offset probe sends this itself, with the wire format of the `kafka-protocol` crate, as it
//! does the elections and reassignments. Pure code.

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, ListOffsetsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

/// ListOffsets v2: the isolation level (left at read uncommitted) and the replica id every
/// version has; any Kafka since 0.11 serves it, and 4.x still does (KIP-896 dropped only v0).
pub const VERSION: i16 = 2;
/// Latest offset: the log end offset (replica id -2) or the high watermark (replica id -1).
const LATEST_TIMESTAMP: i64 = -1;

/// Whose offset to ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetKind {
    /// The answering broker's own replica's log end offset (replica id -2, any replica).
    LocalLogEnd,
    /// The high watermark (replica id -1, read uncommitted; only the leader answers).
    HighWatermark,
}

impl OffsetKind {
    fn replica_id(self) -> i32 {
        match self {
            OffsetKind::LocalLogEnd => -2,
            OffsetKind::HighWatermark => -1,
        }
    }
}

/// One partition's answer: the offset, or Kafka's error code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionOffset {
    pub topic: String,
    pub partition: i32,
    pub result: Result<i64, i16>,
}

/// The request body: the latest offset of `partitions`, grouped by topic, in the order given.
/// The isolation level stays 0 (read uncommitted), which replica id -2 ignores.
pub fn request(kind: OffsetKind, topics: &[(&str, Vec<i32>)]) -> ListOffsetsRequest {
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(kind.replica_id()))
        .with_topics(
            topics
                .iter()
                .map(|(topic, partitions)| {
                    ListOffsetsTopic::default()
                        .with_name(TopicName(StrBytes::from_string((*topic).to_string())))
                        .with_partitions(
                            partitions
                                .iter()
                                .map(|&p| {
                                    ListOffsetsPartition::default()
                                        .with_partition_index(p)
                                        .with_timestamp(LATEST_TIMESTAMP)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

/// Per partition: the offset, or Kafka's error code (ListOffsets has no top-level error).
pub fn offsets(response: &ListOffsetsResponse) -> Vec<PartitionOffset> {
    response
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| PartitionOffset {
                topic: t.name.to_string(),
                partition: p.partition_index,
                result: match p.error_code {
                    0 => Ok(p.offset),
                    code => Err(code),
                },
            })
        })
        .collect()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use bytes::Bytes;
    use kafka_protocol::messages::list_offsets_response::{
        ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
    };
    use kafka_protocol::messages::ApiKey;
    use kafka_protocol::ResponseError;

    use crate::kafka::secure_stream::{decode_response, request_frame};

    #[test]
    fn request_frame_matches_the_v2_schema() {
        for (kind, replica_id) in [
            (OffsetKind::LocalLogEnd, -2i32),
            (OffsetKind::HighWatermark, -1),
        ] {
            let body = request(kind, &[("t", vec![0, 3])]);
            let b = request_frame(ApiKey::ListOffsets, VERSION, 7, "koo", &body).unwrap();
            let expected: Vec<u8> = [
                &(b.len() as i32 - 4).to_be_bytes()[..],
                &[0, 2, 0, 2], // api key 2, version 2
                &[0, 0, 0, 7], // correlation id
                &[0, 3, b'k', b'o', b'o'],
                &replica_id.to_be_bytes(),
                &[0], // isolation level
                &[0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 2],
                &[0, 0, 0, 0],
                &(-1i64).to_be_bytes(),
                &[0, 0, 0, 3],
                &(-1i64).to_be_bytes(),
            ]
            .concat();
            assert_eq!(b, expected, "{kind:?}");
        }
    }

    /// A ListOffsets v2 answer body as a broker sends it (response header v0 included): topic
    /// `t` with `partitions` as (index, error code, offset).
    pub(in crate::kafka) fn answer(correlation: i32, partitions: &[(i32, i16, i64)]) -> Vec<u8> {
        let mut b = [
            &correlation.to_be_bytes()[..],
            &[0, 0, 0, 0],             // throttle
            &[0, 0, 0, 1, 0, 1, b't'], // one topic "t"
            &(partitions.len() as i32).to_be_bytes(),
        ]
        .concat();
        for (index, error, offset) in partitions {
            b.extend_from_slice(&index.to_be_bytes());
            b.extend_from_slice(&error.to_be_bytes());
            b.extend_from_slice(&(-1i64).to_be_bytes()); // timestamp
            b.extend_from_slice(&offset.to_be_bytes());
        }
        b
    }

    fn decode(correlation: i32, body: &[u8]) -> Result<ListOffsetsResponse, String> {
        decode_response(
            ApiKey::ListOffsets,
            VERSION,
            correlation,
            Bytes::copy_from_slice(body),
        )
    }

    #[test]
    fn decodes_offsets_and_errors() {
        let not_leader = ResponseError::NotLeaderOrFollower.code();
        let body = answer(9, &[(0, 0, 42), (1, not_leader, -1)]);
        let got = offsets(&decode(9, &body).unwrap());
        assert_eq!(
            got,
            vec![
                PartitionOffset {
                    topic: "t".into(),
                    partition: 0,
                    result: Ok(42)
                },
                PartitionOffset {
                    topic: "t".into(),
                    partition: 1,
                    result: Err(6)
                },
            ]
        );
    }

    #[test]
    fn offsets_keep_every_topic_and_error_code() {
        let partition = |index, code, offset| {
            ListOffsetsPartitionResponse::default()
                .with_partition_index(index)
                .with_error_code(code)
                .with_offset(offset)
        };
        let topic = |name: &'static str, partitions| {
            ListOffsetsTopicResponse::default()
                .with_name(TopicName(StrBytes::from_static_str(name)))
                .with_partitions(partitions)
        };
        let unavailable = ResponseError::OffsetNotAvailable.code();
        let response = ListOffsetsResponse::default().with_topics(vec![
            topic("a", vec![partition(2, 0, 7)]),
            topic("b", vec![partition(0, unavailable, -1), partition(1, 0, 0)]),
        ]);
        let got: Vec<(String, i32, Result<i64, i16>)> = offsets(&response)
            .into_iter()
            .map(|p| (p.topic, p.partition, p.result))
            .collect();
        assert_eq!(
            got,
            vec![
                ("a".into(), 2, Ok(7)),
                ("b".into(), 0, Err(unavailable)),
                ("b".into(), 1, Ok(0)),
            ]
        );
    }

    #[test]
    fn rejects_truncated_and_mismatched_responses() {
        let full = answer(9, &[(0, 0, 42), (1, 6, -1)]);
        let truncated = decode(9, &full[..full.len() - 3]).unwrap_err();
        assert!(
            truncated.contains("bad ListOffsets response"),
            "{truncated}"
        );
        let mismatched = decode(8, &full).unwrap_err();
        assert!(
            mismatched.contains("for request 9, expected 8"),
            "{mismatched}"
        );
    }
}
