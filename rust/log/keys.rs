//! The key check of compacted topics, as Kafka's LogValidator.validateKey: a topic whose
//! cleanup.policy includes `compact` refuses records without a key (a null key; an empty key is a
//! key). Kafka reads every record of every batch to check it, decompressing compressed ones;
//! corral stores batches as sent and reads records only here, only for compacted topics.
//!
//! A compressed batch is read as a stream (gzip, snappy in Kafka's xerial framing or raw, lz4
//! frames, zstd) and never held whole: the records are walked as they come out, keeping only the
//! indexes of keyless ones. Decompression is bounded: the batch may take at most the topic's
//! max.message.bytes uncompressed (header included), the bound Kafka puts on the batch as sent;
//! one byte more and it is refused MESSAGE_TOO_LARGE (the Java producer splits such a batch and
//! retries), so a small batch that inflates to gigabytes costs at most that much work. Memory is
//! bounded too: gzip keeps a 32 KiB window, lz4 a block of at most 4 MiB, a snappy block is
//! allocated only once its declared length fits what is left of the bound, and a zstd frame may
//! ask for a window of at most max(8 MiB, the bound).

use std::fmt;
use std::io::{self, BufRead, BufReader, Read};

use super::batch::{Header, HEADER_LEN, INVALID_RECORD, MESSAGE_TOO_LARGE};

const CODECS: [&str; 5] = ["none", "gzip", "snappy", "lz4", "zstd"];
const GZIP: i16 = 1;
const SNAPPY: i16 = 2;
const LZ4: i16 = 3;
const ZSTD: i16 = 4;
/// Where the walker reads decompressed records from: large enough that the decoders write whole
/// blocks at a time.
const READ_BUFFER: usize = 32 * 1024;
/// The zstd window every bound allows (2^23 bytes): what Kafka's Java producer asks for with
/// streaming compression at levels up to 19 (20-22 ask for 32-128 MiB).
const ZSTD_MIN_WINDOW_LOG: u32 = 23;
/// zstd's own limit on 64-bit platforms.
const ZSTD_MAX_WINDOW_LOG: u32 = 31;

/// Why the records of a batch could not be checked.
#[derive(Debug)]
enum Bad {
    /// The records take more than the bound uncompressed.
    TooLarge,
    /// The records end before the batch says they do.
    Eof,
    /// The decompressor refused the data.
    Corrupt(String),
    /// The records do not have Kafka's record layout.
    Invalid(String),
}

/// The decompressed output went past the bound (carried through `io::Error` by `Bounded`).
#[derive(Debug)]
struct TooLarge;

impl fmt::Display for TooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("decompressed records exceed the bound")
    }
}

impl std::error::Error for TooLarge {}

impl From<io::Error> for Bad {
    fn from(e: io::Error) -> Bad {
        if e.get_ref().is_some_and(|inner| inner.is::<TooLarge>()) {
            Bad::TooLarge
        } else if e.kind() == io::ErrorKind::UnexpectedEof {
            Bad::Eof
        } else {
            Bad::Corrupt(e.to_string())
        }
    }
}

/// Indexes (within the batch, from 0) of the records of the first batch of `data` that carry no
/// key. `data` holds whole batches that `batch::validate` accepted with `max_batch_bytes`; the
/// batch may take at most `max_batch_bytes` uncompressed. Err carries (Kafka error code, message):
/// MESSAGE_TOO_LARGE past the bound, INVALID_RECORD for records that cannot be read.
pub fn keyless_records(data: &[u8], max_batch_bytes: usize) -> Result<Vec<i32>, (i16, String)> {
    let header = Header::parse(data)
        .filter(|h| h.size <= data.len())
        .ok_or((INVALID_RECORD, "truncated record batch".to_string()))?;
    let records = &data[HEADER_LEN..header.size];
    let count = header.records_count;
    let codec = header.attributes & 0x07;
    let limit = max_batch_bytes.saturating_sub(HEADER_LEN);
    let walked = match codec {
        0 => walk(&mut &records[..], count),
        GZIP => walk_decoded(flate2::bufread::MultiGzDecoder::new(records), limit, count),
        SNAPPY => walk_decoded(Snappy::new(records, limit), limit, count),
        LZ4 => walk_decoded(lz4_flex::frame::FrameDecoder::new(records), limit, count),
        ZSTD => zstd_decoder(records, limit)
            .map_err(Bad::from)
            .and_then(|d| walk_decoded(d, limit, count)),
        _ => {
            return Err((
                INVALID_RECORD,
                format!("Unknown compression type id: {codec}"),
            ))
        }
    };
    walked.map_err(|bad| match bad {
        Bad::TooLarge => (
            MESSAGE_TOO_LARGE,
            format!(
                "The record batch is larger than max.message.bytes {max_batch_bytes} once decompressed \
                 ({}); batches of compacted topics are decompressed to check their keys",
                CODECS[codec as usize]
            ),
        ),
        Bad::Eof => (INVALID_RECORD, "Incorrect declared batch size, premature EOF reached".to_string()),
        Bad::Corrupt(e) => (INVALID_RECORD, format!("Failed to decompress the {} record batch: {e}", CODECS[codec as usize])),
        Bad::Invalid(e) => (INVALID_RECORD, e),
    })
}

pub(super) fn zstd_decoder(
    records: &[u8],
    limit: usize,
) -> io::Result<zstd::stream::read::Decoder<'static, &[u8]>> {
    // The decoder allocates the window a frame asks for before it produces a byte.
    // ceil(log2(limit)): the window that holds the whole bound.
    let needed = usize::BITS - limit.saturating_sub(1).leading_zeros();
    let mut decoder = zstd::stream::read::Decoder::with_buffer(records)?;
    decoder.window_log_max(needed.clamp(ZSTD_MIN_WINDOW_LOG, ZSTD_MAX_WINDOW_LOG))?;
    Ok(decoder)
}

fn walk_decoded<R: Read>(decoder: R, limit: usize, count: i32) -> Result<Vec<i32>, Bad> {
    walk(
        &mut BufReader::with_capacity(
            READ_BUFFER,
            Bounded {
                inner: decoder,
                left: limit,
            },
        ),
        count,
    )
}

/// A reader that fails with `TooLarge` instead of producing more than `left` bytes.
pub(super) struct Bounded<R> {
    pub(super) inner: R,
    pub(super) left: usize,
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.left == 0 {
            // Exactly at the bound is fine if the stream ends here.
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => Err(io::Error::other(TooLarge)),
            };
        }
        let n = buf.len().min(self.left);
        let got = self.inner.read(&mut buf[..n])?;
        self.left -= got;
        Ok(got)
    }
}

/// Walks `count` records (Kafka's v2 record layout) and the end of the stream after them.
fn walk<R: BufRead>(r: &mut R, count: i32) -> Result<Vec<i32>, Bad> {
    let mut keyless = Vec::new();
    for index in 0..count {
        let (size, _) = varint(r, 5)?;
        let size = usize::try_from(size)
            .ok()
            .filter(|&s| s <= i32::MAX as usize)
            .ok_or_else(|| Bad::Invalid(format!("Invalid record size {size} of record {index}")))?;
        byte(r)?; // attributes
        let mut used = 1;
        used += varint(r, 10)?.1; // timestamp delta
        used += varint(r, 5)?.1; // offset delta
        let (key_size, n) = varint(r, 5)?;
        used += n;
        // A negative key size is a null key (Kafka's DefaultRecord reads any of them so).
        let key_bytes = usize::try_from(key_size).unwrap_or(0);
        if used.saturating_add(key_bytes) > size {
            return Err(Bad::Invalid(format!(
                "Invalid record size: record {index} of {size} bytes has a key of {key_size} bytes after {used} bytes of header"
            )));
        }
        if key_size < 0 {
            keyless.push(index);
        }
        skip(r, size - used)?;
    }
    if !r.fill_buf()?.is_empty() {
        return Err(Bad::Invalid(
            "Incorrect declared batch size, records still remaining in file".into(),
        ));
    }
    Ok(keyless)
}

fn byte<R: BufRead>(r: &mut R) -> Result<u8, Bad> {
    let b = *r.fill_buf()?.first().ok_or(Bad::Eof)?;
    r.consume(1);
    Ok(b)
}

/// A zig-zag varint of at most `max_len` bytes (5: Kafka's varint, 10: its varlong) and the bytes
/// it took.
fn varint<R: BufRead>(r: &mut R, max_len: usize) -> Result<(i64, usize), Bad> {
    let mut v: u64 = 0;
    for i in 0..max_len {
        let b = byte(r)?;
        v |= ((b & 0x7f) as u64) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((((v >> 1) as i64) ^ -((v & 1) as i64), i + 1));
        }
    }
    Err(Bad::Invalid(format!(
        "Varint is too long: more than {max_len} bytes"
    )))
}

fn skip<R: BufRead>(r: &mut R, mut n: usize) -> Result<(), Bad> {
    while n > 0 {
        let available = r.fill_buf()?.len();
        if available == 0 {
            return Err(Bad::Eof);
        }
        let step = available.min(n);
        r.consume(step);
        n -= step;
    }
    Ok(())
}

/// snappy-java's framing, which Kafka's Java clients write: an 16-byte header (`\x82SNAPPY\0`,
/// version, compatible version) then blocks of a 4-byte length and raw snappy; or, as other
/// clients write and snappy-java reads too, the whole payload as one raw snappy block.
const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_LEN: usize = 16;

/// Snappy blocks decompressed one at a time, each allocated only once its declared length fits
/// in what is left of `budget`.
pub(super) struct Snappy<'a> {
    input: &'a [u8],
    xerial: bool,
    block: Vec<u8>,
    pos: usize,
    budget: usize,
}

impl<'a> Snappy<'a> {
    pub(super) fn new(input: &'a [u8], budget: usize) -> Snappy<'a> {
        let xerial = input.len() >= XERIAL_HEADER_LEN && input.starts_with(XERIAL_MAGIC);
        Snappy {
            input,
            xerial,
            block: Vec::new(),
            pos: 0,
            budget,
        }
    }

    /// Decompresses the next block into `self.block`; false at the end of the input.
    fn next_block(&mut self) -> io::Result<bool> {
        let compressed = if self.xerial {
            // snappy-java also reads streams concatenated with their headers.
            while self.input.len() >= XERIAL_HEADER_LEN && self.input.starts_with(XERIAL_MAGIC) {
                self.input = &self.input[XERIAL_HEADER_LEN..];
            }
            if self.input.is_empty() {
                return Ok(false);
            }
            let truncated =
                || io::Error::new(io::ErrorKind::UnexpectedEof, "truncated snappy block");
            let len = self.input.get(..4).ok_or_else(truncated)?;
            let len = u32::from_be_bytes(len.try_into().unwrap()) as usize;
            let block = self.input[4..].get(..len).ok_or_else(truncated)?;
            self.input = &self.input[4 + len..];
            block
        } else {
            if self.input.is_empty() {
                return Ok(false);
            }
            std::mem::take(&mut self.input)
        };
        let len = snap::raw::decompress_len(compressed)?;
        if len > self.budget {
            return Err(io::Error::other(TooLarge));
        }
        self.budget -= len;
        self.block.clear();
        self.block.resize(len, 0);
        let written = snap::raw::Decoder::new().decompress(compressed, &mut self.block)?;
        self.block.truncate(written);
        self.pos = 0;
        Ok(true)
    }
}

impl Read for Snappy<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.block.len() {
            if !self.next_block()? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.block.len() - self.pos);
        buf[..n].copy_from_slice(&self.block[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::super::batch::{build, validate, KeyValue, NO_PRODUCER};
    use super::*;

    const MAX: usize = 1 << 20;

    fn mixed() -> Vec<KeyValue> {
        vec![
            (Some(b"a".to_vec()), Some(b"1".to_vec())),
            (None, Some(b"2".to_vec())),
            (Some(Vec::new()), Some(b"3".to_vec())), // an empty key is a key
            (None, None),
            (Some(b"e".to_vec()), None),
        ]
    }

    fn compress(codec: i16, raw: &[u8]) -> Vec<u8> {
        match codec {
            GZIP => {
                let mut e =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                e.write_all(raw).unwrap();
                e.finish().unwrap()
            }
            SNAPPY => xerial(raw, 32 * 1024),
            LZ4 => {
                let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
                e.write_all(raw).unwrap();
                e.finish().unwrap()
            }
            ZSTD => zstd::bulk::compress(raw, 3).unwrap(),
            _ => unreachable!(),
        }
    }

    /// snappy-java's stream format, as the Java producer writes it.
    fn xerial(raw: &[u8], block: usize) -> Vec<u8> {
        let mut out = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01".to_vec();
        for chunk in raw.chunks(block) {
            let c = snap::raw::Encoder::new().compress_vec(chunk).unwrap();
            out.extend_from_slice(&(c.len() as u32).to_be_bytes());
            out.extend_from_slice(&c);
        }
        out
    }

    /// `batch` (uncompressed, as built) with its records replaced by `payload` and the codec set,
    /// CRC recomputed: what a producer sends.
    fn with_payload(batch: &[u8], codec: i16, payload: &[u8]) -> Vec<u8> {
        let mut out = batch[..HEADER_LEN].to_vec();
        out.extend_from_slice(payload);
        let length = (out.len() - 12) as i32;
        out[8..12].copy_from_slice(&length.to_be_bytes());
        let attributes = i16::from_be_bytes([out[21], out[22]]) | codec;
        out[21..23].copy_from_slice(&attributes.to_be_bytes());
        let crc = crc32c::crc32c(&out[21..]);
        out[17..21].copy_from_slice(&crc.to_be_bytes());
        out
    }

    fn compressed(records: &[KeyValue], codec: i16) -> Vec<u8> {
        let plain = build(records, 1000, NO_PRODUCER);
        let b = with_payload(&plain, codec, &compress(codec, &plain[HEADER_LEN..]));
        validate(&b, MAX).expect("a valid batch");
        b
    }

    #[test]
    fn uncompressed_keyless_records_are_found_by_index() {
        let b = build(&mixed(), 1000, NO_PRODUCER);
        assert_eq!(keyless_records(&b, MAX), Ok(vec![1, 3]));
        let keyed: Vec<KeyValue> = (0..100)
            .map(|i| (Some(vec![i]), Some(vec![i; 100])))
            .collect();
        assert_eq!(
            keyless_records(&build(&keyed, 1000, NO_PRODUCER), MAX),
            Ok(vec![])
        );
    }

    #[test]
    fn every_codec_is_decompressed_to_find_keyless_records() {
        for codec in [GZIP, SNAPPY, LZ4, ZSTD] {
            let b = compressed(&mixed(), codec);
            assert_eq!(
                keyless_records(&b, MAX),
                Ok(vec![1, 3]),
                "{}",
                CODECS[codec as usize]
            );
            let keyed: Vec<KeyValue> = (0..500)
                .map(|i| (Some(format!("k{i}").into_bytes()), Some(vec![7; 300])))
                .collect();
            assert_eq!(
                keyless_records(&compressed(&keyed, codec), MAX),
                Ok(vec![]),
                "{}",
                CODECS[codec as usize]
            );
        }
    }

    #[test]
    fn snappy_raw_and_concatenated_xerial_streams_are_read() {
        let plain = build(&mixed(), 1000, NO_PRODUCER);
        let raw = snap::raw::Encoder::new()
            .compress_vec(&plain[HEADER_LEN..])
            .unwrap();
        assert_eq!(
            keyless_records(&with_payload(&plain, SNAPPY, &raw), MAX),
            Ok(vec![1, 3])
        );
        // Blocks of 7 bytes: records cross block boundaries.
        let small_blocks = xerial(&plain[HEADER_LEN..], 7);
        assert_eq!(
            keyless_records(&with_payload(&plain, SNAPPY, &small_blocks), MAX),
            Ok(vec![1, 3])
        );
        let (first, second) = plain[HEADER_LEN..].split_at(10);
        let mut two = xerial(first, 1024);
        two.extend(xerial(second, 1024));
        assert_eq!(
            keyless_records(&with_payload(&plain, SNAPPY, &two), MAX),
            Ok(vec![1, 3])
        );
    }

    /// Many records, all keyless, with values of zeros: a few KiB that inflate a thousandfold.
    fn bomb_records(n: usize) -> Vec<KeyValue> {
        (0..n).map(|_| (None, Some(vec![0u8; 16 * 1024]))).collect()
    }

    #[test]
    fn decompression_is_bounded_by_max_message_bytes() {
        let records = bomb_records(256); // 4 MiB uncompressed
        for codec in [GZIP, SNAPPY, LZ4, ZSTD] {
            let name = CODECS[codec as usize];
            let b = compressed(&records, codec);
            assert!(b.len() < 256 * 1024, "{name}: {} bytes", b.len());
            let (code, message) = keyless_records(&b, MAX).unwrap_err();
            assert_eq!(code, MESSAGE_TOO_LARGE, "{name}: {message}");
            assert!(message.contains("max.message.bytes 1048576"), "{message}");
            // The same batch within a larger bound is read whole.
            assert_eq!(keyless_records(&b, 8 << 20).unwrap().len(), 256, "{name}");
        }
    }

    #[test]
    fn the_bound_is_exact() {
        let records = bomb_records(4);
        for codec in [GZIP, SNAPPY, LZ4, ZSTD] {
            let b = compressed(&records, codec);
            let uncompressed = build(&records, 1000, NO_PRODUCER).len();
            assert_eq!(keyless_records(&b, uncompressed).unwrap().len(), 4);
            assert_eq!(
                keyless_records(&b, uncompressed - 1).unwrap_err().0,
                MESSAGE_TOO_LARGE
            );
        }
    }

    #[test]
    fn a_raw_snappy_block_is_not_allocated_past_the_bound() {
        // A raw snappy block declaring 4 GiB - 1 of output: refused from its header alone.
        let plain = build(&mixed(), 1000, NO_PRODUCER);
        let lying = [0xff, 0xff, 0xff, 0xff, 0x0f, 0x00];
        let (code, _) = keyless_records(&with_payload(&plain, SNAPPY, &lying), MAX).unwrap_err();
        assert_eq!(code, MESSAGE_TOO_LARGE);
    }

    #[test]
    fn a_zstd_frame_asking_for_a_window_past_the_bound_is_refused() {
        // A 64 MiB window (what the Java producer's zstd level 21 asks for), no content size: the
        // decoder would allocate it before producing a byte. zstd's default limit is 128 MiB.
        let plain = build(&mixed(), 1000, NO_PRODUCER);
        let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        encoder
            .set_parameter(zstd::zstd_safe::CParameter::WindowLog(26))
            .unwrap();
        encoder.include_contentsize(false).unwrap();
        encoder.write_all(&plain[HEADER_LEN..]).unwrap();
        let b = with_payload(&plain, ZSTD, &encoder.finish().unwrap());
        let (code, message) = keyless_records(&b, MAX).unwrap_err();
        assert_eq!(code, INVALID_RECORD, "{message}");
        assert!(
            message.starts_with("Failed to decompress the zstd record batch"),
            "{message}"
        );
        // A bound of 64 MiB allows the window.
        assert_eq!(keyless_records(&b, 64 << 20), Ok(vec![1, 3]));
    }

    #[test]
    fn malformed_records_are_invalid() {
        let plain = build(&mixed(), 1000, NO_PRODUCER);
        // Cut short: the header still counts 5 records.
        let cut = with_payload(&plain, 0, &plain[HEADER_LEN..plain.len() - 3]);
        assert_eq!(keyless_records(&cut, MAX).unwrap_err().0, INVALID_RECORD);
        // Trailing bytes after the last record.
        let mut long = plain[HEADER_LEN..].to_vec();
        long.push(0);
        assert_eq!(
            keyless_records(&with_payload(&plain, 0, &long), MAX),
            Err((
                INVALID_RECORD,
                "Incorrect declared batch size, records still remaining in file".into()
            ))
        );
        for codec in [GZIP, SNAPPY, LZ4, ZSTD] {
            let name = CODECS[codec as usize];
            let payload = compress(codec, &plain[HEADER_LEN..]);
            let (code, message) = keyless_records(
                &with_payload(&plain, codec, &payload[..payload.len() / 2]),
                MAX,
            )
            .unwrap_err();
            assert_eq!(code, INVALID_RECORD, "{name}: {message}");
            let not_compressed = b"\x82SNAPPY\x00 this is not compressed at all, in any codec";
            let (code, message) =
                keyless_records(&with_payload(&plain, codec, not_compressed), MAX).unwrap_err();
            assert_eq!(code, INVALID_RECORD, "{name}: {message}");
        }
        let (code, message) =
            keyless_records(&with_payload(&plain, 6, &plain[HEADER_LEN..]), MAX).unwrap_err();
        assert_eq!(
            (code, message.as_str()),
            (INVALID_RECORD, "Unknown compression type id: 6")
        );
    }
}
