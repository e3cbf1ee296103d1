//! Idempotent-producer state of one partition, as Kafka's ProducerStateManager keeps it: per
//! producer id, the current epoch and the metadata of its last five batches (a producer has at
//! most five requests in flight, so a retried batch is always among them).
//!
//! The state is derived from the log itself (batch headers carry producer id, epoch and base
//! sequence), so it survives any restart: a clean shutdown writes it to a snapshot valid up to the
//! log end, and opening the log loads the snapshot and walks the headers of the batches after it
//! (all of them when there is no usable snapshot), as Kafka does with its `.snapshot` files.
//!
//! Transactions: a producer's first transactional batch opens its transaction (its first offset
//! is what holds the last stable offset back), and a marker (transactions.rs) closes it, adding
//! it to the aborted index when it was aborted.

use std::collections::{BTreeMap, HashMap, VecDeque};

use super::batch::Header;
use super::transactions::{is_control, is_transactional, AbortedTxn, Marker};
use kafka_protocol::ResponseError;

const KEPT_BATCHES: usize = 5;
pub const INVALID_PRODUCER_EPOCH: i16 = ResponseError::InvalidProducerEpoch.code();
pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = ResponseError::OutOfOrderSequenceNumber.code();
pub const INVALID_TXN_STATE: i16 = ResponseError::InvalidTxnState.code();
pub const TRANSACTION_COORDINATOR_FENCED: i16 = ResponseError::TransactionCoordinatorFenced.code();
/// The first bytes of a snapshot in this format (the first, older one had no header: it is
/// refused, and the producer state is rebuilt from the log).
const SNAPSHOT_MAGIC: &[u8; 8] = b"CORRALP2";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMeta {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    /// The batch's LogAppendTime, or -1 for CreateTime.
    pub timestamp: i64,
}

#[derive(Debug)]
struct Entry {
    epoch: i16,
    batches: VecDeque<BatchMeta>,
    /// The coordinator epoch of the last marker (-1 before any).
    coordinator_epoch: i32,
    /// The first offset of the producer's open transaction, or -1.
    txn_first_offset: i64,
    /// The max timestamp of its last batch (DescribeProducers' LastTimestamp).
    last_timestamp: i64,
}

impl Default for Entry {
    fn default() -> Self {
        Entry {
            epoch: 0,
            batches: VecDeque::new(),
            coordinator_epoch: -1,
            txn_first_offset: -1,
            last_timestamp: -1,
        }
    }
}

/// One producer as DescribeProducers shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerView {
    pub producer_id: i64,
    pub epoch: i16,
    pub last_sequence: i32,
    pub last_timestamp: i64,
    pub coordinator_epoch: i32,
    pub txn_start_offset: i64,
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
    /// Open transactions: first offset -> producer id. The smallest key bounds the last stable
    /// offset.
    ongoing: BTreeMap<i64, i64>,
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
        if !is_transactional(h) && entry.txn_first_offset >= 0 {
            return Check::Error(
                INVALID_TXN_STATE,
                format!(
                    "Expected transactional write from producer {} at offset {}",
                    h.producer_id, entry.txn_first_offset
                ),
            );
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

    /// Whether a marker of (producer id, epoch, coordinator epoch) may be written, as Kafka's
    /// checkProducerEpoch for transaction version 0/1 (the epoch at least the current one);
    /// Some((error code, message)) if not.
    pub fn check_marker(
        &self,
        producer_id: i64,
        epoch: i16,
        marker: Marker,
    ) -> Option<(i16, String)> {
        let entry = self.entries.get(&producer_id)?;
        if marker.coordinator_epoch < entry.coordinator_epoch {
            return Some((
                TRANSACTION_COORDINATOR_FENCED,
                format!(
                    "Invalid coordinator epoch for producer {producer_id}: {} (zombie), {} (current)",
                    marker.coordinator_epoch, entry.coordinator_epoch
                ),
            ));
        }
        if epoch < entry.epoch {
            return Some((
                INVALID_PRODUCER_EPOCH,
                format!(
                    "Epoch of producer {producer_id} is {epoch}, which is smaller than the last seen epoch {}",
                    entry.epoch
                ),
            ));
        }
        None
    }

    /// Records a marker written at `offset`: the producer's open transaction (if any) ends; an
    /// aborted one is returned for the aborted index.
    pub fn end_transaction(&mut self, h: &Header, marker: Marker) -> Option<AbortedTxn> {
        let entry = self.entries.entry(h.producer_id).or_default();
        if h.producer_epoch != entry.epoch {
            entry.epoch = h.producer_epoch;
            entry.batches.clear();
        }
        entry.coordinator_epoch = marker.coordinator_epoch;
        let first = std::mem::replace(&mut entry.txn_first_offset, -1);
        if first < 0 {
            return None;
        }
        self.ongoing.remove(&first);
        if marker.commit {
            return None;
        }
        Some(AbortedTxn {
            producer_id: h.producer_id,
            first_offset: first,
            last_offset: h.base_offset,
            last_stable_offset: self.first_unstable().unwrap_or(h.base_offset + 1),
        })
    }

    /// The first offset of the oldest open transaction.
    pub fn first_unstable(&self) -> Option<i64> {
        self.ongoing.keys().next().copied()
    }

    /// One producer's (epoch, last sequence or -1, whether its transaction is open).
    pub fn producer(&self, producer_id: i64) -> Option<(i16, i32, bool)> {
        self.entries.get(&producer_id).map(|e| {
            let last = e.batches.back().map_or(-1, |b| b.last_seq);
            (e.epoch, last, e.txn_first_offset >= 0)
        })
    }

    /// The producers as DescribeProducers lists them.
    pub fn views(&self) -> Vec<ProducerView> {
        let mut out: Vec<ProducerView> = self
            .entries
            .iter()
            .map(|(&pid, e)| ProducerView {
                producer_id: pid,
                epoch: e.epoch,
                last_sequence: e.batches.back().map_or(-1, |b| b.last_seq),
                last_timestamp: e.last_timestamp,
                coordinator_epoch: e.coordinator_epoch,
                txn_start_offset: e.txn_first_offset,
            })
            .collect();
        out.sort_by_key(|v| v.producer_id);
        out
    }

    /// Records an appended (or, on open, found) data batch whose offsets are final (markers go
    /// to `end_transaction`).
    pub fn update(&mut self, h: &Header) {
        if h.producer_id < 0 || is_control(h) {
            return;
        }
        let entry = self.entries.entry(h.producer_id).or_default();
        if h.producer_epoch != entry.epoch {
            entry.epoch = h.producer_epoch;
            entry.batches.clear();
        }
        entry.last_timestamp = h.max_timestamp;
        if is_transactional(h) && entry.txn_first_offset < 0 {
            entry.txn_first_offset = h.base_offset;
            self.ongoing.insert(h.base_offset, h.producer_id);
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
    /// Producers with an open transaction stay (their marker is still to come).
    pub fn forget_before(&mut self, log_start: i64) {
        self.entries.retain(|_, e| {
            e.txn_first_offset >= 0 || e.batches.back().is_some_and(|b| b.last_offset >= log_start)
        });
    }

    /// The snapshot bytes: SNAPSHOT_MAGIC; the producer count (u32), then per producer: id i64,
    /// epoch i16, coordinator epoch i32, open transaction's first offset i64, last timestamp
    /// i64, batch count u8, then per batch first_seq i32, last_seq i32, first_offset i64,
    /// last_offset i64, timestamp i64; then the aborted transactions (4 x i64 each); then the
    /// CRC-32C of all that.
    pub fn encode(&self, aborted: &[AbortedTxn]) -> Vec<u8> {
        let mut out = Vec::with_capacity(12 + self.entries.len() * 64 + aborted.len() * 32);
        out.extend_from_slice(SNAPSHOT_MAGIC);
        out.extend_from_slice(&(self.entries.len() as u32).to_be_bytes());
        for (pid, e) in &self.entries {
            out.extend_from_slice(&pid.to_be_bytes());
            out.extend_from_slice(&e.epoch.to_be_bytes());
            out.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
            out.extend_from_slice(&e.txn_first_offset.to_be_bytes());
            out.extend_from_slice(&e.last_timestamp.to_be_bytes());
            out.push(e.batches.len() as u8);
            for b in &e.batches {
                out.extend_from_slice(&b.first_seq.to_be_bytes());
                out.extend_from_slice(&b.last_seq.to_be_bytes());
                out.extend_from_slice(&b.first_offset.to_be_bytes());
                out.extend_from_slice(&b.last_offset.to_be_bytes());
                out.extend_from_slice(&b.timestamp.to_be_bytes());
            }
        }
        for a in aborted {
            for v in [
                a.producer_id,
                a.first_offset,
                a.last_offset,
                a.last_stable_offset,
            ] {
                out.extend_from_slice(&v.to_be_bytes());
            }
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    /// Reads `encode`'s bytes; None if they are damaged or of the older format.
    pub fn decode(bytes: &[u8]) -> Option<(Producers, Vec<AbortedTxn>)> {
        let (body, crc) = bytes.split_at_checked(bytes.len().checked_sub(4)?)?;
        if crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().ok()?) {
            return None;
        }
        let body = body.strip_prefix(SNAPSHOT_MAGIC)?;
        let mut pos = 0;
        let mut take = |n: usize| -> Option<&[u8]> {
            let s = body.get(pos..pos + n)?;
            pos += n;
            Some(s)
        };
        let i16_at = |b: &[u8], at: usize| i16::from_be_bytes(b[at..at + 2].try_into().unwrap());
        let i32_at = |b: &[u8], at: usize| i32::from_be_bytes(b[at..at + 4].try_into().unwrap());
        let i64_at = |b: &[u8], at: usize| i64::from_be_bytes(b[at..at + 8].try_into().unwrap());
        let count = u32::from_be_bytes(take(4)?.try_into().ok()?);
        let mut producers = Producers::default();
        for _ in 0..count {
            let head = take(31)?;
            let pid = i64_at(head, 0);
            let mut entry = Entry {
                epoch: i16_at(head, 8),
                batches: VecDeque::new(),
                coordinator_epoch: i32_at(head, 10),
                txn_first_offset: i64_at(head, 14),
                last_timestamp: i64_at(head, 22),
            };
            for _ in 0..head[30] {
                let b = take(32)?;
                entry.batches.push_back(BatchMeta {
                    first_seq: i32_at(b, 0),
                    last_seq: i32_at(b, 4),
                    first_offset: i64_at(b, 8),
                    last_offset: i64_at(b, 16),
                    timestamp: i64_at(b, 24),
                });
            }
            if entry.txn_first_offset >= 0 {
                producers.ongoing.insert(entry.txn_first_offset, pid);
            }
            producers.entries.insert(pid, entry);
        }
        let mut aborted = Vec::new();
        while let Some(a) = take(32) {
            aborted.push(AbortedTxn {
                producer_id: i64_at(a, 0),
                first_offset: i64_at(a, 8),
                last_offset: i64_at(a, 16),
                last_stable_offset: i64_at(a, 24),
            });
        }
        Some((producers, aborted))
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
        let aborted = [AbortedTxn {
            producer_id: 4,
            first_offset: 1,
            last_offset: 2,
            last_stable_offset: 3,
        }];
        let bytes = p.encode(&aborted);
        let (back, aborted_back) = Producers::decode(&bytes).unwrap();
        assert_eq!(aborted_back, aborted);
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

    #[test]
    fn transactions_open_close_and_bound_the_stable_offset() {
        let txn = |pid, epoch, seq, offset, n| {
            let mut h = header(pid, epoch, seq, offset, n);
            h.attributes = super::super::transactions::ATTR_TRANSACTIONAL;
            h
        };
        let marker = |pid, epoch, offset| {
            let mut h = header(pid, epoch, -1, offset, 1);
            h.attributes = super::super::transactions::ATTR_TRANSACTIONAL
                | super::super::transactions::ATTR_CONTROL;
            h
        };
        let mut p = Producers::default();
        p.update(&txn(1, 0, 0, 10, 2));
        p.update(&txn(2, 0, 0, 12, 1));
        p.update(&txn(1, 0, 2, 13, 1));
        assert_eq!(p.first_unstable(), Some(10));
        assert_eq!(p.producer(1), Some((0, 2, true)));
        // A plain batch while the producer's transaction is open is refused.
        assert!(matches!(
            p.check(&header(1, 0, 3, 0, 1)),
            Check::Error(INVALID_TXN_STATE, _)
        ));
        let commit = Marker {
            commit: true,
            coordinator_epoch: 5,
        };
        assert_eq!(p.end_transaction(&marker(1, 0, 14), commit), None);
        assert_eq!(p.first_unstable(), Some(12));
        let abort = Marker {
            commit: false,
            coordinator_epoch: 5,
        };
        assert_eq!(
            p.end_transaction(&marker(2, 0, 15), abort),
            Some(AbortedTxn {
                producer_id: 2,
                first_offset: 12,
                last_offset: 15,
                last_stable_offset: 16
            })
        );
        assert_eq!(p.first_unstable(), None);
        // Markers from an older coordinator or producer epoch are fenced.
        let old = Marker {
            commit: true,
            coordinator_epoch: 4,
        };
        assert!(matches!(
            p.check_marker(1, 0, old),
            Some((TRANSACTION_COORDINATOR_FENCED, _))
        ));
        p.end_transaction(&marker(1, 1, 16), commit);
        assert!(matches!(
            p.check_marker(1, 0, commit),
            Some((INVALID_PRODUCER_EPOCH, _))
        ));
        assert_eq!(p.check_marker(9, 0, old), None);
        // Open transactions survive a snapshot.
        p.update(&txn(3, 0, 0, 20, 1));
        let (back, _) = Producers::decode(&p.encode(&[])).unwrap();
        assert_eq!(back.first_unstable(), Some(20));
        assert_eq!(
            back.views()
                .iter()
                .find(|v| v.producer_id == 3)
                .unwrap()
                .txn_start_offset,
            20
        );
    }
}
