//! The codec as Python sees it (groups/storage/records.py and consumer_records.py keep the named
//! types and build them from these): a record's fields are a tuple in the schema's field order,
//! where an integer is an int, a string a str (None when null), bytes and uuids bytes, an array a
//! tuple and a struct a tuple (None when null). Replay at load decodes every record of the log,
//! so decoding builds these Python values straight from the bytes' fields.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use super::codec::{self, Build, Value};
use super::schema::{self, Field, RecordType, Ty};

fn record_type(table: &[&'static RecordType], kind: i16) -> PyResult<&'static RecordType> {
    schema::record_type_in(table, kind)
        .ok_or_else(|| PyValueError::new_err(format!("record type {kind} is not known")))
}

/// Builds the Python values of a record's fields straight from its bytes.
struct Objects<'py>(Python<'py>);

impl<'py> Objects<'py> {
    fn tuple(&self, items: Option<Vec<Bound<'py, PyAny>>>) -> Result<Bound<'py, PyAny>, String> {
        match items {
            None => Ok(self.0.None().into_bound(self.0)),
            Some(items) => PyTuple::new(self.0, items)
                .map(Bound::into_any)
                .map_err(|e| e.to_string()),
        }
    }
}

impl<'py> Build for Objects<'py> {
    type Out = Bound<'py, PyAny>;
    fn int(&self, v: i64) -> Result<Self::Out, String> {
        v.into_pyobject(self.0)
            .map(Bound::into_any)
            .map_err(|e| e.to_string())
    }
    fn str(&self, s: Option<&str>) -> Result<Self::Out, String> {
        Ok(match s {
            None => self.0.None().into_bound(self.0),
            Some(s) => PyString::new(self.0, s).into_any(),
        })
    }
    fn bytes(&self, b: Option<&[u8]>) -> Result<Self::Out, String> {
        Ok(match b {
            None => self.0.None().into_bound(self.0),
            Some(b) => PyBytes::new(self.0, b).into_any(),
        })
    }
    fn uuid(&self, id: &[u8; 16]) -> Result<Self::Out, String> {
        Ok(PyBytes::new(self.0, id).into_any())
    }
    fn array(&self, items: Option<Vec<Self::Out>>) -> Result<Self::Out, String> {
        self.tuple(items)
    }
    fn structure(&self, fields: Option<Vec<Self::Out>>) -> Result<Self::Out, String> {
        self.tuple(fields)
    }
}

/// The value of field `name` from a Python object: None is null, refused where the field is not
/// nullable; a wrong type is a TypeError.
fn from_py(name: &str, ty: &Ty, nullable: bool, obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    if obj.is_none() {
        return match ty {
            _ if !nullable => Err(null(name)),
            Ty::String => Ok(Value::Str(None)),
            Ty::Bytes => Ok(Value::Bytes(None)),
            Ty::Array(_) => Ok(Value::Array(None)),
            Ty::Struct(_) => Ok(Value::Struct(None)),
            Ty::Int8 | Ty::Int16 | Ty::Int32 | Ty::Int64 | Ty::Uuid => Err(null(name)),
        };
    }
    let wrong = || PyTypeError::new_err(format!("field {name}: {ty:?} expected"));
    let bytes = || {
        obj.cast::<PyBytes>()
            .map(|b| b.as_bytes())
            .map_err(|_| wrong())
    };
    Ok(match ty {
        Ty::Int8 | Ty::Int16 | Ty::Int32 | Ty::Int64 => {
            Value::Int(obj.extract().map_err(|_| wrong())?)
        }
        Ty::String => Value::Str(Some(obj.extract().map_err(|_| wrong())?)),
        Ty::Bytes => Value::Bytes(Some(bytes()?.to_vec())),
        Ty::Uuid => Value::Uuid(
            bytes()?
                .try_into()
                .map_err(|_| PyValueError::new_err(format!("field {name}: a uuid is 16 bytes")))?,
        ),
        Ty::Array(item) => {
            Value::Array(Some(items_from_py(obj, |i| from_py(name, item, false, i))?))
        }
        Ty::Struct(fields) => Value::Struct(Some(struct_from_py(fields, obj)?)),
    })
}

fn null(name: &str) -> PyErr {
    PyTypeError::new_err(format!("field {name} is not nullable"))
}

/// One value per item of a sequence: tuples and lists (what Python hands the codec) without the
/// iterator protocol.
fn items_from_py(
    obj: &Bound<'_, PyAny>,
    mut item: impl FnMut(&Bound<'_, PyAny>) -> PyResult<Value>,
) -> PyResult<Vec<Value>> {
    if let Ok(t) = obj.cast::<PyTuple>() {
        return t.iter().map(|i| item(&i)).collect();
    }
    if let Ok(l) = obj.cast::<PyList>() {
        return l.iter().map(|i| item(&i)).collect();
    }
    obj.try_iter()?.map(|i| item(&i?)).collect()
}

fn struct_from_py(fields: &[Field], obj: &Bound<'_, PyAny>) -> PyResult<Vec<Value>> {
    let mut next = fields.iter();
    let values = items_from_py(obj, |v| match next.next() {
        Some(f) => from_py(f.name, &f.ty, f.nullable, v),
        None => Err(PyValueError::new_err("more fields than the schema's")),
    })?;
    if values.len() != fields.len() {
        return Err(PyValueError::new_err(format!(
            "{} fields expected, {} given",
            fields.len(),
            values.len()
        )));
    }
    Ok(values)
}

/// The key of a record of type `kind`: `fields` in its key schema's order.
#[pyfunction]
pub fn record_key<'py>(
    py: Python<'py>,
    kind: i16,
    fields: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    key_in(py, schema::RECORD_TYPES, kind, fields)
}

/// The value of a record of type `kind` in `version`: `fields` in its value schema's order (one
/// for every field of the schema, those the version lacks included: they are not written).
#[pyfunction]
pub fn record_value<'py>(
    py: Python<'py>,
    kind: i16,
    version: i16,
    fields: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    value_in(py, schema::RECORD_TYPES, kind, version, fields)
}

/// (type, key fields) of a key of the log; the fields are None for a type corral does not know.
/// ValueError for malformed bytes.
#[pyfunction]
pub fn decode_record_key<'py>(
    py: Python<'py>,
    key: &[u8],
) -> PyResult<(i16, Option<Bound<'py, PyAny>>)> {
    decode_key_of(py, schema::RECORD_TYPES, key)
}

/// (version, fields) of the value of a record of type `kind`. ValueError for malformed bytes or
/// a version corral does not read.
#[pyfunction]
pub fn decode_record_value<'py>(
    py: Python<'py>,
    kind: i16,
    value: &[u8],
) -> PyResult<(i16, Bound<'py, PyAny>)> {
    decode_value_of(py, schema::RECORD_TYPES, kind, value)
}

/// `record_key` for `__share_group_state` (ShareSnapshot 0, ShareUpdate 1).
#[pyfunction]
pub fn share_state_key<'py>(
    py: Python<'py>,
    kind: i16,
    fields: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    key_in(py, schema::SHARE_STATE_RECORD_TYPES, kind, fields)
}

/// `record_value` (version 0) for `__share_group_state`.
#[pyfunction]
pub fn share_state_value<'py>(
    py: Python<'py>,
    kind: i16,
    fields: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    value_in(py, schema::SHARE_STATE_RECORD_TYPES, kind, 0, fields)
}

/// `decode_record_key` for `__share_group_state`.
#[pyfunction]
pub fn decode_share_state_key<'py>(
    py: Python<'py>,
    key: &[u8],
) -> PyResult<(i16, Option<Bound<'py, PyAny>>)> {
    decode_key_of(py, schema::SHARE_STATE_RECORD_TYPES, key)
}

/// `decode_record_value` for `__share_group_state`.
#[pyfunction]
pub fn decode_share_state_value<'py>(
    py: Python<'py>,
    kind: i16,
    value: &[u8],
) -> PyResult<(i16, Bound<'py, PyAny>)> {
    decode_value_of(py, schema::SHARE_STATE_RECORD_TYPES, kind, value)
}

fn key_in<'py>(
    py: Python<'py>,
    table: &[&'static RecordType],
    kind: i16,
    fields: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let t = record_type(table, kind)?;
    let values = struct_from_py(t.key, fields)?;
    let key = codec::encode_key(kind, t, &values).map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &key))
}

fn value_in<'py>(
    py: Python<'py>,
    table: &[&'static RecordType],
    kind: i16,
    version: i16,
    fields: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let t = record_type(table, kind)?;
    let values = struct_from_py(t.value, fields)?;
    let value = codec::encode_value(t, version, &values).map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &value))
}

fn decode_key_of<'py>(
    py: Python<'py>,
    table: &[&'static RecordType],
    key: &[u8],
) -> PyResult<(i16, Option<Bound<'py, PyAny>>)> {
    let objects = Objects(py);
    let (kind, fields) =
        codec::decode_key_in(&objects, table, key).map_err(PyValueError::new_err)?;
    let fields = fields
        .map(|f| objects.tuple(Some(f)))
        .transpose()
        .map_err(PyValueError::new_err)?;
    Ok((kind, fields))
}

fn decode_value_of<'py>(
    py: Python<'py>,
    table: &[&'static RecordType],
    kind: i16,
    value: &[u8],
) -> PyResult<(i16, Bound<'py, PyAny>)> {
    let t = record_type(table, kind)?;
    let objects = Objects(py);
    let (version, fields) =
        codec::decode_value_as(&objects, t, value).map_err(PyValueError::new_err)?;
    let fields = objects.tuple(Some(fields)).map_err(PyValueError::new_err)?;
    Ok((version, fields))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(record_key, m)?)?;
    m.add_function(wrap_pyfunction!(record_value, m)?)?;
    m.add_function(wrap_pyfunction!(decode_record_key, m)?)?;
    m.add_function(wrap_pyfunction!(decode_record_value, m)?)?;
    m.add_function(wrap_pyfunction!(share_state_key, m)?)?;
    m.add_function(wrap_pyfunction!(share_state_value, m)?)?;
    m.add_function(wrap_pyfunction!(decode_share_state_key, m)?)?;
    m.add_function(wrap_pyfunction!(decode_share_state_value, m)?)?;
    Ok(())
}
