"""Committed offsets and group state on the coordinator log: restart, crash, Kafka's record format."""

from __future__ import annotations

import threading
import time

import confluent_kafka as ck
from cgkit import FAST_GROUPS
from confluent_kafka.admin import AdminClient, NewTopic
from rawwire import RawClient
from wire_groups import commit, fetch, heartbeat, join, sync

from corral import _core
from corral.groups.storage import records
from corral.groups.storage.placement import OFFSETS_TOPIC, partition_for
from corral.network.apis import ApiKey


def make_topic(broker, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=10)


def consumer(broker, group: str, **extra) -> ck.Consumer:
    conf = {
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
    }
    conf.update(extra)
    return ck.Consumer(conf)


def consume(c: ck.Consumer, count: int, timeout: float = 30) -> list[ck.Message]:
    got: list[ck.Message] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append(m)
    assert len(got) == count, f"consumed {len(got)} of {count}"
    return got


def test_consumer_resumes_after_commit_close_and_restart(corral_factory):
    broker = corral_factory(**FAST_GROUPS)
    make_topic(broker, "events", 1)
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(20):
        producer.produce("events", value=f"m{i}".encode())
    assert producer.flush(10) == 0

    first = consumer(broker, "resume")
    first.subscribe(["events"])
    messages = consume(first, 10)
    first.commit(message=messages[-1], asynchronous=False)
    first.close()

    broker.restart()
    second = consumer(broker, "resume")
    second.subscribe(["events"])
    resumed = consume(second, 10)
    assert [m.offset() for m in resumed] == list(range(10, 20))
    assert resumed[0].value() == b"m10"
    second.close()


def test_no_acknowledged_commit_is_lost_to_kill_9(corral_factory):
    # Raw wire clients: each response seen is an acknowledgement, and a dead broker is an error
    # at once (librdkafka would retry a synchronous commit across the restart).
    broker = corral_factory(**FAST_GROUPS)
    make_topic(broker, "storm", 4)
    acked: dict[str, int] = {}

    def committer(group: str) -> None:
        offset = 0
        try:
            with RawClient(broker.port, timeout=10) as c:
                while True:
                    offset += 1
                    codes = commit(c, group, -1, "", [("storm", p, offset) for p in range(4)])
                    if codes != [0, 0, 0, 0]:
                        return
                    acked[group] = offset
        except OSError:
            return

    threads = [threading.Thread(target=committer, args=(f"storm-{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    time.sleep(2.0)
    broker.kill()
    for t in threads:
        t.join(30)
    assert len(acked) == 4 and min(acked.values()) > 5, acked

    broker.start()
    with RawClient(broker.port) as c:
        for group, offset in acked.items():
            committed = [o for _, o, _ in fetch(c, group, "storm", [0, 1, 2, 3])]
            # Every acknowledged commit is there; one in flight at the kill may be there too.
            assert all(o in (offset, offset + 1) for o in committed), (group, committed, offset)


def test_group_state_survives_restart(corral_factory):
    broker = corral_factory(**FAST_GROUPS)
    make_topic(broker, "t", 2)
    with RawClient(broker.port) as c:
        joined = join(c, "kept", session_ms=30000)
        member, gen = joined["member_id"], joined["generation_id"]
        sync(c, "kept", gen, member, [(member, b"assignment-bytes")])
    broker.restart()
    with RawClient(broker.port) as c:
        described = c.call(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["kept"]})["groups"][0]
        assert described["group_state"] == "Stable"
        assert [(m["member_id"], m["member_assignment"]) for m in described["members"]] == [
            (member, b"assignment-bytes")
        ]
        # The member carries on with its generation, as it would after a Kafka coordinator move.
        assert heartbeat(c, "kept", gen, member) == 0


def test_offsets_topic_holds_kafka_records(corral_factory):
    broker = corral_factory(**FAST_GROUPS)
    make_topic(broker, "t", 2)
    c = consumer(broker, "recorded")
    c.commit(offsets=[ck.TopicPartition("t", 1, 77, metadata="meta")], asynchronous=False)
    c.close()

    partition = partition_for("recorded", 50)
    reader = ck.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    reader.assign([ck.TopicPartition(OFFSETS_TOPIC, partition, 0)])
    found = None
    deadline = time.monotonic() + 15
    while found is None and time.monotonic() < deadline:
        m = reader.poll(0.2)
        if (
            m is not None
            and not m.error()
            and m.key() == _core.offset_keys("recorded", [("t", 1)])[0]
        ):
            found = m
    reader.close()
    assert found is not None, "the commit is not in its __consumer_offsets partition"
    [(_, [(_, offset, epoch, metadata)])] = records.decode(found.key(), found.value()).topics
    # confluent-kafka sends the metadata string with its C terminator; it is stored as sent.
    assert (offset, metadata.rstrip("\0"), epoch) == (77, "meta", -1)
    assert found.value()[:2] == b"\x00\x03"  # OffsetCommitValue v3


def test_restart_loads_snapshot_then_log_tail(corral_factory):
    broker = corral_factory(**FAST_GROUPS, **{"corral.coordinator.snapshot.interval.ms": 200})
    make_topic(broker, "snap", 2)
    with RawClient(broker.port) as c:
        for i in range(1, 51):
            assert commit(c, "before", -1, "", [("snap", 0, i), ("snap", 1, i * 2)]) == [0, 0]
    # The snapshot of the coordinator shard holding "before" (one per __consumer_offsets partition).
    snapshot_file = broker.data_dir / f"__consumer_offsets-{partition_for('before', 50)}.snapshot"
    deadline = time.monotonic() + 10
    while not snapshot_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert snapshot_file.exists(), "no snapshot was written"
    time.sleep(0.5)  # let a pass see nothing new: the snapshot now covers the 50 commits
    with RawClient(broker.port) as c:
        assert commit(c, "after", -1, "", [("snap", 0, 7)]) == [0]
        assert commit(c, "before", -1, "", [("snap", 1, 1000)]) == [0]
    broker.kill()  # no shutdown snapshot: the tail must come from the log
    broker.start()
    with RawClient(broker.port) as c:
        assert [o for _, o, _ in fetch(c, "before", "snap", [0, 1])] == [50, 1000]
        assert [o for _, o, _ in fetch(c, "after", "snap", [0])] == [7]
    loaded = [line for line in broker.log().splitlines() if "loaded" in line and "groups" in line]
    assert loaded, broker.log()
    # The 100 records before the snapshot were not replayed from the log.
    log_records = int(loaded[-1].split(" records from the snapshot, ")[1].split()[0])
    assert log_records <= 3, loaded[-1]


def test_expired_offsets_and_their_empty_group_are_removed(corral_factory):
    broker = corral_factory(**FAST_GROUPS, **{"offsets.retention.check.interval.ms": 200})
    make_topic(broker, "exp", 1)
    with RawClient(broker.port) as c:
        # OffsetCommit v2-4 may carry its own retention: an explicit expiry.
        body = {
            "group_id": "short-lived",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "retention_time_ms": 300,
            "topics": [
                {"name": "exp", "partitions": [{"partition_index": 0, "committed_offset": 5}]}
            ],
        }
        assert (
            c.call(ApiKey.OFFSET_COMMIT, 2, body)["topics"][0]["partitions"][0]["error_code"] == 0
        )
        assert commit(c, "kept", -1, "", [("exp", 0, 9)]) == [0]
        assert [o for _, o, _ in fetch(c, "short-lived", "exp", [0])] == [5]

        def listed() -> set[str]:
            return {g["group_id"] for g in c.call(ApiKey.LIST_GROUPS, 4, {})["groups"]}

        deadline = time.monotonic() + 10
        while "short-lived" in listed() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert listed() == {"kept"}
        assert [o for _, o, _ in fetch(c, "short-lived", "exp", [0])] == [-1]
    broker.kill()
    broker.start()
    with RawClient(broker.port) as c:
        # The tombstones made it to the log: the expired group stays gone after a restart.
        assert {g["group_id"] for g in c.call(ApiKey.LIST_GROUPS, 4, {})["groups"]} == {"kept"}
        assert [o for _, o, _ in fetch(c, "kept", "exp", [0])] == [9]
