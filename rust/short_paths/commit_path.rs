//! OffsetCommit without Python: the steady-state commit of a known member is checked, appended
//! to `__consumer_offsets`, group-committed by the next fsync pass, applied to the offset map
//! and answered by the core (issue 29 item 6; docs/offset-commit-short-path.md).
//!
//! The network thread takes a commit (`take`) only when Python would accept all of it: a view
//! says the member may commit at that generation or epoch (`OffsetCommit::accepted_by_views`),
//! every topic is known with the partition (`set_topic` mirrors the broker's topics), every
//! metadata is within `offset.metadata.max.bytes`, and the group has no Python write touching
//! offsets pending. Anything else, Python answers as before.
//!
//! Ordering with Python's writes (the offset map must end as the log says):
//! - One applier per group at a time. Python flags a group while a write of it that touches
//!   offsets is pending (`python_writing`); the network thread checks the flag and appends
//!   under this path's lock, so a Python append of the group is either before the check (the
//!   commit goes to Python) or after the Rust append (a later log offset, applied later: the
//!   Rust commit is applied inside the fsync pass, Python's after it, in the loop).
//! - Tombstones computed from the map (DeleteGroups, expiry) wait until `in_flight(group)` is 0.
//!   The verdict is asked under this path's lock, so a group marked deleting before that is
//!   refused, and one marked after already counts the commit in flight.
//! - Snapshots start replay no later than `oldest_in_flight()`.
//!
//! The path's own thread runs the fsync passes its commits wait for (`run_flusher`), so a
//! commit costs Python nothing; the store runs one pass at a time, whoever asks.
//!
//! The path writes one other record: a consumer-group member moved to its group's new target
//! epoch by the network thread (consumer_epoch_moves.rs, through `lock_for`). Python flags a
//! group for the whole of each write of its consumer-group records (`python_writing_group`,
//! from before the records are applied to memory and the views until they are appended), so a
//! move is decided on views Python is not changing and appended before or after Python's write,
//! never in between. Python learns of the moves it did not make from `drain_moves` (before it
//! handles any request, and inside each such flagged write, before its records are applied).
//!
//! Lock order: this path's state, then a view (the verdict) or the offset map.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use kafka_protocol::messages::OffsetCommitRequest;
use kafka_protocol::ResponseError;
use pyo3::prelude::*;

use crate::groups::offset_map::OffsetMap;
use crate::groups::offset_records::{commit_batch, TopicCommits};
use crate::log::LogStore;
use crate::short_paths::offset_commit::{encode_answer, metadata_too_large, PartitionCodes};

const NONE: i16 = 0;
/// Kafka maps a failed coordinator append or fsync to NOT_COORDINATOR.
const WRITE_FAILED: i16 = ResponseError::NotCoordinator.code();

/// Sends a connection its answer (frame, error code) from whichever thread completes it.
pub type Responder = Arc<dyn Fn(u64, Bytes, i16) + Send + Sync>;

/// What became of an OffsetCommit the network thread offered to the path.
pub enum Took {
    /// Written and applied: the answer goes out now (no fsync wanted before acknowledging).
    Answered(Bytes),
    /// Appended; the answer goes out after the fsync pass (the path's thread) that covers it.
    Waiting,
}

/// Where the answer to a commit goes, and how it is encoded.
#[derive(Clone, Copy)]
pub struct ReplyTo {
    pub connection: u64,
    pub api_version: i16,
    pub correlation_id: i32,
}

/// An appended write waiting for its fsync: a commit, or a member's move.
struct Waiter {
    connection: u64,
    group: String,
    partition: i32,
    base_offset: i64,
    /// A commit's offsets (applied once durable); none for a move.
    topics: Vec<TopicCommits>,
    commit_ms: i64,
    accepted: Bytes,
    failed: Failed,
}

/// How the answer of a write whose fsync failed is made.
enum Failed {
    /// A commit's answer, encoded again with NOT_COORDINATOR (rare: not encoded ahead).
    Commit(i16, i32, PartitionCodes),
    /// A move's NOT_COORDINATOR answer, encoded at the append.
    Frame(Bytes),
}

/// A consumer-group member the network thread moved: (group, member, epoch, previous epoch).
pub type Moved = (String, String, i32, i32);

#[derive(Default)]
struct State {
    /// Topic name -> partition count, as requests see them.
    topics: HashMap<String, i32>,
    /// Groups with a Python write touching offsets appended and not applied yet.
    python_writing: HashSet<String>,
    /// Per group, commits appended here and not applied yet.
    in_flight: HashMap<String, u32>,
    waiting: Vec<Waiter>,
    /// Groups with a Python write of their consumer-group records under way (see above).
    python_writing_group: HashSet<String>,
    /// Moves appended and not yet told to Python, and groups whose move failed to be durable
    /// (Python rewrites them: memory and the log may differ).
    moved: Vec<Moved>,
    failed_groups: Vec<String>,
    /// Tests: no pass starts while held.
    held: bool,
    stopping: bool,
}

/// What the network thread and the path's flusher thread share.
struct Inner {
    store: Py<LogStore>,
    offsets_topic: String,
    offsets_partitions: i32,
    map: Arc<Mutex<OffsetMap>>,
    state: Mutex<State>,
    /// Signalled when a commit starts waiting (and at `close`).
    work: Condvar,
    responder: Mutex<Option<Responder>>,
    /// log.flush.interval.messages: below it, a commit is acknowledged without an fsync.
    flush_messages: AtomicU64,
    metadata_max_bytes: AtomicUsize,
    requests: AtomicU64,
    partitions: AtomicU64,
    /// `moved` or `failed_groups` holds something (`drain_moves` without the lock otherwise).
    moves_pending: AtomicBool,
}

/// The commit path: its state and the thread that runs the fsync passes its commits wait for
/// (one wakeup per pass, nothing in Python: the store lets one pass run at a time).
#[pyclass(frozen, module = "corral._core")]
pub struct CommitPath {
    inner: Arc<Inner>,
    flusher: Mutex<Option<JoinHandle<()>>>,
}

fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Kafka's placement: Utils.abs(groupId.hashCode()) % partitions, the hash Java's String's.
pub fn partition_for(group_id: &str, partitions: i32) -> i32 {
    let hash = group_id
        .encode_utf16()
        .fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(unit as i32));
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs % partitions.max(1)
}

impl CommitPath {
    pub fn attach(&self, responder: Responder) {
        *self
            .inner
            .responder
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(responder);
    }

    /// See `Inner::take`.
    pub fn take(
        &self,
        commit: &OffsetCommitRequest,
        to: ReplyTo,
        verdict: impl FnOnce() -> bool,
    ) -> Option<Took> {
        let took = self.inner.take(commit, to, verdict);
        if matches!(took, Some(Took::Waiting)) {
            self.start_flusher();
        }
        took
    }

    /// The path held for a write of `group` by the network thread; None while Python writes
    /// the group's consumer-group records (or the path is stopping).
    pub fn lock_for<'a>(&'a self, group: &'a str) -> Option<GroupWrite<'a>> {
        let state = self.inner.lock();
        if state.stopping || state.python_writing_group.contains(group) {
            return None;
        }
        Some(GroupWrite {
            path: self,
            state,
            group,
        })
    }

    /// Started with the first commit that waits: a path no server uses has no thread.
    fn start_flusher(&self) {
        let mut flusher = self.flusher.lock().unwrap_or_else(|p| p.into_inner());
        if flusher.is_none() {
            let inner = self.inner.clone();
            let spawned = std::thread::Builder::new()
                .name("corral-commits".into())
                .spawn(move || inner.run_flusher());
            // Without a thread (none could be made) the waiting commits would hang: stop taking.
            match spawned {
                Ok(thread) => *flusher = Some(thread),
                Err(_) => self.inner.lock().stopping = true,
            }
        }
    }
}

/// The path held for one group's move (`CommitPath::lock_for`): nothing of the group is being
/// written by Python, and nothing can start to until this is dropped.
pub struct GroupWrite<'a> {
    path: &'a CommitPath,
    state: MutexGuard<'a, State>,
    group: &'a str,
}

/// Where a group write was appended.
pub struct Appended {
    partition: i32,
    base_offset: i64,
    unflushed: u64,
}

impl GroupWrite<'_> {
    /// Appends `batch` to the group's `__consumer_offsets` partition; None if it could not be
    /// (the caller leaves the request to Python, which says why).
    pub fn append(&self, batch: Vec<u8>) -> Option<Appended> {
        let inner = &self.path.inner;
        let partition = partition_for(self.group, inner.offsets_partitions);
        match inner
            .store
            .get()
            .append_open(&inner.offsets_topic, partition, batch)?
        {
            Ok((NONE, base_offset, unflushed)) => Some(Appended {
                partition,
                base_offset,
                unflushed,
            }),
            _ => None,
        }
    }

    /// A member's move appended (`appended`): Python is told, and `accepted` answers it after
    /// the fsync that covers it (`failure` if that fails), or at once below
    /// log.flush.interval.messages.
    pub fn moved(
        mut self,
        appended: Appended,
        moved: Moved,
        connection: u64,
        accepted: Bytes,
        failure: Bytes,
    ) -> Took {
        let inner = &self.path.inner;
        self.state.moved.push(moved);
        inner.moves_pending.store(true, Ordering::Release);
        if appended.unflushed < inner.flush_messages.load(Ordering::Relaxed) {
            return Took::Answered(accepted);
        }
        self.state.waiting.push(Waiter {
            connection,
            group: self.group.to_owned(),
            partition: appended.partition,
            base_offset: appended.base_offset,
            topics: Vec::new(),
            commit_ms: 0,
            accepted,
            failed: Failed::Frame(failure),
        });
        if self.state.waiting.len() == 1 {
            inner.work.notify_one();
        }
        drop(self.state);
        self.path.start_flusher();
        Took::Waiting
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes the commit when Python would accept all of it and the group is this path's now
    /// (see the module's comment); None: Python answers it. `verdict` asks the views.
    fn take(
        &self,
        commit: &OffsetCommitRequest,
        to: ReplyTo,
        verdict: impl FnOnce() -> bool,
    ) -> Option<Took> {
        let ReplyTo {
            connection,
            api_version,
            correlation_id,
        } = to;
        let group = commit.group_id.as_str();
        let metadata_max = self.metadata_max_bytes.load(Ordering::Relaxed);
        let mut state = self.lock();
        if state.stopping || state.python_writing.contains(group) || commit.topics.is_empty() {
            return None;
        }
        let mut topics: Vec<TopicCommits> = Vec::with_capacity(commit.topics.len());
        let mut codes = Vec::with_capacity(commit.topics.len());
        for topic in &commit.topics {
            let &count = state.topics.get(topic.name.as_str())?;
            let mut partitions = Vec::with_capacity(topic.partitions.len());
            for p in &topic.partitions {
                let metadata = p.committed_metadata.as_deref().unwrap_or("");
                if p.partition_index < 0
                    || p.partition_index >= count
                    || metadata_too_large(metadata, metadata_max)
                {
                    return None;
                }
                partitions.push((
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    metadata.to_owned(),
                ));
            }
            codes.push((
                topic.name.clone(),
                topic
                    .partitions
                    .iter()
                    .map(|p| (p.partition_index, NONE))
                    .collect(),
            ));
            topics.push((topic.name.as_str().to_owned(), partitions));
        }
        if !verdict() {
            return None;
        }
        let commit_ms = wall_ms();
        let batch = commit_batch(group, &topics, commit_ms)?;
        let partition = partition_for(group, self.offsets_partitions);
        let (code, base_offset, unflushed) =
            match self
                .store
                .get()
                .append_open(&self.offsets_topic, partition, batch)?
            {
                Ok(appended) => appended,
                Err(_) => return None, // Python writes it again, and says why it failed
            };
        if code != NONE {
            return None;
        }
        let accepted = encode_answer(api_version, correlation_id, &codes, NONE).ok()?;
        self.requests.fetch_add(1, Ordering::Relaxed);
        let count: usize = topics.iter().map(|(_, ps)| ps.len()).sum();
        self.partitions.fetch_add(count as u64, Ordering::Relaxed);
        if unflushed < self.flush_messages.load(Ordering::Relaxed) {
            let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
            for (topic, partitions) in topics {
                map.commit(group, &topic, partitions, commit_ms, -1);
            }
            return Some(Took::Answered(accepted));
        }
        *state.in_flight.entry(group.to_owned()).or_default() += 1;
        state.waiting.push(Waiter {
            connection,
            group: group.to_owned(),
            partition,
            base_offset,
            topics,
            commit_ms,
            accepted,
            failed: Failed::Commit(api_version, correlation_id, codes),
        });
        if state.waiting.len() == 1 {
            self.work.notify_one();
        }
        Some(Took::Waiting)
    }

    /// The flusher thread: a pass for whatever waits, as soon as it waits (commits appended
    /// during a pass wait for the next; the passes group-commit them).
    fn run_flusher(&self) {
        loop {
            let covered = {
                let mut state = self.lock();
                while (state.waiting.is_empty() || state.held) && !state.stopping {
                    state = self.work.wait(state).unwrap_or_else(|p| p.into_inner());
                }
                if state.stopping && state.waiting.is_empty() {
                    return;
                }
                std::mem::take(&mut state.waiting)
            };
            let flushed = self.store.get().flush_dirty();
            // A failed fsync is logged by Python's flusher, whose next pass meets it too.
            self.complete(covered, flushed.is_ok());
        }
    }

    /// Applies and answers the commits an fsync pass covered (`durable`), or answers them
    /// NOT_COORDINATOR (the pass failed: nothing applied, as Python does).
    fn complete(&self, mut covered: Vec<Waiter>, durable: bool) {
        if covered.is_empty() {
            return;
        }
        if durable {
            let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
            for waiter in &mut covered {
                for (topic, partitions) in std::mem::take(&mut waiter.topics) {
                    map.commit(&waiter.group, &topic, partitions, waiter.commit_ms, -1);
                }
            }
        }
        {
            let mut state = self.lock();
            for waiter in &covered {
                if let Failed::Frame(_) = waiter.failed {
                    if !durable {
                        state.failed_groups.push(waiter.group.clone());
                        self.moves_pending.store(true, Ordering::Release);
                    }
                    continue; // a move: not counted in flight
                }
                if let Some(count) = state.in_flight.get_mut(&waiter.group) {
                    *count -= 1;
                    if *count == 0 {
                        state.in_flight.remove(&waiter.group);
                    }
                }
            }
        }
        let responder = self
            .responder
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(respond) = responder {
            for waiter in covered {
                let (frame, code) = match (durable, waiter.failed) {
                    (true, _) => (Some(waiter.accepted), NONE),
                    (false, Failed::Commit(api_version, correlation_id, codes)) => (
                        encode_answer(api_version, correlation_id, &codes, WRITE_FAILED).ok(),
                        WRITE_FAILED,
                    ),
                    (false, Failed::Frame(frame)) => (Some(frame), WRITE_FAILED),
                };
                // An answer that cannot be encoded (it was once) leaves the connection waiting;
                // the client's request timeout ends it, as for a broker that went away.
                if let Some(frame) = frame {
                    respond(waiter.connection, frame, code);
                }
            }
        }
    }
}

mod python_api;
#[cfg(test)]
mod tests;
