"""Fault injection (docs/faults.md) against a real corral, with Java kafka-clients 4.4 doing what
Kafka's documentation says it does about each fault: a commitSync retried after
COORDINATOR_LOAD_IN_PROGRESS, an idempotent producer retrying a produce answered
NOT_LEADER_OR_FOLLOWER and delivering once, a consumer group finding its coordinator again after
NOT_COORDINATOR (classic and KIP-848 members), a Fetch delay seen in the consumer's own
fetch-latency metrics. The clients are tests/clients/java/FaultClients.java and the group member
tests/clients/java/ConsumerGroupMember.java, compiled once into the jar cache
(tests/kits/kafka_java.py); the scenario of the group tests is tests/kits/faultkit.py's.
The confluent-kafka twin: tests/clients/python/test_faults.py; franz-go's:
tests/clients/go/test_faults_go.py.
"""

from __future__ import annotations

import pytest
from cgkit import committed, create_topics, produce
from faultkit import coordinator_moves, faults_of, requests, start_broker
from kafka_java import fault_clients
from scraper import Scraper


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    broker = start_broker(tmp_path_factory.mktemp("faults-java"))
    yield broker
    broker.stop()


@pytest.fixture
def faults(broker):
    faults = faults_of(broker)
    yield faults
    faults.clear()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_commit_sync_retries_coordinator_load_in_progress(broker, faults, protocol):
    """KafkaConsumer.commitSync "will retry until the commit succeeds or an unrecoverable error
    is encountered" (its javadoc), and COORDINATOR_LOAD_IN_PROGRESS is retriable (Kafka's
    Errors: CoordinatorLoadInProgressException extends RetriableException). The next two
    OffsetCommits of the group are answered with it: commitSync returns normally, the third
    attempt commits, and the offset is there for another client to read. Both the classic
    consumer (ConsumerCoordinator) and the KIP-848 one (CommitRequestManager)."""
    topic = group = f"commit-{protocol}"
    create_topics(broker.bootstrap, {topic: 1})
    produce(broker.bootstrap, {topic: 1}, 3)
    fault_id = faults.add(
        api="OffsetCommit", group=group, error="COORDINATOR_LOAD_IN_PROGRESS", count=2
    )
    answer = fault_clients(
        "commit",
        {
            "bootstrap": broker.bootstrap,
            "topic": topic,
            "group": group,
            "protocol": protocol,
            "count": 3,
        },
    )
    assert "error" not in answer, answer
    assert answer["consumed"] == 3
    assert answer["committed"] == {"0": 3}
    fault = faults.get(fault_id)
    assert (fault["fired"], fault["active"], fault["ended"]) == (2, False, "count"), fault
    assert committed(broker.bootstrap, group, [(topic, 0)]) == {(topic, 0): 3}


@pytest.mark.parametrize("warm_up", [False, True], ids=["one-batch", "batches-in-flight"])
def test_idempotent_producer_retries_not_leader_and_delivers_once(broker, faults, warm_up):
    """KafkaProducer with acks=all and enable.idempotence=true: NOT_LEADER_OR_FOLLOWER is a
    retriable error (NotLeaderOrFollowerException extends InvalidMetadataException: the producer
    refreshes its metadata and retries, `retries` defaulting to Integer.MAX_VALUE within
    delivery.timeout.ms), and idempotence "ensures that exactly one copy of each message is
    written in the stream" (the `enable.idempotence` documentation), in order. The next Produce
    to the partition is answered with it; every record is acknowledged, at consecutive offsets,
    and read back exactly once, in order. Either the producer's first batch (all the records),
    or, after a record acknowledged, the first batch of records sent as they come (linger.ms=0:
    most runs put them in several batches in flight, and the later ones are then refused
    OUT_OF_ORDER_SEQUENCE_NUMBER, a gap in the sequence as Kafka's ProducerStateManager refuses
    it, and sent again in order).

    Not tested, because Kafka does the same: the fault on the first of several batches in
    flight of a producer the partition does not know yet. The later batch is then appended
    (an unknown producer's batch is taken at any sequence, Kafka's checkSequence and
    rust/log/producers.rs alike), so the retried first one is refused OUT_OF_ORDER_SEQUENCE_NUMBER
    for good and the producer retries it until delivery.timeout.ms."""
    topic = f"not-leader-{'warm' if warm_up else 'fresh'}"
    create_topics(broker.bootstrap, {topic: 2})
    ids = []

    def fault(_warmed=None) -> None:
        ids.append(
            faults.add(
                api="Produce", topic=topic, partition=1, error="NOT_LEADER_OR_FOLLOWER", count=1
            )
        )

    config = {"bootstrap": broker.bootstrap, "topic": topic, "partition": 1, "count": 10}
    if warm_up:
        answer = fault_clients("produce", {**config, "warm_up": True}, between=fault)
    else:
        fault()
        answer = fault_clients("produce", config)
    assert "error" not in answer, answer
    assert faults.get(ids[0])["fired"] == 1
    assert answer["retried"] >= 1, answer
    values = [f"v{i}" for i in range(10)]
    if warm_up:
        values = ["warm", *values]
    assert answer["acked"] == list(range(len(values))), answer
    assert answer["read"] == values, answer


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_group_finds_its_coordinator_again_after_not_coordinator(broker, protocol):
    """NOT_COORDINATOR tells a client that the broker is no longer the group's coordinator: the
    Java consumer marks the coordinator unknown, looks it up again with FindCoordinator and
    retries (AbstractCoordinator for the classic protocol's Heartbeat, JoinGroup, SyncGroup and
    OffsetCommit; the KIP-848 consumer's CoordinatorRequestManager for ConsumerGroupHeartbeat
    and OffsetCommit). Two members consume while each one's heartbeat and commit are answered
    NOT_COORDINATOR once: each sends a FindCoordinator of its own afterwards (counted per client
    id) and goes on; then a third joins while the join's requests are answered NOT_COORDINATOR
    twice. Nothing is lost or read twice, nothing surfaces to the application, the group settles
    with every partition owned once, and no partition is ever owned by two members at once
    (tests/kits/ownership.py)."""
    seen = coordinator_moves(broker, "java", protocol)
    assert seen["errors"] == {}
    # c looked the coordinator up too (at least once to join; again after a NOT_COORDINATOR).
    assert seen["lookups"]["c"][2] >= 1, seen


def test_a_fetch_delay_shows_in_the_consumer_fetch_latency(broker, faults):
    """The consumer's fetch-latency-avg and -max metrics (consumer-fetch-manager-metrics: "the
    average/max time taken for a fetch request") measure a Fetch from send to response: a
    consumer whose every Fetch corral answers 1 s late reports at least that, and its first
    record comes at least that late; one without the fault, on the same broker, reports far
    less (fetch.max.wait.ms is 50)."""
    topic = "slow-fetch"
    create_topics(broker.bootstrap, {topic: 1})
    produce(broker.bootstrap, {topic: 1}, 3)
    scraper = Scraper(broker)
    fault_id = faults.add(api="Fetch", client_id="delayed", delay_ms=1000)
    config = {"bootstrap": broker.bootstrap, "topic": topic, "count": 3, "fetches": 3}
    fast = fault_clients("fetch-latency", {**config, "client_id": "prompt"})
    before = requests(scraper, "Fetch")
    slow = fault_clients("fetch-latency", {**config, "client_id": "delayed"})
    assert "error" not in fast and "error" not in slow, (fast, slow)
    assert fast["records"] == slow["records"] == 3
    fired = faults.get(fault_id)["fired"]
    assert fired >= slow["fetches"] >= 3 and requests(scraper, "Fetch") - before >= fired
    assert slow["fetch_latency_avg"] >= 1000 and slow["fetch_latency_max"] >= 1000, slow
    assert slow["first_record_ms"] >= 1000, slow
    # (Not its first record's time: a fresh JVM's first poll can take 600 ms of its own.)
    assert fast["fetch_latency_max"] < 500, fast
