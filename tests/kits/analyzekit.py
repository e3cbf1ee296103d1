"""Shared cases and checks of the `corral analyze` tests: Burrow's table and where corral differs,
the Spark job run against the pure rules (`run_job`, `rules_tables`, `assert_tables`), and a
hand-built history (`make_inputs`)."""

from __future__ import annotations

import json
import tempfile

from pyspark.testing import assertDataFrameEqual

from corral.analyze import inputs as inp
from corral.analyze.inputs import COMMITS_SCHEMA, SAMPLES_SCHEMA
from corral.analyze.job import analyze
from corral.analyze.rules import (
    OK,
    REWIND,
    STALL,
    STATUS_NAMES,
    STOP,
    WARN,
    WindowCommit,
    group_status_timeline,
    partition_lag,
    partition_status_timeline,
)


def _window(*rows):
    return [WindowCommit(ts, off, lag) for off, ts, lag in rows]


_B = _window(
    (1000, 100000, 0),
    (2000, 200000, 50),
    (3000, 300000, 100),
    (4000, 400000, 150),
    (5000, 500000, 200),
)


_ALWAYS_LAG = _window(
    (1000, 100000, 50),
    (2000, 200000, 100),
    (3000, 300000, 150),
    (4000, 400000, 200),
    (5000, 500000, 250),
)


_STALL = _window(
    (1000, 100000, 100),
    (1000, 200000, 150),
    (1000, 300000, 200),
    (1000, 400000, 250),
    (1000, 500000, 300),
)


_REWOUND = _window(
    (1000, 100000, 100),
    (2000, 200000, 150),
    (3000, 300000, 200),
    (2000, 400000, 1250),
    (4000, 500000, 300),
)


_FAST = _window(
    *(
        (792748079 + i, t, 0)
        for i, t in enumerate(
            [
                1512224618356,
                1512224619362,
                1512224620366,
                1512224621367,
                1512224622370,
                1512224623373,
                1512224624378,
                1512224625379,
                1512224626383,
                1512224627383,
                1512224628383,
                1512224629388,
                1512224630391,
                1512224631394,
                1512224632397,
            ]
        )
    )
)


# (window, broker offsets, current lag, timeNow in s, allowed lag, isLagAlwaysNotZero,
#  checkIfOffsetsRewind, checkIfOffsetsStopped, checkIfOffsetsStalled, checkIfLagNotDecreasing,
#  checkIfRecentLagZero, status), indexed as in caching_test.go
BURROW = [
    (_B, [5200], 200, 600, 0, False, -1, False, False, True, False, OK),  # 0
    (_B, [5200], 200, 900, 0, False, -1, False, False, True, False, OK),  # 1
    (_B, [5200], 200, 1000, 0, False, -1, True, False, True, False, STOP),  # 2
    (_ALWAYS_LAG, [5250], 250, 1000, 0, True, -1, True, False, True, False, STOP),  # 3
    (
        _window(
            (1000, 100000, 0),
            (1000, 200000, 50),
            (1000, 300000, 100),
            (1000, 400000, 150),
            (1000, 500000, 200),
        ),
        [1200],
        200,
        600,
        0,
        False,
        -1,
        False,
        True,
        True,
        False,
        OK,
    ),
    (_STALL, [1300], 300, 600, 0, True, -1, False, True, True, False, STALL),  # 5
    (
        _window(*((1000, t, 100) for t in range(100000, 600000, 100000))),
        [1100],
        100,
        600,
        0,
        True,
        -1,
        False,
        True,
        True,
        False,
        STALL,
    ),  # 6
    (_REWOUND, [4300], 300, 600, 0, True, 3, False, False, False, False, OK),  # 7
    (_ALWAYS_LAG, [5250], 0, 1000, 0, True, -1, True, False, True, False, OK),  # 8
    (
        _FAST,
        [792749024, 792749000, 792748800, 792748600, 792748500],
        931,
        1512224650,
        0,
        False,
        -1,
        True,
        False,
        True,
        False,
        STOP,
    ),  # 9
    (
        _FAST,
        [792748094, 792748093, 792748093, 792748093],
        1,
        1512224650,
        0,
        False,
        -1,
        True,
        False,
        True,
        True,
        OK,
    ),  # 10
    (
        _window(
            (1000, 100000, 0),
            (1500, 150000, None),
            (2000, 200000, 50),
            (2500, 250000, None),
            (3000, 300000, 100),
            (3500, 350000, None),
            (4000, 400000, 150),
            (4500, 450000, None),
            (5000, 500000, 200),
            (5500, 550000, None),
        ),
        [5700],
        200,
        600,
        0,
        False,
        -1,
        False,
        False,
        True,
        False,
        OK,
    ),  # 11
    (
        _window((1000, 100000, 2), (2000, 200000, 1), (2000, 300000, 1)),
        [2001],
        1,
        550,
        1,
        False,
        -1,
        True,
        False,
        False,
        False,
        OK,
    ),  # 12
    (_STALL, [1300], 300, 600, 99, True, -1, False, True, True, False, STALL),  # 13
    (_REWOUND, [4300], 300, 600, 99, True, 3, False, False, False, False, OK),  # 14
    (
        _window(
            (1000, 100000, 100),
            (2000, 200000, 150),
            (3000, 300000, 200),
            (2000, 400000, 1250),
            (2500, 500000, 300),
        ),
        [4300],
        300,
        600,
        0,
        True,
        3,
        False,
        False,
        False,
        False,
        REWIND,
    ),  # 15
]


# Burrow's table in corral's mode: rows 2 and 3 are STOPs of a log end that has not moved since
# the last commit (broker offset = last commit + its lag), which corral does not call STOP; row 9's
# log end moved (lag 0 at the last commit, 931 now), so it stays STOP.
CORRAL_DIFFERS = {2: OK, 3: WARN}


LAG = (
    "`group` string, topic string, partition int, time_ms long, committed_offset long, "
    "log_end_offset long, lag_records long, lag_seconds double"
)


STATUS = "`group` string, topic string, partition int, time_ms long, status string"


GROUP = "`group` string, time_ms long, status string"


def rules_tables(commits, samples, burrow_compatible=True):
    """The three tables from the rules run directly: rows in input order, stable-sorted by time."""
    lag, status, timelines = [], [], {}
    for key in dict.fromkeys((g, t, p) for g, t, p, _, _ in commits):
        g, t, p = key
        c = sorted([(ts, off) for *k, ts, off in commits if tuple(k) == key], key=lambda r: r[0])
        s = sorted(
            [(ts, off) for tp, pp, ts, off in samples if (tp, pp) == (t, p)], key=lambda r: r[0]
        )
        lag += [(*key, *row) for row in partition_lag(c, s)]
        rows = partition_status_timeline(c, s, burrow_compatible=burrow_compatible)
        status += [(*key, ts, STATUS_NAMES[st_]) for ts, st_ in rows]
        timelines.setdefault(g, []).append(rows)
    group = [
        (g, ts, STATUS_NAMES[s])
        for g, tl in timelines.items()
        for ts, s in group_status_timeline(tl)
    ]
    return lag, status, group


def run_job(spark, commits, samples, burrow_compatible=True, bucket_ms=60_000):
    """Rows in input order: `seq` counts them as a log would. The job's Analyzed."""
    commits = [(*row, seq) for seq, row in enumerate(commits)]
    samples = [(*row, None, seq) for seq, row in enumerate(samples)]
    return analyze(
        spark.createDataFrame(commits, COMMITS_SCHEMA),
        spark.createDataFrame(samples, SAMPLES_SCHEMA),
        tempfile.mkdtemp(prefix="corral-job-"),
        burrow_compatible=burrow_compatible,
        bucket_ms=bucket_ms,
    )


def assert_tables(spark, tables, lag, status, group):
    assertDataFrameEqual(tables.partition_lag, spark.createDataFrame(lag, LAG))
    assertDataFrameEqual(tables.partition_status, spark.createDataFrame(status, STATUS))
    assertDataFrameEqual(tables.group_status, spark.createDataFrame(group, GROUP))


def event(t, group, name, protocol, **value):
    return (
        t,
        group,
        name,
        protocol,
        {"v": 1, "event": name, "group_id": group, "protocol": protocol, **value},
    )


def rebalance_end(t, group, protocol, members, before, cause, start_ms, **epoch):
    return event(
        t,
        group,
        "rebalance_end",
        protocol,
        members=members,
        members_before=before,
        cause=cause,
        start_ms=start_ms,
        duration_ms=None if start_ms is None else t - start_ms,
        **epoch,
    )


C, K = "classic", "consumer"


EVENTS = [
    # A classic group: m1 joins, m2 joins (and gets nothing), m2 expires mid-history.
    event(1000, "gc", "member_joined", C, member_id="m1", generation_id=0),
    event(
        1000,
        "gc",
        "rebalance_start",
        C,
        generation_id=0,
        members_before=0,
        members=1,
        cause="adding member m1",
    ),
    rebalance_end(1200, "gc", C, 1, 0, "adding member m1", 1000, generation_id=1),
    event(
        1200,
        "gc",
        "generation_assignment",
        C,
        generation_id=1,
        protocol_type="consumer",
        protocol_name="range",
        assignment={"m1": [["t", 0], ["t", 1]]},
    ),
    event(61000, "gc", "member_joined", C, member_id="m2", generation_id=1),
    event(
        61000,
        "gc",
        "rebalance_start",
        C,
        generation_id=1,
        members_before=1,
        members=2,
        cause="adding member m2",
    ),
    rebalance_end(61500, "gc", C, 2, 1, "adding member m2", 61000, generation_id=2),
    event(
        61500,
        "gc",
        "generation_assignment",
        C,
        generation_id=2,
        protocol_type="consumer",
        protocol_name="range",
        assignment={"m1": [["t", 0], ["t", 1]], "m2": []},
    ),
    event(62000, "gc", "member_expired", C, member_id="m2", reason="session_timeout"),
    event(
        62000,
        "gc",
        "rebalance_start",
        C,
        generation_id=2,
        members_before=2,
        members=1,
        cause="member m2 expired",
    ),
    event(
        62500,
        "gc",
        "commit_rejected",
        C,
        error_code=22,
        error="ILLEGAL_GENERATION",
        count=3,
        last_ms=62600,
    ),
    # A consumer group seen from a broker restart on: its first end has no start.
    rebalance_end(5000, "gk", K, 2, None, None, None, group_epoch=4),
    event(
        5000,
        "gk",
        "target_assignment",
        K,
        group_epoch=4,
        assignment={"a": [["t", 0]], "b": [["t", 1]]},
    ),
    event(7000, "gk", "member_left", K, member_id="b", reason="left", group_epoch=4),
    event(
        7000,
        "gk",
        "rebalance_start",
        K,
        group_epoch=5,
        members_before=2,
        members=1,
        cause="member_left",
    ),
    event(
        7100, "gk", "target_assignment", K, group_epoch=5, assignment={"a": [["t", 0], ["t", 1]]}
    ),
    event(
        7100,
        "gk",
        "member_epoch",
        K,
        member_id="a",
        member_epoch=5,
        previous_member_epoch=4,
        state="stable",
    ),
    rebalance_end(7200, "gk", K, 1, 2, "member_left", 7000, group_epoch=5),
    event(
        130000,
        "gk",
        "commit_rejected",
        K,
        error_code=113,
        error="STALE_MEMBER_EPOCH",
        count=2,
        last_ms=130100,
    ),
    event(
        130500,
        "gk",
        "commit_rejected",
        K,
        error_code=25,
        error="UNKNOWN_MEMBER_ID",
        count=1,
        last_ms=130500,
    ),
]


COMMITS = [
    ("gc", "t", 0, 1100, 10),
    ("gc", "t", 1, 1100, 3),
    ("gc", "t", 0, 1300, 10),
    ("gc", "t", 0, 61100, 5),
    ("gk", "t", 0, 5100, 20),
]


def make_inputs(spark, commits=COMMITS, events=EVENTS):
    commits = spark.createDataFrame(
        [(*c, seq) for seq, c in enumerate(commits)], inp.COMMITS_SCHEMA
    )
    events = spark.createDataFrame(
        [(t, g, name, p, json.dumps(v), seq) for seq, (t, g, name, p, v) in enumerate(events)],
        inp.EVENTS_SCHEMA,
    )
    return inp.Inputs(commits, spark.createDataFrame([], inp.SAMPLES_SCHEMA), events)
