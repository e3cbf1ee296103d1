//! What the log cleaner (compaction/mod.rs) asks of a partition: its sealed segments, its aborted
//! transactions, and its segments reloaded once cleaned ones took their place.

use std::io;
use std::path::PathBuf;

use super::super::recovery;
use super::super::segment::Segment;
use super::super::transactions::AbortedTxn;
use super::Partition;

impl Partition {
    /// The sealed segments (every one but the active), oldest first: (base offset, next offset,
    /// bytes, largest timestamp, path).
    pub(in crate::log) fn sealed_segments(&self) -> Vec<(i64, i64, u64, i64, PathBuf)> {
        let n = self.segment_files().saturating_sub(1);
        self.segments[..n]
            .iter()
            .map(|s| {
                (
                    s.base_offset,
                    s.next_offset,
                    s.size,
                    s.max_timestamp,
                    s.log_path(),
                )
            })
            .collect()
    }

    pub(in crate::log) fn aborted_entries(&self) -> Vec<AbortedTxn> {
        self.aborted.entries().to_vec()
    }

    /// The segments of base offsets `replaced` were swapped for cleaned ones (each cleaned file
    /// took the first base of the ones it replaced): reopen them from disk.
    pub(in crate::log) fn reload_segments(&mut self, replaced: &[i64]) -> io::Result<()> {
        let on_disk = recovery::segment_bases(&self.dir)?;
        let mut kept = Vec::with_capacity(self.segments.len());
        for seg in self.segments.drain(..) {
            if !replaced.contains(&seg.base_offset) {
                kept.push(seg);
            } else if on_disk.contains(&seg.base_offset) {
                // A cleaned segment now has this base: read it anew (its index is rebuilt).
                let mut fresh = Segment::open(&self.dir, seg.base_offset, &self.files)?;
                recovery::load_sealed(&mut fresh)?;
                kept.push(fresh);
            }
            // Dropped segments leave the file cache with their Segment (Drop).
        }
        self.segments = kept;
        Ok(())
    }
}
