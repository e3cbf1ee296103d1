//! Group coordinator state kept compact in Rust: the timer wheel of deadlines, the codec of every
//! `__consumer_offsets` record (records/), the committed offsets (offset_map.rs) and their records
//! (offset_records.rs), the views the network thread answers heartbeats from (classic and
//! consumer groups), the epoch moves it makes itself, and the embedded consumer protocol of
//! classic "consumer" members.

pub(crate) mod consumer_epoch_moves;
pub(crate) mod consumer_heartbeat_view;
pub(crate) mod consumer_protocol;
pub(crate) mod heartbeat_view;
pub(crate) mod offset_map;
pub(crate) mod offset_records;
pub(crate) mod records;
pub(crate) mod timer_wheel;

use pyo3::prelude::*;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    consumer_protocol::register(m)?;
    m.add_class::<timer_wheel::PyTimerWheel>()?;
    m.add_function(wrap_pyfunction!(timer_wheel::py_monotonic_ms, m)?)?;
    m.add_class::<heartbeat_view::HeartbeatView>()?;
    m.add_class::<consumer_heartbeat_view::ConsumerHeartbeatView>()?;
    m.add_function(wrap_pyfunction!(
        consumer_epoch_moves::adaptive_interval_ms,
        m
    )?)?;
    m.add_function(wrap_pyfunction!(
        consumer_epoch_moves::py_moved_assignment_record,
        m
    )?)?;
    m.add_class::<offset_map::PyOffsetMap>()?;
    m.add_function(wrap_pyfunction!(offset_records::offset_commit_batch, m)?)?;
    m.add_function(wrap_pyfunction!(offset_records::offset_keys, m)?)?;
    records::python_api::register(m)?;
    Ok(())
}
