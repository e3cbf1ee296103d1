"""The rules over group events (corral.analyze.event_rules), table-driven, in process."""

from __future__ import annotations

import pytest

from corral.analyze.event_rules import (
    ChurnRow,
    LagOver,
    RebalanceRow,
    lag_over,
    member_churn,
    rebalances,
    skew,
)


def start(t, members_before, members, cause="c", protocol="classic", **epoch):
    epoch = epoch or {"generation_id": 1}
    return (
        t,
        "rebalance_start",
        {
            "protocol": protocol,
            "members_before": members_before,
            "members": members,
            "cause": cause,
            **epoch,
        },
    )


def end(t, members, start_ms, members_before=None, cause="c", protocol="classic", **epoch):
    epoch = epoch or {"generation_id": 2}
    seen = start_ms is not None
    return (
        t,
        "rebalance_end",
        {
            "protocol": protocol,
            "members": members,
            **epoch,
            "members_before": members_before if seen else None,
            "cause": cause if seen else None,
            "start_ms": start_ms,
            "duration_ms": t - start_ms if seen else None,
        },
    )


def ev(t, event, **value):
    return (t, event, value)


REBALANCE_CASES = {
    "one rebalance, the end's own start and duration": (
        [start(1000, 1, 2), end(1500, 2, 1000, 1)],
        [RebalanceRow("classic", 1000, 1500, 500, 2, 1, 2, "c", 1)],
    ),
    "a restart mid-way keeps the first start": (
        [
            start(1000, 1, 2, "first"),
            start(1200, 1, 3, "second", generation_id=1),
            end(1900, 3, 1000, 1, "first"),
        ],
        [RebalanceRow("classic", 1000, 1900, 900, 2, 1, 3, "first", 2)],
    ),
    "an end whose start the broker lost: the start seen before it": (
        [start(1000, 2, 3), end(4000, 3, None)],
        [RebalanceRow("classic", 1000, 4000, 3000, 2, 2, 3, "c", 1)],
    ),
    "an end whose start was never seen: start null": (
        [end(4000, 3, None)],
        [RebalanceRow("classic", None, 4000, None, 2, None, 3, None, 0)],
    ),
    "under way at the end of the history (classic: the next generation)": (
        [start(1000, 1, 2), end(1500, 2, 1000, 1), start(3000, 2, 1, generation_id=2)],
        [
            RebalanceRow("classic", 1000, 1500, 500, 2, 1, 2, "c", 1),
            RebalanceRow("classic", 3000, None, None, 3, 2, None, "c", 1),
        ],
    ),
    "consumer: the epoch the members reach, the last start's while under way": (
        [
            start(10, 0, 1, "member_joined", "consumer", group_epoch=1),
            start(20, 0, 2, "member_joined", "consumer", group_epoch=2),
        ],
        [RebalanceRow("consumer", 10, None, None, 2, 0, None, "member_joined", 2)],
    ),
    "a deletion ends a rebalance with no members": (
        [start(10, 1, 0), ev(30, "group_deleted", protocol="classic")],
        [RebalanceRow("classic", 10, 30, 20, 2, 1, 0, "c", 1)],
    ),
    "other events change nothing": (
        [ev(5, "member_joined", generation_id=0), ev(6, "group_deleted")],
        [],
    ),
}


@pytest.mark.parametrize("events, expected", REBALANCE_CASES.values(), ids=REBALANCE_CASES)
def test_rebalances(events, expected):
    assert rebalances(events) == expected


def joined(t, epoch=0, protocol="classic"):
    field = "generation_id" if protocol == "classic" else "group_epoch"
    return ev(t, "member_joined", protocol=protocol, member_id=f"m{t}", **{field: epoch})


def gone(t, event, reason):
    return ev(t, event, member_id=f"m{t}", reason=reason)


CHURN_CASES = {
    "a new group: members counted from 0": (
        [
            joined(100),
            joined(200),
            start(200, 0, 2),
            end(300, 2, 200),
            gone(1500, "member_left", "left"),
        ],
        [ChurnRow(0, 2, 0, 0, 0, 0, 0, 0, 2), ChurnRow(1000, 0, 1, 0, 0, 0, 0, 0, 1)],
    ),
    "mid-life history: unknown until a rebalance says": (
        [
            gone(100, "member_expired", "session_timeout"),
            start(150, 3, 2),
            gone(2100, "member_expired", "rebalance_timeout"),
            gone(2200, "member_expired", "sync_timeout"),
        ],
        [ChurnRow(0, 0, 0, 1, 0, 0, 0, 0, 2), ChurnRow(2000, 0, 0, 0, 1, 1, 0, 0, 0)],
    ),
    "a join at a later generation is not a new group": (
        [joined(100, epoch=4)],
        [ChurnRow(0, 1, 0, 0, 0, 0, 0, 0, None)],
    ),
    "fencings apart from static replacements, which keep the count": (
        [
            joined(10, protocol="consumer"),
            joined(20, protocol="consumer"),
            gone(30, "member_fenced", "static_member_replaced"),
            joined(31, 2, "consumer"),
            gone(40, "member_fenced", "the member did not revoke in time"),
        ],
        [ChurnRow(0, 3, 0, 0, 0, 0, 1, 1, 1)],
    ),
    "deletion: 0 members; other events make no row": (
        [
            ev(10, "member_epoch", member_epoch=3),
            ev(1010, "group_deleted"),
            ev(2020, "commit_rejected", count=3),
        ],
        [ChurnRow(1000, 0, 0, 0, 0, 0, 0, 0, 0)],
    ),
}


@pytest.mark.parametrize("events, expected", CHURN_CASES.values(), ids=CHURN_CASES)
def test_member_churn(events, expected):
    assert member_churn(events, 1000) == expected


LAG = [(100, 5, 1.0), (200, 9, 3.0), (300, 2, None), (400, None, None)]
LAG_CASES = {
    "the row in force at the start counts": ([(150, 250)], [LagOver(9, 3.0)]),
    "rows at the end do not": ([(100, 200)], [LagOver(5, 1.0)]),
    "to the end of the history": ([(250, None)], [LagOver(9, 3.0)]),
    "before any row": ([(0, 100)], [LagOver(None, None)]),
    "unknown lags are skipped": ([(300, None)], [LagOver(2, None)]),
    "several intervals": (
        [(0, 100), (100, 300), (300, None)],
        [LagOver(None, None), LagOver(9, 3.0), LagOver(2, None)],
    ),
}


@pytest.mark.parametrize("intervals, expected", LAG_CASES.values(), ids=LAG_CASES)
def test_lag_over(intervals, expected):
    assert lag_over(intervals, LAG) == expected


def test_lag_over_without_rows():
    assert lag_over([(0, None)], []) == [LagOver(None, None)]


@pytest.mark.parametrize(
    "counts, expected",
    [([2, 2, 2], 1.0), ([4, 1, 1], 2.0), ([3, 0], 2.0), ([], None), ([0, 0], None)],
)
def test_skew(counts, expected):
    assert skew(counts) == expected
