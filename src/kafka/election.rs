//! Leader elections through librdkafka's `rd_kafka_ElectLeaders` (librdkafka >= 2.4), which the
//! rdkafka crate does not wrap. Preferred elections move leadership off a broker before it is
//! demoted; unclean elections are the opt-in takeover when every primary replica is lost.
//!
//! The unsafe code is confined to `elect_blocking`; every pointer it creates it also frees, on
//! every path, and nothing borrowed from librdkafka outlives the event that owns it.

use std::ffi::CStr;
use std::time::Duration;

use rdkafka::admin::AdminClient;
use rdkafka::bindings as rdsys;
use rdkafka::client::DefaultClientContext;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::TopicPartitionList;
use thiserror::Error;

use crate::promotion::TopicPartition;

/// Which election Kafka runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElectionKind {
    /// Make the first assigned replica leader if it is in the ISR.
    Preferred,
    /// Elect a replica outside the ISR for a partition without leader (may lose data).
    Unclean,
}

/// One partition's election result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElectionOutcome {
    pub partition: TopicPartition,
    /// `Ok` when elected or nothing to do (`ELECTION_NOT_NEEDED`); else Kafka's error text.
    pub result: Result<(), String>,
}

#[derive(Debug, Error)]
pub enum ElectionError {
    #[error("leader election request failed: {0}")]
    Request(String),
    #[error(
        "no answer to the leader election request within {0:?}: check that the brokers are reachable"
    )]
    Timeout(Duration),
    #[error("leader election task failed: {0}")]
    Join(String),
}

/// Runs an election for `partitions` and returns one outcome per partition Kafka reported.
pub async fn elect_leaders(
    admin: std::sync::Arc<AdminClient<DefaultClientContext>>,
    kind: ElectionKind,
    partitions: Vec<TopicPartition>,
    timeout: Duration,
) -> Result<Vec<ElectionOutcome>, ElectionError> {
    tokio::task::spawn_blocking(move || elect_blocking(&admin, kind, &partitions, timeout))
        .await
        .map_err(|e| ElectionError::Join(e.to_string()))?
}

fn elect_blocking(
    admin: &AdminClient<DefaultClientContext>,
    kind: ElectionKind,
    partitions: &[TopicPartition],
    timeout: Duration,
) -> Result<Vec<ElectionOutcome>, ElectionError> {
    let mut list = TopicPartitionList::with_capacity(partitions.len());
    for p in partitions {
        list.add_partition(&p.topic, p.partition);
    }
    let election_type = match kind {
        ElectionKind::Preferred => rdsys::rd_kafka_ElectionType_t::RD_KAFKA_ELECTION_TYPE_PREFERRED,
        ElectionKind::Unclean => rdsys::rd_kafka_ElectionType_t::RD_KAFKA_ELECTION_TYPE_UNCLEAN,
    };
    let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    let rk = admin.inner().native_ptr();
    // SAFETY: `rk` is a live client owned by `admin`, which outlives this call. The request and
    // the options are copied by librdkafka inside `rd_kafka_ElectLeaders` (rdkafka_admin.c), so
    // they are destroyed right after it; the partition list is copied by `_new`, and `list` stays
    // ours. The queue is destroyed after its event. Result pointers belong to the event and are
    // read before `rd_kafka_event_destroy`.
    unsafe {
        let request = rdsys::rd_kafka_ElectLeaders_new(election_type, list.ptr());
        if request.is_null() {
            return Err(ElectionError::Request(
                "librdkafka rejected the election type".into(),
            ));
        }
        let options = rdsys::rd_kafka_AdminOptions_new(
            rk,
            rdsys::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_ELECTLEADERS,
        );
        let mut errstr = [0 as std::ffi::c_char; 256];
        rdsys::rd_kafka_AdminOptions_set_request_timeout(
            options,
            timeout_ms,
            errstr.as_mut_ptr(),
            errstr.len(),
        );
        rdsys::rd_kafka_AdminOptions_set_operation_timeout(
            options,
            timeout_ms,
            errstr.as_mut_ptr(),
            errstr.len(),
        );
        let queue = rdsys::rd_kafka_queue_new(rk);
        rdsys::rd_kafka_ElectLeaders(rk, request, options, queue);
        rdsys::rd_kafka_ElectLeaders_destroy(request);
        rdsys::rd_kafka_AdminOptions_destroy(options);

        // librdkafka always answers (at the latest when its own request timeout fires); the extra
        // second only guards against waiting forever.
        let event = rdsys::rd_kafka_queue_poll(queue, timeout_ms.saturating_add(1000));
        let outcome = if event.is_null() {
            Err(ElectionError::Timeout(timeout))
        } else {
            read_result(event)
        };
        if !event.is_null() {
            rdsys::rd_kafka_event_destroy(event);
        }
        rdsys::rd_kafka_queue_destroy(queue);
        outcome
    }
}

/// Reads an ElectLeaders result event. Safety: `event` is a live, non-null event.
unsafe fn read_result(
    event: *mut rdsys::rd_kafka_event_t,
) -> Result<Vec<ElectionOutcome>, ElectionError> {
    unsafe {
        if rdsys::rd_kafka_event_error(event)
            != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
        {
            return Err(ElectionError::Request(c_text(
                rdsys::rd_kafka_event_error_string(event),
            )));
        }
        let result = rdsys::rd_kafka_event_ElectLeaders_result(event);
        if result.is_null() {
            return Err(ElectionError::Request(
                "the answer was not an ElectLeaders result".into(),
            ));
        }
        let mut count = 0usize;
        let items = rdsys::rd_kafka_ElectLeaders_result_partitions(result, &mut count);
        let mut out = Vec::with_capacity(count);
        for i in 0..count {
            let item = *items.add(i);
            let tp = &*rdsys::rd_kafka_topic_partition_result_partition(item);
            let error = rdsys::rd_kafka_topic_partition_result_error(item);
            let code: RDKafkaErrorCode = rdsys::rd_kafka_error_code(error).into();
            let result = match code {
                RDKafkaErrorCode::NoError | RDKafkaErrorCode::ElectionNotNeeded => Ok(()),
                _ => Err(c_text(rdsys::rd_kafka_error_string(error))),
            };
            out.push(ElectionOutcome {
                partition: TopicPartition {
                    topic: c_text(tp.topic),
                    partition: tp.partition,
                },
                result,
            });
        }
        Ok(out)
    }
}

/// Copies a C string owned by librdkafka. Safety: `ptr` is null or a valid NUL-terminated string.
unsafe fn c_text(ptr: *const std::ffi::c_char) -> String {
    if ptr.is_null() {
        return String::new();
    }
    unsafe { CStr::from_ptr(ptr) }
        .to_string_lossy()
        .into_owned()
}
