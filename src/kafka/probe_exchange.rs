//! One request and its answer on a fresh connection of the offset probe (its TLS and SASL),
//! the whole exchange within the probe's timeout (or a longer one): what the admin requests
//! (`quorum`, `reassignment`, `election`) and the hedged metadata read (`hedged_metadata`) share. Each
//! caller turns an [`ExchangeError`] into its own error.

use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable};
use kafka_protocol::ResponseError;

use super::offset_probe::{OffsetProbe, ProbeError};
use super::secure_stream::{
    decode_response, request_frame, round_trip_up_to, MAX_SASL_RESPONSE_BYTES,
};

/// The error of an admin request that any broker forwards to the active controller
/// (DescribeQuorum, AlterPartitionReassignments, ElectLeaders): what [`OffsetProbe::first_broker`]
/// needs to know of it.
pub(super) trait ForwardedError {
    /// No broker to ask.
    fn no_broker() -> Self;
    /// `broker` brought no usable answer.
    fn exchange(broker: i32, error: ExchangeError) -> Self;
    /// Kafka's own refusal: another broker would forward the request to the same controller and
    /// get the same answer, so no other is asked.
    fn is_refusal(&self) -> bool;
}

/// Kafka's error `code` by name, with its message when there is one.
pub(super) fn error_text(code: i16, message: Option<&str>) -> String {
    let name = ResponseError::try_from_code(code)
        .map(|e| format!("{e:?}"))
        .unwrap_or_else(|| format!("error {code}"));
    match message {
        Some(m) if !m.is_empty() => format!("{name}: {m}"),
        _ => name,
    }
}

/// Why an exchange brought no usable answer.
#[derive(Debug)]
pub(super) enum ExchangeError {
    /// No connection, TLS or SASL refused, no answer in time, the connection broke.
    Connection(ProbeError),
    /// The request could not be encoded or the answer not decoded.
    Protocol(String),
}

impl OffsetProbe {
    /// Sends `body` as API `key` version `version` to `broker` at `address` and decodes the
    /// answer, of at most `max_bytes`, within the probe's timeout.
    pub(super) async fn exchange<Req: Encodable, Resp: Decodable>(
        &self,
        broker: i32,
        address: &str,
        api: (ApiKey, i16),
        body: &Req,
        max_bytes: usize,
    ) -> Result<Resp, ExchangeError> {
        self.exchange_within(broker, address, api, body, max_bytes, self.timeout())
            .await
    }

    /// Sends `body` to the first of `brokers` (id, `host:port`) that answers, each exchange
    /// within `timeout`, and reads the answer with `read`. Stops at the first answer read, or
    /// at Kafka's refusal; else the last broker's error.
    pub(super) async fn first_broker<Req, Resp, T, E>(
        &self,
        brokers: &[(i32, String)],
        api: (ApiKey, i16),
        body: &Req,
        timeout: Duration,
        read: impl Fn(&Resp) -> Result<T, E>,
    ) -> Result<T, E>
    where
        Req: Encodable,
        Resp: Decodable,
        E: ForwardedError,
    {
        let mut last = E::no_broker();
        for (broker, address) in brokers {
            let broker = *broker;
            let answer = self
                .exchange_within(broker, address, api, body, MAX_SASL_RESPONSE_BYTES, timeout)
                .await;
            match answer
                .map_err(|e| E::exchange(broker, e))
                .and_then(|r| read(&r))
            {
                Ok(done) => return Ok(done),
                Err(e) if e.is_refusal() => return Err(e),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// [`Self::exchange`] within `timeout` instead of the probe's: for a request Kafka answers
    /// only once it is carried out (a leader election).
    pub(super) async fn exchange_within<Req: Encodable, Resp: Decodable>(
        &self,
        broker: i32,
        address: &str,
        (key, version): (ApiKey, i16),
        body: &Req,
        max_bytes: usize,
        timeout: std::time::Duration,
    ) -> Result<Resp, ExchangeError> {
        let (correlation, connect_timeout) = self.next_request(broker);
        let exchange = async {
            let mut stream = self
                .connect(broker, address, connect_timeout, correlation)
                .await
                .map_err(ExchangeError::Connection)?;
            let frame = request_frame(key, version, correlation, self.client_id(), body)
                .map_err(|e| ExchangeError::Protocol(e.to_string()))?;
            let answer = round_trip_up_to(&mut *stream, &frame, max_bytes)
                .await
                .map_err(|e| ExchangeError::Connection(self.io_error(broker, address, e)))?;
            decode_response(key, version, correlation, answer).map_err(ExchangeError::Protocol)
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .unwrap_or_else(|_| {
                Err(ExchangeError::Connection(ProbeError::Timeout {
                    broker,
                    address: address.to_string(),
                    timeout,
                }))
            })
    }
}
