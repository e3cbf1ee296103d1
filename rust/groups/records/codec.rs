//! Encodes and decodes a record's key and value from the schema table (schema.rs), in Kafka's
//! encodings: a key is `[int16 type][struct]`, never flexible; a value is `[int16 version]
//! [struct]`, flexible from the type's `flexible_from`. Non-flexible: int16-length strings,
//! int32-length bytes and int32-counted arrays (-1: null). Flexible: compact strings, bytes and
//! arrays (unsigned varint length + 1, 0: null), a nullable struct behind a marker (0: null, 1),
//! and a tagged-field section after every struct, where a tagged field equal to its default is
//! left out, as Kafka's generated code does.

use super::schema::{Field, RecordType, Ty};

/// A field's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Int(i64),
    Str(Option<String>),
    Bytes(Option<Vec<u8>>),
    Uuid([u8; 16]),
    Array(Option<Vec<Value>>),
    Struct(Option<Vec<Value>>),
}

/// What a field holds where its version does not have it, or its tag is absent.
pub fn default(f: &Field) -> Value {
    match f.ty {
        Ty::Int8 | Ty::Int16 | Ty::Int32 | Ty::Int64 => Value::Int(f.default),
        Ty::String if f.nullable => Value::Str(None),
        Ty::String => Value::Str(Some(String::new())),
        Ty::Bytes => Value::Bytes(Some(Vec::new())),
        Ty::Uuid => Value::Uuid([0; 16]),
        Ty::Array(_) => Value::Array(Some(Vec::new())),
        Ty::Struct(fields) => Value::Struct(Some(fields.iter().map(default).collect())),
    }
}

/// Whether `value` is `default(f)`, without building it: a tagged field equal to its default is
/// left out, and encoding asks for every tagged field of every struct.
pub fn is_default(f: &Field, value: &Value) -> bool {
    match (&f.ty, value) {
        (Ty::Int8 | Ty::Int16 | Ty::Int32 | Ty::Int64, Value::Int(v)) => *v == f.default,
        (Ty::String, Value::Str(s)) if f.nullable => s.is_none(),
        (Ty::String, Value::Str(s)) => s.as_deref() == Some(""),
        (Ty::Bytes, Value::Bytes(b)) => b.as_ref().is_some_and(|b| b.is_empty()),
        (Ty::Uuid, Value::Uuid(id)) => *id == [0; 16],
        (Ty::Array(_), Value::Array(items)) => items.as_ref().is_some_and(|i| i.is_empty()),
        (Ty::Struct(fields), Value::Struct(Some(values))) => {
            fields.iter().zip(values).all(|(f, v)| is_default(f, v))
        }
        _ => false,
    }
}

fn present(f: &Field, version: i16) -> bool {
    f.versions.0 <= version && version <= f.versions.1
}

// ------------------------------------------------------------------------------------ writing

fn put_uvarint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7F) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn put_length(
    out: &mut Vec<u8>,
    n: Option<usize>,
    flexible: bool,
    wide: bool,
) -> Result<(), String> {
    match (flexible, n) {
        (true, None) => out.push(0),
        (true, Some(n)) => put_uvarint(out, n as u64 + 1),
        (false, None) if wide => out.extend_from_slice(&(-1i32).to_be_bytes()),
        (false, None) => out.extend_from_slice(&(-1i16).to_be_bytes()),
        (false, Some(n)) if wide => out.extend_from_slice(
            &i32::try_from(n)
                .map_err(|_| "too long".to_string())?
                .to_be_bytes(),
        ),
        (false, Some(n)) => out.extend_from_slice(
            &i16::try_from(n)
                .map_err(|_| format!("a string of {n} bytes is over 32767"))?
                .to_be_bytes(),
        ),
    }
    Ok(())
}

fn wrong(f: &str, ty: &Ty, value: &Value) -> String {
    format!("field {f}: {value:?} is not a {ty:?}")
}

fn put_value(
    out: &mut Vec<u8>,
    name: &str,
    ty: &Ty,
    nullable: bool,
    value: &Value,
    version: i16,
    flexible: bool,
) -> Result<(), String> {
    let null_refused = || format!("field {name} is not nullable");
    match (ty, value) {
        (Ty::Int8, Value::Int(v)) => {
            out.push(i8::try_from(*v).map_err(|_| wrong(name, ty, value))? as u8)
        }
        (Ty::Int16, Value::Int(v)) => out.extend_from_slice(
            &i16::try_from(*v)
                .map_err(|_| wrong(name, ty, value))?
                .to_be_bytes(),
        ),
        (Ty::Int32, Value::Int(v)) => out.extend_from_slice(
            &i32::try_from(*v)
                .map_err(|_| wrong(name, ty, value))?
                .to_be_bytes(),
        ),
        (Ty::Int64, Value::Int(v)) => out.extend_from_slice(&v.to_be_bytes()),
        (Ty::Uuid, Value::Uuid(id)) => out.extend_from_slice(id),
        (Ty::String, Value::Str(s)) => {
            if s.is_none() && !nullable {
                return Err(null_refused());
            }
            put_length(out, s.as_ref().map(|s| s.len()), flexible, false)?;
            if let Some(s) = s {
                out.extend_from_slice(s.as_bytes());
            }
        }
        (Ty::Bytes, Value::Bytes(b)) => {
            if b.is_none() && !nullable {
                return Err(null_refused());
            }
            put_length(out, b.as_ref().map(|b| b.len()), flexible, true)?;
            if let Some(b) = b {
                out.extend_from_slice(b);
            }
        }
        (Ty::Array(item), Value::Array(items)) => {
            if items.is_none() && !nullable {
                return Err(null_refused());
            }
            put_length(out, items.as_ref().map(|i| i.len()), flexible, true)?;
            for v in items.iter().flatten() {
                put_value(out, name, item, false, v, version, flexible)?;
            }
        }
        (Ty::Struct(fields), Value::Struct(values)) => match values {
            None if nullable && flexible => out.push(0),
            None => return Err(null_refused()),
            Some(values) => {
                if nullable {
                    out.push(1);
                }
                put_struct(out, fields, values, version, flexible)?;
            }
        },
        _ => return Err(wrong(name, ty, value)),
    }
    Ok(())
}

/// `values`: one per field of `fields` (those the version lacks are not written).
pub fn put_struct(
    out: &mut Vec<u8>,
    fields: &[Field],
    values: &[Value],
    version: i16,
    flexible: bool,
) -> Result<(), String> {
    if values.len() != fields.len() {
        return Err(format!(
            "{} fields for a struct of {}",
            values.len(),
            fields.len()
        ));
    }
    let mut tagged = Vec::new();
    for (f, v) in fields.iter().zip(values) {
        if !present(f, version) {
            continue;
        }
        match f.tag {
            None => put_value(out, f.name, &f.ty, f.nullable, v, version, flexible)?,
            Some(tag) if flexible && !is_default(f, v) => {
                let mut data = Vec::new();
                put_value(&mut data, f.name, &f.ty, f.nullable, v, version, true)?;
                tagged.push((tag, data));
            }
            Some(_) => {}
        }
    }
    if flexible {
        put_uvarint(out, tagged.len() as u64);
        for (tag, data) in tagged {
            put_uvarint(out, tag as u64);
            put_uvarint(out, data.len() as u64);
            out.extend_from_slice(&data);
        }
    }
    Ok(())
}

/// A key: its type, then its fields.
pub fn encode_key(kind: i16, t: &RecordType, values: &[Value]) -> Result<Vec<u8>, String> {
    let mut out = kind.to_be_bytes().to_vec();
    put_struct(&mut out, t.key, values, 0, false)?;
    Ok(out)
}

/// A value: its version, then its fields in that version.
pub fn encode_value(t: &RecordType, version: i16, values: &[Value]) -> Result<Vec<u8>, String> {
    if version < t.value_versions.0 || version > t.value_versions.1 {
        return Err(format!(
            "value version {version} is not in {:?}",
            t.value_versions
        ));
    }
    let mut out = version.to_be_bytes().to_vec();
    put_struct(&mut out, t.value, values, version, t.flexible(version))?;
    Ok(out)
}

// ------------------------------------------------------------------------------------ reading

/// Reads a key or value's bytes; every read past the end is an error, never a panic.
pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

const TRUNCATED: &str = "truncated record";

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data, pos: 0 }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&end| end <= self.data.len());
        let end = end.ok_or(TRUNCATED)?;
        let out = &self.data[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    pub fn i16(&mut self) -> Result<i16, String> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    fn uvarint(&mut self) -> Result<u64, String> {
        let mut n = 0u64;
        for shift in (0..35).step_by(7) {
            let b = self.take(1)?[0];
            n |= u64::from(b & 0x7F) << shift;
            if b < 0x80 {
                return Ok(n);
            }
        }
        Err("varint too long".into())
    }

    /// A length: None for null.
    fn length(&mut self, flexible: bool, wide: bool) -> Result<Option<usize>, String> {
        let n = match (flexible, wide) {
            (true, _) => self.uvarint()? as i64 - 1,
            (false, true) => i64::from(i32::from_be_bytes(self.array()?)),
            (false, false) => i64::from(self.i16()?),
        };
        Ok(usize::try_from(n).ok())
    }

    fn value<B: Build>(
        &mut self,
        b: &B,
        ty: &Ty,
        nullable: bool,
        version: i16,
        flexible: bool,
    ) -> Result<B::Out, String> {
        match ty {
            Ty::Int8 => b.int(i64::from(self.take(1)?[0] as i8)),
            Ty::Int16 => b.int(i64::from(i16::from_be_bytes(self.array()?))),
            Ty::Int32 => b.int(i64::from(i32::from_be_bytes(self.array()?))),
            Ty::Int64 => b.int(i64::from_be_bytes(self.array()?)),
            Ty::Uuid => b.uuid(&self.array()?),
            Ty::String => match self.length(flexible, false)? {
                None => b.str(None),
                Some(n) => b.str(Some(
                    std::str::from_utf8(self.take(n)?)
                        .map_err(|_| "a string is not UTF-8".to_string())?,
                )),
            },
            Ty::Bytes => match self.length(flexible, true)? {
                None => b.bytes(None),
                Some(n) => b.bytes(Some(self.take(n)?)),
            },
            Ty::Array(item) => match self.length(flexible, true)? {
                None => b.array(None),
                Some(n) => {
                    // Every item takes a byte at least: a count past the data is truncated.
                    if n > self.data.len() - self.pos {
                        return Err(TRUNCATED.into());
                    }
                    let mut items = Vec::with_capacity(n);
                    for _ in 0..n {
                        items.push(self.value(b, item, false, version, flexible)?);
                    }
                    b.array(Some(items))
                }
            },
            Ty::Struct(fields) => {
                if nullable && flexible && self.take(1)?[0] == 0 {
                    b.structure(None)
                } else {
                    let values = self.read_struct(b, fields, version, flexible)?;
                    b.structure(Some(values))
                }
            }
        }
    }

    /// One value per field of `fields`: the default for those the version lacks or whose tag is
    /// absent. Unknown tags are skipped.
    pub fn read_struct<B: Build>(
        &mut self,
        b: &B,
        fields: &[Field],
        version: i16,
        flexible: bool,
    ) -> Result<Vec<B::Out>, String> {
        let mut values = Vec::with_capacity(fields.len());
        for f in fields {
            values.push(if present(f, version) && f.tag.is_none() {
                self.value(b, &f.ty, f.nullable, version, flexible)?
            } else {
                b.value(&default(f))?
            });
        }
        if flexible {
            for _ in 0..self.uvarint()? {
                let tag = self.uvarint()?;
                let size = self.uvarint()? as usize;
                let data = self.take(size)?;
                let known = fields.iter().position(|f| {
                    f.tag.is_some_and(|t| u64::from(t) == tag) && present(f, version)
                });
                if let Some(i) = known {
                    let f = &fields[i];
                    values[i] = Reader::new(data).value(b, &f.ty, f.nullable, version, true)?;
                }
            }
        }
        Ok(values)
    }
}

/// What the reader builds a record's fields as: `Value`s (`Values`), or Python objects straight
/// from the bytes (python_api.rs), with no `Value` in between.
pub trait Build {
    type Out;
    fn int(&self, v: i64) -> Result<Self::Out, String>;
    /// None: null.
    fn str(&self, s: Option<&str>) -> Result<Self::Out, String>;
    fn bytes(&self, b: Option<&[u8]>) -> Result<Self::Out, String>;
    fn uuid(&self, id: &[u8; 16]) -> Result<Self::Out, String>;
    fn array(&self, items: Option<Vec<Self::Out>>) -> Result<Self::Out, String>;
    fn structure(&self, fields: Option<Vec<Self::Out>>) -> Result<Self::Out, String>;

    /// A `Value` built (a field's default).
    fn value(&self, v: &Value) -> Result<Self::Out, String> {
        let all = |items: &Option<Vec<Value>>| {
            items
                .as_ref()
                .map(|i| {
                    i.iter()
                        .map(|v| self.value(v))
                        .collect::<Result<Vec<_>, _>>()
                })
                .transpose()
        };
        match v {
            Value::Int(i) => self.int(*i),
            Value::Str(s) => self.str(s.as_deref()),
            Value::Bytes(b) => self.bytes(b.as_deref()),
            Value::Uuid(id) => self.uuid(id),
            Value::Array(items) => self.array(all(items)?),
            Value::Struct(fields) => self.structure(all(fields)?),
        }
    }
}

/// Builds `Value`s: the Rust callers' records.
pub struct Values;

impl Build for Values {
    type Out = Value;
    fn int(&self, v: i64) -> Result<Value, String> {
        Ok(Value::Int(v))
    }
    fn str(&self, s: Option<&str>) -> Result<Value, String> {
        Ok(Value::Str(s.map(str::to_owned)))
    }
    fn bytes(&self, b: Option<&[u8]>) -> Result<Value, String> {
        Ok(Value::Bytes(b.map(<[u8]>::to_vec)))
    }
    fn uuid(&self, id: &[u8; 16]) -> Result<Value, String> {
        Ok(Value::Uuid(*id))
    }
    fn array(&self, items: Option<Vec<Value>>) -> Result<Value, String> {
        Ok(Value::Array(items))
    }
    fn structure(&self, fields: Option<Vec<Value>>) -> Result<Value, String> {
        Ok(Value::Struct(fields))
    }
}

/// A key's type and fields; None for a type corral does not know.
pub fn decode_key(key: &[u8]) -> Result<(i16, Option<Vec<Value>>), String> {
    decode_key_as(&Values, key)
}

/// A value's version and fields, as `t` reads them.
pub fn decode_value(t: &RecordType, value: &[u8]) -> Result<(i16, Vec<Value>), String> {
    decode_value_as(&Values, t, value)
}

/// A key's type and its fields as `B` builds them (None: a type corral does not know).
pub type Decoded<B> = (i16, Option<Vec<<B as Build>::Out>>);

/// `decode_key`, the fields built by `b`.
pub fn decode_key_as<B: Build>(b: &B, key: &[u8]) -> Result<Decoded<B>, String> {
    decode_key_in(b, super::schema::RECORD_TYPES, key)
}

/// `decode_key_as` for the record types of one topic's table.
pub fn decode_key_in<B: Build>(
    b: &B,
    table: &[&'static RecordType],
    key: &[u8],
) -> Result<Decoded<B>, String> {
    let mut r = Reader::new(key);
    let kind = r.i16()?;
    let Some(t) = super::schema::record_type_in(table, kind) else {
        return Ok((kind, None));
    };
    Ok((kind, Some(r.read_struct(b, t.key, 0, false)?)))
}

/// `decode_value`, the fields built by `b`.
pub fn decode_value_as<B: Build>(
    b: &B,
    t: &RecordType,
    value: &[u8],
) -> Result<(i16, Vec<B::Out>), String> {
    let mut r = Reader::new(value);
    let version = r.i16()?;
    if version < t.value_versions.0 || version > t.value_versions.1 {
        return Err(format!(
            "record type {} value v{version} is not supported",
            t.types[t.types.len() - 1]
        ));
    }
    Ok((
        version,
        r.read_struct(b, t.value, version, t.flexible(version))?,
    ))
}
