//! The sparse offset and time index of one segment.
//!
//! An entry is made for the first batch of a segment and then for the first batch that starts at
//! least `interval` bytes after the previous entry (Kafka's `index.interval.bytes`, 4096). Each
//! entry holds the batch's base offset (relative to the segment), its file position, and the
//! largest timestamp of the segment up to and including that batch. The entries live in memory;
//! on disk they are Kafka's two files: `.index` (relative offset u32, position u32) and
//! `.timeindex` (timestamp i64, relative offset u32), written when a segment is rolled and at a
//! clean shutdown, and rebuilt from the log when missing or inconsistent.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

pub const INTERVAL_BYTES: u64 = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub rel_offset: u32,
    pub position: u32,
    pub max_timestamp: i64,
}

#[derive(Debug, Default)]
pub struct SparseIndex {
    pub entries: Vec<Entry>,
    bytes_since_last: u64,
}

impl SparseIndex {
    /// Records that a batch of `size` bytes was written at `position`; indexes it if due.
    pub fn on_batch(
        &mut self,
        rel_offset: u32,
        position: u64,
        size: u64,
        max_timestamp_so_far: i64,
    ) {
        if self.entries.is_empty() || self.bytes_since_last >= INTERVAL_BYTES {
            self.entries.push(Entry {
                rel_offset,
                position: position as u32,
                max_timestamp: max_timestamp_so_far,
            });
            self.bytes_since_last = 0;
        }
        self.bytes_since_last += size;
    }

    /// Adds an entry for the last batch so the final entry carries the segment's max timestamp.
    pub fn seal(&mut self, rel_offset: u32, position: u64, max_timestamp: i64) {
        match self.entries.last() {
            Some(last)
                if last.position as u64 >= position && last.max_timestamp == max_timestamp => {}
            Some(last) if last.position as u64 >= position => {
                let i = self.entries.len() - 1;
                self.entries[i].max_timestamp = max_timestamp;
            }
            _ => self.entries.push(Entry {
                rel_offset,
                position: position as u32,
                max_timestamp,
            }),
        }
    }

    /// Position from which to scan for the batch holding relative offset `rel`.
    pub fn position_for_offset(&self, rel: u32) -> u64 {
        let i = self.entries.partition_point(|e| e.rel_offset <= rel);
        if i == 0 {
            0
        } else {
            self.entries[i - 1].position as u64
        }
    }

    /// Position from which to scan for the first batch whose max timestamp is >= `ts`: every
    /// batch up to the entry before the first entry reaching `ts` is older.
    pub fn position_for_timestamp(&self, ts: i64) -> u64 {
        let i = self.entries.partition_point(|e| e.max_timestamp < ts);
        if i == 0 {
            0
        } else {
            self.entries[i - 1].position as u64
        }
    }

    /// Forgets entries at or after `position` (a truncated tail).
    pub fn truncate(&mut self, position: u64) {
        self.entries.retain(|e| (e.position as u64) < position);
        self.bytes_since_last = INTERVAL_BYTES;
    }

    pub fn write(&self, offset_path: &Path, time_path: &Path, sync: bool) -> io::Result<()> {
        let mut offsets = Vec::with_capacity(self.entries.len() * 8);
        let mut times = Vec::with_capacity(self.entries.len() * 12);
        for e in &self.entries {
            offsets.extend_from_slice(&e.rel_offset.to_be_bytes());
            offsets.extend_from_slice(&e.position.to_be_bytes());
            times.extend_from_slice(&e.max_timestamp.to_be_bytes());
            times.extend_from_slice(&e.rel_offset.to_be_bytes());
        }
        for (path, bytes) in [(offset_path, offsets), (time_path, times)] {
            let mut f = fs::File::create(path)?;
            f.write_all(&bytes)?;
            if sync {
                f.sync_data()?;
            }
        }
        Ok(())
    }

    /// Loads both files; None unless they exist, agree with each other and fit `log_size`.
    pub fn read(offset_path: &Path, time_path: &Path, log_size: u64) -> Option<SparseIndex> {
        let offsets = fs::read(offset_path).ok()?;
        let times = fs::read(time_path).ok()?;
        if offsets.len() % 8 != 0 || times.len() % 12 != 0 || offsets.len() / 8 != times.len() / 12
        {
            return None;
        }
        let mut entries = Vec::with_capacity(offsets.len() / 8);
        for (o, t) in offsets.chunks_exact(8).zip(times.chunks_exact(12)) {
            let rel_offset = u32::from_be_bytes(o[0..4].try_into().unwrap());
            let position = u32::from_be_bytes(o[4..8].try_into().unwrap());
            let max_timestamp = i64::from_be_bytes(t[0..8].try_into().unwrap());
            if u32::from_be_bytes(t[8..12].try_into().unwrap()) != rel_offset {
                return None;
            }
            if let Some(prev) = entries.last() {
                let prev: &Entry = prev;
                if position <= prev.position
                    || rel_offset < prev.rel_offset
                    || max_timestamp < prev.max_timestamp
                {
                    return None;
                }
            }
            if position as u64 >= log_size {
                return None;
            }
            entries.push(Entry {
                rel_offset,
                position,
                max_timestamp,
            });
        }
        if log_size > 0 && entries.is_empty() {
            return None;
        }
        Some(SparseIndex {
            entries,
            bytes_since_last: INTERVAL_BYTES,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_entries_and_lookups() {
        let mut idx = SparseIndex::default();
        // 10 batches of 1000 bytes, 10 offsets each, timestamps 100, 200, ...
        for i in 0..10u32 {
            idx.on_batch(i * 10, i as u64 * 1000, 1000, (i as i64 + 1) * 100);
        }
        // entries at batch 0, then every 5th batch (bytes since last reaches 4096 after 5).
        assert_eq!(
            idx.entries.iter().map(|e| e.position).collect::<Vec<_>>(),
            vec![0, 5000]
        );
        assert_eq!(idx.position_for_offset(0), 0);
        assert_eq!(idx.position_for_offset(49), 0);
        assert_eq!(idx.position_for_offset(50), 5000);
        assert_eq!(idx.position_for_offset(99), 5000);
        assert_eq!(idx.position_for_timestamp(50), 0);
        assert_eq!(idx.position_for_timestamp(600), 0);
        assert_eq!(idx.position_for_timestamp(601), 5000);
        idx.seal(90, 9000, 1000);
        assert_eq!(idx.entries.len(), 3);
        idx.truncate(5000);
        assert_eq!(idx.entries.len(), 1);
    }

    #[test]
    fn files_round_trip_and_reject_garbage() {
        let dir = std::env::temp_dir().join(format!("corral-index-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let (o, t) = (dir.join("a.index"), dir.join("a.timeindex"));
        let mut idx = SparseIndex::default();
        for i in 0..20u32 {
            idx.on_batch(i, i as u64 * 2048, 2048, i as i64);
        }
        idx.write(&o, &t, false).unwrap();
        let back = SparseIndex::read(&o, &t, 20 * 2048).unwrap();
        assert_eq!(back.entries, idx.entries);
        assert!(
            SparseIndex::read(&o, &t, 1000).is_none(),
            "positions past the log end"
        );
        fs::write(&t, b"short").unwrap();
        assert!(SparseIndex::read(&o, &t, 20 * 2048).is_none());
        fs::remove_dir_all(&dir).unwrap();
    }
}
