//! What only `corral analyze` uses: segment files of a data directory decoded into columns
//! (decode_columns.rs), without a broker.

mod decode_columns;

use pyo3::prelude::*;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(decode_columns::decode_offset_commits, m)?)?;
    m.add_function(wrap_pyfunction!(
        decode_columns::decode_analytics_records,
        m
    )?)?;
    Ok(())
}
