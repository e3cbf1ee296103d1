//! Kafka RecordBatch v2 (magic 2) as bytes: header fields, validation, the in-place rewrites a
//! broker makes on append (base offset, leader epoch, LogAppendTime), and a small builder/reader
//! for uncompressed batches (the coordinator's own records).
//!
//! Layout of the 61-byte header (big endian):
//! ```text
//!  0 base_offset i64   8 batch_length i32   12 partition_leader_epoch i32   16 magic i8
//! 17 crc u32 (CRC-32C of bytes 21..end)     21 attributes i16   23 last_offset_delta i32
//! 27 base_timestamp i64   35 max_timestamp i64   43 producer_id i64   51 producer_epoch i16
//! 53 base_sequence i32    57 records_count i32
//! ```

use kafka_protocol::ResponseError;

pub const HEADER_LEN: usize = 61;
/// Offset of batch_length's end: `batch_length` counts the bytes after it.
pub const LOG_OVERHEAD: usize = 12;
const CRC_START: usize = 21;
const ATTR_COMPRESSION_MASK: i16 = 0x07;
const ATTR_LOG_APPEND_TIME: i16 = 0x08;
const ATTR_CONTROL: i16 = 0x20;

// Kafka's error codes for what validation finds.
pub const CORRUPT_MESSAGE: i16 = ResponseError::CorruptMessage.code();
pub const MESSAGE_TOO_LARGE: i16 = ResponseError::MessageTooLarge.code();
pub const UNSUPPORTED_FOR_MESSAGE_FORMAT: i16 = ResponseError::UnsupportedForMessageFormat.code();
pub const INVALID_RECORD: i16 = ResponseError::InvalidRecord.code();

fn i16_at(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}
fn i64_at(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

/// The header fields of one batch, read from its first 61 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub base_offset: i64,
    /// Whole batch size in bytes, header included.
    pub size: usize,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl Header {
    /// Parses a header; None if `b` is too short or the sizes cannot be a v2 batch.
    pub fn parse(b: &[u8]) -> Option<Header> {
        if b.len() < HEADER_LEN {
            return None;
        }
        let batch_length = i32_at(b, 8);
        if batch_length < (HEADER_LEN - LOG_OVERHEAD) as i32 {
            return None;
        }
        Some(Header {
            base_offset: i64_at(b, 0),
            size: batch_length as usize + LOG_OVERHEAD,
            magic: b[16] as i8,
            crc: u32::from_be_bytes(b[17..21].try_into().unwrap()),
            attributes: i16_at(b, 21),
            last_offset_delta: i32_at(b, 23),
            base_timestamp: i64_at(b, 27),
            max_timestamp: i64_at(b, 35),
            producer_id: i64_at(b, 43),
            producer_epoch: i16_at(b, 51),
            base_sequence: i32_at(b, 53),
            records_count: i32_at(b, 57),
        })
    }

    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }

    pub fn compressed(&self) -> bool {
        self.attributes & ATTR_COMPRESSION_MASK != 0
    }

    pub fn log_append_time(&self) -> bool {
        self.attributes & ATTR_LOG_APPEND_TIME != 0
    }
}

/// True when `batch` (exactly one whole batch) carries the CRC its header claims.
pub fn crc_ok(batch: &[u8], header: &Header) -> bool {
    crc32c::crc32c(&batch[CRC_START..]) == header.crc
}

/// What a producer's batch says about itself, for the idempotence checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    pub batches: usize,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    /// Offsets the batches will take (sum of last_offset_delta + 1).
    pub offset_count: i64,
}

/// Validates client-sent batches as Kafka's LogValidator does (sizes, magic, CRC, counts) and
/// summarises them. Err carries (Kafka error code, message).
pub fn validate(data: &[u8], max_batch_bytes: usize) -> Result<Summary, (i16, String)> {
    let mut pos = 0;
    let mut summary = Summary {
        batches: 0,
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        offset_count: 0,
    };
    if data.is_empty() {
        return Err((INVALID_RECORD, "empty record set".into()));
    }
    while pos < data.len() {
        let rest = &data[pos..];
        if rest.len() > 16 && rest[16] as i8 != 2 {
            return Err((
                UNSUPPORTED_FOR_MESSAGE_FORMAT,
                format!("record batch magic {} is not 2", rest[16] as i8),
            ));
        }
        let header = Header::parse(rest)
            .ok_or((CORRUPT_MESSAGE, "truncated record batch header".to_string()))?;
        if header.size > rest.len() {
            return Err((
                CORRUPT_MESSAGE,
                format!(
                    "record batch of {} bytes is cut at {}",
                    header.size,
                    rest.len()
                ),
            ));
        }
        if header.size > max_batch_bytes {
            return Err((
                MESSAGE_TOO_LARGE,
                format!(
                    "The record batch is {} bytes, larger than max.message.bytes {}",
                    header.size, max_batch_bytes
                ),
            ));
        }
        let batch = &rest[..header.size];
        if !crc_ok(batch, &header) {
            return Err((CORRUPT_MESSAGE, "record batch CRC-32C mismatch".into()));
        }
        // Clients write dense batches (offset deltas 0..count-1); anything else would make the
        // log skip offsets.
        if header.records_count <= 0 || header.last_offset_delta != header.records_count - 1 {
            return Err((
                INVALID_RECORD,
                "record count and last offset delta disagree".into(),
            ));
        }
        if header.attributes & ATTR_CONTROL != 0 {
            return Err((
                INVALID_RECORD,
                "Clients are not allowed to write control records".into(),
            ));
        }
        if summary.batches == 0 {
            summary.producer_id = header.producer_id;
            summary.producer_epoch = header.producer_epoch;
            summary.base_sequence = header.base_sequence;
        }
        summary.batches += 1;
        summary.offset_count += header.last_offset_delta as i64 + 1;
        pos += header.size;
    }
    Ok(summary)
}

/// Assigns offsets from `next_offset` to every batch in `data` (whole batches, already checked),
/// sets the leader epoch to 0 and, when `log_append_time` is given, the LogAppendTime type and
/// timestamp (recomputing the CRC, which covers them). Returns the offset after the last batch
/// and the largest max_timestamp seen with the offset of its batch.
pub fn assign_offsets(
    data: &mut [u8],
    mut next_offset: i64,
    log_append_time: Option<i64>,
) -> (i64, Vec<(usize, Header)>) {
    let mut pos = 0;
    let mut headers = Vec::new();
    while pos + HEADER_LEN <= data.len() {
        let mut header = Header::parse(&data[pos..]).expect("validated batch");
        let batch = &mut data[pos..pos + header.size];
        batch[0..8].copy_from_slice(&next_offset.to_be_bytes());
        batch[12..16].copy_from_slice(&0i32.to_be_bytes());
        header.base_offset = next_offset;
        if let Some(now) = log_append_time {
            header.attributes |= ATTR_LOG_APPEND_TIME;
            header.max_timestamp = now;
            batch[21..23].copy_from_slice(&header.attributes.to_be_bytes());
            batch[35..43].copy_from_slice(&now.to_be_bytes());
            header.crc = crc32c::crc32c(&batch[CRC_START..]);
            batch[17..21].copy_from_slice(&header.crc.to_be_bytes());
        }
        next_offset = header.last_offset() + 1;
        headers.push((pos, header));
        pos += header.size;
    }
    (next_offset, headers)
}

pub fn put_varint(out: &mut Vec<u8>, value: i64) {
    // Zig-zag, then unsigned LEB128, as Kafka's ByteUtils.writeVarlong.
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub fn get_varint(b: &[u8], pos: &mut usize) -> Option<i64> {
    let mut v: u64 = 0;
    let mut shift = 0;
    loop {
        let byte = *b.get(*pos)?;
        *pos += 1;
        v |= ((byte & 0x7f) as u64) << shift;
        if byte & 0x80 == 0 {
            break;
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
    Some(((v >> 1) as i64) ^ -((v & 1) as i64))
}

fn put_bytes(out: &mut Vec<u8>, value: Option<&[u8]>) {
    match value {
        None => put_varint(out, -1),
        Some(v) => {
            put_varint(out, v.len() as i64);
            out.extend_from_slice(v);
        }
    }
}

/// One record to build: (key, value), each possibly null.
pub type KeyValue = (Option<Vec<u8>>, Option<Vec<u8>>);

/// The producer fields of a batch: (producer id, epoch, base sequence); all -1 for none.
pub type ProducerFields = (i64, i16, i32);
pub const NO_PRODUCER: ProducerFields = (-1, -1, -1);

/// Builds an uncompressed v2 batch (base offset 0) holding `records` (key, value), all stamped
/// `timestamp`. The store assigns the real offsets on append.
pub fn build(records: &[KeyValue], timestamp: i64, producer: ProducerFields) -> Vec<u8> {
    let mut body = Vec::new();
    for (delta, (key, value)) in records.iter().enumerate() {
        let mut rec = Vec::new();
        rec.push(0); // attributes
        put_varint(&mut rec, 0); // timestamp delta
        put_varint(&mut rec, delta as i64);
        put_bytes(&mut rec, key.as_deref());
        put_bytes(&mut rec, value.as_deref());
        put_varint(&mut rec, 0); // no headers
        put_varint(&mut body, rec.len() as i64);
        body.extend_from_slice(&rec);
    }
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(&0i64.to_be_bytes());
    out.extend_from_slice(&((HEADER_LEN - LOG_OVERHEAD + body.len()) as i32).to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes()); // leader epoch
    out.push(2); // magic
    out.extend_from_slice(&[0; 4]); // crc, below
    out.extend_from_slice(&0i16.to_be_bytes()); // attributes
    out.extend_from_slice(&(records.len() as i32 - 1).to_be_bytes());
    out.extend_from_slice(&timestamp.to_be_bytes());
    out.extend_from_slice(&timestamp.to_be_bytes());
    out.extend_from_slice(&producer.0.to_be_bytes());
    out.extend_from_slice(&producer.1.to_be_bytes());
    out.extend_from_slice(&producer.2.to_be_bytes());
    out.extend_from_slice(&(records.len() as i32).to_be_bytes());
    out.extend_from_slice(&body);
    let crc = crc32c::crc32c(&out[CRC_START..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

/// One record of an uncompressed batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
}

/// The records of one uncompressed batch (headers skipped); None if malformed or compressed.
pub fn records(batch: &[u8]) -> Option<Vec<Record>> {
    let header = Header::parse(batch)?;
    if header.compressed() || batch.len() < header.size {
        return None;
    }
    let end = header.size;
    let mut pos = HEADER_LEN;
    let mut out = Vec::with_capacity(header.records_count.max(0) as usize);
    let take = |pos: &mut usize| -> Option<Option<Vec<u8>>> {
        let len = get_varint(&batch[..end], pos)?;
        if len < 0 {
            return Some(None);
        }
        let stop = pos.checked_add(len as usize).filter(|&s| s <= end)?;
        let bytes = batch[*pos..stop].to_vec();
        *pos = stop;
        Some(Some(bytes))
    };
    for _ in 0..header.records_count {
        let len = get_varint(&batch[..end], &mut pos)?;
        let rec_end = pos
            .checked_add(usize::try_from(len).ok()?)
            .filter(|&e| e <= end)?;
        pos += 1; // attributes
        let ts_delta = get_varint(&batch[..rec_end], &mut pos)?;
        let offset_delta = get_varint(&batch[..rec_end], &mut pos)?;
        let key = take(&mut pos)?;
        let value = take(&mut pos)?;
        let timestamp = if header.log_append_time() {
            header.max_timestamp
        } else {
            header.base_timestamp + ts_delta
        };
        out.push(Record {
            offset: header.base_offset + offset_delta,
            timestamp,
            key,
            value,
        });
        pos = rec_end;
    }
    Some(out)
}

/// The first record of the batch at or after `min_offset` whose timestamp is >= `target` (or,
/// with `target` None, the first record carrying the batch's max timestamp), as (timestamp,
/// offset). For compressed batches, whose records are not decoded here, the batch's max
/// timestamp and its first offset at or after `min_offset`.
pub fn find_timestamp(batch: &[u8], target: Option<i64>, min_offset: i64) -> Option<(i64, i64)> {
    let header = Header::parse(batch)?;
    let wanted = target.unwrap_or(header.max_timestamp);
    if header.compressed() {
        return (header.last_offset() >= min_offset)
            .then(|| (header.max_timestamp, header.base_offset.max(min_offset)));
    }
    let recs = records(batch)?;
    recs.iter()
        .filter(|r| r.offset >= min_offset)
        .find(|r| {
            if target.is_some() {
                r.timestamp >= wanted
            } else {
                r.timestamp == wanted
            }
        })
        .map(|r| (r.timestamp, r.offset))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recs(n: usize) -> Vec<KeyValue> {
        (0..n)
            .map(|i| (Some(format!("k{i}").into_bytes()), Some(vec![i as u8; 10])))
            .collect()
    }

    #[test]
    fn built_batch_validates_and_reads_back() {
        let b = build(&recs(3), 1000, NO_PRODUCER);
        let s = validate(&b, 1 << 20).unwrap();
        assert_eq!(s.batches, 1);
        assert_eq!(s.offset_count, 3);
        assert_eq!(s.producer_id, -1);
        let r = records(&b).unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r[2].key.as_deref(), Some(&b"k2"[..]));
        assert_eq!(r[1].value, Some(vec![1; 10]));
    }

    #[test]
    fn bad_crc_is_corrupt_and_big_batch_too_large() {
        let mut b = build(&recs(2), 5, NO_PRODUCER);
        assert_eq!(validate(&b, 10).unwrap_err().0, MESSAGE_TOO_LARGE);
        let last = b.len() - 1;
        b[last] ^= 1;
        assert_eq!(validate(&b, 1 << 20).unwrap_err().0, CORRUPT_MESSAGE);
        assert_eq!(validate(&b[..30], 1 << 20).unwrap_err().0, CORRUPT_MESSAGE);
    }

    fn with_header_field(mut b: Vec<u8>, at: usize, bytes: &[u8]) -> Vec<u8> {
        b[at..at + bytes.len()].copy_from_slice(bytes);
        let crc = crc32c::crc32c(&b[CRC_START..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    }

    #[test]
    fn sparse_offsets_and_control_batches_are_invalid() {
        let gap = with_header_field(build(&recs(2), 5, NO_PRODUCER), 23, &5i32.to_be_bytes());
        assert_eq!(validate(&gap, 1 << 20).unwrap_err().0, INVALID_RECORD);
        let control = with_header_field(
            build(&recs(1), 5, NO_PRODUCER),
            21,
            &ATTR_CONTROL.to_be_bytes(),
        );
        assert_eq!(validate(&control, 1 << 20).unwrap_err().0, INVALID_RECORD);
    }

    #[test]
    fn assign_offsets_keeps_crc_valid_and_sets_log_append_time() {
        let mut data = build(&recs(2), 5, NO_PRODUCER);
        data.extend(build(&recs(3), 6, NO_PRODUCER));
        let (next, headers) = assign_offsets(&mut data, 100, Some(777));
        assert_eq!(next, 105);
        assert_eq!(headers[1].1.base_offset, 102);
        validate(&data, 1 << 20).unwrap();
        let r = records(&data[headers[1].0..]).unwrap();
        assert_eq!(r[0].offset, 102);
        assert_eq!(r[0].timestamp, 777);
        assert_eq!(find_timestamp(&data, Some(0), i64::MIN), Some((777, 100)));
    }

    #[test]
    fn varints_round_trip() {
        for v in [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            300,
            -300,
            i32::MAX as i64,
            i64::MIN,
            i64::MAX,
        ] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            let mut pos = 0;
            assert_eq!(get_varint(&out, &mut pos), Some(v));
            assert_eq!(pos, out.len());
        }
    }
}
