//! Kafka's wire primitives as the drivers write and read them by hand: flexible requests (header
//! v2), compact and classic strings, tagged fields, and the ApiVersions v3 handshake.

pub const API_VERSIONS: i16 = 18;
pub const API_VERSIONS_V: i16 = 3;

pub struct Writer(pub Vec<u8>);

impl Writer {
    pub fn i8(&mut self, v: i8) {
        self.0.push(v as u8);
    }
    pub fn i16(&mut self, v: i16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    pub fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    pub fn uvarint(&mut self, mut v: u32) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    pub fn compact_str(&mut self, s: &str) {
        self.uvarint(s.len() as u32 + 1);
        self.0.extend_from_slice(s.as_bytes());
    }
    pub fn compact_nullable_str(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.compact_str(s),
            None => self.uvarint(0),
        }
    }
    pub fn compact_bytes(&mut self, b: &[u8]) {
        self.uvarint(b.len() as u32 + 1);
        self.0.extend_from_slice(b);
    }
    pub fn no_tags(&mut self) {
        self.uvarint(0);
    }
    /// A classic (non-flexible) string: int16 length.
    pub fn str16(&mut self, s: Option<&str>) {
        match s {
            Some(s) => {
                self.i16(s.len() as i16);
                self.0.extend_from_slice(s.as_bytes());
            }
            None => self.i16(-1),
        }
    }
}

/// A request frame (size prefix included) with request header v2.
pub fn request(
    api_key: i16,
    version: i16,
    correlation_id: i32,
    client_id: &str,
    body: impl FnOnce(&mut Writer),
) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(128));
    w.i32(0); // size, filled below
    w.i16(api_key);
    w.i16(version);
    w.i32(correlation_id);
    w.str16(Some(client_id)); // the header's client id stays a classic string in v2
    w.no_tags();
    body(&mut w);
    let size = (w.0.len() - 4) as i32;
    w.0[..4].copy_from_slice(&size.to_be_bytes());
    w.0
}

/// ApiVersions v3, the first request on every connection; the drivers' client id is also their
/// client software name.
pub fn api_versions(correlation_id: i32, client_id: &str) -> Vec<u8> {
    request(
        API_VERSIONS,
        API_VERSIONS_V,
        correlation_id,
        client_id,
        |w| {
            w.compact_str(client_id); // client_software_name
            w.compact_str(env!("CARGO_PKG_VERSION"));
            w.no_tags();
        },
    )
}

pub type Parse<T> = Result<T, String>;

pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data, pos: 0 }
    }
    pub fn take(&mut self, n: usize) -> Parse<&'a [u8]> {
        if self.data.len() - self.pos < n {
            return Err(format!("truncated at byte {} (wanted {n} more)", self.pos));
        }
        let out = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }
    pub fn i8(&mut self) -> Parse<i8> {
        Ok(self.take(1)?[0] as i8)
    }
    pub fn i16(&mut self) -> Parse<i16> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into().unwrap()))
    }
    pub fn i32(&mut self) -> Parse<i32> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().unwrap()))
    }
    pub fn uvarint(&mut self) -> Parse<u32> {
        let mut v: u32 = 0;
        for shift in (0..35).step_by(7) {
            let b = self.take(1)?[0];
            v |= ((b & 0x7f) as u32) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint too long".into())
    }
    fn utf8(b: &'a [u8]) -> Parse<&'a str> {
        std::str::from_utf8(b).map_err(|e| e.to_string())
    }
    pub fn compact_nullable_str(&mut self) -> Parse<Option<&'a str>> {
        match self.uvarint()? {
            0 => Ok(None),
            n => Self::utf8(self.take(n as usize - 1)?).map(Some),
        }
    }
    pub fn compact_str(&mut self) -> Parse<&'a str> {
        self.compact_nullable_str()?
            .ok_or_else(|| "null string".to_string())
    }
    pub fn compact_bytes(&mut self) -> Parse<&'a [u8]> {
        match self.uvarint()? {
            0 => Ok(&[]),
            n => self.take(n as usize - 1),
        }
    }
    pub fn compact_len(&mut self) -> Parse<usize> {
        Ok((self.uvarint()? as usize).saturating_sub(1))
    }
    pub fn skip_tags(&mut self) -> Parse<()> {
        for _ in 0..self.uvarint()? {
            self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.take(size)?;
        }
        Ok(())
    }
    /// A classic (non-flexible) string: int16 length, -1 for null.
    pub fn str16(&mut self) -> Parse<Option<&'a str>> {
        match self.i16()? {
            n if n < 0 => Ok(None),
            n => Self::utf8(self.take(n as usize)?).map(Some),
        }
    }
}

/// The correlation id of a response frame (size prefix removed).
pub fn correlation_id(frame: &[u8]) -> Parse<i32> {
    Reader::new(frame).i32()
}

/// Reader positioned at the body of a flexible response (header v1: correlation id, tags).
pub fn flexible_body(frame: &[u8]) -> Parse<Reader<'_>> {
    let mut r = Reader::new(frame);
    r.i32()?;
    r.skip_tags()?;
    Ok(r)
}

/// ApiVersions v3 answer (response header v0): error code and each API's highest version.
pub fn api_versions_answer(frame: &[u8]) -> Parse<(i16, Vec<(i16, i16)>)> {
    let mut r = Reader::new(frame);
    r.i32()?;
    let error = r.i16()?;
    if error != 0 {
        return Ok((error, Vec::new()));
    }
    let mut apis = Vec::new();
    for _ in 0..r.compact_len()? {
        let key = r.i16()?;
        r.i16()?;
        let max = r.i16()?;
        r.skip_tags()?;
        apis.push((key, max));
    }
    Ok((error, apis))
}
