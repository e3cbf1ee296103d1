"""The Spark job of `corral analyze`: the lag tables (partition_lag, partition_status,
group_status) and the commit counts commit_activity is made of, through the compiled rules
(corral.analyze.lag_rows), which give exactly corral.analyze.rules' rows.

Every task holds whole groups and does all of their work itself: sort the commits (numpy), run
the rules, write its rows as Parquet with pyarrow (`<out>/<table>/date=YYYY-MM-DD/part-N.parquet`,
as Spark's `partitionBy("date")` would). The samples go to every task as one broadcast Arrow
table (they are few next to the commits: one per changed partition per sample interval). Spark
schedules the tasks and reads the tables back; it never sorts, shuffles or writes a commit row
itself, which is where the time went when it did (docs/benchmarks.md).

Two ways to cut the commits into tasks of whole groups:
- `analyze_data_dir` (`--data-dir`): a group's commits all live in one `__consumer_offsets`
  partition, so one task per partition decodes its segments in the core and needs no shuffle;
- `analyze` (any commits DataFrame, e.g. `--bootstrap`'s landed Parquet): one shuffle by group.

With a Spark cluster, the workers write the tables straight into `out_dir`: it must be a
directory they all see (as `--data-dir` must be).
"""

from __future__ import annotations

import io
import os
import shutil
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import NamedTuple

import pyarrow as pa
from pyspark import Broadcast, TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from corral.analyze import lag_rows as rows
from corral.analyze.inputs import segments
from corral.analyze.lag_rows import LAG_COLUMNS, STATUS_COLUMNS

LAG_TABLES = ("partition_lag", "partition_status", "group_status")
# Written by the tasks for the rest of the run, not tables of the output (removed by
# `remove_work`): the commit counts of commit_activity, and the lag tables' summaries per
# (group, topic, partition) and per group (lag_rows.KEY_SUMMARY, GROUP_SUMMARY).
WORK = {
    "_commit_counts": "`group` string, bucket long, commits long, noop_commits long, rewinds long",
    "_key_summary": "`group` string, topic string, partition int, max_lag_records long",
    "_group_summary": "`group` string, first_ms long, last_ms long, partitions long, "
    "p99_lag_seconds double, max_lag_seconds double, max_lag_records long, "
    "worst_status string, not_ok_rows long, last_status string",
}
_DDL = {
    "partition_lag": "`group` string, topic string, partition int, time_ms long, "
    "committed_offset long, log_end_offset long, lag_records long, "
    "lag_seconds double",
    "partition_status": "`group` string, topic string, partition int, time_ms long, status string",
    "group_status": "`group` string, time_ms long, status string",
}
_COLUMNS = {
    "partition_lag": LAG_COLUMNS,
    "partition_status": STATUS_COLUMNS,
    "group_status": ["group", "time_ms", "status"],
}
_DONE = pa.schema([(name, pa.int64()) for name in (*LAG_TABLES, "commits")])
_DONE_DDL = ", ".join(f"{name} long" for name in _DONE.names)


class Tables(NamedTuple):
    partition_lag: DataFrame
    partition_status: DataFrame
    group_status: DataFrame


class Analyzed(NamedTuple):
    tables: Tables  # read back from out_dir
    work: dict[str, DataFrame]  # WORK's, read back
    rows: dict[str, int]  # rows written per table, and commits read
    out_dir: str


# -- the work of one task -----------------------------------------------------------------------

_sample_index: dict[str, rows.SampleIndex] = {}


def _samples(run: str, broadcast: Broadcast) -> rows.SampleIndex:
    """The broadcast samples, indexed once per Python worker and run (workers are reused across
    tasks)."""
    index = _sample_index.get(run)
    if index is None:
        _sample_index.clear()
        index = _sample_index[run] = rows.SampleIndex(
            pa.ipc.open_stream(broadcast.value).read_all(), sorted=True
        )
    return index


def _work(
    commits: pa.Table,
    run: str,
    samples: Broadcast,
    out_dir: str,
    name: str,
    bucket_ms: int,
    burrow_compatible: bool,
) -> dict[str, int]:
    """Everything for the whole groups of `commits`, written as files called `name`."""
    c = rows.sort_commits(commits)
    made = rows.lag_rows(c, _samples(run, samples), burrow_compatible)
    out = Path(out_dir)
    written = {
        "partition_lag": rows.write_by_date(
            made.partition.select(LAG_COLUMNS), out / "partition_lag", name
        ),
        "partition_status": rows.write_by_date(
            made.partition.select(STATUS_COLUMNS), out / "partition_status", name
        ),
        "group_status": rows.write_by_date(made.group, out / "group_status", name),
        "commits": commits.num_rows,
    }
    for work, table in (
        ("_commit_counts", rows.commit_counts(c, bucket_ms)),
        ("_key_summary", made.key_summary),
        ("_group_summary", made.group_summary),
    ):
        if table.num_rows:
            rows.write_file(table, out / work, name)
    return written


def _split_task(
    split: tuple[int, list[str]], *, from_ms: int | None, to_ms: int | None, **work
) -> dict[str, int]:
    number, paths = split
    return _work(segments.commits_table(paths, from_ms, to_ms), name=f"part-{number:05d}", **work)


def _shuffled_task(batches: Iterator[pa.RecordBatch], **work) -> Iterator[pa.RecordBatch]:
    table = pa.Table.from_batches(list(batches), schema=segments.COMMITS)
    name = f"part-{TaskContext.get().partitionId():05d}"
    done = _work(table, name=name, **work) if table.num_rows else dict.fromkeys(_DONE.names, 0)
    yield pa.RecordBatch.from_pylist([done], schema=_DONE)


# -- the drivers --------------------------------------------------------------------------------


def analyze_data_dir(
    spark: SparkSession,
    data_dir: str,
    samples: pa.Table,
    out_dir: str,
    *,
    from_ms: int | None = None,
    to_ms: int | None = None,
    burrow_compatible: bool = True,
    bucket_ms: int = 60_000,
) -> Analyzed:
    """The lag tables of the commits in corral's data directory (the window [from_ms, to_ms)),
    one task per `__consumer_offsets` partition, largest first. `samples` as
    segments.read_data_dir gives them: sorted by lag_rows.sort_samples."""
    splits = segments.commit_splits(data_dir, from_ms)
    return _run(
        spark,
        samples,
        out_dir,
        bucket_ms,
        burrow_compatible,
        lambda work: (
            spark.sparkContext.parallelize(splits, max(1, len(splits)))
            .map(partial(_split_task, from_ms=from_ms, to_ms=to_ms, **work))
            .collect()
        ),
    )


def analyze(
    commits: DataFrame,
    samples: DataFrame | pa.Table,
    out_dir: str,
    *,
    burrow_compatible: bool = True,
    bucket_ms: int = 60_000,
) -> Analyzed:
    """The lag tables of any commits DataFrame (corral.analyze.inputs.COMMITS_SCHEMA), shuffled
    by group so that each task holds whole groups."""
    if isinstance(samples, DataFrame):
        samples = samples.toArrow()
    samples = rows.sort_samples(samples)  # once here, not in every worker
    spark = commits.sparkSession
    commits = commits.select(*segments.COMMITS.names)
    # About a million commits per task (a task holds its groups whole in memory), at least a
    # few per core.
    tasks = max(2 * spark.sparkContext.defaultParallelism, -(-commits.count() // 1_000_000))
    return _run(
        spark,
        samples,
        out_dir,
        bucket_ms,
        burrow_compatible,
        lambda work: [
            r.asDict()
            for r in commits.repartition(tasks, "group")
            .mapInArrow(partial(_shuffled_task, **work), _DONE_DDL)
            .collect()
        ],
    )


def _run(
    spark: SparkSession,
    samples: pa.Table,
    out_dir: str,
    bucket_ms: int,
    burrow_compatible: bool,
    tasks: Callable[[dict], list[dict[str, int]]],
) -> Analyzed:
    """`samples` sorted (lag_rows.sort_samples), broadcast to `tasks`."""
    for name in (*LAG_TABLES, *WORK):
        shutil.rmtree(os.path.join(out_dir, name), ignore_errors=True)
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, samples.schema) as writer:
        writer.write_table(samples)
    broadcast = spark.sparkContext.broadcast(sink.getvalue())
    try:
        done = tasks(
            {
                "run": uuid.uuid4().hex,
                "samples": broadcast,
                "out_dir": str(out_dir),
                "bucket_ms": bucket_ms,
                "burrow_compatible": burrow_compatible,
            }
        )
    finally:
        broadcast.destroy()
    written = {name: sum(d[name] for d in done) for name in _DONE.names}
    tables = Tables(
        *(
            read_table(spark, os.path.join(out_dir, name), _DDL[name], _COLUMNS[name])
            for name in LAG_TABLES
        )
    )
    work = {
        name: read_table(
            spark,
            os.path.join(out_dir, name),
            ddl,
            [f.name for f in spark.createDataFrame([], ddl).schema],
        )
        for name, ddl in WORK.items()
    }
    return Analyzed(tables, work, written, str(out_dir))


def read_table(spark: SparkSession, path: str, ddl: str, columns: list[str]) -> DataFrame:
    """A table written by the tasks (an empty one if they wrote no file). The schema is given,
    not inferred: inferring it reads files, a second or more in a cold JVM."""
    files = list(Path(path).rglob("*.parquet"))
    if not files:
        return spark.createDataFrame([], ddl)
    dated = files[0].parent.name.startswith("date=")
    return spark.read.schema(ddl + (", date date" if dated else "")).parquet(path).select(*columns)


def remove_work(out_dir: str) -> None:
    for name in WORK:
        shutil.rmtree(os.path.join(out_dir, name), ignore_errors=True)


def write_tables(tables: Tables | Mapping[str, DataFrame], out_dir: str) -> None:
    """Each table (all have `time_ms`) written by Spark as Parquet under out_dir/<name>,
    partitioned by its UTC date (the tables beyond the lag tables: few rows, so their jobs are
    mostly waiting, and run at once)."""
    named = tables._asdict() if isinstance(tables, Tables) else tables

    def write(name: str, df: DataFrame) -> None:
        date = F.date_from_unix_date(F.floor(F.col("time_ms") / 86_400_000).cast("int"))
        df.withColumn("date", date).write.mode("overwrite").partitionBy("date").parquet(
            f"{out_dir}/{name}"
        )

    with ThreadPoolExecutor(max(1, len(named))) as pool:
        for done in [pool.submit(write, name, df) for name, df in named.items()]:
            done.result()
