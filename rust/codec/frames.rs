//! Splitting a TCP byte stream into Kafka frames (`int32 size` + payload).
//!
//! The buffer only ever holds bytes that actually arrived: a size prefix is checked against the
//! limit (`socket.request.max.bytes`) as soon as its 4 bytes are in, before anything is reserved
//! for the payload, so a peer that claims 2 GiB costs nothing.

use bytes::{Buf, Bytes, BytesMut};

use crate::network::limits::Head;

#[derive(Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The size prefix is negative or above the limit.
    BadSize {
        size: i32,
        max: usize,
        setting: &'static str,
    },
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::BadSize { size, max, setting } => {
                write!(f, "frame size {size} is outside 0..={max} ({setting})")
            }
        }
    }
}

pub struct FrameSplitter {
    buf: BytesMut,
    max: usize,
    /// The setting `max` comes from, named when a frame is refused.
    setting: &'static str,
}

impl FrameSplitter {
    pub fn new(max: usize) -> Self {
        FrameSplitter {
            buf: BytesMut::new(),
            max,
            setting: "socket.request.max.bytes",
        }
    }

    /// Another bound on frame sizes from now on (a SASL connection's, until authenticated).
    pub fn limit(&mut self, max: usize, setting: &'static str) {
        self.max = max;
        self.setting = setting;
    }

    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// Bytes received but not yet returned as a frame.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Whether `next_frame` has something to return: a whole frame, or a size to refuse.
    pub fn has_frame(&self) -> bool {
        if self.buf.len() < 4 {
            return false;
        }
        let size = i32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        size < 0 || size as usize > self.max || self.buf.len() >= 4 + size as usize
    }

    /// What the buffer starts with, for the memory pool.
    pub fn head(&self) -> Head {
        if self.buf.len() < 4 {
            return Head::Unknown {
                buffered: self.buf.len(),
            };
        }
        if self.has_frame() {
            return Head::Complete;
        }
        let size = i32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        Head::Partial {
            frame: 4 + size as usize,
        }
    }

    /// The next whole frame (without its size prefix), if one has fully arrived.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let size = i32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        if size < 0 || size as usize > self.max {
            return Err(FrameError::BadSize {
                size,
                max: self.max,
                setting: self.setting,
            });
        }
        let size = size as usize;
        if self.buf.len() < 4 + size {
            return Ok(None);
        }
        self.buf.advance(4);
        Ok(Some(self.buf.split_to(size).freeze()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut v = (payload.len() as i32).to_be_bytes().to_vec();
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn splits_frames_across_chunk_boundaries() {
        let mut stream = frame(b"hello");
        stream.extend(frame(b""));
        stream.extend(frame(b"world!"));
        let mut s = FrameSplitter::new(1024);
        let mut got = vec![];
        for byte in stream {
            s.push(&[byte]);
            while let Some(f) = s.next_frame().unwrap() {
                got.push(f);
            }
        }
        assert_eq!(got, vec![&b"hello"[..], &b""[..], &b"world!"[..]]);
        assert_eq!(s.buffered(), 0);
    }

    #[test]
    fn rejects_oversized_and_negative_sizes_before_payload_arrives() {
        let mut s = FrameSplitter::new(100);
        s.push(&101i32.to_be_bytes());
        assert_eq!(
            s.next_frame(),
            Err(FrameError::BadSize {
                size: 101,
                max: 100,
                setting: "socket.request.max.bytes"
            })
        );
        let mut s = FrameSplitter::new(100);
        s.push(&(-1i32).to_be_bytes());
        assert!(s.next_frame().is_err());
        let mut s = FrameSplitter::new(usize::MAX >> 1);
        s.push(&i32::MAX.to_be_bytes());
        assert_eq!(s.next_frame(), Ok(None));
        assert!(
            s.buf.capacity() < 1 << 20,
            "no allocation for the claimed size"
        );
    }

    #[test]
    fn a_frame_of_exactly_the_limit_is_accepted() {
        let mut s = FrameSplitter::new(3);
        s.push(&frame(b"abc"));
        assert_eq!(s.next_frame().unwrap().as_deref(), Some(&b"abc"[..]));
        s.push(&frame(b"abcd"));
        assert!(s.next_frame().is_err());
    }

    #[test]
    fn head_tells_the_declared_size_of_a_partial_frame() {
        let mut s = FrameSplitter::new(1000);
        assert_eq!(s.head(), Head::Unknown { buffered: 0 });
        s.push(&[0, 0]);
        assert_eq!(s.head(), Head::Unknown { buffered: 2 });
        s.push(&[0, 10, 1]);
        assert_eq!(s.head(), Head::Partial { frame: 14 });
        s.push(&[0; 9]);
        assert_eq!(s.head(), Head::Complete);
        let mut s = FrameSplitter::new(10);
        s.push(&11i32.to_be_bytes());
        assert_eq!(
            s.head(),
            Head::Complete,
            "a size to refuse is handled at once"
        );
    }

    #[test]
    fn many_frames_in_one_chunk_come_out_in_order() {
        let payloads: Vec<Vec<u8>> = (0..100u8).map(|i| vec![i; i as usize]).collect();
        let mut s = FrameSplitter::new(1024);
        s.push(&payloads.iter().flat_map(|p| frame(p)).collect::<Vec<u8>>());
        for p in &payloads {
            assert_eq!(s.next_frame().unwrap().as_deref(), Some(&p[..]));
        }
        assert_eq!(s.next_frame(), Ok(None));
    }
}
