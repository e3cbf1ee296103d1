//! Idempotent-producer state of one partition, as Kafka's ProducerStateManager keeps it: per
//! producer id, the current epoch and the metadata of its last five batches (a producer has at
//! most five requests in flight, so a retried batch is always among them).
//!
//! The state is derived from the log itself (batch headers carry producer id, epoch and base
//! sequence), so it survives any restart: a clean shutdown writes it to a snapshot valid up to the
//! log end, and opening the log loads the snapshot and walks the headers of the batches after it
//! (all of them when there is no usable snapshot), as Kafka does with its `.snapshot` files.

use std::collections::{HashMap, VecDeque};

use super::batch::Header;
use kafka_protocol::ResponseError;

const KEPT_BATCHES: usize = 5;
pub const INVALID_PRODUCER_EPOCH: i16 = ResponseError::InvalidProducerEpoch.code();
pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = ResponseError::OutOfOrderSequenceNumber.code();

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMeta {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    /// The batch's LogAppendTime, or -1 for CreateTime.
    pub timestamp: i64,
}

#[derive(Debug, Default)]
struct Entry {
    epoch: i16,
    batches: VecDeque<BatchMeta>,
}

/// What the producer state says about a batch about to be appended.
#[derive(Debug, PartialEq, Eq)]
pub enum Check {
    /// Not from an idempotent producer, or the next in sequence: append it.
    Append,
    /// Already appended: acknowledge the original offsets, append nothing.
    Duplicate(BatchMeta),
    /// Refused with this Kafka error code.
    Error(i16, String),
}

#[derive(Debug, Default)]
pub struct Producers {
    entries: HashMap<i64, Entry>,
}

/// The sequence of the batch's last record; sequences wrap from i32::MAX to 0.
pub fn last_seq(h: &Header) -> i32 {
    ((h.base_sequence as i64 + h.last_offset_delta as i64) % (i32::MAX as i64 + 1)) as i32
}

fn in_sequence(last: i32, next: i32) -> bool {
    next as i64 == (last as i64 + 1) % (i32::MAX as i64 + 1)
}

impl Producers {
    pub fn check(&self, h: &Header) -> Check {
        if h.producer_id < 0 {
            return Check::Append;
        }
        let Some(entry) = self.entries.get(&h.producer_id) else {
            // Unknown producer (new, or its batches were deleted by retention): any sequence.
            return Check::Append;
        };
        if h.producer_epoch < entry.epoch {
            return Check::Error(
                INVALID_PRODUCER_EPOCH,
                format!(
                    "Epoch of producer {} is {}, which is smaller than the last seen epoch {}",
                    h.producer_id, h.producer_epoch, entry.epoch
                ),
            );
        }
        if h.producer_epoch > entry.epoch {
            if h.base_sequence != 0 {
                return Check::Error(
                    OUT_OF_ORDER_SEQUENCE_NUMBER,
                    format!("Invalid sequence number for new epoch of producer {}: {} (request epoch), {} (seq. number), {} (current producer epoch)", h.producer_id, h.producer_epoch, h.base_sequence, entry.epoch),
                );
            }
            return Check::Append;
        }
        let last = last_seq(h);
        if let Some(dup) = entry
            .batches
            .iter()
            .find(|b| b.first_seq == h.base_sequence && b.last_seq == last)
        {
            return Check::Duplicate(*dup);
        }
        match entry.batches.back() {
            Some(prev) if !in_sequence(prev.last_seq, h.base_sequence) => Check::Error(
                OUT_OF_ORDER_SEQUENCE_NUMBER,
                format!("Out of order sequence number for producer {}: {} (incoming seq. number), {} (current end sequence number)", h.producer_id, h.base_sequence, prev.last_seq),
            ),
            _ => Check::Append,
        }
    }

    /// Records an appended (or, on open, found) batch whose offsets are final.
    pub fn update(&mut self, h: &Header) {
        if h.producer_id < 0 {
            return;
        }
        let entry = self.entries.entry(h.producer_id).or_default();
        if h.producer_epoch != entry.epoch {
            entry.epoch = h.producer_epoch;
            entry.batches.clear();
        }
        if entry.batches.len() == KEPT_BATCHES {
            entry.batches.pop_front();
        }
        entry.batches.push_back(BatchMeta {
            first_seq: h.base_sequence,
            last_seq: last_seq(h),
            first_offset: h.base_offset,
            last_offset: h.last_offset(),
            timestamp: if h.log_append_time() {
                h.max_timestamp
            } else {
                -1
            },
        });
    }

    /// Forgets producers whose batches all lie before `log_start` (deleted by retention).
    pub fn forget_before(&mut self, log_start: i64) {
        self.entries
            .retain(|_, e| e.batches.back().is_some_and(|b| b.last_offset >= log_start));
    }

    /// The snapshot bytes: per producer (id i64, epoch i16, batch count u8, then per batch
    /// first_seq i32, last_seq i32, first_offset i64, last_offset i64, timestamp i64), then the
    /// CRC-32C of all that.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len() * 48);
        for (pid, e) in &self.entries {
            out.extend_from_slice(&pid.to_be_bytes());
            out.extend_from_slice(&e.epoch.to_be_bytes());
            out.push(e.batches.len() as u8);
            for b in &e.batches {
                out.extend_from_slice(&b.first_seq.to_be_bytes());
                out.extend_from_slice(&b.last_seq.to_be_bytes());
                out.extend_from_slice(&b.first_offset.to_be_bytes());
                out.extend_from_slice(&b.last_offset.to_be_bytes());
                out.extend_from_slice(&b.timestamp.to_be_bytes());
            }
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    /// Reads `encode`'s bytes; None if they are damaged.
    pub fn decode(bytes: &[u8]) -> Option<Producers> {
        let (body, crc) = bytes.split_at_checked(bytes.len().checked_sub(4)?)?;
        if crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().ok()?) {
            return None;
        }
        let mut pos = 0;
        let mut take = |n: usize| -> Option<&[u8]> {
            let s = body.get(pos..pos + n)?;
            pos += n;
            Some(s)
        };
        let mut producers = Producers::default();
        while let Some(head) = take(11) {
            let pid = i64::from_be_bytes(head[0..8].try_into().ok()?);
            let epoch = i16::from_be_bytes(head[8..10].try_into().ok()?);
            let mut entry = Entry {
                epoch,
                batches: VecDeque::new(),
            };
            for _ in 0..head[10] {
                let b = take(32)?;
                let i32_at = |at: usize| i32::from_be_bytes(b[at..at + 4].try_into().unwrap());
                let i64_at = |at: usize| i64::from_be_bytes(b[at..at + 8].try_into().unwrap());
                entry.batches.push_back(BatchMeta {
                    first_seq: i32_at(0),
                    last_seq: i32_at(4),
                    first_offset: i64_at(8),
                    last_offset: i64_at(16),
                    timestamp: i64_at(24),
                });
            }
            producers.entries.insert(pid, entry);
        }
        Some(producers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(pid: i64, epoch: i16, seq: i32, base_offset: i64, n: i32) -> Header {
        Header {
            base_offset,
            size: 100,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: n - 1,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            records_count: n,
        }
    }

    #[test]
    fn sequences_duplicates_and_epochs() {
        let mut p = Producers::default();
        assert_eq!(p.check(&header(7, 0, 0, 0, 5)), Check::Append);
        p.update(&header(7, 0, 0, 0, 5));
        // The same batch again is a duplicate with its original offsets.
        match p.check(&header(7, 0, 0, -1, 5)) {
            Check::Duplicate(meta) => assert_eq!((meta.first_offset, meta.last_offset), (0, 4)),
            other => panic!("{other:?}"),
        }
        assert_eq!(p.check(&header(7, 0, 5, 0, 1)), Check::Append);
        assert!(matches!(
            p.check(&header(7, 0, 6, 0, 1)),
            Check::Error(OUT_OF_ORDER_SEQUENCE_NUMBER, _)
        ));
        assert!(matches!(
            p.check(&header(7, 1, 3, 0, 1)),
            Check::Error(OUT_OF_ORDER_SEQUENCE_NUMBER, _)
        ));
        assert_eq!(p.check(&header(7, 1, 0, 0, 1)), Check::Append);
        p.update(&header(7, 1, 0, 5, 1));
        assert!(matches!(
            p.check(&header(7, 0, 5, 0, 1)),
            Check::Error(INVALID_PRODUCER_EPOCH, _)
        ));
        // Only the last five batches are remembered.
        for i in 1..=6 {
            p.update(&header(7, 1, i, 5 + i as i64, 1));
        }
        assert!(matches!(
            p.check(&header(7, 1, 0, 0, 1)),
            Check::Error(OUT_OF_ORDER_SEQUENCE_NUMBER, _)
        ));
        assert!(matches!(
            p.check(&header(7, 1, 2, 0, 1)),
            Check::Duplicate(_)
        ));
        // Unknown producers and non-idempotent batches go through.
        assert_eq!(p.check(&header(8, 3, 42, 0, 1)), Check::Append);
        assert_eq!(p.check(&header(-1, -1, -1, 0, 1)), Check::Append);
        p.forget_before(1000);
        assert_eq!(p.check(&header(7, 0, 9, 0, 1)), Check::Append);
    }

    #[test]
    fn snapshot_round_trip() {
        let mut p = Producers::default();
        for i in 0..7 {
            p.update(&header(3, 1, i * 2, i as i64 * 2, 2));
        }
        p.update(&header(4, 0, 0, 100, 1));
        let bytes = p.encode();
        let back = Producers::decode(&bytes).unwrap();
        assert!(matches!(
            back.check(&header(3, 1, 12, 0, 2)),
            Check::Duplicate(_)
        ));
        assert_eq!(back.check(&header(3, 1, 14, 0, 1)), Check::Append);
        assert!(matches!(
            back.check(&header(4, 0, 5, 0, 1)),
            Check::Error(OUT_OF_ORDER_SEQUENCE_NUMBER, _)
        ));
        let mut damaged = bytes.clone();
        damaged[3] ^= 1;
        assert!(Producers::decode(&damaged).is_none());
        assert!(Producers::decode(&bytes[..2]).is_none());
    }

    #[test]
    fn sequence_wraps() {
        let mut p = Producers::default();
        p.update(&header(1, 0, i32::MAX - 1, 0, 2));
        assert_eq!(p.check(&header(1, 0, 0, 0, 1)), Check::Append);
    }
}
