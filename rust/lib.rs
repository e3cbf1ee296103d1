//! `corral._core`: the compiled half of corral.
//!
//! Everything that touches bytes or large compact state lives here: the network thread
//! (`reactor`: sockets, framing, the answers it gives without Python), the short paths' table
//! (`fast_paths`: the requests decoded into their Rust struct, never into a dict), request/response
//! headers, the message codec (kafka-protocol's schemas, bridged to Python dicts by `pyconv`), the
//! timer wheel, the offset map, the heartbeat views (classic and consumer groups) and the log store
//! (`log/`).

mod apis;
mod client;
mod commit_path;
mod conn;
mod connection;
mod consumer_epoch_moves;
mod consumer_heartbeat;
mod consumer_heartbeat_view;
mod consumer_protocol;
mod errors;
mod fast_paths;
mod frames;
mod header;
mod heartbeat;
mod heartbeat_view;
mod limits;
mod log;
mod message_fields;
mod offset_commit;
mod offset_map;
mod principal_mapping;
pub mod pyconv;
mod reactor;
mod request_stats;
mod sasl_raw;
mod timer_wheel;
mod tls;

use pyo3::prelude::*;

// The Cython modules build.rs links in (single-phase init: each returns its module object).
extern "C" {
    fn PyInit__assign() -> *mut pyo3::ffi::PyObject;
    fn PyInit__lag() -> *mut pyo3::ffi::PyObject;
}

/// Creates a Cython module through its `PyInit_*` and registers it as `corral._core.<name>`:
/// an attribute of `_core` (not in `__all__`: it is private) and an entry of `sys.modules`, so
/// that `from corral._core._assign import ...` works.
fn register_cython(
    m: &Bound<'_, PyModule>,
    name: &str,
    init: unsafe extern "C" fn() -> *mut pyo3::ffi::PyObject,
) -> PyResult<()> {
    let py = m.py();
    // SAFETY: PyInit_* follows the CPython module-init contract: a new reference or NULL with an
    // exception set; we hold the GIL.
    let module = unsafe { Bound::from_owned_ptr_or_err(py, init())? };
    let qualified = format!("corral._core.{name}");
    // Cython names the module object by its last component only.
    module.setattr("__name__", &qualified)?;
    m.setattr(name, &module)?;
    py.import("sys")?
        .getattr("modules")?
        .set_item(qualified, &module)?;
    Ok(())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<connection::ApiTable>()?;
    m.add_class::<connection::Connection>()?;
    m.add_class::<connection::Request>()?;
    fast_paths::register(m)?;
    m.add_class::<offset_commit::OffsetCommitAnswer>()?;
    m.add_class::<client::Frames>()?;
    m.add(
        "ProtocolError",
        m.py().get_type::<connection::ProtocolError>(),
    )?;
    m.add_function(wrap_pyfunction!(client::encode_request, m)?)?;
    m.add_function(wrap_pyfunction!(client::decode_response, m)?)?;
    m.add_function(wrap_pyfunction!(client::codec_versions, m)?)?;
    m.add_function(wrap_pyfunction!(errors::error_codes, m)?)?;
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
    m.add_class::<reactor::Reactor>()?;
    m.add_class::<tls::TlsServerConfig>()?;
    m.add_class::<principal_mapping::PySslPrincipalMapper>()?;
    m.add_class::<offset_map::PyOffsetMap>()?;
    m.add_class::<commit_path::CommitPath>()?;
    log::register(m)?;
    register_cython(m, "_assign", PyInit__assign)?;
    register_cython(m, "_lag", PyInit__lag)?;
    Ok(())
}
