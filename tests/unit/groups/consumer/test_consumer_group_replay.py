"""KIP-848 consumer groups in process (groups/consumer/): replaying the log (or a snapshot made
while the groups change, plus the log after it) rebuilds exactly the live groups, and a failed
write is answered NOT_COORDINATOR and the group rewritten whole at its next write. Every step
runs the driver's invariant checker."""

from __future__ import annotations

import random

import pytest
from harness import ConsumerDriver, FakeClock, FakeLog, Topics, make_coordinator, patched_clock

from corral.errors import ErrorCode
from corral.groups.consumer import ConsumerGroup


def setup(partitions: int = 6, settings=None, **kwargs):
    topics = Topics()
    topic_id = topics.add("t", partitions)
    coordinator = make_coordinator(topics, settings)
    return topics, topic_id, coordinator, ConsumerDriver(topics, coordinator, **kwargs)


def _durable_state(coordinator):
    out = {}
    for gid, group in coordinator.groups.items():
        if isinstance(group, ConsumerGroup):
            out[gid] = sorted(group.stored_records())
    return out


def _random_steps(rng, clock, coordinator, drivers, steps: int) -> None:
    """Members joining (by names, a regex, static), heartbeating, leaving, expiring."""
    names = "abcde"
    for _ in range(steps):
        d = rng.choice(drivers)
        name = rng.choice(names)
        client = d.clients.get(name)
        action = rng.random()
        if client is None or not client.joined:
            d.join(
                name,
                names=rng.choice([["t"], ["t", "u"], None]),
                regex=rng.choice([None, "u"]),
                instance_id=rng.choice([None, f"i{name}"]),
            )
        elif action < 0.6:
            d.heartbeat(name, acknowledge=rng.random() < 0.8)
        elif action < 0.75:
            d.leave(name, epoch=-2 if client.instance_id else -1)
        elif action < 0.85:
            clock.now += rng.choice([1000, 50000])
            coordinator.timers.fire_due()
            for dd in drivers:
                for cl in dd.clients.values():
                    if cl.joined and dd.group is not None and cl.member_id not in dd.group.members:
                        cl.joined, cl.owned = False, {}
                dd.check()
        else:
            d.converge(1)


def _two_topics() -> Topics:
    topics = Topics()
    topics.add("t", 8)
    topics.add("u", 3)
    return topics


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_replaying_the_log_rebuilds_the_groups(seed):
    rng = random.Random(seed)
    topics = _two_topics()
    log = FakeLog(keep=True)
    with patched_clock(FakeClock()) as clock:
        coordinator = make_coordinator(topics, log=log)
        drivers = [ConsumerDriver(topics, coordinator, group_id=f"g{i}") for i in range(2)]
        _random_steps(rng, clock, coordinator, drivers, 300)
        live = _durable_state(coordinator)
        assert any(live.values())
        loaded = make_coordinator(topics)
        loaded._loading = True
        loaded.replay_all(log.pairs)
        loaded._loading = False
    assert _durable_state(loaded) == live


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_a_snapshot_made_while_the_groups_change_plus_the_log_after_it_rebuilds_them(seed):
    """Snapshots are made off the loop (coordinator.take_snapshot): the containers are copied
    when the log positions are taken, the members read later, however they changed meanwhile.
    Worst case here: all the changes of 100 more steps land between the copy and the reading.
    The snapshot then replayed with the log after its positions gives the live groups."""
    rng = random.Random(seed)
    topics = _two_topics()
    log = FakeLog(keep=True)
    with patched_clock(FakeClock()) as clock:
        coordinator = make_coordinator(topics, log=log)
        drivers = [ConsumerDriver(topics, coordinator, group_id=f"g{i}") for i in range(2)]
        _random_steps(rng, clock, coordinator, drivers, 150)
        position = len(log.pairs)
        sources = [group.stored_records_later() for group in coordinator.groups.values()]
        _random_steps(rng, clock, coordinator, drivers, 100)
        snapshot = [pair for stored in sources for pair in stored()]
        live = _durable_state(coordinator)
        assert any(live.values())
        loaded = make_coordinator(topics)
        loaded._loading = True
        loaded.replay_all(snapshot)
        loaded.replay_all(log.pairs[position:])
        loaded._loading = False
    assert _durable_state(loaded) == live


def test_failed_write_answers_not_coordinator_and_the_next_write_rewrites_the_group():
    topics, tid, c, d = setup()
    log = c.writer
    d.join("a")
    log.fail_next = 1
    r = d.join("b")
    assert r["error_code"] == ErrorCode.NOT_COORDINATOR
    assert d.group.needs_rewrite
    before = len(log.pairs)
    d.heartbeat("a")
    d.join("b")
    assert not d.group.needs_rewrite
    assert len(log.pairs) - before > 5  # the whole group again
    loaded = make_coordinator(topics)
    loaded.replay_all(log.pairs)
    assert _durable_state(loaded) == _durable_state(c)
