"""The scenario driver (tests/kits/analyze_scenario_driver.py, running the scenario of
tests/kits/analyze_scenario.py) checked on a real corral: its truth against what the broker says
(OffsetFetch, every commit in `__consumer_offsets`, the log-end samples and group events of
`__corral_analytics`, all read with confluent-kafka), and its expected statuses against the pure
rules fed with the truth's commits and exact log ends, and with the broker's own commit records
and samples."""

from __future__ import annotations

import json
import time
from collections import defaultdict

import analyze_scenario as sc
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from corral import _core
from corral.analyze import rules
from corral.groups.storage import records
from corral.observability.analytics_topic import TOPIC as ANALYTICS

OFFSET_KEYS = (records.OFFSET_COMMIT_KEY_V0, records.OFFSET_COMMIT_KEY)


def read_topic(
    bootstrap: str, topic: str
) -> list[tuple[int, int, int, bytes | None, bytes | None]]:
    """Every record of every partition: (partition, offset, timestamp, key, value), in each
    partition's log order."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "scenario-reader", "enable.auto.commit": False}
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        high = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in partitions
        }
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        position = {p: 0 for p in partitions}
        out = []
        deadline = time.monotonic() + 30
        while any(position[p] < high[p] for p in partitions):
            assert time.monotonic() < deadline, f"read {position} of {high} in {topic}"
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            position[msg.partition()] = msg.offset() + 1
            out.append((msg.partition(), msg.offset(), msg.timestamp()[1], msg.key(), msg.value()))
        return out
    finally:
        consumer.close()


def broker_commits(bootstrap: str) -> dict[sc.Key, list[tuple[int, int]]]:
    """Every offset commit in `__consumer_offsets` (corral's or Kafka's): (commit timestamp,
    offset) per key, in log order."""
    found: dict[sc.Key, list[tuple[int, int]]] = defaultdict(list)
    for _, _, _, key, value in read_topic(bootstrap, "__consumer_offsets"):
        kind, fields = records.read_key(key)
        if kind in OFFSET_KEYS and value is not None:
            _, v = _core.decode_record_value(kind, value)
            found[fields].append((v[3], v[0]))  # OffsetCommitValue's commit timestamp, offset
    return found


@pytest.fixture(scope="module")
def run(corral_scenario):
    """(truth, commits in __consumer_offsets, __corral_analytics records as (timestamp, key,
    value), committed offsets by OffsetFetch) of the session's scenario on corral."""
    broker, truth = corral_scenario
    analytics = [
        (ts, k.decode(), json.loads(v))
        for _, _, ts, k, v in read_topic(broker.bootstrap, ANALYTICS)
    ]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    fetched = {}
    for group in sc.STATUS_GROUPS:
        [future] = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
        for tp in future.result(timeout=20).topic_partitions:
            fetched[(group, tp.topic, tp.partition)] = tp.offset
    return truth, broker_commits(broker.bootstrap), analytics, fetched


def test_phases_follow_the_schedule(run):
    truth, *_ = run
    assert [p.name for p in truth.phases] == [p.name for p in sc.PHASES]
    for phase, plan, following in zip(truth.phases, sc.PHASES, truth.phases[1:] + [None]):
        assert phase.ticks >= plan.min_ticks
        assert phase.end_ms == (following.start_ms if following else truth.end_ms)
    assert truth.start_ms == truth.phases[0].start_ms
    assert truth.end_ms - truth.start_ms < 40_000
    trouble = truth.phase("trouble")
    assert set(trouble.expected.values()) == {"OK", "WARN", "STALL", "REWIND", "STOP"}
    assert trouble.expected_group == {g: "ERR" for g in sc.STATUS_GROUPS}
    assert truth.phase("recover").expected_group == {g: "WARN" for g in sc.STATUS_GROUPS}
    # The two status groups give each role a different partition.
    classic, consumer = sc.STATUS_GROUPS
    for p in range(sc.STATUS_PARTITIONS):
        assert (
            truth.roles[(classic, sc.STATUS_TOPIC, p)]
            != truth.roles[(consumer, sc.STATUS_TOPIC, p)]
        )


def test_commits_are_the_brokers(run):
    """Every commit the truth has is in __consumer_offsets, in order, stamped within the time
    its request was in flight; OffsetFetch gives the last one. The membership groups commit
    nothing."""
    truth, commits, _, fetched = run
    assert set(commits) == set(truth.commits)
    for key, made in truth.commits.items():
        stored = commits[key]
        assert [off for _, off in stored] == [c.offset for c in made], key
        for (ts, _), c in zip(stored, made):
            assert c.sent_ms <= ts <= c.acked_ms, (key, ts, c)
        assert fetched[key] == made[-1].offset
    for key, made in truth.commits.items():
        ends = truth.samples(key[1], key[2])
        # The log end at each commit is the last tick's, acknowledged before the commit.
        for c in made:
            assert c.log_end == max(end for t, end in ends if t <= c.acked_ms)


def test_samples_are_the_log_ends(run):
    """corral's log-end samples of the scenario's partitions agree with the produced records."""
    truth, _, analytics, _ = run
    seen = defaultdict(list)
    for ts, kind, v in analytics:
        if (
            kind == "log_end"
            and v["topic"] == sc.STATUS_TOPIC
            and truth.start_ms <= ts < truth.end_ms
        ):
            seen[v["partition"]].append(ts)
            low, high = truth.log_end_bounds(sc.STATUS_TOPIC, v["partition"], ts)
            assert low <= v["log_end_offset"] <= high, (ts, v, low, high)
    assert set(seen) == set(range(sc.STATUS_PARTITIONS))
    for p, times in seen.items():
        assert len(times) >= (truth.end_ms - truth.start_ms) / sc.MAX_SAMPLE_INTERVAL_MS, p


def _events(analytics, truth, group: str, names: set[str]) -> list[tuple[int, dict]]:
    return [
        (ts, v)
        for ts, kind, v in analytics
        if kind == "group_event"
        and v["group_id"] == group
        and v["event"] in names
        and truth.start_ms <= ts < truth.end_ms
    ]


def test_rebalances_and_membership_are_the_coordinators(run):
    """Within the scenario, each membership group's rebalances are exactly the truth's (members
    before and after, between the change and its being seen settled), so are its joins, leaves,
    expiries and fencings; the status groups have none."""
    truth, _, analytics, _ = run
    for group, protocol in sc.MEMBER_GROUPS.items():
        expected = [r for r in truth.rebalances if r.group == group]
        assert [r.phase for r in expected] == ["trouble", "recover", "settle"]
        ends = _events(analytics, truth, group, {"rebalance_end"})
        assert [(v["members_before"], v["members"]) for _, v in ends] == [
            (r.members_before, r.members_after) for r in expected
        ]
        for (ts, v), r in zip(ends, expected):
            assert r.requested_ms <= v["start_ms"] <= ts <= r.settled_ms, (v, r)
            assert ts == v["start_ms"] + v["duration_ms"], v  # the record is dated at its end
        moves = _events(
            analytics,
            truth,
            group,
            {"member_joined", "member_left", "member_expired", "member_fenced"},
        )
        wanted = [m for m in truth.memberships if m.group == group]
        assert [(v["event"], v["client_id"]) for _, v in moves] == [
            (m.event, m.client_id) for m in wanted
        ]
        for (ts, v), m in zip(moves, wanted):
            assert m.requested_ms <= ts <= m.settled_ms, (v, m)
            assert v["protocol"] == protocol and v.get("instance_id") == m.instance_id
        reasons = {v["event"]: v.get("reason") for _, v in moves}
        assert reasons["member_fenced"] == "static_member_replaced"
        assert reasons["member_expired"] == "session_timeout"
    for group in sc.STATUS_GROUPS:
        assert (
            _events(
                analytics,
                truth,
                group,
                {"rebalance_start", "rebalance_end", "member_joined", "member_left"},
            )
            == []
        )


@pytest.mark.parametrize("burrow_compatible", [True, False])
def test_rules_give_the_expected_statuses(run, burrow_compatible):
    """The rules at each phase's end give the truth's statuses, from the truth (commits when
    acknowledged, exact log ends at each tick) and from the broker (its commit timestamps and
    corral's own log-end samples, sampled on its own clock)."""
    truth, commits, analytics, _ = run
    expected = sc.expected_statuses(truth)
    exact = sc.statuses_by_rules(
        truth,
        {k: truth.commit_rows(k) for k in truth.roles},
        {tp: truth.samples(*tp) for tp in truth.ticks},
        burrow_compatible,
    )
    assert exact == expected
    sampled = defaultdict(list)
    for ts, kind, v in analytics:
        if kind == "log_end":
            sampled[(v["topic"], v["partition"])].append((ts, v["log_end_offset"]))
    broker = sc.statuses_by_rules(truth, commits, sampled, burrow_compatible)
    assert broker == expected


def test_lag_from_the_rules_is_the_truths(run):
    """partition_lag on the truth's commits and exact log ends: lag in records at each commit as
    produced, lag in seconds within the tick in which the log end passed the committed offset."""
    truth, *_ = run
    for key in truth.roles:
        topic, partition = key[1:]
        made = {(c.acked_ms, c.offset): c for c in truth.commits[key]}
        lagging = 0
        for row in rules.partition_lag(truth.commit_rows(key), truth.samples(topic, partition)):
            c = made.get((row.time_ms, row.committed_offset))
            if c is None:
                continue
            assert row.lag_records == max(0, c.log_end - c.offset)
            if c.offset >= c.log_end:
                assert row.lag_seconds == 0
                continue
            lagging += 1
            start, done = truth.reached_bounds(topic, partition, c.offset)
            # Interpolated between ticks' ends: the previous tick's end at the earliest.
            assert (
                (row.time_ms - done) / 1000
                <= row.lag_seconds
                <= (row.time_ms - start + sc.TICK_MS) / 1000
            ), (key, row, start, done)
        # Only these commit behind the log end; keeping up and stopping never do.
        assert (lagging > 0) == (truth.roles[key] in (sc.BEHIND, sc.STALL, sc.REWIND)), key
