"""`corral analyze --data-dir`: the inputs (corral.analyze.inputs) read from corral's own data
directory, without a broker (one may be running: see below).

- commits: a group's commits all live in one `__consumer_offsets` partition, so the partitions
  are the splits of the Spark job (corral.analyze.job.analyze_data_dir: `commit_splits`), each
  task reading its partition's segments by path (so on a standalone cluster the workers must
  see the same directory); the compiled core decodes a segment into Arrow buffers
  (`_core.decode_offset_commits`), wrapped here as one `pyarrow.RecordBatch` with no Python
  object per record (`commits_table`).
- samples and events: `__corral_analytics` is read on the driver (`_core.decode_analytics_records`:
  samples as lines of JSON parsed in bulk, events as records), into Arrow tables
  (corral.analyze.inputs.analytics_records).

`--from/--to`: a rolled segment whose time index says its newest record is older than `from` is
not read at all; the core skips batches older than `from` and keeps the commits whose time is in
the window (from_ms <= time_ms < to_ms, as `inputs.in_window`).

A broker writing to the directory meanwhile: each segment is read as far as it was when opened;
a batch cut short (being written) or failing its CRC ends the segment there, as the broker's own
recovery would cut it. Segments deleted by retention between listing and reading are skipped.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from corral import _core
from corral.analyze.inputs import analytics_records
from corral.analyze.lag_rows import sort_samples
from corral.observability.analytics_topic import TOPIC as ANALYTICS_TOPIC

log = logging.getLogger("corral.analyze.segments")

OFFSETS_TOPIC = "__consumer_offsets"
COMMITS = pa.schema(
    [
        ("group", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("time_ms", pa.int64()),
        ("offset", pa.int64()),
        ("seq", pa.int64()),
    ]
)
_TIME_ENTRY = struct.Struct(">qI")  # .timeindex: max timestamp so far, relative offset


def partition_dirs(data_dir: str, topic: str) -> list[Path]:
    """The directories `<topic>-<n>` of a topic, by partition number."""
    found = []
    for entry in Path(data_dir).glob(f"{topic}-*"):
        number = entry.name[len(topic) + 1 :]
        if number.isdigit() and entry.is_dir():
            found.append((int(number), entry))
    return [path for _, path in sorted(found)]


def segment_files(directory: Path) -> list[Path]:
    """The `.log` files of a partition directory, by base offset (named as the broker names
    them)."""
    bases = sorted(int(p.stem) for p in directory.glob("*.log") if p.stem.isdigit())
    return [directory / f"{base:020d}.log" for base in bases]


def newest_ms(segment: Path) -> int | None:
    """The newest record time of a rolled segment, from its time index (None if unknown)."""
    try:
        data = segment.with_suffix(".timeindex").read_bytes()
    except OSError:
        return None
    if not data or len(data) % _TIME_ENTRY.size:
        return None
    return _TIME_ENTRY.unpack_from(data, len(data) - _TIME_ENTRY.size)[0]


def commit_splits(data_dir: str, from_ms: int | None) -> list[tuple[int, list[str]]]:
    """(partition number, its segments that may hold commits at or after `from_ms`) per
    `__consumer_offsets` partition with any, the most bytes first (the longest tasks start
    first). Only rolled segments are judged by their time index: the active one's is rewritten
    only at a roll or a clean shutdown, so it may be stale."""
    splits = []
    for directory in partition_dirs(data_dir, OFFSETS_TOPIC):
        files = segment_files(directory)
        paths = []
        for i, segment in enumerate(files):
            newest = newest_ms(segment) if i + 1 < len(files) else None
            if from_ms is not None and newest is not None and newest < from_ms:
                continue
            paths.append(str(segment))
        if paths:
            number = int(directory.name[len(OFFSETS_TOPIC) + 1 :])
            splits.append((sum(_size(p) for p in paths), number, paths))
    return [(number, paths) for _, number, paths in sorted(splits, key=lambda s: -s[0])]


def _stopped(path: str, at: int | None, why: str) -> None:
    if at is not None:
        # A torn batch is usually one a running broker is writing; a bad CRC is damage.
        level = logging.INFO if why == "torn" else logging.WARNING
        log.log(level, "%s: stopped at byte %d of %d (%s batch)", path, at, _size(path), why)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return -1


def commit_batches(
    path: str, from_ms: int | None = None, to_ms: int | None = None
) -> Iterator[pa.RecordBatch]:
    """The commits of one `__consumer_offsets` segment as RecordBatches of the COMMITS schema
    (none if the file is gone)."""
    try:
        rows, buffers, at, why = _core.decode_offset_commits(path, from_ms, to_ms)
    except FileNotFoundError:  # deleted by retention since it was listed
        return
    _stopped(path, at, why)
    if not rows:
        return
    b = [pa.py_buffer(x) for x in buffers]
    columns = [
        pa.Array.from_buffers(pa.string(), rows, [None, b[0], b[1]]),
        pa.Array.from_buffers(pa.string(), rows, [None, b[2], b[3]]),
    ]
    columns += [
        pa.Array.from_buffers(t, rows, [None, buf])
        for t, buf in zip((pa.int32(), pa.int64(), pa.int64(), pa.int64()), b[4:])
    ]
    yield pa.RecordBatch.from_arrays(columns, schema=COMMITS)


def read_analytics(data_dir: str) -> analytics_records.Split:
    """The samples and events of `__corral_analytics` (one partition); none if it is missing."""
    samples, events, skipped = [], [], 0
    for directory in partition_dirs(data_dir, ANALYTICS_TOPIC):
        for segment in segment_files(directory):
            try:
                rows, (lines, offsets, times), others, at, why = _core.decode_analytics_records(
                    str(segment)
                )
            except FileNotFoundError:
                continue
            _stopped(str(segment), at, why)
            table, bad = analytics_records.samples_of_lines(
                lines,
                *(
                    pa.Array.from_buffers(pa.int64(), rows, [None, pa.py_buffer(b)])
                    for b in (offsets, times)
                ),
            )
            rest = analytics_records.split(others)
            samples += [table, rest.samples]
            events.append(rest.events)
            skipped += bad + rest.skipped
    return analytics_records.Split(
        pa.concat_tables(samples) if samples else analytics_records.SAMPLES.empty_table(),
        pa.concat_tables(events) if events else analytics_records.EVENTS.empty_table(),
        skipped,
    )


def commits_table(
    paths: list[str], from_ms: int | None = None, to_ms: int | None = None
) -> pa.Table:
    """The commits of segments (in log order) as one table of the COMMITS schema."""
    batches = [b for path in paths for b in commit_batches(path, from_ms, to_ms)]
    return pa.Table.from_batches(batches, schema=COMMITS)


def read_data_dir(
    data_dir: str, from_ms: int | None = None, to_ms: int | None = None
) -> analytics_records.Split:
    """The samples and events in corral's data directory `data_dir`, in the window
    [from_ms, to_ms), the samples sorted as the job wants them (lag_rows.sort_samples: this runs
    while Spark starts); the commits are read by the job's tasks (`commit_splits`)."""
    if not Path(data_dir).is_dir():
        raise FileNotFoundError(f"{data_dir} is not a directory")
    split = read_analytics(data_dir)
    if split.skipped:
        log.info(
            "%d %s records of an unknown kind or version skipped", split.skipped, ANALYTICS_TOPIC
        )
    return analytics_records.Split(
        sort_samples(_in_window(split.samples, from_ms, to_ms)),
        _in_window(split.events, from_ms, to_ms),
        split.skipped,
    )


def _in_window(table: pa.Table, from_ms: int | None, to_ms: int | None) -> pa.Table:
    keep = pc.and_(
        pc.greater_equal(table["time_ms"], from_ms if from_ms is not None else -(2**63)),
        pc.less(table["time_ms"], to_ms if to_ms is not None else 2**63 - 1),
    )
    return table.filter(keep)
