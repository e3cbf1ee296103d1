"""The Spark job of `corral analyze` (corral.analyze.job) against the pure rules it applies:
generated histories compared with the rules run directly in Python, plus one hand-computed case.
The tables are the ones the tasks wrote, read back.

The `spark` fixture (conftest.py) is one local[2] session for the whole run."""

from __future__ import annotations

import datetime

import pytest
from analyzekit import STATUS, assert_tables, rules_tables, run_job
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.testing import assertDataFrameEqual

from corral.analyze.rules import (
    commit_activity,
)


def rules_counts(commits, bucket_ms):
    """rules.commit_activity's counts per group: (group, bucket, commits, noops, rewinds)."""
    rows = []
    for g in dict.fromkeys(c[0] for c in commits):
        mine = sorted(
            [(ts, t, p, off) for gg, t, p, ts, off in commits if gg == g], key=lambda r: r[0]
        )
        rows += [
            (g, r.bucket_start_ms, r.commits, r.noop_commits, r.rewinds)
            for r in commit_activity(mine, bucket_ms)
        ]
    return rows


# Small times and offsets so that equal times, flat stretches, rewinds and stops all show up.
_times = st.integers(0, 20).map(lambda t: t * 500)
_commits = st.lists(
    st.tuples(
        st.sampled_from(["g1", "g2"]),
        st.sampled_from(["a", "b"]),
        st.integers(0, 1),
        _times,
        st.integers(0, 40),
    ),
    max_size=25,
)
_samples = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 1), _times, st.integers(0, 40)),
    max_size=25,
)


@settings(derandomize=True, deadline=None, max_examples=15)
@given(commits=_commits, samples=_samples, burrow_compatible=st.booleans())
def test_job_gives_the_rules_results(spark, commits, samples, burrow_compatible):
    done = run_job(spark, commits, samples, burrow_compatible, bucket_ms=2000)
    assert_tables(spark, done.tables, *rules_tables(commits, samples, burrow_compatible))
    assertDataFrameEqual(
        done.work["_commit_counts"],
        spark.createDataFrame(
            rules_counts(commits, 2000),
            "`group` string, bucket long, commits long, noop_commits long, rewinds long",
        ),
    )
    assert done.rows["commits"] == len(commits)


def test_known_history(spark):
    commits = [
        ("g1", "t", 0, 1500, 100),
        ("g1", "t", 0, 2500, 170),
        ("g1", "t", 0, 2500, 150),  # same time, later in the log: the committed offset, a rewind
        ("g1", "t", 1, 1000, 5),
        ("g2", "t", 0, 2000, 200),
    ]
    samples = [
        ("t", 0, 1000, 100),
        ("t", 0, 2000, 200),
        ("t", 0, 3000, 300),
        ("t", 1, 1000, 10),
        ("t", 1, 3000, 20),
    ]
    lag = [
        ("g1", "t", 0, 1500, 100, 100, 0, 0.0),
        ("g1", "t", 0, 2000, 100, 200, 100, 1.0),  # offset 100 reached at 1000 ms
        ("g1", "t", 0, 2500, 150, 200, 50, 1.0),  # 150 interpolated at 1500 ms
        ("g1", "t", 0, 3000, 150, 300, 150, 1.5),
        ("g1", "t", 1, 1000, 5, 10, 5, None),  # one sample: no lag in seconds
        ("g1", "t", 1, 3000, 5, 20, 15, 3.0),  # 5 extrapolated back to 0 ms
        ("g2", "t", 0, 2000, 200, 200, 0, 0.0),
        ("g2", "t", 0, 3000, 200, 300, 100, 1.0),
    ]
    status = [
        ("g1", "t", 0, 1500, "OK"),
        ("g1", "t", 0, 2000, "OK"),
        ("g1", "t", 0, 2500, "REWIND"),
        ("g1", "t", 0, 3000, "REWIND"),
        ("g1", "t", 1, 1000, "STALL"),
        ("g1", "t", 1, 3000, "STOP"),
        ("g2", "t", 0, 2000, "OK"),
        ("g2", "t", 0, 3000, "OK"),
    ]
    group = [("g1", t, "ERR") for t in (1000, 1500, 2000, 2500, 3000)]
    group += [("g2", 2000, "OK"), ("g2", 3000, "OK")]
    done = run_job(spark, commits, samples)
    assert_tables(spark, done.tables, lag, status, group)
    assert done.rows == {"partition_lag": 8, "partition_status": 8, "group_status": 7, "commits": 5}
    back = spark.read.parquet(f"{done.out_dir}/partition_lag")
    assert {r.date for r in back.select("date").collect()} == {datetime.date(1970, 1, 1)}


@pytest.mark.parametrize("burrow_compatible, last", [(True, "STOP"), (False, "STALL")])
def test_quiet_partition_stop(spark, burrow_compatible, last):
    """corral's difference: no STOP while the log end has not moved since the last commit."""
    done = run_job(
        spark, [("g", "t", 0, 1000, 5)], [("t", 0, 1000, 10), ("t", 0, 2000, 10)], burrow_compatible
    )
    expected = [("g", "t", 0, 1000, "STALL"), ("g", "t", 0, 2000, last)]
    assertDataFrameEqual(done.tables.partition_status, spark.createDataFrame(expected, STATUS))


def test_rows_across_dates(spark):
    """A key whose rows span two UTC days: one file under each date."""
    day = 86_400_000
    done = run_job(
        spark,
        [("g", "t", 0, day - 1000, 5), ("g", "t", 0, day + 1000, 7)],
        [("t", 0, day - 1000, 9)],
    )
    back = spark.read.parquet(f"{done.out_dir}/partition_lag")
    assert sorted((r.date, r.time_ms) for r in back.collect()) == [
        (datetime.date(1970, 1, 1), day - 1000),
        (datetime.date(1970, 1, 2), day + 1000),
    ]
