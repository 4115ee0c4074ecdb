//! Which KRaft controllers the quorum still hears from: DescribeQuorum (v1) sent on the offset
//! probe's connection to a broker, which forwards it to the active controller (the metadata the
//! scan reads lists brokers only). Used for the reconciler's unreachable-pod rule
//! (`crate::kafka_liveness`, `crate::rollout::unreachable`): a silent controller pod whose voter
//! the leader no longer hears from may be gone on without in a promotion.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::{ApiKey, DescribeQuorumRequest, DescribeQuorumResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use thiserror::Error;

use super::offset_probe::{OffsetProbe, ProbeError};
use super::probe_exchange::{error_text, ExchangeError, ForwardedError};

/// v1 is the first version with `lastFetchTimestamp` (KIP-836); Kafka 4.x serves v0 to v2.
const VERSION: i16 = 1;

/// A voter whose last fetch is this much older than the freshest voter's is taken as gone.
/// Followers fetch from the leader every few hundred ms; 2 s of silence is an outage.
pub const FRESH_WITHIN_MS: i64 = 2_000;

const METADATA_TOPIC: &str = "__cluster_metadata";

#[derive(Debug, Error)]
pub enum QuorumError {
    #[error("no live broker to send DescribeQuorum to")]
    NoBroker,
    #[error("the offset probe is off (TLS or SASL set without Secrets), so DescribeQuorum cannot be sent")]
    NoProbe,
    #[error(transparent)]
    Connection(#[from] ProbeError),
    #[error(transparent)]
    Metadata(#[from] super::KafkaError),
    #[error("broker {broker}: {reason}")]
    Protocol { broker: i32, reason: String },
    #[error("DescribeQuorum was refused: {0}")]
    Refused(String),
}

/// The request for the metadata log's only partition.
pub fn request() -> DescribeQuorumRequest {
    DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])])
}

/// Each voter and whether the quorum still hears from it (pure): the leader is, and so is a
/// voter whose last fetch is within [`FRESH_WITHIN_MS`] of the freshest voter's (both on the
/// leader's clock). A voter without a fetch time (-1) is not.
pub fn live_voters(response: &DescribeQuorumResponse) -> Result<BTreeMap<i32, bool>, QuorumError> {
    let refused = |code: i16, message: Option<&StrBytes>| {
        QuorumError::Refused(error_text(code, message.map(|m| m.as_str())))
    };
    if response.error_code != 0 {
        return Err(refused(
            response.error_code,
            response.error_message.as_ref(),
        ));
    }
    let partition = response
        .topics
        .iter()
        .filter(|t| t.topic_name.as_str() == METADATA_TOPIC)
        .flat_map(|t| &t.partitions)
        .find(|p| p.partition_index == 0)
        .ok_or_else(|| QuorumError::Refused("no __cluster_metadata-0 in the answer".into()))?;
    if partition.error_code != 0 {
        return Err(refused(
            partition.error_code,
            partition.error_message.as_ref(),
        ));
    }
    let freshest = partition
        .current_voters
        .iter()
        .map(|v| v.last_fetch_timestamp)
        .max()
        .unwrap_or(-1);
    Ok(partition
        .current_voters
        .iter()
        .map(|v| {
            let id = v.replica_id.0;
            let heard =
                v.last_fetch_timestamp >= 0 && v.last_fetch_timestamp >= freshest - FRESH_WITHIN_MS;
            (id, id == partition.leader_id.0 || heard)
        })
        .collect())
}

/// Asks the first of `brokers` (id, `host:port`, in the order to try them) that answers.
pub async fn describe(
    probe: &OffsetProbe,
    brokers: &[(i32, String)],
) -> Result<BTreeMap<i32, bool>, QuorumError> {
    let api = (ApiKey::DescribeQuorum, VERSION);
    probe
        .first_broker(brokers, api, &request(), probe.timeout(), live_voters)
        .await
}

impl ForwardedError for QuorumError {
    fn no_broker() -> Self {
        QuorumError::NoBroker
    }
    fn exchange(broker: i32, error: ExchangeError) -> Self {
        match error {
            ExchangeError::Connection(e) => QuorumError::Connection(e),
            ExchangeError::Protocol(reason) => QuorumError::Protocol { broker, reason },
        }
    }
    /// The controller's own answer: another broker would forward to the same one.
    fn is_refusal(&self) -> bool {
        matches!(self, QuorumError::Refused(_))
    }
}

/// The voters as a set of ids, for tests and logs.
pub fn alive_ids(voters: &BTreeMap<i32, bool>) -> BTreeSet<i32> {
    voters
        .iter()
        .filter(|(_, a)| **a)
        .map(|(id, _)| *id)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::describe_quorum_response::{
        PartitionData as Partition, ReplicaState, TopicData as Topic,
    };
    use kafka_protocol::messages::BrokerId;
    use kafka_protocol::protocol::Encodable;

    fn voter(id: i32, last_fetch: i64) -> ReplicaState {
        ReplicaState::default()
            .with_replica_id(BrokerId(id))
            .with_last_fetch_timestamp(last_fetch)
    }

    fn response(leader: i32, voters: Vec<ReplicaState>) -> DescribeQuorumResponse {
        DescribeQuorumResponse::default().with_topics(vec![Topic::default()
            .with_topic_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
            .with_partitions(vec![Partition::default()
                .with_partition_index(0)
                .with_leader_id(BrokerId(leader))
                .with_current_voters(voters)])])
    }

    #[test]
    fn a_voter_the_leader_stopped_hearing_from_is_not_alive() {
        // Leader 101 (its own fetch time is "now"), 102 fetched 0.3 s ago, 103 12 s ago.
        let r = response(
            101,
            vec![voter(101, 50_000), voter(102, 49_700), voter(103, 38_000)],
        );
        let got = live_voters(&r).unwrap();
        assert_eq!(
            got,
            BTreeMap::from([(101, true), (102, true), (103, false)])
        );
        assert_eq!(alive_ids(&got), BTreeSet::from([101, 102]));
    }

    #[test]
    fn the_leader_counts_even_without_a_fetch_time_and_others_do_not() {
        let r = response(
            101,
            vec![voter(101, -1), voter(102, 49_700), voter(103, -1)],
        );
        assert_eq!(
            live_voters(&r).unwrap(),
            BTreeMap::from([(101, true), (102, true), (103, false)])
        );
    }

    #[test]
    fn errors_are_refusals_with_the_code_name() {
        let mut r = response(101, vec![]);
        r.error_code = 31; // CLUSTER_AUTHORIZATION_FAILED
        let e = live_voters(&r).unwrap_err().to_string();
        assert!(e.contains("ClusterAuthorizationFailed"), "{e}");
        let empty = DescribeQuorumResponse::default();
        assert!(matches!(live_voters(&empty), Err(QuorumError::Refused(_))));
    }

    #[test]
    fn the_request_asks_for_the_metadata_partition() {
        let mut buf = BytesMut::new();
        request().encode(&mut buf, VERSION).unwrap();
        // v1 is flexible: topics (compact array of 1: 0x02), the name (compact string: length
        // + 1), partitions (0x02), partition 0 (int32), then tagged fields.
        let mut want = vec![0x02, METADATA_TOPIC.len() as u8 + 1];
        want.extend_from_slice(METADATA_TOPIC.as_bytes());
        want.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x00, 0x00, 0x00]);
        assert_eq!(&buf[..], &want[..]);
    }
}
