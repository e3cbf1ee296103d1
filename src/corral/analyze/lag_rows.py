"""The lag tables' rows for a set of whole groups, in Arrow and numpy only (no Spark): what a
Spark task of corral.analyze.job computes for the groups it holds.

- `SampleIndex`: all the partitions' log-end samples, sorted, with each (topic, partition)'s
  range (built once per worker from the broadcast samples);
- `sort_commits`: a table of commits (whole groups: every commit of a group it holds, in any
  order) sorted by key, time and log order, for the two below;
- `lag_rows`: sorted commits -> partition rows (partition_lag and partition_status have a row at
  the same times) and group_status rows, through the compiled rules (corral.analyze.fast),
  exactly rules.py's rows;
- `commit_counts`: per group and time bucket, commits, no-op commits and rewinds
  (rules.commit_activity's counts);
- `write_by_date`: a table as Parquet files under `<dir>/date=YYYY-MM-DD/`, as Spark's
  `partitionBy("date")` lays them out.

Equal times are ordered by `seq` (the log order, corral.analyze.inputs).
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from corral.analyze import fast
from corral.analyze.rules import STATUS_NAMES

DAY_MS = 86_400_000
# Status codes (rules.py) -> names, as the dictionary of the status column.
_NAMES = pa.array([STATUS_NAMES.get(c, "") for c in range(max(STATUS_NAMES) + 1)], pa.string())

PARTITION_ROWS = pa.schema(
    [
        ("group", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("time_ms", pa.int64()),
        ("committed_offset", pa.int64()),
        ("log_end_offset", pa.int64()),
        ("lag_records", pa.int64()),
        ("lag_seconds", pa.float64()),
        ("status", pa.string()),
    ]
)
GROUP_ROWS = pa.schema([("group", pa.string()), ("time_ms", pa.int64()), ("status", pa.string())])
# Per (group, topic, partition) and per group, over all their rows: what the report and the run's
# summary need, so that they never scan the big tables whole (p99 exact, as numpy's
# "inverted_cdf": the smallest value with at least 99% of the values at or below it).
KEY_SUMMARY = pa.schema(
    [
        ("group", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("max_lag_records", pa.int64()),
    ]
)
GROUP_SUMMARY = pa.schema(
    [
        ("group", pa.string()),
        ("first_ms", pa.int64()),
        ("last_ms", pa.int64()),
        ("partitions", pa.int64()),
        ("p99_lag_seconds", pa.float64()),
        ("max_lag_seconds", pa.float64()),
        ("max_lag_records", pa.int64()),
        ("worst_status", pa.string()),
        ("not_ok_rows", pa.int64()),
        ("last_status", pa.string()),
    ]
)
COMMIT_COUNTS = pa.schema(
    [
        ("group", pa.string()),
        ("bucket", pa.int64()),
        ("commits", pa.int64()),
        ("noop_commits", pa.int64()),
        ("rewinds", pa.int64()),
    ]
)
LAG_COLUMNS = [
    "group",
    "topic",
    "partition",
    "time_ms",
    "committed_offset",
    "log_end_offset",
    "lag_records",
    "lag_seconds",
]
STATUS_COLUMNS = ["group", "topic", "partition", "time_ms", "status"]


def sort_samples(samples: pa.Table) -> pa.Table:
    """Samples (topic, partition, time_ms, log_end_offset, seq, ...) as SampleIndex wants them:
    by partition, time and seq."""
    return samples.sort_by(
        [
            ("topic", "ascending"),
            ("partition", "ascending"),
            ("time_ms", "ascending"),
            ("seq", "ascending"),
        ]
    )


class SampleIndex:
    """Samples sorted by `sort_samples` (done here unless `sorted`); `ranges` finds each
    (topic, partition)'s."""

    def __init__(self, samples: pa.Table, sorted: bool = False):
        if not sorted:
            samples = sort_samples(samples)
        samples = samples.select(["topic", "partition", "time_ms", "log_end_offset", "seq"])
        self.time_ms = _i64(samples["time_ms"])
        self.log_end_offset = _i64(samples["log_end_offset"])
        topic = _codes(samples["topic"])
        partition = _i64(samples["partition"])
        starts = _starts([topic, partition])
        ends = np.append(starts[1:], len(topic))
        names = samples["topic"].take(starts).to_pylist() if len(starts) else []
        self._range = {
            (name, p): (lo, hi)
            for name, p, lo, hi in zip(
                names, partition[starts].tolist(), starts.tolist(), ends.tolist()
            )
        }

    def __len__(self) -> int:
        return len(self.time_ms)

    def ranges(self, topics: list[str], partitions: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """[lo, hi) of each (topic, partition)'s samples; (0, 0) for a partition never sampled."""
        found = [self._range.get(k, (0, 0)) for k in zip(topics, partitions)]
        lo_hi = np.array(found, np.int64).reshape(-1, 2)
        return lo_hi[:, 0], lo_hi[:, 1]


class LagRows(NamedTuple):
    partition: pa.Table  # PARTITION_ROWS
    group: pa.Table  # GROUP_ROWS
    key_summary: pa.Table  # KEY_SUMMARY
    group_summary: pa.Table  # GROUP_SUMMARY


def _i64(column) -> np.ndarray:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return np.asarray(column.to_numpy(zero_copy_only=False), np.int64)


def _dictionary(column: pa.ChunkedArray | pa.Array) -> pa.DictionaryArray:
    encoded = pc.dictionary_encode(column)
    return encoded.combine_chunks() if isinstance(encoded, pa.ChunkedArray) else encoded


def _codes(column) -> np.ndarray:
    """Equal strings -> equal ints (not in string order)."""
    return np.asarray(_dictionary(column).indices.to_numpy(zero_copy_only=False), np.int64)


def _starts(columns: list[np.ndarray]) -> np.ndarray:
    """Indices where any column's value changes (0 first; empty for no rows)."""
    if not len(columns[0]):
        return np.zeros(0, np.int64)
    changed = np.zeros(len(columns[0]), bool)
    changed[0] = True
    for c in columns:
        changed[1:] |= c[1:] != c[:-1]
    return np.flatnonzero(changed)


def _strings(dictionary: pa.Array, codes: np.ndarray) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)), dictionary)


class SortedCommits(NamedTuple):
    """Commits sorted by (group, topic, partition, time, seq), with their keys' runs."""

    group: pa.DictionaryArray
    topic: pa.DictionaryArray
    partition: np.ndarray
    time_ms: np.ndarray
    offset: np.ndarray
    starts: np.ndarray  # each key's first row
    ends: np.ndarray


def _sorted_dictionary(column) -> pa.DictionaryArray:
    """Dictionary-encoded with the dictionary in string order (so are the codes): files
    written in code order are in group order, and readers skip row groups by their min/max."""
    encoded = _dictionary(column)
    order = pc.array_sort_indices(encoded.dictionary).to_numpy()
    rank = np.empty(len(order), np.int32)
    rank[order] = np.arange(len(order), dtype=np.int32)
    return pa.DictionaryArray.from_arrays(
        pa.array(rank[encoded.indices.to_numpy(zero_copy_only=False)]),
        encoded.dictionary.take(pa.array(order)),
    )


def _commit_order(g, t, partition, time_ms, seq) -> np.ndarray:
    """The order by (group, topic, partition, time, seq). Rows read from a segment are in seq
    order already, so a stable sort by one int64 key (the key's number and time) does when the
    numbers fit; lexsort otherwise."""
    if not len(g):
        return np.zeros(0, np.int64)
    partitions = int(partition.max()) + 1
    keys = (int(g.max()) + 1) * (int(t.max()) + 1) * partitions
    low = int(time_ms.min())
    span = int(time_ms.max()) - low + 1
    if partition.min() >= 0 and keys * span < 2**62 and np.all(seq[1:] > seq[:-1]):
        key = (g * (int(t.max()) + 1) + t) * partitions + partition
        return np.argsort(key * span + (time_ms - low), kind="stable")
    return np.lexsort((seq, time_ms, partition, t, g))


def sort_commits(commits: pa.Table) -> SortedCommits:
    """commits (group, topic, partition, time_ms, offset, seq) sorted."""
    group, topic = _sorted_dictionary(commits["group"]), _sorted_dictionary(commits["topic"])
    g = group.indices.to_numpy(zero_copy_only=False)
    t = topic.indices.to_numpy(zero_copy_only=False)
    partition, time_ms = _i64(commits["partition"]), _i64(commits["time_ms"])
    order = _commit_order(
        g.astype(np.int64), t.astype(np.int64), partition, time_ms, _i64(commits["seq"])
    )
    group, topic = group.take(pa.array(order)), topic.take(pa.array(order))
    g, t, partition = g[order], t[order], partition[order]
    starts = _starts([g, t, partition])
    return SortedCommits(
        group,
        topic,
        partition,
        time_ms[order],
        _i64(commits["offset"])[order],
        starts,
        np.append(starts[1:], len(order)),
    )


def lag_rows(c: SortedCommits, samples: SampleIndex, burrow_compatible: bool = True) -> LagRows:
    """The partition rows and group_status rows of the groups in `c`, which holds every commit
    of each of them."""
    if not len(c.time_ms):
        return LagRows(
            *(s.empty_table() for s in (PARTITION_ROWS, GROUP_ROWS, KEY_SUMMARY, GROUP_SUMMARY))
        )
    n = len(c.time_ms)
    topics = c.topic.dictionary.take(c.topic.indices.take(pa.array(c.starts))).to_pylist()
    sample_lo, sample_hi = samples.ranges(topics, c.partition[c.starts].tolist())
    # Commits and samples side by side in one pair of arrays, as the compiled rules want them.
    out = fast.partition_rows(
        np.concatenate([c.time_ms, samples.time_ms]),
        np.concatenate([c.offset, samples.log_end_offset]),
        c.starts,
        c.ends,
        sample_lo + n,
        sample_hi + n,
        burrow_compatible,
    )
    at = np.repeat(c.starts, out.rows)
    group_codes = c.group.indices.to_numpy(zero_copy_only=False)[at].astype(np.int64)
    unknown = ~out.log_end_known
    partition = pa.Table.from_arrays(
        [
            _strings(c.group.dictionary, group_codes),
            _strings(c.topic.dictionary, c.topic.indices.to_numpy(zero_copy_only=False)[at]),
            pa.array(c.partition[at].astype(np.int32)),
            pa.array(out.time_ms),
            pa.array(out.committed_offset),
            pa.array(out.log_end_offset, mask=unknown),
            pa.array(out.lag_records, mask=unknown),
            pa.array(out.lag_seconds, mask=np.isnan(out.lag_seconds)),
            _strings(_NAMES, out.status.astype(np.int64)),
        ],
        names=PARTITION_ROWS.names,
    )
    # group_status: each group's partition status rows by time, the key's index numbering them.
    key = np.repeat(np.arange(len(c.starts)), out.rows)
    order = _by_group_then_time(group_codes, out.time_ms)
    row_group = group_codes[order]
    group_start = _starts([row_group])
    group_end = np.append(group_start[1:], len(order))
    g = fast.group_rows(out.time_ms[order], key[order], out.status[order], group_start, group_end)
    group = pa.Table.from_arrays(
        [
            _strings(c.group.dictionary, np.repeat(row_group[group_start], g.rows)),
            pa.array(g.time_ms),
            _strings(_NAMES, g.status.astype(np.int64)),
        ],
        names=GROUP_ROWS.names,
    )
    return LagRows(partition, group, *_summaries(c, out, group_codes, g))


def _by_group_then_time(group_codes: np.ndarray, time_ms: np.ndarray) -> np.ndarray:
    """The stable order by (group, time) of rows already in group order: one int64 key when
    it fits (a stable sort of sorted runs is mostly merging), else lexsort."""
    if not len(time_ms):
        return np.zeros(0, np.int64)
    low = int(time_ms.min())
    span = int(time_ms.max()) - low + 1
    if (int(group_codes[-1]) + 1) * span < 2**62:
        return np.argsort(group_codes * span + (time_ms - low), kind="stable")
    return np.lexsort((time_ms, group_codes))


def _summaries(
    c: SortedCommits, out: fast.PartitionRows, group_codes: np.ndarray, g: fast.GroupRows
) -> tuple[pa.Table, pa.Table]:
    """KEY_SUMMARY and GROUP_SUMMARY of lag_rows' rows (partition rows in key order, so by
    group; group rows by group then time)."""
    lag_records = np.where(out.log_end_known, out.lag_records, -1)
    key_first = (np.cumsum(out.rows) - out.rows)[out.rows > 0]
    keys = c.starts[out.rows > 0]
    key_max = np.maximum.reduceat(lag_records, key_first)
    group_dict = c.group.dictionary
    key_group = c.group.indices.to_numpy(zero_copy_only=False)[keys].astype(np.int64)
    key_summary = pa.Table.from_arrays(
        [
            _strings(group_dict, key_group),
            _strings(c.topic.dictionary, c.topic.indices.to_numpy(zero_copy_only=False)[keys]),
            pa.array(c.partition[keys].astype(np.int32)),
            pa.array(key_max, mask=key_max < 0),
        ],
        names=KEY_SUMMARY.names,
    )
    starts = _starts([group_codes])
    groups = group_codes[starts]
    seconds = out.lag_seconds
    max_seconds = np.maximum.reduceat(np.where(np.isnan(seconds), -np.inf, seconds), starts)
    max_records = np.maximum.reduceat(lag_records, starts)
    # p99 of the known lag in seconds: the ceil(0.99 n)-th smallest of each group's values.
    p99 = np.full(len(groups), np.nan)
    for i, (lo, hi) in enumerate(zip(starts.tolist(), np.append(starts[1:], len(seconds)))):
        values = seconds[lo:hi]
        values = values[~np.isnan(values)]
        if len(values):
            k = (99 * len(values) + 99) // 100 - 1
            p99[i] = np.partition(values, k)[k]
    # The group rows: one run per group, in the same (ascending) group order.
    status = g.status.astype(np.int64)
    row_starts = np.cumsum(g.rows) - g.rows
    group_summary = pa.Table.from_arrays(
        [
            _strings(group_dict, groups),
            pa.array(np.minimum.reduceat(out.time_ms, starts)),
            pa.array(np.maximum.reduceat(out.time_ms, starts)),
            pa.array(np.diff(np.append(_starts([key_group]), len(key_group)))),
            pa.array(p99, mask=np.isnan(p99)),
            pa.array(max_seconds, mask=np.isinf(max_seconds)),
            pa.array(max_records, mask=max_records < 0),
            _strings(_NAMES, np.maximum.reduceat(status, row_starts)),
            pa.array(np.add.reduceat((status > 1).astype(np.int64), row_starts)),
            _strings(_NAMES, status[row_starts + g.rows - 1]),
        ],
        names=GROUP_SUMMARY.names,
    )
    return key_summary, group_summary


def commit_counts(c: SortedCommits, bucket_ms: int) -> pa.Table:
    """COMMIT_COUNTS of the groups in `c` (whole groups): per group and bucket (time_ms -
    time_ms % bucket_ms) with commits, the commits, no-op commits and rewinds, each against the
    previous commit of the same partition in time then log order."""
    if not len(c.time_ms):
        return COMMIT_COUNTS.empty_table()
    same_key = np.ones(len(c.offset), bool)
    same_key[c.starts] = False
    previous = np.roll(c.offset, 1)
    noop = same_key & (c.offset == previous)
    rewind = same_key & (c.offset < previous)
    g = c.group.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    bucket = c.time_ms - c.time_ms % bucket_ms
    order = np.lexsort((bucket, g))
    g, bucket = g[order], bucket[order]
    starts = _starts([g, bucket])
    return pa.Table.from_arrays(
        [
            _strings(c.group.dictionary, g[starts]),
            pa.array(bucket[starts]),
            pa.array(np.diff(np.append(starts, len(order)))),
            pa.array(np.add.reduceat(noop[order].astype(np.int64), starts)),
            pa.array(np.add.reduceat(rewind[order].astype(np.int64), starts)),
        ],
        names=COMMIT_COUNTS.names,
    )


def write_by_date(table: pa.Table, directory: str | Path, name: str) -> int:
    """`table` (with `time_ms`) as `<directory>/date=YYYY-MM-DD/<name>.parquet`, one file per UTC
    date it has rows on; returns the rows written."""
    if not table.num_rows:
        return 0
    days = _i64(table["time_ms"]) // DAY_MS
    distinct = np.unique(days)
    for day in distinct:
        rows = table if len(distinct) == 1 else table.filter(pa.array(days == day))
        date = datetime.date(1970, 1, 1) + datetime.timedelta(days=int(day))
        write_file(rows, Path(directory) / f"date={date.isoformat()}", name)
    return table.num_rows


# Rows per Parquet row group: small enough that a reader looking for a few groups (the report)
# skips most of a file by the row groups' min/max of `group`.
ROW_GROUP_ROWS = 1 << 17


def write_file(table: pa.Table, directory: Path, name: str) -> None:
    """`directory/name.parquet`, whole or not at all (a task run twice by Spark, or a reader
    meanwhile, never sees half a file)."""
    directory.mkdir(parents=True, exist_ok=True)
    partial = directory / f".{name}.parquet.tmp"
    strings = [
        f.name for f in table.schema if pa.types.is_string(f.type) or pa.types.is_dictionary(f.type)
    ]
    # Dictionary pages for the strings only: offsets and times are unique, and encoding them
    # cost as much as the rest of the write (for a bigger file). Statistics for what readers
    # filter on (group, time): the others' cost a tenth of the write.
    stats = [name for name in ("group", "time_ms", "bucket") if name in table.column_names]
    pq.write_table(
        table,
        partial,
        row_group_size=ROW_GROUP_ROWS,
        use_dictionary=strings,
        write_statistics=stats or True,
    )
    os.replace(partial, directory / f"{name}.parquet")
