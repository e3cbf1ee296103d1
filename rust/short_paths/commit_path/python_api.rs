//! The commit path as Python sees it: made and fed (topics, the flags of its writes) by the
//! coordinator, drained of the moves it made, and its counters.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use pyo3::prelude::*;

use super::{CommitPath, Inner, Moved, State};
use crate::groups::offset_map::PyOffsetMap;
use crate::log::LogStore;

#[pymethods]
impl CommitPath {
    /// A path appending to `offsets_topic` (its `offsets_partitions` partitions, opened by
    /// Python) in `store`, applying to `offset_map`.
    #[new]
    fn new(
        store: Py<LogStore>,
        offsets_topic: String,
        offsets_partitions: i32,
        offset_map: &PyOffsetMap,
        flush_messages: u64,
        metadata_max_bytes: usize,
    ) -> PyResult<Self> {
        let inner = Arc::new(Inner {
            store,
            offsets_topic,
            offsets_partitions,
            map: offset_map.shared(),
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            responder: Mutex::new(None),
            flush_messages: AtomicU64::new(flush_messages),
            metadata_max_bytes: AtomicUsize::new(metadata_max_bytes),
            requests: AtomicU64::new(0),
            partitions: AtomicU64::new(0),
            moves_pending: AtomicBool::new(false),
        });
        Ok(CommitPath {
            inner,
            flusher: Mutex::new(None),
        })
    }

    /// Ends the flusher thread once the commits waiting are answered (shutdown).
    fn close(&self, py: Python<'_>) {
        self.inner.lock().stopping = true;
        self.inner.work.notify_one();
        if let Some(thread) = self
            .flusher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            py.detach(|| {
                let _ = thread.join();
            });
        }
    }

    /// Tests: while `held`, no fsync pass of the path starts (commits keep waiting).
    fn hold(&self, held: bool) {
        self.inner.lock().held = held;
        self.inner.work.notify_one();
    }

    /// log.flush.interval.messages changed (a dynamic broker setting).
    fn set_flush_messages(&self, flush_messages: u64) {
        self.inner
            .flush_messages
            .store(flush_messages, Ordering::Relaxed);
    }

    /// A topic as requests now see it (created, grown); `partitions` 0: gone.
    fn set_topic(&self, name: &str, partitions: i32) {
        let mut state = self.inner.lock();
        if partitions > 0 {
            state.topics.insert(name.to_owned(), partitions);
        } else {
            state.topics.remove(name);
        }
    }

    /// Whether a Python write of the group touching offsets is pending (see the module's comment).
    fn python_writing(&self, group_id: &str, writing: bool) {
        let mut state = self.inner.lock();
        if writing {
            state.python_writing.insert(group_id.to_owned());
        } else {
            state.python_writing.remove(group_id);
        }
    }

    /// Whether Python is writing the group's consumer-group records (see the module's comment).
    fn python_writing_group(&self, group_id: &str, writing: bool) {
        let mut state = self.inner.lock();
        if writing {
            state.python_writing_group.insert(group_id.to_owned());
        } else {
            state.python_writing_group.remove(group_id);
        }
    }

    /// The members moved by the network thread since the last call, in append order, and the
    /// groups one of whose moves failed to be durable; None when there are none.
    #[allow(clippy::type_complexity)]
    fn drain_moves(&self) -> Option<(Vec<Moved>, Vec<String>)> {
        if !self.inner.moves_pending.load(Ordering::Acquire) {
            return None;
        }
        let mut state = self.inner.lock();
        self.inner.moves_pending.store(false, Ordering::Release);
        Some((
            std::mem::take(&mut state.moved),
            std::mem::take(&mut state.failed_groups),
        ))
    }

    /// Commits of the group appended here and not applied yet.
    fn in_flight(&self, group_id: &str) -> u32 {
        self.inner
            .lock()
            .in_flight
            .get(group_id)
            .copied()
            .unwrap_or(0)
    }

    /// Per `__consumer_offsets` partition, the offset of its oldest commit not applied yet.
    fn oldest_in_flight(&self) -> HashMap<i32, i64> {
        let mut oldest = HashMap::new();
        for waiter in &self.inner.lock().waiting {
            oldest.entry(waiter.partition).or_insert(waiter.base_offset);
        }
        oldest
    }

    /// (OffsetCommit requests, partitions) this path committed.
    fn committed(&self) -> (u64, u64) {
        (
            self.inner.requests.load(Ordering::Relaxed),
            self.inner.partitions.load(Ordering::Relaxed),
        )
    }
}
