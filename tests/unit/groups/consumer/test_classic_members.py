"""Classic members inside KIP-848 consumer groups and online migration, in process
(groups/consumer/classic_members.py, migration.py; reference/kip848.md §5): classic JoinGroup /
SyncGroup / Heartbeat / LeaveGroup answered as Kafka 4.4 answers them, the upgrade of a live
classic group by a first ConsumerGroupHeartbeat (and every case that blocks it), the downgrade
when the last consumer-protocol member leaves, `group.consumer.migration.policy`, the classic
deadlines, and that replaying the log rebuilds the same groups. Every step runs the consumer
driver's invariant checker (never one partition owned by two members, server or client side).
"""

from __future__ import annotations

import random
import struct

import pytest
from harness import (
    CLASSIC_FAST,
    ClassicClient,
    FakeClock,
    FakeLog,
    Topics,
    classic_group,
    classic_round,
    converge,
    join_request,
    make_coordinator,
    patched_clock,
    restart_under_other_protocol,
    setup,
    stable_group,
)

from corral import _core
from corral.errors import ErrorCode
from corral.groups.classic import ClassicGroup, ClassicState
from corral.groups.consumer import ConsumerGroup, MemberState
from corral.groups.storage import records

# ================================================================ classic joins to a consumer group


def test_classic_member_joins_a_consumer_group_as_a_follower():
    _, tid, c, d = setup()
    d.join("a")
    d.converge()
    x = ClassicClient(d, "x", ["cooperative-sticky", "range"])
    first = x.join_later().value
    assert first["error_code"] == ErrorCode.MEMBER_ID_REQUIRED and first["member_id"]
    assert first["member_id"] not in d.group.members  # nothing kept until it comes back
    x.member_id = first["member_id"]
    answer = x.join_later().value
    group = d.group
    member = group.members[x.member_id]
    # The member epoch is the generation; no leader, no member list; its first protocol.
    assert answer["error_code"] == ErrorCode.NONE
    assert answer["generation_id"] == member.epoch and answer["leader"] == ""
    assert answer["members"] == [] and answer["protocol_type"] == "consumer"
    assert answer["protocol_name"] == "cooperative-sticky"
    assert member.classic.session_timeout_ms == 10000 and member.topic_names == ("t",)
    x.joined_with(answer)
    x.sync()
    converge(d)
    group = stable_group(d)
    # Both members got half, each owned once (stable_group() checked it).
    assert sorted(
        len(ps) for m in group.members.values() for ps in m.current.assigned.values()
    ) == [3, 3]


def test_sync_answers_in_the_members_own_consumer_protocol_version():
    _, tid, c, d = setup()
    d.join("a")
    d.converge()
    x = ClassicClient(d, "x", ["range"], version=0)
    x.join()
    result = x.sync()
    assert result["error_code"] == ErrorCode.NONE
    assert struct.unpack_from(">h", result["assignment"])[0] == 0
    newer = ClassicClient(d, "y", ["range"], version=5)  # newer than corral knows: answered in 3
    newer.join()
    result = newer.sync()
    assert struct.unpack_from(">h", result["assignment"])[0] == 3


@pytest.mark.parametrize(
    "case", ["protocol type", "no shared protocol", "malformed subscription", "policy disabled"]
)
def test_classic_join_refusals_are_inconsistent_group_protocol(case):
    settings = {"group.consumer.migration.policy": "disabled"} if case == "policy disabled" else {}
    _, _, c, d = setup(settings=settings)
    d.join("a")
    x = ClassicClient(d, "x", ["range"])
    x.join()
    if case == "policy disabled":
        assert x.errors == [ErrorCode.INCONSISTENT_GROUP_PROTOCOL]
        return
    req = join_request(
        "g", "", _core.encode_consumer_subscription(3, ["t"], []), protocols=["roundrobin"]
    )
    if case == "protocol type":
        req.protocol_type = "connect"
    elif case == "malformed subscription":
        req.protocols = [("range", b"\x00")]
        req.member_id = "m-new"  # parsed after the KIP-394 round trip, as in Kafka
    result = c.join(req).value
    assert result["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert len(d.group.members) == 2


def test_sync_and_heartbeat_checks():
    _, _, c, d = setup()
    d.join("a")
    x = ClassicClient(d, "x", ["range"])
    x.join()
    a = d.clients["a"]
    # A consumer-protocol member is not a classic one.
    assert c.heartbeat("g", a.member_id, None, a.epoch) == ErrorCode.UNKNOWN_MEMBER_ID
    assert c.heartbeat("g", "nobody", None, 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert c.heartbeat("g", x.member_id, None, x.generation + 1) == ErrorCode.ILLEGAL_GENERATION
    bad = c.sync("g", x.member_id, None, x.generation, "consumer", "roundrobin", []).value
    assert bad["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    bad = c.sync("g", x.member_id, None, x.generation + 1, "consumer", "range", []).value
    assert bad["error_code"] == ErrorCode.ILLEGAL_GENERATION
    assert x.sync()["error_code"] == ErrorCode.NONE
    # Offsets: classic members get ILLEGAL_GENERATION where consumer members get STALE_MEMBER_EPOCH.
    assert (
        c.offsets.commit_error("g", x.member_id, None, x.generation + 1, 8)
        == ErrorCode.ILLEGAL_GENERATION
    )
    assert c.offsets.commit_error("g", x.member_id, None, x.generation, 8) == ErrorCode.NONE


def test_heartbeat_asks_to_rejoin_exactly_when_kip848_says():
    _, tid, c, d = setup()
    x = ClassicClient(d, "x", ["cooperative-sticky"])
    d.join("a")
    x.join()
    x.sync()
    converge(d)
    group = stable_group(d)
    assert x.heartbeat() == ErrorCode.NONE
    # A new member: the target moves past x's epoch -> rebalance in progress.
    d.join("b")
    assert group.assignment_epoch > group.members[x.member_id].epoch
    assert x.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS
    # x rejoins still owning what it must give up: UNREVOKED, still told to rejoin.
    x.join()
    member = group.members[x.member_id]
    assert member.current.state is MemberState.UNREVOKED_PARTITIONS
    assert x.generation == member.epoch  # the old epoch: it has not revoked yet
    assert x.sync()["error_code"] == ErrorCode.NONE  # no REBALANCE_IN_PROGRESS while revoking
    assert x.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS
    x.join()  # now reporting only what it kept
    assert group.members[x.member_id].current.state is not MemberState.UNREVOKED_PARTITIONS
    x.sync()
    converge(d)
    stable_group(d)
    assert x.heartbeat() == ErrorCode.NONE


def test_unreleased_partitions_rejoin_once_they_are_free():
    _, tid, c, d = setup()
    d.join("a")
    d.converge()
    x = ClassicClient(d, "x", ["cooperative-sticky"])
    x.join()  # its target's partitions are still a's: UNRELEASED, waiting
    group = d.group
    member = group.members[x.member_id]
    assert member.current.state is MemberState.UNRELEASED_PARTITIONS
    x.sync()
    assert group.waiting_on_unreleased(member)
    assert x.heartbeat() == ErrorCode.NONE  # nothing to do yet
    d.heartbeat("a")  # a revokes; the partitions are free now
    d.heartbeat("a")
    assert not group.waiting_on_unreleased(member)
    assert x.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS
    converge(d)
    stable_group(d)


def test_classic_leave_fences_members_of_either_protocol():
    _, _, c, d = setup()
    d.join("a")
    x = ClassicClient(d, "x", ["range"], instance_id="ix")
    y = ClassicClient(d, "y", ["range"])
    x.join()
    y.join()
    converge(d)
    group = d.group
    epoch = group.group_epoch
    left = c.leave("g", [(y.member_id, None), ("", "ix"), ("other", "ix"), ("nobody", None)])
    assert left.resolved  # the write of the fenced members is durable at once here
    error, errors = left.value
    assert error == ErrorCode.NONE
    # The admin removal by instance id alone works; a wrong member id for it is fenced.
    assert errors == [
        ErrorCode.NONE,
        ErrorCode.NONE,
        ErrorCode.FENCED_INSTANCE_ID,
        ErrorCode.UNKNOWN_MEMBER_ID,
    ]
    assert set(group.members) == {d.clients["a"].member_id}
    assert group.group_epoch == epoch + 1
    # A consumer member removed by a classic LeaveGroup.
    a = d.clients["a"]
    assert c.leave("g", [(a.member_id, None)]).value == (ErrorCode.NONE, [ErrorCode.NONE])
    assert not group.members and group.state_name == "Empty"


def test_classic_join_to_an_empty_consumer_group_converts_it_keeping_offsets():
    topics, tid, c, d = setup()
    d.join("a")
    a = d.clients["a"]
    assert c.offsets.commit_error("g", a.member_id, None, a.epoch, 9) == ErrorCode.NONE
    c.offsets.commit("g", [("t", [(0, 42, -1, "")])], 1, -1)
    d.leave("a")
    assert d.group.is_empty()
    x = ClassicClient(d, "x", ["range"])
    x.join_later()  # MEMBER_ID_REQUIRED from a classic group now
    group = c.groups["g"]
    assert isinstance(group, ClassicGroup)
    assert c.offsets.map.count("g") == 1
    # The consumer records are tombstoned: a restart finds the classic group with its offset.
    reloaded = restarted(topics, c.writer)
    assert isinstance(reloaded.groups["g"], ClassicGroup) and reloaded.offsets.map.count("g") == 1


# ========================================================================== online upgrade ===


def test_first_consumer_heartbeat_upgrades_a_live_classic_group():
    topics, tid, c, d = setup()
    x = ClassicClient(d, "x", ["range"])
    y = ClassicClient(d, "y", ["cooperative-sticky", "range"])
    classic = classic_group(d, [x, y])
    generation = classic.generation_id
    assert c.list_groups(None, None)[0]["group_type"] == "classic"
    answer = d.join("a")
    assert answer["error_code"] == ErrorCode.NONE
    group = d.group
    assert isinstance(group, ConsumerGroup) and c.groups["g"] is group
    # The classic members are STABLE at the generation with their classic assignments; a's
    # subscription bumped the epoch past it.
    for client in (x, y):
        member = group.members[client.member_id]
        assert member.classic is not None and member.current.assigned == client.owned
        assert member.epoch == generation or member.current.state is not MemberState.STABLE
    assert group.group_epoch == generation + 1
    assert c.list_groups(None, None)[0]["group_type"] == "consumer"
    assert (
        c.describe_group("g")["group_state"] == "Dead"
    )  # not a classic group (DescribeGroups < v6)
    # The classic members learn from their heartbeats and rejoin; everyone converges.
    converge(d)
    stable_group(d)
    assert x.errors == [] and y.errors == []
    # Their sessions run with their own session timeout.
    assert all(m.session_key for m in group.members.values())


def test_upgrade_answers_parked_joins_and_syncs_rebalance_in_progress():
    _, _, c, d = setup()
    x = ClassicClient(d, "x", ["range"])
    y = ClassicClient(d, "y", ["range"])
    classic_group(d, [x, y])
    parked = x.join_later()  # x rejoins: the group prepares a rebalance, x waits for y
    assert not parked.resolved
    d.join("a")
    assert parked.resolved and parked.value["error_code"] == ErrorCode.REBALANCE_IN_PROGRESS


@pytest.mark.parametrize("protocols", [["range"], ["cooperative-sticky", "range"]])
def test_upgrade_during_a_new_groups_first_rebalance(protocols):
    """A consumer-protocol member arriving while a new classic group waits out
    group.initial.rebalance.delay.ms (generation 0, no protocol chosen yet): the group is
    converted, each member's subscription read from its own protocols, and everyone converges.
    Before, the heartbeat got GROUP_ID_NOT_FOUND ("...embedded consumer protocol is
    malformed"), fatal to librdkafka."""
    topics, tid, c, d = setup(settings={"group.initial.rebalance.delay.ms": 3000})
    x = ClassicClient(d, "x", protocols)
    y = ClassicClient(d, "y", ["range"])
    parked = []
    for client in (x, y):
        first = client.join_later()
        assert client.joined_with(first.value) == ErrorCode.MEMBER_ID_REQUIRED
        parked.append(client.join_later())
    assert not any(later.resolved for later in parked)  # waiting out the initial delay
    classic = c.groups["g"]
    assert isinstance(classic, ClassicGroup) and classic.generation_id == 0
    answer = d.join("a")
    assert answer["error_code"] == ErrorCode.NONE, answer
    assert isinstance(d.group, ConsumerGroup)
    for later in parked:
        assert later.resolved and later.value["error_code"] == ErrorCode.REBALANCE_IN_PROGRESS
    assert {
        m.member_id: m.topic_names for m in d.group.members.values() if m.classic is not None
    } == {x.member_id: ("t",), y.member_id: ("t",)}
    converge(d)
    stable_group(d)
    assert all(client.owned for client in (x, y)) and d.clients["a"].owned


@pytest.mark.parametrize(
    "case",
    [
        "policy disabled",
        "policy downgrade",
        "protocol type",
        "too big",
        "malformed subscription",
        "custom assignor user data",
    ],
)
def test_blocked_upgrades_are_group_id_not_found(case):
    settings = {
        "policy disabled": {"group.consumer.migration.policy": "disabled"},
        "policy downgrade": {"group.consumer.migration.policy": "downgrade"},
        "too big": {"group.consumer.max.size": 1},
    }.get(case, {})
    topics, tid, c, d = setup(settings=settings)
    x = ClassicClient(d, "x", ["range"])
    y = ClassicClient(d, "y", ["range"])
    group = classic_group(d, [x, y])
    if case == "protocol type":
        group.protocol_type = "connect"
    elif case == "malformed subscription":
        member = group.members[y.member_id]
        member.protocols = [("range", b"\x00\x07garbage")]
    elif case == "custom assignor user data":
        member = group.members[y.member_id]
        assert member.assignment.endswith(b"\xff\xff\xff\xff")  # a null userData
        member.assignment = member.assignment[:-4] + b"\x00\x00\x00\x03abc"
        _, user_data = _core.decode_consumer_assignment(member.assignment)
        assert user_data == b"abc"
    answer = d.join("a")
    assert answer["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    assert "Cannot upgrade classic group g" in answer["error_message"]
    assert c.groups["g"] is group and group.state is ClassicState.STABLE  # nothing changed
    assert x.heartbeat() == ErrorCode.NONE


# ======================================================================== online downgrade ===


def upgraded(settings=None, log=None):
    topics, tid, c, d = setup(settings=settings, log=log)
    x = ClassicClient(d, "x", ["range"])
    y = ClassicClient(d, "y", ["cooperative-sticky", "range"], instance_id="iy")
    classic_group(d, [x, y])
    d.join("a")
    converge(d)
    stable_group(d)
    return topics, tid, c, d, x, y


def test_last_consumer_member_leaving_downgrades_to_a_classic_group_that_rebalances():
    topics, tid, c, d, x, y = upgraded()
    group = d.group
    epoch = group.group_epoch
    targets = {m: dict(t) for m, t in group.target.items()}
    d.leave("a")
    classic = c.groups["g"]
    assert isinstance(classic, ClassicGroup)
    assert classic.generation_id == epoch and classic.protocol_type == "consumer"
    # The vote: x supports only range, so range.
    assert classic.protocol_name == "range"
    assert set(classic.members) == {x.member_id, y.member_id}
    assert classic.static_members == {"iy": y.member_id}
    for member_id in (x.member_id, y.member_id):
        named, _ = _core.decode_consumer_assignment(classic.members[member_id].assignment)
        assert {topics.add_id(t): frozenset(ps) for t, ps in named} == targets[member_id]
    assert classic.state is ClassicState.PREPARING_REBALANCE
    assert c.list_groups(None, None)[0]["group_type"] == "classic"
    # The classic members' heartbeats say rejoin; the classic machine runs the rebalance.
    assert x.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS
    assert y.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS
    classic_round(d, [x, y])
    assert classic.state is ClassicState.STABLE and classic.generation_id == epoch + 1


@pytest.mark.parametrize("policy", ["upgrade", "disabled"])
def test_downgrade_refused_by_the_policy_keeps_a_consumer_group(policy):
    topics, tid, c, d, x, y = upgraded()
    c.migration.value = policy
    d.leave("a")
    group = c.groups["g"]
    assert isinstance(group, ConsumerGroup) and set(group.members) == {x.member_id, y.member_id}
    if policy == "disabled":
        # No classic member may (re)join a consumer group (KAFKA-20640): told to rejoin, refused.
        assert x.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS
        assert x.join()["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return
    converge(d)
    stable_group(d)


def test_downgrade_refused_above_group_max_size():
    topics, tid, c, d, x, y = upgraded()
    c.limits.max_size = 1
    d.leave("a")
    assert isinstance(c.groups["g"], ConsumerGroup)


def test_session_timeout_of_the_last_consumer_member_downgrades_too():
    with patched_clock(FakeClock()) as clock:
        topics, tid, c, d, x, y = upgraded({"group.consumer.session.timeout.ms": 45000})
        for _ in range(7):
            clock.now += 8000
            x.heartbeat()
            y.heartbeat()
            c.timers.fire_due()
        assert isinstance(c.groups["g"], ClassicGroup)


def test_classic_static_member_replacing_the_last_consumer_member_downgrades():
    topics, tid, c, d = setup()
    x = ClassicClient(d, "x", ["range"])
    classic_group(d, [x])
    d.join("a", instance_id="ia")
    converge(d)
    stable_group(d)
    a = d.clients["a"]
    epoch = d.group.group_epoch
    d.leave("a", epoch=-2)  # the consumer instance restarts as a classic one
    a.joined = False
    z = ClassicClient(d, "z", ["range"], instance_id="ia")
    answer = z.join()
    classic = c.groups["g"]
    assert isinstance(classic, ClassicGroup)
    assert set(classic.members) == {x.member_id, z.member_id} and classic.static_members == {
        "ia": z.member_id
    }
    # The target was current: no rebalance; z holds a's partitions at the group's epoch.
    assert classic.state is ClassicState.STABLE and classic.generation_id == epoch
    assert answer["generation_id"] == epoch
    named, _ = _core.decode_consumer_assignment(classic.members[z.member_id].assignment)
    assert sum(len(ps) for _, ps in named) == 3
    assert z.heartbeat() == ErrorCode.NONE


# ============================================================================ deadlines ===


def test_classic_deadlines_fence():
    with patched_clock(FakeClock()) as clock:
        _, _, c, d = setup(settings={"group.consumer.session.timeout.ms": 45000})
        d.join("a")
        x = ClassicClient(d, "x", ["range"], session_timeout_ms=6000, rebalance_timeout_ms=20000)
        y = ClassicClient(d, "y", ["range"], rebalance_timeout_ms=20000)
        z = ClassicClient(d, "z", ["range"], rebalance_timeout_ms=5000, session_timeout_ms=60000)
        for cl in (x, y, z):
            cl.join()
        group = d.group
        # Sync deadline: z joined but never syncs within its rebalance timeout.
        x.sync()
        y.sync()
        clock.now += 5500
        for _ in range(3):
            d.heartbeat("a")
            x.heartbeat()
            y.heartbeat()
        c.timers.fire_due()
        assert z.member_id not in group.members
        # Join deadline: told to rejoin (the removal moved the target), y does not within 20 s
        # though it keeps heartbeating; x rejoins.
        d.heartbeat("a")
        assert y.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS
        x.cycle()
        for _ in range(7):
            clock.now += 3000
            d.heartbeat("a")
            x.cycle()
            y.heartbeat()
            c.timers.fire_due()
        assert y.member_id not in group.members and x.member_id in group.members
        # Session: x (6 s) stops heartbeating.
        clock.now += 6500
        d.heartbeat("a")
        c.timers.fire_due()
        assert x.member_id not in group.members and list(group.members) == [
            d.clients["a"].member_id
        ]


def test_classic_deadlines_bounded_by_the_broker():
    """corral.group.max.rebalance.timeout.ms bounds the sync and join deadlines of classic
    members that asked for an hour."""
    with patched_clock(FakeClock()) as clock:
        _, _, c, d = setup(
            settings={
                "group.consumer.session.timeout.ms": 45000,
                "corral.group.max.rebalance.timeout.ms": 5000,
            }
        )
        d.join("a")
        x = ClassicClient(d, "x", ["range"], rebalance_timeout_ms=3_600_000)
        z = ClassicClient(
            d, "z", ["range"], rebalance_timeout_ms=3_600_000, session_timeout_ms=60000
        )
        for cl in (x, z):
            cl.join()
        group = d.group
        x.sync()  # z never syncs; x polls as a client does
        for _ in range(11):
            clock.now += 500
            d.heartbeat("a")
            x.cycle()
            c.timers.fire_due()
        assert z.member_id not in group.members and x.member_id in group.members
        # Now x stops polling (heartbeats only) and is then told to rejoin.
        d.heartbeat("a")
        x.cycle()
        d.join("b")  # the target moves: x must rejoin, within 5 s of being told
        clock.now += 1500
        assert x.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS
        for _ in range(4):
            clock.now += 1500
            d.heartbeat("a")
            d.heartbeat("b")
            x.heartbeat()
            c.timers.fire_due()
        assert x.member_id not in group.members


# ====================================================================== replay and property ===


def test_replaying_the_log_of_a_migration_rebuilds_the_same_groups():
    log = FakeLog(keep=True)
    topics, tid, c, d, x, y = upgraded(log=log)
    z = ClassicClient(d, "z", ["range"])
    z.join()
    z.sync()
    converge(d)
    reloaded = restarted(topics, log)
    assert snapshot_of(reloaded) == snapshot_of(c)
    d.leave("a")  # downgrade
    reloaded = restarted(topics, log)
    again = reloaded.groups["g"]
    assert isinstance(again, ClassicGroup)
    assert records.read_group_value(again.stored) == records.read_group_value(c.groups["g"].stored)


def restarted(topics: Topics, log: FakeLog):
    """A coordinator loaded from what `log` holds, as after a restart."""
    reloaded = make_coordinator(topics, CLASSIC_FAST, log=FakeLog(keep=True))
    reloaded.writer.read = lambda positions=None, only=None: iter(log.pairs)
    reloaded.load()
    return reloaded


def snapshot_of(c) -> list:
    return sorted(c.snapshot_records())


@pytest.mark.parametrize("seed", range(12))
def test_random_rolling_migrations_keep_every_partition_owned_once(seed):
    """Members move between the protocols in random order, some slow to heartbeat: the
    invariant holds after every step, and the group converges with every partition owned once
    whenever a consumer group remains."""
    rng = random.Random(seed)
    topics, tid, c, d = setup(partitions=8)
    # Protocol lists a classic group accepts together (they share a name): eager ones, or
    # cooperative ones with the [cooperative-sticky, range] step of a rolling change between.
    protocols = (
        [["range"], ["cooperative-sticky", "range"]]
        if seed % 2
        else [["cooperative-sticky"], ["cooperative-sticky", "range"]]
    )
    classic_group(d, [ClassicClient(d, f"m{i}", rng.choice(protocols)) for i in range(3)])
    names = sorted(d.clients)
    types = []
    for _step in range(40):
        name = rng.choice(names)
        if rng.random() < 0.3:
            restart_under_other_protocol(
                d, name, lambda driver, member: ClassicClient(driver, member, rng.choice(protocols))
            )
        group = c.groups.get("g")
        types.append(group.type if group is not None else None)
        if isinstance(group, ConsumerGroup):
            for other in rng.sample(names, k=len(names)):
                client = d.clients[other]
                if isinstance(client, ClassicClient):
                    client.cycle()
                elif client.joined:
                    d.heartbeat(other, acknowledge=rng.random() < 0.7)
        else:
            # A classic group: all its members are classic; they rebalance the classic way.
            classic_round(d, [d.clients[n] for n in names])
    assert "consumer" in types
    if isinstance(c.groups.get("g"), ConsumerGroup):
        converge(d, 12)
        stable_group(d)
