//! One segment: a `.log` file of whole record batches named by its base offset (20 digits, as
//! Kafka names them), plus its sparse index. Reads and writes use positional I/O on a shared
//! file handle, so a flush thread can fsync it while the partition goes on.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::batch::{Header, HEADER_LEN};
use super::index::SparseIndex;

pub struct Segment {
    pub base_offset: i64,
    pub file: Arc<File>,
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
}

pub fn file_name(base_offset: i64, ext: &str) -> String {
    format!("{base_offset:020}.{ext}")
}

impl Segment {
    pub fn log_path(&self) -> PathBuf {
        self.dir.join(file_name(self.base_offset, "log"))
    }
    pub fn index_path(&self) -> PathBuf {
        self.dir.join(file_name(self.base_offset, "index"))
    }
    pub fn time_index_path(&self) -> PathBuf {
        self.dir.join(file_name(self.base_offset, "timeindex"))
    }

    pub fn create(dir: &Path, base_offset: i64) -> io::Result<Segment> {
        let path = dir.join(file_name(base_offset, "log"));
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path)?;
        Ok(Segment::with_file(dir, base_offset, file, 0))
    }

    /// Opens an existing segment file as it is; the caller loads or rebuilds the index.
    pub fn open(dir: &Path, base_offset: i64) -> io::Result<Segment> {
        let file = OpenOptions::new().read(true).write(true).open(dir.join(file_name(base_offset, "log")))?;
        let size = file.metadata()?.len();
        Ok(Segment::with_file(dir, base_offset, file, size))
    }

    fn with_file(dir: &Path, base_offset: i64, file: File, size: u64) -> Segment {
        Segment {
            base_offset,
            file: Arc::new(file),
            size,
            index: SparseIndex::default(),
            max_timestamp: -1,
            next_offset: base_offset,
            last_batch: None,
            dir: dir.to_path_buf(),
        }
    }

    /// Writes whole batches (offsets already assigned) at the end and indexes them.
    pub fn append(&mut self, data: &[u8], batches: &[(usize, Header)]) -> io::Result<()> {
        self.file.write_all_at(data, self.size)?;
        for (pos, h) in batches {
            self.note_batch(self.size + *pos as u64, h);
        }
        self.size += data.len() as u64;
        Ok(())
    }

    /// Updates the in-memory state for a batch found (or written) at `position`.
    pub fn note_batch(&mut self, position: u64, h: &Header) {
        let rel = (h.base_offset - self.base_offset) as u32;
        self.max_timestamp = self.max_timestamp.max(h.max_timestamp);
        self.index.on_batch(rel, position, h.size as u64, self.max_timestamp);
        self.next_offset = h.last_offset() + 1;
        self.last_batch = Some((position, rel));
    }

    pub fn read_at(&self, len: usize, position: u64) -> io::Result<Vec<u8>> {
        let mut buf = vec![0; len];
        self.file.read_exact_at(&mut buf, position)?;
        Ok(buf)
    }

    /// The batch header at `position`, if a whole batch starts there.
    pub fn header_at(&self, position: u64) -> io::Result<Option<Header>> {
        if position + HEADER_LEN as u64 > self.size {
            return Ok(None);
        }
        let mut buf = [0u8; HEADER_LEN];
        self.file.read_exact_at(&mut buf, position)?;
        Ok(Header::parse(&buf).filter(|h| position + h.size as u64 <= self.size))
    }

    /// Headers from `position` on, until `stop` says enough or the batches end.
    pub fn headers_from(
        &self,
        mut position: u64,
        mut stop: impl FnMut(u64, &Header) -> bool,
    ) -> io::Result<Option<(u64, Header)>> {
        while let Some(h) = self.header_at(position)? {
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
        self.index.write(&self.index_path(), &self.time_index_path(), sync)
    }

    pub fn remove_files(&self) -> io::Result<()> {
        for path in [self.log_path(), self.index_path(), self.time_index_path()] {
            match fs::remove_file(&path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }
}
