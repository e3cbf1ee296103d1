"""Table-driven and property tests of `corral analyze`'s pure rules (corral.analyze.rules).

The Burrow tables are caching_test.go's (linkedin/Burrow core/internal/evaluator, commit
ced55ba9); the lookup tables are LookupTableSpec.scala's (seglo/kafka-lag-exporter, commit
3fcb3c79)."""

from __future__ import annotations

import math

import pytest
from analyzekit import _REWOUND, BURROW, CORRAL_DIFFERS, _window
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.analyze.rules import (
    ERR,
    OK,
    REWIND,
    STALL,
    STOP,
    WARN,
    ActivityRow,
    LagRow,
    StatusRow,
    commit_activity,
    group_status,
    group_status_timeline,
    lag_always_not_zero,
    lag_not_decreasing,
    lag_seconds,
    monotone_samples,
    offset_time,
    offsets_stalled,
    offsets_stopped,
    partition_lag,
    partition_status,
    partition_status_timeline,
    recent_lag_zero,
    rewind_index,
    rewind_recovered,
)

CHECKS = settings(derandomize=True, deadline=None, max_examples=200)

# -- Kafka Lag Exporter's lookups ----------------------------------------------------------------

# LookupTableSpec "lookups with flat sections", with the flat points the MemoryTable compresses
# kept (the lookup must not depend on them).
FLAT = [(30, 100), (60, 200), (120, 200), (700, 200), (730, 300), (9000, 300), (9030, 400)]


@pytest.mark.parametrize(
    "samples, offset, expected",
    [
        # "square lookups, x == y": interpolation, then extrapolation under and over the table
        ([(100, 100), (200, 200)], 150, 150),
        ([(100, 100), (200, 200)], 190, 190),
        ([(100, 100), (200, 200)], 110, 110),
        ([(100, 100), (200, 200)], 10, 10),
        ([(100, 100), (200, 200)], 0, 0),
        ([(100, 100), (200, 200)], -100, -100),
        ([(100, 100), (200, 200)], 300, 300),
        ([(100, 100), (200, 200)], 100, 100),
        # "lookups with flat sections": a flat stretch maps to its latest sample
        (FLAT, 199, 59.7),
        (FLAT, 200, 700),
        (FLAT, 201, 700.3),
        (FLAT, 250, 715),
        (FLAT, 299, 729.7),
        (FLAT, 300, 9000),
        (FLAT, 301, 9000.3),
        # extrapolation is along the first and last samples, not the nearest two
        ([(0, 100), (10, 200), (1000, 300)], 50, -250),
        ([(0, 100), (990, 200), (1000, 300)], 400, 1500),
        # corral: a flat table (Kafka Lag Exporter: -inf / +inf) answers its first / last time
        ([(100, 100), (200, 100), (400, 100)], 99, 100),
        ([(100, 100), (200, 100), (400, 100)], 101, 400),
        # too few points
        ([], 0, None),
        ([(100, 100)], 0, None),
    ],
)
def test_offset_time(samples, offset, expected):
    got = offset_time(samples, offset)
    assert got == (None if expected is None else pytest.approx(expected))


def test_offset_time_uses_only_the_known_samples():
    assert offset_time(FLAT, 250, known=4) == pytest.approx(1035)  # along (30,100)-(700,200)
    assert offset_time(FLAT, 150, known=2) == pytest.approx(45)
    assert offset_time(FLAT, 150, known=1) is None


@pytest.mark.parametrize(
    "samples, expected",
    [
        # LookupTableSpec "invalids and edge conditions": out of order in time or offset skipped
        ([(100, 100), (90, 110), (110, 90), (0, 0), (-1, 110), (110, -1), (-1, -1)], [(100, 100)]),
        # a log end that goes down (unclean truncation) is ignored until it passes its old high
        ([(0, 10), (5, 50), (10, 20), (15, 50), (20, 60)], [(0, 10), (5, 50), (15, 50), (20, 60)]),
        # equal times: the first wins
        ([(0, 10), (0, 20), (1, 20)], [(0, 10), (1, 20)]),
        ([], []),
    ],
)
def test_monotone_samples(samples, expected):
    assert monotone_samples(samples) == expected


@pytest.mark.parametrize(
    "samples, committed, now, expected",
    [
        ([(0, 0), (1000, 100)], 50, 3000, 2.5),
        # committed at the log end: 0 s (LagIsZero), even with a single sample
        ([(0, 0), (1000, 100)], 100, 3000, 0.0),
        ([(0, 100)], 100, 3000, 0.0),
        # commits outran the sampling: beyond the last sample is 0 s, never negative
        ([(0, 0), (1000, 100)], 150, 1000, 0.0),
        # fewer than two samples and behind: unknown
        ([(0, 100)], 50, 3000, None),
        ([], 50, 3000, None),
        # a quiet stretch: caught up at 200 when produce resumed at 730 -> counted from 700
        (FLAT, 200, 1700, 1.0),
        # samples later than `now` given: a prediction after `now` is clamped to 0
        ([(1000, 0), (2000, 100)], 50, 1200, 0.0),
    ],
)
def test_lag_seconds(samples, committed, now, expected):
    assert lag_seconds(samples, committed, now) == (
        None if expected is None else pytest.approx(expected)
    )


# -- partition_lag ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "commits, samples, at, expected",
    [
        # a row at every commit and sample time from the first commit; the log end is the last
        # sample at or before the row (not interpolated)
        (
            [(1000, 50), (3000, 150)],
            [(0, 0), (2000, 200), (4000, 300)],
            (),
            [
                LagRow(1000, 50, 50, 0, 0.0),  # commit ahead of the sample: log end raised to it
                LagRow(2000, 50, 200, 150, 1.5),
                LagRow(3000, 150, 200, 50, 1.5),
                LagRow(4000, 150, 300, 150, 2.5),
            ],
        ),
        # samples before the first commit give no row; no sample yet gives unknown lag
        (
            [(500, 10), (1500, 20)],
            [(1000, 30), (2000, 40)],
            (),
            [
                LagRow(500, 10, None, None, None),
                LagRow(1000, 10, 30, 20, None),  # one sample: no time for offset 10
                LagRow(1500, 20, 30, 10, None),
                LagRow(2000, 20, 40, 20, pytest.approx(2.0)),  # offset 20 at t=0 by extrapolation
            ],
        ),
        # equal commit times: the last wins; a commit and a sample at once make one row; `at`
        # adds rows (e.g. the end of the history)
        (
            [(1000, 5), (1000, 7)],
            [(0, 0), (1000, 10)],
            (2000, 100),
            [
                LagRow(1000, 7, 10, 3, pytest.approx(0.3)),
                LagRow(2000, 7, 10, 3, pytest.approx(1.3)),
            ],
        ),
        # the log end went down (unclean truncation): ignored until it passes its old high
        (
            [(1000, 90)],
            [(0, 0), (1000, 100), (2000, 50), (3000, 120)],
            (),
            [
                LagRow(1000, 90, 100, 10, pytest.approx(0.1)),
                LagRow(3000, 90, 120, 30, pytest.approx(2.1)),
            ],
        ),
        # a rewound commit: lag grows back
        (
            [(1000, 100), (2000, 40)],
            [(0, 0), (1000, 100)],
            (),
            [LagRow(1000, 100, 100, 0, 0.0), LagRow(2000, 40, 100, 60, pytest.approx(1.6))],
        ),
        ([], [(0, 0)], (), []),
    ],
)
def test_partition_lag(commits, samples, at, expected):
    assert partition_lag(commits, samples, at) == expected


# -- Burrow's evaluator: caching_test.go's table -------------------------------------------------


@pytest.mark.parametrize("case", BURROW, ids=[f"burrow-{i}" for i in range(len(BURROW))])
def test_burrow_rules(case):
    (
        window,
        log_ends,
        lag,
        now_s,
        allowed,
        always_lag,
        rewind,
        stopped,
        stalled,
        not_decreasing,
        recent_zero,
        status,
    ) = case
    assert lag_always_not_zero(window, allowed) == always_lag
    assert rewind_index(window) == rewind
    assert offsets_stopped(window, now_s * 1000) == stopped
    assert offsets_stalled(window) == stalled
    assert lag_not_decreasing(window) == not_decreasing
    assert recent_lag_zero(window, log_ends) == recent_zero
    assert partition_status(window, log_ends, lag, now_s * 1000, allowed) == status


@pytest.mark.parametrize(
    "window, index, recovered",
    [
        (_REWOUND, 3, True),
        (BURROW[15][0], 3, False),
        (_window((10, 0, 0), (5, 1, 0)), 1, False),
        (_window((10, 0, 0), (5, 1, 0), (10, 2, 0)), 1, True),
    ],
)
def test_rewind_recovered(window, index, recovered):
    assert rewind_recovered(window, index) == recovered


def test_no_commits_is_ok():
    assert partition_status([], [100], 100, 0) == OK


# -- corral's deliberate difference: no false STOP on a quiet partition -------------------------

# A consumer catching up (lag 50, 40, ... 10 at its commits) stops committing because nothing more
# is produced and it has nothing new to commit: Burrow says STOP once the gap exceeds the window's
# span, corral says OK while the log end stays where it was at the last commit (current lag 10,
# as at the last commit), and STOP once it moves.
_QUIET = _window(*((100 * i, 1000 * i, 60 - 10 * i) for i in range(1, 6)))


@pytest.mark.parametrize(
    "current_lag, burrow_compatible, status",
    [(10, True, STOP), (10, False, OK), (11, True, STOP), (11, False, STOP)],
)
def test_quiet_partition_is_not_stopped(current_lag, burrow_compatible, status):
    now = 20_000  # 15 s after the last commit; the window spans 4 s
    log_ends = [510] * 10
    got = partition_status(_QUIET, log_ends, current_lag, now, burrow_compatible=burrow_compatible)
    assert got == status


@pytest.mark.parametrize("burrow_compatible, at_20s", [(True, STOP), (False, OK)])
def test_quiet_partition_timeline(burrow_compatible, at_20s):
    # The consumer catches up slowly (lag 450 .. 410 at its commits) and stops committing when the
    # producer pauses; produce resumes at 21 s. `at` evaluates the quiet period at 20 s.
    commits = [(1000 * i, 100 * i) for i in range(1, 6)]
    samples = [(1000 * i - 500, 460 + 90 * i) for i in range(1, 6)] + [(21000, 911)]
    got = partition_status_timeline(
        commits, samples, burrow_compatible=burrow_compatible, at=[20000]
    )
    assert [r.time_ms for r in got] == [
        1000,
        1500,
        2000,
        2500,
        3000,
        3500,
        4000,
        4500,
        5000,
        20000,
        21000,
    ]
    assert [r.status for r in got[-3:]] == [OK, at_20s, STOP]


@pytest.mark.parametrize(
    "index", range(len(BURROW)), ids=[f"burrow-{i}" for i in range(len(BURROW))]
)
def test_corral_mode_on_burrows_table(index):
    window, log_ends, lag, now_s, allowed, *_, status = BURROW[index]
    expected = CORRAL_DIFFERS.get(index, status)
    assert partition_status(window, log_ends, lag, now_s * 1000, allowed, False) == expected


# -- timelines ----------------------------------------------------------------------------------


def test_partition_status_timeline_window_and_sample_rows():
    # Commits every second at the same offset with a growing log end: STALL (STOP at 1500, as in
    # Burrow: a window of one commit spans 0 s); the consumer then catches up (OK).
    commits = [(t, 10) for t in range(1000, 4000, 1000)] + [(4000, 40), (5000, 60)]
    samples = [(500, 20), (1500, 30), (2500, 40), (4500, 60), (9000, 70), (20000, 80)]
    assert partition_status_timeline(commits, samples) == [
        StatusRow(1000, STALL),
        StatusRow(1500, STOP),
        StatusRow(2000, STALL),
        StatusRow(2500, STALL),
        StatusRow(3000, STALL),
        StatusRow(4000, OK),  # lag 0 at this commit
        StatusRow(4500, OK),  # caught up: current lag 0
        StatusRow(5000, OK),
        StatusRow(9000, OK),  # 4 s since the last commit, the window spans 4 s
        StatusRow(20000, OK),  # the log end was at 60 among the recent samples (caught up)
    ]
    # with only 2 recent samples kept, the catch-up is forgotten: STOP while produce continues
    assert partition_status_timeline(commits, samples, intervals=2)[-1] == StatusRow(20000, STOP)


def test_partition_status_timeline_window_size():
    # A rewind 3 commits back leaves a window of 2 once it has aged out.
    commits = [(1000, 100), (2000, 50), (3000, 60), (4000, 70)]
    samples = [(0, 200)]
    got = partition_status_timeline(commits, samples, window=2)
    assert got == [
        StatusRow(1000, STALL),
        StatusRow(2000, REWIND),
        StatusRow(3000, OK),
        StatusRow(4000, OK),
    ]
    assert [r.status for r in partition_status_timeline(commits, samples)] == [
        STALL,
        REWIND,
        REWIND,
        REWIND,
    ]


@pytest.mark.parametrize(
    "statuses, expected",
    [
        ([], OK),
        ([OK], OK),
        ([OK, WARN], WARN),
        ([WARN, STOP], ERR),
        ([STALL], ERR),
        ([REWIND, OK], ERR),
        ([OK, OK, OK], OK),
    ],
)
def test_group_status(statuses, expected):
    assert group_status(statuses) == expected


def test_group_status_timeline():
    p0 = [StatusRow(1000, OK), StatusRow(3000, WARN), StatusRow(5000, OK)]
    p1 = [StatusRow(2000, STALL), StatusRow(3000, OK), StatusRow(4000, STOP)]
    assert group_status_timeline([p0, p1]) == [
        StatusRow(1000, OK),
        StatusRow(2000, ERR),
        StatusRow(3000, WARN),
        StatusRow(4000, ERR),
        StatusRow(5000, ERR),
    ]
    assert group_status_timeline([]) == []


# -- commit_activity ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "commits, expected",
    [
        (
            [
                (0, "a", 0, 10),
                (100, "a", 0, 10),
                (200, "a", 1, 5),
                (900, "a", 0, 3),
                (1000, "a", 0, 3),
                (1500, "b", 0, 3),
                (3100, "a", 1, 4),
            ],
            [
                ActivityRow(0, 4, 1, 1, 4.0),
                ActivityRow(1000, 2, 1, 0, 2.0),
                ActivityRow(3000, 1, 0, 1, 1.0),
            ],
        ),
        ([], []),
    ],
)
def test_commit_activity(commits, expected):
    assert commit_activity(commits, 1000) == expected


# -- properties ---------------------------------------------------------------------------------

_times = st.lists(st.integers(0, 10**6), min_size=1, max_size=30, unique=True).map(sorted)


@st.composite
def _samples(draw, min_size=2):
    times = draw(st.lists(st.integers(0, 10**6), min_size=min_size, max_size=30, unique=True))
    steps = draw(st.lists(st.integers(0, 1000), min_size=len(times), max_size=len(times)))
    offsets, total = [], 0
    for s in steps:
        total += s
        offsets.append(total)
    return list(zip(sorted(times), offsets))


def _kle_lookup(points, offset):
    # MemoryTable.lookup's search as written in LookupTable.scala: the newest pair of points
    # around the offset, else the first and the last point.
    pairs = [(points[i - 1], points[i]) for i in range(len(points) - 1, 0, -1)]
    left, right = next(
        ((lo, hi) for lo, hi in pairs if lo[1] <= offset <= hi[1]), (points[0], points[-1])
    )
    return right[0] - (right[1] - offset) * (right[0] - left[0]) / (right[1] - left[1])


@CHECKS
@given(_samples(), st.integers(-100, 40_000))
def test_offset_time_is_kafka_lag_exporters_lookup(samples, offset):
    if offset == samples[-1][1] or samples[0][1] == samples[-1][1]:
        return  # LagIsZero / a flat table (infinite in Kafka Lag Exporter): tables above
    assert offset_time(samples, offset) == pytest.approx(_kle_lookup(samples, offset))


@CHECKS
@given(st.lists(st.tuples(st.integers(0, 100), st.integers(0, 100)), max_size=30))
def test_monotone_samples_kept_in_order(samples):
    kept = monotone_samples(samples)
    assert all(k in samples for k in kept)
    assert all(a[0] < b[0] and a[1] <= b[1] for a, b in zip(kept, kept[1:]))
    assert kept[:1] == samples[:1]


@CHECKS
@given(_samples())
def test_offset_time_exact_at_samples_and_monotone(samples):
    last_at = {off: t for t, off in samples}  # a flat stretch maps to its last sample
    for off, t in last_at.items():
        assert offset_time(samples, off) == pytest.approx(t)
    lo, hi = samples[0][1], samples[-1][1]
    times = [offset_time(samples, x) for x in range(lo, hi + 1, max(1, (hi - lo) // 50))]
    assert all(not math.isnan(t) for t in times)
    assert times == sorted(times)


@st.composite
def _history(draw):
    samples = draw(_samples(min_size=0))
    times = draw(_times)
    offsets = draw(st.lists(st.integers(0, 40_000), min_size=len(times), max_size=len(times)))
    return list(zip(times, offsets)), samples


@CHECKS
@given(_history())
def test_lag_never_negative(history):
    commits, samples = history
    rows = partition_lag(commits, samples)
    assert [r.time_ms for r in rows] == sorted({r.time_ms for r in rows})
    for r in rows:
        assert r.lag_records is None or r.lag_records >= 0
        assert r.lag_seconds is None or r.lag_seconds >= 0
        assert r.log_end_offset is None or r.log_end_offset >= r.committed_offset
        if r.lag_seconds is not None:  # behind in records exactly when behind in time
            assert (r.lag_seconds > 0) == (r.lag_records > 0)
    statuses = partition_status_timeline(commits, samples)
    assert [s.time_ms for s in statuses] == [r.time_ms for r in rows]


@CHECKS
@given(_samples(), st.integers(1, 20), st.booleans())
def test_never_ok_while_lag_grows_and_commits_stall(samples, n_commits, burrow_compatible):
    # The log end is above the committed offset from before the first commit and keeps growing;
    # the consumer keeps committing the same offset.
    samples = [(t, off + 1) for t, off in samples]
    start, end = samples[0][0], samples[-1][0] + 1
    commits = [(start + 1 + (end - start) * i // n_commits, 0) for i in range(n_commits)]
    for row in partition_status_timeline(commits, samples, burrow_compatible=burrow_compatible):
        assert row.status in (STALL, STOP)


_statuses = st.sampled_from([OK, WARN, STOP, STALL, REWIND])


@CHECKS
@given(st.lists(st.lists(st.tuples(st.integers(0, 50), _statuses), max_size=10), max_size=5))
def test_group_status_is_the_worst(timelines):
    timelines = [[StatusRow(t, s) for t, s in sorted(dict(rows).items())] for rows in timelines]
    got = group_status_timeline(timelines)
    times = sorted({r.time_ms for rows in timelines for r in rows})
    assert [r.time_ms for r in got] == times
    for t, status in got:
        latest = [[r.status for r in rows if r.time_ms <= t][-1:] for rows in timelines]
        worst = max((min(s[0], ERR) for s in latest if s), default=OK)
        assert status == worst == group_status(s[0] for s in latest if s)
