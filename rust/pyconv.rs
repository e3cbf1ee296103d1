//! Conversion between kafka-protocol message structs and plain Python values.
//!
//! Python-owned APIs see a request body as a dict keyed by the schema's field names (snake_case,
//! as in Kafka's JSON schemas) and answer with a dict of the same shape. Fields left out of a
//! response dict take the schema default, so handlers only write what they mean. Scalars map to
//! int/bool/float/str/bytes; UUIDs are 16-byte `bytes`; nullable fields map to None.
//!
//! Each struct's field list comes from `codec/message_fields.rs`, generated from the crate's
//! sources.

use bytes::Bytes;
use kafka_protocol::messages::{BrokerId, GroupId, ProducerId, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use uuid::Uuid;

pub trait ToPy {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>>;
}

pub trait FromPy: Sized {
    fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Self>;
}

macro_rules! scalar {
    ($($t:ty),*) => {$(
        impl ToPy for $t {
            fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                Ok(self.into_pyobject(py)?.to_owned().into_any())
            }
        }
        impl FromPy for $t {
            fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
                obj.extract()
            }
        }
    )*};
}
scalar!(bool, i8, i16, i32, i64, u16, u32, f64);

impl ToPy for StrBytes {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.as_str().into_pyobject(py)?.into_any())
    }
}
impl FromPy for StrBytes {
    fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(StrBytes::from_string(obj.extract::<String>()?))
    }
}

impl ToPy for Bytes {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyBytes::new(py, self).into_any())
    }
}
impl FromPy for Bytes {
    fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        let b = obj
            .cast::<PyBytes>()
            .map_err(|_| PyTypeError::new_err("expected bytes"))?;
        Ok(Bytes::copy_from_slice(b.as_bytes()))
    }
}

impl ToPy for Uuid {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyBytes::new(py, self.as_bytes()).into_any())
    }
}
impl FromPy for Uuid {
    fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        let b = obj
            .cast::<PyBytes>()
            .map_err(|_| PyTypeError::new_err("a UUID is 16 bytes"))?;
        Uuid::from_slice(b.as_bytes()).map_err(|_| PyValueError::new_err("a UUID is 16 bytes"))
    }
}

impl<T: ToPy> ToPy for Option<T> {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Some(v) => v.to_py(py),
            None => Ok(py.None().into_bound(py)),
        }
    }
}
impl<T: FromPy> FromPy for Option<T> {
    fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        if obj.is_none() {
            Ok(None)
        } else {
            T::from_py(obj).map(Some)
        }
    }
}

impl<T: ToPy> ToPy for Vec<T> {
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let list = PyList::empty(py);
        for item in self {
            list.append(item.to_py(py)?)?;
        }
        Ok(list.into_any())
    }
}
impl<T: FromPy> FromPy for Vec<T> {
    fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        let mut out = Vec::with_capacity(obj.len().unwrap_or(0));
        for item in obj.try_iter()? {
            out.push(T::from_py(&item?)?);
        }
        Ok(out)
    }
}

/// kafka-protocol's newtypes (`TopicName(StrBytes)`, `BrokerId(i32)`...) look like their inner value.
macro_rules! newtype {
    ($($t:ident),*) => {$(
        impl ToPy for $t {
            fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                self.0.to_py(py)
            }
        }
        impl FromPy for $t {
            fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
                FromPy::from_py(obj).map($t)
            }
        }
    )*};
}
newtype!(BrokerId, GroupId, ProducerId, TopicName, TransactionalId);

/// A message struct as a dict: `py_struct!(path::Type { rust_field => "python_key", ... })`.
#[macro_export]
macro_rules! py_struct {
    ($t:ty { $($field:ident => $key:literal),* $(,)? }) => {
        impl $crate::pyconv::ToPy for $t {
            fn to_py<'py>(
                &self,
                py: pyo3::Python<'py>,
            ) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::PyAny>> {
                #[allow(unused_imports)]
                use pyo3::types::PyDictMethods;
                let dict = pyo3::types::PyDict::new(py);
                // Interned keys: one Python string per field name for the process, not per use.
                $( dict.set_item(pyo3::intern!(py, $key), $crate::pyconv::ToPy::to_py(&self.$field, py)?)?; )*
                Ok(pyo3::IntoPyObject::into_pyobject(dict, py)?.into_any())
            }
        }
        impl $crate::pyconv::FromPy for $t {
            fn from_py(obj: &pyo3::Bound<'_, pyo3::PyAny>) -> pyo3::PyResult<Self> {
                #[allow(unused_imports)]
                use pyo3::types::PyDictMethods;
                let dict = $crate::pyconv::as_dict(obj, stringify!($t))?;
                #[allow(unused_mut)]
                let mut value = <$t>::default();
                let mut seen = 0usize;
                $(
                    if let Some(v) = dict.get_item(pyo3::intern!(obj.py(), $key))? {
                        value.$field = $crate::pyconv::FromPy::from_py(&v)
                            .map_err(|e| $crate::pyconv::in_field(e, $key))?;
                        seen += 1;
                    }
                )*
                if seen != dict.len() {
                    return Err($crate::pyconv::unknown_keys(&dict, &[$($key),*], stringify!($t)));
                }
                Ok(value)
            }
        }
    };
}

pub fn as_dict<'a, 'py>(
    obj: &'a Bound<'py, PyAny>,
    what: &str,
) -> PyResult<&'a Bound<'py, PyDict>> {
    obj.cast::<PyDict>()
        .map_err(|_| PyTypeError::new_err(format!("{what} must be a dict")))
}

pub fn in_field(err: PyErr, key: &str) -> PyErr {
    Python::attach(|py| PyTypeError::new_err(format!("field {key:?}: {}", err.value(py))))
}

/// A response dict with a key the schema does not have is a bug in the handler: say which key.
pub fn unknown_keys(dict: &Bound<'_, PyDict>, known: &[&str], what: &str) -> PyErr {
    let unknown: Vec<String> = dict
        .keys()
        .iter()
        .filter_map(|k| k.extract::<String>().ok())
        .filter(|k| !known.contains(&k.as_str()))
        .collect();
    PyValueError::new_err(format!("{what} has no field(s) {unknown:?}"))
}
