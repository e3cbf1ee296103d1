"""numpy in, numpy out: the compiled rules (`corral._core._lag`, src/corral/analyze/_lag.pyx)
over many keys at once, giving exactly corral.analyze.rules' rows.

Keys are ranges of flat arrays: a key's commits and its partition's samples, each sorted by time
with equal times in log order. Results are flat columns, each key's rows after the previous
key's, with `rows[k]` rows for key k.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from corral._core import _lag
from corral.analyze.rules import BURROW_ALLOWED_LAG, BURROW_INTERVALS


class PartitionRows(NamedTuple):
    time_ms: np.ndarray  # int64
    committed_offset: np.ndarray  # int64
    log_end_offset: np.ndarray  # int64, meaningless where not log_end_known
    lag_records: np.ndarray  # int64, meaningless where not log_end_known
    lag_seconds: np.ndarray  # float64, NaN for None
    log_end_known: np.ndarray  # bool: False where the rules give None (no sample yet)
    status: np.ndarray  # int8, rules' codes
    rows: np.ndarray  # int64 per key


class GroupRows(NamedTuple):
    time_ms: np.ndarray  # int64
    status: np.ndarray  # int8
    rows: np.ndarray  # int64 per group


def _i64(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.int64)


def partition_rows(
    times,
    values,
    commit_start,
    commit_end,
    sample_start,
    sample_end,
    burrow_compatible: bool = True,
    window: int = BURROW_INTERVALS,
    intervals: int = BURROW_INTERVALS,
    allowed_lag: int = BURROW_ALLOWED_LAG,
) -> PartitionRows:
    """partition_lag and partition_status_timeline of key k: commits
    times/values[commit_start[k]:commit_end[k]], samples times/values[sample_start[k]:
    sample_end[k]] (the same arrays: commits and samples side by side)."""
    times, values = _i64(times), _i64(values)
    cs, ce, ss, se = (_i64(a) for a in (commit_start, commit_end, sample_start, sample_end))
    cap = int((ce - cs).sum() + (se - ss).sum())
    out = PartitionRows(
        np.empty(cap, np.int64),
        np.empty(cap, np.int64),
        np.empty(cap, np.int64),
        np.empty(cap, np.int64),
        np.empty(cap, np.float64),
        np.empty(cap, np.int8),
        np.empty(cap, np.int8),
        np.empty(len(cs), np.int64),
    )
    n = _lag.partition_rows(
        times, values, cs, ce, ss, se, burrow_compatible, window, intervals, allowed_lag, *out
    )
    return PartitionRows(
        *(a[:n] for a in out[:5]), out.log_end_known[:n].view(np.bool_), out.status[:n], out.rows
    )


def group_rows(times, partitions, statuses, group_start, group_end) -> GroupRows:
    """group_status_timeline of group g: its partitions' status rows (times, partition numbers
    >= 0, int8 statuses) [group_start[g]:group_end[g]], sorted by time."""
    times, partitions = _i64(times), _i64(partitions)
    statuses = np.ascontiguousarray(statuses, dtype=np.int8)
    gs, ge = _i64(group_start), _i64(group_end)
    count = int(partitions.max()) + 1 if len(partitions) else 0
    out = GroupRows(
        np.empty(len(times), np.int64), np.empty(len(times), np.int8), np.empty(len(gs), np.int64)
    )
    n = _lag.group_rows(times, partitions, statuses, gs, ge, count, *out)
    return GroupRows(out.time_ms[:n], out.status[:n], out.rows)
