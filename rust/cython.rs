//! The Cython modules build.rs links in (single-phase init: each returns its module object),
//! registered as private submodules of `_core`.

use pyo3::prelude::*;

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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    register_cython(m, "_assign", PyInit__assign)?;
    register_cython(m, "_lag", PyInit__lag)?;
    Ok(())
}
