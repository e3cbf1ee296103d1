"""KIP-848 consumer groups in process (groups/consumer/): joins, epochs, reconciliation, errors in
Kafka's order, static members, timeouts, regexes, offsets and admin. Every step runs the driver's
invariant checker. That replaying the log rebuilds exactly the live group:
test_consumer_group_replay.py."""

from __future__ import annotations

import pytest
from harness import (
    ConsumerDriver,
    FakeClock,
    Topics,
    answer,
    make_coordinator,
    patched_clock,
    request,
)

from corral.errors import ErrorCode
from corral.groups.consumer import ConsumerGroup
from corral.groups.consumer.targets.inputs import metadata_hash
from corral.groups.handlers.consumer_group_heartbeat import _invalid
from corral.groups.storage import consumer_records as cr


def setup(partitions: int = 6, settings=None, **kwargs):
    topics = Topics()
    topic_id = topics.add("t", partitions)
    coordinator = make_coordinator(topics, settings)
    return topics, topic_id, coordinator, ConsumerDriver(topics, coordinator, **kwargs)


def parts(result, topic_id):
    return sorted(
        p
        for t in result["assignment"]["topic_partitions"]
        if t["topic_id"] == topic_id
        for p in t["partitions"]
    )


def test_first_member_gets_everything_at_epoch_2():
    _, tid, _, d = setup()
    result = d.join("a")
    assert result["error_code"] == ErrorCode.NONE
    # A new group starts at epoch 1 with an empty target; the join bumps it to 2 (KAFKA-20268).
    assert result["member_epoch"] == 2
    assert parts(result, tid) == [0, 1, 2, 3, 4, 5]
    # corral's adaptive interval (groups/consumer/answer.py): a new group comes back soon.
    assert result["heartbeat_interval_ms"] == 250
    assert d.group.state_name == "Stable"


def test_three_members_converge_disjoint_and_complete():
    _, tid, _, d = setup(12)
    d.join("a")
    d.join("b")
    d.join("c")
    assert d.group.state_name == "Reconciling"
    d.converge()
    group = d.group
    assert group.state_name == "Stable"
    assert group.group_epoch == group.assignment_epoch == 4
    sizes = sorted(len(c.owned.get(tid, ())) for c in d.clients.values())
    assert sizes == [4, 4, 4]


def test_revocation_waits_for_the_client():
    _, tid, _, d = setup(4)
    d.join("a")
    d.join("b")
    # a must give two partitions up; until it acknowledges, b gets nothing of them.
    r = d.heartbeat("a", acknowledge=False)
    assert r["member_epoch"] == 2  # revoking: still at its epoch
    assert d.group.members[d.clients["a"].member_id].current.state.name == "UNREVOKED_PARTITIONS"
    r = d.heartbeat("b")
    assert r["assignment"] is None or parts(r, tid) == []
    assert d.group.members[d.clients["b"].member_id].current.state.name == "UNRELEASED_PARTITIONS"
    d.heartbeat("a")  # acknowledges
    r = d.heartbeat("b")
    assert len(parts(r, tid)) == 2 and r["member_epoch"] == 3


def test_incremental_heartbeat_carries_no_assignment_when_unchanged():
    _, _, _, d = setup()
    d.join("a")
    r = d.heartbeat("a")
    assert r["assignment"] is None and r["member_epoch"] == 2


# ---------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "body, version, message",
    [
        ({"member_epoch": 0, "member_id": "", "group_id": "g"}, 1, "MemberId can't be empty."),
        ({"member_epoch": 3, "member_id": " "}, 0, "MemberId can't be empty."),
        ({"member_epoch": -1, "member_id": ""}, 0, "MemberId can't be empty."),
        ({"group_id": " "}, 1, "GroupId can't be empty."),
        ({"instance_id": ""}, 1, "InstanceId can't be empty."),
        ({"rack_id": " "}, 1, "RackId can't be empty."),
        ({"rebalance_timeout_ms": -1}, 1, "RebalanceTimeoutMs must be provided in first request."),
        ({"topic_partitions": None}, 1, "TopicPartitions must be empty when (re-)joining."),
        (
            {"topic_partitions": [{"topic_id": b"x" * 16, "partitions": [0]}]},
            1,
            "TopicPartitions must be empty when (re-)joining.",
        ),
        (
            {"subscribed_topic_names": None},
            1,
            "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
        ),
        ({"member_epoch": -2}, 1, "InstanceId can't be null."),
        ({"member_epoch": -3}, 1, "MemberEpoch is invalid."),
    ],
)
def test_invalid_requests(body, version, message):
    full = {
        "group_id": "g",
        "member_id": "m",
        "member_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout_ms": 30000,
        "subscribed_topic_names": ["t"],
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": [],
    }
    full.update(body)
    assert _invalid(full, version) == message


def test_valid_join_is_not_invalid():
    full = {
        "group_id": "g",
        "member_id": "m",
        "member_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout_ms": 30000,
        "subscribed_topic_names": ["t"],
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": [],
    }
    assert _invalid(full, 1) is None
    # v0 lets the coordinator name a joining member.
    assert _invalid({**full, "member_id": ""}, 0) is None


def test_member_epoch_checks():
    _, tid, c, d = setup()
    d.join("a")
    mid = d.clients["a"].member_id

    def hb(epoch, owned=None):
        return answer(c.consumer_heartbeat(request("g", mid, epoch, owned=owned)))

    assert hb(9)["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH  # ahead
    assert hb(1)["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH  # behind, nothing owned reported
    # Epoch 0 always rejoins (a fenced member's recovery, KAFKA-19233).
    assert (
        answer(
            c.consumer_heartbeat(
                request("g", mid, 0, names=["t"], owned={}, rebalance_timeout_ms=1000)
            )
        )["member_epoch"]
        == 2
    )
    unknown = answer(c.consumer_heartbeat(request("g", "nobody", 2, owned={})))
    assert unknown["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    missing = answer(c.consumer_heartbeat(request("other", "m", 2, owned={})))
    assert missing["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND


def test_lost_response_is_forgiven():
    _, tid, c, d = setup(4)
    d.join("a")
    d.join("b")
    d.heartbeat("a")  # revokes two
    a = d.clients["a"]
    member = d.group.members[a.member_id]
    d.heartbeat("a")  # now at epoch 3
    assert member is d.group.members[a.member_id]
    current = d.group.members[a.member_id].current
    assert current.epoch == 3 and current.previous_epoch == 2
    # The answer with epoch 3 was lost: the client comes back with epoch 2 and what it owns.
    again = answer(c.consumer_heartbeat(request("g", a.member_id, 2, owned=a.owned)))
    assert again["error_code"] == ErrorCode.NONE and again["member_epoch"] == 3
    # Reporting a partition it does not have is not forgiven.
    bogus = {tid: frozenset({0, 1, 2, 3})}
    fenced = answer(c.consumer_heartbeat(request("g", a.member_id, 2, owned=bogus)))
    assert fenced["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH


def test_group_max_size():
    _, _, c, d = setup(settings={"group.consumer.max.size": 2})
    d.join("a")
    d.join("b")
    r = d.join("c")
    assert r["error_code"] == ErrorCode.GROUP_MAX_SIZE_REACHED
    # A member already in may still rejoin.
    assert d.join("a")["error_code"] == ErrorCode.NONE


def test_invalid_regex_and_unknown_assignor_are_refused():
    _, _, c, d = setup()
    r = d.join("a", names=None, regex="(unclosed")
    assert r["error_code"] == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert d.group is None  # nothing was written


# --------------------------------------------------------------------------- static members


def test_static_member_temporary_leave_and_rejoin_keeps_its_assignment():
    _, tid, c, d = setup(6)
    d.join("a", instance_id="ia")
    d.join("b", instance_id="ib")
    d.converge()
    group = d.group
    epoch = group.group_epoch
    before = dict(d.clients["a"].owned)
    d.leave("a", epoch=-2)
    assert group.members[d.clients["a"].member_id].epoch == -2
    assert group.group_epoch == epoch  # no bump
    # Still owned by the leaving instance: b cannot take them.
    d.heartbeat("b")
    assert not set(d.clients["b"].owned.get(tid, ())) & set(before[tid])
    # Rejoining under a new member id inherits everything, without a rebalance.
    d.clients["a"].member_id = "a-restarted"
    r = d.join("a", instance_id="ia")
    assert r["error_code"] == ErrorCode.NONE
    assert parts(r, tid) == sorted(before[tid])
    assert group.group_epoch == epoch
    assert set(group.members) == {"a-restarted", d.clients["b"].member_id}


def test_static_member_rejoining_with_another_subscription_replaces_its_old_selfs():
    """Kafka's replaceMember: the old self's subscription is gone with it, so its regex, which
    nobody uses any more, is tombstoned, and the metadata hash covers only what the members
    subscribe to now."""
    topics, _, c, d = setup(2)
    topics.add("u", 2)
    topics.add("x", 2)
    d.join("a", names=["u"], regex="x", instance_id="ia")
    d.join("b", names=["t"])
    d.converge()
    assert set(d.group.regexes) == {"x"}
    d.leave("a", epoch=-2)
    client = d.clients["a"]
    client.member_id, client.names, client.regex = "a-restarted", ["t"], ""
    assert d.join("a", instance_id="ia")["error_code"] == ErrorCode.NONE
    group = d.group
    assert not group.regexes and set(group.topic_name_counts) == {"t"}
    assert group.metadata_hash == metadata_hash({"t"}, c.topics)
    d.converge()


def test_static_instance_checks():
    _, _, c, d = setup()
    d.join("a", instance_id="ia")
    # Another member id claiming a live instance: UNRELEASED_INSTANCE_ID.
    r = answer(
        c.consumer_heartbeat(
            request(
                "g", "other", 0, names=["t"], owned={}, instance_id="ia", rebalance_timeout_ms=1000
            )
        )
    )
    assert r["error_code"] == ErrorCode.UNRELEASED_INSTANCE_ID
    epoch = d.clients["a"].epoch
    r = answer(c.consumer_heartbeat(request("g", "other", epoch, owned={}, instance_id="ia")))
    assert r["error_code"] == ErrorCode.FENCED_INSTANCE_ID
    r = answer(c.consumer_heartbeat(request("g", "other", epoch, owned={}, instance_id="nope")))
    assert r["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID


# ---------------------------------------------------------------------------------- timeouts


def test_session_timeout_fences_and_the_others_take_over():
    with patched_clock(FakeClock()) as clock:
        _, tid, c, d = setup(4, settings={"group.consumer.session.timeout.ms": 45000})
        d.join("a")
        d.join("b")
        d.converge()
        epoch = d.group.group_epoch
        clock.now += 30000
        d.heartbeat("b")  # b stays alive
        clock.now += 20000
        c.timers.fire_due()
        assert set(d.group.members) == {d.clients["b"].member_id}
        assert d.group.group_epoch == epoch + 1
        d.clients["a"].joined, d.clients["a"].owned = False, {}
        d.converge()
        assert d.clients["b"].owned[tid] == frozenset(range(4))


@pytest.mark.parametrize(
    "settings, deadline_ms",
    [
        ({}, 60000),  # the member's own rebalance timeout
        ({"corral.group.max.rebalance.timeout.ms": 10000}, 10000),  # the broker's bound, shorter
    ],
)
def test_rebalance_timeout_fences_a_member_that_does_not_revoke(settings, deadline_ms):
    with patched_clock(FakeClock()) as clock:
        _, tid, c, d = setup(4, settings=settings)
        d.join("a")  # rebalance timeout 60 s
        d.join("b")
        d.heartbeat("a", acknowledge=False)  # told to revoke; keeps them
        clock.now += deadline_ms - 1000
        d.heartbeat("b")
        d.heartbeat("a", acknowledge=False)
        c.timers.fire_due()
        assert d.clients["a"].member_id in d.group.members
        clock.now += 2000
        d.heartbeat("b")
        c.timers.fire_due()
        assert d.clients["a"].member_id not in d.group.members


# -------------------------------------------------------------------------------- batching


def test_assignment_interval_batches_epoch_bumps(monkeypatch):
    import corral.groups.consumer.protocol as protocol

    now = [1_000_000]
    monkeypatch.setattr(protocol, "wall_ms", lambda: now[0])
    _, tid, c, d = setup(6, settings={"group.consumer.assignment.interval.ms": 1000})
    d.join("a")  # no target yet: computed at once (epoch 2)
    d.join("b")  # epoch 3, but the interval has not passed
    d.join("c")  # epoch 4
    group = d.group
    assert (group.group_epoch, group.assignment_epoch) == (4, 2)
    assert group.state_name == "Assigning"
    now[0] += 1000
    d.heartbeat("b")  # one computation for both bumps
    assert group.assignment_epoch == 4
    d.converge()
    assert group.state_name == "Stable"


# --------------------------------------------------------------------------------- regexes


def test_regex_subscription_follows_topic_creation():
    topics, tid, c, d = setup(2)
    r = d.join("a", names=None, regex="t.*")
    assert parts(r, tid) == [0, 1]
    epoch = d.group.group_epoch
    new_id = topics.add("t2", 3)
    c.on_topics_changed({"t2"})
    assert d.group.group_epoch == epoch + 1
    assert d.group.regexes["t.*"].topics == ("t", "t2")
    d.converge()
    assert d.clients["a"].owned[new_id] == frozenset({0, 1, 2})
    # A full match: a name that only contains a match is not one.
    topics.add("xt", 1)
    c.on_topics_changed({"xt"})
    assert d.group.regexes["t.*"].topics == ("t", "t2")


def test_a_leave_tombstones_a_regex_nobody_uses():
    """A resolved regex no member subscribes with (a log an older corral wrote can hold one) is
    tombstoned by the next leave or fence, and counts no more in the group's topics."""
    topics, _, c, d = setup(2)
    topics.add("u", 2)
    d.join("a")
    d.join("b")
    d.converge()
    c.replay(cr.RegexTopics("g", "u", ("u",), 0, 0))
    group = d.group
    assert group.unused_regexes == {"u"} and group.is_subscribed_to("u")
    d.leave("b")
    assert not group.regexes and not group.unused_regexes and not group.is_subscribed_to("u")
    assert group.metadata_hash == metadata_hash({"t"}, c.topics)


def test_more_partitions_bump_the_epoch_at_the_next_heartbeat():
    topics, tid, c, d = setup(2)
    d.join("a")
    epoch = d.group.group_epoch
    topics.get("t").partitions = 3
    c.on_topics_changed({"t"})
    assert d.group.metadata_expired and d.group.group_epoch == epoch
    d.converge()
    assert d.group.group_epoch == epoch + 1
    assert d.clients["a"].owned[tid] == frozenset({0, 1, 2})


def test_subscription_change_revokes_dropped_topic():
    topics, tid, c, d = setup(2)
    other = topics.add("u", 2)
    d.join("a", names=["t", "u"])
    mid = d.clients["a"].member_id
    r = answer(
        c.consumer_heartbeat(
            request("g", mid, d.clients["a"].epoch, names=["t"], owned=d.clients["a"].owned)
        )
    )
    assert r["error_code"] == ErrorCode.NONE
    d.clients["a"].names = ["t"]
    assert parts(r, tid) == [0, 1] and parts(r, other) == []
    d.clients["a"].assigned = {
        t["topic_id"]: frozenset(t["partitions"]) for t in r["assignment"]["topic_partitions"]
    }
    d.converge()
    assert other not in d.clients["a"].owned and d.clients["a"].owned[tid] == frozenset({0, 1})


# ------------------------------------------------------------------------- offsets and admin


def test_offset_commit_and_fetch_validation():
    _, _, c, d = setup()
    d.join("a")
    mid, epoch = d.clients["a"].member_id, d.clients["a"].epoch
    group = d.group
    assert group.validate_offset_commit(mid, None, epoch, 9) == ErrorCode.NONE
    assert group.validate_offset_commit(mid, None, epoch + 1, 9) == ErrorCode.STALE_MEMBER_EPOCH
    assert group.validate_offset_commit(mid, None, epoch, 8) == ErrorCode.UNSUPPORTED_VERSION
    assert group.validate_offset_commit("nobody", None, epoch, 9) == ErrorCode.UNKNOWN_MEMBER_ID
    assert group.validate_offset_commit("", None, -1, 9) == ErrorCode.UNKNOWN_MEMBER_ID
    assert group.validate_offset_fetch(None, -1) == ErrorCode.NONE
    assert group.validate_offset_fetch(mid, epoch - 1) == ErrorCode.STALE_MEMBER_EPOCH
    d.leave("a")
    # An empty group takes commits from outside group management.
    assert group.validate_offset_commit("", None, -1, 9) == ErrorCode.NONE


def test_offset_delete_refuses_subscribed_topics():
    topics, _, c, d = setup()
    topics.add("old", 1)
    d.join("a")
    c.offsets.commit("g", [("t", [(0, 5, -1, "")]), ("old", [(0, 7, -1, "")])], 1, -1)
    error, result, written = c.offsets.delete("g", [("t", [0]), ("old", [0])])
    assert error == ErrorCode.NONE and written.value == ErrorCode.NONE
    assert result == [
        ("t", [(0, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)]),
        ("old", [(0, ErrorCode.NONE)]),
    ]
    assert c.offsets.fetch("g", [("old", [0]), ("t", [0])])[1][1][0][1] == 5
    assert c.offsets.fetch("g", [("old", [0])])[0][1][0][1] == -1


def test_offsets_of_subscribed_topics_never_expire():
    topics, _, c, d = setup()
    topics.add("old", 1)
    d.join("a")
    c.offsets.commit("g", [("t", [(0, 5, -1, "")]), ("old", [(0, 7, -1, "")])], 1, -1)
    assert c.offsets.expire(10**13).value == ErrorCode.NONE
    assert c.offsets.fetch("g", [("t", [0]), ("old", [0])]) == [
        ("t", [(0, 5, -1, "")]),
        ("old", [(0, -1, -1, "")]),
    ]
    assert "g" in c.groups  # a live group stays


def test_list_describe_delete():
    _, _, c, d = setup()
    d.join("a")
    listed = c.list_groups(None, {"consumer"})
    assert listed == [
        {
            "group_id": "g",
            "protocol_type": "consumer",
            "group_state": "Stable",
            "group_type": "consumer",
        }
    ]
    assert c.list_groups(None, {"classic"}) == []
    assert c.delete_group("g").value == ErrorCode.NON_EMPTY_GROUP
    d.leave("a")
    assert d.group.state_name == "Empty"
    assert d.group.group_epoch == d.group.assignment_epoch  # KAFKA-20442
    assert c.delete_group("g").value == ErrorCode.NONE
    assert "g" not in c.groups


def test_empty_classic_group_converts_and_keeps_its_offsets():
    _, _, c, d = setup()
    c.offsets.commit("g", [("t", [(0, 42, -1, "")])], 1, -1)
    assert "g" in c.groups and not isinstance(c.groups["g"], ConsumerGroup)
    assert d.join("a")["error_code"] == ErrorCode.NONE
    assert isinstance(c.groups["g"], ConsumerGroup)
    assert c.offsets.fetch("g", [("t", [0])])[0][1][0][1] == 42
