//! `Connection`: one client connection's bytes fed in process, for code that has no socket (the
//! codec tests and benches, the load generator's fake brokers). `feed` a chunk, then drain
//! `next()`, which yields in request order either a finished response frame (`bytes`) or a
//! `Request`; the frames go the network thread's three steps (requests.rs).

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::frames::FrameSplitter;
use super::requests::{
    build_request, receive, route, ApiTable, Identity, ProtocolError, Routed, ANONYMOUS,
};

#[pyclass(module = "corral._core")]
pub struct Connection {
    frames: FrameSplitter,
    table: Py<ApiTable>,
    listener: Arc<str>,
    principal: Arc<str>,
}

#[pymethods]
impl Connection {
    /// `listener` and `principal`: what the `Request`s it yields carry.
    #[new]
    #[pyo3(signature = (table, max_request_bytes, *, listener = "PLAINTEXT", principal = ANONYMOUS))]
    fn new(table: Py<ApiTable>, max_request_bytes: usize, listener: &str, principal: &str) -> Self {
        Connection {
            frames: FrameSplitter::new(max_request_bytes),
            table,
            listener: listener.into(),
            principal: principal.into(),
        }
    }

    /// Buffers received bytes; drain them with `next()`.
    fn feed(&mut self, chunk: &[u8]) {
        self.frames.push(chunk);
    }

    /// The next complete item: response `bytes`, a `Request`, or None when more input is needed.
    fn next<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let frame = match self.frames.next_frame() {
            Ok(Some(frame)) => frame,
            Ok(None) => return Ok(None),
            Err(e) => return Err(ProtocolError::new_err(e.to_string())),
        };
        match route(self.table.get(), frame).map_err(ProtocolError::new_err)? {
            Routed::Answered(_, response, _) => Ok(Some(PyBytes::new(py, &response).into_any())),
            Routed::ToPython(prefix, frame) => {
                let who = Identity {
                    connection: 0,
                    client_host: String::new(),
                    listener: self.listener.clone(),
                    principal: self.principal.clone(),
                };
                let request = build_request(py, receive(prefix, frame), who)?;
                Ok(Some(Bound::new(py, request)?.into_any()))
            }
        }
    }

    /// Bytes received but not yet part of a returned item.
    fn buffered(&self) -> usize {
        self.frames.buffered()
    }
}
