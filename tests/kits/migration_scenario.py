"""The online migration of a live consumer group, member by member, of
tests/clients/java/test_group_migration_clients.py (its docstring tells the scenario and why the
strategies are what they are): the brokers' settings, the six members (their clients, their
classic strategies in each leg, the order of their restarts), `ProducerThread` writing the whole
time, and `Scenario`: the members, every incarnation of them, and what the brokers showed after
each step (`expected_types`: what they should have shown)."""

from __future__ import annotations

import re
import threading
import time

from cgkit import CG_FAST, MemberProcess
from confluent_kafka import Producer
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
