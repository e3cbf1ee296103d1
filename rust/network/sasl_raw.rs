//! Kafka's SASL flow before KIP-152 (SaslHandshake v0): after the handshake the client sends
//! bare SASL tokens, each a size-prefixed frame with no request header, and reads the server's
//! tokens framed the same way. The network thread turns each token into the SaslAuthenticate v0
//! request the Python handler already understands, and its answer back into a bare token.

use bytes::{BufMut, Bytes, BytesMut};

const SASL_AUTHENTICATE: i16 = 36;

/// A bare token as a SaslAuthenticate v0 request (header v1: key, version 0, correlation id 0,
/// no client id; body: the token as BYTES), without the size prefix, as frames are routed.
pub fn request_of_token(token: &[u8]) -> Bytes {
    let mut request = BytesMut::with_capacity(14 + token.len());
    request.put_i16(SASL_AUTHENTICATE);
    request.put_i16(0);
    request.put_i32(0);
    request.put_i16(-1);
    request.put_i32(token.len() as i32);
    request.put_slice(token);
    request.freeze()
}

/// The token of a SaslAuthenticate v0 answer (a whole frame: size, correlation id, error code,
/// error message, auth bytes) as a bare size-prefixed token. None for a refusal: Kafka closes
/// such a connection without a word (the handler has asked for the close already).
pub fn token_of_answer(frame: &[u8]) -> Option<Bytes> {
    let i16_at = |at: usize| {
        frame
            .get(at..at + 2)
            .map(|b| i16::from_be_bytes([b[0], b[1]]))
    };
    let error = i16_at(8)?;
    if error != 0 {
        return None;
    }
    let message_len = i16_at(10)?;
    let at = 12 + message_len.max(0) as usize;
    let len = frame
        .get(at..at + 4)
        .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))?;
    let token = frame.get(at + 4..at + 4 + len.max(0) as usize)?;
    let mut bare = BytesMut::with_capacity(4 + token.len());
    bare.put_i32(token.len() as i32);
    bare.put_slice(token);
    Some(bare.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(error: i16, message: Option<&str>, token: &[u8]) -> Vec<u8> {
        let mut body = BytesMut::new();
        body.put_i32(7); // correlation id
        body.put_i16(error);
        match message {
            None => body.put_i16(-1),
            Some(m) => {
                body.put_i16(m.len() as i16);
                body.put_slice(m.as_bytes());
            }
        }
        body.put_i32(token.len() as i32);
        body.put_slice(token);
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        frame
    }

    #[test]
    fn a_token_becomes_a_sasl_authenticate_v0_request() {
        let request = request_of_token(b"n,,n=alice,r=abc");
        assert_eq!(&request[..8], &[0, 36, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&request[8..10], &[0xff, 0xff]);
        assert_eq!(&request[10..14], &16i32.to_be_bytes());
        assert_eq!(&request[14..], b"n,,n=alice,r=abc");
    }

    #[test]
    fn an_answer_becomes_a_bare_token() {
        assert_eq!(
            &token_of_answer(&answer(0, None, b"r=abcdef,s=c2FsdA==,i=4096")).unwrap()[..],
            &[&26i32.to_be_bytes()[..], b"r=abcdef,s=c2FsdA==,i=4096"].concat()[..]
        );
        // PLAIN's answer is empty: four zero bytes, as Kafka sends.
        assert_eq!(
            &token_of_answer(&answer(0, Some(""), b"")).unwrap()[..],
            &[0, 0, 0, 0]
        );
    }

    #[test]
    fn a_refusal_or_a_short_frame_is_no_token() {
        assert!(token_of_answer(&answer(58, Some("Authentication failed"), b"")).is_none());
        let whole = answer(0, Some("x"), b"token");
        for cut in 0..whole.len() {
            assert!(token_of_answer(&whole[..cut]).is_none(), "cut at {cut}");
        }
    }
}
