//! The reads one scan makes: metadata (replicas, ISR, leader, live brokers) and topic configs
//! through librdkafka, offsets through the ListOffsets probe.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;

use super::list_offsets::OffsetKind;
use super::offset_probe::OffsetProbe;
use super::KafkaError;

pub(super) type Admin = Arc<AdminClient<DefaultClientContext>>;

/// One partition as the metadata reports it.
#[derive(Clone, Debug)]
pub(super) struct MetaPartition {
    pub topic: Arc<str>,
    pub partition: i32,
    pub leader: Option<i32>,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// The topic's id and the partition's leader epoch, when the answer carries them (the
    /// probe's Metadata v12 does, librdkafka's here does not): `freshness`.
    pub topic_id: Option<u128>,
    pub leader_epoch: Option<i32>,
}

#[derive(Clone, Debug, Default)]
pub(super) struct Metadata {
    /// Registered brokers and their `host:port`.
    pub brokers: BTreeMap<i32, String>,
    pub partitions: Vec<MetaPartition>,
    /// Topics listed with an error instead of their partitions.
    pub undescribed: Vec<String>,
}

pub(super) async fn read_metadata(
    admin: &Admin,
    timeout: Duration,
) -> Result<Metadata, KafkaError> {
    let admin = admin.clone();
    tokio::task::spawn_blocking(move || {
        let md = admin
            .inner()
            .fetch_metadata(None, timeout)
            .map_err(|e| KafkaError::Metadata(e.to_string()))?;
        let brokers = md
            .brokers()
            .iter()
            .map(|b| (b.id(), format!("{}:{}", b.host(), b.port())))
            .collect();
        let mut partitions = Vec::new();
        let undescribed = md
            .topics()
            .iter()
            .filter(|t| t.error().is_some())
            .map(|t| t.name().to_string())
            .collect();
        for t in md.topics().iter().filter(|t| t.error().is_none()) {
            let topic: Arc<str> = Arc::from(t.name());
            for p in t.partitions() {
                partitions.push(MetaPartition {
                    topic: topic.clone(),
                    partition: p.id(),
                    leader: (p.leader() >= 0).then_some(p.leader()),
                    replicas: p.replicas().to_vec(),
                    isr: p.isr().to_vec(),
                    topic_id: None,
                    leader_epoch: None,
                });
            }
        }
        Ok(Metadata {
            brokers,
            partitions,
            undescribed,
        })
    })
    .await
    .map_err(|e| KafkaError::Join(e.to_string()))?
}

/// `min.insync.replicas` per topic: DescribeConfigs returns the effective value (the topic's own
/// setting, else the broker default). A topic whose config cannot be read falls back to the
/// broker default read from `broker`; if that fails too, it is left out (unknown).
pub(super) async fn read_min_isr(
    admin: &Admin,
    topics: &[Arc<str>],
    broker: Option<i32>,
    timeout: Duration,
) -> HashMap<Arc<str>, u32> {
    const KEY: &str = "min.insync.replicas";
    let opts = AdminOptions::new().request_timeout(Some(timeout));
    let specs: Vec<ResourceSpecifier> =
        topics.iter().map(|t| ResourceSpecifier::Topic(t)).collect();
    let results = admin
        .describe_configs(&specs, &opts)
        .await
        .unwrap_or_default();
    // Per topic: None when its description failed (or the whole call did), Some(value) else.
    let described: Vec<Option<Option<&str>>> = (0..topics.len())
        .map(|i| {
            let config = results.get(i)?.as_ref().ok()?;
            Some(config.get(KEY).and_then(|e| e.value.as_deref()))
        })
        .collect();
    let MinIsrSplit {
        known: mut out,
        default: missing,
        failed,
    } = split_min_isr(topics, &described);
    if !failed.is_empty() {
        // Left out, not defaulted: an unknown min ISR makes the partition's health Unknown, so a
        // demotion that would need it is held back instead of decided on a guess.
        tracing::warn!(
            topics = failed.len(),
            "min.insync.replicas of {} topic(s) could not be described; their health is unknown this scan",
            failed.len()
        );
    }
    if let (false, Some(id)) = (missing.is_empty(), broker) {
        let default = admin
            .describe_configs(&[ResourceSpecifier::Broker(id)], &opts)
            .await
            .ok()
            .and_then(|r| r.into_iter().next())
            .and_then(|r| r.ok())
            .and_then(|c| {
                c.get(KEY)
                    .and_then(|e| e.value.as_deref())
                    .and_then(|v| v.parse().ok())
            });
        if let Some(v) = default {
            out.extend(missing.into_iter().map(|t| (t, v)));
        }
    }
    out
}

/// Splits topics' described `min.insync.replicas` into the values known, the topics described
/// without a value (they take the broker default) and the topics whose description failed or
/// whose value does not parse (left unknown: never given the default, which could be lower than
/// a topic override the operator could not read).
fn split_min_isr(topics: &[Arc<str>], described: &[Option<Option<&str>>]) -> MinIsrSplit {
    let (mut known, mut default, mut failed) = (HashMap::new(), Vec::new(), Vec::new());
    for (i, topic) in topics.iter().enumerate() {
        match described.get(i).copied().flatten() {
            Some(Some(v)) => match v.parse() {
                Ok(v) => {
                    known.insert(topic.clone(), v);
                }
                Err(_) => failed.push(topic.clone()),
            },
            Some(None) => default.push(topic.clone()),
            None => failed.push(topic.clone()),
        }
    }
    MinIsrSplit {
        known,
        default,
        failed,
    }
}

/// [`split_min_isr`]'s answer.
#[derive(Debug, PartialEq, Eq)]
struct MinIsrSplit {
    known: HashMap<Arc<str>, u32>,
    /// Described without a value: the broker default applies.
    default: Vec<Arc<str>>,
    /// Not described, or a value that does not parse: unknown this scan.
    failed: Vec<Arc<str>>,
}

/// What the offset probe learned in one scan.
#[derive(Debug, Default)]
pub(super) struct Offsets {
    /// Brokers that answered the log end offset request.
    pub reachable: BTreeMap<i32, bool>,
    pub log_end: HashMap<(Arc<str>, i32, i32), i64>,
    pub high_watermark: HashMap<(Arc<str>, i32), i64>,
    /// Why brokers did not answer, for logs.
    pub errors: Vec<String>,
}

/// Asks every registered broker, concurrently, for the log end offsets of the replicas it hosts
/// and the high watermarks of the partitions it leads.
pub(super) async fn read_offsets(probe: &OffsetProbe, md: &Metadata) -> Offsets {
    let mut hosted: BTreeMap<i32, BTreeMap<&str, Vec<i32>>> =
        md.brokers.keys().map(|&b| (b, BTreeMap::new())).collect();
    let mut led: BTreeMap<i32, BTreeMap<&str, Vec<i32>>> = BTreeMap::new();
    for p in &md.partitions {
        for r in &p.replicas {
            if let Some(topics) = hosted.get_mut(r) {
                topics.entry(&p.topic).or_default().push(p.partition);
            }
        }
        if let Some(l) = p.leader.filter(|l| md.brokers.contains_key(l)) {
            led.entry(l)
                .or_default()
                .entry(&p.topic)
                .or_default()
                .push(p.partition);
        }
    }
    // The topic list is flattened at the call site: a closure parameter typed `&...` would be
    // higher-ranked, and the returned future could not borrow from it.
    let flatten = |topics: &BTreeMap<&'_ str, Vec<i32>>| -> Vec<(String, Vec<i32>)> {
        topics
            .iter()
            .map(|(t, p)| ((*t).to_owned(), p.clone()))
            .collect()
    };
    let ask = |broker: i32, kind: OffsetKind, topics: Vec<(String, Vec<i32>)>| {
        let address = md.brokers[&broker].clone();
        async move {
            let topics: Vec<(&str, Vec<i32>)> = topics
                .iter()
                .map(|(t, p)| (t.as_str(), p.clone()))
                .collect();
            (
                broker,
                kind,
                probe.query(broker, &address, kind, &topics).await,
            )
        }
    };
    let requests = hosted
        .iter()
        .map(|(b, t)| ask(*b, OffsetKind::LocalLogEnd, flatten(t)))
        .chain(
            led.iter()
                .map(|(b, t)| ask(*b, OffsetKind::HighWatermark, flatten(t))),
        );
    let topic_names: HashMap<&str, Arc<str>> = md
        .partitions
        .iter()
        .map(|p| (&*p.topic, p.topic.clone()))
        .collect();
    let mut out = Offsets::default();
    for (broker, kind, answer) in join_all(requests).await {
        let answer = match answer {
            Ok(a) => a,
            Err(e) => {
                out.errors.push(e.to_string());
                if kind == OffsetKind::LocalLogEnd {
                    out.reachable.insert(broker, false);
                }
                continue;
            }
        };
        if kind == OffsetKind::LocalLogEnd {
            out.reachable.insert(broker, true);
        }
        for po in answer {
            let (Ok(offset), Some(topic)) = (po.result, topic_names.get(po.topic.as_str())) else {
                continue;
            };
            match kind {
                OffsetKind::LocalLogEnd => out
                    .log_end
                    .insert((topic.clone(), po.partition, broker), offset),
                OffsetKind::HighWatermark => out
                    .high_watermark
                    .insert((topic.clone(), po.partition), offset),
            };
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topic_that_failed_to_describe_is_left_unknown_not_defaulted() {
        let topics: Vec<Arc<str>> = ["set", "unset", "failed", "garbage", "absent"]
            .into_iter()
            .map(Arc::from)
            .collect();
        // "absent": the answer has fewer results than topics (the whole call failed).
        let described = [Some(Some("3")), Some(None), None, Some(Some("x"))];
        let MinIsrSplit {
            known,
            default,
            failed,
        } = split_min_isr(&topics, &described);
        assert_eq!(known, HashMap::from([(Arc::from("set"), 3)]));
        assert_eq!(default, vec![Arc::<str>::from("unset")]);
        assert_eq!(
            failed,
            ["failed", "garbage", "absent"]
                .map(Arc::<str>::from)
                .to_vec()
        );
    }
}
