//! Transactions in the log, as Kafka's data plane keeps them: control batches (the COMMIT and
//! ABORT markers a transaction coordinator writes to each partition of a transaction), and the
//! list of aborted transactions that a read_committed fetch hands to consumers so they can drop
//! the aborted records themselves (the broker never filters).
//!
//! A marker batch (MemoryRecords.writeEndTransactionalMarker): magic 2, attributes transactional
//! and control, the producer's id and epoch, base sequence -1, uncompressed, one record whose key
//! is int16 version 0 + int16 type (ABORT 0, COMMIT 1) and whose value is int16 version 0 + int32
//! coordinator epoch (EndTxnMarker.json).

use super::batch::{self, Header, HEADER_LEN};

pub const ATTR_TRANSACTIONAL: i16 = 0x10;
pub const ATTR_CONTROL: i16 = 0x20;
const ABORT: i16 = 0;
const COMMIT: i16 = 1;

pub fn is_transactional(h: &Header) -> bool {
    h.attributes & ATTR_TRANSACTIONAL != 0
}

pub fn is_control(h: &Header) -> bool {
    h.attributes & ATTR_CONTROL != 0
}

/// What a marker says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marker {
    pub commit: bool,
    pub coordinator_epoch: i32,
}

/// The marker batch for (producer id, epoch), base offset 0 (the store assigns it).
pub fn marker_batch(producer_id: i64, epoch: i16, marker: Marker, timestamp: i64) -> Vec<u8> {
    let key = [
        0i16.to_be_bytes(),
        if marker.commit { COMMIT } else { ABORT }.to_be_bytes(),
    ]
    .concat();
    let value = [
        &0i16.to_be_bytes()[..],
        &marker.coordinator_epoch.to_be_bytes()[..],
    ]
    .concat();
    let mut b = batch::build(
        &[(Some(key), Some(value))],
        timestamp,
        (producer_id, epoch, -1),
    );
    let attributes = ATTR_TRANSACTIONAL | ATTR_CONTROL;
    b[21..23].copy_from_slice(&attributes.to_be_bytes());
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

/// The marker of a control batch (`batch` holds at least the whole batch); None if it is not a
/// transaction marker (other control records, or bytes that do not parse).
pub fn read_marker(batch: &[u8]) -> Option<Marker> {
    let h = Header::parse(batch)?;
    if !is_control(&h) || batch.len() < HEADER_LEN {
        return None;
    }
    let record = batch::records(batch)?.into_iter().next()?;
    let key = record.key?;
    let kind = i16::from_be_bytes(key.get(2..4)?.try_into().ok()?);
    let value = record.value.unwrap_or_default();
    let coordinator_epoch = value
        .get(2..6)
        .map_or(-1, |v| i32::from_be_bytes(v.try_into().unwrap()));
    match kind {
        ABORT | COMMIT => Some(Marker {
            commit: kind == COMMIT,
            coordinator_epoch,
        }),
        _ => None,
    }
}

/// One aborted transaction of the partition (Kafka's AbortedTxn): its producer, its first offset,
/// the offset of its ABORT marker, and the last stable offset when the marker was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

/// The partition's aborted transactions in marker order (Kafka keeps them in a `.txnindex` per
/// segment; here one list per partition, kept in the producer-state snapshot and rebuilt from
/// the markers after it on open).
#[derive(Debug, Default)]
pub struct AbortedIndex {
    entries: Vec<AbortedTxn>,
}

impl AbortedIndex {
    pub fn push(&mut self, entry: AbortedTxn) {
        self.entries.push(entry);
    }

    pub fn entries(&self) -> &[AbortedTxn] {
        &self.entries
    }

    /// Forgets transactions whose marker lies before `log_start` (retention, DeleteRecords).
    pub fn forget_before(&mut self, log_start: i64) {
        let gone = self.entries.partition_point(|e| e.last_offset < log_start);
        self.entries.drain(..gone);
    }

    /// What a read_committed fetch from `fetch_offset` whose data ends before `upper` lists, as
    /// `LocalLog.addAbortedTransactions`: every transaction whose marker is at or after the
    /// fetch offset and which began before `upper`, as (producer id, first offset).
    pub fn overlapping(&self, fetch_offset: i64, upper: i64) -> Vec<(i64, i64)> {
        let from = self
            .entries
            .partition_point(|e| e.last_offset < fetch_offset);
        let mut out = Vec::new();
        for e in &self.entries[from..] {
            if e.first_offset < upper {
                out.push((e.producer_id, e.first_offset));
            }
            // As Kafka's search: later entries cannot overlap once one was stable past `upper`.
            if e.last_stable_offset >= upper {
                break;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_round_trip_and_validity() {
        let m = Marker {
            commit: true,
            coordinator_epoch: 7,
        };
        let b = marker_batch(42, 3, m, 1000);
        let h = Header::parse(&b).unwrap();
        assert!(is_control(&h) && is_transactional(&h));
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.base_sequence),
            (42, 3, -1)
        );
        assert!(batch::crc_ok(&b, &h));
        assert_eq!(read_marker(&b), Some(m));
        let abort = marker_batch(
            1,
            0,
            Marker {
                commit: false,
                coordinator_epoch: 0,
            },
            5,
        );
        assert_eq!(read_marker(&abort).map(|m| m.commit), Some(false));
        // A data batch is no marker.
        let data = batch::build(&[(Some(b"k".to_vec()), None)], 5, batch::NO_PRODUCER);
        assert_eq!(read_marker(&data), None);
    }

    #[test]
    fn overlapping_aborted_transactions() {
        let mut index = AbortedIndex::default();
        let e = |pid, first, last, lso| AbortedTxn {
            producer_id: pid,
            first_offset: first,
            last_offset: last,
            last_stable_offset: lso,
        };
        index.push(e(1, 0, 10, 11));
        index.push(e(2, 5, 20, 12));
        index.push(e(3, 30, 40, 41));
        assert_eq!(index.overlapping(0, 100), vec![(1, 0), (2, 5), (3, 30)]);
        assert_eq!(index.overlapping(11, 25), vec![(2, 5)]);
        assert_eq!(index.overlapping(21, 30), Vec::<(i64, i64)>::new());
        index.forget_before(15);
        assert_eq!(index.entries().len(), 2);
    }
}
