"""Share groups (KIP-932) with real clients: Java kafka-clients 4.4's KafkaShareConsumer,
confluent-kafka's ShareConsumer (librdkafka) and franz-go's kgo.ShareGroup, each in explicit
acknowledgement (tests/kits/share_clients.py: the programs, their one output protocol and the
invariant checker over what they print).

- a mixed group of the three clients, two members each, on two partitions: every record
  accepted exactly once, deliveries of one record never overlapping, delivery counts 1, 2, ...;
- released records redelivered until share.delivery.count.limit, then archived; rejected ones
  never redelivered;
- a member holding acquired records, killed (SIGKILL: its session ends with its connection, and
  the records go back at once) or frozen (SIGSTOP: connection open, the records come back when
  their acquisition lock expires): another member gets them with delivery count 2.

The `broker` fixture runs each test against Apache Kafka 4.4 (benches/kafka_ref.py); "corral" joins
its params when corral serves share groups.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from dataclasses import dataclass

import pytest
from share_clients import (
    CLIENTS,
    ShareProcess,
    check_deliveries,
    create_topic,
    deliveries,
    produce,
    set_group_config,
    wait_assigned,
)

# Broker settings, Kafka's names: group lock durations down to 1 s, heartbeats every second (a
# new member gets its first assignment a heartbeat after joining: the group epoch moves on the
# next heartbeat), sessions of 10 s.
SETTINGS = {
    "group.share.record.lock.duration.ms": 15000,
    "group.share.min.record.lock.duration.ms": 1000,
    "group.share.heartbeat.interval.ms": 1000,
    "group.share.min.heartbeat.interval.ms": 500,
    "group.share.session.timeout.ms": 10000,
    "group.share.min.session.timeout.ms": 6000,
}
LOCK_MS = SETTINGS["group.share.record.lock.duration.ms"]


@dataclass
class Broker:
    name: str
    bootstrap: str


@pytest.fixture(scope="module", params=["corral", pytest.param("kafka", marks=pytest.mark.kafka)])
def broker(request, tmp_path_factory):
    if request.param == "corral":
        from conftest import CorralProcess

        corral = CorralProcess(
            tmp_path_factory.mktemp("share") / "corral", {k: str(v) for k, v in SETTINGS.items()}
        )
        corral.start()
        yield Broker("corral", corral.bootstrap)
        corral.stop()
        return
    from kafka_java import kafka_reference

    # Kafka 4.4 formats new clusters with share.version=2: share groups are on without
    # `--feature share.version=1` or unstable features.
    with kafka_reference(SETTINGS) as bootstrap:
        yield Broker("kafka", bootstrap)


def names(what: str) -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"share-{what}-{tag}", f"share-{what}-group-{tag}"


def config(broker: Broker, group: str, topic: str, members: list[str], behaviour: str, **more):
    return {
        "bootstrap": broker.bootstrap,
        "group": group,
        "topic": topic,
        "members": members,
        "behaviour": behaviour,
        **more,
    }


def wait_until(predicate, timeout: float, what, processes) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            errors = "\n".join(f"{p.client}: {p.stderr()[-1500:]}" for p in processes)
            raise AssertionError(f"{what()}\n{errors}")
        time.sleep(0.2)


def stop_all(processes: list[ShareProcess]) -> None:
    for p in processes:
        p.stop()
    for p in processes:
        p.wait(60)


def all_records(processes: list[ShareProcess]) -> list[dict]:
    return [line for p in processes for line in p.records()]


def check_summaries(processes: list[ShareProcess], members: int) -> list[dict]:
    summaries = [s for p in processes for s in p.summaries()]
    assert len(summaries) == members, summaries
    failed = [s for s in summaries if s.get("error") or s["ack_errors"]]
    assert not failed, (failed, [p.stderr()[-1500:] for p in processes])
    return summaries


def test_mixed_share_group_accepts_every_record_exactly_once(broker):
    """Six members, two of each client, in one share group on two partitions (each partition
    shared by three members): 3,000 records, each accepted exactly once overall; the checker
    finds no overlapping deliveries and no gap in any record's delivery counts."""
    topic, group = names("mixed")
    create_topic(broker.bootstrap, topic, 2)
    set_group_config(broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    members = {client: [f"{client}-1", f"{client}-2"] for client in CLIENTS}
    processes = [
        ShareProcess(client, config(broker, group, topic, ids, "accept", idle_ms=120000))
        for client, ids in members.items()
    ]
    try:
        wait_assigned(broker.bootstrap, group, [m for ids in members.values() for m in ids])
        placed: dict = {}
        for chunk in range(6):
            placed.update(
                produce(
                    broker.bootstrap,
                    topic,
                    [(i % 2, f"v{chunk}-{i}".encode()) for i in range(500)],
                )
            )
            time.sleep(0.3)
        assert len(placed) == 3000

        def accepted() -> set:
            return {
                (r["partition"], r["offset"])
                for r in all_records(processes)
                if r["ack"] == "accept"
            }

        wait_until(
            lambda: len(accepted()) == len(placed),
            90,
            lambda: f"{len(accepted())} of {len(placed)} records accepted",
            processes,
        )
        stop_all(processes)
    finally:
        for p in processes:
            p.kill()
    lines = all_records(processes)
    check_deliveries(lines, placed)
    acks = [(r["partition"], r["offset"]) for r in lines if r["ack"] == "accept"]
    assert len(acks) == len(set(acks)) == len(placed)
    by_client = {c: sum(1 for r in lines if r["client"] == c) for c in CLIENTS}
    print("deliveries by member:", Counter(r["member"] for r in lines))
    assert all(by_client.values()), by_client
    check_summaries(processes, 6)


def test_released_records_redelivered_up_to_the_limit_rejected_ones_never(broker):
    """One member of each client, share.delivery.count.limit 3: records whose value says poison
    are released at each delivery, so delivered exactly three times (counts 1, 2, 3) and then
    archived; the records listed to reject are delivered once and never again; the rest are
    accepted once."""
    limit = 3
    topic, group = names("poison")
    create_topic(broker.bootstrap, topic, 2)
    set_group_config(
        broker.bootstrap,
        group,
        {"share.auto.offset.reset": "earliest", "share.delivery.count.limit": limit},
    )
    per_partition = 150
    poison = {(p, o) for p in (0, 1) for o in range(per_partition) if o % 50 == 7}
    reject = {(p, o) for p in (0, 1) for o in (3, 40, 99, 149)}
    behaviour = "poison:" + ",".join(f"{p}:{o}" for p, o in sorted(reject))
    processes = [
        ShareProcess(client, config(broker, group, topic, [client], behaviour, idle_ms=120000))
        for client in CLIENTS
    ]
    try:
        wait_assigned(broker.bootstrap, group, CLIENTS)
        values = [
            (p, (b"poison-%d" if (p, o) in poison else b"v%d") % o)
            for o in range(per_partition)
            for p in (0, 1)
        ]
        placed = produce(broker.bootstrap, topic, values)
        assert set(placed) == {(p, o) for p in (0, 1) for o in range(per_partition)}

        def done() -> bool:
            by = deliveries(all_records(processes))
            return all(
                len(by.get(key, [])) >= limit
                if key in poison
                else any(r["ack"] in ("accept", "reject") for r in by.get(key, []))
                for key in placed
            )

        wait_until(
            done,
            90,
            lambda: (
                f"not all records finished: {sorted(set(placed) - set(deliveries(all_records(processes))))[:10]}"
            ),
            processes,
        )
        # Archived records stay archived: three members keep polling and see nothing more.
        time.sleep(3)
        stop_all(processes)
    finally:
        for p in processes:
            p.kill()
    lines = all_records(processes)
    by = check_deliveries(lines, placed, limit=limit)
    for key, seen in by.items():
        acks = [r["ack"] for r in seen]
        if key in poison:
            assert acks == ["release"] * limit, (key, seen)
        elif key in reject:
            assert acks == ["reject"], (key, seen)
        else:
            assert acks == ["accept"], (key, seen)
    check_summaries(processes, 3)


# Who takes over the held records from each holder: every client both holds and receives.
RECEIVER = {"java": "franz-go", "franz-go": "confluent", "confluent": "java"}


@pytest.mark.parametrize("end", ["kill", "freeze"])
@pytest.mark.parametrize("holder", CLIENTS)
def test_records_held_by_a_dead_or_stuck_member_go_to_another(broker, holder, end):
    """A member acquires records and never acknowledges them; then it is killed (SIGKILL: its
    connection closes, its share session ends and Kafka releases its records at once, long before
    the 15 s lock would expire) or frozen (SIGSTOP: connection open, the records come back when
    the group's 6 s acquisition lock expires). Another member, of another client, then gets each
    held record with delivery count 2 and accepts it."""
    lock_ms = LOCK_MS if end == "kill" else 6000
    topic, group = names(f"hold-{holder}-{end}")
    create_topic(broker.bootstrap, topic, 1)
    set_group_config(
        broker.bootstrap,
        group,
        {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": lock_ms},
    )
    placed = produce(broker.bootstrap, topic, [(0, b"v%d" % i) for i in range(50)])
    receiver = RECEIVER[holder]
    held_by = ShareProcess(
        holder, config(broker, group, topic, ["holder"], "hold", max_poll_records=10)
    )
    processes = [held_by]
    try:
        assert held_by.wait_for(lambda lines: any("held" in line for line in lines), 60), (
            held_by.stderr()
        )
        held = held_by.records()
        assert held and all(r["delivery_count"] == 1 for r in held), held
        if end == "kill":
            held_by.kill()
        else:
            held_by.freeze()
        ended = time.time() * 1000
        taker = ShareProcess(
            receiver, config(broker, group, topic, ["taker"], "accept", idle_ms=120000)
        )
        processes.append(taker)
        wait_assigned(broker.bootstrap, group, ["taker"])
        assigned = time.time() * 1000
        wanted = {(r["partition"], r["offset"]) for r in held}

        def taken() -> set:
            return {(r["partition"], r["offset"]) for r in taker.records()} & wanted

        wait_until(
            lambda: len(taken()) == len(wanted),
            60,
            lambda: f"{len(taken())} of {len(wanted)} held records redelivered",
            processes,
        )
        wait_until(
            lambda: {(r["partition"], r["offset"]) for r in taker.records()} == set(placed),
            60,
            lambda: f"{len(taker.records())} of {len(placed)} records taken over",
            processes,
        )
        held_by.kill()
        stop_all([taker])
    finally:
        for p in processes:
            p.kill()
    first = min(r["ts"] for r in held)
    by = deliveries(taker.records())
    taken_at = min(by[(r["partition"], r["offset"])][0]["ts"] for r in held) - first
    print(
        f"{holder} held {len(held)} records (ms from its poll): {end} at +{ended - first:.0f}, "
        f"{receiver} assigned at +{assigned - first:.0f}, held records taken at +{taken_at}"
    )
    if end == "freeze":
        # The taker was in the group, assigned the partition, well before the locks expired.
        assert assigned < first + lock_ms - 1000, (assigned - first, lock_ms)
    for r in held:
        seen = by[(r["partition"], r["offset"])]
        assert [(s["delivery_count"], s["ack"]) for s in seen] == [(2, "accept")], seen
        if end == "kill":
            # Released when the session ended, not when the lock expired.
            assert seen[0]["ts"] < first + lock_ms - 1000, (seen, first, ended)
        else:
            # The lock was taken before the holder's poll returned; allow 1 s for that.
            assert seen[0]["ts"] >= first + lock_ms - 1000, (seen, first)
    # Every record taken over exactly once; those the holder acquired without handing them to
    # the application (prefetched) come with count 2 as well.
    for key in placed:
        seen = by[key]
        assert [s["ack"] for s in seen] == ["accept"], seen
        assert seen[0]["delivery_count"] in (1, 2), seen
    assert not [r for r in taker.records() if "ack_error" in r]
