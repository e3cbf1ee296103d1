//! A partition's producer state and aborted transactions (producers.rs, transactions.rs): how
//! they are loaded on open, and what the transaction-aware reads and writes ask of them.

use std::fs;
use std::io;
use std::path::PathBuf;

use super::super::producers::{ProducerView, Producers};
use super::super::transactions;
#[cfg(test)]
use super::Appended;
use super::Partition;

impl Partition {
    /// Producer state and aborted transactions: the newest usable snapshot, then the headers of
    /// the batches after it (one small read per batch, and one more per marker).
    pub(super) fn load_producers(&mut self) -> io::Result<()> {
        let (start, end) = (self.log_start_offset(), self.next_offset());
        let mut from = start;
        if let Some((offset, path)) = self.snapshots()?.pop() {
            if (start..=end).contains(&offset) {
                if let Some((producers, aborted)) =
                    fs::read(&path).ok().and_then(|b| Producers::decode(&b))
                {
                    self.producers = producers;
                    self.producers.forget_before(start);
                    for entry in aborted {
                        self.aborted.push(entry);
                    }
                    self.aborted.forget_before(start);
                    from = offset;
                }
            }
        }
        for seg in self.segments.iter().filter(|s| s.next_offset > from) {
            let position = seg
                .index
                .position_for_offset((from - seg.base_offset).max(0) as u32);
            let mut failed = None;
            seg.headers_from(position, |pos, h| {
                if h.last_offset() < from {
                    return false;
                }
                if !transactions::is_control(h) {
                    self.producers.update(h);
                    return false;
                }
                match seg.read_at(h.size, pos) {
                    Ok(bytes) => {
                        if let Some(marker) = transactions::read_marker(&bytes) {
                            if let Some(aborted) = self.producers.end_transaction(h, marker) {
                                self.aborted.push(aborted);
                            }
                        }
                        false
                    }
                    Err(e) => {
                        failed = Some(e);
                        true
                    }
                }
            })?;
            if let Some(e) = failed {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Producer state snapshots in the directory, as (offset they are valid up to, path), oldest
    /// first.
    pub(super) fn snapshots(&self) -> io::Result<Vec<(i64, PathBuf)>> {
        let mut found = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "snapshot") {
                if let Some(offset) = path
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .and_then(|s| s.parse().ok())
                {
                    found.push((offset, path));
                }
            }
        }
        found.sort();
        Ok(found)
    }

    /// Writes the transaction marker of (producer id, epoch): the producer's transaction in this
    /// partition ends (committed or aborted), as Kafka's appendAsLeader with origin COORDINATOR.
    /// (The store's `write_marker` builds the same batch and appends it through its own path.)
    #[cfg(test)]
    pub fn write_marker(
        &mut self,
        producer_id: i64,
        epoch: i16,
        marker: transactions::Marker,
        timestamp: i64,
    ) -> io::Result<Appended> {
        self.append(
            transactions::marker_batch(producer_id, epoch, marker, timestamp),
            None,
        )
    }

    /// The last stable offset: the first offset of the oldest open transaction, or the high
    /// watermark (the log end, on a single replica) when none is open.
    pub fn stable_offset(&self) -> i64 {
        let end = self.next_offset();
        self.producers
            .first_unstable()
            .map_or(end, |first| first.min(end).max(self.log_start))
    }

    /// The aborted transactions a read_committed fetch from `fetch_offset` whose data ends before
    /// `upper` lists: (producer id, first offset).
    pub fn aborted_overlapping(&self, fetch_offset: i64, upper: i64) -> Vec<(i64, i64)> {
        self.aborted.overlapping(fetch_offset, upper)
    }

    /// One producer's (epoch, last sequence or -1, whether its transaction is open).
    pub fn producer(&self, producer_id: i64) -> Option<(i16, i32, bool)> {
        self.producers.producer(producer_id)
    }

    pub fn producer_views(&self) -> Vec<ProducerView> {
        self.producers.views()
    }
}
