//! Each topic's `min.insync.replicas` (DescribeConfigs v4), sent on the offset probe's
//! connection (its TLS and SASL) to brokers the watcher already knows by address. librdkafka's
//! admin call needs a connection librdkafka has made itself, from the bootstrap name: on a new
//! leader after its zone was lost, that name's lookup may wait on the lost zone's CoreDNS and
//! librdkafka's first request fail after 5 s, which left the first scans without min ISR (so
//! without a decision) on the bed (D17). The probe asks brokers by the addresses the metadata
//! gave (pod IPs) in the watcher's order (`read_order`). A topic's answer is its effective
//! value: the topic's own, else the broker's default.

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use super::offset_probe::{OffsetProbe, MAX_RESPONSE_BYTES};
use super::probe_exchange::{error_text, ExchangeError};

/// DescribeConfigs v4 (Kafka 2.8 and later; flexible encoding).
const VERSION: i16 = 4;
const KEY: &str = "min.insync.replicas";
/// The resource type of a topic.
const TOPIC: i8 = 2;

/// One request for `min.insync.replicas` of every topic in `topics`.
pub fn request(topics: &[Arc<str>]) -> DescribeConfigsRequest {
    let resources = topics
        .iter()
        .map(|t| {
            DescribeConfigsResource::default()
                .with_resource_type(TOPIC)
                .with_resource_name(StrBytes::from_string(t.to_string()))
                .with_configuration_keys(Some(vec![StrBytes::from_static_str(KEY)]))
        })
        .collect();
    DescribeConfigsRequest::default()
        .with_resources(resources)
        .with_include_synonyms(false)
        .with_include_documentation(false)
}

/// The topics whose answer carries a number; a topic Kafka refused (deleted meanwhile, not
/// authorized) is left out.
pub fn min_isr_of(response: &DescribeConfigsResponse) -> HashMap<Arc<str>, u32> {
    response
        .results
        .iter()
        .filter(|r| r.error_code == 0 && r.resource_type == TOPIC)
        .filter_map(|r| {
            let value = r
                .configs
                .iter()
                .find(|c| c.name.as_str() == KEY)?
                .value
                .as_ref()?
                .parse()
                .ok()?;
            Some((Arc::from(r.resource_name.as_str()), value))
        })
        .collect()
}

/// `min.insync.replicas` of `topics`, from the first of `brokers` (id, `host:port`, in the
/// order to try them) that answers; else why the last one did not.
pub async fn read_min_isr(
    probe: &OffsetProbe,
    brokers: &[(i32, String)],
    topics: &[Arc<str>],
) -> Result<HashMap<Arc<str>, u32>, String> {
    let body = request(topics);
    let mut last = "no broker to ask".to_string();
    for (broker, address) in brokers {
        let answer: Result<DescribeConfigsResponse, _> = probe
            .exchange(
                *broker,
                address,
                (ApiKey::DescribeConfigs, VERSION),
                &body,
                MAX_RESPONSE_BYTES,
            )
            .await;
        match answer {
            Ok(response) => {
                if let Some(refused) = response.results.iter().find(|r| r.error_code != 0) {
                    tracing::debug!(
                        broker,
                        topic = %refused.resource_name.as_str(),
                        "DescribeConfigs refused a topic: {}",
                        error_text(refused.error_code, refused.error_message.as_deref())
                    );
                }
                return Ok(min_isr_of(&response));
            }
            Err(ExchangeError::Connection(e)) => last = e.to_string(),
            Err(ExchangeError::Protocol(reason)) => last = format!("broker {broker}: {reason}"),
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::describe_configs_response::{
        DescribeConfigsResourceResult, DescribeConfigsResult,
    };
    use kafka_protocol::protocol::Encodable;

    #[test]
    fn the_request_asks_each_topic_for_min_isr_only() {
        let topics: Vec<Arc<str>> = vec![Arc::from("a"), Arc::from("b")];
        let r = request(&topics);
        assert_eq!(r.resources.len(), 2);
        for (res, name) in r.resources.iter().zip(["a", "b"]) {
            assert_eq!(res.resource_type, TOPIC);
            assert_eq!(res.resource_name.as_str(), name);
            let keys: Vec<&str> = res
                .configuration_keys
                .as_ref()
                .unwrap()
                .iter()
                .map(|k| k.as_str())
                .collect();
            assert_eq!(keys, vec![KEY]);
        }
        let mut buf = BytesMut::new();
        r.encode(&mut buf, VERSION).unwrap();
        let wire = buf.freeze();
        assert!(
            wire.windows(KEY.len()).any(|w| w == KEY.as_bytes()),
            "the key is on the wire"
        );
    }

    #[test]
    fn the_answer_gives_each_topics_number_and_leaves_out_refusals() {
        let result = |name: &'static str, code: i16, value: Option<&'static str>| {
            DescribeConfigsResult::default()
                .with_error_code(code)
                .with_resource_type(TOPIC)
                .with_resource_name(StrBytes::from_static_str(name))
                .with_configs(
                    value
                        .map(|v| {
                            vec![DescribeConfigsResourceResult::default()
                                .with_name(StrBytes::from_static_str(KEY))
                                .with_value(Some(StrBytes::from_static_str(v)))]
                        })
                        .unwrap_or_default(),
                )
        };
        let response = DescribeConfigsResponse::default().with_results(vec![
            result("a", 0, Some("2")),
            result("gone", 3, None),
            result("odd", 0, Some("two")),
            result("b", 0, Some("1")),
        ]);
        let got = min_isr_of(&response);
        assert_eq!(
            got,
            HashMap::from([(Arc::from("a"), 2), (Arc::from("b"), 1)])
        );
    }

    #[tokio::test]
    async fn without_a_broker_that_answers_it_says_why() {
        let probe = OffsetProbe::new("t", std::time::Duration::from_millis(200));
        let topics = [Arc::from("a")];
        assert_eq!(
            read_min_isr(&probe, &[], &topics).await,
            Err("no broker to ask".to_string())
        );
        let refused = read_min_isr(&probe, &[(1, "127.0.0.1:1".to_string())], &topics).await;
        assert!(refused.is_err(), "{refused:?}");
    }
}
