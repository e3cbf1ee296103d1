//! Request and response headers, parsed by hand so that an unknown API key or version still
//! yields the correlation id needed to answer (or log) it.
//!
//! v0: api_key, api_version, correlation_id. v1: + client_id (nullable int16 string, even in
//! flexible headers). v2: + tagged fields.

use anyhow::{bail, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::StrBytes;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestPrefix {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
}

/// The first 8 bytes of every request, whatever its header version.
pub fn parse_prefix(frame: &[u8]) -> Result<RequestPrefix> {
    if frame.len() < 8 {
        bail!("request of {} bytes is shorter than a header", frame.len());
    }
    Ok(RequestPrefix {
        api_key: i16::from_be_bytes([frame[0], frame[1]]),
        api_version: i16::from_be_bytes([frame[2], frame[3]]),
        correlation_id: i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]),
    })
}

/// Consumes the header (of the given version) from `body`, returning the client id (a slice of
/// `body`'s buffer, not a copy).
pub fn skip_header(body: &mut Bytes, header_version: i16) -> Result<Option<StrBytes>> {
    body.advance(8.min(body.len()));
    if header_version < 1 {
        return Ok(None);
    }
    if body.remaining() < 2 {
        bail!("truncated client id");
    }
    let len = body.get_i16();
    let client_id = if len < 0 {
        None
    } else {
        let len = len as usize;
        if body.remaining() < len {
            bail!("truncated client id");
        }
        Some(StrBytes::from_utf8(body.split_to(len))?)
    };
    if header_version >= 2 {
        skip_tagged_fields(body)?;
    }
    Ok(client_id)
}

pub fn read_unsigned_varint(buf: &mut Bytes) -> Result<u32> {
    let mut value = 0u32;
    for shift in (0..35).step_by(7) {
        if !buf.has_remaining() {
            bail!("truncated varint");
        }
        let byte = buf.get_u8();
        value |= ((byte & 0x7f) as u32) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    bail!("varint longer than 5 bytes")
}

fn skip_tagged_fields(buf: &mut Bytes) -> Result<()> {
    let count = read_unsigned_varint(buf)?;
    for _ in 0..count {
        read_unsigned_varint(buf)?; // tag
        let size = read_unsigned_varint(buf)? as usize;
        if buf.remaining() < size {
            bail!("truncated tagged field");
        }
        buf.advance(size);
    }
    Ok(())
}

/// Starts a response frame: size placeholder, correlation id and, for header v1, empty tags.
/// `finish_frame` fills the size in once the body is written.
pub fn begin_response(out: &mut BytesMut, correlation_id: i32, header_version: i16) {
    out.put_i32(0);
    out.put_i32(correlation_id);
    if header_version >= 1 {
        out.put_u8(0);
    }
}

/// Starts a request frame with a v1/v2 header.
pub fn begin_request(
    out: &mut BytesMut,
    prefix: &RequestPrefix,
    client_id: Option<&str>,
    header_version: i16,
) {
    out.put_i32(0);
    out.put_i16(prefix.api_key);
    out.put_i16(prefix.api_version);
    out.put_i32(prefix.correlation_id);
    if header_version >= 1 {
        match client_id {
            Some(id) => {
                out.put_i16(id.len() as i16);
                out.put_slice(id.as_bytes());
            }
            None => out.put_i16(-1),
        }
    }
    if header_version >= 2 {
        out.put_u8(0);
    }
}

pub fn finish_frame(out: &mut BytesMut) {
    let size = (out.len() - 4) as i32;
    out[..4].copy_from_slice(&size.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_header_round_trip_v0_v1_v2() {
        for hv in 0..=2 {
            let prefix = RequestPrefix {
                api_key: 18,
                api_version: 3,
                correlation_id: 77,
            };
            let mut out = BytesMut::new();
            begin_request(&mut out, &prefix, Some("me"), hv);
            out.put_u8(0xAB);
            finish_frame(&mut out);
            let mut frame = out.freeze().slice(4..);
            assert_eq!(parse_prefix(&frame).unwrap(), prefix);
            let client = skip_header(&mut frame, hv).unwrap();
            assert_eq!(client.as_deref(), if hv == 0 { None } else { Some("me") });
            assert_eq!(&frame[..], &[0xAB]);
        }
    }

    #[test]
    fn null_client_id_and_tagged_fields_in_a_v2_header() {
        // key 3, v12, correlation 9, client id null, two tagged fields (tag 0: 2 bytes, tag 5: 0 bytes).
        let mut frame = Bytes::from_static(&[
            0, 3, 0, 12, 0, 0, 0, 9, 0xff, 0xff, 2, 0, 2, 0xAA, 0xBB, 5, 0, 0x42,
        ]);
        assert_eq!(skip_header(&mut frame, 2).unwrap(), None);
        assert_eq!(&frame[..], &[0x42]);
    }

    #[test]
    fn varints() {
        assert_eq!(
            read_unsigned_varint(&mut Bytes::from_static(&[0x96, 0x01])).unwrap(),
            150
        );
        assert_eq!(
            read_unsigned_varint(&mut Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x0f])).unwrap(),
            u32::MAX
        );
        assert!(read_unsigned_varint(&mut Bytes::from_static(&[0xff; 6])).is_err());
        assert!(read_unsigned_varint(&mut Bytes::from_static(&[0x80])).is_err());
    }

    #[test]
    fn truncated_headers_are_errors_not_panics() {
        assert!(parse_prefix(&[0, 18, 0]).is_err());
        let mut frame = Bytes::from_static(&[0, 18, 0, 3, 0, 0, 0, 1, 0, 9, b'x']);
        assert!(skip_header(&mut frame, 1).is_err());
        let mut frame = Bytes::from_static(&[0, 18, 0, 3, 0, 0, 0, 1, 0xff, 0xff, 0x80]);
        assert!(skip_header(&mut frame, 2).is_err());
    }
}
