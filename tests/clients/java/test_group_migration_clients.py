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
"""

from __future__ import annotations

import re
import struct
import threading
import time

import pytest
from cgkit import CG_FAST, MemberProcess, committed, create_topics, stop_processes, wait_until
from confluent_kafka import Consumer, Producer, TopicPartition
from ownership import CgMember, all_partitions, check_ownership, partitioned
from raw_groups import describe, describe_groups_raw, list_groups_raw

# Both brokers run with these settings: KIP-848 groups as in the other client tests, classic
# groups without the initial rebalance delay, and migration allowed both ways (the default,
# spelled out).
MIGRATION_SETTINGS = {
    **CG_FAST,
    "group.initial.rebalance.delay.ms": 0,
    "group.consumer.migration.policy": "bidirectional",
}

TOPIC = "migrate"
PARTITIONS = 12
GROUP = "migrate"

CLASSIC = 0  # ConsumerGroupDescribe v1 MemberType
CONSUMER = 1
GROUP_ID_NOT_FOUND = 69

# Each member's partition.assignment.strategy when classic, in the upgrade leg (the start) and
# in the rollback leg. Classic members time out after 6 s and heartbeat every second; every
# member's rebalance timeout (max.poll.interval.ms) is 30 s so that a stuck rebalance fails the
# test rather than waiting 5 minutes.
COMMON = {"max_poll_interval_ms": 30000}
CLASSIC_UP = {
    "c0": "range",
    "c1": "range",
    "c2": "range",
    "j0": "range",
    "j1": "cooperative-sticky,range",
    "j2": "cooperative-sticky,range",
}
CLASSIC_DOWN = {
    "c0": "cooperative-sticky",
    "c1": "cooperative-sticky",
    "c2": "cooperative-sticky",
    "j0": "range,cooperative-sticky",
    "j1": "cooperative-sticky",
    "j2": "cooperative-sticky",
}
CLIENTS = {
    "c0": "confluent",
    "c1": "confluent",
    "c2": "confluent",
    "j0": "java",
    "j1": "java",
    "j2": "java",
}
ORDER = ["c0", "j0", "c1", "j1", "c2", "j2"]  # the order of the restarts, both legs

# A member's error that it does not come back from (librdkafka's fatal errors; what the Java
# consumer throws from poll when the broker refuses it).
FATAL = re.compile(
    r"fatal|GroupIdNotFound|InconsistentGroupProtocol|UnsupportedVersion", re.IGNORECASE
)

# Each broker's record of the scenario, to compare the two when both run in one session.
SEEN: dict[str, list] = {}


def member_config(name: str, protocol: str, strategies: dict[str, str]) -> dict:
    if protocol == "consumer":
        return {"name": name, "protocol": "consumer", **COMMON}
    return {
        "name": name,
        "protocol": "classic",
        "strategy": strategies[name],
        "session_timeout_ms": 6000,
        "heartbeat_interval_ms": 1000,
        **COMMON,
    }


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


class ProducerThread:
    """Produces to every partition in turn (acks=all) until stopped; `acked` is every
    (partition, offset) the broker acknowledged."""

    def __init__(self, bootstrap: str, rate: float = 200):
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        self.acked: set[tuple[int, int]] = set()
        self.errors: list[str] = []
        self.rate = rate
        self.remaining: int | None = None  # what flush() left unacknowledged
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _done(self, err, msg) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.add((msg.partition(), msg.offset()))

    def _run(self) -> None:
        i, start = 0, time.monotonic()
        while not self.stopping.is_set():
            self.producer.produce(
                TOPIC, f"r{i}".encode(), partition=i % PARTITIONS, on_delivery=self._done
            )
            i += 1
            self.producer.poll(0)
            ahead = start + i / self.rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        self.remaining = self.producer.flush(30)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(40)
        assert not self.thread.is_alive() and self.remaining == 0, "the producer did not flush"
        assert not self.errors, self.errors[:10]


class Scenario:
    """The group's members, every incarnation of them, and what the brokers showed."""

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap
        self.partitions = all_partitions({TOPIC: PARTITIONS})
        self.procs: dict[str, MemberProcess] = {}  # the live incarnation of each member
        self.protocol: dict[str, str] = {}  # the protocol each live member uses
        self.incarnations: list[CgMember] = []  # every member that ever ran
        self.all_procs: list[MemberProcess] = []
        self.observed: list[dict] = []  # what both brokers must show alike, step by step
        self.timings: list[tuple[str, float, int | None]] = []  # step, seconds, group epoch
        self.closing = False  # every member leaving at the end

    def start(self, name: str, protocol: str, strategies: dict[str, str]) -> None:
        proc = MemberProcess(
            CLIENTS[name],
            self.bootstrap,
            GROUP,
            [member_config(name, protocol, strategies)],
            topics=[TOPIC],
        )
        self.procs[name] = proc
        self.protocol[name] = protocol
        self.all_procs.append(proc)
        self.incarnations.append(proc[name])

    def stop(self, name: str) -> None:
        """A clean close: the client leaves the group, then its process exits."""
        proc = self.procs.pop(name)
        del self.protocol[name]
        proc.close(name)
        deadline = time.monotonic() + 30
        while not proc[name].closed:
            self.check()
            assert time.monotonic() < deadline, f"{name} did not close: {proc.log_tail()}"
            time.sleep(0.05)
        proc.close_all()
        assert proc.proc.returncode == 0, proc.log_tail()
        assert not proc[name].owned, f"{name} closed owning {sorted(proc[name].owned)}"

    @property
    def live(self) -> list[CgMember]:
        return [p[name] for name, p in self.procs.items()]

    def check(self) -> dict:
        """The invariants that hold at every moment: no partition owned twice; the group listed
        and neither empty nor dead. Returns the group's ListGroups entry."""
        check_ownership(self.incarnations)
        listed = list_groups_raw(self.bootstrap).get(GROUP)
        if self.observed and not self.closing:  # once the group formed, until the end
            assert listed is not None, "the group is not listed"
            assert listed["group_state"].lower() not in ("empty", "dead"), listed
        return listed

    def settled_view(self) -> tuple[dict, int | None] | None:
        """What the brokers show once the group settled (and its group epoch if it is a consumer
        group), or None while it has not: every partition owned once by the live members, the
        group Stable with exactly them, each holding (as the coordinator sees it) what its
        client reports."""
        listed = self.check()
        live = self.live
        if (
            listed is None
            or not partitioned(live, self.partitions)
            or listed["group_state"] != "Stable"
        ):
            return None
        names = sorted(m.name for m in live)
        cgd = describe(self.bootstrap, GROUP)
        dg = describe_groups_raw(self.bootstrap, GROUP)
        if listed["group_type"] == "consumer":
            if cgd["error_code"] or cgd["group_state"] != "Stable":
                return None
            by_client = {m["client_id"]: m for m in cgd["members"]}
            if sorted(by_client) != names or len(cgd["members"]) != len(live):
                return None
            for m in live:
                d = by_client[m.name]
                if (
                    d["assignment"] != m.owned
                    or d["target_assignment"] != m.owned
                    or d["member_epoch"] != cgd["group_epoch"]
                ):
                    return None
        else:
            if dg["error_code"] or dg["group_state"] != "Stable":
                return None
            by_client = {m["client_id"]: m for m in dg["members"]}
            if sorted(by_client) != names or len(dg["members"]) != len(live):
                return None
            if any(by_client[m.name]["assigned"] != m.owned for m in live):
                return None
        view = {
            "list_groups": (listed["group_type"], listed["group_state"], listed["protocol_type"]),
            # error, state, assignor, (member, MemberType) by member
            "consumer_group_describe": (
                cgd["error_code"],
                cgd["group_state"],
                cgd["assignor_name"],
                tuple(sorted((d["client_id"], d["member_type"]) for d in cgd["members"])),
            ),
            # error, state, protocol type, protocol, members
            "describe_groups": (
                dg["error_code"],
                dg["group_state"],
                dg["protocol_type"],
                dg["protocol_data"],
                tuple(sorted(d["client_id"] for d in dg["members"])),
            ),
            "sizes": tuple(sorted(len(m.owned) for m in live)),
        }
        return view, (cgd["group_epoch"] if not cgd["error_code"] else None)

    def settle(self, step: str, since: float, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            settled = self.settled_view()
            if settled is not None:
                break
            fatal = [f"{m.name}: {e}" for m in self.live for e in m.errors if FATAL.search(e)]
            if fatal or time.monotonic() > deadline:
                raise AssertionError(
                    (
                        f"{step}: a member failed: {fatal}"
                        if fatal
                        else f"{step}: the group did not settle in {timeout}s"
                    )
                    + f"\nlive: {self.live}\nerrors: {[(m.name, m.errors[-5:]) for m in self.live if m.errors]}\n"
                    f"ListGroups: {list_groups_raw(self.bootstrap).get(GROUP)}\n"
                    f"ConsumerGroupDescribe: {describe(self.bootstrap, GROUP)}\n"
                    f"DescribeGroups: {describe_groups_raw(self.bootstrap, GROUP)}"
                    + "".join(
                        f"\n--- {n} ({p.client}) log\n{p.log_tail()}" for n, p in self.procs.items()
                    )
                )
            time.sleep(0.1)
        view, group_epoch = settled
        self.observed.append({"step": step, **view})
        self.timings.append((step, time.monotonic() - since, group_epoch))

    def leave(self, name: str) -> None:
        start = time.monotonic()
        self.stop(name)
        self.settle(f"-{name}", start)

    def join(self, name: str, protocol: str, strategies: dict[str, str]) -> None:
        start = time.monotonic()
        self.start(name, protocol, strategies)
        self.settle(f"+{name}:{protocol}", start)


def expected_types(
    observed: list[dict], protocols_after: list[dict[str, str]]
) -> tuple[list, list]:
    """(what was seen, what the rules say) of each step: (step, ListGroups type,
    ConsumerGroupDescribe error, member types)."""
    seen = [
        (
            o["step"],
            o["list_groups"][0],
            o["consumer_group_describe"][0],
            o["consumer_group_describe"][3],
        )
        for o in observed
    ]
    wanted = []
    for o, protocols in zip(observed, protocols_after):
        if any(p == "consumer" for p in protocols.values()):
            types = tuple(
                sorted((n, CONSUMER if p == "consumer" else CLASSIC) for n, p in protocols.items())
            )
            wanted.append((o["step"], "consumer", 0, types))
        else:
            wanted.append((o["step"], "classic", GROUP_ID_NOT_FOUND, ()))
    return seen, wanted


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
