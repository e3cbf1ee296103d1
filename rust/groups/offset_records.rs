//! Offset records in `__consumer_offsets` (Kafka's OffsetCommitKey v1 and OffsetCommitValue v3,
//! or v1 with an explicit expiry), encoded from the schema table (records/): one OffsetCommit's
//! records built straight into a RecordBatch (per committed partition this was the costliest
//! Python on the commit path), tombstone keys, and the offset map's snapshot records
//! (offset_map.rs).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::records::codec::{self, Value};
use super::records::schema;
use crate::log::batch::{self, KeyValue, NO_PRODUCER};

/// (topic, [(partition, offset, leader epoch, metadata)])
pub type TopicCommits = (String, Vec<(i32, i64, i32, String)>);

/// OffsetCommitKey v1: the record key of one committed partition.
pub fn offset_key(group_id: &str, topic: &str, partition: i32) -> PyResult<Vec<u8>> {
    let fields = [
        Value::Str(Some(group_id.to_owned())),
        Value::Str(Some(topic.to_owned())),
        Value::Int(partition.into()),
    ];
    codec::encode_key(schema::OFFSET_COMMIT_KEY, &schema::OFFSET_COMMIT, &fields)
        .map_err(PyValueError::new_err)
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
    let version = if expire_ms >= 0 { 1 } else { 3 };
    let fields = [
        Value::Int(offset),
        Value::Int(epoch.into()),
        Value::Str(Some(metadata.to_owned())),
        Value::Int(commit_ms),
        Value::Int(expire_ms),
        Value::Uuid([0; 16]),
    ];
    codec::encode_value(&schema::OFFSET_COMMIT, version, &fields).map_err(PyValueError::new_err)
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
