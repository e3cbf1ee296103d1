//! What the log store hands back to Python: small frozen classes with named, read-only fields
//! instead of wide positional tuples (`result.base_offset`, not the second of five ints). One
//! allocation each, like the tuple they replace. Its failures are the two exceptions below.

use std::io;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

create_exception!(
    _core,
    InvalidBatch,
    PyException,
    "A record batch Kafka would refuse: args are (error_code, message)."
);
create_exception!(
    _core,
    StorageError,
    PyOSError,
    "The log store's files failed (disk full, I/O error, out of descriptors): args are (errno, message). \
     Nothing the failed call wrote counts; the store stays usable and later calls may succeed."
);

/// An I/O error of the store as a Python exception: StorageError, so that callers can answer
/// KAFKA_STORAGE_ERROR (or NOT_COORDINATOR) instead of failing the request.
pub(crate) fn storage_error(e: io::Error) -> PyErr {
    if e.kind() == io::ErrorKind::InvalidInput {
        return PyValueError::new_err(e.to_string());
    }
    StorageError::new_err((e.raw_os_error().unwrap_or(libc::EIO), e.to_string()))
}

/// What `LogStore.append` did. A retried batch gets error 0 and its original offsets; a refused
/// one INVALID_PRODUCER_EPOCH or OUT_OF_ORDER_SEQUENCE_NUMBER and -1s.
#[pyclass(frozen, get_all, module = "corral._core")]
pub struct AppendResult {
    pub error_code: i16,
    pub base_offset: i64,
    pub last_offset: i64,
    /// The LogAppendTime timestamp given to the batches, or -1.
    pub log_append_time: i64,
    /// Records of the partition waiting for an fsync (this append's included).
    pub unflushed: u64,
}

#[pymethods]
impl AppendResult {
    fn __repr__(&self) -> String {
        format!(
            "AppendResult(error_code={}, base_offset={}, last_offset={}, log_append_time={}, unflushed={})",
            self.error_code, self.base_offset, self.last_offset, self.log_append_time, self.unflushed
        )
    }
}

/// What `LogStore.read` found.
#[pyclass(frozen, get_all, module = "corral._core")]
pub struct ReadResult {
    /// Whole batches, or None when the offset is out of range.
    pub data: Option<Py<PyBytes>>,
    pub high_watermark: i64,
    pub log_start_offset: i64,
}

#[pymethods]
impl ReadResult {
    fn __repr__(&self, py: Python<'_>) -> String {
        let data = match &self.data {
            Some(d) => format!("<{} bytes>", d.bind(py).as_bytes().len()),
            None => "None".into(),
        };
        format!(
            "ReadResult(data={data}, high_watermark={}, log_start_offset={})",
            self.high_watermark, self.log_start_offset
        )
    }
}

/// A whole Fetch response encoded by `LogStore.fetch_response`.
#[pyclass(frozen, get_all, module = "corral._core")]
pub struct FetchResult {
    pub frame: Py<PyBytes>,
    /// Record bytes in the frame (what `min_bytes` is compared with).
    pub record_bytes: usize,
    /// Whether any partition was answered with an error.
    pub any_error: bool,
}

#[pymethods]
impl FetchResult {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "FetchResult(frame=<{} bytes>, record_bytes={}, any_error={})",
            self.frame.bind(py).as_bytes().len(),
            self.record_bytes,
            if self.any_error { "True" } else { "False" }
        )
    }
}

/// A partition `LogStore.apply_retention` deleted segments of.
#[pyclass(frozen, get_all, module = "corral._core")]
pub struct RetentionResult {
    pub topic: String,
    pub partition: i32,
    pub segments_deleted: usize,
    pub log_start_offset: i64,
}

#[pymethods]
impl RetentionResult {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let topic = pyo3::types::PyString::new(py, &self.topic).repr()?;
        Ok(format!(
            "RetentionResult(topic={topic}, partition={}, segments_deleted={}, log_start_offset={})",
            self.partition, self.segments_deleted, self.log_start_offset
        ))
    }
}

/// What `validate_batches` found in a client's batches.
#[pyclass(frozen, get_all, module = "corral._core")]
pub struct BatchSummary {
    pub batch_count: usize,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    /// Offsets the batches will take (sum of last_offset_delta + 1).
    pub offset_count: i64,
}

#[pymethods]
impl BatchSummary {
    fn __repr__(&self) -> String {
        format!(
            "BatchSummary(batch_count={}, producer_id={}, producer_epoch={}, base_sequence={}, offset_count={})",
            self.batch_count, self.producer_id, self.producer_epoch, self.base_sequence, self.offset_count
        )
    }
}

impl From<super::batch::Summary> for BatchSummary {
    fn from(s: super::batch::Summary) -> Self {
        BatchSummary {
            batch_count: s.batches,
            producer_id: s.producer_id,
            producer_epoch: s.producer_epoch,
            base_sequence: s.base_sequence,
            offset_count: s.offset_count,
        }
    }
}

/// What `LogStore.clean` did to a partition.
#[pyclass(frozen, get_all, module = "corral._core")]
pub struct CleanResult {
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub records_removed: u64,
    pub segments_before: usize,
    pub segments_after: usize,
    /// The first dirty offset of the next pass.
    pub checkpoint: i64,
    /// Bytes read by the pass (its I/O).
    pub bytes_read: u64,
}

#[pymethods]
impl CleanResult {
    fn __repr__(&self) -> String {
        format!(
            "CleanResult(bytes_before={}, bytes_after={}, records_removed={}, segments_before={}, segments_after={}, checkpoint={}, bytes_read={})",
            self.bytes_before, self.bytes_after, self.records_removed, self.segments_before, self.segments_after, self.checkpoint, self.bytes_read
        )
    }
}

impl From<super::compaction::Cleaned> for CleanResult {
    fn from(c: super::compaction::Cleaned) -> Self {
        CleanResult {
            bytes_before: c.bytes_before,
            bytes_after: c.bytes_after,
            records_removed: c.records_removed,
            segments_before: c.segments_before,
            segments_after: c.segments_after,
            checkpoint: c.checkpoint,
            bytes_read: c.bytes_read,
        }
    }
}
