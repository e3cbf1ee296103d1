//! One topic-partition's log: its segments, offsets, appends, reads, roll and retention.

use std::fs;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::batch::{self, Header};
use super::files::FileCache;
use super::producers::{BatchMeta, Check, Producers};
use super::recovery;
use super::segment::Segment;
use super::transactions::{self, AbortedIndex};

mod compaction;
mod producer_state;

/// The log start offset DeleteRecords set, in the partition's directory (Kafka keeps them all in
/// one `log-start-offset-checkpoint` written every minute; this one is written and fsynced before
/// DeleteRecords is answered, so an acknowledged deletion survives `kill -9`). The log starts at
/// the larger of it and the first segment's base offset.
const LOG_START_FILE: &str = "log-start-offset";

#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// `segment.bytes`: roll when the active segment would grow past it.
    pub segment_bytes: u64,
    /// `retention.ms`: delete a segment whose newest timestamp is older; -1 keeps forever.
    pub retention_ms: i64,
    /// `retention.bytes`: delete oldest segments while the log is bigger; -1 is unlimited.
    pub retention_bytes: i64,
}

pub struct Partition {
    pub dir: PathBuf,
    pub config: Config,
    /// Never empty; the last one is the active segment.
    segments: Vec<Segment>,
    /// The first offset a reader may see: the first segment's base offset, or past it after
    /// DeleteRecords (the batches below it stay in that segment until the whole segment goes).
    log_start: i64,
    /// Records appended since the last fsync.
    pub unflushed: u64,
    producers: Producers,
    /// The aborted transactions a read_committed fetch lists.
    aborted: AbortedIndex,
    files: Arc<FileCache>,
    /// Whether the partition has a directory and segment file yet: they are made by the first
    /// append, so a topic of any size costs no files (and no fsyncs) until it gets records.
    on_disk: bool,
    /// The directory was made and its entries are not fsynced yet: the next flush does it before
    /// it reports records durable.
    pub dir_unsynced: bool,
}

/// What an append did.
#[derive(Debug, PartialEq, Eq)]
pub enum Appended {
    /// (base offset, last offset, records).
    New(i64, i64, u64),
    /// A retried idempotent batch: its original offsets; nothing was written.
    Duplicate(BatchMeta),
    /// Refused by the producer state: (Kafka error code, message).
    Refused(i16, String),
}

impl Partition {
    /// Opens the partition in `dir` (an empty one, touching no file, if it has no segment yet).
    /// After an unclean shutdown the whole active segment is validated; after a clean one only
    /// its tail past the last index entry is. Returns the partition and a description of
    /// anything repaired.
    pub fn open(
        dir: &Path,
        config: Config,
        clean: bool,
        files: &Arc<FileCache>,
    ) -> io::Result<(Partition, Vec<String>)> {
        let mut notes = Vec::new();
        let bases = if dir.is_dir() {
            notes.extend(super::compaction::finish_swaps(dir)?);
            recovery::segment_bases(dir)?
        } else {
            Vec::new()
        };
        let on_disk = !bases.is_empty();
        let mut segments = Vec::with_capacity(bases.len().max(1));
        if !on_disk {
            // Nothing was ever written (nothing acknowledged can be lost): no file until then.
            segments.push(Segment::unborn(dir, 0, files));
        }
        for (i, &base) in bases.iter().enumerate() {
            let mut seg = Segment::open(dir, base, files)?;
            if i + 1 < bases.len() {
                if recovery::load_sealed(&mut seg)? {
                    notes.push(format!("rebuilt the index of segment {base}"));
                }
            } else {
                let mut from = 0;
                if clean {
                    if let Some(index) = super::index::SparseIndex::read(
                        &seg.index_path(),
                        &seg.time_index_path(),
                        seg.size,
                    ) {
                        from = index.entries.last().map_or(0, |e| e.position as u64);
                        seg.max_timestamp = index.entries.last().map_or(-1, |e| e.max_timestamp);
                        seg.index = index;
                    }
                }
                let min_offset = segments
                    .last()
                    .map_or(base, |s: &Segment| s.next_offset.max(base));
                let found = recovery::recover_active(&mut seg, from, min_offset)?;
                if found.truncated_bytes > 0 {
                    notes.push(format!(
                        "truncated {} bytes at position {} of segment {} ({})",
                        found.truncated_bytes,
                        found.valid_bytes,
                        base,
                        found.reason.as_deref().unwrap_or("invalid batch")
                    ));
                }
            }
            segments.push(seg);
        }
        let first_base = segments[0].base_offset;
        let end = segments.last().map_or(first_base, |s| s.next_offset);
        let stored = if on_disk {
            read_log_start(dir, &mut notes)
        } else {
            None
        };
        // Never past the end: DeleteRecords makes the records durable before the offset.
        let log_start = stored.map_or(first_base, |s| s.max(first_base)).min(end);
        let mut partition = Partition {
            dir: dir.to_path_buf(),
            config,
            segments,
            log_start,
            unflushed: 0,
            producers: Producers::default(),
            aborted: AbortedIndex::default(),
            files: files.clone(),
            on_disk,
            dir_unsynced: false,
        };
        if on_disk {
            partition.load_producers()?;
        }
        Ok((partition, notes))
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log_start
    }

    /// The log end offset, which is also the high watermark of a single-replica partition.
    pub fn next_offset(&self) -> i64 {
        self.active().next_offset
    }

    pub fn size(&self) -> u64 {
        self.segments.iter().map(|s| s.size).sum()
    }

    /// Segment files on disk (none before the first append).
    pub fn segment_files(&self) -> usize {
        if self.on_disk {
            self.segments.len()
        } else {
            0
        }
    }

    fn active(&self) -> &Segment {
        self.segments.last().expect("a partition has a segment")
    }

    /// The active segment's file, for an fsync outside the partition's lock.
    pub fn active_file(&self) -> io::Result<Arc<File>> {
        self.active().file()
    }

    /// Appends validated batches, assigning offsets, after the idempotent-producer checks of
    /// the first batch (a produce request carries one batch per partition).
    pub fn append(
        &mut self,
        mut data: Vec<u8>,
        log_append_time: Option<i64>,
    ) -> io::Result<Appended> {
        if let Some(first) = Header::parse(&data) {
            if transactions::is_control(&first) {
                // A marker (the coordinator's own writes): fenced by the epochs only.
                if let Some(marker) = transactions::read_marker(&data) {
                    let fenced = self.producers.check_marker(
                        first.producer_id,
                        first.producer_epoch,
                        marker,
                    );
                    if let Some((code, msg)) = fenced {
                        return Ok(Appended::Refused(code, msg));
                    }
                }
            } else {
                match self.producers.check(&first) {
                    Check::Append => {}
                    Check::Duplicate(meta) => return Ok(Appended::Duplicate(meta)),
                    Check::Error(code, msg) => return Ok(Appended::Refused(code, msg)),
                }
            }
        }
        let base = self.next_offset();
        let (next, headers) = batch::assign_offsets(&mut data, base, log_append_time);
        if headers.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no record batch to append",
            ));
        }
        self.make_files()?;
        let active = self.active();
        if active.size > 0 && active.size + data.len() as u64 > self.config.segment_bytes {
            self.roll()?;
        }
        let records: u64 = headers
            .iter()
            .map(|(_, h)| h.last_offset_delta as u64 + 1)
            .sum();
        self.segments.last_mut().unwrap().append(&data, &headers)?;
        for (pos, h) in &headers {
            if !transactions::is_control(h) {
                self.producers.update(h);
            } else if let Some(marker) = transactions::read_marker(&data[*pos..]) {
                if let Some(aborted) = self.producers.end_transaction(h, marker) {
                    self.aborted.push(aborted);
                }
            }
        }
        self.unflushed += records;
        Ok(Appended::New(base, next - 1, records))
    }

    /// Makes the directory and first segment file of a partition that had none (its first
    /// append). Their directory entries are fsynced by the next flush (`dir_unsynced`).
    fn make_files(&mut self) -> io::Result<()> {
        if self.on_disk {
            return Ok(());
        }
        fs::create_dir_all(&self.dir)?;
        let base = self.active().base_offset;
        *self.segments.last_mut().unwrap() = Segment::create(&self.dir, base, &self.files)?;
        self.on_disk = true;
        self.dir_unsynced = true;
        Ok(())
    }

    /// fsyncs the partition's directory and the data dir's entry for it (after `make_files`).
    pub fn sync_dirs(dir: &Path) -> io::Result<()> {
        sync_dir(dir)?;
        match dir.parent() {
            Some(parent) => sync_dir(parent),
            None => Ok(()),
        }
    }

    /// Seals the active segment (index written, everything fsynced) and starts a new one. On an
    /// error the old segment stays active (and the new file, if created, is removed again: left
    /// behind, an empty segment file would make the next start restart offsets at its base).
    fn roll(&mut self) -> io::Result<()> {
        let next = self.next_offset();
        let active = self.segments.last_mut().unwrap();
        active.sync_data()?;
        active.write_index(true)?;
        let seg = Segment::create(&self.dir, next, &self.files)?;
        if let Err(e) = sync_dir(&self.dir) {
            let _ = seg.remove_files();
            return Err(e);
        }
        self.segments.push(seg);
        Ok(())
    }

    fn segment_for(&self, offset: i64) -> usize {
        self.segments
            .partition_point(|s| s.base_offset <= offset)
            .saturating_sub(1)
    }

    /// Whole batches from the one holding `offset`, up to `max_bytes` (the first batch whole
    /// even when bigger, if `min_one`). None when `offset` is out of range.
    /// Batches starting at or after `upper` (the last stable offset of a read_committed fetch)
    /// are left out.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one: bool,
        upper: i64,
    ) -> io::Result<Option<Vec<u8>>> {
        if offset < self.log_start_offset() || offset > self.next_offset() {
            return Ok(None);
        }
        if offset >= upper {
            return Ok(Some(Vec::new()));
        }
        let mut i = self.segment_for(offset);
        while i < self.segments.len() {
            let seg = &self.segments[i];
            let rel = (offset - seg.base_offset).max(0) as u32;
            let from = seg.index.position_for_offset(rel);
            if let Some((start, first)) =
                seg.headers_from(from, |_, h| h.last_offset() >= offset)?
            {
                if first.base_offset >= upper {
                    return Ok(Some(Vec::new()));
                }
                let mut end = start + first.size as u64;
                if first.size > max_bytes {
                    return Ok(Some(if min_one {
                        seg.read_at(first.size, start)?
                    } else {
                        Vec::new()
                    }));
                }
                seg.headers_from(end, |_, h| {
                    if (end - start) as usize + h.size > max_bytes || h.base_offset >= upper {
                        return true;
                    }
                    end += h.size as u64;
                    false
                })?;
                return Ok(Some(seg.read_at((end - start) as usize, start)?));
            }
            i += 1;
        }
        Ok(Some(Vec::new()))
    }

    /// The first record at or after the log start with a timestamp >= `ts`, as (timestamp,
    /// offset). As Kafka's searchOffsetInLocalLog, only the first segment whose largest timestamp
    /// is >= `ts` is searched.
    pub fn offset_for_timestamp(&self, ts: i64) -> io::Result<Option<(i64, i64)>> {
        let Some(seg) = self.segments.iter().find(|s| s.max_timestamp >= ts) else {
            return Ok(None);
        };
        let start = self.log_start;
        let mut found = None;
        let from = seg.index.position_for_timestamp(ts);
        seg.headers_from(from, |pos, h| {
            if h.max_timestamp >= ts && h.last_offset() >= start {
                found = Some((pos, *h));
                return true;
            }
            false
        })?;
        // A batch with a large enough max timestamp may hold no such record at or after the
        // start (the start cuts it): then the next one is read.
        while let Some((pos, h)) = found.take() {
            let bytes = seg.read_at(h.size, pos)?;
            if let Some(hit) = batch::find_timestamp(&bytes, Some(ts), start) {
                return Ok(Some(hit));
            }
            seg.headers_from(pos + h.size as u64, |pos, h| {
                if h.max_timestamp >= ts {
                    found = Some((pos, *h));
                    return true;
                }
                false
            })?;
        }
        Ok(None)
    }

    /// The record with the largest timestamp (the first such), as (timestamp, offset).
    pub fn max_timestamp(&self) -> io::Result<Option<(i64, i64)>> {
        let Some(seg) = self.segments.iter().filter(|s| s.size > 0).reduce(|a, b| {
            if b.max_timestamp > a.max_timestamp {
                b
            } else {
                a
            }
        }) else {
            return Ok(None);
        };
        let wanted = seg.max_timestamp;
        if let Some((pos, h)) = seg.headers_from(0, |_, h| h.max_timestamp == wanted)? {
            let bytes = seg.read_at(h.size, pos)?;
            return Ok(batch::find_timestamp(&bytes, None, i64::MIN)
                .or(Some((h.max_timestamp, h.last_offset()))));
        }
        Ok(None)
    }

    /// Deletes old segments by `retention.ms` (newest timestamp older than that) and
    /// `retention.bytes` (while the log stays at least that big without them), oldest first.
    /// Returns how many went.
    pub fn apply_retention(&mut self, now_ms: i64) -> io::Result<usize> {
        let retention_ms = self.config.retention_ms;
        let expired = |seg: &Segment| {
            retention_ms >= 0 && seg.max_timestamp >= 0 && now_ms - seg.max_timestamp > retention_ms
        };
        let mut total = self.size() as i64;
        // Segments wholly below the log start first (left by a stop between DeleteRecords'
        // checkpoint and its deletions), as Kafka's deleteLogStartOffsetBreachedSegments.
        let mut remove = self.below_start();
        total -= self.segments[..remove]
            .iter()
            .map(|s| s.size as i64)
            .sum::<i64>();
        while remove + 1 < self.segments.len() {
            let seg = &self.segments[remove];
            let oversize = self.config.retention_bytes >= 0
                && total - seg.size as i64 >= self.config.retention_bytes;
            if !(expired(seg) || oversize) {
                break;
            }
            total -= seg.size as i64;
            remove += 1;
        }
        // As in Kafka, an expired active segment is rolled so it can go too; the log then starts
        // at its end offset.
        if remove + 1 == self.segments.len() && self.active().size > 0 && expired(self.active()) {
            self.roll()?;
            remove += 1;
        }
        self.remove_first(remove)?;
        Ok(remove)
    }

    /// DeleteRecords: moves the log start offset up to `offset` (the caller checked it is at
    /// most the high watermark), durably, then deletes the segments wholly below it. Returns the
    /// log start offset (the low watermark).
    pub fn delete_records(&mut self, offset: i64) -> io::Result<i64> {
        if offset > self.log_start {
            // The records below the new start are made durable before it is, so that after a
            // power loss the log never starts past its end.
            self.segments.last_mut().unwrap().sync_data()?;
            write_offset_file(&self.dir, LOG_START_FILE, offset)?;
            self.log_start = offset;
            self.producers.forget_before(offset);
            self.aborted.forget_before(offset);
            self.remove_first(self.below_start())?;
        }
        Ok(self.log_start)
    }

    /// How many segments lie wholly below the log start (the next one starts at or before it).
    fn below_start(&self) -> usize {
        self.segments
            .windows(2)
            .take_while(|w| w[1].base_offset <= self.log_start)
            .count()
    }

    /// Deletes the oldest `n` segments (never the active one); the log then starts at least at
    /// the first one left.
    fn remove_first(&mut self, n: usize) -> io::Result<()> {
        if n == 0 {
            return Ok(());
        }
        for seg in self.segments.drain(..n) {
            seg.remove_files()?;
        }
        self.log_start = self.log_start.max(self.segments[0].base_offset);
        self.producers.forget_before(self.log_start);
        self.aborted.forget_before(self.log_start);
        Ok(())
    }

    /// fsync of the active segment happens outside the lock; this marks what it covered.
    pub fn flushed(&mut self, records: u64) {
        self.unflushed = self.unflushed.saturating_sub(records);
    }

    /// Writes the active segment's index for a clean restart.
    pub fn close(&mut self) -> io::Result<()> {
        if !self.on_disk {
            return Ok(());
        }
        if self.dir_unsynced {
            Partition::sync_dirs(&self.dir)?;
            self.dir_unsynced = false;
        }
        let active = self.segments.last_mut().unwrap();
        active.sync_data()?;
        active.write_index(true)?;
        // The producer state as of the log end, so the next open need not walk the log.
        let old = self.snapshots()?;
        let path = self
            .dir
            .join(super::segment::file_name(self.next_offset(), "snapshot"));
        let tmp = path.with_extension("snapshot.tmp");
        let written = File::create(&tmp).and_then(|mut file| {
            std::io::Write::write_all(&mut file, &self.producers.encode(self.aborted.entries()))?;
            file.sync_data()
        });
        if let Err(e) = written.and_then(|()| fs::rename(&tmp, &path)) {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        for (_, stale) in old.into_iter().filter(|(_, p)| *p != path) {
            fs::remove_file(stale)?;
        }
        sync_dir(&self.dir)
    }

    #[cfg(test)]
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    #[cfg(test)]
    pub fn active_log_path(&self) -> PathBuf {
        self.active().log_path()
    }
}

pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// The stored log start offset; a file that cannot be read or parsed is noted and ignored (the
/// log then starts at its first segment).
fn read_log_start(dir: &Path, notes: &mut Vec<String>) -> Option<i64> {
    match fs::read_to_string(dir.join(LOG_START_FILE)) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => {
            notes.push(format!("ignored {LOG_START_FILE}: {e}"));
            None
        }
        Ok(text) => {
            let parsed = text.trim().parse().ok();
            if parsed.is_none() {
                notes.push(format!(
                    "ignored {LOG_START_FILE}: {:?} is not an offset",
                    text.trim()
                ));
            }
            parsed
        }
    }
}

/// Replaces a one-offset file of the partition's directory (the log start offset, the cleaner's
/// checkpoint) atomically and durably: temporary file, fsync, rename, fsync of the directory.
pub(super) fn write_offset_file(dir: &Path, name: &str, offset: i64) -> io::Result<()> {
    let path = dir.join(name);
    let tmp = path.with_extension("tmp");
    let written = File::create(&tmp).and_then(|mut file| {
        std::io::Write::write_all(&mut file, format!("{offset}\n").as_bytes())?;
        file.sync_data()
    });
    if let Err(e) = written.and_then(|()| fs::rename(&tmp, &path)) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    sync_dir(dir)
}
