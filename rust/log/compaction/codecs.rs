//! Whole-batch decompression and compression for the log cleaner, which rewrites the records of a
//! batch it keeps only some of with the codec the producer chose (Kafka's cleaner does the same).
//! Decompression is bounded as the key check's (keys.rs): at most `limit` bytes out.

use std::io::{self, Read, Write};

use super::super::keys::{zstd_decoder, Bounded, Snappy};

pub const NONE: i16 = 0;
const GZIP: i16 = 1;
const SNAPPY: i16 = 2;
const LZ4: i16 = 3;
const ZSTD: i16 = 4;
/// snappy-java's stream header, as the Java producer writes it (magic, version 1, compatible 1).
const XERIAL_HEADER: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";
const XERIAL_BLOCK: usize = 32 * 1024;

/// The records of a batch's payload compressed with `codec`, as bytes.
pub fn decompress(codec: i16, payload: &[u8], limit: usize) -> io::Result<Vec<u8>> {
    let inner: Box<dyn Read + '_> = match codec {
        NONE => return Ok(payload.to_vec()),
        GZIP => Box::new(flate2::bufread::MultiGzDecoder::new(payload)),
        SNAPPY => Box::new(Snappy::new(payload, limit)),
        LZ4 => Box::new(lz4_flex::frame::FrameDecoder::new(payload)),
        ZSTD => Box::new(zstd_decoder(payload, limit)?),
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("unknown codec {codec}"),
            ))
        }
    };
    let mut out = Vec::new();
    Bounded { inner, left: limit }.read_to_end(&mut out)?;
    Ok(out)
}

/// `raw` records compressed with `codec` (snappy in snappy-java's framing, lz4 as frames).
pub fn compress(codec: i16, raw: &[u8]) -> io::Result<Vec<u8>> {
    Ok(match codec {
        NONE => raw.to_vec(),
        GZIP => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(raw)?;
            e.finish()?
        }
        SNAPPY => {
            let mut out = XERIAL_HEADER.to_vec();
            for chunk in raw.chunks(XERIAL_BLOCK) {
                let block = snap::raw::Encoder::new()
                    .compress_vec(chunk)
                    .map_err(io::Error::other)?;
                out.extend_from_slice(&(block.len() as u32).to_be_bytes());
                out.extend_from_slice(&block);
            }
            out
        }
        LZ4 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(raw)?;
            e.finish().map_err(io::Error::other)?
        }
        ZSTD => zstd::bulk::compress(raw, 3)?,
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("unknown codec {codec}"),
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_codec_round_trips_and_is_bounded() {
        let raw: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for codec in [NONE, GZIP, SNAPPY, LZ4, ZSTD] {
            let packed = compress(codec, &raw).unwrap();
            assert_eq!(
                decompress(codec, &packed, raw.len()).unwrap(),
                raw,
                "codec {codec}"
            );
            if codec != NONE {
                assert!(
                    decompress(codec, &packed, raw.len() - 1).is_err(),
                    "codec {codec}"
                );
            }
        }
    }
}
