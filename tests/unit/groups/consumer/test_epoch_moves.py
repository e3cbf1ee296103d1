"""The network thread moving a consumer-group member to its group's new target epoch
(rust/groups/consumer_epoch_moves.rs), when the target did not change the member's partitions, in
process, against the coordinator: whenever the view would move a member, the coordinator answers
that heartbeat with the same epoch and no assignment and writes exactly the record the network
thread writes (a randomized differential run), and the interval rule is answer.py's. Over TCP:
tests/wire/test_consumer_epoch_moves.py."""

from __future__ import annotations

import random

import pytest
from harness import (
    ConsumerDriver,
    FakeLog,
    Topics,
    check_view,
    make_coordinator,
    random_change,
    request,
)
from shortpath import CLIENT

from corral import _core
from corral.errors import ErrorCode
from corral.groups.consumer import MemberState
from corral.groups.consumer.answer import adaptive_interval_ms
from corral.groups.consumer.targets import incremental


def judge(coordinator, d: ConsumerDriver, name: str):
    c = d.clients[name]
    return coordinator.consumer_heartbeat_view.judge(
        d.group_id, c.member_id, c.instance_id, c.epoch, *CLIENT
    )


@pytest.mark.parametrize("seed", range(6))
def test_a_move_is_what_the_coordinator_would_answer_and_write(seed):
    rng = random.Random(seed)
    topics = Topics()
    topics.add("t", 12)
    topics.add("u", 3)
    log = FakeLog(keep=True)
    coordinator = make_coordinator(topics, log=log)
    view = coordinator.consumer_heartbeat_view
    drivers = [ConsumerDriver(topics, coordinator, group_id=f"g{i}") for i in range(2)]
    moves = steady_answers = 0
    for step in range(600):
        d = rng.choice(drivers)
        name = rng.choice("abcdef")
        client = d.clients.get(name)
        action = rng.random()
        if client is None or not client.joined:
            d.join(
                name,
                names=rng.choice([["t"], ["t"], ["u"], ["t", "u"]]),
                regex=rng.choice([None, None, "u", "n.*"]),
                instance_id=rng.choice([None, f"i{name}"]),
            )
        elif action < 0.5:
            verdict = judge(coordinator, d, name)
            value = view.movable(d.group_id, client.member_id)
            before, epoch = len(log.pairs), client.epoch
            result = d._send(
                client,
                request(d.group_id, client.member_id, client.epoch, instance_id=client.instance_id),
            )
            if verdict is None:
                continue
            if verdict[0] == "steady":
                steady_answers += 1
                assert (result["member_epoch"], result["assignment"]) == (epoch, None), step
                assert len(log.pairs) == before
                continue
            _, new_epoch, previous, _ = verdict
            moves += 1
            assert previous == epoch and new_epoch > epoch
            assert result["error_code"] == ErrorCode.NONE, (step, result)
            assert (result["member_epoch"], result["assignment"]) == (new_epoch, None), step
            record = _core.moved_assignment_record(
                d.group_id, client.member_id, value, new_epoch, previous
            )
            assert log.pairs[before:] == [record], step
        else:
            random_change(d, rng, topics, step, name)
        check_view(coordinator)
    assert moves >= 10 and steady_answers > 20, (moves, steady_answers)


def test_members_are_movable_only_with_exactly_their_target():
    topics = Topics()
    topics.add("t", 4)
    topics.add("u", 2)
    coordinator = make_coordinator(topics)
    d = ConsumerDriver(topics, coordinator)
    d.join("a")
    d.join("b")
    d.converge()
    view, group = coordinator.consumer_heartbeat_view, d.group
    a, b = (d.clients[n] for n in "ab")
    assert view.movable("g", a.member_id) and view.movable("g", b.member_id)
    # c subscribes to u only: a's and b's targets stay, so they are moved by the network thread.
    d.join("c", names=["u"])
    assert group.assignment_epoch > a.epoch
    assert judge(coordinator, d, "a")[:3] == ("move", group.assignment_epoch, a.epoch)
    # d joins t: a's or b's target changes, and that member's move is the coordinator's.
    d.join("d", names=["t"])
    changed = [
        c
        for c in (a, b)
        if group.target[c.member_id] != group.members[c.member_id].current.assigned
    ]
    assert changed and all(view.movable("g", c.member_id) is None for c in changed)
    assert all(judge(coordinator, d, c.name) is None for c in changed)


def test_a_regex_resolution_change_holds_moves_until_a_target_after_it():
    """A member subscribed by regex whose topic is deleted after the target was computed holds
    partitions the target still gives it: the coordinator revokes them, so no move until a
    target computed after the change (the batching interval keeps that target waiting)."""
    topics = Topics()
    topics.add("t", 2)
    topics.add("n1", 2)
    topics.add("n2", 2)
    coordinator = make_coordinator(topics, {"group.consumer.assignment.interval.ms": 3_600_000})
    d = ConsumerDriver(topics, coordinator)
    d.join("a", names=[], regex="n.*")
    d.join("b", names=["t"])
    group = d.group

    def target_now() -> None:  # as if the batching interval had passed
        group.assignment_timestamp_ms = 1
        group.metadata_expired = group.metadata_expired  # mirrors the group again

    target_now()
    d.converge()
    assert group.state_name == "Stable"
    d.join("c", names=["t"])
    target_now()
    d.heartbeat("c")  # computes the target: a's stays, b's changes
    epoch = group.assignment_epoch
    a = d.clients["a"]
    assert a.epoch < epoch and judge(coordinator, d, "a")[:2] == ("move", epoch)
    topics.remove("n2")
    coordinator.on_topics_changed({"n2"})
    assert group.group_epoch > epoch == group.assignment_epoch
    assert judge(coordinator, d, "a") is None, "the target still gives a partitions of n2"
    d.heartbeat("a", acknowledge=False)
    assert group.members[a.member_id].current.state is MemberState.UNREVOKED_PARTITIONS


def test_members_without_partitions_move_too(monkeypatch):
    """In a group with more members than partitions most members have an empty target, and in
    a big one (whose targets move only what changes) no TargetMember record at all: they are
    movable, and move as the coordinator would."""
    monkeypatch.setattr(incremental, "INCREMENTAL_ABOVE", 10)  # "big" from 10 members on
    topics = Topics()
    topics.add("t", 2)
    topics.add("u", 1)
    log = FakeLog(keep=True)
    coordinator = make_coordinator(topics, log=log)
    d = ConsumerDriver(topics, coordinator)
    for i in range(40):
        d.join(f"m{i}")
    d.converge(2)
    group = d.group
    empty = [c for c in d.clients.values() if not group.members[c.member_id].current.assigned]
    assert len(empty) == 38 and sum(c.member_id not in group.target for c in empty) > 20
    d.join("x", names=["u"])  # a new target that leaves t's members as they are
    for c in empty:
        verdict = judge(coordinator, d, c.name)
        assert verdict is not None and verdict[0] == "move", verdict
        value, before = (
            coordinator.consumer_heartbeat_view.movable("g", c.member_id),
            len(log.pairs),
        )
        result = d._send(c, request("g", c.member_id, c.epoch))
        assert result["member_epoch"] == verdict[1] and result["assignment"] is None
        assert log.pairs[before:] == [
            _core.moved_assignment_record("g", c.member_id, value, verdict[1], verdict[2])
        ]


@pytest.mark.parametrize("short_ms, max_rate", [(250, 2000), (0, 2000), (5000, 10), (100, 1)])
def test_the_interval_rule_is_answer_pys(short_ms, max_rate):
    rng = random.Random(short_ms + max_rate)
    for _ in range(3000):
        args = dict(
            stable=rng.random() < 0.5,
            behind=rng.random() < 0.5,
            reconciling=rng.choice([0, 1, 10, 999, 1000, 1001, 50_000]),
            due_in_ms=rng.choice([None, -5, 0, 100, 800, 4999, 20_000]),
            jitter=rng.random(),
            settling=rng.random() < 0.5,
            members=rng.choice([0, 5, 2000, 50_000]),
        )
        group_ms = rng.choice([500, 3000, 5000])
        assert _core.adaptive_interval_ms(
            group_ms, short_ms, max_rate, **args
        ) == adaptive_interval_ms(group_ms, short_ms, max_rate, **args), args
