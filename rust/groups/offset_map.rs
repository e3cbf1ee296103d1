//! Committed offsets of every group: per group, per topic, a vector indexed by partition.
//!
//! Partitions of a topic are dense small integers, so a Vec<Option<Committed>> per (group, topic)
//! is both the most compact and the fastest layout (no per-partition hashing). Commits and fetches
//! take a whole topic's partitions in one call so that Python crosses into Rust once per topic,
//! not once per partition. Classic and KIP-848 groups share this map.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::groups::offset_records;

/// Offset, leader epoch and metadata as OffsetFetch returns them when nothing is committed.
pub const NO_OFFSET: (i64, i32) = (-1, -1);

#[derive(Clone, Debug, PartialEq)]
pub struct Committed {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
    /// Explicit expiry (OffsetCommit v2-4 retention_time_ms); -1 when the broker's retention applies.
    pub expire_timestamp_ms: i64,
}

#[derive(Default)]
pub struct GroupOffsets {
    topics: HashMap<String, Vec<Option<Committed>>>,
}

impl GroupOffsets {
    fn count(&self) -> usize {
        self.topics
            .values()
            .map(|v| v.iter().filter(|c| c.is_some()).count())
            .sum()
    }
}

#[derive(Default)]
pub struct OffsetMap {
    groups: HashMap<String, GroupOffsets>,
}

/// (partition, offset, leader epoch, metadata) as Python passes and receives it.
pub type PartitionOffset = (i32, i64, i32, String);

impl OffsetMap {
    pub fn commit(
        &mut self,
        group: &str,
        topic: &str,
        partitions: Vec<PartitionOffset>,
        commit_ts: i64,
        expire_ts: i64,
    ) {
        let offsets = self.groups.entry(group.to_owned()).or_default();
        let slots = offsets.topics.entry(topic.to_owned()).or_default();
        for (partition, offset, leader_epoch, metadata) in partitions {
            let p = partition as usize;
            if slots.len() <= p {
                slots.resize(p + 1, None);
            }
            slots[p] = Some(Committed {
                offset,
                leader_epoch,
                metadata,
                commit_timestamp_ms: commit_ts,
                expire_timestamp_ms: expire_ts,
            });
        }
    }

    pub fn get(&self, group: &str, topic: &str, partition: i32) -> Option<&Committed> {
        if partition < 0 {
            return None;
        }
        self.groups
            .get(group)?
            .topics
            .get(topic)?
            .get(partition as usize)?
            .as_ref()
    }

    /// Every committed partition of a topic, in partition order.
    pub fn topic_offsets(&self, group: &str, topic: &str) -> Vec<PartitionOffset> {
        let Some(slots) = self.groups.get(group).and_then(|g| g.topics.get(topic)) else {
            return Vec::new();
        };
        slots
            .iter()
            .enumerate()
            .filter_map(|(p, c)| {
                c.as_ref()
                    .map(|c| (p as i32, c.offset, c.leader_epoch, c.metadata.clone()))
            })
            .collect()
    }

    pub fn topics(&self, group: &str) -> Vec<String> {
        let mut names: Vec<String> = match self.groups.get(group) {
            Some(g) => g
                .topics
                .iter()
                .filter(|(_, v)| v.iter().any(Option::is_some))
                .map(|(t, _)| t.clone())
                .collect(),
            None => Vec::new(),
        };
        names.sort();
        names
    }

    /// Removes the given partitions' offsets; returns the partitions that had one.
    pub fn delete(&mut self, group: &str, topic: &str, partitions: &[i32]) -> Vec<i32> {
        let mut removed = Vec::new();
        if let Some(g) = self.groups.get_mut(group) {
            if let Some(slots) = g.topics.get_mut(topic) {
                for &p in partitions {
                    if p >= 0 && (p as usize) < slots.len() && slots[p as usize].take().is_some() {
                        removed.push(p);
                    }
                }
                if slots.iter().all(Option::is_none) {
                    g.topics.remove(topic);
                }
            }
            if g.topics.is_empty() {
                self.groups.remove(group);
            }
        }
        removed
    }

    /// Removes every offset of a group; returns the (topic, partition) pairs removed.
    pub fn delete_group(&mut self, group: &str) -> Vec<(String, i32)> {
        let mut removed = Vec::new();
        if let Some(g) = self.groups.remove(group) {
            for (topic, slots) in g.topics {
                for (p, c) in slots.iter().enumerate() {
                    if c.is_some() {
                        removed.push((topic.clone(), p as i32));
                    }
                }
            }
        }
        removed.sort();
        removed
    }

    /// Kafka's offset expiry (OffsetMetadataManager.cleanupExpiredOffsets): an offset with an explicit
    /// expire timestamp expires then; otherwise once `retention_ms` passed since its base time, which
    /// is `base_ts` when given (the time an Empty classic group became empty) or its commit time.
    /// Topics in `keep_topics` are left alone. Returns the expired (topic, partition) pairs, sorted,
    /// without removing them: their tombstones remove them once durable (groups/offsets.py).
    pub fn expired(
        &self,
        group: &str,
        now_ms: i64,
        retention_ms: i64,
        base_ts: Option<i64>,
        keep_topics: &[String],
    ) -> Vec<(String, i32)> {
        let mut out = Vec::new();
        let Some(g) = self.groups.get(group) else {
            return out;
        };
        for (topic, slots) in &g.topics {
            if keep_topics.iter().any(|k| k == topic) {
                continue;
            }
            for (p, slot) in slots.iter().enumerate() {
                let expired = match slot {
                    Some(c) if c.expire_timestamp_ms >= 0 => now_ms >= c.expire_timestamp_ms,
                    Some(c) => now_ms - base_ts.unwrap_or(c.commit_timestamp_ms) >= retention_ms,
                    None => false,
                };
                if expired {
                    out.push((topic.clone(), p as i32));
                }
            }
        }
        out.sort();
        out
    }

    /// Every committed offset of a group, sorted: (topic, partition, committed).
    pub fn entries(&self, group: &str) -> Vec<(&str, i32, &Committed)> {
        let mut out = Vec::new();
        if let Some(g) = self.groups.get(group) {
            for (topic, slots) in &g.topics {
                for (p, c) in slots.iter().enumerate() {
                    if let Some(c) = c {
                        out.push((topic.as_str(), p as i32, c));
                    }
                }
            }
        }
        out.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        out
    }
}

/// Python's handle on the map. The network thread's commit path (commit_path.rs) applies the
/// commits it wrote to the same map, hence the lock (taken for one call at a time).
#[pyclass(frozen, module = "corral._core", name = "OffsetMap")]
#[derive(Default)]
pub struct PyOffsetMap {
    map: Arc<Mutex<OffsetMap>>,
}

impl PyOffsetMap {
    pub fn shared(&self) -> Arc<Mutex<OffsetMap>> {
        self.map.clone()
    }

    fn lock(&self) -> MutexGuard<'_, OffsetMap> {
        self.map
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[pymethods]
impl PyOffsetMap {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// Commits `partitions` [(partition, offset, leader_epoch, metadata)] of one topic at once.
    #[pyo3(signature = (group, topic, partitions, commit_timestamp_ms, expire_timestamp_ms = -1))]
    fn commit(
        &self,
        group: &str,
        topic: &str,
        partitions: Vec<PartitionOffset>,
        commit_timestamp_ms: i64,
        expire_timestamp_ms: i64,
    ) {
        self.lock().commit(
            group,
            topic,
            partitions,
            commit_timestamp_ms,
            expire_timestamp_ms,
        )
    }

    /// (offset, leader_epoch, metadata) for each asked partition, in order; (-1, -1, "") when none.
    fn fetch(&self, group: &str, topic: &str, partitions: Vec<i32>) -> Vec<(i64, i32, String)> {
        let map = self.lock();
        partitions
            .into_iter()
            .map(|p| match map.get(group, topic, p) {
                Some(c) => (c.offset, c.leader_epoch, c.metadata.clone()),
                None => (NO_OFFSET.0, NO_OFFSET.1, String::new()),
            })
            .collect()
    }

    /// Every committed offset of a group: [(topic, [(partition, offset, leader_epoch, metadata)])].
    fn fetch_all(&self, group: &str) -> Vec<(String, Vec<PartitionOffset>)> {
        let map = self.lock();
        map.topics(group)
            .into_iter()
            .map(|t| {
                let offsets = map.topic_offsets(group, &t);
                (t, offsets)
            })
            .collect()
    }

    fn delete(&self, group: &str, topic: &str, partitions: Vec<i32>) -> Vec<i32> {
        self.lock().delete(group, topic, &partitions)
    }

    fn delete_group(&self, group: &str) -> Vec<(String, i32)> {
        self.lock().delete_group(group)
    }

    fn has_offsets(&self, group: &str) -> bool {
        self.lock().groups.contains_key(group)
    }

    fn count(&self, group: &str) -> usize {
        self.lock().groups.get(group).map_or(0, GroupOffsets::count)
    }

    #[pyo3(signature = (group, now_ms, retention_ms, base_timestamp_ms = None, keep_topics = Vec::new()))]
    fn expired(
        &self,
        group: &str,
        now_ms: i64,
        retention_ms: i64,
        base_timestamp_ms: Option<i64>,
        keep_topics: Vec<String>,
    ) -> Vec<(String, i32)> {
        self.lock()
            .expired(group, now_ms, retention_ms, base_timestamp_ms, &keep_topics)
    }

    /// The group's offsets as `__consumer_offsets` records [(key, value)], for a snapshot.
    fn records<'py>(
        &self,
        py: Python<'py>,
        group: &str,
    ) -> PyResult<Vec<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
        self.lock()
            .entries(group)
            .into_iter()
            .map(|(topic, p, c)| {
                let key = offset_records::offset_key(group, topic, p)?;
                let value = offset_records::offset_value(
                    c.offset,
                    c.leader_epoch,
                    &c.metadata,
                    c.commit_timestamp_ms,
                    c.expire_timestamp_ms,
                )?;
                Ok((PyBytes::new(py, &key), PyBytes::new(py, &value)))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn po(p: i32, o: i64) -> PartitionOffset {
        (p, o, 3, format!("m{p}"))
    }

    #[test]
    fn commit_then_fetch_and_overwrite() {
        let mut m = OffsetMap::default();
        m.commit("g", "t", vec![po(0, 10), po(5, 50)], 1000, -1);
        assert_eq!(m.get("g", "t", 0).unwrap().offset, 10);
        assert_eq!(m.get("g", "t", 5).unwrap().metadata, "m5");
        assert!(m.get("g", "t", 3).is_none());
        assert!(m.get("g", "t", 99).is_none());
        assert!(m.get("g", "t", -1).is_none());
        m.commit("g", "t", vec![po(0, 11)], 2000, -1);
        assert_eq!(m.get("g", "t", 0).unwrap().offset, 11);
        assert_eq!(m.get("g", "t", 0).unwrap().commit_timestamp_ms, 2000);
        assert_eq!(m.topic_offsets("g", "t").len(), 2);
    }

    #[test]
    fn delete_partitions_topics_and_groups() {
        let mut m = OffsetMap::default();
        m.commit("g", "a", vec![po(0, 1), po(1, 2)], 0, -1);
        m.commit("g", "b", vec![po(0, 1)], 0, -1);
        assert_eq!(m.topics("g"), vec!["a", "b"]);
        assert_eq!(m.delete("g", "a", &[1, 7]), vec![1]);
        assert_eq!(m.delete("g", "a", &[0]), vec![0]);
        assert_eq!(m.topics("g"), vec!["b"]);
        assert_eq!(m.delete_group("g"), vec![("b".to_string(), 0)]);
        assert!(m.groups.is_empty());
    }

    #[test]
    fn expiry_follows_kafka_rules() {
        let mut m = OffsetMap::default();
        m.commit("g", "a", vec![po(0, 1)], 1000, -1);
        m.commit("g", "b", vec![po(0, 1)], 5000, -1);
        m.commit("g", "c", vec![po(0, 1)], 1000, 2500);
        // Explicit expiry first.
        assert_eq!(
            m.expired("g", 2500, 10_000, None, &[]),
            vec![("c".to_string(), 0)]
        );
        m.delete("g", "c", &[0]);
        // Commit-time base: only a is old enough.
        assert_eq!(
            m.expired("g", 11_000, 10_000, None, &[]),
            vec![("a".to_string(), 0)]
        );
        m.delete("g", "a", &[0]);
        // Group-empty base overrides commit time; kept topics stay.
        m.commit("g", "d", vec![po(0, 1)], 100_000, -1);
        assert_eq!(
            m.expired("g", 100_001, 10_000, Some(0), &["d".to_string()]),
            vec![("b".to_string(), 0)]
        );
        // Asking removes nothing.
        assert_eq!(m.topics("g"), vec!["b", "d"]);
    }
}
