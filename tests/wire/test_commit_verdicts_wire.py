"""The network thread's verdict on OffsetCommits over the wire (rust/short_paths/offset_commit.rs,
docs/offset-commit-short-path.md): each commit it takes is counted on the view of its group's
type (`commits_takeable`), written and answered by the commit path (rust/short_paths/commit_path.rs)
without reaching the Python handler, and read back at once; every commit Kafka refuses at the group
level is not counted and reaches Python, whatever the client. A broker in this process, raw
frames and librdkafka clients."""

from __future__ import annotations

import time

import pytest
from rawwire import RawClient
from shortpath import Classic, Member, create_topic, settle, settle_mixed, with_broker

from corral import _core
from corral.network.apis import ApiKey

NONE, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION = 0, 22, 25, 35
REBALANCE_IN_PROGRESS, STALE_MEMBER_EPOCH = 27, 113


def commit(
    client: RawClient,
    group: str,
    member_id: str,
    epoch: int,
    version: int = 9,
    instance_id: str | None = None,
    offset: int = 5,
) -> int:
    """An OffsetCommit of partition 0 of "t"; its one partition's error code."""
    body = {
        "group_id": group,
        "generation_id_or_member_epoch": epoch,
        "member_id": member_id,
        "group_instance_id": instance_id,
        "retention_time_ms": -1,
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": offset,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    }
    response = client.call(ApiKey.OFFSET_COMMIT, version, body)
    return response["topics"][0]["partitions"][0]["error_code"]


def fetched(client: RawClient, group: str) -> int:
    response = client.call(
        ApiKey.OFFSET_FETCH,
        7,
        {
            "group_id": group,
            "topics": [{"name": "t", "partition_indexes": [0]}],
            "require_stable": False,
        },
    )
    return response["topics"][0]["partitions"][0]["committed_offset"]


def test_commits_the_views_accept_and_refusals_they_leave_alone(tmp_path, commit_calls):
    def scenario(broker) -> None:
        consumer_view, classic_view = broker.view, broker.groups.heartbeat_view
        a = Member(broker.port, "mixed", "member-a")
        x = Classic(broker.port, "mixed")
        y = Classic(broker.port, "plain")
        with a.client, x.client, y.client:
            create_topic(a.client, "t", 4)
            assert a.join(["t"])["error_code"] == 0
            settle(broker, a)
            assert x.join() == 0 and x.sync() == 0
            settle_mixed(broker, [a], [x])
            assert y.join() == 0 and y.sync() == 0  # a classic group of its own, Stable

            core = broker.groups.writer.core_commits
            before = consumer_view.commits_takeable, classic_view.commits_takeable
            taken = core.committed()
            assert commit(a.client, "mixed", a.member_id, a.epoch, offset=7) == NONE
            assert fetched(a.client, "mixed") == 7  # read-your-commit
            assert commit(x.client, "mixed", x.member_id, x.generation, version=8, offset=8) == NONE
            assert fetched(x.client, "mixed") == 8
            assert commit(y.client, "plain", y.member_id, y.generation, version=8) == NONE
            assert (consumer_view.commits_takeable, classic_view.commits_takeable) == (
                before[0] + 2,
                before[1] + 1,
            )
            assert commit_calls == [], "written by the network thread"
            assert core.committed() == (taken[0] + 3, taken[1] + 3)

            # Kafka's refusals: none judged takeable.
            before = consumer_view.commits_takeable, classic_view.commits_takeable
            assert commit(a.client, "mixed", a.member_id, a.epoch + 1) == STALE_MEMBER_EPOCH
            assert commit(a.client, "mixed", a.member_id, a.epoch, version=8) == UNSUPPORTED_VERSION
            assert commit(a.client, "mixed", "ghost", a.epoch) == UNKNOWN_MEMBER_ID
            assert (
                commit(x.client, "mixed", x.member_id, x.generation + 1, version=8)
                == ILLEGAL_GENERATION
            )
            assert (
                commit(y.client, "plain", y.member_id, y.generation - 1, version=8)
                == ILLEGAL_GENERATION
            )
            assert (
                commit(
                    y.client, "plain", y.member_id, y.generation, version=8, instance_id="nobody"
                )
                == UNKNOWN_MEMBER_ID
            )
            # A rebalance of the classic group: z's join completes the phase once y rejoins;
            # until the leader syncs, the group is CompletingRebalance.
            with RawClient(broker.port) as z:
                body = {
                    "group_id": "plain",
                    "session_timeout_ms": 10000,
                    "rebalance_timeout_ms": 10000,
                    "member_id": "",
                    "group_instance_id": None,
                    "protocol_type": "consumer",
                    "protocols": [
                        {
                            "name": "range",
                            "metadata": _core.encode_consumer_subscription(3, ["t"], [], -1),
                        }
                    ],
                    "reason": None,
                }
                body["member_id"] = z.call(ApiKey.JOIN_GROUP, 9, body)["member_id"]
                z.send(ApiKey.JOIN_GROUP, 9, body)  # parked: PreparingRebalance
                time.sleep(0.2)
                assert y.join() == 0  # everyone joined: CompletingRebalance
                assert (
                    commit(y.client, "plain", y.member_id, y.generation, version=8)
                    == REBALANCE_IN_PROGRESS
                )
            assert (consumer_view.commits_takeable, classic_view.commits_takeable) == before
            assert len(commit_calls) == 7, "every refusal is Python's"
            assert core.committed() == (taken[0] + 3, taken[1] + 3)
            assert fetched(a.client, "mixed") == 8

    with_broker(tmp_path, scenario, **{"group.initial.rebalance.delay.ms": 0})


def test_librdkafka_commits_are_taken_by_the_network_thread(tmp_path, commit_calls):
    confluent_kafka = pytest.importorskip("confluent_kafka")

    def scenario(broker) -> None:
        with RawClient(broker.port) as client:
            create_topic(client, "t", 4)
        common = {
            "bootstrap.servers": f"127.0.0.1:{broker.port}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
        modern = confluent_kafka.Consumer(
            {**common, "group.id": "rd-consumer", "group.protocol": "consumer"}
        )
        classic = confluent_kafka.Consumer(
            {**common, "group.id": "rd-classic", "group.protocol": "classic"}
        )
        consumers = [modern, classic]
        try:
            for consumer in consumers:
                consumer.subscribe(["t"])
            deadline = time.monotonic() + 30
            while not all(c.assignment() for c in consumers):
                assert time.monotonic() < deadline, "no assignment"
                for c in consumers:
                    c.poll(0.1)
            for c in consumers:
                c.poll(1.0)
            before = broker.view.commits_takeable, broker.groups.heartbeat_view.commits_takeable
            taken, python = broker.groups.writer.core_commits.committed()[0], len(commit_calls)
            for i in range(10):
                for c in consumers:
                    partition = c.assignment()[0]
                    c.commit(
                        offsets=[confluent_kafka.TopicPartition("t", partition.partition, i)],
                        asynchronous=False,
                    )
            assert broker.view.commits_takeable - before[0] == 10
            assert broker.groups.heartbeat_view.commits_takeable - before[1] == 10
            assert broker.groups.writer.core_commits.committed()[0] - taken == 20
            assert len(commit_calls) == python
            for c in consumers:
                partition = c.assignment()[0].partition
                assert c.committed([confluent_kafka.TopicPartition("t", partition)])[0].offset == 9
        finally:
            for consumer in consumers:
                consumer.close()

    with_broker(tmp_path, scenario, **{"group.initial.rebalance.delay.ms": 0})
