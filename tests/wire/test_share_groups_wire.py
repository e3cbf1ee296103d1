"""Share groups (KIP-932) over raw frames against a real corral: membership (join, assignment,
describe, leave, the errors of a heartbeat), delivery (acquisition, acknowledgement types, the
delivery limit, lock expiry, a closed connection's records coming back), share sessions, admin
offsets, and durability across kill -9: nothing acknowledged is delivered again, and what was
acquired but not acknowledged becomes available."""

from __future__ import annotations

import time

import pytest
from rawwire import RawClient
from sharekit import (
    ACCEPT,
    REJECT,
    RELEASE,
    acquired,
    heartbeat,
    join,
    new_member_id,
    set_group_configs,
    share_ack,
    share_fetch,
    topic_id,
)
from wire_data import batch, create, produce

from corral.errors import ErrorCode
from corral.network.apis import ApiKey

TOPIC = "shared"
FAST = {"log.flush.interval.messages": 1, "group.share.min.record.lock.duration.ms": 1000}


@pytest.fixture
def broker(corral_factory):
    broker = corral_factory(**FAST)
    with RawClient(broker.port) as c:
        create(c, TOPIC, partitions=2)
    return broker


def _group(c: RawClient, group: str, lock_ms: int = 30000, limit: int = 5) -> None:
    set_group_configs(
        c,
        group,
        **{
            "share.auto.offset.reset": "earliest",
            "share.record.lock.duration.ms": str(lock_ms),
            "share.delivery.count.limit": str(limit),
        },
    )


def test_members_join_are_assigned_described_and_leave(broker):
    with RawClient(broker.port) as c:
        tid = topic_id(c, TOPIC)
        a, b, z = new_member_id(), new_member_id(), new_member_id()
        first = join(c, "g", a, [TOPIC])
        assert first["assignment"]["topic_partitions"] == [{"topic_id": tid, "partitions": [0, 1]}]
        # Three members on two partitions: each partition is shared by two (Kafka's simple).
        join(c, "g", b, [TOPIC])
        join(c, "g", z, [TOPIC])
        time.sleep(1.1)  # the assignment interval
        owned = {}
        for m in (a, b, z):
            answer = heartbeat(c, "g", m, -2 + 2)  # epoch 0 rejoins with the same id
            answer = heartbeat(c, "g", m, answer["member_epoch"], [TOPIC])
            owned[m] = answer["assignment"]["topic_partitions"][0]["partitions"]
        holders = sorted(len([m for m in owned if p in owned[m]]) for p in (0, 1))
        assert holders == [2, 2], owned
        described = c.call(
            ApiKey.SHARE_GROUP_DESCRIBE,
            1,
            {"group_ids": ["g", "nope"], "include_authorized_operations": False},
        )["groups"]
        assert (
            described[0]["error_code"],
            described[0]["group_state"],
            described[0]["assignor_name"],
        ) == (
            0,
            "Stable",
            "simple",
        )
        assert sorted(m["member_id"] for m in described[0]["members"]) == sorted([a, b, z])
        assert described[1]["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
        listed = c.call(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]})
        assert [(g["group_id"], g["group_type"], g["protocol_type"]) for g in listed["groups"]] == [
            ("g", "share", "share")
        ]
        dead = c.call(
            ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["g"], "include_authorized_operations": False}
        )
        assert dead["groups"][0]["group_state"] == "Dead"
        # Another protocol on a share group's id.
        consumer = c.call(
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            0,
            {
                "group_id": "g",
                "member_id": "",
                "member_epoch": 0,
                "instance_id": None,
                "rack_id": None,
                "rebalance_timeout_ms": 30000,
                "subscribed_topic_names": [TOPIC],
                "server_assignor": None,
                "topic_partitions": [],
            },
        )
        assert consumer["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
        deleted = c.call(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g"]})
        assert deleted["results"][0]["error_code"] == ErrorCode.NON_EMPTY_GROUP
        for m in (a, b, z):
            left = heartbeat(c, "g", m, -1)
            assert (left["error_code"], left["member_epoch"]) == (0, -1)
        deleted = c.call(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g"]})
        assert deleted["results"][0]["error_code"] == 0


def test_heartbeat_errors(broker):
    with RawClient(broker.port) as c:
        m = new_member_id()
        assert heartbeat(c, "g", "", 0, [TOPIC])["error_code"] == ErrorCode.INVALID_REQUEST
        answer = heartbeat(c, "g", m, 0, None)
        assert (answer["error_code"], answer["error_message"]) == (
            ErrorCode.INVALID_REQUEST,
            "SubscribedTopicNames must be set in first request.",
        )
        assert heartbeat(c, "g", m, 5, None)["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
        assert heartbeat(c, "g", m, -1)["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
        joined = heartbeat(c, "g", m, 0, [TOPIC])
        assert joined["error_code"] == 0 and joined["member_epoch"] >= 1
        assert heartbeat(c, "g", new_member_id(), 3)["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
        fenced = heartbeat(c, "g", m, joined["member_epoch"] + 5)
        assert fenced["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH
        assert heartbeat(c, "g", m, -3)["error_code"] == ErrorCode.INVALID_REQUEST


def test_acknowledgement_types_and_the_delivery_limit(broker):
    with RawClient(broker.port) as c:
        tid = topic_id(c, TOPIC)
        _group(c, "g", limit=3)
        assert produce(c, TOPIC, 0, batch(10))["error_code"] == 0
        m = new_member_id()
        join(c, "g", m, [TOPIC])
        got = acquired(share_fetch(c, "g", m, 0, {tid: [0, 1]}))
        assert got == {(tid, 0): [(0, 9, 1)]}
        # Accept 0-4, release 5-6, reject 7, gap-free accept 8-9; the released come back.
        acks = {(tid, 0): [(0, 4, [ACCEPT]), (5, 6, [RELEASE]), (7, 7, [REJECT]), (8, 9, [ACCEPT])]}
        answer = share_fetch(c, "g", m, 1, {}, acks)
        part = answer["responses"][0]["partitions"][0]
        assert part["acknowledge_error_code"] == 0
        assert acquired(answer) == {(tid, 0): [(5, 6, 2)]}
        # Released again, to the limit (3): then archived, never delivered again.
        answer = share_fetch(c, "g", m, 2, {}, {(tid, 0): [(5, 6, [RELEASE])]})
        assert acquired(answer) == {(tid, 0): [(5, 5, 3)]}  # on its last delivery: alone
        answer = share_fetch(c, "g", m, 3, {}, {(tid, 0): [(5, 5, [RELEASE])]})
        assert acquired(answer) == {(tid, 0): [(6, 6, 3)]}
        answer = share_fetch(c, "g", m, 4, {}, {(tid, 0): [(6, 6, [RELEASE])]}, max_wait_ms=100)
        assert acquired(answer) == {}
        offsets = c.call(
            ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
            1,
            {"groups": [{"group_id": "g", "topics": [{"topic_name": TOPIC, "partitions": [0]}]}]},
        )["groups"][0]["topics"][0]["partitions"][0]
        # As Kafka's: the start written with the last acknowledgement (before it moved the start
        # past record 6), the lag counting what is finished after it.
        assert (offsets["start_offset"], offsets["lag"]) == (6, 0)
        # Below the start: skipped silently (Kafka does); past what was acquired: INVALID_REQUEST.
        bad = share_ack(c, "g", m, 5, {(tid, 0): [(3, 3, [ACCEPT])]})
        assert bad["responses"][0]["partitions"][0]["error_code"] == 0
        bad = share_ack(c, "g", m, 6, {(tid, 0): [(12, 12, [ACCEPT])]})
        assert bad["responses"][0]["partitions"][0]["error_code"] == ErrorCode.INVALID_REQUEST
        bad = share_ack(c, "g", m, 7, {(tid, 0): [(9, 8, [ACCEPT])]})
        assert bad["responses"][0]["partitions"][0]["error_code"] == ErrorCode.INVALID_REQUEST


def test_sessions(broker):
    with RawClient(broker.port) as c:
        tid = topic_id(c, TOPIC)
        m = new_member_id()
        # No member ever joined "nobody": its share partitions were never initialized.
        answer = share_fetch(c, "nobody", m, 0, {tid: [0]})
        part = answer["responses"][0]["partitions"][0]
        assert (part["error_code"], part["error_message"]) == (
            ErrorCode.UNKNOWN_SERVER_ERROR,
            "Read operation on uninitialized share partition not allowed.",
        )
        assert share_ack(c, "nobody", m, -1, {})["error_code"] == 0
        join(c, "g", m, [TOPIC])
        assert (
            share_fetch(c, "g", m, 5, {tid: [0]})["error_code"] == ErrorCode.SHARE_SESSION_NOT_FOUND
        )
        acks = {(tid, 0): [(0, 0, [ACCEPT])]}
        assert (
            share_fetch(c, "g", m, 0, {tid: [0]}, acks)["error_code"] == ErrorCode.INVALID_REQUEST
        )
        assert share_fetch(c, "g", m, 0, {tid: [0]}, max_wait_ms=0)["error_code"] == 0
        answer = share_fetch(c, "g", m, 3, {}, max_wait_ms=0)
        assert answer["error_code"] == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        assert share_ack(c, "g", m, 0, {})["error_code"] == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        assert share_fetch(c, "g", m, 1, {}, max_wait_ms=0)["error_code"] == 0
        assert share_ack(c, "g", m, -1, {})["error_code"] == 0
        assert share_ack(c, "g", m, 2, {})["error_code"] == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_expired_locks_and_closed_connections_give_records_to_others(broker):
    with RawClient(broker.port) as c:
        tid = topic_id(c, TOPIC)
        _group(c, "g", lock_ms=1000)
        assert produce(c, TOPIC, 1, batch(4))["error_code"] == 0
        b = new_member_id()
        join(c, "g", b, [TOPIC])
        with RawClient(broker.port) as holder:
            a = new_member_id()
            join(holder, "g", a, [TOPIC])
            assert acquired(share_fetch(holder, "g", a, 0, {tid: [1]})) == {(tid, 1): [(0, 3, 1)]}
            # Held: another member gets nothing until the lock expires.
            assert acquired(share_fetch(c, "g", b, 0, {tid: [1]}, max_wait_ms=100)) == {}
            answer = share_fetch(c, "g", b, 1, {}, max_wait_ms=3000)
            assert acquired(answer) == {(tid, 1): [(0, 3, 2)]}
            assert acquired(share_fetch(holder, "g", a, 1, {}, max_wait_ms=0)) == {}
        # b's connection closes with them acquired: they come back at once.
        with RawClient(broker.port) as other:
            answer = share_fetch(other, "g", a, 0, {tid: [1]}, max_wait_ms=100)
            assert acquired(answer) == {}
        c.close()
        with RawClient(broker.port) as other:
            answer = share_fetch(other, "g", a, 0, {tid: [1]}, max_wait_ms=2000)
            assert acquired(answer) == {(tid, 1): [(0, 3, 3)]}


def test_kill_9_loses_no_acknowledgement(broker):
    with RawClient(broker.port) as c:
        tid = topic_id(c, TOPIC)
        _group(c, "g")
        assert produce(c, TOPIC, 0, batch(20))["error_code"] == 0
        m = new_member_id()
        join(c, "g", m, [TOPIC])
        assert acquired(share_fetch(c, "g", m, 0, {tid: [0]}, max_records=10)) == {
            (tid, 0): [(0, 19, 1)]
        }
        acks = {(tid, 0): [(0, 9, [ACCEPT]), (12, 12, [REJECT])]}
        assert share_ack(c, "g", m, 1, acks)["responses"][0]["partitions"][0]["error_code"] == 0
        # Killed while the session is open: closing it first would release (and persist) the
        # acquired records with their delivery count, as Kafka does, racing the kill.
        broker.kill()
    broker.start()
    with RawClient(broker.port) as c:
        m2 = new_member_id()
        join(c, "g", m2, [TOPIC])
        got = acquired(share_fetch(c, "g", m2, 0, {tid: [0]}))
        # 10-11 and 13-19 were acquired, not acknowledged: available again; 12 stays rejected.
        assert got == {(tid, 0): [(10, 11, 1), (13, 19, 1)]}
        described = c.call(
            ApiKey.SHARE_GROUP_DESCRIBE,
            1,
            {"group_ids": ["g"], "include_authorized_operations": False},
        )["groups"][0]
        assert {mm["member_id"] for mm in described["members"]} >= {m2}


def test_admin_offsets(broker):
    with RawClient(broker.port) as c:
        tid = topic_id(c, TOPIC)
        _group(c, "g")
        assert produce(c, TOPIC, 0, batch(6))["error_code"] == 0
        m = new_member_id()
        join(c, "g", m, [TOPIC])
        got = acquired(share_fetch(c, "g", m, 0, {tid: [0]}))
        assert got == {(tid, 0): [(0, 5, 1)]}
        share_ack(c, "g", m, 1, {(tid, 0): [(0, 1, [ACCEPT])]})
        described = c.call(
            ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [{"group_id": "g", "topics": None}]}
        )["groups"][0]
        starts = {
            (t["topic_name"], p["partition_index"]): (p["start_offset"], p["lag"])
            for t in described["topics"]
            for p in t["partitions"]
        }
        assert starts[(TOPIC, 0)] == (0, 4)  # 0-1 finished: the lag is the 4 after them
        alter = {
            "group_id": "g",
            "topics": [
                {"topic_name": TOPIC, "partitions": [{"partition_index": 0, "start_offset": 4}]}
            ],
        }
        assert (
            c.call(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter)["error_code"]
            == ErrorCode.NON_EMPTY_GROUP
        )
        assert heartbeat(c, "g", m, -1)["error_code"] == 0
        assert c.call(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter)["error_code"] == 0
        m2 = new_member_id()
        join(c, "g", m2, [TOPIC])
        assert acquired(share_fetch(c, "g", m2, 0, {tid: [0]})) == {(tid, 0): [(4, 5, 1)]}
        assert heartbeat(c, "g", m2, -1)["error_code"] == 0
        gone = c.call(
            ApiKey.DELETE_SHARE_GROUP_OFFSETS,
            0,
            {"group_id": "g", "topics": [{"topic_name": TOPIC}, {"topic_name": "x"}]},
        )
        assert [r["error_code"] for r in gone["responses"]] == [
            0,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ]


def test_read_committed_archives_aborted_transactions(broker):
    from txnwire import TOPIC as TXN_TOPIC
    from txnwire import add, end, init
    from txnwire import produce as txn_produce

    with RawClient(broker.port) as c:
        create(c, TXN_TOPIC)
        tid = topic_id(c, TXN_TOPIC)
        set_group_configs(
            c,
            "rc",
            **{"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed"},
        )
        assert produce(c, TXN_TOPIC, 0, batch(2))["error_code"] == 0  # 0-1
        _, pid, epoch = init(c, "ta")
        add(c, "ta", pid, epoch, [0])
        assert txn_produce(c, "ta", pid, epoch, 0, 0, 3)["error_code"] == 0  # 2-4
        assert end(c, "ta", pid, epoch, commit=False) == 0  # marker at 5
        _, pid2, epoch2 = init(c, "tb")
        add(c, "tb", pid2, epoch2, [0])
        assert txn_produce(c, "tb", pid2, epoch2, 0, 0, 2)["error_code"] == 0  # 6-7
        # Open: read_committed stops before 6.
        m = new_member_id()
        join(c, "rc", m, [TXN_TOPIC])
        got = acquired(share_fetch(c, "rc", m, 0, {tid: [0]}))
        assert got == {(tid, 0): [(0, 1, 1), (5, 5, 1)]}  # the marker is acknowledged as a gap
        assert end(c, "tb", pid2, epoch2, commit=True) == 0  # marker at 8
        got = acquired(share_fetch(c, "rc", m, 1, {}, max_wait_ms=3000))
        assert got == {(tid, 0): [(6, 8, 1)]}


def test_share_state_is_pruned_and_a_restart_still_finds_it(corral_factory):
    broker = corral_factory(
        **FAST,
        **{
            "share.coordinator.state.topic.prune.interval.ms": 300,
            "share.coordinator.cold.partition.snapshot.interval.ms": 200,
            "share.coordinator.snapshot.update.records.per.snapshot": 3,
            "share.coordinator.state.topic.num.partitions": 1,
        },
    )
    with RawClient(broker.port) as c:
        create(c, TOPIC, partitions=1)
        tid = topic_id(c, TOPIC)
        _group(c, "g")
        assert produce(c, TOPIC, 0, batch(30))["error_code"] == 0
        m = new_member_id()
        join(c, "g", m, [TOPIC])
        assert acquired(share_fetch(c, "g", m, 0, {tid: [0]})) == {(tid, 0): [(0, 29, 1)]}
        for epoch, first in enumerate(range(0, 20, 2), start=1):
            answer = share_ack(c, "g", m, epoch, {(tid, 0): [(first, first + 1, [ACCEPT])]})
            assert answer["responses"][0]["partitions"][0]["error_code"] == 0

        def state_log_start() -> int:
            listed = c.call(
                ApiKey.LIST_OFFSETS,
                7,
                {
                    "replica_id": -1,
                    "isolation_level": 0,
                    "topics": [
                        {
                            "name": "__share_group_state",
                            "partitions": [
                                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2}
                            ],
                        }
                    ],
                },
            )
            return listed["topics"][0]["partitions"][0]["offset"]

        deadline = time.monotonic() + 10
        while state_log_start() == 0:
            assert time.monotonic() < deadline, "nothing pruned"
            time.sleep(0.2)
        broker.kill()  # with the session open (see test_kill_9_loses_no_acknowledgement)
    broker.start()
    with RawClient(broker.port) as c:
        m2 = new_member_id()
        join(c, "g", m2, [TOPIC])
        assert acquired(share_fetch(c, "g", m2, 0, {tid: [0]})) == {(tid, 0): [(20, 29, 1)]}
