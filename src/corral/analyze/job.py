"""The Spark job of `corral analyze`: the rules (corral.analyze.rules) applied per key, through
their compiled form (corral.analyze.fast), which gives exactly the rules' rows.

Inputs:
- commits: (group, topic, partition, time_ms, offset), one row per offset commit;
- samples: (topic, partition, time_ms, log_end_offset), the partitions' log-end samples.

Rows with equal times are ordered by the inputs' `seq` (corral.analyze.inputs: the log order, so
the last commit at a time is the committed offset).

One shuffle, by group, and a sort done by Spark, then `mapInArrow` over the sorted batches
(whole groups at a time: a group cut by a batch's end is carried into the next batch). Each
(group, topic, partition) comes with its partition's samples (a broadcast join with the keys: the
samples a key gets are about the rows it will have anyway, one per sample time), samples first;
one call of the compiled rules makes partition_lag and partition_status (both have a row at the
same times) for the whole batch, a second its groups' group_status, so no second shuffle. Both
come out of one cached frame (`kind` tells them apart); status codes become names in Spark.
"""

from __future__ import annotations

from typing import Callable, Iterator, Mapping, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from corral.analyze import fast
from corral.analyze.rules import STATUS_NAMES

KEY = ["group", "topic", "partition"]
# Partition rows (kind 0) and group rows (kind 1, group and time_ms only) in one output.
_ROWS_SCHEMA = (
    "kind byte, `group` string, topic string, partition int, time_ms long, "
    "committed_offset long, log_end_offset long, lag_records long, lag_seconds double, code byte"
)
_ARROW_SCHEMA = pa.schema([
    ("kind", pa.int8()), ("group", pa.string()), ("topic", pa.string()), ("partition", pa.int32()),
    ("time_ms", pa.int64()), ("committed_offset", pa.int64()), ("log_end_offset", pa.int64()),
    ("lag_records", pa.int64()), ("lag_seconds", pa.float64()), ("code", pa.int8()),
])
LAG_COLUMNS = KEY + ["time_ms", "committed_offset", "log_end_offset", "lag_records", "lag_seconds"]
STATUS_COLUMNS = KEY + ["time_ms", "status"]


class Tables(NamedTuple):
    partition_lag: DataFrame
    partition_status: DataFrame
    group_status: DataFrame


def _status(code: Column) -> Column:
    names = F.array(*(F.lit(STATUS_NAMES.get(c, "")) for c in range(max(STATUS_NAMES) + 1)))
    return F.element_at(names, code.cast("int") + 1).alias("status")


def _codes(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Equal values -> equal ints (nulls -1), for finding runs."""
    if pa.types.is_integer(column.type) and not column.null_count:
        return column.to_numpy()
    encoded = pc.dictionary_encode(column)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    return pc.fill_null(encoded.indices, -1).to_numpy()


def _take(column: pa.ChunkedArray, at: np.ndarray) -> pa.Array:
    return column.take(at).combine_chunks()


def _starts(columns: list[np.ndarray]) -> np.ndarray:
    """Indices where any column's value changes (0 first)."""
    changed = np.zeros(len(columns[0]), bool)
    changed[0] = True
    for c in columns:
        changed[1:] |= c[1:] != c[:-1]
    return np.flatnonzero(changed)


def _whole_keys(batches: Iterator[pa.RecordBatch], key: list[str]) -> Iterator[pa.Table]:
    """The sorted batches regrouped so that no key spans two tables."""
    pending: list[pa.RecordBatch] = []
    for batch in batches:
        if not batch.num_rows:
            continue
        codes = [_codes(batch.column(k)) for k in key]
        last = int(_starts(codes)[-1])
        if last == 0 and pending:
            tail = pending[-1].slice(pending[-1].num_rows - 1)
            if all(tail.column(k)[0] == batch.column(k)[0] for k in key):
                pending.append(batch)
                continue
        pending.append(batch.slice(0, last))
        yield pa.Table.from_batches(pending)
        pending = [batch.slice(last)]
    if pending:
        yield pa.Table.from_batches(pending)


def _rows(burrow_compatible: bool) -> Callable:
    def rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for table in _whole_keys(batches, ["group"]):
            if table.num_rows:
                yield from _group_tables(table.combine_chunks(), burrow_compatible)

    return rows


def _group_tables(table: pa.Table, burrow_compatible: bool) -> Iterator[pa.RecordBatch]:
    """Whole groups sorted by (group, topic, partition, is_commit, time, seq): each key's samples
    then its commits. Yields their partition rows, then their group rows."""
    group, topic = _codes(table["group"]), _codes(table["topic"])
    partition, is_commit = table["partition"].to_numpy(), table["is_commit"].to_numpy()
    starts = _starts([group, topic, partition, is_commit])
    ends = np.append(starts[1:], table.num_rows)
    commits = np.flatnonzero(is_commit[starts])
    # The run before a key's commits is its samples when it is of the same key.
    before = np.maximum(commits - 1, 0)
    has_samples = (commits > 0) & ~is_commit[starts[before]] & (
        group[starts[before]] == group[starts[commits]]) & (
        topic[starts[before]] == topic[starts[commits]]) & (
        partition[starts[before]] == partition[starts[commits]])
    sample_lo = np.where(has_samples, starts[before], 0)
    sample_hi = np.where(has_samples, ends[before], 0)
    times = table["time_ms"].to_numpy()
    out = fast.partition_rows(times, table["value"].to_numpy(), starts[commits], ends[commits],
                              sample_lo, sample_hi, burrow_compatible)
    at = np.repeat(starts[commits], out.rows)
    unknown = ~out.log_end_known
    yield pa.RecordBatch.from_arrays([
        pa.array(np.zeros(len(at), np.int8)), _take(table["group"], at),
        _take(table["topic"], at), _take(table["partition"], at), pa.array(out.time_ms),
        pa.array(out.committed_offset), pa.array(out.log_end_offset, mask=unknown),
        pa.array(out.lag_records, mask=unknown),
        pa.array(out.lag_seconds, mask=np.isnan(out.lag_seconds)), pa.array(out.status),
    ], schema=_ARROW_SCHEMA)
    # group_status: each group's status rows by time, the key's index numbering its partition.
    key = np.repeat(np.arange(len(commits)), out.rows)
    row_group = group[at]
    order = np.lexsort((out.time_ms, row_group))
    group_start = np.flatnonzero(np.append(True, row_group[order][1:] != row_group[order][:-1]))
    group_end = np.append(group_start[1:], len(order))
    g = fast.group_rows(out.time_ms[order], key[order], out.status[order], group_start,
                        group_end)
    firsts = at[order][group_start]
    n = len(g.time_ms)
    yield pa.RecordBatch.from_arrays([
        pa.array(np.ones(n, np.int8)), _take(table["group"], np.repeat(firsts, g.rows)),
        pa.nulls(n, pa.string()), pa.nulls(n, pa.int32()), pa.array(g.time_ms),
        *(pa.nulls(n, pa.int64()) for _ in range(3)), pa.nulls(n, pa.float64()),
        pa.array(g.status),
    ], schema=_ARROW_SCHEMA)


def analyze(commits: DataFrame, samples: DataFrame, burrow_compatible: bool = True) -> Tables:
    """partition_lag, partition_status and group_status over the whole history (the rules'
    defaults: Burrow's window of 10 commits and 10 samples, allowed lag 0)."""
    keys = commits.select(*KEY).distinct()
    commits = commits.select(*KEY, F.lit(True).alias("is_commit"), "time_ms",
                             F.col("offset").alias("value"), "seq")
    samples = samples.select("topic", "partition", F.lit(False).alias("is_commit"), "time_ms",
                             F.col("log_end_offset").alias("value"), "seq")
    # Each key gets its partition's samples (keys are few: one per group and partition).
    per_key = F.broadcast(keys).join(samples, ["topic", "partition"])
    rows = (
        commits.unionByName(per_key)
        .repartition("group")
        .sortWithinPartitions(*KEY, "is_commit", "time_ms", "seq")
        .mapInArrow(_rows(burrow_compatible), _ROWS_SCHEMA)
        .cache()
    )
    partition, group = rows.where(F.col("kind") == 0), rows.where(F.col("kind") == 1)
    return Tables(partition.select(*LAG_COLUMNS),
                  partition.select(*KEY, "time_ms", _status(F.col("code"))),
                  group.select("group", "time_ms", _status(F.col("code"))))


def write_tables(tables: Tables | Mapping[str, DataFrame], out_dir: str) -> None:
    """Each table (all have `time_ms`) as Parquet under out_dir/<name>, partitioned by its UTC
    date."""
    named = tables._asdict() if isinstance(tables, Tables) else tables
    for name, df in named.items():
        date = F.date_from_unix_date(F.floor(F.col("time_ms") / 86_400_000).cast("int"))
        df.withColumn("date", date).write.mode("overwrite").partitionBy("date").parquet(
            f"{out_dir}/{name}")
