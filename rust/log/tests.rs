use super::batch::{build, ProducerFields, NO_PRODUCER};
use super::partition::{Appended, Config, Partition};
use std::io::Write;

fn config(segment_bytes: u64) -> Config {
    Config {
        segment_bytes,
        retention_ms: -1,
        retention_bytes: -1,
    }
}

/// A small cache, so that the tests also reopen evicted files.
fn files() -> std::sync::Arc<super::files::FileCache> {
    super::files::FileCache::new(2)
}

fn tmp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("corral-log-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn batch_of(n: usize, ts: i64) -> Vec<u8> {
    producer_batch(n, ts, NO_PRODUCER)
}

fn producer_batch(n: usize, ts: i64, producer: ProducerFields) -> Vec<u8> {
    let recs: Vec<_> = (0..n).map(|i| (None, Some(vec![b'x'; 100 + i]))).collect();
    build(&recs, ts, producer)
}

#[test]
fn a_partition_has_no_files_until_its_first_append() {
    let dir = tmp("unborn");
    for clean in [true, false] {
        let (mut p, _) = Partition::open(&dir, config(4000), clean, &files()).unwrap();
        assert!(
            !dir.exists(),
            "opening, reading and closing an empty partition touch no file"
        );
        assert_eq!((p.log_start_offset(), p.next_offset()), (0, 0));
        assert_eq!(p.read(0, 100, true, i64::MAX).unwrap(), Some(vec![]));
        assert_eq!(p.read(1, 100, true, i64::MAX).unwrap(), None);
        assert_eq!(p.offset_for_timestamp(0).unwrap(), None);
        assert_eq!(p.max_timestamp().unwrap(), None);
        assert_eq!(p.apply_retention(i64::MAX).unwrap(), 0);
        p.close().unwrap();
        assert!(!dir.exists());
    }
    let (mut p, _) = Partition::open(&dir, config(4000), false, &files()).unwrap();
    assert_eq!(
        p.append(batch_of(2, 5), None).unwrap(),
        Appended::New(0, 1, 2)
    );
    assert!(
        p.dir_unsynced && p.active_log_path().exists(),
        "the first append makes the files"
    );
    p.close().unwrap();
    assert!(!p.dir_unsynced);
    let (p, _) = Partition::open(&dir, config(4000), true, &files()).unwrap();
    assert_eq!(p.next_offset(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn append_read_roll_and_reopen() {
    let dir = tmp("roll");
    let (mut p, _) = Partition::open(&dir, config(4000), false, &files()).unwrap();
    for i in 0..50 {
        let appended = p.append(batch_of(3, 1000 + i), None).unwrap();
        assert_eq!(appended, Appended::New(i * 3, i * 3 + 2, 3));
    }
    assert!(p.segment_count() >= 4, "segments rolled by size");
    let got = p.read(31, 1 << 20, true, i64::MAX).unwrap().unwrap();
    let recs = super::batch::records(&got).unwrap();
    assert_eq!(
        recs[0].offset, 30,
        "reads start at the batch holding the offset"
    );
    assert_eq!(p.read(150, 100, true, i64::MAX).unwrap(), Some(vec![]));
    assert_eq!(p.read(151, 100, true, i64::MAX).unwrap(), None);
    assert_eq!(p.offset_for_timestamp(1020).unwrap(), Some((1020, 60)));
    assert_eq!(p.max_timestamp().unwrap(), Some((1049, 147)));
    p.close().unwrap();
    drop(p);
    for clean in [true, false] {
        let (p, notes) = Partition::open(&dir, config(4000), clean, &files()).unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(p.next_offset(), 150);
        assert_eq!(p.offset_for_timestamp(1020).unwrap(), Some((1020, 60)));
        let all = p.read(0, 1 << 30, true, i64::MAX).unwrap().unwrap();
        assert!(!all.is_empty());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn torn_tail_is_truncated_and_missing_index_rebuilt() {
    let dir = tmp("torn");
    let (mut p, _) = Partition::open(&dir, config(1 << 20), false, &files()).unwrap();
    for i in 0..10 {
        p.append(batch_of(2, i), None).unwrap();
    }
    let path = p.active_log_path();
    drop(p);
    let good = std::fs::metadata(&path).unwrap().len();
    // A torn write: half of a valid batch, then garbage.
    let half = batch_of(2, 99);
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(&half[..half.len() / 2])
        .unwrap();
    let (mut p, notes) = Partition::open(&dir, config(1 << 20), false, &files()).unwrap();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), good);
    assert_eq!(p.next_offset(), 20);
    assert_eq!(
        p.append(batch_of(1, 5), None).unwrap(),
        Appended::New(20, 20, 1)
    );
    // A flipped bit inside the last batch: CRC catches it.
    drop(p);
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 3] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let (p, notes) = Partition::open(&dir, config(1 << 20), false, &files()).unwrap();
    assert!(notes[0].contains("CRC"), "{notes:?}");
    assert_eq!(p.next_offset(), 20);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sealed_segment_index_rebuilt_when_missing() {
    let dir = tmp("reindex");
    let (mut p, _) = Partition::open(&dir, config(2000), false, &files()).unwrap();
    for i in 0..30 {
        p.append(batch_of(2, i), None).unwrap();
    }
    p.close().unwrap();
    drop(p);
    let index = dir.join(super::segment::file_name(0, "index"));
    std::fs::remove_file(&index).unwrap();
    let (p, notes) = Partition::open(&dir, config(2000), true, &files()).unwrap();
    assert!(notes.iter().any(|n| n.contains("rebuilt")), "{notes:?}");
    assert!(index.exists());
    assert_eq!(p.next_offset(), 60);
    let got = p.read(1, 1 << 20, true, i64::MAX).unwrap().unwrap();
    assert_eq!(super::batch::records(&got).unwrap()[0].offset, 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

fn idempotent(n: usize, pid: i64, epoch: i16, seq: i32) -> Vec<u8> {
    producer_batch(n, 0, (pid, epoch, seq))
}

#[test]
fn producer_state_survives_reopen() {
    let dir = tmp("producers");
    let (mut p, _) = Partition::open(&dir, config(1 << 20), false, &files()).unwrap();
    assert_eq!(
        p.append(idempotent(3, 9, 0, 0), None).unwrap(),
        Appended::New(0, 2, 3)
    );
    assert_eq!(
        p.append(idempotent(2, 9, 0, 3), None).unwrap(),
        Appended::New(3, 4, 2)
    );
    drop(p);
    let (mut p, _) = Partition::open(&dir, config(1 << 20), false, &files()).unwrap();
    match p.append(idempotent(2, 9, 0, 3), None).unwrap() {
        Appended::Duplicate(meta) => assert_eq!((meta.first_offset, meta.last_offset), (3, 4)),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        p.append(idempotent(1, 9, 0, 7), None).unwrap(),
        Appended::Refused(45, _)
    ));
    assert_eq!(
        p.append(idempotent(1, 9, 0, 5), None).unwrap(),
        Appended::New(5, 5, 1)
    );
    assert_eq!(p.next_offset(), 6);
    // A clean close leaves a snapshot; the next open starts from it.
    p.close().unwrap();
    drop(p);
    assert!(dir.join(super::segment::file_name(6, "snapshot")).exists());
    let (mut p, _) = Partition::open(&dir, config(1 << 20), true, &files()).unwrap();
    assert!(matches!(
        p.append(idempotent(1, 9, 0, 5), None).unwrap(),
        Appended::Duplicate(_)
    ));
    assert_eq!(
        p.append(idempotent(1, 9, 0, 6), None).unwrap(),
        Appended::New(6, 6, 1)
    );
    // After an unclean stop, the snapshot plus the batches after it.
    drop(p);
    let (mut p, _) = Partition::open(&dir, config(1 << 20), false, &files()).unwrap();
    assert!(matches!(
        p.append(idempotent(1, 9, 0, 6), None).unwrap(),
        Appended::Duplicate(_)
    ));
    assert!(matches!(
        p.append(idempotent(1, 9, 0, 9), None).unwrap(),
        Appended::Refused(45, _)
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn retention_by_size_and_time() {
    let dir = tmp("retention");
    let (mut p, _) = Partition::open(&dir, config(1000), false, &files()).unwrap();
    for i in 0..40 {
        p.append(batch_of(2, i * 1000), None).unwrap();
    }
    let segments = p.segment_count();
    p.config.retention_bytes = 3000;
    let removed = p.apply_retention(0).unwrap();
    assert!(removed > 0 && p.size() < 3000 + 1000);
    assert_eq!(p.segment_count(), segments - removed);
    p.config.retention_bytes = -1;
    p.config.retention_ms = 1;
    p.apply_retention(10_000_000).unwrap();
    assert_eq!(
        p.segment_count(),
        1,
        "everything expired, the active segment too"
    );
    assert_eq!((p.log_start_offset(), p.next_offset()), (80, 80));
    assert_eq!(
        p.read(0, 100, true, i64::MAX).unwrap(),
        None,
        "offsets before the log start are out of range"
    );
    assert_eq!(
        p.append(batch_of(1, 0), None).unwrap(),
        Appended::New(80, 80, 1)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn delete_records_moves_the_log_start_durably() {
    let dir = tmp("delete-records");
    let (mut p, _) = Partition::open(&dir, config(1000), false, &files()).unwrap();
    for i in 0..40 {
        p.append(batch_of(2, i * 10), None).unwrap();
    }
    let segments = p.segment_count();
    assert_eq!(
        p.delete_records(0).unwrap(),
        0,
        "not past the start: nothing changes"
    );
    // Offset 31 is inside a batch (30, 31) and inside a segment.
    assert_eq!(p.delete_records(31).unwrap(), 31);
    assert!(
        p.segment_count() < segments,
        "whole segments below the start are gone"
    );
    assert_eq!(
        p.read(30, 100, true, i64::MAX).unwrap(),
        None,
        "below the start is out of range"
    );
    let got = p.read(31, 1 << 20, true, i64::MAX).unwrap().unwrap();
    assert_eq!(
        super::batch::records(&got).unwrap()[0].offset,
        30,
        "whole batches, as Kafka"
    );
    assert_eq!(
        p.offset_for_timestamp(0).unwrap(),
        Some((150, 31)),
        "timestamps from the start on"
    );
    assert_eq!(
        p.delete_records(20).unwrap(),
        31,
        "the start never moves back"
    );
    drop(p);
    for clean in [false, true] {
        let (mut p, notes) = Partition::open(&dir, config(1000), clean, &files()).unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!((p.log_start_offset(), p.next_offset()), (31, 80));
        p.close().unwrap();
    }
    // Up to the end: the active segment stays, empty of readable records.
    let (mut p, _) = Partition::open(&dir, config(1000), true, &files()).unwrap();
    assert_eq!(p.delete_records(80).unwrap(), 80);
    assert_eq!(p.segment_count(), 1);
    assert_eq!(p.read(80, 100, true, i64::MAX).unwrap(), Some(vec![]));
    assert_eq!(
        p.append(batch_of(1, 0), None).unwrap(),
        Appended::New(80, 80, 1)
    );
    drop(p);
    // A start file left ahead of segments that were not deleted (a stop in between): the
    // next retention pass deletes them.
    std::fs::write(dir.join("log-start-offset"), "81\n").unwrap();
    let (mut p, _) = Partition::open(&dir, config(1000), false, &files()).unwrap();
    assert_eq!(p.log_start_offset(), 81);
    p.append(batch_of(30, 0), None).unwrap();
    assert_eq!(p.segment_count(), 2);
    assert_eq!(p.apply_retention(0).unwrap(), 1);
    assert_eq!((p.log_start_offset(), p.next_offset()), (81, 111));
    std::fs::write(dir.join("log-start-offset"), "junk").unwrap();
    let (p, notes) = Partition::open(&dir, config(1000), false, &files()).unwrap();
    assert!(notes[0].contains("not an offset"), "{notes:?}");
    assert_eq!(p.log_start_offset(), 81, "the first segment's base");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn many_partitions_share_a_few_open_files() {
    let root = tmp("fds");
    let files = super::files::FileCache::new(3);
    let mut parts = Vec::new();
    for i in 0..20 {
        let (p, _) =
            Partition::open(&root.join(format!("t-{i}")), config(600), false, &files).unwrap();
        parts.push(p);
        assert!(files.len() <= 3);
    }
    for round in 0..5 {
        for (i, p) in parts.iter_mut().enumerate() {
            p.append(batch_of(2, round * 100 + i as i64), None).unwrap();
            p.active_file().unwrap().sync_data().unwrap();
            assert!(files.len() <= 3);
        }
    }
    for p in &parts {
        assert!(p.segment_count() > 1, "rolled");
        let mut offsets: Vec<i64> = Vec::new();
        loop {
            let next = offsets.last().map_or(0, |o| o + 1);
            let data = p.read(next, 1 << 20, true, i64::MAX).unwrap().unwrap();
            if data.is_empty() {
                break;
            }
            let mut pos = 0;
            while pos < data.len() {
                offsets.extend(
                    super::batch::records(&data[pos..])
                        .unwrap()
                        .iter()
                        .map(|r| r.offset),
                );
                pos += super::batch::Header::parse(&data[pos..]).unwrap().size;
            }
        }
        assert_eq!(offsets, (0..10).collect::<Vec<_>>());
    }
    for p in parts.iter_mut().take(10) {
        p.close().unwrap();
    }
    drop(parts);
    assert_eq!(files.len(), 0, "dropped segments leave the cache");
    for (i, clean) in (0..20).map(|i| (i, i < 10)) {
        let (p, notes) =
            Partition::open(&root.join(format!("t-{i}")), config(600), clean, &files).unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(p.next_offset(), 10);
        assert!(files.len() <= 3);
    }
    std::fs::remove_dir_all(&root).unwrap();
}

fn transactional(n: usize, pid: i64, epoch: i16, seq: i32) -> Vec<u8> {
    let mut b = producer_batch(n, 5, (pid, epoch, seq));
    b[21..23].copy_from_slice(&super::transactions::ATTR_TRANSACTIONAL.to_be_bytes());
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

#[test]
fn transactions_bound_the_stable_offset_and_survive_reopen() {
    use super::transactions::Marker;
    let dir = tmp("txn");
    let commit = Marker {
        commit: true,
        coordinator_epoch: 0,
    };
    let abort = Marker {
        commit: false,
        coordinator_epoch: 0,
    };
    let (mut p, _) = Partition::open(&dir, config(1 << 20), false, &files()).unwrap();
    p.append(batch_of(2, 5), None).unwrap(); // 0-1
    p.append(transactional(2, 7, 0, 0), None).unwrap(); // 2-3, producer 7 opens
    p.append(transactional(1, 8, 0, 0), None).unwrap(); // 4, producer 8 opens
    assert_eq!(p.stable_offset(), 2);
    // read_committed stops at the stable offset.
    let committed = p
        .read(0, 1 << 20, true, p.stable_offset())
        .unwrap()
        .unwrap();
    assert_eq!(
        super::batch::Header::parse(&committed)
            .unwrap()
            .last_offset(),
        1
    );
    assert_eq!(committed.len(), batch_of(2, 5).len());
    assert_eq!(p.read(2, 1 << 20, true, 2).unwrap(), Some(vec![]));
    assert_eq!(
        p.write_marker(7, 0, commit, 9).unwrap(),
        Appended::New(5, 5, 1)
    );
    assert_eq!(p.stable_offset(), 4);
    assert_eq!(
        p.write_marker(8, 0, abort, 9).unwrap(),
        Appended::New(6, 6, 1)
    );
    assert_eq!(p.stable_offset(), 7);
    assert_eq!(p.aborted_overlapping(0, 7), vec![(8, 4)]);
    assert_eq!(p.aborted_overlapping(7, 8), vec![]);
    // A plain batch of a producer in a transaction is refused; its next transaction opens anew.
    p.append(transactional(1, 7, 0, 2), None).unwrap(); // 7
    assert!(matches!(
        p.append(producer_batch(1, 5, (7, 0, 3)), None).unwrap(),
        Appended::Refused(super::producers::INVALID_TXN_STATE, _)
    ));
    assert_eq!(p.stable_offset(), 7);
    for clean in [true, false] {
        if clean {
            p.close().unwrap();
        } else {
            // No snapshot: the state comes from walking the log, markers included.
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "snapshot") {
                    std::fs::remove_file(path).unwrap();
                }
            }
        }
        let (again, _) = Partition::open(&dir, config(1 << 20), clean, &files()).unwrap();
        assert_eq!(again.stable_offset(), 7, "clean={clean}");
        assert_eq!(
            again.aborted_overlapping(0, 8),
            vec![(8, 4)],
            "clean={clean}"
        );
        assert_eq!(
            again.producer(7).map(|(e, _, open)| (e, open)),
            Some((0, true))
        );
        assert_eq!(again.producer(8).map(|(_, _, open)| open), Some(false));
        p = again;
    }
    // A marker from an older epoch is fenced.
    p.write_marker(7, 1, abort, 9).unwrap();
    assert!(matches!(
        p.write_marker(7, 0, commit, 9).unwrap(),
        Appended::Refused(super::producers::INVALID_PRODUCER_EPOCH, _)
    ));
    assert_eq!(p.stable_offset(), p.next_offset());
    assert_eq!(p.aborted_overlapping(0, 100), vec![(8, 4), (7, 7)]);
    let _ = std::fs::remove_dir_all(&dir);
}
