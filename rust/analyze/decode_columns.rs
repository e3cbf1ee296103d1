//! Segment files read straight from a data directory, for `corral analyze --data-dir`
//! (corral.analyze.inputs.segments): no broker, no log store, the files opened by path.
//!
//! - `decode_offset_commits`: one `__consumer_offsets` segment into columns in Arrow's layout
//!   (strings as int32 offsets + utf-8 data, fixed-width columns little endian), so Python wraps
//!   them with `pyarrow.Array.from_buffers` without a Python object per record.
//! - `decode_analytics_records`: one `__corral_analytics` segment: its `log_end` samples as lines of
//!   JSON for pyarrow's reader, its other records as (offset, timestamp, key, value) tuples.
//!
//! Both read the batches that were whole when the file was opened and stop at the first one that
//! is not whole or whose CRC-32C does not match (a batch being written by a running broker, or a
//! torn tail it would cut at recovery), reporting where. CRCs are checked, as Kafka's readers
//! and corral's recovery do: hardware crc32c made no difference measurable next to the
//! decoding. Compressed batches are refused (corral never compresses its internal topics).

use std::fs::File;
use std::io::{self, BufReader, Read};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::groups::records::codec::{self, Value};
use crate::groups::records::schema;
use crate::log::batch::{self, crc_ok, Header, HEADER_LEN};

const ATTR_CONTROL: i16 = 0x20;
const READ_BUFFER: usize = 1 << 20;

/// Why reading a segment stopped before its end.
#[derive(Debug, PartialEq, Eq)]
pub enum Stop {
    /// Every byte was a whole, valid batch.
    End,
    /// The batch at this position is cut short (or its header is).
    Torn(u64),
    /// The batch at this position fails its CRC or cannot be a v2 batch.
    Invalid(u64),
}

/// Walks the whole, valid batches of the segment at `path`, as its size was when opened, calling
/// `each(batch bytes, header)`. Err on I/O errors, on a compressed batch, or what `each` returns.
fn walk(
    path: &str,
    mut each: impl FnMut(&[u8], &Header) -> Result<(), String>,
) -> io::Result<Result<Stop, String>> {
    let file = File::open(path)?;
    let size = file.metadata()?.len();
    let mut reader = BufReader::with_capacity(READ_BUFFER, file.take(size));
    let mut buf = vec![0u8; HEADER_LEN];
    let mut position = 0u64;
    while position < size {
        buf.resize(HEADER_LEN, 0);
        if position + HEADER_LEN as u64 > size {
            return Ok(Ok(Stop::Torn(position)));
        }
        if !read_whole(&mut reader, &mut buf)? {
            return Ok(Ok(Stop::Torn(position)));
        }
        let header = match Header::parse(&buf) {
            Some(h) if h.magic == 2 => h,
            _ => return Ok(Ok(Stop::Invalid(position))),
        };
        if position + header.size as u64 > size {
            return Ok(Ok(Stop::Torn(position)));
        }
        buf.resize(header.size, 0);
        if !read_whole(&mut reader, &mut buf[HEADER_LEN..])? {
            return Ok(Ok(Stop::Torn(position)));
        }
        if !crc_ok(&buf, &header) {
            return Ok(Ok(Stop::Invalid(position)));
        }
        if header.compressed() {
            return Ok(Err(format!("{path}: compressed batch at byte {position} (corral never compresses internal topics)")));
        }
        if header.attributes & ATTR_CONTROL == 0 {
            if let Err(e) = each(&buf, &header) {
                return Ok(Err(format!("{path}: batch at byte {position}: {e}")));
            }
        }
        position += header.size as u64;
    }
    Ok(Ok(Stop::End))
}

/// Fills `buf`; false if the file ended first (a broker's recovery cut it while it was read).
fn read_whole(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<bool> {
    match reader.read_exact(buf) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

/// Columns of commits in Arrow's layout.
#[derive(Debug, Default)]
pub struct Columns {
    pub rows: usize,
    pub group_offsets: Vec<u8>,
    pub group_data: Vec<u8>,
    pub topic_offsets: Vec<u8>,
    pub topic_data: Vec<u8>,
    pub partition: Vec<u8>,
    pub time_ms: Vec<u8>,
    pub offset: Vec<u8>,
    pub seq: Vec<u8>,
}

impl Columns {
    fn new() -> Columns {
        let mut c = Columns::default();
        c.group_offsets.extend_from_slice(&0i32.to_le_bytes());
        c.topic_offsets.extend_from_slice(&0i32.to_le_bytes());
        c
    }

    fn push(&mut self, commit: &Commit, seq: i64) -> Result<(), String> {
        push_string(
            &mut self.group_data,
            &mut self.group_offsets,
            commit.group.as_bytes(),
        )?;
        push_string(
            &mut self.topic_data,
            &mut self.topic_offsets,
            commit.topic.as_bytes(),
        )?;
        self.partition
            .extend_from_slice(&commit.partition.to_le_bytes());
        self.time_ms
            .extend_from_slice(&commit.time_ms.to_le_bytes());
        self.offset.extend_from_slice(&commit.offset.to_le_bytes());
        self.seq.extend_from_slice(&seq.to_le_bytes());
        self.rows += 1;
        Ok(())
    }
}

fn push_string(data: &mut Vec<u8>, offsets: &mut Vec<u8>, text: &[u8]) -> Result<(), String> {
    std::str::from_utf8(text).map_err(|_| "a group or topic name is not utf-8".to_string())?;
    data.extend_from_slice(text);
    let end = i32::try_from(data.len())
        .map_err(|_| "more than 2 GiB of names in one segment".to_string())?;
    offsets.extend_from_slice(&end.to_le_bytes());
    Ok(())
}

/// One OffsetCommit record's fields.
#[derive(Debug, PartialEq, Eq)]
pub struct Commit {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub time_ms: i64,
    pub offset: i64,
}

/// The commit an OffsetCommitKey v0/v1 + OffsetCommitValue v0..v4 hold, read by the records'
/// one decoder (groups/records/); Ok(None) for any other record (group metadata, consumer-group
/// records, tombstones), Err if it cannot be decoded.
pub fn commit(key: &[u8], value: Option<&[u8]>) -> Result<Option<Commit>, String> {
    let kind = codec::Reader::new(key)
        .i16()
        .map_err(|_| "record key shorter than 2 bytes")?;
    let Some(value) = value else { return Ok(None) };
    if !schema::OFFSET_COMMIT.types.contains(&kind) {
        return Ok(None);
    }
    let bad_key = |e: String| format!("malformed OffsetCommitKey: {e}");
    let (_, fields) = codec::decode_key(key).map_err(bad_key)?;
    let (group, topic, partition) = match fields.as_deref() {
        Some([Value::Str(group), Value::Str(topic), Value::Int(partition)]) => (
            group.clone().unwrap_or_default(),
            topic.clone().unwrap_or_default(),
            *partition as i32,
        ),
        _ => return Err(bad_key("unexpected fields".into())),
    };
    let (_, values) = codec::decode_value(&schema::OFFSET_COMMIT, value)
        .map_err(|e| format!("malformed OffsetCommitValue (or a version newer than 4): {e}"))?;
    let (Value::Int(offset), Value::Int(time_ms)) = (&values[0], &values[3]) else {
        unreachable!("the schema's offset and commit timestamp are integers")
    };
    Ok(Some(Commit {
        group,
        topic,
        partition,
        time_ms: *time_ms,
        offset: *offset,
    }))
}

/// Appends the commits of one whole uncompressed batch whose commit time is in [from, to).
fn batch_commits(
    batch: &[u8],
    header: &Header,
    from_ms: i64,
    to_ms: i64,
    out: &mut Columns,
) -> Result<(), String> {
    let end = header.size;
    let mut pos = HEADER_LEN;
    let malformed = || "malformed record".to_string();
    for _ in 0..header.records_count {
        let len = batch::get_varint(&batch[..end], &mut pos).ok_or_else(malformed)?;
        let rec_end = usize::try_from(len)
            .ok()
            .and_then(|l| pos.checked_add(l))
            .filter(|&e| e <= end)
            .ok_or_else(malformed)?;
        let rec = &batch[..rec_end];
        pos += 1; // attributes
        batch::get_varint(rec, &mut pos).ok_or_else(malformed)?; // timestamp delta
        let offset_delta = batch::get_varint(rec, &mut pos).ok_or_else(malformed)?;
        let key = bytes_field(rec, &mut pos).ok_or_else(malformed)?;
        let value = bytes_field(rec, &mut pos).ok_or_else(malformed)?;
        let key = key.ok_or("a record with a null key")?;
        if let Some(c) = commit(key, value)? {
            if c.time_ms >= from_ms && c.time_ms < to_ms {
                out.push(&c, header.base_offset + offset_delta)?;
            }
        }
        pos = rec_end;
    }
    Ok(())
}

fn bytes_field<'a>(rec: &'a [u8], pos: &mut usize) -> Option<Option<&'a [u8]>> {
    let len = batch::get_varint(rec, pos)?;
    if len < 0 {
        return Some(None);
    }
    let stop = pos.checked_add(len as usize).filter(|&s| s <= rec.len())?;
    let out = &rec[*pos..stop];
    *pos = stop;
    Some(Some(out))
}

/// The commits of one `__consumer_offsets` segment file with from_ms <= commit time < to_ms, and
/// where reading stopped. Batches whose max timestamp is before `from_ms` are not decoded
/// (corral stamps a commit's batch with its commit time).
pub fn offset_commits(
    path: &str,
    from_ms: i64,
    to_ms: i64,
) -> io::Result<Result<(Columns, Stop), String>> {
    let mut out = Columns::new();
    let stop = walk(path, |b, h| {
        if h.max_timestamp < from_ms {
            return Ok(());
        }
        batch_commits(b, h, from_ms, to_ms, &mut out)
    })?;
    Ok(stop.map(|s| (out, s)))
}

fn stopped_at(stop: Stop) -> (Option<u64>, &'static str) {
    match stop {
        Stop::End => (None, ""),
        Stop::Torn(p) => (Some(p), "torn"),
        Stop::Invalid(p) => (Some(p), "invalid"),
    }
}

/// (rows, [group offsets, group data, topic offsets, topic data, partition, time_ms, offset,
/// seq] as bytes, byte where reading stopped or None at the end, "torn"/"invalid"/"").
type OffsetColumns<'py> = (usize, Vec<Bound<'py, PyBytes>>, Option<u64>, &'static str);

/// The commits of one `__consumer_offsets` segment as Arrow buffers (see the module doc).
/// ValueError names the file for a compressed or undecodable batch; OSError if it cannot be read.
#[pyfunction]
#[pyo3(signature = (path, from_ms=None, to_ms=None))]
pub fn decode_offset_commits<'py>(
    py: Python<'py>,
    path: &str,
    from_ms: Option<i64>,
    to_ms: Option<i64>,
) -> PyResult<OffsetColumns<'py>> {
    let (from_ms, to_ms) = (from_ms.unwrap_or(i64::MIN), to_ms.unwrap_or(i64::MAX));
    let (c, stop) = py
        .detach(|| offset_commits(path, from_ms, to_ms))?
        .map_err(PyValueError::new_err)?;
    let buffers = [
        c.group_offsets,
        c.group_data,
        c.topic_offsets,
        c.topic_data,
        c.partition,
        c.time_ms,
        c.offset,
        c.seq,
    ];
    let (at, why) = stopped_at(stop);
    Ok((
        c.rows,
        buffers.iter().map(|b| PyBytes::new(py, b)).collect(),
        at,
        why,
    ))
}

/// (offset, timestamp ms, key, value) of each record.
type RecordTuple = (i64, i64, Option<Vec<u8>>, Option<Vec<u8>>);

const LOG_END_KEY: &[u8] = b"log_end";

/// The `log_end` samples of an analytics segment, for `pyarrow.json`: their values one per line
/// (values holding a line break are left to the other records), offsets and timestamps.
#[derive(Default)]
pub struct LogEndLines {
    pub rows: usize,
    pub lines: Vec<u8>,
    pub offsets: Vec<u8>,
    pub timestamps: Vec<u8>,
}

/// An analytics segment's records: its `log_end` lines and every other record.
type AnalyticsRecords = (LogEndLines, Vec<RecordTuple>);

/// One `__corral_analytics` segment: its `log_end` records as lines of JSON (most of the topic:
/// one per changed partition per sample interval, parsed in bulk by pyarrow rather than one by
/// one), every other record as a (offset, timestamp, key, value) tuple, in log order, and where
/// reading stopped (as above).
pub fn analytics_records(path: &str) -> io::Result<Result<(AnalyticsRecords, Stop), String>> {
    let mut samples = LogEndLines::default();
    let mut others = Vec::new();
    let stop = walk(path, |b, _| {
        for r in batch::records(b).ok_or("malformed record")? {
            match (&r.key, &r.value) {
                (Some(k), Some(v))
                    if k.as_slice() == LOG_END_KEY
                        && !v.iter().any(|&c| c == b'\n' || c == b'\r') =>
                {
                    samples.lines.extend_from_slice(v);
                    samples.lines.push(b'\n');
                    samples.offsets.extend_from_slice(&r.offset.to_le_bytes());
                    samples
                        .timestamps
                        .extend_from_slice(&r.timestamp.to_le_bytes());
                    samples.rows += 1;
                }
                _ => others.push((r.offset, r.timestamp, r.key, r.value)),
            }
        }
        Ok(())
    })?;
    Ok(stop.map(|s| ((samples, others), s)))
}

/// (log_end rows, [lines, offsets, timestamps] as bytes, the other records, byte where reading
/// stopped or None, "torn"/"invalid"/"").
type AnalyticsColumns<'py> = (
    usize,
    Vec<Bound<'py, PyBytes>>,
    Vec<RecordTuple>,
    Option<u64>,
    &'static str,
);

/// `analytics_records` for Python: ValueError names the file for a compressed or undecodable
/// batch; OSError if it cannot be read.
#[pyfunction]
pub fn decode_analytics_records<'py>(
    py: Python<'py>,
    path: &str,
) -> PyResult<AnalyticsColumns<'py>> {
    let ((s, others), stop) = py
        .detach(|| analytics_records(path))?
        .map_err(PyValueError::new_err)?;
    let (at, why) = stopped_at(stop);
    let buffers = [s.lines, s.offsets, s.timestamps]
        .iter()
        .map(|b| PyBytes::new(py, b))
        .collect();
    Ok((s.rows, buffers, others, at, why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::groups::offset_records::{offset_key, offset_value};
    use crate::log::batch::{build, KeyValue, NO_PRODUCER};
    use std::io::Write;

    fn commit_record(group: &str, topic: &str, partition: i32, offset: i64, ms: i64) -> KeyValue {
        (
            Some(offset_key(group, topic, partition).unwrap()),
            Some(offset_value(offset, 5, "meta", ms, -1).unwrap()),
        )
    }

    /// A batch placed at `base` (the store's offset assignment, CRC recomputed).
    fn placed(records: &[KeyValue], ms: i64, base: i64) -> Vec<u8> {
        let mut b = build(records, ms, NO_PRODUCER);
        batch::assign_offsets(&mut b, base, None);
        b
    }

    fn write(name: &str, bytes: &[u8]) -> String {
        let path =
            std::env::temp_dir().join(format!("corral-decode-{name}-{}.log", std::process::id()));
        std::fs::File::create(&path)
            .unwrap()
            .write_all(bytes)
            .unwrap();
        path.to_string_lossy().into_owned()
    }

    fn i64s(b: &[u8]) -> Vec<i64> {
        b.chunks(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    fn strings(offsets: &[u8], data: &[u8]) -> Vec<String> {
        let ends: Vec<usize> = offsets
            .chunks(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as usize)
            .collect();
        ends.windows(2)
            .map(|w| String::from_utf8(data[w[0]..w[1]].to_vec()).unwrap())
            .collect()
    }

    /// A v0 key with a v1 value (Kafka's oldest layout), a v4 value (flexible), a tombstone and
    /// a group metadata record: only the two commits are rows.
    fn mixed_batch(base: i64) -> Vec<u8> {
        let mut key0 = offset_key("g0", "t0", 7).unwrap();
        key0[..2].copy_from_slice(&0i16.to_be_bytes());
        let mut v4 = 4i16.to_be_bytes().to_vec();
        v4.extend_from_slice(&42i64.to_be_bytes());
        v4.extend_from_slice(&(-1i32).to_be_bytes());
        v4.extend_from_slice(&[3, b'm', b'd']); // compact "md"
        v4.extend_from_slice(&900i64.to_be_bytes());
        v4.push(0); // no tagged fields
        let group_key = [&2i16.to_be_bytes()[..], &2i16.to_be_bytes(), b"gx"].concat();
        placed(
            &[
                (
                    Some(key0),
                    Some(offset_value(11, -1, "", 800, 5000).unwrap()),
                ),
                (Some(offset_key("g1", "topic-b", 0).unwrap()), Some(v4)),
                (Some(offset_key("g1", "topic-b", 1).unwrap()), None),
                (Some(group_key), Some(vec![0, 3, 0, 0])),
            ],
            900,
            base,
        )
    }

    #[test]
    fn decodes_commits_into_arrow_columns() {
        let mut seg = placed(
            &[
                commit_record("grp", "t", 2, 100, 500),
                commit_record("grp", "u", 0, 7, 500),
            ],
            500,
            0,
        );
        seg.extend(mixed_batch(2));
        let path = write("columns", &seg);
        let (c, stop) = offset_commits(&path, i64::MIN, i64::MAX).unwrap().unwrap();
        assert_eq!(stop, Stop::End);
        assert_eq!(c.rows, 4);
        assert_eq!(
            strings(&c.group_offsets, &c.group_data),
            ["grp", "grp", "g0", "g1"]
        );
        assert_eq!(
            strings(&c.topic_offsets, &c.topic_data),
            ["t", "u", "t0", "topic-b"]
        );
        let parts: Vec<i32> = c
            .partition
            .chunks(4)
            .map(|b| i32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(parts, [2, 0, 7, 0]);
        assert_eq!(i64s(&c.offset), [100, 7, 11, 42]);
        assert_eq!(i64s(&c.time_ms), [500, 500, 800, 900]);
        assert_eq!(i64s(&c.seq), [0, 1, 2, 3]);
        // The window: by the value's commit time, [from, to).
        let (c, _) = offset_commits(&path, 800, 900).unwrap().unwrap();
        assert_eq!(i64s(&c.offset), [11]);
    }

    #[test]
    fn stops_at_a_torn_tail_and_at_a_bad_crc() {
        let first = placed(&[commit_record("g", "t", 0, 1, 10)], 10, 0);
        let second = placed(&[commit_record("g", "t", 0, 2, 11)], 11, 1);
        for cut in [1, HEADER_LEN - 1, HEADER_LEN + 3, second.len() - 1] {
            let path = write("torn", &[&first[..], &second[..cut]].concat());
            let (c, stop) = offset_commits(&path, i64::MIN, i64::MAX).unwrap().unwrap();
            assert_eq!(
                (c.rows, stop),
                (1, Stop::Torn(first.len() as u64)),
                "cut at {cut}"
            );
        }
        let mut bad = second.clone();
        *bad.last_mut().unwrap() ^= 1;
        let path = write("crc", &[&first[..], &bad[..]].concat());
        let (c, stop) = offset_commits(&path, i64::MIN, i64::MAX).unwrap().unwrap();
        assert_eq!((c.rows, stop), (1, Stop::Invalid(first.len() as u64)));
        let path = write("zeros", &[&first[..], &[0u8; 100][..]].concat());
        assert_eq!(
            offset_commits(&path, i64::MIN, i64::MAX)
                .unwrap()
                .unwrap()
                .1,
            Stop::Invalid(first.len() as u64)
        );
    }

    #[test]
    fn refuses_compressed_batches_naming_the_file() {
        let mut b = placed(&[commit_record("g", "t", 0, 1, 10)], 10, 0);
        b[22] |= 1; // gzip
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        let path = write("gzip", &b);
        let err = offset_commits(&path, i64::MIN, i64::MAX)
            .unwrap()
            .unwrap_err();
        assert!(err.contains(&path) && err.contains("compressed"), "{err}");
    }

    #[test]
    fn log_end_samples_become_lines_and_the_rest_tuples() {
        let kv = |k: &[u8], v: &[u8]| (Some(k.to_vec()), Some(v.to_vec()));
        let records = [
            kv(
                b"log_end",
                br#"{"v":1,"topic":"t","partition":0,"log_end_offset":5}"#,
            ),
            kv(b"group_event", br#"{"v":1,"event":"member_joined"}"#),
            kv(b"log_end", b"{\"v\":1,\n\"topic\":\"u\"}"), // a line break: left to Python
            kv(
                b"log_end",
                br#"{"v":1,"topic":"t","partition":1,"log_end_offset":9}"#,
            ),
        ];
        let path = write("analytics", &placed(&records, 70, 10));
        let ((s, others), stop) = analytics_records(&path).unwrap().unwrap();
        assert_eq!((s.rows, stop), (2, Stop::End));
        let text = String::from_utf8(s.lines).unwrap();
        assert_eq!(
            text.lines().collect::<Vec<_>>(),
            [
                r#"{"v":1,"topic":"t","partition":0,"log_end_offset":5}"#,
                r#"{"v":1,"topic":"t","partition":1,"log_end_offset":9}"#,
            ]
        );
        assert_eq!(
            (i64s(&s.offsets), i64s(&s.timestamps)),
            (vec![10, 13], vec![70, 70])
        );
        let others: Vec<(i64, Vec<u8>)> = others
            .into_iter()
            .map(|(o, _, k, _)| (o, k.unwrap()))
            .collect();
        assert_eq!(
            others,
            [(11, b"group_event".to_vec()), (12, b"log_end".to_vec())]
        );
    }

    #[test]
    fn missing_file_is_an_io_error() {
        assert_eq!(
            offset_commits("/nonexistent/0.log", 0, 1)
                .map(|_| ())
                .unwrap_err()
                .kind(),
            io::ErrorKind::NotFound
        );
    }
}
