"""Classic members inside KIP-848 consumer groups, in process: a classic client as Java's
ConsumerCoordinator behaves, a coordinator with one topic, classic rebalances run by hand, and a
member switching group protocols."""

from __future__ import annotations

import struct
import time

from corral import _core
from corral.errors import ErrorCode
from corral.groups.classic import ClassicGroup, ClassicState
from corral.groups.consumer import ConsumerGroup
from corral.load import consumer_protocol as cp
from harness.common import join_request
from harness.consumer import ConsumerDriver, Topics, make_coordinator

CLASSIC_FAST = {"group.initial.rebalance.delay.ms": 0}


class ClassicClient:
    """A classic consumer as Java's ConsumerCoordinator behaves: eager ("range") gives up
    everything before it rejoins, cooperative ("cooperative-sticky") reports what it owns and
    drops what its SyncGroup answer leaves out. `owned` is by topic id, as the driver checks."""

    def __init__(
        self,
        driver: ConsumerDriver,
        name: str,
        protocols: list[str],
        topics=("t",),
        instance_id: str | None = None,
        version: int = 3,
        session_timeout_ms: int = 10000,
        rebalance_timeout_ms: int = 30000,
    ):
        self.driver = driver
        self.name = name
        self.protocols = protocols
        self.topics = list(topics)
        self.instance_id = instance_id
        self.version = version
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.member_id = ""
        self.generation = -1
        self.protocol_name: str | None = None
        self.owned: dict[bytes, frozenset[int]] = {}
        self.joined = False
        self.errors: list[ErrorCode] = []
        driver.clients[name] = self  # type: ignore[assignment]

    @property
    def c(self):
        return self.driver.coordinator

    @property
    def eager(self) -> bool:
        # Java's ConsumerCoordinator: cooperative only if every configured assignor is.
        return any(name != "cooperative-sticky" for name in self.protocols)

    def metadata(self) -> bytes:
        owned = (
            []
            if self.eager
            else [(self.driver.topics.by_id_name(t), sorted(ps)) for t, ps in self.owned.items()]
        )
        data = _core.encode_consumer_subscription(
            min(self.version, 3), self.topics, owned, self.generation
        )
        return struct.pack(">h", self.version) + data[2:]  # a newer version adds fields at the end

    def join_later(self):
        if self.eager:
            self.owned = {}  # onPartitionsRevoked(all) before rejoining
            self.driver.check()
        return self.c.join(
            join_request(
                "g",
                self.member_id,
                self.metadata(),
                protocols=self.protocols,
                instance_id=self.instance_id,
                session_timeout_ms=self.session_timeout_ms,
                rebalance_timeout_ms=self.rebalance_timeout_ms,
            )
        )

    def joined_with(self, result) -> ErrorCode:
        code = ErrorCode(result["error_code"])
        if code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = result["member_id"]
        elif code:
            self.errors.append(code)
            if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                self.reset()
        else:
            self.member_id, self.generation = result["member_id"], result["generation_id"]
            self.protocol_name = result["protocol_name"]
            self.joined = True
        return code

    def join(self) -> dict:
        """JoinGroup until answered (a first MEMBER_ID_REQUIRED is followed by the rejoin)."""
        for _ in range(2):
            later = self.join_later()
            assert later.resolved, "a join to a consumer group is answered once written"
            if self.joined_with(later.value) != ErrorCode.MEMBER_ID_REQUIRED:
                return later.value
        raise AssertionError("MEMBER_ID_REQUIRED twice")

    def sync(self, assignments=()) -> dict:
        later = self.c.sync(
            "g",
            self.member_id,
            self.instance_id,
            self.generation,
            "consumer",
            self.protocol_name,
            list(assignments),
        )
        assert later.resolved
        return self.synced_with(later.value)

    def synced_with(self, result) -> dict:
        if result["error_code"] == ErrorCode.NONE:
            named, _ = (
                _core.decode_consumer_assignment(result["assignment"])
                if result["assignment"]
                else ([], None)
            )
            # Cooperative: revokes what is not there any more, adds the rest; eager: takes it.
            self.owned = {self.driver.topics.add_id(t): frozenset(ps) for t, ps in named if ps}
        else:
            self.errors.append(ErrorCode(result["error_code"]))
            if result["error_code"] in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                self.reset(keep_id=result["error_code"] == ErrorCode.ILLEGAL_GENERATION)
        self.driver.check()
        return result

    def heartbeat(self) -> ErrorCode:
        code = ErrorCode(self.c.heartbeat("g", self.member_id, self.instance_id, self.generation))
        if code in (
            ErrorCode.UNKNOWN_MEMBER_ID,
            ErrorCode.ILLEGAL_GENERATION,
            ErrorCode.FENCED_INSTANCE_ID,
        ):
            self.errors.append(code)
            self.reset(keep_id=code == ErrorCode.ILLEGAL_GENERATION)
        return code

    def cycle(self) -> ErrorCode:
        """A poll: heartbeat, and rejoin and sync when told a rebalance is in progress (or
        after losing the membership)."""
        code = self.heartbeat() if self.joined else ErrorCode.REBALANCE_IN_PROGRESS
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            if self.join()["error_code"] == ErrorCode.NONE:
                self.sync()
        self.driver.check()
        return code

    def leave(self) -> None:
        self.c.leave("g", [(self.member_id, self.instance_id)])
        self.reset()
        self.joined = False
        self.driver.check()

    def reset(self, keep_id: bool = False) -> None:
        """onPartitionsLost: the membership is gone (after ILLEGAL_GENERATION Java keeps its
        member id and rejoins with it)."""
        self.owned, self.generation, self.joined = {}, -1, False
        if self.instance_id is None and not keep_id:
            self.member_id = ""


class MixedTopics(Topics):
    def by_id_name(self, topic_id: bytes) -> str:
        return next(t.name for t in self.by_name.values() if t.id.bytes == topic_id)

    def add_id(self, name: str) -> bytes:
        return self.by_name[name].id.bytes


def setup(partitions: int = 6, settings=None, log=None):
    topics = MixedTopics()
    tid = topics.add("t", partitions)
    coordinator = make_coordinator(topics, {**CLASSIC_FAST, **(settings or {})}, log=log)
    return topics, tid, coordinator, ConsumerDriver(topics, coordinator)


def converge(driver: ConsumerDriver, rounds: int = 10) -> None:
    for _ in range(rounds):
        for name, client in list(driver.clients.items()):
            if isinstance(client, ClassicClient):
                client.cycle()
            elif client.joined:
                driver.heartbeat(name)


def stable_group(driver: ConsumerDriver) -> ConsumerGroup:
    group = driver.group
    assert group is not None and group.state_name == "Stable", group and group.state_name
    owned = [(t, p) for c in driver.clients.values() for t, ps in c.owned.items() for p in ps]
    assert (
        len(owned) == len(set(owned)) == sum(t.partitions for t in driver.topics.by_name.values())
    )
    return group


def classic_group(driver: ConsumerDriver, clients: list[ClassicClient]) -> ClassicGroup:
    """A live classic group of `clients`, stable."""
    classic_round(driver, clients)
    group = driver.coordinator.groups["g"]
    assert isinstance(group, ClassicGroup) and group.state is ClassicState.STABLE
    return group


def classic_round(driver: ConsumerDriver, clients: list[ClassicClient]) -> None:
    """Classic rebalances of `clients` until settled: all join (new ones after
    MEMBER_ID_REQUIRED), the leader assigns with range but, as cooperative assignors do, not a
    partition another member still owns (it is revoked first, then assigned next round), all
    sync."""
    for _ in range(3):
        if not _classic_round(driver, clients):
            return
    raise AssertionError("classic rebalances did not settle")


def _classic_round(driver: ConsumerDriver, clients: list[ClassicClient]) -> bool:
    """One rebalance; whether a partition was held back (another round needed)."""

    c = driver.coordinator
    waiting = []
    # New members first: the rebalance they start then waits for everyone.
    for client in sorted(
        clients, key=lambda cl: cl.member_id in c.groups["g"].members if "g" in c.groups else False
    ):
        later = client.join_later()
        if later.resolved and later.value["error_code"] == ErrorCode.MEMBER_ID_REQUIRED:
            client.joined_with(later.value)
            later = client.join_later()
        waiting.append((client, later))
    # The initial rebalance delay (0 ms) ends at the timer wheel's next tick.
    for _ in range(100):
        if all(later.resolved for _, later in waiting):
            break
        time.sleep(0.01)
        c.timers.fire_due()
    for client, later in waiting:
        assert later.resolved and client.joined_with(later.value) == ErrorCode.NONE, later.value
    group = c.groups["g"]
    leader = next(cl for cl in clients if cl.member_id == group.leader_id)
    plan = cp.assign(
        "range",
        {cl.member_id: cl.topics for cl in clients},
        {n: t.partitions for n, t in driver.topics.by_name.items()},
    )
    owner = {
        (driver.topics.by_id_name(t), p): cl.member_id
        for cl in clients
        for t, ps in cl.owned.items()
        for p in ps
    }
    held_back = False
    for member_id, assigned in plan.items():
        for topic, ps in assigned.items():
            free = [p for p in ps if owner.get((topic, p), member_id) == member_id]
            held_back |= len(free) < len(ps)
            assigned[topic] = free
    for cl in [leader] + [cl for cl in clients if cl is not leader]:
        later = c.sync(
            "g",
            cl.member_id,
            cl.instance_id,
            cl.generation,
            "consumer",
            cl.protocol_name,
            [(m, cp.encode_assignment(a)) for m, a in plan.items()] if cl is leader else [],
        )
        assert later.resolved
        cl.synced_with(later.value)
    return held_back


def restart_under_other_protocol(driver: ConsumerDriver, name: str, new_classic) -> None:
    """Member `name` restarts under the other group protocol: a classic member leaves and joins
    as a KIP-848 member (which upgrades a classic group), a KIP-848 member leaves (which may
    downgrade the group) and comes back as `new_classic(driver, name)`, a ClassicClient."""
    client = driver.clients[name]
    if isinstance(client, ClassicClient):
        client.leave()
        del driver.clients[name]
        driver.join(name)
    else:
        driver.leave(name)
        del driver.clients[name]
        new_classic(driver, name)
