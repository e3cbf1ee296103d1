"""`commit_rejected` group events (docs/analytics.md): OffsetCommits refused as a whole, by a real
corral over TCP (raw wire clients: a classic member and a KIP-848 member commit with a wrong
generation, an unknown member id, a stale member epoch), read back from `__corral_analytics` with
a real Kafka consumer (the per-interval aggregation in process: tests/unit/groups/test_events.py).
The same history checks that
the rebalances rule's start and duration (the rebalance_end's own) agree with the
rebalance_start records."""

from __future__ import annotations

import time

from analyticskit import group_events, wait_events
from cgkit import FAST_GROUPS
from rawwire import RawClient
from shortpath import Member, create_topic
from wire_groups import commit, join, sync

from corral.analyze.event_rules import rebalances
from corral.errors import ErrorCode

INTERVAL_MS = 1000


def rejected(events: list[dict]) -> dict[str, int]:
    """Refusals counted per error name."""
    counts: dict[str, int] = {}
    for e in events:
        if e["event"] == "commit_rejected":
            counts[e["error"]] = counts.get(e["error"], 0) + e["count"]
    return counts


def test_refused_commits_are_counted_per_group_and_error(corral_factory):
    broker = corral_factory(**FAST_GROUPS, **{"corral.analytics.sample.interval.ms": INTERVAL_MS})
    with RawClient(broker.port) as c:
        create_topic(c, "rej", 2)
        joined = join(c, "rej-classic")
        member, generation = joined["member_id"], joined["generation_id"]
        assert sync(c, "rej-classic", generation, member, [(member, b"")])["error_code"] == 0
        assert commit(c, "rej-classic", generation, member, [("rej", 0, 5)]) == [0]
        started = time.monotonic()
        for _ in range(40):
            assert (
                commit(c, "rej-classic", generation + 1, member, [("rej", 0, 6), ("rej", 1, 6)])
                == [ErrorCode.ILLEGAL_GENERATION] * 2
            )
        elapsed = time.monotonic() - started
        assert commit(c, "rej-classic", generation, "nobody", [("rej", 0, 7)]) == [
            ErrorCode.UNKNOWN_MEMBER_ID
        ]

    consumer = Member(broker.port, "rej-consumer", "m-1")
    try:
        assert consumer.join(["rej"])["error_code"] == 0
        epoch = consumer.epoch
        assert commit(
            consumer.client, "rej-consumer", epoch, "m-1", [("rej", 0, 1)], version=9
        ) == [0]
        for stale in (epoch + 1, epoch - 1):
            assert commit(
                consumer.client, "rej-consumer", stale, "m-1", [("rej", 0, 2)], version=9
            ) == [ErrorCode.STALE_MEMBER_EPOCH]
        assert commit(
            consumer.client, "rej-consumer", epoch, "m-2", [("rej", 0, 2)], version=9
        ) == [ErrorCode.UNKNOWN_MEMBER_ID]
    finally:
        consumer.close()

    records = wait_events(
        broker.bootstrap, "rej-consumer", lambda events: sum(rejected(events).values()) == 3
    )
    classic = group_events(records, "rej-classic", "commit_rejected")
    assert rejected(classic) == {"ILLEGAL_GENERATION": 40, "UNKNOWN_MEMBER_ID": 1}
    assert {e["protocol"] for e in classic} == {"classic"}
    # One event per group and error code per interval: 40 refusals in `elapsed` seconds span
    # at most that many intervals.
    illegal = [e for e in classic if e["error"] == "ILLEGAL_GENERATION"]
    assert 1 <= len(illegal) <= 2 + elapsed * 1000 // INTERVAL_MS
    assert all(e["error_code"] == ErrorCode.ILLEGAL_GENERATION for e in illegal)
    for ts, key, e in records:  # dated by the first refusal counted, the last one in last_ms
        if key == "group_event" and e["event"] == "commit_rejected":
            assert ts <= e["last_ms"]
    consumer_events = group_events(records, "rej-consumer", "commit_rejected")
    assert rejected(consumer_events) == {"STALE_MEMBER_EPOCH": 2, "UNKNOWN_MEMBER_ID": 1}
    assert {e["protocol"] for e in consumer_events} == {"consumer"}

    # Each group's rebalance, from the rebalance_end's own start and duration, starts at its
    # rebalance_start record's time (both read the wall clock in the same step, so only a
    # thread switch apart).
    for group in ("rej-classic", "rej-consumer"):
        mine = [
            (ts, v["event"], v)
            for ts, key, v in records
            if key == "group_event" and v["group_id"] == group
        ]
        [start_ms] = [ts for ts, event, _ in mine if event == "rebalance_start"]
        [row] = rebalances(mine)
        assert abs(row.start_ms - start_ms) <= 50 and row.starts == 1, (row, start_ms)
        assert abs(row.end_ms - row.start_ms - row.duration_ms) <= 50, row
        assert (row.members_before, row.members_after) == (0, 1)
