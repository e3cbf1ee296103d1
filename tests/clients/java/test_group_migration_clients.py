"""Online migration of a live consumer group from the classic protocol to KIP-848
(`group.protocol=consumer`) and back, one member at a time, with real clients, against corral and
the Apache Kafka 4.4 reference broker (group.consumer.migration.policy=bidirectional).

Six members, each in its own process so that it can be restarted alone: three confluent-kafka
(librdkafka) and three Java kafka-clients, all subscribed to one 12-partition topic and
committing synchronously after each batch, while a producer thread writes to every partition
with acks=all the whole time. The members start classic; each is then restarted (a clean
close, so a LeaveGroup, then a new process under the same name) with `group.protocol=consumer`,
and afterwards restarted back to classic, one at a time. After every leave and every join the
test waits until the group is settled again (every partition owned by exactly one live member,
as the members report it, and the coordinator agrees) and records what ListGroups,
ConsumerGroupDescribe and DescribeGroups show.

A classic group needs one assignor every member supports, and librdkafka refuses a list mixing
eager and cooperative assignors, so the classic members cannot be "some range, some
cooperative-sticky" on both clients at once. The classic members of the upgrade leg all share
range (eager rebalancing): the confluent ones and one Java one with range alone, the other two
Java ones with "cooperative-sticky,range" (they prefer cooperative-sticky and rebalance eagerly,
as every Java client listing an eager assignor does). The classic members of the rollback leg all
share cooperative-sticky: the confluent ones and two Java ones with cooperative-sticky alone
(cooperative rebalancing), the third Java one with "range,cooperative-sticky" (eager). While
classic members sit in a consumer group the broker assigns and only the protocol names must
overlap, so the rollback leg may come back with another strategy.

Why not cooperative-sticky on the way up: Kafka refuses to upgrade a classic group whose
assignments carry assignor userData (KAFKA-18134: "an unsupported custom assignor is in use";
the consumer member's heartbeat gets GROUP_ID_NOT_FOUND, fatal to librdkafka), and a librdkafka
leader running cooperative-sticky echoes each member's sticky userData (its previous assignment)
into that member's assignment, so such a group can only be upgraded while a Java member leads
it. The second test pins that refusal. A downgrade has no such check.

Checked:
- the ownership invariant over every incarnation of every member (a restarted member is a new
  CgMember; the old one's history still counts), all along;
- the group is never empty nor gone while members come and go;
- after each step, the group's type and its members' types: a "consumer" group while at least
  one member uses the consumer protocol (ConsumerGroupDescribe v1 MemberType: 0 classic,
  1 consumer), a "classic" one otherwise (ConsumerGroupDescribe: GROUP_ID_NOT_FOUND); the
  sequence is derived from who runs which protocol, and the whole record (what ListGroups and
  DescribeGroups show too) must be the same on both brokers when both run in one session;
- at the end, at least once: every acknowledged record consumed by some incarnation, and the
  group's committed offsets at the log end of every partition.

The scenario's settings, members, producer and record of each step:
tests/kits/migration_scenario.py.
"""

from __future__ import annotations

import struct
import time

import pytest
from cgkit import CG_FAST, MemberProcess, committed, create_topics, stop_processes, wait_until
from confluent_kafka import Consumer, Producer, TopicPartition
from migration_scenario import (
    CLASSIC,
    CLASSIC_DOWN,
    CLASSIC_UP,
    COMMON,
    CONSUMER,
    FATAL,
    GROUP,
    GROUP_ID_NOT_FOUND,
    MIGRATION_SETTINGS,
    ORDER,
    PARTITIONS,
    TOPIC,
    ProducerThread,
    Scenario,
    expected_types,
)
from ownership import CgMember, all_partitions, check_ownership, partitioned
from raw_groups import describe, describe_groups_raw, list_groups_raw

# Each broker's record of the scenario, to compare the two when both run in one session.
SEEN: dict[str, list] = {}


@pytest.fixture(scope="module", params=["kafka", "corral"])
def broker(request, tmp_path_factory):
    """(name, bootstrap) of a broker with MIGRATION_SETTINGS, one for the module's tests."""
    if request.param == "corral":
        from conftest import CorralProcess

        corral = CorralProcess(
            tmp_path_factory.mktemp("migration") / "corral",
            {k: str(v) for k, v in MIGRATION_SETTINGS.items()},
        ).start()
        try:
            yield "corral", corral.bootstrap
        finally:
            corral.proc.kill()
            corral.proc.wait()
        return
    from kafka_ref import KafkaBroker

    kafka = KafkaBroker(settings=MIGRATION_SETTINGS)
    try:
        kafka.start()
        yield "kafka", kafka.bootstrap
    finally:
        kafka.stop()


def test_rolling_upgrade_to_consumer_protocol_and_back(broker):
    """Six classic members (range) restarted one at a time with the consumer protocol, then one
    at a time back to classic (cooperative-sticky), under a continuous producer: the group is
    converted when the first consumer member joins and converted back when the last one leaves;
    nothing is owned twice, nothing acknowledged is lost, the offsets end committed at the log
    end (see the module's docstring)."""
    name, bootstrap = broker
    began = time.monotonic()
    create_topics(bootstrap, {TOPIC: PARTITIONS})
    producer = ProducerThread(bootstrap)
    scenario = Scenario(bootstrap)
    protocols_after: list[dict[str, str]] = []  # who runs which protocol after each step
    try:
        start = time.monotonic()
        for member in ORDER:
            scenario.start(member, "classic", CLASSIC_UP)
        scenario.settle("start:classic", start, timeout=90)
        protocols_after.append(dict(scenario.protocol))
        for protocol, strategies in (("consumer", None), ("classic", CLASSIC_DOWN)):
            for member in ORDER:
                scenario.leave(member)
                protocols_after.append(dict(scenario.protocol))
                scenario.join(member, protocol, strategies)
                protocols_after.append(dict(scenario.protocol))

        # The end: the producer stops, the members consume to the end and commit it.
        producer.stop()
        acked = producer.acked
        ends = {p: max(o for q, o in acked if q == p) + 1 for p in range(PARTITIONS)}
        probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "migrate-probe"})
        try:
            marks = {
                p: probe.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)
                for p in range(PARTITIONS)
            }
        finally:
            probe.close()
        assert {p: hi for p, (lo, hi) in marks.items()} == ends, (marks, ends)
        expected_committed = {(TOPIC, p): end for p, end in ends.items()}
        deadline = time.monotonic() + 60
        while True:
            scenario.check()
            got = {(p, o) for m in scenario.incarnations for t, p, o in m.records}
            if (
                acked <= got
                and committed(bootstrap, GROUP, scenario.partitions) == expected_committed
            ):
                break
            assert time.monotonic() < deadline, (
                f"not consumed: {sorted(acked - got)[:20]} ({len(acked - got)}); committed "
                f"{committed(bootstrap, GROUP, scenario.partitions)}, log end {expected_committed}"
            )
            time.sleep(0.2)
        scenario.closing = True
        for member in list(scenario.procs):
            scenario.stop(member)
        check_ownership(scenario.incarnations)
        listed = list_groups_raw(bootstrap)[GROUP]
        scenario.observed.append(
            {
                "step": "end:all left",
                "list_groups": (
                    listed["group_type"],
                    listed["group_state"],
                    listed["protocol_type"],
                ),
            }
        )
    finally:
        stop_processes(scenario.all_procs)
        if not producer.stopping.is_set():
            producer.stopping.set()
            producer.thread.join(40)

    # What happened, for the log (pytest -s) and the report.
    took = time.monotonic() - began
    records = [r for m in scenario.incarnations for r in m.records]
    print(
        f"\n{name}: {took:.0f}s, {len(acked)} records acked, {len(records)} consumed "
        f"({len(records) - len(set(records))} more than once)"
    )
    for (step, seconds, group_epoch), o in zip(scenario.timings, scenario.observed):
        print(
            f"  {step:<14} settled after {seconds:4.1f}s, group epoch {group_epoch}: "
            + ", ".join(f"{k} {v}" for k, v in o.items() if k != "step")
        )
    print("  ", scenario.observed[-1])
    for m in scenario.incarnations:
        print(
            f"  {m.client}:{m.name} {len(m.timeline)} callbacks, {m.changes} changes, epochs "
            f"{m.epochs[:12]}, {len(m.errors)} errors {sorted({e[:90] for e in m.errors})[:4]}"
        )

    seen, wanted = expected_types(scenario.observed[:-1], protocols_after)
    assert seen == wanted
    assert scenario.observed[-1]["list_groups"] == ("classic", "Empty", "consumer")
    for o in scenario.observed[:-1]:  # both assignors balance one topic
        assert o["sizes"][-1] - o["sizes"][0] <= 1, o
    SEEN[name] = scenario.observed
    other = SEEN.get("kafka" if name == "corral" else "corral")
    if other is not None:
        assert scenario.observed == other


def assignment_user_data(data: bytes) -> bytes | None:
    """The assignor userData of a classic ConsumerProtocolAssignment (None if null)."""
    pos = 2  # version
    (topics,) = struct.unpack_from(">i", data, pos)
    pos += 4
    for _ in range(topics):
        (length,) = struct.unpack_from(">h", data, pos)
        pos += 2 + length
        (partitions,) = struct.unpack_from(">i", data, pos)
        pos += 4 + 4 * partitions
    (length,) = struct.unpack_from(">i", data, pos)
    return None if length < 0 else data[pos + 4 : pos + 4 + length]


def test_upgrade_refused_while_classic_assignments_carry_assignor_user_data(broker):
    """Why the upgrade leg above is not cooperative-sticky: a librdkafka leader running
    cooperative-sticky echoes each member's sticky userData into its assignment, and Kafka will
    not upgrade a classic group whose assignments carry userData (KAFKA-18134: it would be lost).
    A consumer member joining gets GROUP_ID_NOT_FOUND, fatal to librdkafka; the classic group goes
    on as it was, no rebalance."""
    _, bootstrap = broker
    topic, group = "sticky", "sticky"
    create_topics(bootstrap, {topic: 4})
    partitions = all_partitions({topic: 4})
    spec = {
        "protocol": "classic",
        "strategy": "cooperative-sticky",
        "session_timeout_ms": 6000,
        "heartbeat_interval_ms": 1000,
    }
    processes: list[MemberProcess] = []
    classic: list[CgMember] = []
    try:

        def stable() -> dict | None:
            check_ownership(classic)
            dg = describe_groups_raw(bootstrap, group)
            if (
                not partitioned(classic, partitions)
                or dg["group_state"] != "Stable"
                or {m["client_id"]: m["assigned"] for m in dg["members"]}
                != {m.name: m.owned for m in classic}
            ):
                return None
            return dg

        # One after the other: a member's sticky userData is its previous assignment, so "a"
        # joins the second rebalance with some (two joining the first one together have none).
        for n in ("a", "b"):
            processes.append(
                MemberProcess("confluent", bootstrap, group, [{"name": n, **spec}], topics=[topic])
            )
            classic.append(processes[-1][n])
            wait_until(lambda: stable() is not None, 60, f"classic group stable with {n}")
        dg = stable()
        assert dg is not None and dg["protocol_data"] == "cooperative-sticky"
        assert any(assignment_user_data(m["member_assignment"]) for m in dg["members"]), (
            dg
        )  # the premise
        before = [len(m.timeline) for m in classic]

        processes.append(MemberProcess("confluent", bootstrap, group, ["c"], topics=[topic]))
        newcomer = processes[-1]["c"]
        wait_until(
            lambda: any("group id does not exist" in e.lower() for e in newcomer.errors),
            30,
            "the consumer member refused",
        )
        time.sleep(2)  # two classic heartbeats: no rebalance follows
        assert not newcomer.timeline, newcomer.timeline
        assert [len(m.timeline) for m in classic] == before
        assert list_groups_raw(bootstrap)[group]["group_type"] == "classic"
        assert describe(bootstrap, group)["error_code"] == GROUP_ID_NOT_FOUND
        after = stable()
        assert after is not None and {m["member_id"]: m["assigned"] for m in after["members"]} == {
            m["member_id"]: m["assigned"] for m in dg["members"]
        }
        for p in processes:
            p.close_all()
        check_ownership(classic)
    finally:
        stop_processes(processes)


def test_classic_and_consumer_members_starting_together_on_a_new_group(corral_factory):
    """Classic and consumer-protocol members started together on a new group: the consumer
    members' first heartbeats arrive while the classic group still waits out
    group.initial.rebalance.delay.ms (generation 0, no protocol chosen). corral converts it,
    reading each member's subscription from its own protocols, and every member consumes.
    Before, librdkafka's consumer member got GROUP_ID_NOT_FOUND ("...the embedded consumer
    protocol is malformed"), fatal, and never consumed. (Kafka 4.4 fails this case too, with an
    unexpected error: it reads the subscription through the protocol not chosen yet.)"""
    broker = corral_factory(**{**CG_FAST, "group.initial.rebalance.delay.ms": 3000})
    group, topic, partitions = "together", "together", 8
    create_topics(broker.bootstrap, {topic: partitions})
    wanted = all_partitions({topic: partitions})
    classic = {
        "protocol": "classic",
        "strategy": "range",
        "session_timeout_ms": 6000,
        "heartbeat_interval_ms": 1000,
        **COMMON,
    }
    procs = [
        MemberProcess(
            "confluent", broker.bootstrap, group, [{"name": "c0", **classic}], topics=[topic]
        ),
        MemberProcess("java", broker.bootstrap, group, [{"name": "j0", **classic}], topics=[topic]),
    ]
    time.sleep(0.5)  # the classic members' joins first: the group exists, in its initial delay
    procs += [
        MemberProcess(
            "confluent",
            broker.bootstrap,
            group,
            [{"name": "c1", "protocol": "consumer", **COMMON}],
            topics=[topic],
        ),
        MemberProcess(
            "java",
            broker.bootstrap,
            group,
            [{"name": "j1", "protocol": "consumer", **COMMON}],
            topics=[topic],
        ),
    ]
    members = [m for p in procs for m in p.members.values()]
    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
        for i in range(4 * partitions):
            producer.produce(topic, f"r{i}".encode(), partition=i % partitions)
        assert producer.flush(30) == 0
        del producer  # gone before the broker is: no reconnect attempts logged after the test

        def consuming() -> bool:
            check_ownership(members)
            fatal = [f"{m.name}: {e}" for m in members for e in m.errors if FATAL.search(e)]
            assert not fatal, fatal
            consumed = {(t, p) for m in members for t, p, _ in m.records}
            return (
                partitioned(members, wanted)
                and all(m.owned for m in members)
                and consumed == wanted
            )

        deadline = time.monotonic() + 60
        while not consuming():
            assert time.monotonic() < deadline, (
                f"not every member consumes: {members}; errors: {[(m.name, m.errors[-3:]) for m in members]}; "
                f"ConsumerGroupDescribe: {describe(broker.bootstrap, group)}"
                + "".join(f"\n--- {p.client} log\n{p.log_tail()}" for p in procs)
            )
            time.sleep(0.1)
        assert list_groups_raw(broker.bootstrap)[group]["group_type"] == "consumer"
        by_client = {
            m["client_id"]: m["member_type"] for m in describe(broker.bootstrap, group)["members"]
        }
        assert by_client == {"c0": CLASSIC, "j0": CLASSIC, "c1": CONSUMER, "j1": CONSUMER}
        check_ownership(members)
    finally:
        stop_processes(procs)
