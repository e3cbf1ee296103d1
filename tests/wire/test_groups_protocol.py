"""The classic group protocol at the wire, where exact versions and bad input must be steered.

Each member is its own connection (a parked JoinGroup blocks its connection, as in Kafka).
"""

from __future__ import annotations

import threading
import time

import pytest
from cgkit import FAST_GROUPS, Member, assigned_once, stop_all, wait_until
from rawwire import RawClient
from wire_groups import commit, fetch, heartbeat, join, join_body, subscription, sync

from corral import _core
from corral.errors import ErrorCode
from corral.network.apis import ApiKey


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from conftest import CorralProcess

    settings = dict(FAST_GROUPS, **{"group.max.size": 3})
    process = CorralProcess(
        tmp_path_factory.mktemp("groups") / "corral", {k: str(v) for k, v in settings.items()}
    ).start()
    with RawClient(process.port) as c:
        c.call(
            ApiKey.CREATE_TOPICS,
            4,
            {
                "topics": [
                    {"name": name, "num_partitions": 4, "replication_factor": 1}
                    for name in ("t", "u")
                ],
                "timeout_ms": 5000,
            },
        )
    yield process
    process.proc.kill()
    process.proc.wait()


def stable_single_member(
    broker, group: str, assignment: bytes = b"A"
) -> tuple[RawClient, str, int]:
    client = RawClient(broker.port)
    joined = join(client, group)
    assert joined["error_code"] == ErrorCode.NONE
    member, generation = joined["member_id"], joined["generation_id"]
    assert joined["leader"] == member
    assert (
        sync(client, group, generation, member, [(member, assignment)])["assignment"] == assignment
    )
    return client, member, generation


def test_find_coordinator_single_and_batched(broker):
    with RawClient(broker.port) as c:
        for version in range(0, 4):
            r = c.call(ApiKey.FIND_COORDINATOR, version, {"key": "g"})
            assert r["error_code"] == 0 and r["node_id"] == 1 and r["port"] == broker.port
        r = c.call(ApiKey.FIND_COORDINATOR, 3, {"key": "tx", "key_type": 1})
        assert (r["error_code"], r["node_id"], r["port"]) == (0, 1, broker.port)
        r = c.call(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["a", "b"]})
        assert [(x["key"], x["error_code"], x["port"]) for x in r["coordinators"]] == [
            ("a", 0, broker.port),
            ("b", 0, broker.port),
        ]
        r = c.call(ApiKey.FIND_COORDINATOR, 5, {"key_type": 1, "coordinator_keys": ["tx"]})
        assert (r["coordinators"][0]["error_code"], r["coordinators"][0]["port"]) == (
            0,
            broker.port,
        )


def test_offsets_topic_is_internal_in_metadata(broker):
    with RawClient(broker.port) as c:
        r = c.call(
            ApiKey.METADATA,
            12,
            {"topics": [{"name": "__consumer_offsets"}], "allow_auto_topic_creation": False},
        )
    topic = r["topics"][0]
    assert topic["error_code"] == 0 and topic["is_internal"]
    assert len(topic["partitions"]) == 50


def test_join_sync_heartbeat_and_versions(broker):
    for version in (0, 3, 4, 5, 7, 9):
        group = f"versions-{version}"
        with RawClient(broker.port) as c:
            first = c.call(ApiKey.JOIN_GROUP, version, join_body(group))
            if version >= 4:
                assert first["error_code"] == ErrorCode.MEMBER_ID_REQUIRED
                first = c.call(ApiKey.JOIN_GROUP, version, join_body(group, first["member_id"]))
            assert first["error_code"] == 0, version
            assert first["generation_id"] == 1
            assert first["protocol_name"] == "range"
            assert [m["member_id"] for m in first["members"]] == [first["member_id"]]
            synced = sync(
                c,
                group,
                1,
                first["member_id"],
                [(first["member_id"], b"x" * 10)],
                version=min(version, 5),
            )
            assert synced["error_code"] == 0 and synced["assignment"] == b"x" * 10
            assert heartbeat(c, group, 1, first["member_id"], version=min(version, 4)) == 0


def test_two_members_rebalance_and_big_assignments_arrive_intact(broker):
    group = "two"
    a = RawClient(broker.port)
    b = RawClient(broker.port)
    try:
        first = join(a, group)
        member_a, gen = first["member_id"], first["generation_id"]
        sync(a, group, gen, member_a, [(member_a, b"solo")])
        # b joins: a learns of the rebalance through its heartbeat and rejoins.
        result = {}
        t = threading.Thread(target=lambda: result.update(b=join(b, group)))
        t.start()
        for _ in range(100):
            if heartbeat(a, group, gen, member_a) == ErrorCode.REBALANCE_IN_PROGRESS:
                break
        again = join(a, group, member_id=member_a)
        t.join(10)
        assert again["error_code"] == 0 and result["b"]["error_code"] == 0
        gen2 = again["generation_id"]
        assert gen2 == gen + 1 and result["b"]["generation_id"] == gen2
        leader = again if again["members"] else result["b"]
        assert len(leader["members"]) == 2
        member_b = result["b"]["member_id"]
        # Multi-megabyte assignments are delivered whole (no truncation).
        big_a, big_b = bytes(range(256)) * 8192, b"\x07" * (3 << 20)
        out = {}
        t = threading.Thread(target=lambda: out.update(b=sync(b, group, gen2, member_b)))
        t.start()
        mine = (
            sync(a, group, gen2, member_a, [(member_a, big_a), (member_b, big_b)])
            if leader is again
            else None
        )
        if mine is None:
            raise AssertionError("member a was expected to stay leader")
        t.join(10)
        assert mine["assignment"] == big_a
        assert out["b"]["assignment"] == big_b
        # Stale generation and unknown members are refused, and the group stays healthy.
        assert heartbeat(a, group, gen, member_a) == ErrorCode.ILLEGAL_GENERATION
        assert heartbeat(a, group, gen2, "nobody") == ErrorCode.UNKNOWN_MEMBER_ID
        assert heartbeat(a, "no-such-group", 1, member_a) == ErrorCode.UNKNOWN_MEMBER_ID
        assert heartbeat(a, group, gen2, member_a) == 0
        assert heartbeat(b, group, gen2, member_b) == 0
    finally:
        a.close()
        b.close()


def test_protocol_mismatch_session_bounds_and_max_size(broker):
    c, member, gen = stable_single_member(broker, "strict")
    try:
        with RawClient(broker.port) as other:
            r = other.call(
                ApiKey.JOIN_GROUP,
                9,
                join_body(
                    "strict", protocols=[{"name": "roundrobin", "metadata": subscription("t")}]
                ),
            )
            assert r["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
            for session in (100, 1_800_001):
                r = other.call(ApiKey.JOIN_GROUP, 9, join_body("strict", session_ms=session))
                assert r["error_code"] == ErrorCode.INVALID_SESSION_TIMEOUT
            r = other.call(ApiKey.JOIN_GROUP, 9, join_body("", session_ms=6000))
            assert r["error_code"] == ErrorCode.INVALID_GROUP_ID
        assert heartbeat(c, "strict", gen, member) == 0
    finally:
        c.close()


def test_group_max_size(broker):
    # group.max.size is 3 for this broker: with three members stable, a fourth is turned away.
    members = [
        Member("confluent", broker.bootstrap, "capped", "t", session_ms=6000) for _ in range(3)
    ]
    try:
        wait_until(
            lambda: assigned_once(members, 4) and all(m.assigned for m in members),
            30,
            "three members sharing t",
        )
        with RawClient(broker.port) as c:
            r = c.call(ApiKey.JOIN_GROUP, 9, join_body("capped"))
            assert r["error_code"] == ErrorCode.GROUP_MAX_SIZE_REACHED
            r = c.call(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["capped"]})
            assert (r["groups"][0]["group_state"], len(r["groups"][0]["members"])) == ("Stable", 3)
    finally:
        stop_all(members)


def test_static_member_fencing(broker):
    a = RawClient(broker.port)
    try:
        first = a.call(ApiKey.JOIN_GROUP, 9, join_body("fence", instance_id="i1"))
        assert first["error_code"] == 0  # static members get their id at once
        old = first["member_id"]
        sync(a, "fence", first["generation_id"], old, [(old, b"mine")])
        with RawClient(broker.port) as b:
            again = b.call(ApiKey.JOIN_GROUP, 9, join_body("fence", instance_id="i1"))
            assert again["error_code"] == 0 and again["member_id"] != old
            assert again["generation_id"] == first["generation_id"], "no rebalance"
            # The replaced id is fenced.
            r = a.call(
                ApiKey.HEARTBEAT,
                4,
                {
                    "group_id": "fence",
                    "generation_id": first["generation_id"],
                    "member_id": old,
                    "group_instance_id": "i1",
                },
            )
            assert r["error_code"] == ErrorCode.FENCED_INSTANCE_ID
            synced = sync(b, "fence", again["generation_id"], again["member_id"])
            assert synced["assignment"] == b"mine"
            # Admin removal by instance id (LeaveGroup v3+ with an empty member id).
            r = b.call(
                ApiKey.LEAVE_GROUP,
                5,
                {
                    "group_id": "fence",
                    "members": [
                        {"member_id": "", "group_instance_id": "i1"},
                        {"member_id": "", "group_instance_id": "nobody"},
                    ],
                },
            )
            assert [m["error_code"] for m in r["members"]] == [0, ErrorCode.UNKNOWN_MEMBER_ID]
    finally:
        a.close()


def test_offset_commit_errors_and_fetch(broker):
    c, member, gen = stable_single_member(broker, "commits")
    try:
        assert commit(c, "commits", gen, member, [("t", 0, 42)], metadata="m") == [0]
        assert fetch(c, "commits", "t", [0, 1]) == [(0, 42, "m"), (1, -1, "")]
        assert commit(c, "commits", gen + 1, member, [("t", 0, 43)]) == [
            ErrorCode.ILLEGAL_GENERATION
        ]
        assert commit(c, "commits", gen, "stranger", [("t", 0, 43)]) == [
            ErrorCode.UNKNOWN_MEMBER_ID
        ]
        assert commit(c, "commits", gen, member, [("t", 0, 43)], metadata="x" * 100_000) == [
            ErrorCode.OFFSET_METADATA_TOO_LARGE
        ]
        assert (
            commit(c, "commits", gen, member, [("nope", 0, 1), ("t", 99, 1)])
            == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 2
        )
        # A generation for a group that does not exist: ILLEGAL_GENERATION before v9, then GROUP_ID_NOT_FOUND.
        assert commit(c, "ghost", 3, "m", [("t", 0, 1)], version=8) == [
            ErrorCode.ILLEGAL_GENERATION
        ]
        assert commit(c, "ghost", 3, "m", [("t", 0, 1)], version=9) == [
            ErrorCode.GROUP_ID_NOT_FOUND
        ]
        # A simple commit (generation -1) to a group with live members is refused...
        assert commit(c, "commits", -1, "", [("t", 0, 1)]) == [ErrorCode.UNKNOWN_MEMBER_ID]
        # ...and creates a simple group when there is none.
        assert commit(c, "simple", -1, "", [("t", 2, 7)], version=2) == [0]
        assert fetch(c, "simple", "t", [2], version=1) == [(2, 7, "")]
        # Nothing above broke the group.
        assert fetch(c, "commits", "t", [0]) == [(0, 42, "m")]
        assert heartbeat(c, "commits", gen, member) == 0
        # OffsetFetch v8+: several groups, null topics = everything.
        r = c.call(
            ApiKey.OFFSET_FETCH,
            9,
            {
                "groups": [
                    {
                        "group_id": "commits",
                        "member_id": member,
                        "member_epoch": gen,
                        "topics": None,
                    },
                    {"group_id": "simple", "topics": [{"name": "t", "partition_indexes": [2, 3]}]},
                ],
                "require_stable": True,
            },
        )
        got = {
            g["group_id"]: [
                (t["name"], p["partition_index"], p["committed_offset"])
                for t in g["topics"]
                for p in t["partitions"]
            ]
            for g in r["groups"]
        }
        assert got == {"commits": [("t", 0, 42)], "simple": [("t", 2, 7), ("t", 3, -1)]}
    finally:
        c.close()


def test_delete_groups_and_offsets_rules(broker):
    c, member, gen = stable_single_member(broker, "busy")
    try:
        commit(c, "busy", gen, member, [("t", 0, 5)])
        r = c.call(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["busy", "never-existed"]})
        assert [x["error_code"] for x in r["results"]] == [
            ErrorCode.NON_EMPTY_GROUP,
            ErrorCode.GROUP_ID_NOT_FOUND,
        ]
        r = c.call(
            ApiKey.OFFSET_DELETE,
            0,
            {"group_id": "busy", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]},
        )
        assert (
            r["topics"][0]["partitions"][0]["error_code"] == ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
        ), r
        # Leave: the group is empty, its subscription no longer protects its offsets.
        r = c.call(ApiKey.LEAVE_GROUP, 2, {"group_id": "busy", "member_id": member})
        assert r["error_code"] == 0
        r = c.call(ApiKey.LIST_GROUPS, 4, {"states_filter": ["Empty"]})
        assert ("busy", "consumer", "Empty") in [
            (g["group_id"], g["protocol_type"], g["group_state"]) for g in r["groups"]
        ]
        r = c.call(
            ApiKey.OFFSET_DELETE,
            0,
            {"group_id": "busy", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]},
        )
        assert r["error_code"] == 0
        assert fetch(c, "busy", "t", [0]) == [(0, -1, "")]
        r = c.call(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["busy"]})
        assert r["results"][0]["error_code"] == 0
        r = c.call(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["busy"]})
        assert r["groups"][0]["group_state"] == "Dead"
    finally:
        c.close()


def test_offset_delete_refuses_subscribed_topics(broker):
    c, member, gen = stable_single_member(broker, "subscribed")
    try:
        assert commit(c, "subscribed", gen, member, [("t", 0, 5), ("u", 0, 6)]) == [0, 0]
        # A live "consumer" group may drop offsets of topics it does not subscribe to (u), not of t.
        r = c.call(
            ApiKey.OFFSET_DELETE,
            0,
            {
                "group_id": "subscribed",
                "topics": [
                    {"name": "t", "partitions": [{"partition_index": 0}]},
                    {"name": "u", "partitions": [{"partition_index": 0}]},
                ],
            },
        )
        assert r["error_code"] == 0
        assert [(t["name"], p["error_code"]) for t in r["topics"] for p in t["partitions"]] == [
            ("t", ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC),
            ("u", 0),
        ]
        assert fetch(c, "subscribed", "t", [0]) == [(0, 5, "")]
        assert fetch(c, "subscribed", "u", [0]) == [(0, -1, "")]
        r = c.call(ApiKey.OFFSET_DELETE, 0, {"group_id": "no-such", "topics": []})
        assert r["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    finally:
        c.close()


def test_describe_and_list_groups(broker):
    c, member, gen = stable_single_member(broker, "described", assignment=b"assign")
    try:
        r = c.call(
            ApiKey.DESCRIBE_GROUPS,
            5,
            {"groups": ["described"], "include_authorized_operations": True},
        )
        g = r["groups"][0]
        assert (g["error_code"], g["group_state"], g["protocol_type"], g["protocol_data"]) == (
            0,
            "Stable",
            "consumer",
            "range",
        )
        assert [(m["member_id"], m["client_id"], m["member_assignment"]) for m in g["members"]] == [
            (member, "rawwire", b"assign")
        ]
        assert g["members"][0]["member_metadata"] == subscription("t")
        for version in range(0, 6):
            r = c.call(ApiKey.LIST_GROUPS, version, {})
            assert "described" in [x["group_id"] for x in r["groups"]]
        r = c.call(
            ApiKey.LIST_GROUPS, 5, {"states_filter": ["stable"], "types_filter": ["classic"]}
        )
        assert {
            "group_id": "described",
            "protocol_type": "consumer",
            "group_state": "Stable",
            "group_type": "classic",
        } in r["groups"]
        r = c.call(ApiKey.LIST_GROUPS, 5, {"types_filter": ["consumer"]})
        assert r["groups"] == []
    finally:
        c.close()


def test_session_expiry_removes_a_silent_member(broker):
    c = RawClient(broker.port)
    try:
        joined = join(c, "silent", session_ms=600, rebalance_ms=600)
        member, gen = joined["member_id"], joined["generation_id"]
        sync(c, "silent", gen, member, [(member, b"a")])
        time.sleep(1.5)
        assert heartbeat(c, "silent", gen, member) == ErrorCode.UNKNOWN_MEMBER_ID
        r = c.call(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["silent"]})
        assert r["groups"][0]["group_state"] == "Empty"
    finally:
        c.close()


def test_heartbeats_keep_a_session_alive_past_its_timeout(broker):
    """Steady-state Heartbeats are answered by the network thread (rust/groups/heartbeat_view.rs);
    the session deadline they move must be the one the coordinator expires members by."""
    c, other = RawClient(broker.port), RawClient(broker.port)
    try:
        joined = join(c, "kept", session_ms=600, rebalance_ms=3000)
        member, gen = joined["member_id"], joined["generation_id"]
        assert sync(c, "kept", gen, member, [(member, b"a")])["error_code"] == 0
        for _ in range(15):  # 1.5 s: 2.5 session timeouts
            assert heartbeat(c, "kept", gen, member) == 0
            time.sleep(0.1)
        described = c.call(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["kept"]})["groups"][0]
        assert described["group_state"] == "Stable"
        assert [m["member_id"] for m in described["members"]] == [member]
        assert described["members"][0]["client_host"] == "/127.0.0.1"
        # A second member's join: the first hears of the rebalance from its heartbeat, and only
        # members of the current generation are answered as such.
        parked = threading.Thread(
            target=join, args=(other, "kept"), kwargs=dict(session_ms=600, rebalance_ms=3000)
        )
        parked.start()
        wait_until(
            lambda: heartbeat(c, "kept", gen, member) == ErrorCode.REBALANCE_IN_PROGRESS,
            5,
            "REBALANCE_IN_PROGRESS from a heartbeat",
        )
        assert heartbeat(c, "kept", gen + 1, member) == ErrorCode.ILLEGAL_GENERATION
        assert heartbeat(c, "kept", gen, "nobody") == ErrorCode.UNKNOWN_MEMBER_ID
        rejoined = join(c, "kept", member_id=member, session_ms=600, rebalance_ms=3000)
        parked.join(5)
        assert rejoined["generation_id"] == gen + 1
        assert heartbeat(c, "kept", gen, member) == ErrorCode.ILLEGAL_GENERATION
    finally:
        c.close()
        other.close()


def test_pipelined_requests_are_answered_in_order(broker):
    """Heartbeats the network thread answers and requests Python answers, sent back to back on
    one connection, come back in request order."""
    with RawClient(broker.port) as c:
        joined = join(c, "ordered")
        member, gen = joined["member_id"], joined["generation_id"]
        assert sync(c, "ordered", gen, member, [(member, b"a")])["error_code"] == 0
        hb = {"group_id": "ordered", "generation_id": gen, "member_id": member}
        sent = [
            (ApiKey.HEARTBEAT, 4, hb),
            (ApiKey.METADATA, 12, {"topics": None}),
            (ApiKey.HEARTBEAT, 4, hb),
            (ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["ordered"]}),
            (ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}),
            (ApiKey.HEARTBEAT, 4, dict(hb, generation_id=gen + 5)),
        ]
        c.sock.sendall(
            b"".join(
                _core.encode_request(key, version, i, body, "rawwire")
                for i, (key, version, body) in enumerate(sent)
            )
        )
        answers = [c.receive(key, version) for key, version, _ in sent]
        assert [correlation_id for correlation_id, _ in answers] == list(range(len(sent)))
        assert [answers[i][1]["error_code"] for i in (0, 2, 5)] == [
            0,
            0,
            ErrorCode.ILLEGAL_GENERATION,
        ]
        assert answers[3][1]["groups"][0]["group_state"] == "Stable"
