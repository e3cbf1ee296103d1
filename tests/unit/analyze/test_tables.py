"""The tables of corral.analyze.tables on a hand-built history (exact rows), commit_activity
against rules.commit_activity on generated commits, and empty inputs. One local[2] session for
the run (the `spark` fixture of conftest.py)."""

from __future__ import annotations

import pyarrow as pa
from analyzekit import COMMITS, EVENTS, C, K, event, make_inputs
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.testing import assertDataFrameEqual

from corral.analyze import lag_rows
from corral.analyze.event_rules import skew
from corral.analyze.inputs.segments import COMMITS as COMMITS_ARROW
from corral.analyze.job import write_tables
from corral.analyze.rules import commit_activity
from corral.analyze.tables import (
    ASSIGNMENT_SKEW_SCHEMA,
    COMMIT_ACTIVITY_SCHEMA,
    MEMBER_CHURN_SCHEMA,
    REBALANCES_SCHEMA,
    derive,
)

LAG = (
    "`group` string, topic string, partition int, time_ms long, committed_offset long, "
    "log_end_offset long, lag_records long, lag_seconds double"
)
MINUTE = 60_000


# partition_lag as the job makes it; only time, lag_records and lag_seconds matter here.
LAG_ROWS = [
    ("gc", "t", 0, 1100, 5, 1.0),
    ("gc", "t", 0, 1300, 8, 2.0),
    ("gc", "t", 0, 61100, 20, 4.0),
    ("gc", "t", 0, 62000, 1, 0.5),
    ("gc", "t", 1, 1100, 2, None),
    ("gk", "t", 0, 5100, 7, 0.7),
    ("gk", "t", 0, 7150, 3, 0.3),
]


def partition_lag(spark, rows=LAG_ROWS):
    return spark.createDataFrame(
        [(g, t, p, ts, None, None, r, s) for g, t, p, ts, r, s in rows], LAG
    )


def derived(spark, commits=COMMITS, events=EVENTS, lag_rows_=LAG_ROWS, bucket_ms=MINUTE):
    """derive's tables, the commit counts made as the job's tasks make them."""
    inputs = make_inputs(spark, commits, events)
    table = pa.Table.from_pylist(
        [dict(zip(COMMITS_ARROW.names, (*c, seq))) for seq, c in enumerate(commits)],
        schema=COMMITS_ARROW,
    )
    counts = lag_rows.commit_counts(lag_rows.sort_commits(table), bucket_ms)
    counts = spark.createDataFrame(
        counts.cast(lag_rows.COMMIT_COUNTS).to_pylist(),
        "`group` string, bucket long, commits long, noop_commits long, rewinds long",
    )
    return derive(inputs.events, partition_lag(spark, lag_rows_), counts, bucket_ms)


def test_hand_built_history(spark, tmp_path):
    tables = derived(spark)
    assert set(tables) == {"rebalances", "member_churn", "assignment_skew", "commit_activity"}

    assertDataFrameEqual(
        tables["rebalances"],
        spark.createDataFrame(
            [
                ("gc", C, 1000, 1000, 1200, 200, 1, 0, 1, "adding member m1", 1),
                ("gc", C, 61000, 61000, 61500, 500, 2, 1, 2, "adding member m2", 1),
                (
                    "gc",
                    C,
                    62000,
                    62000,
                    None,
                    None,
                    3,
                    2,
                    None,
                    "member m2 expired",
                    1,
                ),  # under way
                (
                    "gk",
                    K,
                    5000,
                    None,
                    5000,
                    None,
                    4,
                    None,
                    2,
                    None,
                    0,
                ),  # its start before the history
                ("gk", K, 7000, 7000, 7200, 200, 5, 2, 1, "member_left", 1),
            ],
            REBALANCES_SCHEMA,
        ),
    )

    assertDataFrameEqual(
        tables["member_churn"],
        spark.createDataFrame(
            [
                ("gc", 0, 1, 0, 0, 0, 0, 0, 0, 1),
                ("gc", MINUTE, 1, 0, 1, 0, 0, 0, 0, 1),
                ("gk", 0, 0, 1, 0, 0, 0, 0, 0, 1),
            ],
            MEMBER_CHURN_SCHEMA,
        ),
    )

    # Each partition's highest lag while the assignment held, summed per member (seconds: the
    # highest); gc's generation 1 holds until generation 2's assignment at 61500.
    assert skew([2, 0]) == 2.0
    assertDataFrameEqual(
        tables["assignment_skew"],
        spark.createDataFrame(
            [
                ("gc", C, 1200, 61500, 1, "m1", 2, False, 22, 4.0, 1, 1.0),
                ("gc", C, 61500, None, 2, "m1", 2, False, 22, 4.0, 2, 2.0),
                ("gc", C, 61500, None, 2, "m2", 0, True, None, None, 2, 2.0),
                ("gk", K, 5000, 7100, 4, "a", 1, False, 7, 0.7, 2, 1.0),
                ("gk", K, 5000, 7100, 4, "b", 1, False, None, None, 2, 1.0),  # no lag known for t-1
                ("gk", K, 7100, None, 5, "a", 2, False, 7, 0.7, 1, 1.0),
            ],
            ASSIGNMENT_SKEW_SCHEMA,
        ),
    )

    assertDataFrameEqual(
        tables["commit_activity"],
        spark.createDataFrame(
            [
                ("gc", 0, 3, 1, 0, 3 / 60, 0, {}),
                ("gc", MINUTE, 1, 0, 1, 1 / 60, 3, {"ILLEGAL_GENERATION": 3}),
                ("gk", 0, 1, 0, 0, 1 / 60, 0, {}),
                (
                    "gk",
                    2 * MINUTE,
                    0,
                    0,
                    0,
                    0.0,
                    3,
                    {"STALE_MEMBER_EPOCH": 2, "UNKNOWN_MEMBER_ID": 1},
                ),
            ],
            COMMIT_ACTIVITY_SCHEMA,
        ),
    )

    write_tables({"rebalances": tables["rebalances"]}, str(tmp_path))  # any mapping
    back = spark.read.parquet(str(tmp_path / "rebalances"))
    assertDataFrameEqual(back.drop("date"), tables["rebalances"])


def test_assignments_without_partitions(spark):
    """A Connect group's members have no decoded partitions: partitions, idle and lag null; a
    group whose members all got nothing has no skew."""
    events = [
        event(
            10,
            "connect",
            "generation_assignment",
            C,
            generation_id=1,
            protocol_type="connect",
            protocol_name="sessioned",
            assignment={"w1": None, "w2": None},
        ),
        event(
            20,
            "idle",
            "generation_assignment",
            C,
            generation_id=1,
            protocol_type="consumer",
            protocol_name="range",
            assignment={"m": []},
        ),
    ]
    tables = derived(spark, [], events, [])
    assertDataFrameEqual(
        tables["assignment_skew"],
        spark.createDataFrame(
            [
                ("connect", C, 10, None, 1, "w1", None, None, None, None, 2, None),
                ("connect", C, 10, None, 1, "w2", None, None, None, None, 2, None),
                ("idle", C, 20, None, 1, "m", 0, True, None, None, 1, None),
            ],
            ASSIGNMENT_SKEW_SCHEMA,
        ),
    )


_commits = st.lists(
    st.tuples(
        st.sampled_from(["g1", "g2"]),
        st.sampled_from(["a", "b"]),
        st.integers(0, 1),
        st.integers(0, 12).map(lambda t: t * 400),
        st.integers(0, 6),
    ),
    max_size=30,
)


@settings(derandomize=True, deadline=None, max_examples=6)
@given(commits=_commits)
def test_commit_activity_is_the_rule(spark, commits):
    tables = derived(spark, commits, [], [], bucket_ms=1000)
    expected = []
    for group in sorted({c[0] for c in commits}):
        # Sorted by time, equal times in log order (a stable sort of the input).
        mine = sorted(
            [(t, topic, p, off) for g, topic, p, t, off in commits if g == group],
            key=lambda r: r[0],
        )
        expected += [(group, *row, 0, {}) for row in commit_activity(mine, 1000)]
    assertDataFrameEqual(
        tables["commit_activity"], spark.createDataFrame(expected, COMMIT_ACTIVITY_SCHEMA)
    )


def test_empty_history(spark):
    tables = derived(spark, [], [], [])
    schemas = {
        "rebalances": REBALANCES_SCHEMA,
        "member_churn": MEMBER_CHURN_SCHEMA,
        "assignment_skew": ASSIGNMENT_SKEW_SCHEMA,
        "commit_activity": COMMIT_ACTIVITY_SCHEMA,
    }
    for name, df in tables.items():
        assertDataFrameEqual(df, spark.createDataFrame([], schemas[name]))
