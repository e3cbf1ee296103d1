"""The Spark job of `corral analyze`: the rules (corral.analyze.rules) applied per key, through
their compiled form (corral.analyze.fast), which gives exactly the rules' rows.

Inputs:
- commits: (group, topic, partition, time_ms, offset), one row per offset commit;
- samples: (topic, partition, time_ms, log_end_offset), the partitions' log-end samples.

Rows with equal times are ordered by the inputs' `seq` (corral.analyze.inputs: the log order, so
the last commit at a time is the committed offset).

Two passes, each one shuffle and a sort done by Spark, then `mapInArrow` over the sorted batches
(whole keys at a time: a key cut by a batch's end is carried into the next batch):
1. commits and samples together by (topic, partition), samples first, then each group's commits:
   every (group, topic, partition) gets its partition's samples without a join (no copy of the
   samples per group), and one call of the compiled rules makes partition_lag and partition_status
   (both have a row at the same times) for the whole batch;
2. the status rows by group and time: group_status.
Status codes cross as bytes and become names in Spark.
"""

from __future__ import annotations

from typing import Callable, Iterator, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from corral.analyze import fast
from corral.analyze.rules import STATUS_NAMES

KEY = ["group", "topic", "partition"]
_ROWS_SCHEMA = (
    "`group` string, topic string, partition int, time_ms long, committed_offset long, "
    "log_end_offset long, lag_records long, lag_seconds double, code byte"
)
_GROUP_SCHEMA = "`group` string, time_ms long, code byte"
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


def _partition_rows(burrow_compatible: bool) -> Callable:
    def rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for table in _whole_keys(batches, ["topic", "partition"]):
            if table.num_rows:
                yield _partition_table(table, burrow_compatible)

    return rows


def _partition_table(table: pa.Table, burrow_compatible: bool) -> pa.RecordBatch:
    """A table of whole partitions sorted by (topic, partition, group nulls first, time, seq)."""
    table = table.combine_chunks()
    topic, partition = _codes(table["topic"]), table["partition"].to_numpy()
    group = _codes(table["group"])
    starts = _starts([topic, partition, group])
    ends = np.append(starts[1:], table.num_rows)
    new_tp = np.ones(len(starts), bool)
    new_tp[1:] = (topic[starts[1:]] != topic[starts[:-1]]) | (
        partition[starts[1:]] != partition[starts[:-1]])
    tp = np.cumsum(new_tp) - 1
    # A partition's samples (group null) are its first run, if it has any.
    is_samples = group[starts] == -1
    sample_lo = np.zeros(tp[-1] + 1, np.int64)
    sample_hi = np.zeros(tp[-1] + 1, np.int64)
    sample_lo[tp[is_samples]] = starts[is_samples]
    sample_hi[tp[is_samples]] = ends[is_samples]
    keys = ~is_samples
    out = fast.partition_rows(
        table["time_ms"].to_numpy(), table["value"].to_numpy(), starts[keys], ends[keys],
        sample_lo[tp[keys]], sample_hi[tp[keys]], burrow_compatible)
    at = np.repeat(starts[keys], out.rows)
    unknown = ~out.log_end_known
    return pa.RecordBatch.from_arrays([
        _take(table["group"], at), _take(table["topic"], at), _take(table["partition"], at),
        pa.array(out.time_ms), pa.array(out.committed_offset),
        pa.array(out.log_end_offset, mask=unknown), pa.array(out.lag_records, mask=unknown),
        pa.array(out.lag_seconds, mask=np.isnan(out.lag_seconds)), pa.array(out.status),
    ], names=["group", "topic", "partition", "time_ms", "committed_offset", "log_end_offset",
              "lag_records", "lag_seconds", "code"])


def _group_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Tables of whole groups sorted by (group, time): group_status."""
    for table in _whole_keys(batches, ["group"]):
        if not table.num_rows:
            continue
        table = table.combine_chunks()
        starts = _starts([_codes(table["group"])])
        ends = np.append(starts[1:], table.num_rows)
        # Each (topic, partition) of the table numbered from 0.
        partition = table["partition"].to_numpy().astype(np.int64)
        number = _codes(table["topic"]).astype(np.int64) * (int(partition.max()) + 1) + partition
        out = fast.group_rows(table["time_ms"].to_numpy(), number,
                              table["code"].to_numpy(), starts, ends)
        yield pa.RecordBatch.from_arrays(
            [_take(table["group"], np.repeat(starts, out.rows)), pa.array(out.time_ms),
             pa.array(out.status)], names=["group", "time_ms", "code"])


def analyze(commits: DataFrame, samples: DataFrame, burrow_compatible: bool = True) -> Tables:
    """partition_lag, partition_status and group_status over the whole history (the rules'
    defaults: Burrow's window of 10 commits and 10 samples, allowed lag 0)."""
    commits = commits.select("topic", "partition", "group", "time_ms",
                             F.col("offset").alias("value"), "seq")
    samples = samples.select("topic", "partition", F.lit(None).cast("string").alias("group"),
                             "time_ms", F.col("log_end_offset").alias("value"), "seq")
    rows = (
        commits.unionByName(samples)
        .repartition("topic", "partition")
        .sortWithinPartitions("topic", "partition", "group", "time_ms", "seq")  # nulls first
        .mapInArrow(_partition_rows(burrow_compatible), _ROWS_SCHEMA)
        .cache()
    )
    group = (
        rows.select("group", "topic", "partition", "time_ms", "code")
        .repartition("group")
        .sortWithinPartitions("group", "time_ms")
        .mapInArrow(_group_rows, _GROUP_SCHEMA)
    )
    return Tables(rows.select(*LAG_COLUMNS),
                  rows.select(*KEY, "time_ms", _status(F.col("code"))),
                  group.select("group", "time_ms", _status(F.col("code"))))


def write_tables(tables: Tables, out_dir: str) -> None:
    """Each table as Parquet under out_dir/<table>, partitioned by its UTC date."""
    for name, df in tables._asdict().items():
        date = F.date_from_unix_date(F.floor(F.col("time_ms") / 86_400_000).cast("int"))
        df.withColumn("date", date).write.mode("overwrite").partitionBy("date").parquet(
            f"{out_dir}/{name}")
