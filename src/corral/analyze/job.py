"""The Spark job of `corral analyze`: the pure rules (corral.analyze.rules) applied per key.

Inputs:
- commits: (group, topic, partition, time_ms, offset), one row per offset commit;
- samples: (topic, partition, time_ms, log_end_offset), the partitions' log-end samples.

Rows with equal times are ordered by the inputs' `seq` (corral.analyze.inputs: the log order, so
the last commit at a time is the committed offset).

Each partition's samples are joined to every group's commits on it, and each (group, topic,
partition), commits and samples together, goes through `partition_lag` and `partition_status_timeline` in one `applyInPandas`,
so the tables are exactly the rules' results; `group_status` then goes per group.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from corral.analyze.rules import (STATUS_NAMES, StatusRow, group_status_timeline, partition_lag,
                                  partition_status_timeline)

KEY = ["group", "topic", "partition"]
# Both timelines have one row at the same times (rules._event_times), so one pass makes both.
_PARTITION_SCHEMA = (
    "`group` string, topic string, partition int, time_ms long, committed_offset long, "
    "log_end_offset long, lag_records long, lag_seconds double, status string"
)
LAG_COLUMNS = KEY + ["time_ms", "committed_offset", "log_end_offset", "lag_records", "lag_seconds"]
STATUS_COLUMNS = KEY + ["time_ms", "status"]
_GROUP_SCHEMA = "`group` string, time_ms long, status string"
_STATUS_CODES = {name: code for code, name in STATUS_NAMES.items()}


class Tables(NamedTuple):
    partition_lag: DataFrame
    partition_status: DataFrame
    group_status: DataFrame


def _in_order(df: pd.DataFrame) -> list[tuple[int, int]]:
    df = df.sort_values(["time_ms", "seq"], kind="stable")
    return list(zip(df["time_ms"].tolist(), df["value"].tolist()))


def _partition_rows(burrow_compatible: bool):
    def rows(key: tuple, df: pd.DataFrame) -> pd.DataFrame:
        group, topic, partition = key
        c = _in_order(df[df["is_commit"]])
        s = _in_order(df[~df["is_commit"]])
        lag = partition_lag(c, s)
        status = partition_status_timeline(c, s, burrow_compatible=burrow_compatible)
        return pd.DataFrame({
            "group": group,
            "topic": topic,
            "partition": partition,
            "time_ms": pd.array([r.time_ms for r in lag], dtype="Int64"),
            "committed_offset": pd.array([r.committed_offset for r in lag], dtype="Int64"),
            "log_end_offset": pd.array([r.log_end_offset for r in lag], dtype="Int64"),
            "lag_records": pd.array([r.lag_records for r in lag], dtype="Int64"),
            "lag_seconds": pd.array([r.lag_seconds for r in lag], dtype="Float64"),
            "status": [STATUS_NAMES[r.status] for r in status],
        })

    return rows


def _group_rows(df: pd.DataFrame) -> pd.DataFrame:
    timelines = [
        [StatusRow(t, _STATUS_CODES[s]) for t, s in zip(p["time_ms"].tolist(), p["status"].tolist())]
        for _, p in df.groupby(["topic", "partition"])
    ]
    rows = group_status_timeline(timelines)
    return pd.DataFrame({
        "group": df["group"].iloc[0],
        "time_ms": pd.array([r.time_ms for r in rows], dtype="Int64"),
        "status": [STATUS_NAMES[r.status] for r in rows],
    })


def analyze(commits: DataFrame, samples: DataFrame, burrow_compatible: bool = True) -> Tables:
    """partition_lag, partition_status and group_status over the whole history (the rules'
    defaults: Burrow's window of 10 commits and 10 samples, allowed lag 0)."""
    # One frame per (group, topic, partition): its commits, and its partition's samples.
    commits = commits.select(*KEY, "time_ms", F.col("offset").alias("value"), "seq").withColumn(
        "is_commit", F.lit(True))
    samples = samples.select(
        "topic", "partition", "time_ms", F.col("log_end_offset").alias("value"), "seq"
    ).withColumn("is_commit", F.lit(False))
    per_group = commits.select(*KEY).distinct().join(samples, ["topic", "partition"])
    both = (
        commits.unionByName(per_group)
        .groupBy(*KEY)
        .applyInPandas(_partition_rows(burrow_compatible), _PARTITION_SCHEMA)
        .cache()
    )
    status = both.select(*STATUS_COLUMNS)
    group = status.groupBy("group").applyInPandas(_group_rows, _GROUP_SCHEMA)
    return Tables(both.select(*LAG_COLUMNS), status, group)


def write_tables(tables: Tables | Mapping[str, DataFrame], out_dir: str) -> None:
    """Each table (all have `time_ms`) as Parquet under out_dir/<name>, partitioned by its UTC
    date."""
    named = tables._asdict() if isinstance(tables, Tables) else tables
    for name, df in named.items():
        date = F.date_from_unix_date(F.floor(F.col("time_ms") / 86_400_000).cast("int"))
        df.withColumn("date", date).write.mode("overwrite").partitionBy("date").parquet(
            f"{out_dir}/{name}")
