//! The batch functions Python calls outside a log: a produce request's batches checked before
//! an append, the keyless records of a compacted topic's batch, and uncompressed batches built
//! and read back (the coordinator's records, tests).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::results::BatchSummary;
use super::{batch, keys, InvalidBatch};

/// Checks client batches as Kafka does before an append. Returns a BatchSummary (batch count,
/// producer id, producer epoch, base sequence, offsets they will take); raises
/// InvalidBatch(code, message).
#[pyfunction]
fn validate_batches(data: &[u8], max_batch_bytes: usize) -> PyResult<BatchSummary> {
    batch::validate(data, max_batch_bytes)
        .map(BatchSummary::from)
        .map_err(|(code, msg)| InvalidBatch::new_err((code, msg)))
}

/// The indexes of the records without a key in the batch `data` (one batch that validate_batches
/// accepted with `max_batch_bytes`), decompressing it if it is compressed: the check of a
/// compacted topic. Raises InvalidBatch(code, message): MESSAGE_TOO_LARGE when the batch takes
/// more than `max_batch_bytes` uncompressed, INVALID_RECORD when its records cannot be read.
#[pyfunction]
fn keyless_records(py: Python<'_>, data: &[u8], max_batch_bytes: usize) -> PyResult<Vec<i32>> {
    py.detach(|| keys::keyless_records(data, max_batch_bytes))
        .map_err(|(code, msg)| InvalidBatch::new_err((code, msg)))
}

/// An uncompressed RecordBatch v2 of (key, value) records stamped `timestamp_ms`, optionally
/// from an idempotent producer, and `transactional` (a transactional producer's batch).
#[pyfunction]
#[pyo3(signature = (records, timestamp_ms, producer_id=-1, producer_epoch=-1, base_sequence=-1, transactional=false))]
fn build_batch<'py>(
    py: Python<'py>,
    records: Vec<batch::KeyValue>,
    timestamp_ms: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    if records.is_empty() {
        return Err(PyValueError::new_err("a batch needs at least one record"));
    }
    let mut built = batch::build(
        &records,
        timestamp_ms,
        (producer_id, producer_epoch, base_sequence),
    );
    if transactional {
        built[21..23].copy_from_slice(&super::transactions::ATTR_TRANSACTIONAL.to_be_bytes());
        let crc = crc32c::crc32c(&built[21..]);
        built[17..21].copy_from_slice(&crc.to_be_bytes());
    }
    Ok(PyBytes::new(py, &built))
}

/// One batch with its producer fields and attributes replaced and its CRC-32C recomputed: how a
/// coordinator turns a batch it built into a transactional one, or into a marker.
#[pyfunction]
fn restamp_batch<'py>(
    py: Python<'py>,
    data: &[u8],
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    attributes: i16,
) -> PyResult<Bound<'py, PyBytes>> {
    if batch::Header::parse(data).is_none_or(|h| h.size != data.len()) {
        return Err(PyValueError::new_err("not one whole record batch"));
    }
    let mut out = data.to_vec();
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    out[43..51].copy_from_slice(&producer_id.to_be_bytes());
    out[51..53].copy_from_slice(&producer_epoch.to_be_bytes());
    out[53..57].copy_from_slice(&base_sequence.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Ok(PyBytes::new(py, &out))
}

/// The records of consecutive uncompressed batches as (offset, timestamp, key, value).
/// Raises ValueError on a compressed or malformed batch.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn decode_batches(data: &[u8]) -> PyResult<Vec<(i64, i64, Option<Vec<u8>>, Option<Vec<u8>>)>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        let bad = || PyValueError::new_err(format!("no readable uncompressed batch at byte {pos}"));
        let header = batch::Header::parse(&data[pos..]).ok_or_else(bad)?;
        let recs = batch::records(&data[pos..]).ok_or_else(bad)?;
        out.extend(
            recs.into_iter()
                .map(|r| (r.offset, r.timestamp, r.key, r.value)),
        );
        pos += header.size;
    }
    Ok(out)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(validate_batches, m)?)?;
    m.add_function(wrap_pyfunction!(keyless_records, m)?)?;
    m.add_function(wrap_pyfunction!(build_batch, m)?)?;
    m.add_function(wrap_pyfunction!(decode_batches, m)?)?;
    m.add_function(wrap_pyfunction!(restamp_batch, m)?)?;
    Ok(())
}
