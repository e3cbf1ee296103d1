"""The tables of `corral analyze` beyond lag and status: rebalances, member_churn,
assignment_skew and commit_activity (docs/analytics-rules.md has their definitions).

Inputs: the events (corral.analyze.inputs; each group event's whole JSON `value`), and what the
job (corral.analyze.job) made: partition_lag and the commit counts per group and bucket (counted
in its tasks by lag_rows.commit_counts, checked against rules.commit_activity). The per-group
sequences (rebalances, churn) go through the pure rules of corral.analyze.event_rules with
`applyInPandas`, one group at a time (a group's events are few: a handful per rebalance). Every
table has `time_ms`.
"""

from __future__ import annotations

import json

import pandas as pd
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from corral.analyze import event_rules

REBALANCES_SCHEMA = (
    "`group` string, protocol string, time_ms long, start_ms long, end_ms long, duration_ms long, "
    "generation long, members_before long, members_after long, cause string, starts int"
)
MEMBER_CHURN_SCHEMA = (
    "`group` string, time_ms long, joins long, leaves long, expired_session_timeout long, "
    "expired_rebalance_timeout long, expired_sync_timeout long, fencings long, "
    "static_replacements long, members long"
)
ASSIGNMENT_SKEW_SCHEMA = (
    "`group` string, protocol string, time_ms long, until_ms long, generation long, member string, "
    "partitions int, idle boolean, lag_records long, lag_seconds double, members long, skew double"
)
COMMIT_ACTIVITY_SCHEMA = (
    "`group` string, time_ms long, commits long, noop_commits long, rewinds long, "
    "commit_rate double, rejected_commits long, rejected_by_error map<string, long>"
)

REBALANCE_EVENTS = ("rebalance_start", "rebalance_end", "group_deleted")
ASSIGNMENT_EVENTS = ("generation_assignment", "target_assignment")


def derive(
    events: DataFrame, partition_lag: DataFrame, commit_counts: DataFrame, bucket_ms: int = 60_000
) -> dict[str, DataFrame]:
    """The four tables, by name (time buckets of `bucket_ms` for member_churn and
    commit_activity: the job counted the commits in the same buckets)."""
    return {
        "rebalances": rebalances(events),
        "member_churn": member_churn(events, bucket_ms),
        "assignment_skew": assignment_skew(events, partition_lag),
        "commit_activity": commit_activity(commit_counts, events, bucket_ms),
    }


def _events_of(df: pd.DataFrame) -> list[event_rules.Event]:
    df = df.sort_values(["time_ms", "seq"], kind="stable")
    return [
        (t, e, json.loads(v))
        for t, e, v in zip(df["time_ms"].tolist(), df["event"].tolist(), df["value"].tolist())
    ]


def _long(values) -> pd.array:
    return pd.array(list(values), dtype="Int64")


# -- rebalances ---------------------------------------------------------------------------------


def _rebalance_rows(key: tuple, df: pd.DataFrame) -> pd.DataFrame:
    rows = event_rules.rebalances(_events_of(df))
    return pd.DataFrame(
        {
            "group": key[0],
            "protocol": [r.protocol for r in rows],
            # Dated by the start when it is known, else by the end.
            "time_ms": _long(r.end_ms if r.start_ms is None else r.start_ms for r in rows),
            "start_ms": _long(r.start_ms for r in rows),
            "end_ms": _long(r.end_ms for r in rows),
            "duration_ms": _long(r.duration_ms for r in rows),
            "generation": _long(r.generation for r in rows),
            "members_before": _long(r.members_before for r in rows),
            "members_after": _long(r.members_after for r in rows),
            "cause": [r.cause for r in rows],
            "starts": pd.array([r.starts for r in rows], dtype="Int32"),
        }
    )


def rebalances(events: DataFrame) -> DataFrame:
    return (
        events.where(F.col("event").isin(*REBALANCE_EVENTS))
        .groupBy("group")
        .applyInPandas(_rebalance_rows, REBALANCES_SCHEMA)
    )


# -- member_churn -------------------------------------------------------------------------------


def _churn_rows(bucket_ms: int):
    def rows(key: tuple, df: pd.DataFrame) -> pd.DataFrame:
        out = event_rules.member_churn(_events_of(df), bucket_ms)
        columns = {
            name: _long(getattr(r, name) for r in out) for name in event_rules.ChurnRow._fields
        }
        return pd.DataFrame({"group": key[0], "time_ms": columns.pop("bucket_start_ms"), **columns})

    return rows


def member_churn(events: DataFrame, bucket_ms: int) -> DataFrame:
    return (
        events.where(F.col("event").isin(*event_rules.CHURN_EVENTS))
        .groupBy("group")
        .applyInPandas(_churn_rows(bucket_ms), MEMBER_CHURN_SCHEMA)
    )


# -- assignment_skew ----------------------------------------------------------------------------

_ASSIGNMENT_JSON = (
    "generation_id long, group_epoch long, members long, "
    "assignment map<string, array<array<string>>>"
)
_LAG_KEY = ["group", "topic", "partition"]
_LAG_OVER_SCHEMA = "`group` string, seq long, member string, lag_records long, lag_seconds double"


def _assignments(events: DataFrame) -> DataFrame:
    """Each assignment event with its lifetime: until the group's next assignment, its
    emptying (a rebalance_end with 0 members) or its deletion; null: the end of the history."""
    j = F.from_json("value", _ASSIGNMENT_JSON)
    boundaries = events.where(
        F.col("event").isin(*ASSIGNMENT_EVENTS)
        | (F.col("event") == "group_deleted")
        | ((F.col("event") == "rebalance_end") & (j["members"] == 0))
    )
    order = Window.partitionBy("group").orderBy("time_ms", "seq")
    return (
        boundaries.withColumn("until_ms", F.lead("time_ms").over(order))
        .where(F.col("event").isin(*ASSIGNMENT_EVENTS))
        .select(
            "group",
            "protocol",
            "time_ms",
            "until_ms",
            "seq",
            F.coalesce(j["generation_id"], j["group_epoch"]).alias("generation"),
            j["assignment"].alias("assignment"),
        )
    )


def _lag_over_rows(key: tuple, assigned: pd.DataFrame, lag: pd.DataFrame) -> pd.DataFrame:
    lag = lag.sort_values("time_ms", kind="stable")
    rows = list(
        zip(lag["time_ms"].tolist(), lag["lag_records"].tolist(), lag["lag_seconds"].tolist())
    )
    rows = [(t, None if pd.isna(r) else r, None if pd.isna(s) else s) for t, r, s in rows]
    until = [None if pd.isna(u) else u for u in assigned["until_ms"].tolist()]
    over = event_rules.lag_over(list(zip(assigned["time_ms"].tolist(), until)), rows)
    return pd.DataFrame(
        {
            "group": assigned["group"].tolist(),
            "seq": _long(assigned["seq"].tolist()),
            "member": assigned["member"].tolist(),
            "lag_records": _long(o.lag_records for o in over),
            "lag_seconds": pd.array([o.lag_seconds for o in over], dtype="Float64"),
        }
    )


def assignment_skew(events: DataFrame, partition_lag: DataFrame) -> DataFrame:
    """Per assignment (classic generation_assignment, consumer target_assignment) and member:
    its partitions, `idle` when it has none, and its lag over the assignment's lifetime (each
    partition's highest lag while the assignment held: lag_records summed over the member's
    partitions, lag_seconds the highest); per assignment its members and `skew` (most partitions
    of a member over the mean). A classic member whose assignment is not ConsumerProtocol has
    partitions, idle and lag null."""
    assignments = _assignments(events)
    members = assignments.select(
        "group",
        "protocol",
        "time_ms",
        "until_ms",
        "seq",
        "generation",
        F.explode_outer("assignment").alias("member", "parts"),
    )
    members = members.where(F.col("member").isNotNull()).withColumn(
        "partitions", F.when(F.col("parts").isNull(), None).otherwise(F.size("parts"))
    )
    owned = members.select(
        "group", "time_ms", "until_ms", "seq", "member", F.explode("parts").alias("tp")
    ).select(
        "group",
        "time_ms",
        "until_ms",
        "seq",
        "member",
        F.col("tp")[0].alias("topic"),
        F.col("tp")[1].cast("int").alias("partition"),
    )
    # Only the partitions some assignment holds (none at all for a cluster without events).
    lag = partition_lag.select(*_LAG_KEY, "time_ms", "lag_records", "lag_seconds").join(
        owned.select(*_LAG_KEY).distinct(), _LAG_KEY, "left_semi"
    )
    per_partition = (
        owned.groupBy(*_LAG_KEY)
        .cogroup(lag.groupBy(*_LAG_KEY))
        .applyInPandas(_lag_over_rows, _LAG_OVER_SCHEMA)
    )
    per_member = per_partition.groupBy("group", "seq", "member").agg(
        F.sum("lag_records").alias("lag_records"), F.max("lag_seconds").alias("lag_seconds")
    )
    total = F.sum("partitions")  # skew: none without partitions (event_rules.skew)
    per_assignment = members.groupBy("group", "seq").agg(
        F.count("member").alias("members"),
        F.when(total > 0, F.max("partitions") * F.count("partitions") / total).alias("skew"),
    )
    return (
        members.join(per_member, ["group", "seq", "member"], "left")
        .join(per_assignment, ["group", "seq"])
        .select(
            "group",
            "protocol",
            "time_ms",
            "until_ms",
            "generation",
            "member",
            "partitions",
            (F.col("partitions") == 0).alias("idle"),
            "lag_records",
            "lag_seconds",
            "members",
            "skew",
        )
    )


# -- commit_activity ----------------------------------------------------------------------------


def commit_activity(counted: DataFrame, events: DataFrame, bucket_ms: int) -> DataFrame:
    """rules.commit_activity per group (`counted`: group, bucket, commits, noop_commits,
    rewinds, from the job), plus the `commit_rejected` events' counts in the same buckets, in
    all and per error name. Buckets with neither have no row."""
    bucket = F.col("time_ms") - F.col("time_ms") % bucket_ms
    j = F.from_json("value", "error string, count long")
    per_error = (
        events.where(F.col("event") == "commit_rejected")
        .select("group", bucket.alias("bucket"), j["error"].alias("error"), j["count"].alias("n"))
        .groupBy("group", "bucket", "error")
        .agg(F.sum("n").alias("n"))
    )
    rejected = per_error.groupBy("group", "bucket").agg(
        F.sum("n").alias("rejected_commits"),
        F.map_from_entries(F.sort_array(F.collect_list(F.struct("error", "n")))).alias(
            "rejected_by_error"
        ),
    )
    zero = F.lit(0).cast("long")
    return counted.join(rejected, ["group", "bucket"], "full_outer").select(
        "group",
        F.col("bucket").alias("time_ms"),
        *(F.coalesce(c, zero).alias(c) for c in ("commits", "noop_commits", "rewinds")),
        (F.coalesce("commits", zero) * 1000 / bucket_ms).alias("commit_rate"),
        F.coalesce("rejected_commits", zero).alias("rejected_commits"),
        F.coalesce("rejected_by_error", F.create_map().cast("map<string, long>")).alias(
            "rejected_by_error"
        ),
    )
