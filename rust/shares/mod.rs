//! Share groups' delivery state (KIP-932): each share partition's in-flight window of records,
//! acquired, acknowledged, released and expired in Rust (in_flight.rs), touched on every
//! ShareFetch and ShareAcknowledge.

pub(crate) mod in_flight;
mod python_api;
#[cfg(test)]
mod tests;

use pyo3::prelude::*;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<python_api::PyShareInFlight>()?;
    m.add_function(wrap_pyfunction!(python_api::batch_bounds, m)?)?;
    Ok(())
}
