//! The network thread: every client socket off the Python loop (reactor/), each connection's
//! socket-side state (client_socket.rs), and what guards it: connection and memory limits
//! (limits.rs), TLS and mTLS principals (tls.rs, principal_mapping.rs), bare SASL tokens
//! (sasl_raw.rs), and the per-API request metrics (request_stats.rs).

pub(crate) mod client_socket;
pub(crate) mod limits;
pub(crate) mod principal_mapping;
pub(crate) mod reactor;
pub(crate) mod request_stats;
pub(crate) mod sasl_raw;
pub(crate) mod tls;

use pyo3::prelude::*;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<reactor::Reactor>()?;
    m.add_class::<tls::TlsServerConfig>()?;
    m.add_class::<principal_mapping::PySslPrincipalMapper>()?;
    Ok(())
}
