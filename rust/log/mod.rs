//! The log store: one directory per topic-partition (`<topic>-<partition>`, as Kafka names them)
//! under the data dir, each a list of segments of Kafka RecordBatch v2 bytes as the producer sent
//! them, with base offsets (and, for LogAppendTime topics, the timestamp) set by the broker.
//!
//! Python sees `LogStore`, whose wide answers are the small frozen classes of results.rs. Every
//! method that touches files releases the GIL, and each partition has its own lock, so a fetch
//! thread, the flush thread and the event loop only meet on the same partition. Durability:
//! `append` returns once the bytes are written (page cache: they survive a process crash); `flush`
//! fsyncs every partition with unflushed appends (what survives a power loss). The broker decides
//! when to flush (group commit, `log.flush.interval.*`).
//!
//! A clean shutdown (`close`) writes every active index and a marker file; without the marker,
//! the next start validates the active segments batch by batch and truncates torn tails.
//!
//! Open files: partitions and segments keep no descriptor; every file access goes through one
//! bounded LRU cache per store (files.rs), so any number of partitions fits any RLIMIT_NOFILE.
//! Errors: an I/O failure (disk full, EIO, out of descriptors) raises `StorageError` and changes
//! nothing in memory: offsets and sizes advance only after a whole write, a partial write is cut
//! off again, a failed roll keeps the old segment active.

pub mod batch;
mod batch_functions;
mod compaction;
mod faults;
mod fetch;
mod files;
mod index;
mod keys;
mod partition;
mod producers;
mod recovery;
mod results;
mod segment;
pub mod transactions;
mod writes;

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyKeyError, PyOSError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use faults::StorageFaults;
use files::FileCache;
use partition::{Config, Partition};
pub(crate) use results::{storage_error, InvalidBatch, StorageError};
use results::{AppendResult, BatchSummary, CleanResult, FetchResult, ReadResult, RetentionResult};

/// Default size of the open-file cache when Python does not give one.
const DEFAULT_OPEN_FILES: usize = 1024;

const CLEAN_SHUTDOWN_MARKER: &str = ".corral-clean-shutdown";
/// Threads that close partitions at shutdown (each close waits on fsyncs, not on the CPU).
const CLOSE_THREADS: usize = 16;

type Key = (String, i32);
/// DescribeProducers' row: (producer id, epoch, last sequence, last timestamp, coordinator
/// epoch, open transaction's first offset).
type ProducerRow = (i64, i16, i32, i64, i32, i64);
type Shared = Arc<Mutex<Partition>>;

#[pyclass(frozen, module = "corral._core")]
pub struct LogStore {
    dir: PathBuf,
    /// Whether the previous run shut down cleanly (decides how much recovery to do).
    clean: bool,
    partitions: Mutex<HashMap<Key, Shared>>,
    /// Partitions with unflushed appends (each once): `flush` visits these, not every open
    /// partition (scanning 10,000 of them cost ~0.6 ms of CPU per pass).
    dirty: Mutex<Vec<Shared>>,
    /// Every segment's file is opened through this one bounded cache (files.rs).
    files: Arc<FileCache>,
    /// One fsync pass at a time (Python's flusher and the commit path's thread both run them):
    /// a pass that starts after an append then covers it, whoever runs it.
    passes: Mutex<()>,
    /// Faults made on purpose (faults.rs): none unless the fault API sets them.
    faults: StorageFaults,
}

fn lock(p: &Shared) -> std::sync::MutexGuard<'_, Partition> {
    // A panic while holding the lock cannot leave a half-written batch visible (sizes are
    // updated after the write), so a poisoned lock is still usable.
    p.lock().unwrap_or_else(|e| e.into_inner())
}

impl LogStore {
    fn lookup(&self, topic: &str, partition: i32) -> Option<Shared> {
        self.partitions
            .lock()
            .unwrap()
            .get(&(topic.to_string(), partition))
            .cloned()
    }

    fn get(&self, topic: &str, partition: i32) -> PyResult<Shared> {
        self.lookup(topic, partition).ok_or_else(|| {
            PyKeyError::new_err(format!("partition {topic}-{partition} is not open"))
        })
    }

    fn all(&self) -> Vec<(Key, Shared)> {
        self.partitions
            .lock()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    fn partition_dir(&self, topic: &str, partition: i32) -> PathBuf {
        self.dir.join(format!("{topic}-{partition}"))
    }
}

#[pymethods]
impl LogStore {
    /// `open_files_max`: how many segment files the store keeps open at most (least recently
    /// used closed first); any number of partitions works within it.
    #[new]
    #[pyo3(signature = (data_dir, open_files_max=DEFAULT_OPEN_FILES))]
    fn new(data_dir: PathBuf, open_files_max: usize) -> PyResult<Self> {
        let clean = (|| -> io::Result<bool> {
            fs::create_dir_all(&data_dir)?;
            let marker = data_dir.join(CLEAN_SHUTDOWN_MARKER);
            let clean = marker.exists();
            if clean {
                fs::remove_file(&marker)?;
                partition::sync_dir(&data_dir)?;
            }
            Ok(clean)
        })()
        .map_err(storage_error)?;
        Ok(LogStore {
            dir: data_dir,
            clean,
            partitions: Mutex::new(HashMap::new()),
            dirty: Mutex::new(Vec::new()),
            passes: Mutex::new(()),
            files: FileCache::new(open_files_max),
            faults: StorageFaults::default(),
        })
    }

    /// (segment files open in the cache now, the cache's capacity).
    #[getter]
    fn open_files(&self) -> (usize, usize) {
        (self.files.len(), self.files.capacity())
    }

    /// (open partitions, segment files, bytes in them) over every partition, for /metrics.
    fn totals(&self, py: Python<'_>) -> (usize, usize, u64) {
        let parts = self.all();
        py.detach(|| {
            parts
                .iter()
                .fold((0, 0, 0), |(n, segments, bytes), (_, p)| {
                    let p = lock(p);
                    (n + 1, segments + p.segment_files(), bytes + p.size())
                })
        })
    }

    /// Whether the previous run ended with `close()`.
    #[getter]
    fn clean_start(&self) -> bool {
        self.clean
    }

    /// Opens (creating, or recovering) a partition; if open already, updates its config.
    /// Returns notes on what recovery repaired, for the log.
    fn open_partition(
        &self,
        py: Python<'_>,
        topic: &str,
        partition: i32,
        segment_bytes: u64,
        retention_ms: i64,
        retention_bytes: i64,
    ) -> PyResult<Vec<String>> {
        let config = Config {
            segment_bytes,
            retention_ms,
            retention_bytes,
        };
        if let Ok(p) = self.get(topic, partition) {
            py.detach(|| lock(&p).config = config);
            return Ok(Vec::new());
        }
        let dir = self.partition_dir(topic, partition);
        let (opened, notes) = py
            .detach(|| Partition::open(&dir, config, self.clean, &self.files))
            .map_err(storage_error)?;
        self.partitions
            .lock()
            .unwrap()
            .entry((topic.to_string(), partition))
            .or_insert_with(|| Arc::new(Mutex::new(opened)));
        Ok(notes)
    }

    /// Appends whole, validated batches (offsets assigned here; with `log_append_time`, the
    /// LogAppendTime timestamp too), checking idempotent producers' sequences first. Returns an
    /// AppendResult (error code, base and last offset, log append time or -1, records waiting
    /// for an fsync in this partition). A retried batch gets error 0 and its original offsets,
    /// as in Kafka; a refused one INVALID_PRODUCER_EPOCH or OUT_OF_ORDER_SEQUENCE_NUMBER and -1s.
    #[pyo3(signature = (topic, partition, data, log_append_time=None))]
    fn append(
        &self,
        py: Python<'_>,
        topic: &str,
        partition: i32,
        data: &[u8],
        log_append_time: Option<i64>,
    ) -> PyResult<AppendResult> {
        let shared = self.get(topic, partition)?;
        let data = data.to_vec();
        py.detach(|| self.append_to(&shared, data, log_append_time))
            .map_err(storage_error)
    }

    /// Whole batches from the one holding `offset`, at most `max_bytes` unless the first batch
    /// alone is bigger and `min_one`. Returns a ReadResult (bytes, or None when `offset` is out
    /// of range; high watermark; log start offset).
    fn read<'py>(
        &self,
        py: Python<'py>,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: usize,
        min_one: bool,
    ) -> PyResult<ReadResult> {
        let p = self.get(topic, partition)?;
        let (data, hw, start) = py
            .detach(|| -> io::Result<_> {
                let p = lock(&p);
                Ok((
                    p.read(offset, max_bytes, min_one, i64::MAX)?,
                    p.next_offset(),
                    p.log_start_offset(),
                ))
            })
            .map_err(storage_error)?;
        Ok(ReadResult {
            data: data.map(|d| PyBytes::new(py, &d).unbind()),
            high_watermark: hw,
            log_start_offset: start,
        })
    }

    /// Reads and encodes a whole Fetch response frame (see fetch.rs), record bytes never
    /// becoming Python objects. `topics`: (name, [(partition, error code already known or 0,
    /// fetch offset, partition max bytes)]); partitions not open are UNKNOWN_TOPIC_OR_PARTITION.
    /// Returns a FetchResult (frame, record bytes in it, whether any partition had an error).
    #[pyo3(signature = (correlation_id, version, topics, max_bytes, isolation_level=0))]
    fn fetch_response<'py>(
        &self,
        py: Python<'py>,
        correlation_id: i32,
        version: i16,
        topics: Vec<(String, Vec<fetch::Wanted>)>,
        max_bytes: i32,
        isolation_level: i8,
    ) -> PyResult<FetchResult> {
        let encoded = py
            .detach(|| {
                fetch::fetch(
                    |t, p| self.lookup(t, p),
                    correlation_id,
                    version,
                    &topics,
                    max_bytes,
                    isolation_level == 1,
                )
            })
            .map_err(|e| PyOSError::new_err(e.to_string()))?;
        Ok(FetchResult {
            frame: PyBytes::new(py, &encoded.frame).unbind(),
            record_bytes: encoded.record_bytes,
            any_error: encoded.any_error,
        })
    }

    /// Appends the COMMIT (`commit`) or ABORT marker of (producer id, epoch) from a coordinator
    /// of `coordinator_epoch`. Returns an AppendResult: error TRANSACTION_COORDINATOR_FENCED or
    /// INVALID_PRODUCER_EPOCH when the marker is older than the partition's producer state.
    #[allow(clippy::too_many_arguments)]
    fn write_marker(
        &self,
        py: Python<'_>,
        topic: &str,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        timestamp: i64,
    ) -> PyResult<AppendResult> {
        let shared = self.get(topic, partition)?;
        let marker = transactions::Marker {
            commit,
            coordinator_epoch,
        };
        let data = transactions::marker_batch(producer_id, producer_epoch, marker, timestamp);
        py.detach(|| self.append_to(&shared, data, None))
            .map_err(storage_error)
    }

    /// Compacts the partition if it is eligible (compaction/mod.rs): a CleanResult, or None when it
    /// is not (or its segments changed meanwhile). Blocks on I/O: call it from a worker thread.
    #[pyo3(signature = (topic, partition, now_ms, min_cleanable_ratio, delete_retention_ms, min_compaction_lag_ms, max_compaction_lag_ms, map_bytes, max_batch_bytes))]
    #[allow(clippy::too_many_arguments)]
    fn clean(
        &self,
        py: Python<'_>,
        topic: &str,
        partition: i32,
        now_ms: i64,
        min_cleanable_ratio: f64,
        delete_retention_ms: i64,
        min_compaction_lag_ms: i64,
        max_compaction_lag_ms: i64,
        map_bytes: usize,
        max_batch_bytes: usize,
    ) -> PyResult<Option<CleanResult>> {
        let shared = self.get(topic, partition)?;
        let cfg = compaction::CleanConfig {
            now_ms,
            min_cleanable_ratio,
            delete_retention_ms,
            min_compaction_lag_ms,
            max_compaction_lag_ms,
            map_bytes,
            max_batch_bytes,
        };
        let cleaned = py
            .detach(|| compaction::clean(&shared, &cfg))
            .map_err(storage_error)?;
        Ok(cleaned.map(CleanResult::from))
    }

    /// The last stable offset (the high watermark when no transaction is open).
    fn stable_offset(&self, py: Python<'_>, topic: &str, partition: i32) -> PyResult<i64> {
        let p = self.get(topic, partition)?;
        Ok(py.detach(|| lock(&p).stable_offset()))
    }

    /// The aborted transactions overlapping `[fetch_offset, upper)`: (producer id, first offset),
    /// what a read_committed reader drops (share groups archive them).
    fn aborted_transactions(
        &self,
        py: Python<'_>,
        topic: &str,
        partition: i32,
        fetch_offset: i64,
        upper: i64,
    ) -> PyResult<Vec<(i64, i64)>> {
        let p = self.get(topic, partition)?;
        Ok(py.detach(|| lock(&p).aborted_overlapping(fetch_offset, upper)))
    }

    /// One producer of the partition: (epoch, last sequence or -1, whether its transaction is
    /// open), or None when the partition does not know it.
    fn producer(
        &self,
        py: Python<'_>,
        topic: &str,
        partition: i32,
        producer_id: i64,
    ) -> PyResult<Option<(i16, i32, bool)>> {
        let p = self.get(topic, partition)?;
        Ok(py.detach(|| lock(&p).producer(producer_id)))
    }

    /// The partition's producers as DescribeProducers lists them: (producer id, epoch, last
    /// sequence, last timestamp, coordinator epoch, current transaction's first offset or -1).
    fn producers(&self, py: Python<'_>, topic: &str, partition: i32) -> PyResult<Vec<ProducerRow>> {
        let p = self.get(topic, partition)?;
        Ok(py.detach(|| {
            lock(&p)
                .producer_views()
                .into_iter()
                .map(|v| {
                    (
                        v.producer_id,
                        v.epoch,
                        v.last_sequence,
                        v.last_timestamp,
                        v.coordinator_epoch,
                        v.txn_start_offset,
                    )
                })
                .collect()
        }))
    }

    /// (log start offset, high watermark).
    fn offsets(&self, py: Python<'_>, topic: &str, partition: i32) -> PyResult<(i64, i64)> {
        let p = self.get(topic, partition)?;
        Ok(py.detach(|| {
            let p = lock(&p);
            (p.log_start_offset(), p.next_offset())
        }))
    }

    /// (timestamp, offset) of the first record with a timestamp >= `timestamp`, or None.
    fn offset_for_timestamp(
        &self,
        py: Python<'_>,
        topic: &str,
        partition: i32,
        timestamp: i64,
    ) -> PyResult<Option<(i64, i64)>> {
        let p = self.get(topic, partition)?;
        py.detach(|| lock(&p).offset_for_timestamp(timestamp))
            .map_err(storage_error)
    }

    /// (timestamp, offset) of the record with the largest timestamp, or None when empty.
    fn max_timestamp(
        &self,
        py: Python<'_>,
        topic: &str,
        partition: i32,
    ) -> PyResult<Option<(i64, i64)>> {
        let p = self.get(topic, partition)?;
        py.detach(|| lock(&p).max_timestamp())
            .map_err(storage_error)
    }

    /// DeleteRecords on one partition: moves its log start offset to `offset` (-1: the high
    /// watermark), durably, and deletes the segments wholly below it. Returns the low watermark,
    /// or None when `offset` is out of range (negative, or past the high watermark). Blocks on
    /// fsyncs (without the GIL): call it from a worker thread.
    fn delete_records(
        &self,
        py: Python<'_>,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> PyResult<Option<i64>> {
        let p = self.get(topic, partition)?;
        py.detach(|| -> io::Result<_> {
            let mut p = lock(&p);
            let offset = if offset == -1 {
                p.next_offset()
            } else {
                offset
            };
            if !(0..=p.next_offset()).contains(&offset) {
                return Ok(None);
            }
            p.delete_records(offset).map(Some)
        })
        .map_err(storage_error)
    }

    /// Bytes of the partition's segment files (DescribeLogDirs' partition size).
    fn size(&self, py: Python<'_>, topic: &str, partition: i32) -> PyResult<u64> {
        let p = self.get(topic, partition)?;
        Ok(py.detach(|| lock(&p).size()))
    }

    /// fsyncs every partition with unflushed appends; one fsync covers all appends made before
    /// it started. Blocks (without the GIL): call it from a worker thread. Returns the number of
    /// records made durable.
    fn flush(&self, py: Python<'_>) -> PyResult<u64> {
        py.detach(|| self.flush_dirty()).map_err(storage_error)
    }

    /// Storage faults on purpose (the fault API): with `disk_full` every append fails with
    /// ENOSPC before writing; the next `failing_fsyncs` flush passes fail before syncing
    /// anything; every pass first waits `fsync_delay_ms`. All zero/false: none (the default).
    #[pyo3(signature = (*, disk_full=false, failing_fsyncs=0, fsync_delay_ms=0))]
    fn set_storage_faults(&self, disk_full: bool, failing_fsyncs: u32, fsync_delay_ms: u64) {
        self.faults.set(disk_full, failing_fsyncs, fsync_delay_ms);
    }

    /// (disk full, flush passes still to fail, delay of each pass in ms, faults fired so far).
    #[getter]
    fn storage_faults(&self) -> (bool, u32, u64, u64) {
        self.faults.get()
    }

    /// Applies retention.ms / retention.bytes everywhere. Returns a RetentionResult (topic,
    /// partition, segments deleted, new log start offset) for each partition that lost segments.
    fn apply_retention(&self, py: Python<'_>, now_ms: i64) -> PyResult<Vec<RetentionResult>> {
        let parts = self.all();
        py.detach(|| -> io::Result<_> {
            let mut out = Vec::new();
            for ((topic, partition), p) in parts {
                let mut p = lock(&p);
                let n = p.apply_retention(now_ms)?;
                if n > 0 {
                    out.push(RetentionResult {
                        topic,
                        partition,
                        segments_deleted: n,
                        log_start_offset: p.log_start_offset(),
                    });
                }
            }
            Ok(out)
        })
        .map_err(storage_error)
    }

    /// Closes the partition and removes its directory.
    fn delete_partition(&self, py: Python<'_>, topic: &str, partition: i32) -> PyResult<()> {
        let removed = self
            .partitions
            .lock()
            .unwrap()
            .remove(&(topic.to_string(), partition));
        let dir = self.partition_dir(topic, partition);
        py.detach(|| -> io::Result<()> {
            // Holding the lock while deleting waits out an append or read in progress.
            let _guard = removed.as_ref().map(lock);
            match fs::remove_dir_all(&dir) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                _ => partition::sync_dir(&self.dir),
            }
        })
        .map_err(storage_error)
    }

    /// Clean shutdown: fsync everything, write the active indexes, leave the marker. When a
    /// partition fails (disk full), the others are still closed but no marker is left: the next
    /// start validates every active segment. Raises StorageError with the first failure.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let parts = self.all();
        py.detach(|| -> io::Result<()> {
            // Each partition's close is a few fsyncs: spread over threads, a thousand partitions
            // close in a fraction of the serial time (the disk takes the fsyncs in parallel).
            let per_thread = parts.len().div_ceil(CLOSE_THREADS).max(1);
            let results: Vec<io::Result<()>> = std::thread::scope(|scope| {
                let handles: Vec<_> = parts
                    .chunks(per_thread)
                    .map(|chunk| {
                        scope.spawn(move || {
                            let mut first_error = None;
                            for (_, p) in chunk {
                                if let Err(e) = lock(p).close() {
                                    first_error.get_or_insert(e);
                                }
                            }
                            first_error.map_or(Ok(()), Err)
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join()
                            .unwrap_or_else(|_| Err(io::Error::other("a close thread panicked")))
                    })
                    .collect()
            });
            if let Some(e) = results.into_iter().find_map(Result::err) {
                return Err(e);
            }
            fs::File::create(self.dir.join(CLEAN_SHUTDOWN_MARKER))?.sync_all()?;
            partition::sync_dir(&self.dir)
        })
        .map_err(storage_error)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<LogStore>()?;
    m.add_class::<AppendResult>()?;
    m.add_class::<ReadResult>()?;
    m.add_class::<FetchResult>()?;
    m.add_class::<RetentionResult>()?;
    m.add_class::<CleanResult>()?;
    m.add_class::<BatchSummary>()?;
    m.add("InvalidBatch", m.py().get_type::<InvalidBatch>())?;
    m.add("StorageError", m.py().get_type::<StorageError>())?;
    batch_functions::register(m)?;
    Ok(())
}

#[cfg(test)]
mod tests;
