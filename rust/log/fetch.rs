//! A Fetch response read and encoded in one go: record bytes go from the segment files into the
//! response frame without passing through Python objects (one read, one encode copy), which is
//! most of a consumer's traffic. Python decides what to read and whether to wait (long-poll).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchResponse, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{ProducerId, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};

use super::partition::Partition;
use kafka_protocol::ResponseError;

const FETCH: i16 = 1;
const OFFSET_OUT_OF_RANGE: i16 = ResponseError::OffsetOutOfRange.code();
const UNKNOWN_TOPIC_OR_PARTITION: i16 = ResponseError::UnknownTopicOrPartition.code();
const KAFKA_STORAGE_ERROR: i16 = ResponseError::KafkaStorageError.code();

/// One partition of a fetch: (partition index, error code already known or 0, fetch offset,
/// partition max bytes).
pub type Wanted = (i32, i16, i64, i32);

/// What a fetch read: the encoded frame, record bytes in it, whether any partition had an error.
pub struct Encoded {
    pub frame: BytesMut,
    pub record_bytes: usize,
    pub any_error: bool,
}

/// Reads every wanted partition (KIP-74 sizes: at most `partition max bytes` each and `max_bytes`
/// in all, but the first batch of the first partition with data whole) and encodes the response.
/// `read_committed` (isolation level 1): reads stop at the last stable offset and the aborted
/// transactions overlapping the data are listed, for the consumer to drop (UnifiedLog.read).
pub fn fetch(
    lookup: impl Fn(&str, i32) -> Option<std::sync::Arc<std::sync::Mutex<Partition>>>,
    correlation_id: i32,
    version: i16,
    topics: &[(String, Vec<Wanted>)],
    max_bytes: i32,
    read_committed: bool,
) -> anyhow::Result<Encoded> {
    let mut budget = max_bytes.max(0) as usize;
    let mut record_bytes = 0usize;
    let mut any_error = false;
    let mut responses = Vec::with_capacity(topics.len());
    for (name, partitions) in topics {
        let mut out = Vec::with_capacity(partitions.len());
        for &(index, error, offset, partition_max) in partitions {
            let mut data = PartitionData::default()
                .with_partition_index(index)
                .with_records(Some(Bytes::new()));
            let shared = if error == 0 {
                lookup(name, index)
            } else {
                None
            };
            let Some(shared) = shared else {
                any_error = true;
                out.push(data.with_error_code(if error == 0 {
                    UNKNOWN_TOPIC_OR_PARTITION
                } else {
                    error
                }));
                continue;
            };
            let limit = (partition_max.max(0) as usize).min(budget);
            let read = {
                let p = super::lock(&shared);
                let stable = p.stable_offset();
                let upper = if read_committed { stable } else { i64::MAX };
                p.read(offset, limit, record_bytes == 0, upper).map(|read| {
                    let aborted = match &read {
                        Some(bytes) if read_committed => {
                            Some(p.aborted_overlapping(offset, end_of(bytes).unwrap_or(stable)))
                        }
                        _ => None,
                    };
                    (read, p.next_offset(), stable, p.log_start_offset(), aborted)
                })
            };
            // A file that cannot be read (I/O error, out of descriptors) fails this partition only.
            let Ok((read, hw, stable, log_start, aborted)) = read else {
                any_error = true;
                out.push(data.with_error_code(KAFKA_STORAGE_ERROR));
                continue;
            };
            match read {
                // Below the log start or past the end: as Kafka (ReplicaManager's
                // createLogReadResult), the offsets are -1 too.
                None => {
                    any_error = true;
                    data = data
                        .with_error_code(OFFSET_OUT_OF_RANGE)
                        .with_high_watermark(-1)
                        .with_last_stable_offset(-1)
                        .with_log_start_offset(-1);
                }
                Some(bytes) => {
                    data = data.with_high_watermark(hw).with_last_stable_offset(stable);
                    if let Some(aborted) = aborted {
                        data = data.with_aborted_transactions(Some(
                            aborted
                                .into_iter()
                                .map(|(pid, first)| {
                                    AbortedTransaction::default()
                                        .with_producer_id(ProducerId(pid))
                                        .with_first_offset(first)
                                })
                                .collect(),
                        ));
                    }
                    if version >= 5 {
                        data = data.with_log_start_offset(log_start);
                    }
                    record_bytes += bytes.len();
                    budget = budget.saturating_sub(bytes.len());
                    data = data.with_records(Some(Bytes::from(bytes)));
                }
            }
            out.push(data);
        }
        responses.push(
            FetchableTopicResponse::default()
                .with_topic(TopicName(StrBytes::from_string(name.clone())))
                .with_partitions(out),
        );
    }
    let response = FetchResponse::default().with_responses(responses);
    let mut frame = BytesMut::with_capacity(record_bytes + 256);
    crate::codec::header::begin_response(
        &mut frame,
        correlation_id,
        crate::codec::apis::response_header_version(FETCH, version),
    );
    response.encode(&mut frame, version)?;
    crate::codec::header::finish_frame(&mut frame);
    Ok(Encoded {
        frame,
        record_bytes,
        any_error,
    })
}

/// The offset after the last batch in `bytes` (whole batches), if any.
fn end_of(bytes: &[u8]) -> Option<i64> {
    let mut pos = 0;
    let mut end = None;
    while let Some(h) = super::batch::Header::parse(&bytes[pos..]) {
        end = Some(h.last_offset() + 1);
        pos += h.size;
        if pos >= bytes.len() {
            break;
        }
    }
    end
}
