//! One request and its answer on a fresh connection of the offset probe (its TLS and SASL),
//! the whole exchange within the probe's timeout (or a longer one): what the admin requests
//! (`quorum`, `reassignment`, `election`) and the hedged metadata read (`hedged_metadata`) share. Each
//! caller turns an [`ExchangeError`] into its own error.

use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable};

use super::offset_probe::{OffsetProbe, ProbeError};
use super::secure_stream::{decode_response, request_frame, round_trip_up_to};

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
