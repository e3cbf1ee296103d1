"""What `corral analyze` reads: three inputs, the same whatever their source.

- `--data-dir`: decoded from corral's own segments (`__consumer_offsets` and `__corral_analytics`);
- `--bootstrap`: consumed from a live cluster (corral or Apache Kafka) and landed as Parquet
  under `<out>/inputs/` first, then read back like any other Parquet.

Every input has a `seq` column: the record's position in the log it came from (the record
offset; samples taken live count up). Rows with equal `time_ms` are ordered by `seq`: a group's
commits all live in one `__consumer_offsets` partition, so for them `seq` is the log order, and
the last commit at a time is the committed offset then.

`--from` / `--to` keep rows with from_ms <= time_ms < to_ms (readers may filter earlier, at the
source); see `in_window`.
"""

from __future__ import annotations

from typing import NamedTuple

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

# One row per offset commit (OffsetCommitValue in __consumer_offsets; tombstones are not commits).
# time_ms: the commit timestamp of the value; seq: the record's offset in its __consumer_offsets
# partition.
COMMITS_SCHEMA = "`group` string, topic string, partition int, time_ms long, offset long, seq long"
# One row per log-end sample of a partition (`log_end` records of __corral_analytics, or
# ListOffsets LATEST/EARLIEST sampled live); log_start_offset may be null.
SAMPLES_SCHEMA = (
    "topic string, partition int, time_ms long, log_end_offset long, "
    "log_start_offset long, seq long"
)
# One row per `group_event` record of __corral_analytics (docs/analytics.md): the common fields
# as columns, the whole JSON value in `value` for the event's own fields.
EVENTS_SCHEMA = (
    "time_ms long, `group` string, event string, protocol string, value string, seq long"
)

NAMES = ("commits", "samples", "events")


class Inputs(NamedTuple):
    commits: DataFrame
    samples: DataFrame
    events: DataFrame


def empty(spark: SparkSession) -> Inputs:
    return Inputs(
        *(
            spark.createDataFrame([], schema)
            for schema in (COMMITS_SCHEMA, SAMPLES_SCHEMA, EVENTS_SCHEMA)
        )
    )


def in_window(inputs: Inputs, from_ms: int | None, to_ms: int | None) -> Inputs:
    def keep(df: DataFrame) -> DataFrame:
        if from_ms is not None:
            df = df.where(F.col("time_ms") >= from_ms)
        if to_ms is not None:
            df = df.where(F.col("time_ms") < to_ms)
        return df

    return Inputs(*(keep(df) for df in inputs))


def read_landed(spark: SparkSession, directory: str) -> Inputs:
    """Inputs landed as Parquet by `--bootstrap` (`<directory>/commits`, `/samples`, `/events`)."""
    schemas = (COMMITS_SCHEMA, SAMPLES_SCHEMA, EVENTS_SCHEMA)
    return Inputs(
        *(spark.read.schema(s).parquet(f"{directory}/{n}") for n, s in zip(NAMES, schemas))
    )
