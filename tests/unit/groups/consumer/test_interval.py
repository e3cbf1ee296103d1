"""The adaptive heartbeat interval of ConsumerGroupHeartbeat answers (groups/consumer/answer.py,
corral only): a member with work (revoking, waiting for partitions, behind the group epoch), or
one this heartbeat moved to STABLE less than a group interval after the group's target changed,
is told `corral.consumer.reconciling.heartbeat.interval.ms`, bounded by the members concerned
over `corral.consumer.reconciling.heartbeat.max.rate`; any other heartbeat of a member STABLE at
the group epoch the group's interval (what the network thread answers). Also: a new group's first target is computed at once (even one that
would be offloaded), later ones are batched as Kafka batches them. The rule as a table, then
through the coordinator in process (tests/kits/harness/); the clients that follow it on
the wire are in tests/clients/java/test_consumer_interval_clients.py."""

from __future__ import annotations

import pytest
import trio
from harness import ConsumerDriver, Topics, answer, make_coordinator, request

import corral.groups.consumer.answer as answer_module
import corral.groups.consumer.protocol as protocol
from corral.groups.consumer import MemberState
from corral.groups.consumer.answer import adaptive_interval_ms

GROUP, SHORT, RATE = 5000, 250, 20000  # a rate high enough to leave 250 ms to small groups
SHORT_SETTINGS = {
    "corral.consumer.reconciling.heartbeat.interval.ms": SHORT,
    "corral.consumer.reconciling.heartbeat.max.rate": RATE,
}


@pytest.mark.parametrize(
    "case, kwargs, expected",
    [
        ("stable at the group epoch", dict(stable=True, behind=False), GROUP),
        (
            "stable, but the target just changed",
            dict(stable=True, behind=False, settling=True),
            SHORT,
        ),
        (
            "stable, the target just changed, 40,000 members",
            dict(stable=True, behind=False, settling=True, members=40_000),
            2000,
        ),
        ("revoking (UNREVOKED_PARTITIONS)", dict(stable=False, behind=False), SHORT),
        ("waiting for partitions (UNRELEASED_PARTITIONS)", dict(stable=False, behind=False), SHORT),
        ("stable but behind: a computation running", dict(stable=True, behind=True), SHORT),
        (
            "behind, batch due sooner than the short interval",
            dict(stable=True, behind=True, due_in_ms=100),
            SHORT,
        ),
        (
            "behind, batch due in 900 ms: back just after",
            dict(stable=True, behind=True, due_in_ms=900),
            900,
        ),
        (
            "behind, batch due in 900 ms, jitter spreads",
            dict(stable=True, behind=True, due_in_ms=900, jitter=0.5),
            1025,
        ),
        (
            "behind, batch due after the group interval",
            dict(stable=True, behind=True, due_in_ms=9000),
            GROUP,
        ),
        (
            "a storm: 10,000 reconciling at 20,000/s",
            dict(stable=False, behind=True, reconciling=10_000),
            500,
        ),
        (
            "a storm: 50,000 reconciling at 20,000/s",
            dict(stable=False, behind=True, reconciling=50_000),
            2500,
        ),
        (
            "a storm beyond the group interval",
            dict(stable=False, behind=True, reconciling=500_000),
            GROUP,
        ),
        (
            "a storm and a batch",
            dict(stable=True, behind=True, reconciling=10_000, due_in_ms=800, jitter=0.5),
            1050,
        ),
        ("a small group stays short", dict(stable=False, behind=True, reconciling=3), SHORT),
    ],
)
def test_the_rule(case, kwargs, expected):
    args = {"reconciling": 1, "due_in_ms": None, "jitter": 0.0, **kwargs}
    assert adaptive_interval_ms(GROUP, SHORT, RATE, **args) == expected, case


@pytest.mark.parametrize("short", [0, GROUP, GROUP + 1])
@pytest.mark.parametrize("stable, behind", [(True, False), (False, False), (True, True)])
def test_off_answers_the_group_interval(short, stable, behind):
    """0, or a short interval not below the group's, is Kafka's behaviour."""
    assert (
        adaptive_interval_ms(
            GROUP,
            short,
            RATE,
            stable=stable,
            behind=behind,
            reconciling=9,
            due_in_ms=700,
            jitter=0.3,
        )
        == GROUP
    )


def test_never_above_the_group_interval():
    assert (
        adaptive_interval_ms(
            200, 150, 1, stable=False, behind=True, reconciling=10_000, due_in_ms=None, jitter=0.0
        )
        == 200
    )


# ------------------------------------------------------------ through the coordinator ---


@pytest.fixture
def clock(monkeypatch):
    now = [1_000_000]
    monkeypatch.setattr(protocol, "wall_ms", lambda: now[0])
    monkeypatch.setattr(answer_module.random, "random", lambda: 0.0)  # no jitter
    return now


def driver(partitions: int = 4, **settings) -> tuple[bytes, ConsumerDriver]:
    topics = Topics()
    topic_id = topics.add("t", partitions)
    return topic_id, ConsumerDriver(
        topics, make_coordinator(topics, {**SHORT_SETTINGS, **settings})
    )


def state(d: ConsumerDriver, name: str) -> MemberState:
    return d.group.members[d.clients[name].member_id].current.state


def test_a_join_into_a_group_of_one(clock):
    """Every step of the hand-over gets the short interval; stable members the group's once
    the group has been quiet for a group interval."""
    _, d = driver()
    first = d.join("a")  # a new group: its first target at once, a stable...
    assert first["heartbeat_interval_ms"] == SHORT  # ...but it just changed
    assert d.heartbeat("a")["heartbeat_interval_ms"] == GROUP  # nothing changed
    clock[0] += GROUP
    joined = d.join("b")  # a still owns b's target
    assert state(d, "b") is MemberState.UNRELEASED_PARTITIONS
    assert joined["heartbeat_interval_ms"] == SHORT
    told = d.heartbeat("a", acknowledge=False)  # a is told to revoke
    assert state(d, "a") is MemberState.UNREVOKED_PARTITIONS
    assert told["heartbeat_interval_ms"] == SHORT
    assert d.heartbeat("a")["heartbeat_interval_ms"] == SHORT  # revoked, stable; just changed
    assert d.heartbeat("b")["heartbeat_interval_ms"] == SHORT  # got them: stable, just changed
    assert d.group.state_name == "Stable"
    # A heartbeat that changes nothing gets what the network thread would answer.
    assert {d.heartbeat(n)["heartbeat_interval_ms"] for n in "ab"} == {GROUP}


def test_a_stable_member_behind_the_group_epoch_comes_back_soon(clock):
    """A member STABLE at an epoch below the group's has a new target coming."""
    _, d = driver(6, **{"group.consumer.assignment.interval.ms": 1000})
    d.join("a")
    clock[0] += 5000
    d.join("b")  # computed (the interval has passed): epoch 3
    d.converge()
    assert d.group.state_name == "Stable"
    d.join("c")  # epoch 4, batched until 1 s after the last computation
    group = d.group
    assert (group.group_epoch, group.assignment_epoch) == (4, 3)
    clock[0] += 300
    r = d.heartbeat("a")  # stable at 3, behind 4: back just after the batch is due
    assert state(d, "a") is MemberState.STABLE and r["member_epoch"] == 3
    assert r["heartbeat_interval_ms"] == 700
    clock[0] += 700
    r = d.heartbeat("a", acknowledge=False)  # due: computed, a is told to revoke one of 3
    assert group.assignment_epoch == 4
    assert state(d, "a") is MemberState.UNREVOKED_PARTITIONS
    assert r["heartbeat_interval_ms"] == SHORT


def test_the_batch_is_kept_and_the_first_target_is_at_once(clock):
    """Kafka's batching is unchanged: the first target of a new group at once, the next one
    only `consumer.assignment.interval.ms` after it; the members joining meanwhile are sent
    back for the moment it is due."""
    _, d = driver(**{"group.consumer.assignment.interval.ms": 1000})
    a = d.join("a")
    assert (a["member_epoch"], d.group.assignment_epoch) == (2, 2)
    assert a["heartbeat_interval_ms"] == SHORT  # the group just changed
    clock[0] += 100
    b = d.join("b")
    assert d.group.assignment_epoch == 2  # batched
    assert (b["member_epoch"], b["heartbeat_interval_ms"]) == (2, 900)
    clock[0] += 899
    d.heartbeat("b")
    assert d.group.assignment_epoch == 2  # not yet
    clock[0] += 1
    d.heartbeat("b")
    assert d.group.assignment_epoch == 3


def test_a_storm_is_bounded_by_the_rate(clock):
    """300 members joining at once with a budget of 1,000 heartbeats a second: those with work
    are told at least 300 ms, and the bound follows the count of reconciling members down."""
    _, d = driver(600, **{"corral.consumer.reconciling.heartbeat.max.rate": 1000})
    check, d.check = d.check, lambda: None  # walks the group: once at the end, not per step
    intervals = [d.join(f"m{i}")["heartbeat_interval_ms"] for i in range(300)]
    assert intervals[0] == SHORT  # alone; the group just changed
    assert intervals[-1] == 300  # 300 with work / 1000 per s
    group = d.group
    # Every member has work: each join bumped the epoch past even the first member's.
    assert len(group.members) - group.stable_counts[group.group_epoch] == 300
    d.converge(rounds=4)
    check()
    assert group.state_name == "Stable"
    assert {d.heartbeat(n)["heartbeat_interval_ms"] for n in d.clients} == {GROUP}


def test_off_is_kafkas_interval_everywhere(clock):
    _, d = driver(**{"corral.consumer.reconciling.heartbeat.interval.ms": 0})
    seen = {
        d.join("a")["heartbeat_interval_ms"],
        d.join("b")["heartbeat_interval_ms"],
        d.heartbeat("a", acknowledge=False)["heartbeat_interval_ms"],
    }
    assert state(d, "a") is MemberState.UNREVOKED_PARTITIONS
    assert seen == {GROUP}


@pytest.mark.parametrize("always_offload", [False, True])
def test_a_new_groups_first_target_is_not_offloaded(tmp_path, always_offload):
    """A group big enough to offload its targets still computes its first one at once: the
    first member gets every partition in its first answer. (`always_offload`: whatever the
    size check says, as when it counts the joining member's own subscription.)"""
    trio.run(_first_target, tmp_path, always_offload)


async def _first_target(tmp_path, always_offload):
    topics = Topics()
    topics.add("big", 30_000)
    coordinator = make_coordinator(
        topics,
        {**SHORT_SETTINGS, "group.consumer.assignment.interval.ms": 0},
        snapshot_path=tmp_path / "snapshot",
    )
    if always_offload:
        coordinator.shards[0].targets._offloads = lambda group, extra=0: (
            coordinator._nursery is not None
        )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(coordinator.run)
        while coordinator._nursery is None:
            await trio.sleep(0)
        first = answer(
            coordinator.consumer_heartbeat(
                request("big", "m1", 0, names=["big"], owned={}, rebalance_timeout_ms=60000)
            )
        )
        assert first["member_epoch"] == 2
        assert len(first["assignment"]["topic_partitions"][0]["partitions"]) == 30_000
        assert first["heartbeat_interval_ms"] == SHORT
        nursery.cancel_scope.cancel()


def test_both_settings_change_while_running(clock):
    """Dynamic broker settings (kafka-configs --entity-type brokers): the next answer follows."""
    _, d = driver()
    settings = d.coordinator.settings
    d.join("a")
    clock[0] += GROUP
    d.heartbeat("a")
    assert d.join("b")["heartbeat_interval_ms"] == SHORT
    layer = {
        "corral.consumer.reconciling.heartbeat.interval.ms": "100",
        "corral.consumer.reconciling.heartbeat.max.rate": "10",
    }
    settings.apply_dynamic(False, settings.check_dynamic(False, layer))
    assert d.heartbeat("b")["heartbeat_interval_ms"] == 200  # 2 members behind / 10 per s
    settings.apply_dynamic(
        False,
        settings.check_dynamic(False, {"corral.consumer.reconciling.heartbeat.interval.ms": "0"}),
    )
    assert d.heartbeat("b")["heartbeat_interval_ms"] == GROUP
