"""`__corral_analytics` (docs/analytics.md): log-end samples and group events, read back with a
real Kafka consumer (confluent-kafka) from a real corral over TCP, while a classic group and a
KIP-848 group of confluent-kafka members join, leave and crash and a producer writes. (The
analytics log's batching and bounded buffer in process:
tests/unit/observability/test_analytics_topic.py.)
"""

from __future__ import annotations

import time

import pytest
from analyticskit import group_events, read_all, wait_events, wait_until
from cgkit import CG_FAST, MemberProcess, create_topics, stop_processes, wait_stable
from confluent_kafka import Consumer, Producer, TopicPartition
from ownership import all_partitions

from corral.observability.analytics_topic import (
    TOPIC,
)

INTERVAL_MS = 300
SETTINGS = {
    **CG_FAST,
    "corral.analytics.sample.interval.ms": INTERVAL_MS,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
}
CLASSIC_TOPICS = {"an-classic": 4}
CONSUMER_TOPICS = {"an-consumer": 6}
PRODUCED = {"an-produced": 3}
MEMBERSHIP = {"member_joined", "member_left", "member_expired", "member_fenced"}


def ended(members: int):
    """The last rebalance of the group ended with `members` members."""

    def check(events) -> bool:
        last = [e for e in events if e["event"] in ("rebalance_start", "rebalance_end")]
        return (
            bool(last) and last[-1]["event"] == "rebalance_end" and last[-1]["members"] == members
        )

    return check


def covers_once(assignment: dict, partitions: set) -> bool:
    listed = [tuple(tp) for parts in assignment.values() for tp in parts or ()]
    return len(listed) == len(set(listed)) and set(listed) == partitions


def classic_member(name: str, **extra) -> dict:
    return {
        "name": name,
        "protocol": "classic",
        "session_timeout_ms": 6000,
        "heartbeat_interval_ms": 500,
        **extra,
    }


def check_pairs(events: list[dict], epoch_field: str) -> list[tuple[dict, dict]]:
    """Every rebalance_end follows a rebalance_start, at a higher generation or epoch."""
    pairs, start = [], None
    for e in events:
        if e["event"] == "rebalance_start":
            start = start or e
        elif e["event"] == "rebalance_end":
            assert start is not None, events
            assert e[epoch_field] >= start[epoch_field]
            assert e["start_ms"] is not None and e["duration_ms"] >= 0
            pairs.append((start, e))
            start = None
    return pairs


def test_analytics_topic_records_groups_and_log_ends(corral_factory):
    broker = corral_factory(**SETTINGS)
    bootstrap = broker.bootstrap
    create_topics(bootstrap, {**CLASSIC_TOPICS, **CONSUMER_TOPICS, **PRODUCED})
    processes: list[MemberProcess] = []
    try:
        # A classic group: two members, a third joins, the first leaves, the third crashes.
        classic = MemberProcess(
            "confluent",
            bootstrap,
            "an-classic-g",
            [classic_member("c1"), classic_member("c2")],
            topics=list(CLASSIC_TOPICS),
        )
        processes.append(classic)
        wait_events(bootstrap, "an-classic-g", ended(2))
        third = MemberProcess(
            "confluent",
            bootstrap,
            "an-classic-g",
            [classic_member("c3", session_timeout_ms=2000)],
            topics=list(CLASSIC_TOPICS),
        )
        processes.append(third)
        wait_events(bootstrap, "an-classic-g", ended(3))
        classic.close("c1")
        wait_events(bootstrap, "an-classic-g", ended(2))
        third.kill()
        records = wait_events(bootstrap, "an-classic-g", ended(1))

        events = group_events(records, "an-classic-g")
        joined = [e for e in events if e["event"] == "member_joined"]
        assert len(joined) == 3 and all(
            e["protocol"] == "classic" and e["client_id"] for e in joined
        )
        assert [e["reason"] for e in events if e["event"] == "member_left"] == ["left"]
        expired = [e for e in events if e["event"] == "member_expired"]
        assert [e["reason"] for e in expired] == ["session_timeout"]
        assert expired[0]["member_id"] in {e["member_id"] for e in joined}
        pairs = check_pairs(events, "generation_id")
        ends = [end for _, end in pairs]
        assert [e["members"] for e in ends][-4:] == [2, 3, 2, 1]
        assert [e["members_before"] for e in ends][-3:] == [2, 3, 2]
        generations = [e["generation_id"] for e in ends]
        assert generations == sorted(set(generations))
        assignments = [e for e in events if e["event"] == "generation_assignment"]
        assert [a["generation_id"] for a in assignments] == generations
        for a in assignments:
            assert covers_once(a["assignment"], all_partitions(CLASSIC_TOPICS)), a

        # A KIP-848 group: two members, then one crashes (its session expires).
        consumer = MemberProcess(
            "confluent", bootstrap, "an-consumer-g", ["k1", "k2"], topics=list(CONSUMER_TOPICS)
        )
        crashing = MemberProcess(
            "confluent", bootstrap, "an-consumer-g", ["k3"], topics=list(CONSUMER_TOPICS)
        )
        processes += [consumer, crashing]
        wait_stable(
            bootstrap, "an-consumer-g", [consumer, crashing], all_partitions(CONSUMER_TOPICS)
        )
        wait_events(bootstrap, "an-consumer-g", ended(3))
        crashing.kill()
        records = wait_events(bootstrap, "an-consumer-g", ended(2))
        events = group_events(records, "an-consumer-g")
        joined = [e for e in events if e["event"] == "member_joined"]
        assert len(joined) == 3 and all(e["protocol"] == "consumer" for e in joined)
        expired = [e for e in events if e["event"] == "member_expired"]
        assert [e["reason"] for e in expired] == ["session_timeout"]
        pairs = check_pairs(events, "group_epoch")
        assert pairs[-1][0]["cause"] == "member_expired"
        assert (pairs[-1][1]["members_before"], pairs[-1][1]["members"]) == (3, 2)
        epochs = [e["group_epoch"] for e in events if e["event"] == "rebalance_start"]
        assert epochs == sorted(set(epochs))
        targets = [e for e in events if e["event"] == "target_assignment"]
        assert targets and all(
            covers_once(t["assignment"], all_partitions(CONSUMER_TOPICS))
            for t in targets
            if t["assignment"]
        )
        assert len(targets[-1]["assignment"]) == 2
        member_epochs = [e for e in events if e["event"] == "member_epoch"]
        assert {e["member_epoch"] for e in member_epochs} >= {pairs[-1][1]["group_epoch"]}

        # Log-end samples: only produced partitions move, each sample only when changed, and
        # the last one is the ListOffsets latest offset.
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(30):
            producer.produce("an-produced", b"x", partition=i % 2)
        assert producer.flush(20) == 0
        reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "lo"})
        latest = {
            p: reader.get_watermark_offsets(TopicPartition("an-produced", p), timeout=10)[1]
            for p in range(3)
        }
        reader.close()
        assert latest == {0: 15, 1: 15, 2: 0}

        def sampled() -> bool:
            samples = [v for _, k, v in read_all(bootstrap) if k == "log_end"]
            last = {(s["topic"], s["partition"]): s["log_end_offset"] for s in samples}
            return all(last.get(("an-produced", p)) == latest[p] for p in range(3))

        wait_until(sampled, 10 * INTERVAL_MS / 1000 + 5, what="log-end samples")
        records = read_all(bootstrap)
        samples = [(ts, v) for ts, k, v in records if k == "log_end"]
        by_partition: dict = {}
        for _ts, s in samples:
            by_partition.setdefault((s["topic"], s["partition"]), []).append(s["log_end_offset"])
            assert s["log_start_offset"] == 0 and s["v"] == 1
        assert not {t for t, _ in by_partition} & {"__consumer_offsets", TOPIC}
        for key, offsets in by_partition.items():
            assert offsets == sorted(set(offsets)), (key, offsets)  # only when changed
        assert by_partition[("an-produced", 2)] == [0]
        assert by_partition[("an-classic", 0)] == [0]
        timestamps = [ts for ts, _, _ in records]
        assert all(abs(ts - time.time() * 1000) < 120_000 for ts in timestamps)

        # Members leave; after a restart nothing is recorded again (no replay of history).
        stop_processes(processes)
        wait_events(bootstrap, "an-consumer-g", ended(0), timeout=20)
        wait_events(bootstrap, "an-classic-g", ended(0), timeout=20)
        before = [r for r in read_all(bootstrap) if r[1] == "group_event"]
        broker.restart()
        time.sleep(4 * INTERVAL_MS / 1000)
        after = read_all(bootstrap)
        assert [r for r in after if r[1] == "group_event"] == before
        resampled = [v for ts, k, v in after if k == "log_end"][len(samples) :]
        assert {(s["topic"], s["partition"]) for s in resampled} >= all_partitions(PRODUCED)
    finally:
        stop_processes(processes)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_static_member_replaced(corral_factory, protocol):
    """A static member closes and its instance comes back under a new member id: the old id is
    fenced, the new one joins, and no rebalance is recorded for it."""
    broker = corral_factory(**SETTINGS)
    bootstrap = broker.bootstrap
    create_topics(bootstrap, {"an-static": 2})
    group = f"an-static-{protocol}"
    spec = {
        "name": "s1",
        "instance_id": "inst-1",
        "protocol": protocol,
        **({"session_timeout_ms": 30000} if protocol == "classic" else {}),
    }
    first = MemberProcess("confluent", bootstrap, group, [spec], topics=["an-static"])
    processes = [first]
    try:
        wait_events(bootstrap, group, ended(1))
        # A static member's close leaves temporarily (consumer: epoch -2; classic: no LeaveGroup).
        first.close_all()
        second = MemberProcess("confluent", bootstrap, group, [spec], topics=["an-static"])
        processes.append(second)

        def replaced(events) -> bool:
            return [e["event"] for e in events if e["event"] in MEMBERSHIP][-2:] == [
                "member_fenced",
                "member_joined",
            ]

        records = wait_events(bootstrap, group, replaced)
        events = group_events(records, group)
        joins = [e for e in events if e["event"] == "member_joined"]
        [fenced] = [e for e in events if e["event"] == "member_fenced"]
        assert fenced["reason"] == "static_member_replaced"
        assert fenced["member_id"] == joins[0]["member_id"] != joins[1]["member_id"]
        assert {e["instance_id"] for e in [*joins, fenced]} == {"inst-1"}
        assert [e["event"] for e in events].count("rebalance_start") == 1
    finally:
        stop_processes(processes)
