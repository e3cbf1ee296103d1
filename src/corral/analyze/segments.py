"""`corral analyze --data-dir`: the inputs (corral.analyze.inputs) read from corral's own data
directory, without a broker (one may be running: see below).

- commits: the segments of the `__consumer_offsets-<n>` partition directories are the splits of
  a Spark Python data source (`corral_offset_commits`), small ones packed together as Spark packs
  small files (a task costs tens of ms; a data dir holds 50 mostly small partitions). The driver
  only lists the files; each task opens its segments by path (so on a standalone cluster the workers must see the same
  directory) and the compiled core decodes it into Arrow buffers (`_core.decode_offset_commits`),
  wrapped here as one `pyarrow.RecordBatch` with no Python object per record.
- samples and events: `__corral_analytics` is small; its segments are read on the driver
  (`_core.segment_records`) and split by analytics_records.split.

`--from/--to`: a rolled segment whose time index says its newest record is older than `from` is
not read at all; the core skips batches older than `from` and keeps the commits whose time is in
the window; the rows are then still filtered by `inputs.in_window` (the contract).

A broker writing to the directory meanwhile: each segment is read as far as it was when opened;
a batch cut short (being written) or failing its CRC ends the segment there, as the broker's own
recovery would cut it. Segments deleted by retention between listing and reading are skipped.
"""

from __future__ import annotations

import logging
import os
import struct
import weakref
from pathlib import Path
from typing import Iterator

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from .. import _core
from ..analytics_log import TOPIC as ANALYTICS_TOPIC
from . import analytics_records
from .inputs import COMMITS_SCHEMA, Inputs, in_window

log = logging.getLogger("corral.analyze.segments")

OFFSETS_TOPIC = "__consumer_offsets"
SOURCE = "corral_offset_commits"
COMMITS = pa.schema([("group", pa.string()), ("topic", pa.string()), ("partition", pa.int32()),
                     ("time_ms", pa.int64()), ("offset", pa.int64()), ("seq", pa.int64())])
# Rows per RecordBatch handed to Spark: bounds the Arrow batches the JVM holds at once.
BATCH_ROWS = 1 << 18
# Bytes of segments per split: at most a segment's default size, at least enough that a small
# data dir is a split or two per core (spark.sql.files.maxPartitionBytes / openCostInBytes).
MAX_SPLIT_BYTES = 128 << 20
MIN_SPLIT_BYTES = 4 << 20
_TIME_ENTRY = struct.Struct(">qI")  # .timeindex: max timestamp so far, relative offset
# Sessions the data source is registered with (registering again logs a WARN each time).
_registered: weakref.WeakSet = weakref.WeakSet()


def partition_dirs(data_dir: str, topic: str) -> list[Path]:
    """The directories `<topic>-<n>` of a topic, by partition number."""
    found = []
    for entry in Path(data_dir).glob(f"{topic}-*"):
        number = entry.name[len(topic) + 1:]
        if number.isdigit() and entry.is_dir():
            found.append((int(number), entry))
    return [path for _, path in sorted(found)]


def segment_files(directory: Path) -> list[Path]:
    """The `.log` files of a partition directory, by base offset (named as the broker names them)."""
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


def pack(paths: list[str], parallelism: int) -> list[list[str]]:
    """Consecutive segments grouped into splits of about the same number of bytes: at most
    MAX_SPLIT_BYTES, and for small totals about one per core."""
    sizes = [_size(p) for p in paths]
    target = min(MAX_SPLIT_BYTES, max(MIN_SPLIT_BYTES, sum(sizes) // max(parallelism, 1)))
    splits: list[list[str]] = []
    filled = target
    for path, size in zip(paths, sizes):
        if filled + size > target:
            splits.append([])
            filled = 0
        splits[-1].append(path)
        filled += size
    return splits


def commit_segments(data_dir: str, from_ms: int | None) -> list[str]:
    """The `__consumer_offsets` segments that may hold commits at or after `from_ms`. Only
    rolled segments are judged by their time index: the active one's is rewritten only at a
    roll or a clean shutdown, so it may be stale."""
    paths = []
    for directory in partition_dirs(data_dir, OFFSETS_TOPIC):
        files = segment_files(directory)
        for i, segment in enumerate(files):
            newest = newest_ms(segment) if i + 1 < len(files) else None
            if from_ms is not None and newest is not None and newest < from_ms:
                continue
            paths.append(str(segment))
    return paths


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


def commit_batches(path: str, from_ms: int | None = None,
                   to_ms: int | None = None) -> Iterator[pa.RecordBatch]:
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
    columns = [pa.Array.from_buffers(pa.string(), rows, [None, b[0], b[1]]),
               pa.Array.from_buffers(pa.string(), rows, [None, b[2], b[3]])]
    columns += [pa.Array.from_buffers(t, rows, [None, buf])
                for t, buf in zip((pa.int32(), pa.int64(), pa.int64(), pa.int64()), b[4:])]
    batch = pa.RecordBatch.from_arrays(columns, schema=COMMITS)
    for start in range(0, rows, BATCH_ROWS):
        yield batch.slice(start, BATCH_ROWS)


def _optional_int(options: dict, name: str) -> int | None:
    value = options.get(name)
    return None if value in (None, "") else int(value)


class _Reader(DataSourceReader):
    def __init__(self, options: dict):
        self.data_dir = options["path"]
        self.from_ms = _optional_int(options, "from_ms")
        self.to_ms = _optional_int(options, "to_ms")
        self.parallelism = _optional_int(options, "parallelism") or 2

    def partitions(self) -> list[InputPartition]:
        # An empty directory still needs one (empty) split.
        splits = pack(commit_segments(self.data_dir, self.from_ms), self.parallelism)
        return [InputPartition(paths) for paths in splits] or [InputPartition([])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        for path in partition.value:
            yield from commit_batches(path, self.from_ms, self.to_ms)


class OffsetCommitsSource(DataSource):
    """`spark.read.format("corral_offset_commits").load(data_dir)`, options `from_ms`, `to_ms`,
    `parallelism` (splits wanted for a small directory): the commits of `__consumer_offsets` in a corral data directory."""

    @classmethod
    def name(cls) -> str:
        return SOURCE

    def schema(self) -> str:
        return COMMITS_SCHEMA

    def reader(self, schema) -> DataSourceReader:
        return _Reader(self.options)


def analytics_records_of(data_dir: str) -> Iterator[tuple[int, int, bytes | None, bytes | None]]:
    """The records of `__corral_analytics` (one partition) in log order; none if it is missing."""
    for directory in partition_dirs(data_dir, ANALYTICS_TOPIC):
        for segment in segment_files(directory):
            try:
                records, at, why = _core.segment_records(str(segment))
            except FileNotFoundError:
                continue
            _stopped(str(segment), at, why)
            yield from records


def read_commits(spark: SparkSession, data_dir: str, from_ms: int | None = None,
                 to_ms: int | None = None):
    if spark not in _registered:
        spark.dataSource.register(OffsetCommitsSource)
        _registered.add(spark)
    reader = spark.read.format(SOURCE)
    parallelism = spark.sparkContext.defaultParallelism
    for name, value in (("from_ms", from_ms), ("to_ms", to_ms), ("parallelism", parallelism)):
        if value is not None:
            reader = reader.option(name, str(value))
    return reader.load(data_dir)


def read_data_dir(spark: SparkSession, data_dir: str, from_ms: int | None = None,
                  to_ms: int | None = None) -> Inputs:
    """The inputs in corral's data directory `data_dir`, in the window [from_ms, to_ms)."""
    if not Path(data_dir).is_dir():
        raise FileNotFoundError(f"{data_dir} is not a directory")
    split = analytics_records.split(analytics_records_of(data_dir))
    if split.skipped:
        log.info("%d %s records of an unknown kind or version skipped", split.skipped,
                 ANALYTICS_TOPIC)
    inputs = Inputs(read_commits(spark, data_dir, from_ms, to_ms),
                    spark.createDataFrame(split.samples), spark.createDataFrame(split.events))
    return in_window(inputs, from_ms, to_ms)
