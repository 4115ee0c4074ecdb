//! Asks one broker for offsets of the replicas it hosts, over a plain Kafka connection.
//! See `list_offsets` for why this is not done through librdkafka.

use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::list_offsets::{
    DecodeError, OffsetKind, PartitionOffset, decode_response, encode_request,
};

/// Largest answer accepted: ~28 bytes a partition, so this covers well over a million.
const MAX_RESPONSE_BYTES: usize = 64 << 20;

#[derive(Debug, Error)]
pub enum ProbeError {
    #[error("cannot reach broker {broker} at {address}: {source}")]
    Io {
        broker: i32,
        address: String,
        source: std::io::Error,
    },
    #[error("broker {broker} at {address} did not answer within {timeout:?}")]
    Timeout {
        broker: i32,
        address: String,
        timeout: Duration,
    },
    #[error("broker {broker} sent a bad ListOffsets answer: {source}")]
    Decode { broker: i32, source: DecodeError },
    #[error(
        "broker {broker} announced a {size}-byte answer, more than the {MAX_RESPONSE_BYTES} accepted"
    )]
    TooLarge { broker: i32, size: i64 },
}

/// Sends ListOffsets requests; one short-lived connection per request.
#[derive(Debug)]
pub struct OffsetProbe {
    client_id: String,
    timeout: Duration,
    next_correlation: AtomicI32,
}

impl OffsetProbe {
    pub fn new(client_id: impl Into<String>, timeout: Duration) -> Self {
        OffsetProbe {
            client_id: client_id.into(),
            timeout,
            next_correlation: AtomicI32::new(1),
        }
    }

    /// Offsets of `partitions` (grouped by topic) as broker `broker` at `address` sees them.
    pub async fn query(
        &self,
        broker: i32,
        address: &str,
        kind: OffsetKind,
        topics: &[(&str, Vec<i32>)],
    ) -> Result<Vec<PartitionOffset>, ProbeError> {
        let correlation = self.next_correlation.fetch_add(1, Ordering::Relaxed);
        let request = encode_request(correlation, &self.client_id, kind, topics);
        let exchange = async {
            let io = |source| ProbeError::Io {
                broker,
                address: address.to_string(),
                source,
            };
            let mut stream = TcpStream::connect(address).await.map_err(io)?;
            stream.write_all(&request).await.map_err(io)?;
            let size = i64::from(stream.read_i32().await.map_err(io)?);
            let size = usize::try_from(size)
                .ok()
                .filter(|&s| s <= MAX_RESPONSE_BYTES)
                .ok_or(ProbeError::TooLarge { broker, size })?;
            let mut body = vec![0; size];
            stream.read_exact(&mut body).await.map_err(io)?;
            decode_response(correlation, &body)
                .map_err(|source| ProbeError::Decode { broker, source })
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .unwrap_or_else(|_| {
                Err(ProbeError::Timeout {
                    broker,
                    address: address.to_string(),
                    timeout: self.timeout,
                })
            })
    }
}
