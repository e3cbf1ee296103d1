"""The rules of `corral analyze` over group events (docs/analytics.md, `group_event` records), as
pure functions: one group's events in log order in, plain rows out (docs/analytics-rules.md).

An event is `(time_ms, event, value)`, `value` being the record's whole JSON object (a dict).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

Event = tuple[int, str, dict[str, Any]]

# -- rebalances ---------------------------------------------------------------------------------


class RebalanceRow(NamedTuple):
    protocol: str | None
    start_ms: int | None  # None: the start was not seen (a broker restart mid-rebalance)
    end_ms: int | None  # None: still under way at the end of the history
    duration_ms: int | None
    generation: int | None  # classic: the generation it makes; consumer: the group epoch
    members_before: int | None
    members_after: int | None
    cause: str | None
    starts: int  # rebalance_start events seen for it: >1 when it restarted, 0 when not seen


def _epoch(value: dict[str, Any]) -> int | None:
    epoch = value.get("generation_id")
    return value.get("group_epoch") if epoch is None else epoch


def rebalances(events: Iterable[Event]) -> list[RebalanceRow]:
    """One row per rebalance of one group.

    A `rebalance_end` closes the rebalance under way: its own `start_ms`, `duration_ms`,
    `members_before` and `cause` (the coordinator's, from its first `rebalance_start`) are used;
    when it has none (its start was before a broker restart), those of the `rebalance_start` seen
    in the history before it, if any, else null. A rebalance still under way at the end of the
    history has end, duration and members after null; a group deleted mid-rebalance ends it
    with 0 members. Generation: classic, the generation the rebalance makes (the end's
    `generation_id`; under way: the old generation + 1); consumer, the group epoch the members
    reach (the end's `group_epoch`; under way: the last `rebalance_start`'s).
    """
    rows: list[RebalanceRow] = []
    open_: dict[str, Any] | None = None  # the first rebalance_start seen, and how many
    for time_ms, event, v in events:
        if event == "rebalance_start":
            if open_ is None:
                open_ = {**v, "time_ms": time_ms, "starts": 0}
            open_["starts"] += 1
            open_["last_epoch"] = _next_epoch(v)
        elif event == "rebalance_end":
            seen = open_ or {}
            start = v.get("start_ms")
            if start is None:
                start = seen.get("time_ms")
            duration = v.get("duration_ms")
            if duration is None and start is not None:
                duration = max(time_ms - start, 0)
            rows.append(
                RebalanceRow(
                    v.get("protocol"),
                    start,
                    time_ms,
                    duration,
                    _epoch(v),
                    _first(v.get("members_before"), seen.get("members_before")),
                    v.get("members"),
                    _first(v.get("cause"), seen.get("cause")),
                    seen.get("starts", 0),
                )
            )
            open_ = None
        elif event == "group_deleted" and open_ is not None:
            rows.append(_under_way(open_, time_ms, 0))
            open_ = None
    if open_ is not None:
        rows.append(_under_way(open_, None, None))
    return rows


def _next_epoch(start: dict[str, Any]) -> int | None:
    # classic: rebalance_start carries the old generation; consumer: the new group epoch.
    if start.get("generation_id") is not None:
        return start["generation_id"] + 1
    return start.get("group_epoch")


def _under_way(start: dict[str, Any], end_ms: int | None, members: int | None) -> RebalanceRow:
    t = start["time_ms"]
    return RebalanceRow(
        start.get("protocol"),
        t,
        end_ms,
        None if end_ms is None else max(end_ms - t, 0),
        start["last_epoch"],
        start.get("members_before"),
        members,
        start.get("cause"),
        start["starts"],
    )


def _first(*values):
    return next((v for v in values if v is not None), None)


# -- member_churn -------------------------------------------------------------------------------

EXPIRY_REASONS = ("session_timeout", "rebalance_timeout", "sync_timeout")
STATIC_REPLACED = "static_member_replaced"
CHURN_EVENTS = {
    "member_joined",
    "member_left",
    "member_expired",
    "member_fenced",
    "rebalance_start",
    "rebalance_end",
    "group_deleted",
}


class ChurnRow(NamedTuple):
    bucket_start_ms: int
    joins: int
    leaves: int
    expired_session_timeout: int
    expired_rebalance_timeout: int
    expired_sync_timeout: int
    fencings: int  # members the coordinator fenced (consumer groups: revocation or join deadline)
    static_replacements: int  # a static member's old id, replaced by its new one
    members: int | None  # members at the bucket's end; None while not known


def member_churn(events: Iterable[Event], bucket_ms: int) -> list[ChurnRow]:
    """Per time bucket of one group's events: joins, departures by kind, and the members at the
    bucket's end. Buckets with no event of the group have no row.

    The member count is known from a group's start (its first event a join at generation or
    group epoch 0), from each `rebalance_start` and `rebalance_end` (their `members`), and after
    a `group_deleted` (0); in between, each join adds one and each departure takes one away.
    Before any of these (a history that begins mid-life), it is unknown."""
    buckets: dict[int, list] = {}
    members: int | None = None
    first = True
    for time_ms, event, v in events:
        if event not in CHURN_EVENTS:
            continue
        row = buckets.setdefault(time_ms - time_ms % bucket_ms, [0] * 7 + [None])
        if event == "member_joined":
            if first and _epoch(v) == 0:
                members = 0
            row[0] += 1
            members = None if members is None else members + 1
        elif event in ("member_left", "member_expired", "member_fenced"):
            reason = v.get("reason")
            if event == "member_left":
                row[1] += 1
            elif event == "member_expired":
                if reason in EXPIRY_REASONS:
                    row[2 + EXPIRY_REASONS.index(reason)] += 1
            elif reason == STATIC_REPLACED:
                row[6] += 1
            else:
                row[5] += 1
            members = None if members is None else max(members - 1, 0)
        elif event in ("rebalance_start", "rebalance_end") and v.get("members") is not None:
            members = v["members"]
        elif event == "group_deleted":
            members = 0
        first = False
        row[7] = members
    return [ChurnRow(b, *counts) for b, counts in sorted(buckets.items())]


# -- assignment_skew ----------------------------------------------------------------------------


class LagOver(NamedTuple):
    lag_records: int | None  # the partition's highest lag in records over the interval
    lag_seconds: float | None  # its highest lag in seconds


def lag_over(
    intervals: Sequence[tuple[int, int | None]],
    lag: Sequence[tuple[int, int | None, float | None]],
) -> list[LagOver]:
    """One partition's highest lag over each interval `[start, end)` (end None: to the end of
    the history), from its partition_lag rows `[(time_ms, lag_records, lag_seconds)]` sorted by
    time. The lag at any moment is that of the last row at or before it, so the row in force at
    the interval's start counts, and rows at its end do not. None where no row is in force."""
    times = [t for t, _, _ in lag]
    out = []
    for start, end in intervals:
        lo = max(bisect_right(times, start) - 1, 0)
        hi = len(times) if end is None else bisect_left(times, end)
        rows = lag[lo:hi]
        out.append(LagOver(_max(r for _, r, _ in rows), _max(s for _, _, s in rows)))
    return out


def _max(values: Iterable):
    known = [v for v in values if v is not None]
    return max(known) if known else None


def skew(partition_counts: Sequence[int]) -> float | None:
    """An assignment's skew: the most partitions a member has over the mean (1.0 is even);
    None without members or partitions."""
    if not partition_counts or not sum(partition_counts):
        return None
    return max(partition_counts) * len(partition_counts) / sum(partition_counts)
