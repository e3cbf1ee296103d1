//! OffsetCommit's short path (short_paths/mod.rs): the steady-state write of every consumer,
//! decoded where it is read and checked partition by partition in the core.
//!
//! Python gets the Rust struct as an `OffsetCommitRequest`: it reads the header fields, decides
//! the group-level answer (generation, member: the coordinator's rules), and hands the partition
//! counts of the named topics to `OffsetCommitRequest.split`, which applies Kafka's per-partition
//! checks in one pass and returns what to write (the tuples `offset_commit_batch` and the offset
//! map take) and an `OffsetCommitAnswer` that encodes the response once the write is durable. No
//! dict is built either way.
//!
//! The network thread judges, from the views, whether the group would accept the commit, and
//! then offers it to the commit path (commit_path.rs), which writes and answers the ones it can
//! take without Python (docs/offset-commit-short-path.md).

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse, TopicName};
use kafka_protocol::protocol::{Encodable, HeaderVersion};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use crate::codec::header;
use crate::short_paths::commit_path::{ReplyTo, Took};
use crate::short_paths::{short_path_request, Sender, ShortPath, Views};
use kafka_protocol::ResponseError;

const NONE: i16 = 0;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = ResponseError::UnknownTopicOrPartition.code();
const OFFSET_METADATA_TOO_LARGE: i16 = ResponseError::OffsetMetadataTooLarge.code();

short_path_request! {
    /// A decoded OffsetCommit (Python: `OffsetCommitRequest`). Fields a version lacks have their
    /// schema default (no instance id, -1).
    OffsetCommit, "OffsetCommitRequest", OffsetCommitRequest
}

impl ShortPath for OffsetCommit {
    /// Counts the commit as takeable (on the view that accepts it) when a view says the group
    /// accepts it; always None (the network thread then offers it to the commit path, `take`).
    fn answer(&self, views: &Views, _sender: &Sender<'_>) -> Option<(Bytes, i16)> {
        match self.accepting_view(views) {
            Some(Accepting::Classic) => views.heartbeat.as_ref()?.get().count_takeable(),
            Some(Accepting::Consumer) => views.consumer_heartbeat.as_ref()?.get().count_takeable(),
            None => {}
        }
        None
    }
}

enum Accepting {
    Classic,
    Consumer,
}

impl OffsetCommit {
    /// The view that says the coordinator accepts the commit at the member's generation or
    /// epoch. None: neither, or not a commit the views judge (v2-4 may carry a retention time;
    /// a "simple" commit, -1, may create its group).
    fn accepting_view(&self, views: &Views) -> Option<Accepting> {
        let c = &self.body;
        if self.api_version < 5
            || c.group_id.is_empty()
            || c.member_id.is_empty()
            || c.generation_id_or_member_epoch < 0
        {
            return None;
        }
        let instance_id = c.group_instance_id.as_deref();
        let epoch = c.generation_id_or_member_epoch;
        if views.heartbeat.as_ref().is_some_and(|v| {
            v.get()
                .commit_verdict(&c.group_id, &c.member_id, instance_id, epoch)
        }) {
            return Some(Accepting::Classic);
        }
        let consumer = views.consumer_heartbeat.as_ref();
        consumer
            .is_some_and(|v| {
                v.get()
                    .commit_verdict(&c.group_id, &c.member_id, epoch, self.api_version)
            })
            .then_some(Accepting::Consumer)
    }

    /// Offers the commit to the commit path (commit_path.rs), which writes and answers it
    /// without Python when the group accepts all of it; None: Python answers. The views are
    /// asked again under the path's lock (a group being deleted meanwhile refuses).
    pub fn take(&self, views: &Views, connection: u64) -> Option<Took> {
        let path = views.commit_path.as_ref()?.get();
        let to = ReplyTo {
            connection,
            api_version: self.api_version,
            correlation_id: self.correlation_id,
        };
        path.take(&self.body, to, || self.accepting_view(views).is_some())
    }
}

#[pymethods]
impl OffsetCommit {
    #[getter]
    fn group_id(&self) -> &str {
        &self.body.group_id
    }

    #[getter]
    fn member_id(&self) -> &str {
        &self.body.member_id
    }

    /// None before v7 and for dynamic members.
    #[getter]
    fn group_instance_id(&self) -> Option<&str> {
        self.body.group_instance_id.as_deref()
    }

    /// The generation (classic groups) or member epoch (consumer groups); -1 when not given.
    #[getter]
    fn generation_id_or_member_epoch(&self) -> i32 {
        self.body.generation_id_or_member_epoch
    }

    /// v2-4 only; -1 (and every later version): the broker's offsets.retention.minutes.
    #[getter]
    fn retention_time_ms(&self) -> i64 {
        self.body.retention_time_ms
    }

    /// The names of the topics committed to, in request order.
    #[getter]
    fn topic_names(&self) -> Vec<&str> {
        self.body.topics.iter().map(|t| t.name.as_str()).collect()
    }

    /// Kafka's per-partition checks, in one pass: UNKNOWN_TOPIC_OR_PARTITION outside the topic's
    /// partitions (`partition_counts`: topic name -> its partition count, 0 or absent for an
    /// unknown topic), else `group_error`, else OFFSET_METADATA_TOO_LARGE, else accepted. Returns
    /// ([(topic, [(partition, offset, leader_epoch, metadata)])] for the accepted ones, the
    /// `OffsetCommitAnswer` to send).
    fn split<'py>(
        &self,
        py: Python<'py>,
        partition_counts: &Bound<'py, PyDict>,
        group_error: i16,
        metadata_max_bytes: usize,
    ) -> PyResult<(Bound<'py, PyList>, OffsetCommitAnswer)> {
        let accepted = PyList::empty(py);
        let mut codes = Vec::with_capacity(self.body.topics.len());
        for topic in &self.body.topics {
            let count: i64 = match partition_counts.get_item(topic.name.as_str())? {
                Some(count) => count.extract()?,
                None => 0,
            };
            let mut ok = Vec::new();
            let mut topic_codes = Vec::with_capacity(topic.partitions.len());
            for p in &topic.partitions {
                let metadata = p.committed_metadata.as_deref().unwrap_or("");
                let code = if p.partition_index < 0 || p.partition_index as i64 >= count {
                    UNKNOWN_TOPIC_OR_PARTITION
                } else if group_error != NONE {
                    group_error
                } else if metadata_too_large(metadata, metadata_max_bytes) {
                    OFFSET_METADATA_TOO_LARGE
                } else {
                    NONE
                };
                if code == NONE {
                    ok.push((
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch,
                        metadata,
                    ));
                }
                topic_codes.push((p.partition_index, code));
            }
            if !ok.is_empty() {
                let name = topic.name.as_str().into_pyobject(py)?.into_any();
                accepted.append(PyTuple::new(py, [name, ok.into_pyobject(py)?])?)?;
            }
            codes.push((topic.name.clone(), topic_codes));
        }
        let (api_version, correlation_id) = (self.api_version, self.correlation_id);
        let answer = OffsetCommitAnswer {
            api_version,
            correlation_id,
            codes: Arc::new(codes),
        };
        Ok((accepted, answer))
    }

    fn __repr__(&self) -> String {
        format!(
            "OffsetCommitRequest(group_id={:?}, member_id={:?}, group_instance_id={:?}, \
             generation_id_or_member_epoch={}, topics={})",
            self.body.group_id.as_str(),
            self.body.member_id.as_str(),
            self.body.group_instance_id.as_deref(),
            self.body.generation_id_or_member_epoch,
            self.body.topics.len()
        )
    }
}

/// Kafka measures metadata in UTF-16 code units (Java's String.length()); a UTF-8 length within
/// the limit is always within it, so the count is only made for long metadata.
pub fn metadata_too_large(metadata: &str, max: usize) -> bool {
    metadata.len() > max && metadata.encode_utf16().count() > max
}

/// The per-partition codes of one OffsetCommit, ready to be encoded.
#[pyclass(frozen, module = "corral._core")]
pub struct OffsetCommitAnswer {
    api_version: i16,
    correlation_id: i32,
    codes: Arc<PartitionCodes>,
}

#[pymethods]
impl OffsetCommitAnswer {
    /// The response frame; `write_error` replaces NONE on the accepted partitions when their
    /// write failed.
    #[pyo3(signature = (write_error = 0))]
    fn frame<'py>(&self, py: Python<'py>, write_error: i16) -> PyResult<Bound<'py, PyBytes>> {
        let frame = encode_answer(
            self.api_version,
            self.correlation_id,
            &self.codes,
            write_error,
        )
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(PyBytes::new(py, &frame))
    }
}

/// Per topic, per partition of an OffsetCommit, its error code.
pub type PartitionCodes = Vec<(TopicName, Vec<(i32, i16)>)>;

/// An OffsetCommit response frame: per topic, per partition its code (`write_error` in place of
/// NONE, the accepted partitions' code when their write failed).
pub fn encode_answer(
    api_version: i16,
    correlation_id: i32,
    codes: &PartitionCodes,
    write_error: i16,
) -> anyhow::Result<Bytes> {
    let topics = codes
        .iter()
        .map(|(name, partitions)| {
            OffsetCommitResponseTopic::default()
                .with_name(name.clone())
                .with_partitions(
                    partitions
                        .iter()
                        .map(|&(index, code)| {
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(index)
                                .with_error_code(if code == NONE { write_error } else { code })
                        })
                        .collect(),
                )
        })
        .collect();
    let mut out = BytesMut::with_capacity(64);
    header::begin_response(
        &mut out,
        correlation_id,
        OffsetCommitResponse::header_version(api_version),
    );
    OffsetCommitResponse::default()
        .with_topics(topics)
        .encode(&mut out, api_version)?;
    header::finish_frame(&mut out);
    Ok(out.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_measured_like_java_strings() {
        assert!(!metadata_too_large("", 0));
        assert!(!metadata_too_large("abcd", 4));
        assert!(metadata_too_large("abcde", 4));
        // Four characters, 12 bytes of UTF-8, 4 UTF-16 units: within a limit of 4.
        assert!(!metadata_too_large("日本語字", 4));
        assert!(metadata_too_large("日本語字!", 4));
    }
}
