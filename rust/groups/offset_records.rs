//! The one encoder of offset records in `__consumer_offsets` (Kafka's OffsetCommitKey v1 and
//! OffsetCommitValue v3, or v1 with an explicit expiry): one OffsetCommit's records built straight
//! into a RecordBatch (per committed partition this was the costliest Python on the commit path),
//! tombstone keys, and the offset map's snapshot records (offset_map.rs). Python only decodes them
//! (groups/storage/records.py).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::log::batch::{self, KeyValue, NO_PRODUCER};

const OFFSET_COMMIT_KEY: i16 = 1;

/// (topic, [(partition, offset, leader epoch, metadata)])
pub type TopicCommits = (String, Vec<(i32, i64, i32, String)>);

fn put_string(out: &mut Vec<u8>, text: &str) -> PyResult<()> {
    let len = i16::try_from(text.len())
        .map_err(|_| PyValueError::new_err("string longer than 32767 bytes"))?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(text.as_bytes());
    Ok(())
}

/// OffsetCommitKey v1: the record key of one committed partition.
pub fn offset_key(group_id: &str, topic: &str, partition: i32) -> PyResult<Vec<u8>> {
    let mut key = Vec::with_capacity(10 + group_id.len() + topic.len());
    key.extend_from_slice(&OFFSET_COMMIT_KEY.to_be_bytes());
    put_string(&mut key, group_id)?;
    put_string(&mut key, topic)?;
    key.extend_from_slice(&partition.to_be_bytes());
    Ok(key)
}

/// OffsetCommitValue v3, or v1 when the commit carries an explicit expiry (`expire_ms` >= 0), as
/// Kafka writes them.
pub fn offset_value(
    offset: i64,
    epoch: i32,
    metadata: &str,
    commit_ms: i64,
    expire_ms: i64,
) -> PyResult<Vec<u8>> {
    let mut value = Vec::with_capacity(32 + metadata.len());
    if expire_ms >= 0 {
        value.extend_from_slice(&1i16.to_be_bytes());
        value.extend_from_slice(&offset.to_be_bytes());
        put_string(&mut value, metadata)?;
        value.extend_from_slice(&commit_ms.to_be_bytes());
        value.extend_from_slice(&expire_ms.to_be_bytes());
    } else {
        value.extend_from_slice(&3i16.to_be_bytes());
        value.extend_from_slice(&offset.to_be_bytes());
        value.extend_from_slice(&epoch.to_be_bytes());
        put_string(&mut value, metadata)?;
        value.extend_from_slice(&commit_ms.to_be_bytes());
    }
    Ok(value)
}

fn records(
    group_id: &str,
    topics: &[TopicCommits],
    commit_ms: i64,
    expire_ms: i64,
) -> PyResult<Vec<KeyValue>> {
    let mut out = Vec::new();
    for (topic, partitions) in topics {
        for (partition, offset, epoch, metadata) in partitions {
            let key = offset_key(group_id, topic, *partition)?;
            let value = offset_value(*offset, *epoch, metadata, commit_ms, expire_ms)?;
            out.push((Some(key), Some(value)));
        }
    }
    Ok(out)
}

/// The batch of one group's offset commits, for the network thread's commit path; None when a
/// string is too long for the record format or nothing is committed.
pub fn commit_batch(group_id: &str, topics: &[TopicCommits], commit_ms: i64) -> Option<Vec<u8>> {
    let recs = records(group_id, topics, commit_ms, -1).ok()?;
    (!recs.is_empty()).then(|| batch::build(&recs, commit_ms, NO_PRODUCER))
}

/// The batch (stamped `commit_ms`) of one group's offset commits. `expire_ms` -1: none.
#[pyfunction]
pub fn offset_commit_batch<'py>(
    py: Python<'py>,
    group_id: &str,
    topics: Vec<TopicCommits>,
    commit_ms: i64,
    expire_ms: i64,
) -> PyResult<Bound<'py, PyBytes>> {
    let recs = records(group_id, &topics, commit_ms, expire_ms)?;
    if recs.is_empty() {
        return Err(PyValueError::new_err("a batch needs at least one record"));
    }
    Ok(PyBytes::new(
        py,
        &batch::build(&recs, commit_ms, NO_PRODUCER),
    ))
}

/// The OffsetCommitKey of each (topic, partition) of a group: the keys of its tombstones.
#[pyfunction]
pub fn offset_keys<'py>(
    py: Python<'py>,
    group_id: &str,
    partitions: Vec<(String, i32)>,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    partitions
        .iter()
        .map(|(topic, p)| Ok(PyBytes::new(py, &offset_key(group_id, topic, *p)?)))
        .collect()
}
