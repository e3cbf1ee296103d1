"""The network thread moving a consumer-group member to its group's new target epoch
(rust/groups/consumer_epoch_moves.rs), when the target did not change the member's partitions.

Over TCP: such members move without reaching Python, memory follows them before the next
request, a Python write of the group is never interleaved with a move, and an acknowledged move
survives kill -9. The moves against the coordinator, in process:
tests/unit/groups/consumer/test_epoch_moves.py."""

from __future__ import annotations

import pytest
from harness import (
    check_counts,
)
from python_handlers import record_python_calls
from rawwire import RawClient
from scraper import Scraper
from shortpath import Member, create_topic, settle, with_broker

from corral.groups.consumer import MemberState
from corral.network.apis import ApiKey


@pytest.fixture
def python_calls(monkeypatch):
    return record_python_calls(monkeypatch, ApiKey.CONSUMER_GROUP_HEARTBEAT)


# ================================================================================ in process ===


# ======================================================================== over the wire ===


def test_members_whose_partitions_stay_move_without_python(tmp_path, python_calls):
    def scenario(broker) -> None:
        a, b, c = (Member(broker.port, "mv", f"member-{n}") for n in "abc")
        b.instance_id = "inst-b"
        with a.client, b.client, c.client:
            create_topic(a.client, "t", 4)
            create_topic(a.client, "u", 2)
            assert a.join(["t"])["error_code"] == 0 and b.join(["t"])["error_code"] == 0
            settle(broker, a, b)
            group = broker.groups.groups["mv"]
            before = a.epoch
            assert c.join(["u"])["error_code"] == 0  # a new target; a's and b's do not change
            target = broker.run(lambda: group.assignment_epoch)
            assert target > before
            calls, moved = len(python_calls), broker.view.moved
            for m in (a, b):
                r = m.steady()
                assert (r["error_code"], r["member_epoch"], r["assignment"]) == (0, target, None)
            assert len(python_calls) == calls and broker.view.moved == moved + 2

            def memory():
                # What the next request would find (the dispatcher applies moves first).
                broker.groups.apply_core_moves()
                check_counts(group)
                return {
                    m.member_id: (m.current.epoch, m.current.previous_epoch, m.current.state)
                    for m in group.members.values()
                }

            model = broker.run(memory)
            assert model["member-a"] == model["member-b"] == (target, before, MemberState.STABLE)
            assert broker.run(lambda: group.state_name) == "Stable"
            # The next heartbeats are steady ones, and the coordinator agrees on the epoch.
            assert a.steady()["member_epoch"] == target and len(python_calls) == calls
            r = a.acknowledge()  # owned partitions reported: the coordinator's
            assert (r["error_code"], r["member_epoch"]) == (0, target) and len(
                python_calls
            ) == calls + 1

    with_broker(tmp_path, scenario)


def a_new_target_keeping(broker, a: Member, c: Member) -> int:
    """Topics t and u; `a` joins t and settles; `c` joins u: a new target that leaves a's
    partitions as they were. Returns a's epoch before it."""
    create_topic(a.client, "t", 4)
    create_topic(a.client, "u", 2)
    assert a.join(["t"])["error_code"] == 0
    settle(broker, a)
    before = a.epoch
    assert c.join(["u"])["error_code"] == 0
    return before


def test_no_move_while_python_writes_the_group(tmp_path, python_calls):
    """A Python write of the group in progress (flagged from before its records are applied
    until they are appended) leaves the member's heartbeat to Python."""

    def scenario(broker) -> None:
        a, c = Member(broker.port, "pw", "member-a"), Member(broker.port, "pw", "member-c")
        with a.client, c.client:
            a_new_target_keeping(broker, a, c)
            path = broker.groups.writer.core_commits
            broker.run(path.python_writing_group, "pw", True)
            calls = len(python_calls)
            r = a.steady()
            assert r["error_code"] == 0 and len(python_calls) == calls + 1
            broker.run(path.python_writing_group, "pw", False)

    with_broker(tmp_path, scenario)


def test_off_when_disabled(tmp_path, python_calls):
    def scenario(broker) -> None:
        a, c = Member(broker.port, "off", "member-a"), Member(broker.port, "off", "member-c")
        with a.client, c.client:
            before = a_new_target_keeping(broker, a, c)
            calls = len(python_calls)
            r = a.steady()
            assert r["member_epoch"] > before and len(python_calls) == calls + 1
            assert broker.view.moved == 0

    with_broker(tmp_path, scenario, **{"corral.group.consumer.epoch.short.path.enable": False})


def test_acknowledged_moves_survive_kill_9(corral_factory):
    broker = corral_factory(
        **{"corral.metrics.listen": "127.0.0.1:0", "group.consumer.assignment.interval.ms": 0}
    )
    members = []
    with RawClient(broker.port) as client:
        create_topic(client, "t", 8)
        create_topic(client, "u", 1)
    try:
        for i in range(4):
            members.append(Member(broker.port, "k9", f"member-{i}"))
            assert members[-1].join(["t"])["error_code"] == 0
        for _ in range(6):
            for m in members:
                assert m.acknowledge()["error_code"] == 0
        before = [m.epoch for m in members]
        extra = Member(broker.port, "k9", "member-u")
        assert extra.join(["u"])["error_code"] == 0
        for m in members:
            assert m.steady()["error_code"] == 0
        moved = [m.epoch for m in members]
        assert all(n > b for n, b in zip(moved, before))
        assert Scraper(broker).value("corral_consumer_epoch_short_path_total") == 4
        broker.kill()
    finally:
        for m in members:
            m.close()
    broker.start()
    for m in members:
        m.client = RawClient(broker.port)
        r = m.steady()  # at the epoch acknowledged before the kill: known, not fenced
        assert (r["error_code"], r["member_epoch"]) == (0, moved[members.index(m)]), r
        m.close()
