"""Faults on the broker (docs/faults.md) against a real corral, with confluent-kafka doing what
Kafka's documentation says a client does about each: a fenced KIP-848 member rejoins and the
group consumes on, no partition ever owned twice; a classic member whose session expired rejoins;
a forced rebalance reaches a classic consumer's on_assign; a consumer finds its coordinator again
after its shard moved (answered NOT_COORDINATOR, then really unloaded and reloaded) and commits;
a target assignment set by hand is what the members own; a producer retries KAFKA_STORAGE_ERROR
while the disk is full and delivers once it is not; failing fsyncs then kill -9 lose no
acknowledged record or commit; refused connections fail a client's first connect, which succeeds
once the refusal is over."""

from __future__ import annotations

import copy
import json
import socket
import time
from typing import Any

import pytest
from cgkit import FAST_GROUPS, MemberProcess, stop_processes, wait_stable, wait_until
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from faultkit import faults_cli
from ownership import CgMember, all_partitions, check_ownership
from raw_groups import describe, describe_groups_raw
from rawwire import RawClient, closed_within
from scraper import Scraper
from test_faults import ENABLED, consume_all, create_topic, faults_of, produce

from corral.errors import ErrorCode
from corral.faults.client import FaultsApiError
from corral.network.apis import ApiKey


@pytest.fixture
def broker(corral_factory):
    return corral_factory(**FAST_GROUPS, **ENABLED, **{"corral.metrics.listen": "127.0.0.1:0"})


@pytest.fixture
def processes():
    started: list[MemberProcess] = []
    yield started
    stop_processes(started)


def members(broker, processes, group, topic, names, **config) -> MemberProcess:
    process = MemberProcess("confluent", broker.bootstrap, group, names, [topic], **config)
    processes.append(process)
    return process


def consumed(process: MemberProcess) -> set[tuple[str, int, int]]:
    with process.lock:
        return {r for m in process.members.values() for r in m.records}


def member_ids(broker, group: str) -> dict[str, str]:
    """A consumer group's members: client id -> member id."""
    return {m["client_id"]: m["member_id"] for m in describe(broker.bootstrap, group)["members"]}


def fenced(member: CgMember, at_ns: int) -> CgMember:
    """The member as the invariant sees it once fenced (or its session expired) at `at_ns`: from
    then on it owns nothing, until it has heard of it (the callback that leaves it owning
    nothing: "lost") and rejoined. Kafka gives a fenced member's partitions to the others at
    once, as at a session timeout; what the client still believes it owns until its next
    heartbeat is lost, not owned (its commits are refused)."""
    heard = next((t for t, owned in member.timeline if t > at_ns and not owned), None)
    assert heard is not None, f"{member} never heard it was fenced"
    view = copy.copy(member)
    view.timeline = sorted(
        [(t, owned) for t, owned in member.timeline if not at_ns <= t <= heard]
        + [(at_ns, frozenset())]
    )
    return view


def test_a_fenced_consumer_member_rejoins_and_consumption_goes_on(broker, processes):
    create_topic(broker, "fenced", 4)
    produce(broker, "fenced", [b"%d" % i for i in range(40)])
    group = members(broker, processes, "fence-g", "fenced", ["a", "b"], protocol="consumer")
    parts = all_partitions({"fenced": 4})
    wait_stable(broker.bootstrap, "fence-g", [group], parts)
    check_ownership(group.members.values())
    faults = faults_of(broker)
    member_a = member_ids(broker, "fence-g")["a"]
    fenced_at = time.monotonic_ns()
    fault_id = faults.fence("fence-g", member_a)
    fault = faults.get(fault_id)
    assert (fault["fence"], fault["fired"], fault["active"], fault["ended"]) == (
        True,
        1,
        False,
        "done",
    )
    # The fenced member hears it at its next heartbeat, loses its partitions and rejoins.
    wait_until(lambda: "lost" in group["a"].whys, 20, "member a told it is fenced")
    checked = [fenced(group["a"], fenced_at), group["b"]]

    def settled() -> bool:
        check_ownership([fenced(group["a"], fenced_at), group["b"]])
        owned = [tp for m in group.members.values() for tp in m.owned]
        return sorted(owned) == sorted(parts) and all(m.owned for m in group.members.values())

    wait_until(settled, 30, "both members own partitions again")
    produce(broker, "fenced", [b"%d" % i for i in range(40, 80)])
    wait_until(lambda: len({r[1:] for r in consumed(group)}) == 80, 30, "every record consumed")
    checked = [fenced(group["a"], fenced_at), group["b"]]
    assert check_ownership(checked) >= 5
    assert member_ids(broker, "fence-g")["a"] == member_a, "rejoined with its member id"
    assert f"member {member_a} of group fence-g fenced" in broker.log()


def test_an_expired_classic_member_rejoins(broker, processes):
    create_topic(broker, "expired", 2)
    group = members(
        broker, processes, "expire-g", "expired", ["a", "b"], protocol="classic", commit=False
    )
    parts = all_partitions({"expired": 2})

    def settled() -> bool:
        g = describe_groups_raw(broker.bootstrap, "expire-g")
        mine = [m.owned for m in group.members.values()]
        return g["group_state"] == "Stable" and len(g["members"]) == 2 and all(mine)

    wait_until(settled, 30, "each member owns a partition")
    before = describe_groups_raw(broker.bootstrap, "expire-g")
    old = {m["client_id"]: m["member_id"] for m in before["members"]}
    faults = faults_of(broker)
    expired_at = time.monotonic_ns()
    faults.fence("expire-g", old["a"])
    wait_until(lambda: any(t > expired_at and not o for t, o in group["a"].timeline), 20, "heard")

    def rejoined() -> bool:
        g = describe_groups_raw(broker.bootstrap, "expire-g")
        now = {m["client_id"]: m["member_id"] for m in g["members"]}
        return g["group_state"] == "Stable" and set(now) == {"a", "b"} and now["a"] != old["a"]

    wait_until(rejoined, 30, "member a back with a new member id")
    wait_until(
        lambda: (
            {tp for m in group.members.values() for tp in m.owned} == parts
            and all(m.owned for m in group.members.values())
        ),
        30,
        "both members own a partition again",
    )
    assert check_ownership([fenced(group["a"], expired_at), group["b"]]) >= 4


def test_a_forced_rebalance_reaches_a_classic_consumer(broker, processes):
    create_topic(broker, "forced", 2)
    group = members(broker, processes, "force-g", "forced", ["a"], protocol="classic", commit=False)
    wait_until(lambda: len(group["a"].owned) == 2, 30, "assigned")
    assigns = group["a"].whys.count("assigned")
    faults_of(broker).rebalance("force-g")
    # Eager (range): the whole assignment is revoked, then given again: on_assign once more.
    wait_until(lambda: group["a"].whys.count("assigned") > assigns, 20, "on_assign again")
    assert "revoked" in group["a"].whys
    wait_until(lambda: len(group["a"].owned) == 2, 20, "assigned again")


def test_unknown_group_member_and_bad_target_are_refused_with_kafkas_error(broker, processes):
    faults = faults_of(broker)
    with pytest.raises(FaultsApiError) as e:
        faults.fence("no-such-group", "m")
    assert (e.value.status, e.value.kafka_error) == (404, "GROUP_ID_NOT_FOUND")
    create_topic(broker, "refusals", 2)
    group = members(broker, processes, "refused-g", "refusals", ["a"], protocol="consumer")
    wait_stable(broker.bootstrap, "refused-g", [group], all_partitions({"refusals": 2}))
    with pytest.raises(FaultsApiError) as e:
        faults.fence("refused-g", "no-such-member")
    assert (e.value.status, e.value.kafka_error) == (404, "UNKNOWN_MEMBER_ID")
    member = member_ids(broker, "refused-g")["a"]
    with pytest.raises(FaultsApiError) as e:
        faults.set_target("refused-g", {member: {"refusals": [0, 7]}})
    assert (e.value.status, e.value.kafka_error) == (400, "UNKNOWN_TOPIC_OR_PARTITION")
    with pytest.raises(FaultsApiError) as e:
        faults.add(fence=True, group="refused-g")
    assert e.value.status == 400 and "member" in e.value.reason
    # The shard of an unloaded group answers 503, as Kafka's coordinator would NOT_COORDINATOR.
    unload = faults.unload("refused-g")
    with pytest.raises(FaultsApiError) as e:
        faults.rebalance("refused-g")
    assert e.value.status == 503 and e.value.kafka_error in (
        "NOT_COORDINATOR",
        "COORDINATOR_LOAD_IN_PROGRESS",
    )
    faults.remove(unload)


def test_a_target_set_by_hand_is_what_the_members_own(broker, processes):
    create_topic(broker, "targeted", 4)
    group = members(broker, processes, "target-g", "targeted", ["a", "b"], protocol="consumer")
    parts = all_partitions({"targeted": 4})
    wait_stable(broker.bootstrap, "target-g", [group], parts)
    ids = member_ids(broker, "target-g")
    faults_of(broker).set_target(
        "target-g", {ids["a"]: {"targeted": [0, 1, 2]}, ids["b"]: {"targeted": [3]}}
    )
    wanted = {"a": {("targeted", p) for p in (0, 1, 2)}, "b": {("targeted", 3)}}
    view = wait_stable(broker.bootstrap, "target-g", [group], parts)
    wait_until(
        lambda: {n: set(m.owned) for n, m in group.members.items()} == wanted,
        20,
        "the members own the target set by hand",
    )
    view = describe(broker.bootstrap, "target-g")
    assert {m["client_id"]: set(m["assignment"]) for m in view["members"]} == wanted
    check_ownership(group.members.values())


def committer(broker, group: str, topic: str) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )
    consumer.subscribe([topic])
    deadline = time.monotonic() + 20
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.1)
    assert consumer.assignment(), "assigned"
    return consumer


def commit_until_done(consumer: Consumer, topic: str, offset: int, timeout: float) -> float:
    """Commits `offset` until the commit succeeds (polling between tries); the seconds it took."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            done = consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
            assert done[0].error is None
            return time.monotonic() - start
        except Exception:
            consumer.poll(0.1)
    raise AssertionError(f"commit of {offset} not done in {timeout}s")


def committed_offset(broker, group: str, topic: str) -> int:
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        return reader.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
    finally:
        reader.close()


def test_a_consumer_finds_its_coordinator_again_after_a_move(broker):
    create_topic(broker, "moved")
    produce(broker, "moved", [b"x"] * 5)
    faults = faults_of(broker)
    consumer = committer(broker, "move-g", "moved")
    try:
        commit_until_done(consumer, "moved", 1, 10)
        # (a) Its requests answered NOT_COORDINATOR for 2 s; FindCoordinator still answers.
        moved = faults.move_coordinator("move-g", "NOT_COORDINATOR", duration_ms=2000)
        assert [f["coordinator"] for f in faults.list() if f["active"]] == ["NOT_COORDINATOR"]
        with RawClient(broker.port) as raw:
            found = raw.call(
                ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["move-g"]}
            )
        assert found["coordinators"][0]["error_code"] == ErrorCode.NONE
        assert commit_until_done(consumer, "moved", 2, 20) > 1.0
        assert faults.get(moved)["fired"] >= 1
        # (b) Its coordinator shard really unloaded for 3 s, then loaded again.
        unloaded = faults.unload("move-g", duration_ms=3000)
        listed = faults.get(unloaded)
        assert (listed["unload"], listed["active"], listed["group"]) == (True, True, "move-g")
        took = commit_until_done(consumer, "moved", 3, 30)
        assert took > 1.0, "the commit waited for the shard to load again"
        wait_until(lambda: not faults.get(unloaded)["active"], 10, "unload fault over")
        assert faults.get(unloaded)["ended"] == "duration"
        commit_until_done(consumer, "moved", 4, 10)
        assert committed_offset(broker, "move-g", "moved") == 4
        assert "unloaded coordinator shard" in broker.log()
        assert "loaded coordinator shard" in broker.log()
    finally:
        consumer.close()


def test_a_producer_meets_a_full_disk_and_delivers_once_it_is_not(broker):
    create_topic(broker, "full")
    faults = faults_of(broker)
    fault_id = faults.storage(disk_full=True)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    delivered: list = []
    for i in range(5):
        producer.produce("full", b"%d" % i, on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(3)
    # KAFKA_STORAGE_ERROR is retriable: librdkafka keeps retrying, nothing is delivered yet.
    assert delivered == []
    fault = faults.get(fault_id)
    assert fault["active"] and fault["disk_full"] and fault["fired"] >= 1
    assert "KAFKA_STORAGE_ERROR" in broker.log()
    faults.remove(fault_id)
    assert producer.flush(30) == 0
    assert delivered == [None] * 5
    assert sorted(consume_all(broker, "full", 5)) == [b"%d" % i for i in range(5)]


def test_failing_fsyncs_then_kill_9_lose_nothing_acknowledged(broker):
    create_topic(broker, "durable")
    faults = faults_of(broker)
    fault_id = faults.storage(failing_fsyncs=3)
    acked: list[bytes] = []
    # Idempotent: a produce answered KAFKA_STORAGE_ERROR after its append (its fsync failed)
    # is retried without a duplicate.
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 0}
    )
    for i in range(50):
        producer.produce(
            "durable",
            b"%d" % i,
            on_delivery=lambda err, msg: err is None and acked.append(msg.value()),
        )
    assert producer.flush(30) == 0
    assert len(acked) == 50
    consumer = committer(broker, "durable-g", "durable")
    try:
        commit_until_done(consumer, "durable", 50, 20)
    finally:
        consumer.close()
    fault = faults.get(fault_id)
    assert fault["fired"] == 3 and (fault["active"], fault["ended"]) == (False, "count")
    broker.kill()
    broker.start()
    assert committed_offset(broker, "durable-g", "durable") == 50
    assert sorted(consume_all(broker, "durable", 50)) == sorted(acked)


def test_refused_connections_fail_the_first_connect_and_not_after(broker):
    faults = faults_of(broker)
    fault_id = faults.refuse_connections(duration_ms=3000)
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as s:
        assert closed_within(s, 1.0), "accepted and closed at once"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "reconnect.backoff.max.ms": 200})
    admin.list_topics(timeout=15)
    assert time.monotonic() - started >= 2.5, "the client got in only after the refusal"
    fault = faults.get(fault_id)
    assert fault["fired"] >= 2 and (fault["active"], fault["ended"]) == (False, "duration")
    # A listener that does not exist is refused.
    with pytest.raises(FaultsApiError) as e:
        faults.refuse_connections(1000, listener="NOPE")
    assert e.value.status == 400


def test_refused_connections_of_one_listener_only(corral_factory):
    broker = corral_factory(
        **ENABLED,
        listeners="PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
        **{
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
        },
    )
    faults = faults_of(broker)
    faults.refuse_connections(listener="OTHER")
    with socket.create_connection(("127.0.0.1", broker.ports["OTHER"]), timeout=5) as s:
        assert closed_within(s, 1.0)
    with RawClient(broker.ports["PLAINTEXT"]) as raw:
        assert raw.call(ApiKey.METADATA, 12, {"topics": []})["brokers"]
    faults.clear()
    with RawClient(broker.ports["OTHER"]) as raw:
        assert raw.call(ApiKey.METADATA, 12, {"topics": []})["brokers"]


def test_storage_and_refusals_show_in_the_listing_and_metrics(broker):
    faults = faults_of(broker)
    faults.storage(fsync_delay_ms=20, duration_ms=60000)
    create_topic(broker, "slow")
    assert produce(broker, "slow", [b"x"]) >= 0.02, "a flush pass 20 ms slower"
    faults.refuse_connections(duration_ms=60000)
    with pytest.raises(ConnectionError):
        with RawClient(broker.port) as raw:
            raw.call(ApiKey.METADATA, 12, {"topics": []})
    listed = [f for f in faults.list() if f["active"]]
    assert [f.get("fsync_delay_ms") for f in listed] == [20, None]
    assert [f.get("refuse_connections") for f in listed] == [None, True]
    scraper = Scraper(broker)
    assert scraper.value("corral_faults_fired_total", fault="2", kind="refuse") >= 1
    assert scraper.value("corral_faults_fired_by_kind_total", kind="storage") >= 1
    assert scraper.value("corral_faults_active") == 2
    faults.clear()
    with RawClient(broker.port) as raw:
        assert raw.call(ApiKey.METADATA, 12, {"topics": []})["brokers"]


def test_the_cli_verbs(broker, processes):
    url = faults_of(broker).url

    def corral_faults(*args: str) -> tuple[int, Any, str]:
        return faults_cli(url, *args)

    create_topic(broker, "cli", 2)
    group = members(broker, processes, "cli-g", "cli", ["a"], protocol="consumer")
    wait_stable(broker.bootstrap, "cli-g", [group], all_partitions({"cli": 2}))
    member = member_ids(broker, "cli-g")["a"]
    code, out, _ = corral_faults("target", "--group", "cli-g", json.dumps({member: {"cli": [1]}}))
    assert code == 0 and out["fault"]["target"] == {member: {"cli": [1]}}
    wait_until(lambda: group["a"].owned == {("cli", 1)}, 20, "the target set from the shell")
    assert corral_faults("rebalance", "--group", "cli-g")[0] == 0
    code, _, err = corral_faults("fence", "--group", "cli-g", "--member", "nobody")
    assert code == 1 and "404" in err and "UNKNOWN_MEMBER_ID" in err
    code, out, _ = corral_faults(
        "move",
        "--group",
        "cli-g",
        "--error",
        "COORDINATOR_LOAD_IN_PROGRESS",
        "--duration-ms",
        "60000",
    )
    assert code == 0 and out["fault"]["coordinator"] == "COORDINATOR_LOAD_IN_PROGRESS"
    code, out, _ = corral_faults("unload", "--group", "other-g", "--duration-ms", "60000")
    assert code == 0 and out["fault"]["unload"] is True
    code, out, _ = corral_faults("storage", "--disk-full", "--fsync-delay-ms", "5")
    assert code == 0 and (out["fault"]["disk_full"], out["fault"]["fsync_delay_ms"]) == (True, 5)
    code, out, _ = corral_faults("refuse", "--listener", "PLAINTEXT", "--duration-ms", "60000")
    assert code == 0 and out["fault"]["listener"] == "PLAINTEXT"
    code, listed, _ = corral_faults("list")
    active = [f for f in listed if f["active"]]
    assert [
        next(k for k in ("coordinator", "unload", "disk_full", "refuse_connections") if k in f)
        for f in active
    ] == [
        "coordinator",
        "unload",
        "disk_full",
        "refuse_connections",
    ]
    assert corral_faults("clear")[0] == 0
    with RawClient(broker.port) as raw:
        assert raw.call(ApiKey.METADATA, 12, {"topics": []})["brokers"]
