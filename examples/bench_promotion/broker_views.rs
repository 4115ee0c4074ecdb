//! Each broker's own view of the bench topic's partition, polled every 10 ms on one kept
//! connection per broker (Metadata v12 with the `kafka-protocol` crate, plaintext: the bed's
//! example cluster). Brokers learn the controller's ISR change from the metadata log at
//! different moments; the earliest broker to show the partition under min ISR is the floor of
//! any detection, and the spread between brokers is what asking one broker or another costs.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, MetadataRequest, MetadataResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const VERSION: i16 = 12;
const POLL: Duration = Duration::from_millis(10);

/// When each broker first showed the partition without the stopped leader and without the
/// observer in its ISR (seconds since the epoch). One per run: the pods' addresses change when
/// a stopped broker comes back.
pub struct BrokerViews {
    first_seen: Arc<Mutex<BTreeMap<i32, f64>>>,
    answered: Arc<Mutex<BTreeMap<i32, f64>>>,
    pollers: Vec<tokio::task::JoinHandle<()>>,
}

impl BrokerViews {
    /// Starts one poller per broker (id, `host:port`) for partition 0 of `topic`, and returns
    /// once each has answered once (or after 2 s).
    pub async fn start(
        brokers: &BTreeMap<i32, String>,
        topic: &str,
        leader: i32,
        observer: i32,
    ) -> Self {
        let first_seen = Arc::<Mutex<BTreeMap<i32, f64>>>::default();
        let answered = Arc::<Mutex<BTreeMap<i32, f64>>>::default();
        let pollers = brokers
            .iter()
            .map(|(&id, address)| {
                let poller = Poller {
                    id,
                    address: address.clone(),
                    topic: topic.to_string(),
                    leader,
                    observer,
                    first_seen: first_seen.clone(),
                    answered: answered.clone(),
                };
                tokio::spawn(poller.run())
            })
            .collect();
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while answered.lock().unwrap().len() < brokers.len() && std::time::Instant::now() < deadline
        {
            tokio::time::sleep(POLL).await;
        }
        BrokerViews {
            first_seen,
            answered,
            pollers,
        }
    }

    /// Stops the pollers; returns when each broker first showed the leader out of the ISR.
    pub fn finish(self) -> BTreeMap<i32, f64> {
        for p in &self.pollers {
            p.abort();
        }
        drop(self.answered);
        std::mem::take(&mut *self.first_seen.lock().unwrap())
    }
}

struct Poller {
    id: i32,
    address: String,
    topic: String,
    leader: i32,
    observer: i32,
    first_seen: Arc<Mutex<BTreeMap<i32, f64>>>,
    answered: Arc<Mutex<BTreeMap<i32, f64>>>,
}

impl Poller {
    async fn run(self) {
        let mut correlation = 0;
        loop {
            let connect = TcpStream::connect(&self.address);
            let Ok(Ok(mut stream)) =
                tokio::time::timeout(Duration::from_millis(200), connect).await
            else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            let _ = stream.set_nodelay(true);
            loop {
                correlation += 1;
                let answer = tokio::time::timeout(
                    Duration::from_millis(500),
                    isr_of(&mut stream, &self.topic, correlation),
                )
                .await;
                let Ok(Ok(isr)) = answer else { break };
                let now = super::now();
                self.answered.lock().unwrap().insert(self.id, now);
                if isr
                    .is_some_and(|isr| !isr.contains(&self.leader) && !isr.contains(&self.observer))
                {
                    self.first_seen
                        .lock()
                        .unwrap()
                        .entry(self.id)
                        .or_insert(now);
                }
                tokio::time::sleep(POLL).await;
            }
        }
    }
}

/// The ISR of partition 0 of `topic` as the broker at the other end of `stream` sees it
/// (`None`: the broker does not know the partition).
async fn isr_of(
    stream: &mut TcpStream,
    topic: &str,
    correlation: i32,
) -> anyhow::Result<Option<Vec<i32>>> {
    let key = ApiKey::Metadata;
    let body = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(
            TopicName(StrBytes::from_string(topic.to_string())),
        ))]))
        .with_allow_auto_topic_creation(false);
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(VERSION)
        .with_correlation_id(correlation)
        .with_client_id(Some(StrBytes::from_static_str("bench-broker-views")));
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    header.encode(&mut buf, key.request_header_version(VERSION))?;
    body.encode(&mut buf, VERSION)?;
    let len = i32::try_from(buf.len() - 4)?;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    stream.write_all(&buf).await?;
    let len = stream.read_i32().await?;
    anyhow::ensure!((0..16 << 20).contains(&len), "answer of {len} bytes");
    let mut answer = vec![0; len as usize];
    stream.read_exact(&mut answer).await?;
    let mut answer = Bytes::from(answer);
    let header = ResponseHeader::decode(&mut answer, key.response_header_version(VERSION))?;
    anyhow::ensure!(header.correlation_id == correlation, "answer out of order");
    let response = MetadataResponse::decode(&mut answer, VERSION)?;
    anyhow::ensure!(!answer.has_remaining(), "bytes after the answer");
    Ok(response
        .topics
        .first()
        .filter(|t| t.error_code == 0)
        .and_then(|t| t.partitions.iter().find(|p| p.partition_index == 0))
        .map(|p| p.isr_nodes.iter().map(|b| b.0).collect()))
}
