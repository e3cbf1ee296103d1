//! One segment: a `.log` file of whole record batches named by its base offset (20 digits, as
//! Kafka names them), plus its sparse index. Reads and writes use positional I/O on a shared
//! file handle from the store's bounded cache of open files (files.rs), so a flush thread can
//! fsync it while the partition goes on.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::batch::{Header, HEADER_LEN};
use super::files::FileCache;
use super::index::SparseIndex;

pub struct Segment {
    pub base_offset: i64,
    /// Bytes of whole batches in the file.
    pub size: u64,
    pub index: SparseIndex,
    /// Largest batch max_timestamp in the segment (-1 when empty).
    pub max_timestamp: i64,
    /// Offset after the segment's last batch.
    pub next_offset: i64,
    /// Position and relative offset of the last batch, for sealing the index.
    pub last_batch: Option<(u64, u32)>,
    dir: PathBuf,
    /// The `.log` file, opened through `files` when needed (no descriptor of its own).
    path: PathBuf,
    id: u64,
    files: Arc<FileCache>,
    /// A failed write may have left bytes past `size` that cutting them off did not remove:
    /// cut before the next write or seal.
    torn_tail: bool,
}

pub fn file_name(base_offset: i64, ext: &str) -> String {
    format!("{base_offset:020}.{ext}")
}

impl Segment {
    pub fn log_path(&self) -> PathBuf {
        self.path.clone()
    }
    pub fn index_path(&self) -> PathBuf {
        self.dir.join(file_name(self.base_offset, "index"))
    }
    pub fn time_index_path(&self) -> PathBuf {
        self.dir.join(file_name(self.base_offset, "timeindex"))
    }

    pub fn create(dir: &Path, base_offset: i64, files: &Arc<FileCache>) -> io::Result<Segment> {
        let path = dir.join(file_name(base_offset, "log"));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        let seg = Segment::new(dir, base_offset, files, 0);
        files.insert(seg.id, Arc::new(file));
        Ok(seg)
    }

    /// A segment whose file does not exist yet (a partition nothing was written to); `create`
    /// replaces it before the first write.
    pub fn unborn(dir: &Path, base_offset: i64, files: &Arc<FileCache>) -> Segment {
        Segment::new(dir, base_offset, files, 0)
    }

    /// An existing segment file as it is (not opened: its size is all that is read here); the
    /// caller loads or rebuilds the index.
    pub fn open(dir: &Path, base_offset: i64, files: &Arc<FileCache>) -> io::Result<Segment> {
        let size = fs::metadata(dir.join(file_name(base_offset, "log")))?.len();
        Ok(Segment::new(dir, base_offset, files, size))
    }

    fn new(dir: &Path, base_offset: i64, files: &Arc<FileCache>, size: u64) -> Segment {
        Segment {
            base_offset,
            size,
            index: SparseIndex::default(),
            max_timestamp: -1,
            next_offset: base_offset,
            last_batch: None,
            dir: dir.to_path_buf(),
            path: dir.join(file_name(base_offset, "log")),
            id: files.new_id(),
            files: files.clone(),
            torn_tail: false,
        }
    }

    /// The open file, from the store's cache (opened on a miss).
    pub fn file(&self) -> io::Result<Arc<File>> {
        self.files.get(self.id, &self.path)
    }

    /// Writes whole batches (offsets already assigned) at the end and indexes them. On an error
    /// nothing changes in memory, and what part of `data` reached the file is cut off again (or,
    /// if that fails too, before the next write).
    pub fn append(&mut self, data: &[u8], batches: &[(usize, Header)]) -> io::Result<()> {
        let file = self.file()?;
        self.cut_torn_tail(&file)?;
        if let Err(e) = file.write_all_at(data, self.size) {
            self.torn_tail = file.set_len(self.size).is_err();
            return Err(e);
        }
        for (pos, h) in batches {
            self.note_batch(self.size + *pos as u64, h);
        }
        self.size += data.len() as u64;
        Ok(())
    }

    fn cut_torn_tail(&mut self, file: &File) -> io::Result<()> {
        if self.torn_tail {
            file.set_len(self.size)?;
            self.torn_tail = false;
        }
        Ok(())
    }

    /// fsyncs the file's data (what a roll or a clean shutdown needs before sealing).
    pub fn sync_data(&mut self) -> io::Result<()> {
        let file = self.file()?;
        self.cut_torn_tail(&file)?;
        file.sync_data()
    }

    /// Updates the in-memory state for a batch found (or written) at `position`.
    pub fn note_batch(&mut self, position: u64, h: &Header) {
        let rel = (h.base_offset - self.base_offset) as u32;
        self.max_timestamp = self.max_timestamp.max(h.max_timestamp);
        self.index
            .on_batch(rel, position, h.size as u64, self.max_timestamp);
        self.next_offset = h.last_offset() + 1;
        self.last_batch = Some((position, rel));
    }

    pub fn read_at(&self, len: usize, position: u64) -> io::Result<Vec<u8>> {
        let mut buf = vec![0; len];
        self.file()?.read_exact_at(&mut buf, position)?;
        Ok(buf)
    }

    /// The batch header at `position`, if a whole batch starts there.
    fn header_at(&self, file: &File, position: u64) -> io::Result<Option<Header>> {
        if position + HEADER_LEN as u64 > self.size {
            return Ok(None);
        }
        let mut buf = [0u8; HEADER_LEN];
        file.read_exact_at(&mut buf, position)?;
        Ok(Header::parse(&buf).filter(|h| position + h.size as u64 <= self.size))
    }

    /// Headers from `position` on, until `stop` says enough or the batches end.
    pub fn headers_from(
        &self,
        mut position: u64,
        mut stop: impl FnMut(u64, &Header) -> bool,
    ) -> io::Result<Option<(u64, Header)>> {
        if position + HEADER_LEN as u64 > self.size {
            return Ok(None);
        }
        let file = self.file()?;
        while let Some(h) = self.header_at(&file, position)? {
            if stop(position, &h) {
                return Ok(Some((position, h)));
            }
            position += h.size as u64;
        }
        Ok(None)
    }

    /// Writes the index files (fsynced when `sync`), sealing the index with the last batch.
    pub fn write_index(&mut self, sync: bool) -> io::Result<()> {
        if let Some((pos, rel)) = self.last_batch {
            self.index.seal(rel, pos, self.max_timestamp);
        }
        self.index
            .write(&self.index_path(), &self.time_index_path(), sync)
    }

    pub fn remove_files(&self) -> io::Result<()> {
        self.files.forget(self.id);
        for path in [self.log_path(), self.index_path(), self.time_index_path()] {
            match fs::remove_file(&path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        self.files.forget(self.id);
    }
}
