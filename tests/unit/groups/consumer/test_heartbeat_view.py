"""The view behind the network thread's short path for steady-state ConsumerGroupHeartbeats
(rust/groups/consumer_heartbeat_view.rs), in process, against the coordinator: whenever the view would
answer a heartbeat, the coordinator would have answered the same and written nothing (a
randomized differential run), and the view follows the group through computations, topic changes,
deletion and conversion. Over the wire: tests/wire/test_consumer_short_path.py."""

from __future__ import annotations

import random

import pytest
from harness import (
    ConsumerDriver,
    FakeLog,
    Topics,
    answer,
    check_view,
    make_coordinator,
    random_change,
    request,
)
from shortpath import CLIENT

from corral.errors import ErrorCode
from corral.groups.coordinator import GroupCoordinator


def view_answer(coordinator, group_id, client) -> int | None:
    view = coordinator.consumer_heartbeat_view
    return view.answer(group_id, client.member_id, client.instance_id, client.epoch, *CLIENT)


def one_group(partitions: int) -> tuple[Topics, GroupCoordinator, ConsumerDriver]:
    """A coordinator and a driver of its group "g", subscribed to topic "t"."""
    topics = Topics()
    topics.add("t", partitions)
    coordinator = make_coordinator(topics)
    return topics, coordinator, ConsumerDriver(topics, coordinator)


def steady(driver: ConsumerDriver, name: str) -> dict:
    """An incremental heartbeat that changes nothing (what the network thread answers)."""
    client = driver.clients[name]
    return driver._send(
        client,
        request(driver.group_id, client.member_id, client.epoch, instance_id=client.instance_id),
    )


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_the_view_answers_only_what_the_coordinator_answers_without_a_change(seed):
    rng = random.Random(seed)
    topics = Topics()
    topics.add("t", 8)
    topics.add("u", 3)
    log = FakeLog(keep=True)
    coordinator = make_coordinator(topics, log=log)
    drivers = [ConsumerDriver(topics, coordinator, group_id=f"g{i}") for i in range(2)]
    answered = asked = 0
    for step in range(400):
        d = rng.choice(drivers)
        name = rng.choice("abcd")
        client = d.clients.get(name)
        action = rng.random()
        if client is None or not client.joined:
            d.join(
                name,
                names=rng.choice([["t"], ["t", "u"]]),
                regex=rng.choice([None, "u"]),
                instance_id=rng.choice([None, f"i{name}"]),
            )
        elif action < 0.55:
            asked += 1
            interval = view_answer(coordinator, d.group_id, client)
            before = len(log.pairs)
            result = steady(d, name)
            if interval is not None:
                answered += 1
                assert result == {
                    "error_code": ErrorCode.NONE,
                    "error_message": None,
                    "member_id": client.member_id,
                    "member_epoch": client.epoch,
                    "heartbeat_interval_ms": interval,
                    "assignment": None,
                }, step
                assert len(log.pairs) == before, "the coordinator wrote for a steady heartbeat"
        else:
            random_change(d, rng, topics, step, name)
    assert answered > asked // 4, (answered, asked)


def test_a_settled_group_is_answered_and_an_unsettled_one_is_not():
    topics, coordinator, d = one_group(6)
    d.join("a")
    d.join("b")
    d.converge()
    group = d.group
    assert group.state_name == "Stable"
    for name in "ab":
        assert view_answer(coordinator, "g", d.clients[name]) == 5000

    # A target computed in a worker thread: meanwhile members reconcile toward the current
    # target, which the view answers (a big group's heartbeats would all queue for Python).
    group.computing_epoch = group.group_epoch + 1
    check_view(coordinator)
    assert view_answer(coordinator, "g", d.clients["a"]) == 5000
    group.computing_epoch = None

    coordinator.on_topics_changed({"t"})  # a subscribed topic may have changed
    check_view(coordinator)
    assert view_answer(coordinator, "g", d.clients["a"]) is None
    epoch = group.group_epoch
    steady(d, "a")  # the coordinator looks at the metadata: nothing to bump
    assert not group.metadata_expired and group.group_epoch == epoch
    assert view_answer(coordinator, "g", d.clients["b"]) == 5000
    # A partition more does change the metadata: the group epoch moves (not the short path).
    topics.by_name["t"].partitions += 1
    coordinator.on_topics_changed({"t"})
    steady(d, "a")
    assert group.group_epoch == epoch + 1
    assert view_answer(coordinator, "g", d.clients["b"]) is None
    d.converge()
    assert view_answer(coordinator, "g", d.clients["b"]) == 5000

    # A heartbeat from another client id rewrites the member's metadata: the coordinator's.
    view = coordinator.consumer_heartbeat_view
    a = d.clients["a"]
    assert view.answer("g", a.member_id, None, a.epoch, "other", CLIENT[1]) is None


def test_the_view_forgets_deleted_groups():
    _, coordinator, d = one_group(2)
    view = coordinator.consumer_heartbeat_view
    d.join("a")
    assert set(view.contents()) == {"g"}
    d.leave("a")
    group = d.group
    assert answer(coordinator.delete_group("g")) == ErrorCode.NONE
    assert "g" not in coordinator.groups and view.contents() == {}
    # A stale object of the deleted group changes nothing any more.
    group.metadata_expired = True
    assert view.contents() == {}
    d.join("b")
    assert set(view.contents()) == {"g"}


def test_a_fenced_member_leaves_the_view_and_its_session_timer_goes():
    _, coordinator, d = one_group(2)
    d.join("a")
    a = d.clients["a"]
    member = d.group.members[a.member_id]
    key = member.session_key
    assert key and coordinator.consumer_heartbeat_view.contents()["g"][3][a.member_id][6] == key
    coordinator.shard_of(d.group.group_id).consumer.fence(d.group, member, "test")
    assert a.member_id not in coordinator.consumer_heartbeat_view.contents()["g"][3]
    assert view_answer(coordinator, "g", a) is None
    assert key not in coordinator.timers.wheel and key not in coordinator.timers.callbacks
