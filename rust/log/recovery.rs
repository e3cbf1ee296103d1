//! Bringing a partition's segments back after a start: indexes loaded or rebuilt, and the active
//! segment's tail checked batch by batch (sizes, magic, CRC-32C, increasing offsets) and cut at
//! the first batch that is not whole and valid, as Kafka's LogSegment.recover does.

use std::fs;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use super::batch::{crc_ok, Header, HEADER_LEN};
use super::index::SparseIndex;
use super::segment::Segment;

/// Base offsets of the segment files in `dir`, ascending.
pub fn segment_bases(dir: &Path) -> io::Result<Vec<i64>> {
    let mut bases = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        if let Some(stem) = name.strip_suffix(".log") {
            if let Ok(base) = stem.parse::<i64>() {
                bases.push(base);
            }
        }
    }
    bases.sort_unstable();
    Ok(bases)
}

/// Rebuilds an older segment's in-memory state from its index files, or from its batch headers
/// when they are missing or do not fit (no CRC check: rolled segments were fsynced whole).
pub fn load_sealed(seg: &mut Segment) -> io::Result<bool> {
    if let Some(index) = SparseIndex::read(&seg.index_path(), &seg.time_index_path(), seg.size) {
        seg.max_timestamp = index.entries.last().map_or(-1, |e| e.max_timestamp);
        let from = index.entries.last().map_or(0, |e| e.position as u64);
        seg.index = index;
        // Only the batches after the last entry are walked, to find the segment's end offset.
        let mut last = None;
        seg.headers_from(from, |pos, h| {
            last = Some((pos, *h));
            false
        })?;
        if let Some((pos, h)) = last {
            seg.next_offset = h.last_offset() + 1;
            seg.last_batch = Some((pos, (h.base_offset - seg.base_offset) as u32));
            seg.max_timestamp = seg.max_timestamp.max(h.max_timestamp);
        }
        return Ok(false);
    }
    let mut found = Vec::new();
    seg.headers_from(0, |pos, h| {
        found.push((pos, *h));
        false
    })?;
    for (pos, h) in &found {
        seg.note_batch(*pos, h);
    }
    seg.write_index(true)?;
    Ok(true)
}

/// What recovering the active segment found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    pub valid_bytes: u64,
    pub truncated_bytes: u64,
    pub reason: Option<String>,
}

/// Validates the active segment from `from` (a position where a batch starts, 0 for all of it),
/// truncates whatever follows the last valid batch, and rebuilds the index of what it read.
pub fn recover_active(seg: &mut Segment, from: u64, min_offset: i64) -> io::Result<Recovered> {
    seg.index.truncate(from);
    let file = seg.file()?;
    let file_size = file.metadata()?.len();
    let mut reader = BufReader::with_capacity(1 << 20, &*file);
    reader.seek(SeekFrom::Start(from))?;
    let mut position = from;
    let mut expected = min_offset;
    let mut reason = None;
    let mut batch = Vec::new();
    let mut found = Vec::new();
    while position < file_size {
        if file_size - position < HEADER_LEN as u64 {
            reason = Some(format!(
                "{} trailing bytes are shorter than a batch header",
                file_size - position
            ));
            break;
        }
        batch.resize(HEADER_LEN, 0);
        reader.read_exact(&mut batch)?;
        let Some(h) = Header::parse(&batch) else {
            reason = Some("invalid batch length".to_string());
            break;
        };
        if h.magic != 2 {
            reason = Some(format!("batch magic {} is not 2", h.magic));
            break;
        }
        if position + h.size as u64 > file_size {
            reason = Some(format!(
                "batch of {} bytes is cut at the end of the file",
                h.size
            ));
            break;
        }
        batch.resize(h.size, 0);
        reader.read_exact(&mut batch[HEADER_LEN..])?;
        if !crc_ok(&batch, &h) {
            reason = Some("batch CRC-32C mismatch".to_string());
            break;
        }
        if h.base_offset < expected || h.last_offset_delta < 0 {
            reason = Some(format!(
                "batch offset {} goes backwards (expected >= {expected})",
                h.base_offset
            ));
            break;
        }
        expected = h.last_offset() + 1;
        found.push((position, h));
        position += h.size as u64;
    }
    for (pos, h) in &found {
        seg.note_batch(*pos, h);
    }
    let truncated = file_size - position;
    if truncated > 0 {
        file.set_len(position)?;
        file.sync_all()?;
    }
    seg.size = position;
    Ok(Recovered {
        valid_bytes: position,
        truncated_bytes: truncated,
        reason: if truncated > 0 { reason } else { None },
    })
}
