"""KIP-848 consumer groups in process: a coordinator on the fake log, a topic store, and a
driver playing named clients ("a", "b", ...) that heartbeat as the Java client does (full on
join, then incremental with their owned partitions) and check the group's invariants after every
step."""

from __future__ import annotations

import sys
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from corral.clock import wall_ms
from corral.config.settings import Settings
from corral.errors import ErrorCode
from corral.groups.consumer import ConsumerGroup, HeartbeatRequest, MemberState
from corral.groups.consumer.targets.inputs import metadata_hash
from corral.groups.coordinator import GroupCoordinator
from corral.groups.storage import consumer_records as cr
from corral.later import Later
from corral.topics.registry import Topic
from harness.common import FakeLog


class Topics:
    """The broker's topic store as the coordinator reads it."""

    def __init__(self) -> None:
        self.by_name: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}

    def get(self, name: str) -> Topic | None:
        return self.by_name.get(name)

    def add(self, name: str, partitions: int) -> bytes:
        topic = Topic(name, uuid.uuid4(), partitions)
        self.by_name[name], self.by_id[topic.id] = topic, topic
        return topic.id.bytes

    def remove(self, name: str) -> None:
        topic = self.by_name.pop(name)
        del self.by_id[topic.id]


FAST = {"group.consumer.assignment.interval.ms": 0}


def make_coordinator(
    topics: Topics,
    settings: dict[str, Any] | None = None,
    log: FakeLog | None = None,
    snapshot_path: Path = Path("/nonexistent/snapshot"),
) -> GroupCoordinator:
    """A coordinator; pass a real `snapshot_path` if it will `run` (it snapshots on exit)."""
    return GroupCoordinator(
        Settings({**FAST, **(settings or {})}), log or FakeLog(keep=True), snapshot_path, topics
    )


def request(
    group_id: str,
    member_id: str,
    epoch: int,
    *,
    names=None,
    regex=None,
    owned=None,
    instance_id=None,
    rack_id=None,
    rebalance_timeout_ms=-1,
    assignor=None,
    client_id="client",
) -> HeartbeatRequest:
    return HeartbeatRequest(
        group_id=group_id,
        member_id=member_id,
        member_epoch=epoch,
        instance_id=instance_id,
        rack_id=rack_id,
        rebalance_timeout_ms=rebalance_timeout_ms,
        topic_names=names,
        regex=regex,
        server_assignor=assignor,
        owned=owned,
        client_id=client_id,
        client_host="/127.0.0.1",
    )


def answer(later: Later) -> dict[str, Any]:
    assert later.resolved, "the write is acknowledged at once in process"
    return later.value


class Client:
    """What one consumer knows: its id, epoch and the partitions it owns."""

    def __init__(
        self, name: str, names: list[str] | None, regex: str | None, instance_id: str | None
    ):
        self.name = name
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.names = names
        self.regex = regex
        self.instance_id = instance_id
        self.owned: dict[bytes, frozenset[int]] = {}
        # The assignment of the last answer that carried one (what it should own).
        self.assigned: dict[bytes, frozenset[int]] = {}
        self.joined = False
        self.errors: list[ErrorCode] = []


class ConsumerDriver:
    def __init__(self, topics: Topics, coordinator: GroupCoordinator, group_id: str = "g"):
        self.topics = topics
        self.coordinator = coordinator
        self.group_id = group_id
        self.clients: dict[str, Client] = {}
        self.checks = 0

    @property
    def group(self) -> ConsumerGroup | None:
        group = self.coordinator.groups.get(self.group_id)
        return group if isinstance(group, ConsumerGroup) else None

    def join(
        self,
        name: str,
        names: list[str] | None = None,
        regex: str | None = None,
        instance_id: str | None = None,
    ) -> dict[str, Any]:
        client = self.clients.get(name)
        if client is None:
            client = self.clients[name] = Client(
                name, names if names is not None or regex else ["t"], regex, instance_id
            )
        client.epoch = 0
        client.owned, client.assigned = {}, {}
        client.joined = True
        return self._send(
            client,
            request(
                self.group_id,
                client.member_id,
                0,
                names=client.names,
                regex=client.regex,
                owned={},
                instance_id=instance_id,
                rebalance_timeout_ms=60000,
            ),
        )

    def heartbeat(self, name: str, *, acknowledge: bool = True) -> dict[str, Any]:
        """An incremental heartbeat; the client reports what it owns (having revoked what it
        was told to, unless `acknowledge` is False)."""
        client = self.clients[name]
        if acknowledge:
            client.owned = dict(client.assigned)
        return self._send(
            client,
            request(
                self.group_id,
                client.member_id,
                client.epoch,
                owned=dict(client.owned),
                instance_id=client.instance_id,
            ),
            acknowledge,
        )

    def leave(self, name: str, epoch: int = -1) -> dict[str, Any]:
        client = self.clients[name]
        result = answer(
            self.coordinator.consumer_heartbeat(
                request(self.group_id, client.member_id, epoch, instance_id=client.instance_id)
            )
        )
        client.joined = False
        client.owned, client.assigned = {}, {}
        self.check()
        return result

    def _send(
        self, client: Client, req: HeartbeatRequest, acknowledge: bool = True
    ) -> dict[str, Any]:
        result = answer(self.coordinator.consumer_heartbeat(req))
        if result["error_code"]:
            client.errors.append(ErrorCode(result["error_code"]))
            if result["error_code"] in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
                client.owned, client.assigned, client.joined = {}, {}, False  # gives up all
        else:
            client.epoch = result["member_epoch"]
            if result["assignment"] is not None:
                # The client drops what it no longer has and takes what it was given.
                given = {
                    t["topic_id"]: frozenset(t["partitions"])
                    for t in result["assignment"]["topic_partitions"]
                }
                client.assigned = dict(given)
                if not acknowledge:  # a slow client still holds what it should revoke
                    for topic, ps in client.owned.items():
                        given[topic] = given.get(topic, frozenset()) | ps
                client.owned = given
        self.check()
        return result

    def converge(self, rounds: int = 8) -> None:
        for _ in range(rounds):
            for name, client in self.clients.items():
                if client.joined:
                    self.heartbeat(name)

    # -- invariants ------------------------------------------------------------------------------

    def check(self) -> None:
        """Never one partition owned by two members (server side and client side); the
        ownership index matches the members; once Stable, every subscribed partition is owned
        exactly once."""
        self.checks += 1
        check_view(self.coordinator)
        held: dict[tuple[bytes, int], str] = {}
        for client in self.clients.values():
            for topic, ps in client.owned.items():
                for p in ps:
                    assert (topic, p) not in held, (
                        f"clients {held[(topic, p)]} and {client.name} both own {p}"
                    )
                    held[(topic, p)] = client.name
        group = self.group
        if group is None:
            return
        owners: dict[tuple[bytes, int], str] = {}
        for member in group.members.values():
            for part in (member.current.assigned, member.current.pending_revocation):
                for topic, ps in part.items():
                    for p in ps:
                        assert (topic, p) not in owners, (
                            f"{member.member_id} and {owners[(topic, p)]} own {p}"
                        )
                        owners[(topic, p)] = member.member_id
                        assert group.owner_epoch(topic, p) == member.current.epoch
        indexed = {(t, p) for t, ps in group.owner_epochs.items() for p in ps}
        assert indexed == set(owners), "the ownership index is out of step with the members"
        if group.state_name == "Stable":
            names = {name for member in group.members.values() for name in member.topic_names}
            for regex in {m.regex for m in group.members.values() if m.regex}:
                names.update(group.regexes[regex].topics)
            subscribed = set()
            for name in names:  # each topic once: its id's bytes are made on every access
                topic = self.topics.get(name)
                if topic is not None:
                    topic_id = topic.id.bytes
                    subscribed.update((topic_id, p) for p in range(topic.partitions))
            assert set(owners) == subscribed, "a Stable group leaves partitions unowned"
            for member in group.members.values():
                assert member.current.state is MemberState.STABLE


def check_counts(group: ConsumerGroup) -> None:
    """The counts a consumer group keeps so that no request walks its members (per topic name,
    regex, regex topic, assignor, classic protocol, stable epoch) say what its members and
    regexes say, and its state is the one Kafka finds by looking at every member."""
    members = list(group.members.values())

    def counted(values) -> Counter:
        return Counter(v for v in values if v)

    assert group.topic_name_counts == Counter(n for m in members for n in m.topic_names)
    assert group.regex_counts == counted(m.regex for m in members)
    assert group.assignor_counts == counted(m.server_assignor for m in members)
    assert group.regex_topic_counts == Counter(t for r in group.regexes.values() for t in r.topics)
    assert group.unused_regexes == set(group.regexes) - set(group.regex_counts)
    assert not group.unused_regexes, "a regex nobody uses is kept"
    classic = [m.classic for m in members if m.classic is not None]
    assert group.classic_members == len(classic)
    assert group.classic_protocol_counts == Counter(
        name for c in classic for name in {name for name, _ in c.protocols}
    )
    assert group.stable_counts == Counter(
        m.current.epoch for m in members if m.current.state is MemberState.STABLE
    )
    oldest = min((r.timestamp_ms for r in group.regexes.values()), default=None)
    assert group.oldest_regex_ms() == oldest
    if group.deleting or not members or group.group_epoch > group.assignment_epoch:
        return
    reconciled = all(
        m.current.epoch == group.assignment_epoch and m.current.state is MemberState.STABLE
        for m in members
    )
    assert group.state_name == ("Stable" if reconciled else "Reconciling")


def check_view(coordinator: GroupCoordinator) -> None:
    """The network thread's view of the consumer groups (rust/groups/consumer_heartbeat_view.rs)
    says what the groups say: `ConsumerGroup` mirrors every change into it; and each group's counts
    say what its members say."""
    expected = {}
    for group_id, group in coordinator.groups.items():
        if not isinstance(group, ConsumerGroup):
            continue
        check_counts(group)
        busy = group.metadata_expired or group.deleting
        members = {
            m.member_id: (
                m.epoch,
                m.current.state is MemberState.STABLE,
                m.classic is None,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.session_key,
            )
            for m in group.members.values()
        }
        expected[group_id] = (group.group_epoch, group.assignment_epoch, busy, members)
    assert coordinator.consumer_heartbeat_view.contents() == expected


def random_change(d: ConsumerDriver, rng, topics: Topics, step: int, name: str) -> None:
    """One of the changes a randomized run makes between the heartbeats it checks: a heartbeat
    (acknowledging or not), a leave, a topic created or deleted (regexes "n.*" see both), a
    subscription change, or rounds of convergence."""
    client = d.clients[name]
    action = rng.random()
    if action < 0.5:
        d.heartbeat(name, acknowledge=rng.random() < 0.8)
    elif action < 0.65:
        d.leave(name, epoch=-2 if client.instance_id else -1)
    elif action < 0.75:
        new = f"n{step}"
        topics.add(new, rng.randint(1, 3))
        d.coordinator.on_topics_changed({new})
        d.check()
    elif action < 0.8:
        created = [n for n in topics.by_name if n.startswith("n")]
        if created:  # a regex's topic deleted: its partitions are revoked
            gone = rng.choice(created)
            topics.remove(gone)
            d.coordinator.on_topics_changed({gone})
    elif action < 0.88:
        names = rng.choice([["t"], ["u"], ["t", "u"]])
        client.names = names
        d._send(
            client,
            request(
                d.group_id,
                client.member_id,
                client.epoch,
                names=names,
                owned=dict(client.owned),
                instance_id=client.instance_id,
            ),
        )
    else:
        d.converge(2)


def opcodes(operation: Callable[[], object]) -> int:
    """How many Python bytecode instructions `operation` executes."""
    count = 0

    def trace(frame, event, arg):
        nonlocal count
        if event == "call":
            frame.f_trace_opcodes = True
            frame.f_trace_lines = False
        elif event == "opcode":
            count += 1
        return trace

    sys.settrace(trace)
    try:
        operation()
    finally:
        sys.settrace(None)
    return count


def coordinator(sizes):
    topics = Topics()
    for size in sizes:
        topics.add(f"t{size}", 2 * size)
    c = make_coordinator(topics, {"group.consumer.assignment.interval.ms": 0}, log=FakeLog())
    c.events.sink = lambda event, time_ms: None
    return c


class Group:
    def __init__(self, c, size: int):
        self.c, self.gid, self.topic = c, f"g{size}", f"t{size}"
        self.epochs: dict[str, int] = {}

    @property
    def group(self) -> ConsumerGroup:
        return self.c.groups[self.gid]

    def load(self, size: int) -> None:
        """A settled group as loading leaves it: every member STABLE at epoch 2 with two
        partitions, its target equal to its assignment."""
        gid, now = self.gid, wall_ms()
        topic_id = self.c.topics.id_of(self.topic)
        recs: list = []
        for i in range(size):
            member_id = str(uuid.uuid4())
            self.epochs[member_id] = 2
            parts = {topic_id: (2 * i, 2 * i + 1)}
            recs += [
                cr.MemberMetadata(
                    gid,
                    member_id,
                    None,
                    None,
                    "client",
                    "/127.0.0.1",
                    (self.topic,),
                    "",
                    60000,
                    None,
                    None,
                ),
                cr.TargetMember(gid, member_id, parts),
                cr.CurrentAssignment(gid, member_id, 2, 1, 0, parts, {}),
            ]
        recs += [
            cr.GroupEpoch(gid, 2, metadata_hash({self.topic}, self.c.topics)),
            cr.TargetEpoch(gid, 2, now),
        ]
        for record in recs:
            self.c.replay(record)
        self.c.shard_of(self.group.group_id).consumer.arm_loaded_timers(self.group)

    def heartbeat(self, req) -> dict:
        answer = self.c.consumer_heartbeat(req).value
        assert answer["error_code"] == ErrorCode.NONE, answer
        return answer

    def join(self) -> str:
        member_id = str(uuid.uuid4())
        answer = self.heartbeat(
            request(
                self.gid, member_id, 0, names=[self.topic], owned={}, rebalance_timeout_ms=60000
            )
        )
        self.epochs[member_id] = answer["member_epoch"]
        self.assert_target_now()
        return member_id

    def leave(self, member_id: str) -> None:
        self.heartbeat(request(self.gid, member_id, -1))
        del self.epochs[member_id]
        self.assert_target_now()

    def assert_target_now(self) -> None:
        group = self.group
        assert group.assignment_epoch == group.group_epoch, "the target waits"
