"""What one task of the job computes (corral.analyze.lag_rows), without Spark: the rows equal
the rules' (as test_analyze_job's Spark runs do), both sort paths give the same order, and the
summaries the report and the run's summary read equal the same figures computed from the rows."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.parquet as pq
from analyzekit import rules_tables
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.analyze import lag_rows as rows
from corral.analyze.inputs.segments import COMMITS
from corral.analyze.rules import STATUS_NAMES

SAMPLES = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("time_ms", pa.int64()),
        ("log_end_offset", pa.int64()),
        ("seq", pa.int64()),
    ]
)
RANK = {name: code for code, name in STATUS_NAMES.items()}


def tables(commits, samples, seqs=None):
    seqs = list(range(len(commits))) if seqs is None else seqs
    c = pa.Table.from_pylist(
        [dict(zip(COMMITS.names, (*row, seq))) for row, seq in zip(commits, seqs)], schema=COMMITS
    )
    s = pa.Table.from_pylist(
        [dict(zip(SAMPLES.names, (*row, seq))) for seq, row in enumerate(samples)], schema=SAMPLES
    )
    return c, rows.SampleIndex(s)


def run(commits, samples, burrow_compatible=True, seqs=None):
    c, index = tables(commits, samples, seqs)
    return rows.lag_rows(rows.sort_commits(c), index, burrow_compatible)


def as_tuples(table: pa.Table, columns) -> list[tuple]:
    return sorted(tuple(r[c] for c in columns) for r in table.to_pylist())


def p99(values: list[float]) -> float | None:
    values = sorted(v for v in values if v is not None)
    return values[math.ceil(0.99 * len(values)) - 1] if values else None


def expected_summaries(made: rows.LagRows):
    part = made.partition.to_pylist()
    keys, groups = {}, {}
    for r in part:
        k = (r["group"], r["topic"], r["partition"])
        keys.setdefault(k, []).append(r["lag_records"])
        groups.setdefault(r["group"], []).append(r)
    key_rows = [
        (*k, max((v for v in lags if v is not None), default=None)) for k, lags in keys.items()
    ]
    status = {}
    for r in made.group.to_pylist():
        status.setdefault(r["group"], []).append((r["time_ms"], r["status"]))
    group_rows = []
    for g, rs in groups.items():
        statuses = [s for _, s in sorted(status[g], key=lambda x: x[0])]
        group_rows.append(
            (
                g,
                min(r["time_ms"] for r in rs),
                max(r["time_ms"] for r in rs),
                len({(r["topic"], r["partition"]) for r in rs}),
                p99([r["lag_seconds"] for r in rs]),
                max((r["lag_seconds"] for r in rs if r["lag_seconds"] is not None), default=None),
                max((r["lag_records"] for r in rs if r["lag_records"] is not None), default=None),
                max(statuses, key=RANK.__getitem__),
                sum(s != "OK" for s in statuses),
                statuses[-1],
            )
        )
    return sorted(key_rows), sorted(group_rows)


_times = st.integers(0, 20).map(lambda t: t * 500)
_commits = st.lists(
    st.tuples(
        st.sampled_from(["g1", "g2", "g3"]),
        st.sampled_from(["a", "b"]),
        st.integers(0, 2),
        _times,
        st.integers(0, 40),
    ),
    max_size=30,
)
_samples = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 2), _times, st.integers(0, 40)),
    max_size=25,
)


@settings(derandomize=True, deadline=None, max_examples=200)
@given(commits=_commits, samples=_samples, burrow_compatible=st.booleans())
def test_rows_and_summaries(commits, samples, burrow_compatible):
    made = run(commits, samples, burrow_compatible)
    lag, status, group = rules_tables(commits, samples, burrow_compatible)
    assert as_tuples(made.partition, rows.LAG_COLUMNS) == sorted(lag)
    assert as_tuples(made.partition, rows.STATUS_COLUMNS) == sorted(status)
    assert as_tuples(made.group, ["group", "time_ms", "status"]) == sorted(group)
    keys, groups = expected_summaries(made)
    assert as_tuples(made.key_summary, rows.KEY_SUMMARY.names) == keys
    assert as_tuples(made.group_summary, rows.GROUP_SUMMARY.names) == groups


@settings(derandomize=True, deadline=None, max_examples=100)
@given(commits=_commits, samples=_samples, data=st.data())
def test_rows_in_any_order(commits, samples, data):
    """Rows not in log order (a shuffled task) are ordered by seq: lexsort instead of the one
    key sort, the same rows."""
    order = data.draw(st.permutations(list(range(len(commits)))))
    expected = run(commits, samples)
    got = run([commits[i] for i in order], samples, seqs=order)  # each with its log position
    assert got.partition.equals(expected.partition) and got.group.equals(expected.group)


def test_wide_keys_fall_back_to_lexsort():
    """Times too far apart for one int64 key: the same order as by lexsort."""
    commits = [("g", "t", p, t, p + i) for i, t in enumerate([0, 2**61, 5]) for p in (0, 3)]
    c, _ = tables(commits, [])
    s = rows.sort_commits(c)
    assert s.time_ms.tolist() == [0, 5, 2**61] * 2
    assert s.partition.tolist() == [0, 0, 0, 3, 3, 3]


def test_write_by_date(tmp_path):
    day = 86_400_000
    table = pa.table(
        {
            "time_ms": pa.array([day - 1, 5, day, 3 * day + 7], pa.int64()),
            "v": pa.array([1, 2, 3, 4], pa.int64()),
        }
    )
    assert rows.write_by_date(table, tmp_path, "part-00001") == 4
    found = {
        p.parent.name: pq.read_table(p)["v"].to_pylist()
        for p in tmp_path.glob("*/part-00001.parquet")
    }
    assert found == {"date=1970-01-01": [1, 2], "date=1970-01-02": [3], "date=1970-01-04": [4]}
    assert not list(tmp_path.rglob(".*"))  # no temporary file left
    assert rows.write_by_date(table.slice(0, 0), tmp_path / "empty", "x") == 0
    assert not (tmp_path / "empty").exists()
