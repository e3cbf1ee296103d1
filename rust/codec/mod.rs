//! Codec and connections: request/response headers and frames, every message body through the
//! kafka-protocol crate's schemas (bridged to Python dicts by `pyconv`), the route a frame takes
//! from bytes to a `Request` (requests.rs), the in-process `Connection`, and the client side used
//! by `corral load` and the codec tests (client.rs).

pub(crate) mod apis;
pub(crate) mod client;
pub(crate) mod connection;
pub(crate) mod errors;
pub(crate) mod frames;
pub(crate) mod header;
mod message_fields;
pub(crate) mod requests;

use pyo3::prelude::*;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<requests::ApiTable>()?;
    m.add_class::<connection::Connection>()?;
    m.add_class::<requests::Request>()?;
    m.add_class::<client::Frames>()?;
    m.add(
        "ProtocolError",
        m.py().get_type::<requests::ProtocolError>(),
    )?;
    m.add_function(wrap_pyfunction!(client::encode_request, m)?)?;
    m.add_function(wrap_pyfunction!(client::decode_response, m)?)?;
    m.add_function(wrap_pyfunction!(client::codec_versions, m)?)?;
    m.add_function(wrap_pyfunction!(errors::error_codes, m)?)?;
    Ok(())
}
