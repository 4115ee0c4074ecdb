//! Encoding and decoding of Kafka's ListOffsets request, version 2 (API key 2), the one Kafka
//! request that returns a *follower's* log end offset: with replica id -2 ("debugging replica")
//! a broker answers from its local replica, leader or not, and for timestamp -1 (latest) without
//! an isolation level it returns the local log end offset (Kafka 4.1
//! `ReplicaManager.fetchOffsetForTimestamp`, `Partition.fetchOffsetForTimestamp`).
//! librdkafka always sends replica id -1 to the leader, so this is done by hand. Pure code.

use thiserror::Error;

const API_KEY_LIST_OFFSETS: i16 = 2;
const API_VERSION: i16 = 2;
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

#[derive(Debug, Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("ListOffsets response truncated at byte {0}")]
    Truncated(usize),
    #[error("ListOffsets response is for request {got}, expected {expected}")]
    Correlation { expected: i32, got: i32 },
    #[error("ListOffsets response has a negative length at byte {0}")]
    NegativeLength(usize),
    #[error("ListOffsets response has a topic name that is not UTF-8")]
    NotUtf8,
}

/// A complete request frame (length prefix included) for the given partitions, grouped by topic.
pub fn encode_request(
    correlation_id: i32,
    client_id: &str,
    kind: OffsetKind,
    topics: &[(&str, Vec<i32>)],
) -> Vec<u8> {
    let mut b = Vec::with_capacity(
        64 + topics
            .iter()
            .map(|(t, p)| t.len() + 6 + p.len() * 12)
            .sum::<usize>(),
    );
    b.extend_from_slice(&[0; 4]); // length, patched below
    b.extend_from_slice(&API_KEY_LIST_OFFSETS.to_be_bytes());
    b.extend_from_slice(&API_VERSION.to_be_bytes());
    b.extend_from_slice(&correlation_id.to_be_bytes());
    put_string(&mut b, client_id);
    b.extend_from_slice(&kind.replica_id().to_be_bytes());
    b.push(0); // isolation level: read uncommitted (ignored for replica id -2)
    b.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for (topic, partitions) in topics {
        put_string(&mut b, topic);
        b.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
        for p in partitions {
            b.extend_from_slice(&p.to_be_bytes());
            b.extend_from_slice(&LATEST_TIMESTAMP.to_be_bytes());
        }
    }
    let len = (b.len() - 4) as i32;
    b[..4].copy_from_slice(&len.to_be_bytes());
    b
}

fn put_string(b: &mut Vec<u8>, s: &str) {
    b.extend_from_slice(&(s.len() as i16).to_be_bytes());
    b.extend_from_slice(s.as_bytes());
}

/// Decodes a response body (the bytes after the 4-byte length prefix).
pub fn decode_response(
    expected_correlation_id: i32,
    body: &[u8],
) -> Result<Vec<PartitionOffset>, DecodeError> {
    let mut r = Reader { buf: body, pos: 0 };
    let got = r.i32()?;
    if got != expected_correlation_id {
        return Err(DecodeError::Correlation {
            expected: expected_correlation_id,
            got,
        });
    }
    let _throttle_ms = r.i32()?;
    let mut out = Vec::new();
    for _ in 0..r.count()? {
        let topic = r.string()?;
        for _ in 0..r.count()? {
            let partition = r.i32()?;
            let error = r.i16()?;
            let _timestamp = r.i64()?;
            let offset = r.i64()?;
            let result = if error == 0 { Ok(offset) } else { Err(error) };
            out.push(PartitionOffset {
                topic: topic.clone(),
                partition,
                result,
            });
        }
    }
    Ok(out)
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let bytes = self
            .buf
            .get(self.pos..self.pos + N)
            .ok_or(DecodeError::Truncated(self.pos))?;
        self.pos += N;
        Ok(bytes.try_into().expect("slice of length N"))
    }

    fn i16(&mut self) -> Result<i16, DecodeError> {
        self.take().map(i16::from_be_bytes)
    }

    fn i32(&mut self) -> Result<i32, DecodeError> {
        self.take().map(i32::from_be_bytes)
    }

    fn i64(&mut self) -> Result<i64, DecodeError> {
        self.take().map(i64::from_be_bytes)
    }

    fn count(&mut self) -> Result<usize, DecodeError> {
        let at = self.pos;
        usize::try_from(self.i32()?).map_err(|_| DecodeError::NegativeLength(at))
    }

    fn string(&mut self) -> Result<String, DecodeError> {
        let at = self.pos;
        let len = usize::try_from(self.i16()?).map_err(|_| DecodeError::NegativeLength(at))?;
        let bytes = self
            .buf
            .get(self.pos..self.pos + len)
            .ok_or(DecodeError::Truncated(self.pos))?;
        self.pos += len;
        String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::NotUtf8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_layout_matches_the_v2_schema() {
        let b = encode_request(7, "koo", OffsetKind::LocalLogEnd, &[("t", vec![0, 3])]);
        let expected: Vec<u8> = [
            &(b.len() as i32 - 4).to_be_bytes()[..],
            &[0, 2, 0, 2], // api key 2, version 2
            &[0, 0, 0, 7], // correlation id
            &[0, 3, b'k', b'o', b'o'],
            &(-2i32).to_be_bytes(),
            &[0], // isolation level
            &[0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 2],
            &[0, 0, 0, 0],
            &(-1i64).to_be_bytes(),
            &[0, 0, 0, 3],
            &(-1i64).to_be_bytes(),
        ]
        .concat();
        assert_eq!(b, expected);
    }

    fn response(correlation: i32) -> Vec<u8> {
        [
            &correlation.to_be_bytes()[..],
            &[0, 0, 0, 0],             // throttle
            &[0, 0, 0, 1, 0, 1, b't'], // one topic "t"
            &[0, 0, 0, 2],             // two partitions
            &[0, 0, 0, 0, 0, 0],       // p0, no error
            &(-1i64).to_be_bytes(),
            &42i64.to_be_bytes(),
            &[0, 0, 0, 1, 0, 6], // p1, NOT_LEADER_OR_FOLLOWER
            &(-1i64).to_be_bytes(),
            &(-1i64).to_be_bytes(),
        ]
        .concat()
    }

    #[test]
    fn decodes_offsets_and_errors() {
        let got = decode_response(9, &response(9)).unwrap();
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
    fn rejects_truncated_and_mismatched_responses() {
        let full = response(9);
        assert!(matches!(
            decode_response(9, &full[..full.len() - 3]),
            Err(DecodeError::Truncated(_))
        ));
        assert_eq!(
            decode_response(8, &full),
            Err(DecodeError::Correlation {
                expected: 8,
                got: 9
            })
        );
    }
}
