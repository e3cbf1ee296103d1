//! `ShareInFlight`: one share partition's in-flight window as Python's share partition
//! (src/corral/shares/partition.py) drives it; owners are the group's member numbers.

use pyo3::prelude::*;

use super::in_flight::{InFlight, StateBatch};

#[pyclass(name = "ShareInFlight", module = "corral._core")]
pub struct PyShareInFlight(InFlight);

#[pymethods]
impl PyShareInFlight {
    /// An empty window at `start`, or the window `__share_group_state` kept (`batches`).
    #[new]
    #[pyo3(signature = (start, batches=Vec::new()))]
    fn new(start: i64, batches: Vec<StateBatch>) -> Self {
        PyShareInFlight(InFlight::from_state(start, &batches))
    }

    #[getter]
    fn start(&self) -> i64 {
        self.0.start()
    }

    #[getter]
    fn end(&self) -> i64 {
        self.0.end()
    }

    #[getter]
    fn acquired(&self) -> usize {
        self.0.acquired()
    }

    #[getter]
    fn in_flight(&self) -> usize {
        self.0.in_flight()
    }

    #[getter]
    fn delivery_complete_count(&self) -> usize {
        self.0.delivery_complete_count()
    }

    #[getter]
    fn next_deadline_ms(&self) -> u64 {
        self.0.next_deadline_ms()
    }

    #[getter]
    fn memory_bytes(&self) -> usize {
        self.0.memory_bytes()
    }

    fn next_fetch_offset(&mut self) -> i64 {
        self.0.next_fetch_offset()
    }

    #[allow(clippy::too_many_arguments)]
    fn acquire(
        &mut self,
        owner: u32,
        first: i64,
        last: i64,
        max_records: usize,
        max_locks: usize,
        deadline_ms: u64,
        isolate_from: u16,
    ) -> Vec<(i64, i64, u16)> {
        self.0.acquire(
            owner,
            first,
            last,
            max_records,
            max_locks,
            deadline_ms,
            isolate_from,
        )
    }

    /// (error code, Kafka's message, changed state batches): (0, None, the changes), or the
    /// refusal and no change.
    fn acknowledge(
        &mut self,
        owner: u32,
        batches: Vec<(i64, i64, Vec<i8>)>,
        delivery_limit: u16,
        renew_deadline_ms: u64,
    ) -> (i16, Option<&'static str>, Vec<StateBatch>) {
        match self
            .0
            .acknowledge(owner, &batches, delivery_limit, renew_deadline_ms)
        {
            Ok(changed) => (0, None, changed),
            Err(refusal) => (refusal.code(), Some(refusal.message()), Vec::new()),
        }
    }

    fn release_owner(&mut self, owner: u32, delivery_limit: u16) -> Vec<StateBatch> {
        self.0.release_owner(owner, delivery_limit)
    }

    fn expire(&mut self, now_ms: u64, delivery_limit: u16) -> Vec<StateBatch> {
        self.0.expire(now_ms, delivery_limit)
    }

    fn move_start(&mut self, offset: i64) {
        self.0.move_start(offset)
    }

    fn snapshot(&self) -> Vec<StateBatch> {
        self.0.snapshot()
    }
}

/// The batches of `data` (whole record batches, as a log read returns them): (base offset, last
/// offset, byte position after the batch, producer id, attributes). A truncated tail is left out.
#[pyfunction]
pub fn batch_bounds(data: &[u8]) -> Vec<(i64, i64, usize, i64, i16)> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    // baseOffset int64 at 0, batchLength int32 at 8, attributes int16 at 21, lastOffsetDelta
    // int32 at 23, producerId int64 at 43 (of a v2 batch's 61-byte header).
    while pos + 61 <= data.len() {
        let at = |i: usize, n: usize| &data[pos + i..pos + i + n];
        let base = i64::from_be_bytes(at(0, 8).try_into().expect("8 bytes"));
        let length = i32::from_be_bytes(at(8, 4).try_into().expect("4 bytes"));
        let attributes = i16::from_be_bytes(at(21, 2).try_into().expect("2 bytes"));
        let delta = i32::from_be_bytes(at(23, 4).try_into().expect("4 bytes"));
        let producer = i64::from_be_bytes(at(43, 8).try_into().expect("8 bytes"));
        let end = pos + 12 + length.max(0) as usize;
        if length < 49 || end > data.len() {
            break;
        }
        out.push((base, base + i64::from(delta), end, producer, attributes));
        pos = end;
    }
    out
}
