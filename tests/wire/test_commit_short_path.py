"""OffsetCommits written and answered by the network thread (rust/short_paths/commit_path.rs,
docs/offset-commit-short-path.md), over TCP: what it acknowledged survives kill -9 (snapshots
taken meanwhile included); while a Python write of the group is pending its commits are Python's,
so memory ends as the log says; a group deleted while its commits wait for their fsync keeps
none; refusals stay Python's and Kafka's. The orderings are forced by holding the fsync passes."""

from __future__ import annotations

import threading
import time

import pytest
from cgkit import FAST_GROUPS, wait_until
from rawwire import RawClient
from scraper import Scraper
from shortpath import create_topic, with_broker
from wire_data import fetch as data_fetch
from wire_groups import fetch, join, sync

from corral import _core
from corral.errors import ErrorCode
from corral.groups import OFFSETS_TOPIC, partition_for
from corral.groups.storage import records
from corral.network.apis import ApiKey

TOPIC = "sp"
SETTINGS = {
    **FAST_GROUPS,
    "corral.metrics.listen": "127.0.0.1:0",
    "corral.coordinator.snapshot.interval.ms": 100,
}


@pytest.fixture
def broker(corral_factory):
    broker = corral_factory(**SETTINGS)
    with RawClient(broker.port) as client:
        create_topic(client, TOPIC, 4)
    return broker


def member_of(client: RawClient, group: str) -> tuple[str, int]:
    """A classic group of one member, Stable: (member id, generation)."""
    joined = join(client, group, session_ms=30000)
    member, generation = joined["member_id"], joined["generation_id"]
    assert sync(client, group, generation, member, [(member, b"")])["error_code"] == 0
    return member, generation


def commit_body(group: str, member: str, generation: int, partition: int, offset: int) -> dict:
    return {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member,
        "retention_time_ms": -1,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [
                    {
                        "partition_index": partition,
                        "committed_offset": offset,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    }


def error_of(response: dict) -> int:
    return response["topics"][0]["partitions"][0]["error_code"]


def short_path_commits(broker) -> float:
    return Scraper(broker).value("corral_offset_commit_short_path_total")


def test_acknowledged_commits_survive_kill_9(broker):
    """Four connections commit as fast as answered, each to its own partition, while snapshots
    are taken every 100 ms; kill -9 mid-stream: each partition reads back at least the offset
    last acknowledged (a commit sent but not answered may be there too)."""
    with RawClient(broker.port) as client:
        member, generation = member_of(client, "k9")
    acked = [-1] * 4
    stop = threading.Event()

    def stream(partition: int) -> None:
        try:
            with RawClient(broker.port) as client:
                offset = 0
                while not stop.is_set():
                    offset += 1
                    body = commit_body("k9", member, generation, partition, offset)
                    if error_of(client.call(ApiKey.OFFSET_COMMIT, 8, body)) == ErrorCode.NONE:
                        acked[partition] = offset
        except OSError:
            pass  # the broker was killed under it

    threads = [threading.Thread(target=stream, args=(p,)) for p in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(1.5)
    acked_before = sum(acked)  # each counted by the path (at its append) before its answer
    taken = short_path_commits(broker)
    broker.kill()
    stop.set()
    for thread in threads:
        thread.join(10)
    assert min(acked) > 50, acked
    assert taken >= 0.9 * acked_before, "the network thread wrote (almost) all of them"
    broker.start()
    with RawClient(broker.port) as client:
        read = [offset for _, offset, _ in fetch(client, "k9", TOPIC, [0, 1, 2, 3])]
    assert all(r >= a for r, a in zip(read, acked)), (read, acked)


class HeldPasses:
    """Holds every fsync pass before it starts: Python's flusher's (the store's `flush`, in a
    worker thread, waits for `release_python()`) and the commit path's thread's (`hold`)."""

    def __init__(self, store, core):
        self.store, self.core, self.gate = store, core, threading.Event()
        core.hold(True)

    def flush(self) -> int:  # in Python's flusher's worker thread
        assert self.gate.wait(20), "never released"
        return self.store.flush()

    def release_core(self) -> None:
        self.core.hold(False)

    def release_python(self) -> None:
        self.gate.set()

    def __getattr__(self, name: str):
        return getattr(self.store, name)


def holding_passes(broker) -> HeldPasses:
    logs = broker.server.broker.logs
    held = HeldPasses(logs.store, broker.groups.writer.core_commits)
    broker.run(setattr, logs, "store", held)
    return held


def last_in_log(client: RawClient, group: str) -> dict[int, int | None]:
    """Per partition of TOPIC, the offset of the group's last offset record in
    __consumer_offsets (None: a tombstone): what a restart, replaying the log, reads."""
    response = data_fetch(client, OFFSETS_TOPIC, partition_for(group, 50), 0)
    data = response["responses"][0]["partitions"][0]["records"] or b""
    last = {}
    for _, _, key, value in _core.decode_batches(data):
        record = records.decode(key, value)
        if isinstance(record, records.OffsetCommits) and record.group_id == group:
            for _, partitions in record.topics:
                for partition, offset, *_ in partitions:
                    last[partition] = offset
        elif isinstance(record, records.OffsetTombstones) and record.group_id == group:
            for _, partition in record.partitions:
                last[partition] = None
    return last


def test_a_python_write_pending_keeps_the_group_commits_python(tmp_path, commit_calls):
    """A commit through Python (v4) waits for its fsync pass; a v8 commit of the same partition
    arriving meanwhile goes to Python too, after it: memory ends as the log says (were the
    network thread to take it, the pass would apply it first and Python's older one over it)."""

    def scenario(broker) -> None:
        with RawClient(broker.port) as a, RawClient(broker.port) as b:
            create_topic(a, TOPIC, 2)
            member, generation = member_of(a, "g")
            held = holding_passes(broker)
            a.send(ApiKey.OFFSET_COMMIT, 4, commit_body("g", member, generation, 0, 10))
            wait_until(lambda: len(commit_calls) == 1, 10, "the v4 commit with Python")
            b.send(ApiKey.OFFSET_COMMIT, 8, commit_body("g", member, generation, 0, 11))
            wait_until(lambda: len(commit_calls) == 2, 10, "the v8 commit with Python")
            # Were the network thread's commit in flight, it would be applied first, then
            # Python's older one over it.
            held.release_core()
            wait_until(lambda: broker.groups.writer.core_commits.in_flight("g") == 0, 10, "applied")
            held.release_python()
            assert error_of(a.receive(ApiKey.OFFSET_COMMIT, 4)[1]) == ErrorCode.NONE
            assert error_of(b.receive(ApiKey.OFFSET_COMMIT, 8)[1]) == ErrorCode.NONE
            assert fetch(a, "g", TOPIC, [0]) == [(0, 11, "")]
            assert last_in_log(a, "g") == {0: 11}
            # No Python write pending: the network thread's again.
            taken = broker.groups.writer.core_commits.committed()[0]
            body = commit_body("g", member, generation, 0, 12)
            assert error_of(b.call(ApiKey.OFFSET_COMMIT, 8, body)) == ErrorCode.NONE
            assert broker.groups.writer.core_commits.committed()[0] == taken + 1
            assert fetch(a, "g", TOPIC, [0]) == [(0, 12, "")] and last_in_log(a, "g") == {0: 12}

    with_broker(tmp_path, scenario, **{"group.initial.rebalance.delay.ms": 0})


def test_a_group_deleted_while_its_commits_are_in_flight_keeps_none(tmp_path):
    """The member commits (the network thread's, waiting for its pass), leaves, and the empty
    group is deleted before the pass: the deletion waits for the commit, so its tombstones cover
    it and the group keeps no offset (nor would a log compacted as Kafka compacts it)."""

    def scenario(broker) -> None:
        with RawClient(broker.port) as a, RawClient(broker.port) as b:
            create_topic(a, TOPIC, 2)
            member, generation = member_of(a, "gone")
            core = broker.groups.writer.core_commits
            held = holding_passes(broker)
            a.send(ApiKey.OFFSET_COMMIT, 8, commit_body("gone", member, generation, 1, 7))
            wait_until(lambda: core.in_flight("gone") == 1, 10, "the commit in flight")
            b.send(
                ApiKey.LEAVE_GROUP,
                5,
                {"group_id": "gone", "members": [{"member_id": member, "group_instance_id": None}]},
            )
            with RawClient(broker.port) as c:
                c.send(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["gone"]})
                time.sleep(0.2)
                held.release_core()
                wait_until(lambda: core.in_flight("gone") == 0, 10, "the commit applied")
                held.release_python()
                assert error_of(a.receive(ApiKey.OFFSET_COMMIT, 8)[1]) == ErrorCode.NONE
                assert b.receive(ApiKey.LEAVE_GROUP, 5)[1]["error_code"] == ErrorCode.NONE
                deleted = c.receive(ApiKey.DELETE_GROUPS, 2)[1]
                assert deleted["results"][0]["error_code"] == ErrorCode.NONE
            assert fetch(a, "gone", TOPIC, [0, 1]) == [(0, -1, ""), (1, -1, "")]
            assert broker.groups.offsets.map.count("gone") == 0
            # The log deletes it as Kafka's does: the commit, then its tombstone.
            assert last_in_log(a, "gone") == {1: None}

    with_broker(tmp_path, scenario, **{"group.initial.rebalance.delay.ms": 0})


def test_what_the_network_thread_leaves_to_python(tmp_path, commit_calls):
    """Unknown topics and partitions, metadata over offset.metadata.max.bytes, v2-4 and a
    "simple" commit: answered by Python, as Kafka answers them."""

    def scenario(broker) -> None:
        with RawClient(broker.port) as client:
            create_topic(client, TOPIC, 2)
            member, generation = member_of(client, "left")
            core = broker.groups.writer.core_commits
            taken = core.committed()

            def code(
                partition: int,
                topic: str = TOPIC,
                metadata: str = "",
                version: int = 8,
                member_id: str = member,
                generation_id: int = generation,
            ) -> int:
                body = commit_body("left", member_id, generation_id, partition, 1)
                body["topics"][0]["name"] = topic
                body["topics"][0]["partitions"][0]["committed_metadata"] = metadata
                return error_of(client.call(ApiKey.OFFSET_COMMIT, version, body))

            assert code(5) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert code(0, topic="nowhere") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert code(0, metadata="m" * 40) == ErrorCode.OFFSET_METADATA_TOO_LARGE
            assert code(0, version=4) == ErrorCode.NONE
            assert code(0, member_id="", generation_id=-1) == ErrorCode.UNKNOWN_MEMBER_ID
            assert len(commit_calls) == 5 and core.committed() == taken
            assert code(1, metadata="m" * 32) == ErrorCode.NONE  # within the limit: taken
            assert len(commit_calls) == 5 and core.committed()[0] == taken[0] + 1

    with_broker(
        tmp_path,
        scenario,
        **{"group.initial.rebalance.delay.ms": 0, "offset.metadata.max.bytes": 32},
    )


def test_off_when_disabled(tmp_path, commit_calls):
    def scenario(broker) -> None:
        assert broker.groups.writer.core_commits is None
        with RawClient(broker.port) as client:
            create_topic(client, TOPIC, 2)
            member, generation = member_of(client, "python-only")
            body = commit_body("python-only", member, generation, 0, 3)
            assert error_of(client.call(ApiKey.OFFSET_COMMIT, 8, body)) == ErrorCode.NONE
            assert len(commit_calls) == 1
            assert fetch(client, "python-only", TOPIC, [0]) == [(0, 3, "")]

    with_broker(
        tmp_path,
        scenario,
        **{
            "group.initial.rebalance.delay.ms": 0,
            "corral.group.offset.commit.short.path.enable": False,
        },
    )


def test_with_an_authorizer_after_python_authorized_group_and_topics(tmp_path, commit_calls):
    """With ACLs, a connection's first commit is Python's (GROUP and TOPIC READ); its next ones
    to the same group and topics are the network thread's, until the ACLs change: a DENY of
    TOPIC READ then refuses the very next commit (Python's again)."""

    def scenario(broker) -> None:
        with RawClient(broker.port) as client, RawClient(broker.port) as other:
            create_topic(client, TOPIC, 2)
            member, generation = member_of(client, "acl")
            core = broker.groups.writer.core_commits
            taken = core.committed()[0]
            for offset in (1, 2, 3):
                body = commit_body("acl", member, generation, 0, offset)
                assert error_of(client.call(ApiKey.OFFSET_COMMIT, 8, body)) == ErrorCode.NONE
            assert len(commit_calls) == 1 and core.committed()[0] == taken + 2
            assert fetch(client, "acl", TOPIC, [0]) == [(0, 3, "")]
            # Another connection, its own authorizations: Python's first.
            body = commit_body("acl", member, generation, 1, 4)
            assert error_of(other.call(ApiKey.OFFSET_COMMIT, 8, body)) == ErrorCode.NONE
            assert len(commit_calls) == 2
            created = client.call(
                ApiKey.CREATE_ACLS,
                3,
                {
                    "creations": [
                        {
                            "resource_type": 2,
                            "resource_name": TOPIC,
                            "resource_pattern_type": 3,
                            "principal": "User:ANONYMOUS",
                            "host": "*",
                            "operation": 3,
                            "permission_type": 2,
                        }
                    ]
                },
            )
            assert created["results"][0]["error_code"] == ErrorCode.NONE
            body = commit_body("acl", member, generation, 0, 5)
            assert (
                error_of(client.call(ApiKey.OFFSET_COMMIT, 8, body))
                == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            )
            assert len(commit_calls) == 3 and core.committed()[0] == taken + 2

    with_broker(
        tmp_path,
        scenario,
        **{
            "group.initial.rebalance.delay.ms": 0,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": True,
        },
    )
