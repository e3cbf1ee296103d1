//! One OffsetCommit's `__consumer_offsets` records (groups/records.py's `offset_key` and
//! `offset_value`, Kafka's OffsetCommitKey v1 and OffsetCommitValue v3, or v1 with an explicit
//! expiry) built straight into a RecordBatch: per committed partition this was the costliest
//! Python on the commit path.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::batch::{self, KeyValue, NO_PRODUCER};

const OFFSET_COMMIT_KEY: i16 = 1;

/// (topic, [(partition, offset, leader epoch, metadata)])
pub type TopicCommits = (String, Vec<(i32, i64, i32, String)>);

fn put_string(out: &mut Vec<u8>, text: &str) -> PyResult<()> {
    let len = i16::try_from(text.len()).map_err(|_| PyValueError::new_err("string longer than 32767 bytes"))?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(text.as_bytes());
    Ok(())
}

fn records(group_id: &str, topics: &[TopicCommits], commit_ms: i64, expire_ms: i64) -> PyResult<Vec<KeyValue>> {
    let mut out = Vec::new();
    for (topic, partitions) in topics {
        for (partition, offset, epoch, metadata) in partitions {
            let mut key = Vec::with_capacity(10 + group_id.len() + topic.len());
            key.extend_from_slice(&OFFSET_COMMIT_KEY.to_be_bytes());
            put_string(&mut key, group_id)?;
            put_string(&mut key, topic)?;
            key.extend_from_slice(&partition.to_be_bytes());
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
            out.push((Some(key), Some(value)));
        }
    }
    Ok(out)
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
    Ok(PyBytes::new(py, &batch::build(&recs, commit_ms, NO_PRODUCER)))
}
