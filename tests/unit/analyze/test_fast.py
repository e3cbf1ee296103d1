"""The compiled rules (corral.analyze.fast over `corral._core._lag`) against the pure rules
(corral.analyze.rules), row for row: generated histories with small integers (equal times,
rewinds, flat stretches, samples going back), many keys per call, Burrow's caching_test.go table,
and numbers past 2**53."""

from __future__ import annotations

import ast
import inspect
import math

import numpy as np
import pytest
from analyzekit import BURROW, CORRAL_DIFFERS
from checkout import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from corral._core import _lag
from corral.analyze import fast
from corral.analyze.rules import (
    ERR,
    OK,
    REWIND,
    STALL,
    STOP,
    WARN,
    StatusRow,
    group_status_timeline,
    partition_lag,
    partition_status_timeline,
)

CHECKS = settings(derandomize=True, deadline=None, max_examples=1500)

_rows = st.lists(
    st.tuples(st.integers(0, 12).map(lambda t: t * 500), st.integers(0, 30)), max_size=30
)
_history = st.tuples(_rows, _rows).map(lambda h: tuple(sorted(r, key=lambda x: x[0]) for r in h))


def rules_rows(commits, samples, burrow_compatible, window=10, intervals=10, allowed=0):
    lag = partition_lag(commits, samples)
    status = partition_status_timeline(
        commits, samples, window, intervals, allowed, burrow_compatible
    )
    assert [r.time_ms for r in lag] == [r.time_ms for r in status]
    return [(*r, s.status) for r, s in zip(lag, status)]


def fast_rows(histories, burrow_compatible, window=10, intervals=10, allowed=0):
    """Every (commits, samples) key in one call, commits and samples side by side in one array."""
    times, values, bounds, at = [], [], [], 0
    for commits, samples in histories:
        for rows in (commits, samples):
            times += [t for t, _ in rows]
            values += [v for _, v in rows]
            bounds.append((at, at + len(rows)))
            at += len(rows)
    cs, ce = np.array(bounds[0::2] or np.empty((0, 2)), np.int64).reshape(-1, 2).T
    ss, se = np.array(bounds[1::2] or np.empty((0, 2)), np.int64).reshape(-1, 2).T
    out = fast.partition_rows(
        times, values, cs, ce, ss, se, burrow_compatible, window, intervals, allowed
    )
    rows = [
        (
            t,
            c,
            int(le) if k else None,
            int(lr) if k else None,
            None if math.isnan(sec) else float(sec),
            int(s),
        )
        for t, c, le, lr, sec, k, s in zip(*(a.tolist() for a in out[:7]))
    ]
    per_key, at = [], 0
    for n in out.rows.tolist():
        per_key.append(rows[at : at + n])
        at += n
    assert at == len(rows)
    return per_key


@CHECKS
@given(_history, st.booleans())
def test_one_key_is_the_rules(history, burrow_compatible):
    commits, samples = history
    assert fast_rows([history], burrow_compatible) == [
        rules_rows(commits, samples, burrow_compatible)
    ]


@CHECKS
@given(_history, st.booleans(), st.integers(1, 4), st.integers(1, 4), st.integers(0, 5))
def test_windows_and_allowed_lag(history, burrow_compatible, window, intervals, allowed):
    commits, samples = history
    assert fast_rows([history], burrow_compatible, window, intervals, allowed) == [
        rules_rows(commits, samples, burrow_compatible, window, intervals, allowed)
    ]


@settings(derandomize=True, deadline=None, max_examples=300)
@given(st.lists(_history, max_size=6), st.booleans())
def test_many_keys_in_one_call(histories, burrow_compatible):
    assert fast_rows(histories, burrow_compatible) == [
        rules_rows(c, s, burrow_compatible) for c, s in histories
    ]


def test_keys_share_their_partitions_samples():
    samples = [(0, 10), (1000, 20), (2000, 30)]
    commits = [[(500, 5)], [(1500, 25), (2500, 30)]]
    times = [t for t, _ in samples] + [t for c in commits for t, _ in c]
    values = [v for _, v in samples] + [v for c in commits for _, v in c]
    out = fast.partition_rows(times, values, [3, 4], [4, 6], [0, 0], [3, 3])
    assert out.rows.tolist() == [3, 3]  # 500 1000 2000; 1500 2000 2500
    expected = rules_rows(commits[0], samples, True) + rules_rows(commits[1], samples, True)
    assert list(zip(out.time_ms.tolist(), out.status.tolist())) == [(r[0], r[5]) for r in expected]


_big = st.integers(2**52, 2**62)


@settings(derandomize=True, deadline=None, max_examples=300)
@given(
    st.lists(st.tuples(_big, _big), max_size=8),
    st.lists(st.tuples(_big, _big), max_size=8),
    st.booleans(),
)
def test_numbers_past_2_53(commits, samples, burrow_compatible):
    """Products and quotients that doubles cannot hold exactly: Python's exact rounding."""
    commits, samples = sorted(commits, key=lambda r: r[0]), sorted(samples, key=lambda r: r[0])
    assert fast_rows([(commits, samples)], burrow_compatible) == [
        rules_rows(commits, samples, burrow_compatible)
    ]


def _window_arrays(window):
    return (
        np.array([c.time_ms for c in window], np.int64),
        np.array([c.offset for c in window], np.int64),
        np.array([c.lag or 0 for c in window], np.int64),
        np.array([c.lag is not None for c in window], np.int8),
    )


@pytest.mark.parametrize(
    "index", range(len(BURROW)), ids=[f"burrow-{i}" for i in range(len(BURROW))]
)
def test_burrow_table(index):
    """caching_test.go's table through the compiled evaluator, in both modes."""
    window, log_ends, lag, now_s, allowed, *_, status = BURROW[index]
    args = (*_window_arrays(window), np.array(log_ends, np.int64), lag, now_s * 1000, allowed)
    assert _lag.partition_status(*args, True) == status
    assert _lag.partition_status(*args, False) == CORRAL_DIFFERS.get(index, status)


def test_burrow_table_as_a_history():
    """Row 9 (_FAST) replayed as commits and samples: the timeline's last row is Burrow's STOP."""
    window, log_ends, *_ = BURROW[9]
    commits = [(c.time_ms, c.offset) for c in window]
    samples = [(commits[-1][0] + 1 + i, off) for i, off in enumerate(sorted(log_ends))]
    for burrow_compatible in (True, False):
        got = fast_rows([(commits, samples)], burrow_compatible)[0]
        assert got == rules_rows(commits, samples, burrow_compatible)


_status = st.sampled_from([OK, WARN, STOP, STALL, REWIND])


@CHECKS
@given(st.lists(st.lists(st.tuples(st.integers(0, 30), _status), max_size=12), max_size=6))
def test_group_rows_are_the_rules(groups):
    """Several groups in one call, each of up to 6 partitions' status timelines."""
    times, parts, statuses, bounds, expected = [], [], [], [], []
    for g, rows in enumerate(groups):
        timelines = {}
        for i, (t, s) in enumerate(rows):
            timelines.setdefault(i % 3, {})[t] = s  # at most one row per partition and time
        timelines = [[StatusRow(t, s) for t, s in sorted(tl.items())] for tl in timelines.values()]
        events = sorted((t, p, s) for p, tl in enumerate(timelines) for t, s in tl)
        bounds.append((len(times), len(times) + len(events)))
        times += [t for t, _, _ in events]
        parts += [p + 3 * g for _, p, _ in events]  # partition numbers need not start at 0
        statuses += [s for _, _, s in events]
        expected.append([tuple(r) for r in group_status_timeline(timelines)])
    gs, ge = np.array(bounds, np.int64).reshape(-1, 2).T
    out = fast.group_rows(times, parts, statuses, gs, ge)
    got, at = [], 0
    rows = list(zip(out.time_ms.tolist(), out.status.tolist()))
    for n in out.rows.tolist():
        got.append(rows[at : at + n])
        at += n
    assert got == expected
    assert set(out.status.tolist()) <= {OK, WARN, ERR}


def test_stub_matches_the_module():
    stub = ROOT / "src" / "corral" / "_core" / "_lag.pyi"
    tree = ast.parse(stub.read_text())
    declared = {
        n.name: [a.arg for a in n.args.args] for n in tree.body if isinstance(n, ast.FunctionDef)
    }
    public = {n for n in dir(_lag) if not n.startswith("_") and callable(getattr(_lag, n))}
    assert set(declared) == public
    for name, params in declared.items():
        assert list(inspect.signature(getattr(_lag, name)).parameters) == params


def test_short_outputs_are_refused():
    with pytest.raises(ValueError):
        _lag.partition_rows(
            *(np.zeros(1, np.int64),) * 2,
            np.array([0]),
            np.array([1]),
            np.array([0]),
            np.array([0]),
            True,
            10,
            10,
            0,
            *(np.empty(0, np.int64),) * 4,
            np.empty(0),
            *(np.empty(0, np.int8),) * 2,
            np.empty(1, np.int64),
        )


# -- the job fed in batches of a few rows ------------------------------------------------------


def test_job_on_batches_of_three_rows(spark):
    """Groups cut by Arrow batches' ends are put back together whole (the usual case at
    scale)."""
    from analyzekit import assert_tables, rules_tables, run_job

    commits = [
        (g, t, p, ts * 500, (ts * 7 + len(g)) % 40)
        for g in ("g1", "g2", "g3")
        for t in ("a", "b")
        for p in (0, 1)
        for ts in range(0, 12, 1 + (p + len(t)) % 3)
    ]
    commits += [("g1", "a", 0, 3000, 2)]  # a rewind at a time the key has a commit already
    samples = [
        (t, p, ts * 500 + 250 * p, ts * 5) for t in ("a", "b") for p in (0, 1) for ts in range(14)
    ]
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "3")
    try:
        for burrow_compatible in (True, False):
            done = run_job(spark, commits, samples, burrow_compatible)
            assert_tables(spark, done.tables, *rules_tables(commits, samples, burrow_compatible))
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
