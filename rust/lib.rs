//! `corral._core`: the compiled half of corral.
//!
//! Everything that touches bytes or large compact state lives here, one folder per section of
//! the stub (src/corral/_core/__init__.pyi), each registering its own classes and functions:
//!
//! - `codec/`: request/response headers and frames, the message codec (kafka-protocol's schemas,
//!   bridged to Python dicts by `pyconv`), the in-process `Connection`, the client side;
//! - `network/`: the network thread (`reactor/`: sockets, framing, the answers it gives without
//!   Python), its limits, TLS and SASL;
//! - `short_paths/`: the requests decoded into their Rust struct, never into a dict, and answered
//!   or taken without Python when they can be (heartbeats, offset commits);
//! - `groups/`: group coordinator state: timer wheel, offset map and its records, heartbeat views,
//!   the embedded consumer protocol;
//! - `log/`: the log store;
//! - `shares/`: share groups' in-flight records (KIP-932);
//! - `analyze/`: segment files decoded for `corral analyze`;
//! - `cython`: the Cython modules linked in by build.rs.

mod analyze;
mod codec;
mod cython;
mod groups;
mod log;
mod network;
pub mod pyconv;
mod shares;
mod short_paths;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    codec::register(m)?;
    short_paths::register(m)?;
    groups::register(m)?;
    network::register(m)?;
    log::register(m)?;
    shares::register(m)?;
    analyze::register(m)?;
    cython::register(m)?;
    Ok(())
}
