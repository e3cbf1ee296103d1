"""Fault injection (docs/faults.md) against a real corral, with confluent-kafka doing what Kafka's
documentation says a client does about each fault: a commit retried after
COORDINATOR_LOAD_IN_PROGRESS, a produce retried after NOT_LEADER_OR_FOLLOWER (once delivered,
idempotent or not), a delay seen in the latency, a closed connection reconnected, a classic
consumer rejoining after a heartbeat answered REBALANCE_IN_PROGRESS although the network thread
answers its heartbeats; the API refused unless enabled and, with ACLs, without cluster ALTER;
/metrics counting what fired."""

from __future__ import annotations

import time
import uuid

import pytest
from cgkit import FAST_GROUPS, wait_until
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from faultkit import faults_cli, faults_of
from rawwire import RawClient
from scramkit import upsertion
from scraper import Scraper

from corral.errors import ErrorCode
from corral.faults.client import FaultsApiError
from corral.network.apis import ApiKey

ENABLED = {"corral.faults.enable": "true", "corral.faults.listen": "127.0.0.1:0"}


def create_topic(broker, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=10)


def produce(broker, topic: str, values: list[bytes], **config) -> float:
    """Produces and waits for every delivery; returns the seconds it took (fails on an error)."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", **config})
    errors = []
    start = time.monotonic()
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(30) == 0, "every record delivered"
    took = time.monotonic() - start
    assert not errors, errors
    return took


def consume_all(broker, topic: str, expected: int, timeout: float = 20) -> list[bytes]:
    """Every record of `topic` from the start, read until `expected` came and 1 s more passed."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    quiet_until = None
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
            if len(values) >= expected and quiet_until is None:
                quiet_until = time.monotonic() + 1.0
            if quiet_until is not None and time.monotonic() > quiet_until:
                break
    finally:
        consumer.close()
    return values


@pytest.fixture
def broker(corral_factory):
    return corral_factory(**FAST_GROUPS, **ENABLED, **{"corral.metrics.listen": "127.0.0.1:0"})


def test_a_commit_answered_load_in_progress_is_retried(broker):
    create_topic(broker, "commits")
    produce(broker, "commits", [b"a", b"b", b"c"])
    faults = faults_of(broker)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "committer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )
    consumer.subscribe(["commits"])
    try:
        seen = []
        deadline = time.monotonic() + 20
        while len(seen) < 3 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                seen.append(msg.offset())
        assert seen == [0, 1, 2]
        fault_id = faults.add(
            api="OffsetCommit", group="committer", error="COORDINATOR_LOAD_IN_PROGRESS", count=2
        )
        committed = consumer.commit(asynchronous=False)
        assert [(tp.topic, tp.partition, tp.offset) for tp in committed] == [("commits", 0, 3)]
        fault = faults.get(fault_id)
        assert (fault["fired"], fault["active"], fault["ended"]) == (2, False, "count")
        # The third attempt was handled: the commit is there, for this and any other client.
        [tp] = consumer.committed([TopicPartition("commits", 0)], timeout=10)
        assert tp.offset == 3
    finally:
        consumer.close()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("committer")])
    offsets = listed["committer"].result(timeout=10).topic_partitions
    assert [(tp.topic, tp.partition, tp.offset) for tp in offsets] == [("commits", 0, 3)]


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
def test_a_produce_answered_not_leader_is_retried_and_delivered_once(broker, idempotent):
    topic = f"orders-{idempotent}"
    create_topic(broker, topic, partitions=2)
    faults = faults_of(broker)
    fault_id = faults.add(
        api="Produce", topic=topic, partition=1, error="NOT_LEADER_OR_FOLLOWER", count=1
    )
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "acks": "all",
            "enable.idempotence": idempotent,
            "retry.backoff.ms": 50,
        }
    )
    delivered = []
    producer.produce(
        topic,
        b"once",
        partition=1,
        on_delivery=lambda err, msg: delivered.append((err, msg.partition(), msg.offset())),
    )
    assert producer.flush(30) == 0
    assert delivered == [(None, 1, 0)]
    assert faults.get(fault_id)["fired"] == 1
    assert consume_all(broker, topic, 1) == [b"once"]


def test_a_delay_shows_in_the_latency(broker):
    create_topic(broker, "slow")
    faults = faults_of(broker)
    produce(broker, "slow", [b"warm-up"])
    baseline = produce(broker, "slow", [b"fast"])
    faults.add(api="Produce", topic="slow", delay_ms=800, count=1)
    delayed = produce(broker, "slow", [b"slow"])
    assert delayed >= 0.8 > baseline + 0.3, (baseline, delayed)
    # A random delay within its range, drawn from the seed.
    faults.add(api="Metadata", delay_ms=[300, 400], count=1, seed=5)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    start = time.monotonic()
    admin.list_topics(timeout=10)
    assert time.monotonic() - start >= 0.3
    assert consume_all(broker, "slow", 3) == [b"warm-up", b"fast", b"slow"]


def test_a_hold_keeps_the_answer_until_released_and_others_are_served(broker):
    faults = faults_of(broker)
    fault_id = faults.add(api="ListGroups", client_id="rawwire", hold=True)
    with RawClient(broker.port) as held, RawClient(broker.port) as other:
        held.send(ApiKey.LIST_GROUPS, 4, {})
        held.sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            held.receive(ApiKey.LIST_GROUPS, 4)
        # The dispatch goes on: another connection, another API, answered at once.
        start = time.monotonic()
        assert other.call(ApiKey.METADATA, 12, {"topics": []})["brokers"]
        assert time.monotonic() - start < 0.5
        assert faults.list()[0]["fired"] == 1
        assert faults.release(fault_id) == 1
        held.sock.settimeout(10)
        assert held.receive(ApiKey.LIST_GROUPS, 4)[1]["error_code"] == ErrorCode.NONE
        # Still active: the next one is held too, and removing the fault lets it go.
        held.send(ApiKey.LIST_GROUPS, 4, {})
        time.sleep(0.3)
        faults.remove(fault_id)
        assert held.receive(ApiKey.LIST_GROUPS, 4)[1]["error_code"] == ErrorCode.NONE


def test_close_after_n_closes_the_connection_and_the_client_reconnects(broker):
    faults = faults_of(broker)
    # Raw: the second matching request of the connection closes it, unanswered.
    faults.add(api="Metadata", client_id="rawwire", close_after=2, count=1)
    with RawClient(broker.port) as raw:
        assert raw.call(ApiKey.METADATA, 12, {"topics": []})["brokers"]
        raw.send(ApiKey.METADATA, 12, {"topics": []})
        with pytest.raises((ConnectionError, OSError)):
            raw.receive(ApiKey.METADATA, 12)
    with RawClient(broker.port) as raw:  # the fault is done: a new connection is served
        assert raw.call(ApiKey.METADATA, 12, {"topics": []})["brokers"]
    # A real producer whose produce request is dropped with its connection reconnects and
    # delivers the record, once.
    create_topic(broker, "dropped")
    fault_id = faults.add(api="Produce", client_id="closer", close_after=1, count=1)
    produce(broker, "dropped", [b"survivor"], **{"client.id": "closer"})
    assert faults.get(fault_id)["fired"] == 1
    assert consume_all(broker, "dropped", 1) == [b"survivor"]


def heartbeats(scraper: Scraper) -> float:
    """Heartbeat requests received, every version."""
    return sum(
        value
        for (name, labels), value in scraper.samples().items()
        if name == "kafka_network_requests_total" and ("request", "Heartbeat") in labels
    )


def test_a_heartbeat_fault_reaches_a_consumer_whose_heartbeats_the_network_thread_answers(
    broker,
):
    create_topic(broker, "beats", partitions=2)
    scraper = Scraper(broker)
    faults = faults_of(broker)
    assigned: list[list[int]] = []
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "beating",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 200,
            "partition.assignment.strategy": "range",
        }
    )
    consumer.subscribe(
        ["beats"], on_assign=lambda c, parts: assigned.append(sorted(p.partition for p in parts))
    )
    try:
        wait_until(lambda: consumer.poll(0.1) is None and assigned == [[0, 1]], 20, "assigned")
        # Steady heartbeats, answered by the network thread (rust/short_paths/heartbeat.rs).
        before = heartbeats(scraper)
        time.sleep(1.0)
        assert heartbeats(scraper) > before
        fault_id = faults.add(
            api="Heartbeat", group="beating", error="REBALANCE_IN_PROGRESS", count=1
        )
        wait_until(
            lambda: consumer.poll(0.1) is None and len(assigned) >= 2,
            20,
            "a rejoin after the fault",
        )
        assert assigned[-1] == [0, 1]
        assert faults.get(fault_id)["fired"] == 1
        assert (
            scraper.value(
                "kafka_network_errors_total", request="Heartbeat", error="REBALANCE_IN_PROGRESS"
            )
            >= 1
        )
    finally:
        consumer.close()


def test_metrics_count_fired_faults_and_the_short_paths_come_back(broker):
    scraper = Scraper(broker)
    faults = faults_of(broker)
    fault_id = faults.add(api="ListGroups", error="COORDINATOR_NOT_AVAILABLE", count=3)
    with RawClient(broker.port) as raw:
        for _ in range(3):
            body = raw.call(ApiKey.LIST_GROUPS, 4, {})
            assert body["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert raw.call(ApiKey.LIST_GROUPS, 4, {})["error_code"] == ErrorCode.NONE
    labels = {"fault": str(fault_id), "kind": "error"}
    assert scraper.value("corral_faults_fired_total", **labels) == 3
    assert scraper.value("corral_faults_matched_total", **labels) == 3
    assert scraper.value("corral_faults_fired_by_kind_total", kind="error") == 3
    assert scraper.value("corral_faults_active") == 0
    # A fault with a duration ends on time with no request to notice it.
    faults.add(api="ListGroups", error="NOT_COORDINATOR", duration_ms=300)
    assert scraper.value("corral_faults_active") == 1
    wait_until(lambda: scraper.value("corral_faults_active") == 0, 5, "the fault's end")
    assert faults.list()[-1]["ended"] == "duration"
    assert (
        scraper.value(
            "kafka_network_errors_total", request="ListGroups", error="COORDINATOR_NOT_AVAILABLE"
        )
        == 3
    )
    # While a fault is active the network thread leaves every commit to Python; after, it takes
    # them again.
    create_topic(broker, "metered")
    produce(broker, "metered", [b"x"] * 10)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "metered",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["metered"])
    short = "corral_offset_commit_short_path_total"
    try:
        got = 0
        deadline = time.monotonic() + 20
        while got < 10 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got += 1
                consumer.commit(msg, asynchronous=False)
                if got == 5:
                    faults.add(api="CreateTopics", error="POLICY_VIOLATION")
        assert got == 10
        before = scraper.value(short)
        for _ in range(3):
            consumer.commit(offsets=[TopicPartition("metered", 0, 10)], asynchronous=False)
        assert scraper.value(short) == before  # a fault is active: Python wrote them
        assert scraper.value("corral_faults_active") == 1
        faults.clear()
        for _ in range(3):
            consumer.commit(offsets=[TopicPartition("metered", 0, 10)], asynchronous=False)
        assert scraper.value(short) == before + 3
    finally:
        consumer.close()


def test_the_api_is_refused_unless_enabled(corral_factory):
    broker = corral_factory(**{"corral.faults.listen": "127.0.0.1:0"})
    faults = faults_of(broker)
    for call in (faults.list, lambda: faults.add(error="NOT_COORDINATOR"), faults.clear):
        with pytest.raises(FaultsApiError) as refused:
            call()
        assert refused.value.status == 403
        assert "corral.faults.enable" in refused.value.reason


STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
CREATE_ACLS, ALTER_SCRAM = 30, 51
CLUSTER, LITERAL, ALTER, DESCRIBE, ALLOW = 4, 3, 7, 8, 3


def test_with_acls_only_a_principal_with_cluster_alter_may_use_it(corral_factory):
    broker = corral_factory(
        **ENABLED,
        **{"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS"},
    )
    with RawClient(broker.port) as admin:
        users = [
            upsertion("alice", "SCRAM-SHA-256", "alice-secret"),
            upsertion("bob", "SCRAM-SHA-512", "bob-secret"),
        ]
        scram = admin.call(ALTER_SCRAM, 0, {"deletions": [], "upsertions": users})
        assert {r["error_code"] for r in scram["results"]} == {0}, scram

        def acl(principal: str, operation: int) -> dict:
            return {
                "resource_type": CLUSTER,
                "resource_name": "kafka-cluster",
                "resource_pattern_type": LITERAL,
                "principal": principal,
                "host": "*",
                "operation": operation,
                "permission_type": ALLOW,
            }

        created = admin.call(
            CREATE_ACLS, 3, {"creations": [acl("User:alice", ALTER), acl("User:bob", DESCRIBE)]}
        )
        assert {r["error_code"] for r in created["results"]} == {0}, created
    refusals = [
        ({}, 401),  # no credentials
        ({"user": "alice", "password": "wrong"}, 401),
        ({"user": "mallory", "password": "x"}, 401),  # a user the broker does not know
        ({"user": "bob", "password": "bob-secret"}, 403),  # DESCRIBE is not ALTER
    ]
    for auth, status in refusals:
        with pytest.raises(FaultsApiError) as refused:
            faults_of(broker, **auth).list()
        assert refused.value.status == status, (auth, refused.value)
    alice = faults_of(broker, user="alice", password="alice-secret")
    fault_id = alice.add(api="ListGroups", error="NOT_COORDINATOR")
    assert [f["id"] for f in alice.list()] == [fault_id]
    assert alice.clear() == 1


def test_the_cli(broker):
    url = faults_of(broker).url

    def corral_faults(*args: str) -> tuple[int, object, str]:
        return faults_cli(url, *args)

    code, added, _ = corral_faults(
        "add", "--api", "Fetch", "--delay-ms", "100-300", "--probability", "0.5", "--seed", "7"
    )
    assert code == 0 and added["fault"]["delay_ms"] == [100, 300] and added["fault"]["seed"] == 7
    code, held, _ = corral_faults("add", "--api", "JoinGroup", "--group", "orders", "--hold")
    assert code == 0 and held["fault"]["hold"] is True
    code, listed, _ = corral_faults("list")
    assert [f["id"] for f in listed] == [added["id"], held["id"]]
    assert corral_faults("release", str(held["id"]))[:2] == (0, {"released": 0})
    assert corral_faults("remove", str(added["id"]))[:2] == (0, {"removed": added["id"]})
    code, _, err = corral_faults("release", str(added["id"]))
    assert code == 1 and "404" in err
    code, _, err = corral_faults("add", "--error", "NOT_AN_ERROR")
    assert code == 1 and "400" in err and "NOT_AN_ERROR" in err
    assert corral_faults("clear")[:2] == (0, {"removed": 1})
