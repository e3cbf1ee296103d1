//! The store's two write paths without Python: appends (from the event loop's calls and the
//! network thread's commit path) and fsync passes over the partitions with unflushed appends.

use std::io;

use super::partition::{Appended, Partition};
use super::results::AppendResult;
use super::{lock, LogStore, Shared};

impl LogStore {
    /// `append` without Python, for the network thread's commit path (commit_path.rs); None
    /// when the partition is not open.
    /// Returns (error code, base offset, records waiting for an fsync in the partition).
    pub(crate) fn append_open(
        &self,
        topic: &str,
        partition: i32,
        data: Vec<u8>,
    ) -> Option<io::Result<(i16, i64, u64)>> {
        let appended = self.append_to(&self.lookup(topic, partition)?, data, None);
        Some(appended.map(|r| (r.error_code, r.base_offset, r.unflushed)))
    }

    pub(super) fn append_to(
        &self,
        shared: &Shared,
        data: Vec<u8>,
        log_append_time: Option<i64>,
    ) -> io::Result<AppendResult> {
        self.faults.before_append()?;
        let mut p = lock(shared);
        let was_flushed = p.unflushed == 0;
        let appended = p.append(data, log_append_time)?;
        if was_flushed && p.unflushed > 0 {
            self.dirty.lock().unwrap().push(shared.clone());
        }
        let (error_code, base_offset, last_offset, log_append_time) = match appended {
            Appended::New(base, last, _) => (0, base, last, log_append_time.unwrap_or(-1)),
            Appended::Duplicate(meta) => (0, meta.first_offset, meta.last_offset, meta.timestamp),
            Appended::Refused(code, _) => (code, -1, -1, -1),
        };
        Ok(AppendResult {
            error_code,
            base_offset,
            last_offset,
            log_append_time,
            unflushed: p.unflushed,
        })
    }

    /// `flush` without Python (see there).
    pub(crate) fn flush_dirty(&self) -> io::Result<u64> {
        let _one_at_a_time = self.passes.lock().unwrap_or_else(|p| p.into_inner());
        // An injected failure fails the pass before it takes the dirty list: every partition
        // stays waiting for the next pass.
        self.faults.before_fsync()?;
        let dirty = std::mem::take(&mut *self.dirty.lock().unwrap());
        let mut total = 0;
        let mut parts = dirty.into_iter();
        while let Some(p) = parts.next() {
            let (file, pending, new_dir) = {
                let p = lock(&p);
                if p.unflushed == 0 {
                    continue;
                }
                (
                    p.active_file(),
                    p.unflushed,
                    p.dir_unsynced.then(|| p.dir.clone()),
                )
            };
            // A partition's first records: its directory entries must be durable too.
            let file = match &new_dir {
                Some(dir) => Partition::sync_dirs(dir).and(file),
                None => file,
            };
            // A roll in between already fsynced the older segment, so syncing the file that
            // was active when `pending` was read covers every one of those records. The
            // descriptor may have been opened after the one the appends wrote through (the
            // cache evicted it): on Linux an fsync covers the inode's dirty pages, whichever
            // descriptor wrote them.
            if let Err(e) = file.and_then(|f| f.sync_data()) {
                let mut dirty = self.dirty.lock().unwrap();
                dirty.push(p);
                dirty.extend(parts);
                return Err(e);
            }
            let mut guard = lock(&p);
            guard.flushed(pending);
            if new_dir.is_some() {
                guard.dir_unsynced = false;
            }
            // Appends made during the fsync found the partition dirty already: keep it listed.
            if guard.unflushed > 0 {
                self.dirty.lock().unwrap().push(p.clone());
            }
            total += pending;
        }
        Ok(total)
    }
}
