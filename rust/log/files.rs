//! One bounded cache of open segment files per log store, least recently used closed first.
//!
//! Segments keep no file open of their own: each write, read and fsync asks the cache for its
//! file (an `Arc<File>`), which is opened on a miss. Eviction only drops the cache's `Arc`: a
//! reader or the flusher still holding one keeps that descriptor open until it is done. So any
//! number of partitions (and segments) costs at most `capacity` descriptors, plus the ones in use
//! at that moment.
//!
//! Durability across an eviction: an fsync through a descriptor opened later covers the writes
//! made through an evicted one, because on Linux dirty pages belong to the inode (page cache),
//! not to the descriptor. (A write error reported at writeback is, since Linux 4.13, reported to
//! every descriptor open at the time and to the next fsync of the file.)

use std::fs::{File, OpenOptions};
use std::io;
use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use lru::LruCache;

pub struct FileCache {
    files: Mutex<LruCache<u64, Arc<File>>>,
    next_id: AtomicU64,
}

impl FileCache {
    pub fn new(capacity: usize) -> Arc<FileCache> {
        let capacity = NonZeroUsize::new(capacity.max(1)).unwrap();
        Arc::new(FileCache {
            files: Mutex::new(LruCache::new(capacity)),
            next_id: AtomicU64::new(1),
        })
    }

    /// A new key for a segment file (keys are never reused).
    pub fn new_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LruCache<u64, Arc<File>>> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The file of segment `id` at `path` (read-write), opened if it is not cached.
    pub fn get(&self, id: u64, path: &Path) -> io::Result<Arc<File>> {
        if let Some(file) = self.lock().get(&id) {
            return Ok(file.clone());
        }
        let mut attempts = 0;
        let file = loop {
            match OpenOptions::new().read(true).write(true).open(path) {
                Ok(file) => break file,
                // Out of descriptors (sockets, or a limit lowered since the capacity was set):
                // close some of ours and try again.
                Err(e)
                    if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
                        && attempts < 3 =>
                {
                    attempts += 1;
                    let evicted: Vec<_> = {
                        let mut files = self.lock();
                        let n = (files.len() / 4).max(1);
                        (0..n).filter_map(|_| files.pop_lru()).collect()
                    };
                    if evicted.is_empty() {
                        return Err(e);
                    }
                    drop(evicted);
                }
                Err(e) => return Err(e),
            }
        };
        Ok(self.insert(id, Arc::new(file)))
    }

    /// Caches a file just opened (or created) for segment `id`; returns the cached one.
    pub fn insert(&self, id: u64, file: Arc<File>) -> Arc<File> {
        let evicted = {
            let mut files = self.lock();
            if let Some(cached) = files.get(&id) {
                return cached.clone();
            }
            files.push(id, file.clone())
        };
        // Closed (when nobody else holds it) outside the lock.
        drop(evicted);
        file
    }

    /// Drops segment `id`'s file from the cache (the segment is gone).
    pub fn forget(&self, id: u64) {
        let removed = self.lock().pop(&id);
        drop(removed);
    }

    /// Files held open by the cache now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn capacity(&self) -> usize {
        self.lock().cap().get()
    }
}
