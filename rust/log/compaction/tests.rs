//! The cleaner's rules, record by record, and its crash safety at each step of a swap.

use super::*;
use crate::log::batch::{build, records as read_records, KeyValue, NO_PRODUCER};
use crate::log::files::FileCache;
use crate::log::partition::Config;
use crate::log::transactions::{Marker, ATTR_TRANSACTIONAL};

const NOW: i64 = 1_000_000;

fn cfg(now_ms: i64) -> CleanConfig {
    CleanConfig {
        now_ms,
        min_cleanable_ratio: 0.0,
        delete_retention_ms: 1000,
        min_compaction_lag_ms: 0,
        max_compaction_lag_ms: i64::MAX,
        map_bytes: 1 << 20,
        max_batch_bytes: 1 << 20,
    }
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("corral-clean-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

fn open(dir: &Path) -> Arc<Mutex<Partition>> {
    let config = Config {
        segment_bytes: 400,
        retention_ms: -1,
        retention_bytes: -1,
    };
    let (p, _) = Partition::open(dir, config, false, &FileCache::new(4)).unwrap();
    Arc::new(Mutex::new(p))
}

fn kv(key: &str, value: Option<&str>) -> KeyValue {
    (
        Some(key.as_bytes().to_vec()),
        value.map(|v| v.as_bytes().to_vec()),
    )
}

/// Every record of the partition: (offset, key, value).
fn all(p: &Arc<Mutex<Partition>>) -> Vec<(i64, String, Option<String>)> {
    let p = p.lock().unwrap();
    let mut data = Vec::new();
    let mut next = p.log_start_offset();
    // A read stops at its segment's end: read on from the offset after it.
    while let Some(chunk) = p
        .read(next, 1 << 30, true, i64::MAX)
        .unwrap()
        .filter(|c| !c.is_empty())
    {
        let mut pos = 0;
        while pos < chunk.len() {
            let h = Header::parse(&chunk[pos..]).unwrap();
            next = h.last_offset() + 1;
            pos += h.size;
        }
        data.extend_from_slice(&chunk);
    }
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        let h = Header::parse(&data[pos..]).unwrap();
        let batch = &data[pos..pos + h.size];
        let recs = if h.compressed() {
            let raw = codecs::decompress(h.attributes & 7, &batch[HEADER_LEN..], 1 << 20).unwrap();
            let mut plain = batch[..HEADER_LEN].to_vec();
            plain[21..23].copy_from_slice(&(h.attributes & !7).to_be_bytes());
            plain.extend_from_slice(&raw);
            let len = (plain.len() - 12) as i32;
            plain[8..12].copy_from_slice(&len.to_be_bytes());
            read_records(&plain).unwrap()
        } else if is_control(&h) {
            Vec::new()
        } else {
            read_records(batch).unwrap()
        };
        for r in recs {
            let s = |b: Option<Vec<u8>>| b.map(|b| String::from_utf8(b).unwrap());
            out.push((r.offset, s(r.key).unwrap_or_default(), s(r.value)));
        }
        pos += h.size;
    }
    out
}

fn append(p: &Arc<Mutex<Partition>>, records: &[KeyValue], ts: i64) {
    p.lock()
        .unwrap()
        .append(build(records, ts, NO_PRODUCER), None)
        .unwrap();
}

fn compressed(records: &[KeyValue], codec: i16) -> Vec<u8> {
    let plain = build(records, NOW, NO_PRODUCER);
    let mut out = plain[..HEADER_LEN].to_vec();
    out.extend_from_slice(&codecs::compress(codec, &plain[HEADER_LEN..]).unwrap());
    let len = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&len.to_be_bytes());
    out[21..23].copy_from_slice(&codec.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

/// Three rounds of keys a..d (the last round writes b as a tombstone), in segments of ~400
/// bytes, then one more batch so that the rest is sealed.
fn rounds(p: &Arc<Mutex<Partition>>) {
    for round in 0..3 {
        for key in ["a", "b", "c", "d"] {
            let value = format!("{key}{round}");
            let v = if round == 2 && key == "b" {
                None
            } else {
                Some(value.as_str())
            };
            append(p, &[kv(key, v)], NOW - 10_000);
        }
    }
    // An active segment that is never cleaned.
    for i in 0..8 {
        append(p, &[kv("z", Some(&format!("z{i}")))], NOW);
    }
}

#[test]
fn the_last_record_of_each_key_stays_at_its_offset() {
    let dir = tmp("keys");
    let p = open(&dir);
    rounds(&p);
    let before = all(&p);
    let done = clean(&p, &cfg(NOW)).unwrap().expect("eligible");
    assert!(
        done.bytes_after < done.bytes_before && done.records_removed > 0,
        "{done:?}"
    );
    let after = all(&p);
    let cleaned: Vec<_> = after.iter().filter(|r| r.1 != "z").cloned().collect();
    assert_eq!(
        cleaned,
        vec![
            (8, "a".into(), Some("a2".into())),
            (9, "b".into(), None), // the tombstone, kept until its horizon
            (10, "c".into(), Some("c2".into())),
            (11, "d".into(), Some("d2".into())),
        ]
    );
    // Every record left is the one that was at its offset.
    for r in &after {
        assert!(before.contains(r), "{r:?}");
    }
    // Nothing new: not eligible again (ratio 0 over no dirty bytes).
    assert!(clean(&p, &cfg(NOW)).unwrap().is_none());
    // Past the tombstone's horizon, a pass (forced by new dirty data) drops it.
    for i in 0..8 {
        append(&p, &[kv("y", Some(&format!("y{i}")))], NOW);
    }
    clean(&p, &cfg(NOW + 2000)).unwrap().expect("eligible");
    assert!(!all(&p).iter().any(|r| r.1 == "b"));
    // After a restart the partition reads the same.
    let kept = all(&p);
    drop(p);
    assert_eq!(all(&open(&dir)), kept);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn compressed_batches_are_rewritten_with_their_codec() {
    for codec in [1i16, 2, 3, 4] {
        let dir = tmp(&format!("codec{codec}"));
        let p = open(&dir);
        let batch = compressed(
            &[kv("a", Some("1")), kv("b", Some("1")), kv("a", Some("2"))],
            codec,
        );
        p.lock().unwrap().append(batch, None).unwrap();
        for i in 0..12 {
            append(&p, &[kv("z", Some(&format!("{i}")))], NOW);
        }
        clean(&p, &cfg(NOW)).unwrap().expect("eligible");
        let first = p
            .lock()
            .unwrap()
            .read(0, 1 << 20, true, i64::MAX)
            .unwrap()
            .unwrap();
        let h = Header::parse(&first).unwrap();
        assert_eq!(
            (h.attributes & 7, h.base_offset, h.last_offset()),
            (codec, 0, 2)
        );
        assert!(crate::log::batch::crc_ok(&first[..h.size], &h));
        let kept: Vec<_> = all(&p).into_iter().filter(|r| r.0 < 3).collect();
        assert_eq!(
            kept,
            vec![
                (1, "b".into(), Some("1".into())),
                (2, "a".into(), Some("2".into()))
            ]
        );
        let _ = fs::remove_dir_all(&dir);
    }
}

#[test]
fn aborted_transactions_are_dropped_and_markers_kept() {
    let dir = tmp("txn");
    let p = open(&dir);
    let mut txn = build(&[kv("a", Some("aborted"))], NOW, (7, 0, 0));
    txn[21..23].copy_from_slice(&ATTR_TRANSACTIONAL.to_be_bytes());
    let crc = crc32c::crc32c(&txn[21..]);
    txn[17..21].copy_from_slice(&crc.to_be_bytes());
    append(&p, &[kv("a", Some("kept"))], NOW);
    p.lock().unwrap().append(txn, None).unwrap();
    p.lock()
        .unwrap()
        .write_marker(
            7,
            0,
            Marker {
                commit: false,
                coordinator_epoch: 0,
            },
            NOW,
        )
        .unwrap();
    for i in 0..12 {
        append(&p, &[kv("z", Some(&format!("{i}")))], NOW);
    }
    clean(&p, &cfg(NOW)).unwrap().expect("eligible");
    let left: Vec<_> = all(&p).into_iter().filter(|r| r.1 == "a").collect();
    assert_eq!(left, vec![(0, "a".into(), Some("kept".into()))]);
    // The marker (offset 2) is still there.
    let data = p
        .lock()
        .unwrap()
        .read(2, 1 << 20, true, i64::MAX)
        .unwrap()
        .unwrap();
    let h = Header::parse(&data).unwrap();
    assert!(is_control(&h) && h.base_offset == 2);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_crash_leaves_the_old_segments_or_the_new_one() {
    for stage in ["cleaned", "swap", "swap-half", "deleted"] {
        let dir = tmp(&format!("crash-{stage}"));
        let p = open(&dir);
        rounds(&p);
        let before = all(&p);
        let mut plan = p.lock().unwrap().clean_plan(&cfg(NOW)).unwrap().unwrap();
        plan.segment_bytes = 1 << 20; // one cleaned file for all the sealed segments
        assert!(plan.segments.len() >= 3);
        let (outputs, _) = build_cleaned(&plan, &cfg(NOW)).unwrap();
        let out = &outputs[0];
        let swap = dir.join(format!("{}.swap", file_name(out.replaced[0], "log")));
        match stage {
            "cleaned" => {}
            "swap" => fs::rename(&out.path, &swap).unwrap(),
            "swap-half" => {
                // The swap and some old segments already renamed `.deleted`.
                fs::rename(&out.path, &swap).unwrap();
                let second = dir.join(file_name(out.replaced[1], "log"));
                fs::rename(&second, second.with_extension("log.deleted")).unwrap();
            }
            _ => {
                fs::rename(&out.path, &swap).unwrap();
                replace_with_swap(&dir, &swap, &out.replaced).unwrap();
            }
        }
        drop(p);
        let reopened = all(&open(&dir));
        let leftovers: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap") || n.ends_with(".deleted"))
            .collect();
        assert!(leftovers.is_empty(), "{stage}: {leftovers:?}");
        if stage == "cleaned" {
            assert_eq!(reopened, before, "{stage}: the old segments");
        } else {
            assert!(
                reopened.len() < before.len(),
                "{stage}: the cleaned segment"
            );
            assert!(reopened.iter().all(|r| before.contains(r)), "{stage}");
            assert!(
                reopened.iter().any(|r| r.2.as_deref() == Some("a2")),
                "{stage}"
            );
        }
        let _ = fs::remove_dir_all(&dir);
    }
}

#[test]
fn compaction_lags_and_the_dirty_ratio_decide_when() {
    let dir = tmp("lags");
    let p = open(&dir);
    rounds(&p); // the sealed segments' records are 10 s old
    let never_due = CleanConfig {
        min_cleanable_ratio: 1.0,
        ..cfg(NOW)
    };
    assert!(
        clean(&p, &never_due).unwrap().is_none(),
        "below the dirty ratio"
    );
    // Younger than min.compaction.lag.ms: not cleaned, whatever the ratio.
    let young = CleanConfig {
        min_compaction_lag_ms: 60_000,
        ..cfg(NOW)
    };
    assert!(
        clean(&p, &young).unwrap().is_none(),
        "within min.compaction.lag.ms"
    );
    // Older than max.compaction.lag.ms: cleaned although below the ratio.
    let overdue = CleanConfig {
        max_compaction_lag_ms: 5_000,
        ..never_due
    };
    assert!(
        clean(&p, &overdue).unwrap().is_some(),
        "past max.compaction.lag.ms"
    );
    let _ = fs::remove_dir_all(&dir);
}
