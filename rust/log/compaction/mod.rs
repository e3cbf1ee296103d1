//! Log compaction, as Kafka's LogCleaner: for a partition whose cleanup.policy includes
//! `compact`, keep the last record of every key, tombstones (null values) for
//! delete.retention.ms, and drop the records of aborted transactions.
//!
//! A pass over one partition (`clean`):
//! 1. **Plan**, under the partition's lock (brief): the sealed segments below the first
//!    uncleanable offset (the active segment's base, the last stable offset, the first segment
//!    younger than min.compaction.lag.ms), the first dirty offset (the partition's
//!    `cleaner-offset-checkpoint`, or the log start), and whether the dirty share of those bytes
//!    passes min.cleanable.dirty.ratio (or the oldest dirty segment is older than
//!    max.compaction.lag.ms). Nothing eligible: nothing is done.
//! 2. **Build** without the lock (sealed segments never change): a map of key -> last offset over
//!    the dirty segments (aborted transactions left out), bounded by a number of entries, then
//!    every planned segment up to where the map reached is rewritten, groups of adjacent
//!    segments up to segment.bytes into one `<base>.log.cleaned` file, fsynced.
//! 3. **Swap**, under the lock, if the segments are still the planned ones (retention or
//!    DeleteRecords may have removed some meanwhile): `.cleaned` -> `.swap`, the old segments'
//!    indexes removed and their files renamed `.deleted`, `.swap` -> `<base>.log` (replacing the
//!    first old one), `.deleted` removed; then the new checkpoint. A crash at any step leaves the
//!    old segments or the new one: `finish_swaps` on open completes a swap that had begun and
//!    throws away a `.cleaned` that had not.
//!
//! A rewritten batch keeps its base offset and last offset delta (offsets are never reassigned),
//! its producer fields and its codec; a batch left with no record is dropped, unless it is a
//! producer's (its header stays, empty, as Kafka keeps it for the producer state). Control batches
//! (transaction markers) are kept. A kept tombstone's batch gets a delete horizon (attribute bit 6,
//! base timestamp = now + delete.retention.ms); a later pass past the horizon drops it.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::batch::{get_varint, put_varint, Header, HEADER_LEN};
mod codecs;
use super::partition::{sync_dir, write_offset_file, Partition};
use super::segment::file_name;
use super::transactions::{is_control, is_transactional, AbortedTxn};

const ATTR_DELETE_HORIZON: i16 = 0x40;
const CODEC_MASK: i16 = 0x07;
const CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";
/// Bytes a map entry costs besides its key (Kafka counts 24 per entry: a 16-byte hash, an offset).
const ENTRY_OVERHEAD: usize = 24;

/// The settings of one pass (the topic's, with the broker's log.cleaner.* defaults).
#[derive(Clone, Copy, Debug)]
pub struct CleanConfig {
    pub now_ms: i64,
    pub min_cleanable_ratio: f64,
    pub delete_retention_ms: i64,
    pub min_compaction_lag_ms: i64,
    pub max_compaction_lag_ms: i64,
    /// The most bytes the key map may take (log.cleaner.dedupe.buffer.size).
    pub map_bytes: usize,
    /// The largest a batch may inflate to when decompressed (max.message.bytes).
    pub max_batch_bytes: usize,
}

/// What a pass did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Cleaned {
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub records_removed: u64,
    pub segments_before: usize,
    pub segments_after: usize,
    /// The first dirty offset for the next pass.
    pub checkpoint: i64,
    /// Bytes read (for the caller's I/O budget).
    pub bytes_read: u64,
}

struct SegmentFile {
    base: i64,
    next: i64,
    size: u64,
    path: PathBuf,
}

pub struct Plan {
    dir: PathBuf,
    segments: Vec<SegmentFile>,
    /// Index in `segments` of the first dirty one.
    first_dirty: usize,
    segment_bytes: u64,
    aborted: Vec<AbortedTxn>,
}

/// Cleans one partition if it is eligible; None when it is not.
pub fn clean(shared: &Arc<Mutex<Partition>>, cfg: &CleanConfig) -> io::Result<Option<Cleaned>> {
    let Some(plan) = super::lock(shared).clean_plan(cfg)? else {
        return Ok(None);
    };
    let (outputs, mut cleaned) = build_cleaned(&plan, cfg)?;
    let swapped = super::lock(shared).swap_cleaned(&plan, &outputs, cleaned.checkpoint)?;
    if !swapped {
        for out in &outputs {
            let _ = fs::remove_file(&out.path);
        }
        return Ok(None);
    }
    cleaned.segments_before = outputs.iter().map(|o| o.replaced.len()).sum();
    cleaned.segments_after = outputs.len();
    Ok(Some(cleaned))
}

/// One cleaned file and the segments (base offsets) it replaces.
pub struct Output {
    pub path: PathBuf,
    pub replaced: Vec<i64>,
}

impl Partition {
    /// Step 1: what to clean, or None when nothing is eligible.
    fn clean_plan(&self, cfg: &CleanConfig) -> io::Result<Option<Plan>> {
        let sealed = self.sealed_segments();
        if sealed.is_empty() {
            return Ok(None);
        }
        let checkpoint = read_checkpoint(&self.dir).unwrap_or(0);
        let first_dirty_offset = checkpoint.max(self.log_start_offset());
        let young = |max_ts: i64| max_ts > cfg.now_ms.saturating_sub(cfg.min_compaction_lag_ms);
        let stable = self.stable_offset();
        let mut segments = Vec::new();
        let mut first_dirty = None;
        let (mut clean_bytes, mut dirty_bytes, mut oldest_dirty) = (0u64, 0u64, i64::MAX);
        for (base, next, size, max_ts, path) in sealed {
            if next > stable || (base >= first_dirty_offset && young(max_ts)) {
                break; // the first uncleanable offset
            }
            if base >= first_dirty_offset {
                first_dirty.get_or_insert(segments.len());
                dirty_bytes += size;
                oldest_dirty = oldest_dirty.min(max_ts);
            } else {
                clean_bytes += size;
            }
            segments.push(SegmentFile {
                base,
                next,
                size,
                path,
            });
        }
        let Some(first_dirty) = first_dirty else {
            return Ok(None);
        };
        let ratio = dirty_bytes as f64 / (clean_bytes + dirty_bytes).max(1) as f64;
        let overdue = oldest_dirty < cfg.now_ms.saturating_sub(cfg.max_compaction_lag_ms);
        if ratio <= cfg.min_cleanable_ratio && !overdue {
            return Ok(None);
        }
        Ok(Some(Plan {
            dir: self.dir.clone(),
            segments,
            first_dirty,
            segment_bytes: self.config.segment_bytes,
            aborted: self.aborted_entries(),
        }))
    }

    /// Step 3: puts the cleaned files in place of the segments they replace, if those are still
    /// the partition's. False (nothing changed) otherwise.
    fn swap_cleaned(
        &mut self,
        plan: &Plan,
        outputs: &[Output],
        checkpoint: i64,
    ) -> io::Result<bool> {
        let current: Vec<i64> = self.sealed_segments().iter().map(|s| s.0).collect();
        let planned: Vec<i64> = outputs
            .iter()
            .flat_map(|o| o.replaced.iter().copied())
            .collect();
        if !planned.iter().all(|b| current.contains(b)) || planned.is_empty() {
            return Ok(false);
        }
        for out in outputs {
            let swap = plan
                .dir
                .join(format!("{}.swap", file_name(out.replaced[0], "log")));
            fs::rename(&out.path, &swap)?;
            sync_dir(&plan.dir)?;
            replace_with_swap(&plan.dir, &swap, &out.replaced)?;
        }
        self.reload_segments(&planned)?;
        write_offset_file(&plan.dir, CHECKPOINT_FILE, checkpoint)?;
        Ok(true)
    }
}

/// The rest of a swap once `<first>.log.swap` exists: old indexes removed, old logs renamed
/// `.deleted`, the swap renamed to `<first>.log`, the `.deleted` files removed.
fn replace_with_swap(dir: &Path, swap: &Path, replaced: &[i64]) -> io::Result<()> {
    let mut deleted = Vec::new();
    for &base in replaced {
        for ext in ["index", "timeindex"] {
            remove_if_there(&dir.join(file_name(base, ext)))?;
        }
        if base != replaced[0] {
            let log = dir.join(file_name(base, "log"));
            if log.exists() {
                let gone = dir.join(format!("{}.deleted", file_name(base, "log")));
                fs::rename(&log, &gone)?;
                deleted.push(gone);
            }
        }
    }
    fs::rename(swap, dir.join(file_name(replaced[0], "log")))?;
    sync_dir(dir)?;
    for gone in deleted {
        remove_if_there(&gone)?;
    }
    Ok(())
}

fn remove_if_there(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// On open, before the segments are listed: a clean interrupted by a crash is finished (a
/// `.swap` exists: the new segment wins) or forgotten (only a `.cleaned`: the old ones stay).
pub fn finish_swaps(dir: &Path) -> io::Result<Vec<String>> {
    let mut notes = Vec::new();
    let mut swaps = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.ends_with(".cleaned") {
            remove_if_there(&path)?;
            notes.push(format!("removed an unfinished clean's {name}"));
        } else if let Some(stem) = name.strip_suffix(".log.swap") {
            if let Ok(base) = stem.parse::<i64>() {
                swaps.push((base, path));
            }
        }
    }
    for (base, swap) in swaps {
        let last = last_offset(&swap)?;
        let mut replaced = vec![base];
        for other in super::recovery::segment_bases(dir)? {
            if other > base && other <= last {
                replaced.push(other);
            }
        }
        replace_with_swap(dir, &swap, &replaced)?;
        notes.push(format!("finished the swap of a cleaned segment at {base}"));
    }
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "deleted") {
            remove_if_there(&path)?;
        }
    }
    Ok(notes)
}

/// The last offset of the batches in a segment file (-1 when empty).
fn last_offset(path: &Path) -> io::Result<i64> {
    let mut last = -1;
    let mut reader = Batches::open(path)?;
    while let Some(batch) = reader.next_batch()? {
        last = Header::parse(&batch).map_or(last, |h| h.last_offset());
    }
    Ok(last)
}

fn read_checkpoint(dir: &Path) -> Option<i64> {
    fs::read_to_string(dir.join(CHECKPOINT_FILE))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Whole batches of a segment file, one at a time.
struct Batches {
    reader: BufReader<File>,
}

impl Batches {
    fn open(path: &Path) -> io::Result<Batches> {
        Ok(Batches {
            reader: BufReader::with_capacity(256 * 1024, File::open(path)?),
        })
    }

    fn next_batch(&mut self) -> io::Result<Option<Vec<u8>>> {
        let mut head = vec![0u8; HEADER_LEN];
        match self.reader.read_exact(&mut head) {
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            other => other?,
        }
        let header = Header::parse(&head)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad batch header"))?;
        head.resize(header.size, 0);
        self.reader.read_exact(&mut head[HEADER_LEN..])?;
        Ok(Some(head))
    }
}

/// One record of a batch, as far as the cleaner reads it.
struct Record<'a> {
    timestamp_delta: i64,
    offset_delta: i64,
    attributes: u8,
    /// Its key, value and headers, as encoded.
    rest: &'a [u8],
    /// The whole encoded record, length prefix included.
    whole: &'a [u8],
    key: Option<&'a [u8]>,
    tombstone: bool,
}

fn records(raw: &[u8], count: i32) -> io::Result<Vec<Record<'_>>> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "malformed record");
    let mut out = Vec::with_capacity(count.max(0) as usize);
    let mut pos = 0;
    for _ in 0..count {
        let start = pos;
        let len = get_varint(raw, &mut pos).ok_or_else(bad)?;
        let end = pos
            .checked_add(usize::try_from(len).map_err(|_| bad())?)
            .filter(|&e| e <= raw.len())
            .ok_or_else(bad)?;
        let body = &raw[..end];
        let attributes = *body.get(pos).ok_or_else(bad)?;
        pos += 1;
        let timestamp_delta = get_varint(body, &mut pos).ok_or_else(bad)?;
        let offset_delta = get_varint(body, &mut pos).ok_or_else(bad)?;
        let rest_start = pos;
        let key_len = get_varint(body, &mut pos).ok_or_else(bad)?;
        let key = if key_len < 0 {
            None
        } else {
            let k = body.get(pos..pos + key_len as usize).ok_or_else(bad)?;
            pos += key_len as usize;
            Some(k)
        };
        let value_len = get_varint(body, &mut pos).ok_or_else(bad)?;
        out.push(Record {
            timestamp_delta,
            offset_delta,
            attributes,
            rest: &raw[rest_start..end],
            whole: &raw[start..end],
            key,
            tombstone: value_len < 0,
        });
        pos = end;
    }
    Ok(out)
}

fn aborted(aborted: &[AbortedTxn], h: &Header) -> bool {
    is_transactional(h)
        && !is_control(h)
        && aborted.iter().any(|a| {
            a.producer_id == h.producer_id
                && a.first_offset <= h.base_offset
                && h.base_offset <= a.last_offset
        })
}

/// Step 2: the key map, then the cleaned files.
fn build_cleaned(plan: &Plan, cfg: &CleanConfig) -> io::Result<(Vec<Output>, Cleaned)> {
    let mut cleaned = Cleaned::default();
    let mut map: HashMap<Vec<u8>, i64> = HashMap::new();
    let mut map_bytes = 0usize;
    // The segments whose keys are all in the map: those are rewritten (with every clean one).
    let mut mapped_end = plan.first_dirty;
    for seg in &plan.segments[plan.first_dirty..] {
        let mut reader = Batches::open(&seg.path)?;
        while let Some(batch) = reader.next_batch()? {
            cleaned.bytes_read += batch.len() as u64;
            let h = Header::parse(&batch).expect("read whole");
            if is_control(&h) || aborted(&plan.aborted, &h) {
                continue;
            }
            let raw = codecs::decompress(
                h.attributes & CODEC_MASK,
                &batch[HEADER_LEN..],
                cfg.max_batch_bytes,
            )?;
            for r in records(&raw, h.records_count)? {
                if let Some(key) = r.key {
                    let offset = h.base_offset + r.offset_delta;
                    match map.get_mut(key) {
                        Some(o) => *o = offset,
                        None => {
                            map_bytes += key.len() + ENTRY_OVERHEAD;
                            map.insert(key.to_vec(), offset);
                        }
                    }
                }
            }
        }
        mapped_end += 1;
        // The map is full: this pass stops at a segment boundary, the next one goes on.
        if map_bytes >= cfg.map_bytes {
            break;
        }
    }
    cleaned.checkpoint = plan.segments[mapped_end - 1].next;
    let mut outputs = Vec::new();
    let mut group: Vec<&SegmentFile> = Vec::new();
    let mut group_bytes = 0u64;
    for seg in &plan.segments[..mapped_end] {
        if !group.is_empty() && group_bytes + seg.size > plan.segment_bytes {
            outputs.push(rewrite(plan, cfg, &group, &map, &mut cleaned)?);
            group.clear();
            group_bytes = 0;
        }
        group_bytes += seg.size;
        group.push(seg);
    }
    if !group.is_empty() {
        outputs.push(rewrite(plan, cfg, &group, &map, &mut cleaned)?);
    }
    Ok((outputs, cleaned))
}

/// Writes the kept records of `group` into one `.cleaned` file.
fn rewrite(
    plan: &Plan,
    cfg: &CleanConfig,
    group: &[&SegmentFile],
    map: &HashMap<Vec<u8>, i64>,
    cleaned: &mut Cleaned,
) -> io::Result<Output> {
    let path = plan
        .dir
        .join(format!("{}.cleaned", file_name(group[0].base, "log")));
    let file = File::create(&path)?;
    let mut out = BufWriter::with_capacity(256 * 1024, file);
    for seg in group {
        cleaned.bytes_before += seg.size;
        let mut reader = Batches::open(&seg.path)?;
        while let Some(batch) = reader.next_batch()? {
            let h = Header::parse(&batch).expect("read whole");
            if is_control(&h) {
                out.write_all(&batch)?;
                cleaned.bytes_after += batch.len() as u64;
                continue;
            }
            if aborted(&plan.aborted, &h) {
                cleaned.records_removed += h.records_count.max(0) as u64;
                continue;
            }
            if let Some(kept) = filter_batch(&batch, &h, cfg, map, cleaned)? {
                out.write_all(&kept)?;
                cleaned.bytes_after += kept.len() as u64;
            }
        }
    }
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    Ok(Output {
        path,
        replaced: group.iter().map(|s| s.base).collect(),
    })
}

/// The batch with only the records to keep (`batch` itself when all stay), or None to drop it.
fn filter_batch(
    batch: &[u8],
    h: &Header,
    cfg: &CleanConfig,
    map: &HashMap<Vec<u8>, i64>,
    cleaned: &mut Cleaned,
) -> io::Result<Option<Vec<u8>>> {
    let codec = h.attributes & CODEC_MASK;
    let raw = codecs::decompress(codec, &batch[HEADER_LEN..], cfg.max_batch_bytes)?;
    let all = records(&raw, h.records_count)?;
    let horizon = (h.attributes & ATTR_DELETE_HORIZON != 0).then_some(h.base_timestamp);
    let keep = |r: &Record| -> bool {
        let Some(key) = r.key else { return false };
        let offset = h.base_offset + r.offset_delta;
        if map.get(key).is_some_and(|&last| offset < last) {
            return false;
        }
        !(r.tombstone && horizon.is_some_and(|at| cfg.now_ms >= at))
    };
    let kept: Vec<&Record> = all.iter().filter(|r| keep(r)).collect();
    cleaned.records_removed += (all.len() - kept.len()) as u64;
    let needs_horizon = horizon.is_none() && kept.iter().any(|r| r.tombstone);
    if kept.len() == all.len() && !needs_horizon {
        return Ok(Some(batch.to_vec()));
    }
    if kept.is_empty() && h.producer_id < 0 {
        return Ok(None);
    }
    // Re-encode: the same base offset and last offset delta, deltas against a new base
    // timestamp when a delete horizon is set now.
    let (base_timestamp, attributes) = if needs_horizon {
        (
            cfg.now_ms.saturating_add(cfg.delete_retention_ms),
            h.attributes | ATTR_DELETE_HORIZON,
        )
    } else {
        (h.base_timestamp, h.attributes)
    };
    let mut body = Vec::with_capacity(raw.len());
    for r in &kept {
        if base_timestamp == h.base_timestamp {
            body.extend_from_slice(r.whole);
            continue;
        }
        let mut rec = vec![r.attributes];
        put_varint(
            &mut rec,
            h.base_timestamp + r.timestamp_delta - base_timestamp,
        );
        put_varint(&mut rec, r.offset_delta);
        rec.extend_from_slice(r.rest);
        put_varint(&mut body, rec.len() as i64);
        body.extend_from_slice(&rec);
    }
    let (payload, attributes) = if kept.is_empty() {
        (Vec::new(), attributes & !CODEC_MASK)
    } else {
        (codecs::compress(codec, &body)?, attributes)
    };
    let mut out = batch[..HEADER_LEN].to_vec();
    out.extend_from_slice(&payload);
    let length = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    out[27..35].copy_from_slice(&base_timestamp.to_be_bytes());
    out[57..61].copy_from_slice(&(kept.len() as i32).to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Ok(Some(out))
}

#[cfg(test)]
mod tests;
