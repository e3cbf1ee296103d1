"""Fault injection (docs/faults.md) against a real corral, with franz-go (kgo) doing what its
documentation and Kafka's say a client does about each fault: a CommitOffsetsSync retried after
COORDINATOR_LOAD_IN_PROGRESS, the idempotent producer retrying a produce answered
NOT_LEADER_OR_FOLLOWER and delivering once, a consumer group (classic and KIP-848) finding its
coordinator again after NOT_COORDINATOR. The clients are tests/clients/go/franz.go (built by
tests/kits/polyglot.py); the group scenario is tests/kits/faultkit.py's. The confluent-kafka
twin: tests/clients/python/test_faults.py; Java's: tests/clients/java/test_faults_java.py.
"""

from __future__ import annotations

import time

import pytest
from cgkit import committed, create_topics, produce
from confluent_kafka import Consumer, TopicPartition
from faultkit import coordinator_moves, faults_of, start_broker
from polyglot import commit
from polyglot import produce as client_produce


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    broker = start_broker(tmp_path_factory.mktemp("faults-go"))
    yield broker
    broker.stop()


@pytest.fixture
def faults(broker):
    faults = faults_of(broker)
    yield faults
    faults.clear()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_commit_offsets_sync_retries_coordinator_load_in_progress(broker, faults, protocol):
    """franz-go retries a group request answered with a retriable error (kerr marks
    COORDINATOR_LOAD_IN_PROGRESS retriable, as Kafka's protocol guide does; the client forgets the
    coordinator and issues the request again, up to RequestRetries): the next two OffsetCommits
    of the group are answered with it, CommitOffsetsSync's callback sees the third answer, with
    no error, and the offset is there for another client to read."""
    topic = group = f"commit-{protocol}"
    create_topics(broker.bootstrap, {topic: 1})
    produce(broker.bootstrap, {topic: 1}, 3)
    fault_id = faults.add(
        api="OffsetCommit", group=group, error="COORDINATOR_LOAD_IN_PROGRESS", count=2
    )
    answer = commit(
        "franz-go",
        {
            "bootstrap": broker.bootstrap,
            "group": group,
            "topics": [topic],
            "count": 3,
            "protocol": protocol,
        },
    )
    assert "error" not in answer, answer
    assert (answer["consumed"], answer["commit_error"], answer["committed"]) == (3, "", {"0": 3})
    fault = faults.get(fault_id)
    assert (fault["fired"], fault["active"], fault["ended"]) == (2, False, "count"), fault
    assert committed(broker.bootstrap, group, [(topic, 0)]) == {(topic, 0): 3}


def read_values(bootstrap: str, topic: str, partitions: int, expected: int) -> list[bytes]:
    """Every record of `topic` from the start (assigned, no group), until `expected` came."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while len(values) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
        # Anything more (a duplicate) would be there by now: the end offsets say.
        ends = [
            consumer.get_watermark_offsets(TopicPartition(topic, p))[1] for p in range(partitions)
        ]
    finally:
        consumer.close()
    assert sum(ends) == len(values), (ends, len(values))
    return values


def test_idempotent_producer_retries_not_leader_and_delivers_once(broker, faults):
    """franz-go's producer (idempotent by default) treats NOT_LEADER_OR_FOLLOWER as retriable:
    it refreshes its metadata and produces the batch again with the same producer id, epoch and
    sequence numbers, so the records are written once (Kafka's idempotence guarantee, which the
    broker keeps by sequence). The first Produce to the topic is answered with it; every record
    is acknowledged and read back exactly once, in order."""
    topic, count = "not-leader", 20
    create_topics(broker.bootstrap, {topic: 1})
    fault_id = faults.add(
        api="Produce", topic=topic, partition=0, error="NOT_LEADER_OR_FOLLOWER", count=1
    )
    answer = client_produce(
        "franz-go", {"bootstrap": broker.bootstrap, "topic": topic, "count": count}
    )
    assert answer == {"produced": count}, answer
    assert faults.get(fault_id)["fired"] == 1
    values = read_values(broker.bootstrap, topic, 1, count)
    assert values == [f"franz {i}".encode() for i in range(count)]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_group_finds_its_coordinator_again_after_not_coordinator(broker, protocol):
    """NOT_COORDINATOR means the broker is not (or no longer) the group's coordinator: franz-go
    forgets the coordinator it cached (maybeDeleteStaleCoordinator), asks FindCoordinator again
    and retries the request, for the classic protocol's Heartbeat, JoinGroup, SyncGroup and
    OffsetCommit and for KIP-848's ConsumerGroupHeartbeat. Two members consume while each one's
    heartbeat and commit are answered NOT_COORDINATOR once: each sends a FindCoordinator of its
    own afterwards (counted per client id) and goes on; then a third joins while the join's
    requests are answered NOT_COORDINATOR twice. Nothing is lost or read twice, nothing
    surfaces to the application, the group settles with every partition owned once, and no
    partition is ever owned by two members at once (tests/kits/ownership.py)."""
    seen = coordinator_moves(broker, "franz-go", protocol)
    assert seen["errors"] == {}
    # c looked the coordinator up too (at least once to join; again after a NOT_COORDINATOR).
    assert seen["lookups"]["c"][2] >= 1, seen
