//! The client side of the codec: `corral load` and the tests speak raw Kafka frames through it.

use bytes::{Bytes, BytesMut};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::codec::apis;
use crate::codec::frames::FrameSplitter;
use crate::codec::header::{self, RequestPrefix};
use crate::codec::requests::ProtocolError;

/// Encodes a request frame (size prefix, header of the right version, body).
#[pyfunction]
#[pyo3(signature = (api_key, api_version, correlation_id, body, client_id = None))]
pub fn encode_request<'py>(
    py: Python<'py>,
    api_key: i16,
    api_version: i16,
    correlation_id: i32,
    body: &Bound<'py, PyAny>,
    client_id: Option<&str>,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut out = BytesMut::with_capacity(128);
    let prefix = RequestPrefix {
        api_key,
        api_version,
        correlation_id,
    };
    header::begin_request(
        &mut out,
        &prefix,
        client_id,
        apis::request_header_version(api_key, api_version),
    );
    apis::encode_request(api_key, api_version, body, &mut out)?;
    header::finish_frame(&mut out);
    Ok(PyBytes::new(py, &out))
}

/// Decodes a response frame (without its size prefix): returns (correlation_id, body dict).
#[pyfunction]
pub fn decode_response<'py>(
    py: Python<'py>,
    api_key: i16,
    api_version: i16,
    frame: &[u8],
) -> PyResult<(i32, Bound<'py, PyAny>)> {
    if frame.len() < 4 {
        return Err(ProtocolError::new_err("response shorter than its header"));
    }
    let correlation_id = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
    let mut body = Bytes::copy_from_slice(&frame[4..]);
    // ApiVersions answers always use header v0, whatever the request version.
    let header_version = if api_key == 18 {
        0
    } else {
        apis::response_header_version(api_key, api_version)
    };
    if header_version >= 1 {
        header::read_unsigned_varint(&mut body)
            .ok()
            .filter(|&n| n == 0)
            .ok_or_else(|| ProtocolError::new_err("unexpected tagged fields in response header"))?;
    }
    let decoded = apis::decode_response(py, api_key, api_version, &mut body)
        .map_err(|e| ProtocolError::new_err(format!("api key {api_key} v{api_version}: {e}")))?;
    Ok((correlation_id, decoded))
}

/// Splits a byte stream into frames (payloads without their size prefix).
#[pyclass(module = "corral._core")]
pub struct Frames {
    inner: FrameSplitter,
}

#[pymethods]
impl Frames {
    #[new]
    fn new(max_frame_bytes: usize) -> Self {
        Frames {
            inner: FrameSplitter::new(max_frame_bytes),
        }
    }

    fn feed<'py>(&mut self, py: Python<'py>, chunk: &[u8]) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        self.inner.push(chunk);
        let mut out = Vec::new();
        loop {
            match self.inner.next_frame() {
                Ok(Some(frame)) => out.push(PyBytes::new(py, &frame)),
                Ok(None) => return Ok(out),
                Err(e) => return Err(ProtocolError::new_err(e.to_string())),
            }
        }
    }
}

/// (min, max) versions the codec supports for an API key, or None.
#[pyfunction]
pub fn codec_versions(api_key: i16) -> Option<(i16, i16)> {
    apis::codec_versions(api_key)
}
