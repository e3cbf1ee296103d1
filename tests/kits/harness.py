"""The group coordinator in process, without sockets: the harness of the classic and KIP-848
group tests (tests/unit/groups/...) and of benches/groups_inprocess.py, consumer_target.py and
consumer_offload_latency.py.

Classic groups: a log that acknowledges at once, a clock the test moves,
JoinGroup requests, and a driver that plays named members through
JoinGroup/SyncGroup/Heartbeat/LeaveGroup/OffsetCommit validation, checking the group's invariants
after every step; the state machine's scripted cases (`TABLES`, `run_case`). Every coordinator
method is synchronous: a parked request's `Later` has its `value` as soon as the coordinator
answers, so the driver reads answers without awaiting anything. The log replays each write at
once, through the coordinator's `replay`, as the durable log does after its fsync.

KIP-848 consumer groups: a coordinator on a recording log, a topic
store, and a driver playing named clients ("a", "b", ...) that heartbeat as the Java client does
(full on join, then incremental with their owned partitions) and check the group's invariants
after every step.

Classic members inside KIP-848 consumer groups: a classic client as
Java's ConsumerCoordinator behaves, a coordinator with one topic, classic rebalances run by hand,
and a member switching group protocols.
"""

from __future__ import annotations

import contextlib
import struct
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import trio

from corral import _core
from corral.clock import wall_ms
from corral.config.settings import Settings
from corral.errors import ErrorCode
from corral.groups import timers as timers_module
from corral.groups.classic import ClassicGroup, ClassicState, JoinRequest
from corral.groups.consumer import ConsumerGroup, HeartbeatRequest, MemberState
from corral.groups.consumer.target import metadata_hash
from corral.groups.coordinator import GroupCoordinator
from corral.groups.storage import consumer_records as cr
from corral.groups.storage import records
from corral.groups.storage.writer import CoordinatorLog
from corral.later import Later
from corral.load import consumer_protocol as cp
from corral.topics.registry import Topic


class FakeLog(CoordinatorLog):
    """The coordinator's log in process: encodes every write as the durable log does (part of a
    request's cost), replays what the caller did not apply and acknowledges at once, unless a
    control says otherwise:
    - `keep=True`: the bytes of every record written are kept in `pairs` (the "log");
    - `fail_next = n`: the next n writes fail (NOT_COORDINATOR, nothing replayed);
    - `hold()` ... `release()`: writes wait, as on a slow disk; `release` replays and answers
      them in order, as the durable log does once they are fsynced."""

    def __init__(self, keep: bool = False) -> None:
        self.keep = keep
        self.pairs: list[tuple[bytes, bytes | None]] = []
        self.fail_next = 0
        self.held: list[tuple[str, list, bool, Later]] | None = None

    def _write(self, group_id, recs, applied=False, batch=None):
        if self.fail_next:
            self.fail_next -= 1
            return Later.of(ErrorCode.NOT_COORDINATOR)
        if batch is None:
            batch = records.encode_batch(recs, 0)
        if self.keep:
            self.pairs.extend((k, v) for _, _, k, v in _core.decode_batches(batch))
        if self.held is not None:
            done = Later()
            self.held.append((group_id, recs, applied, done))
            return done
        if not applied:
            for record in recs:
                self.replay(record)
        return Later.of(ErrorCode.NONE)

    def writing(self, group_id: str) -> bool:
        return self.held is not None and any(g == group_id for g, *_ in self.held)

    def hold(self) -> None:
        self.held = []

    def release(self) -> None:
        held, self.held = self.held or [], None
        for _, recs, applied, done in held:
            if not applied:
                for record in recs:
                    self.replay(record)
            done.resolve(ErrorCode.NONE)


def fresh(value: str) -> str:
    """A new object equal to `value`: a request decoded off the wire brings its own strings."""
    return (value + " ")[:-1]


def subscription(topics=("topic",)) -> bytes:
    """ConsumerProtocolSubscription v3 bytes for `topics`."""
    return cp.encode_subscription(list(topics), {}, -1)


def join_request(
    group_id: str,
    member_id: str,
    metadata: bytes,
    *,
    n: int = 0,
    instance_id: str | None = None,
    session_timeout_ms: int = 45000,
    rebalance_timeout_ms: int = 300000,
    protocol_type: str = "consumer",
    protocols: list[str] | None = None,
    require_known_member_id: bool = True,
    supports_skip_assignment: bool = True,
    reason: str | None = None,
) -> JoinRequest:
    """A JoinRequest as the handlers build it from the wire (fresh strings and bytes)."""
    names = protocols or ["range"]
    return JoinRequest(
        group_id=group_id,
        member_id=member_id,
        group_instance_id=instance_id,
        client_id=f"client-{n}",
        client_host=fresh("/127.0.0.1"),
        session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms,
        protocol_type=fresh(protocol_type),
        protocols=[(fresh(name), bytes(bytearray(metadata))) for name in names],
        require_known_member_id=require_known_member_id,
        supports_skip_assignment=supports_skip_assignment,
        reason=reason,
    )


class FakeClock:
    """The monotonic clock of the coordinator's timers (corral.groups.timers.now_ms), moved by hand."""

    def __init__(self, start_ms: int = 1_000_000):
        self.now = start_ms

    def __call__(self) -> int:
        return self.now


@contextlib.contextmanager
def patched_clock(clock: FakeClock) -> Iterator[FakeClock]:
    """Makes `clock` the timers' clock; a coordinator must be built inside the block."""
    saved = timers_module.now_ms
    timers_module.now_ms = clock
    try:
        yield clock
    finally:
        timers_module.now_ms = saved


def code(value: ErrorCode | str | int) -> ErrorCode:
    return ErrorCode[value] if isinstance(value, str) else ErrorCode(value)


class InvariantError(AssertionError):
    pass


class ClassicDriver:
    """Plays named members ("a", "b", ...) against one classic group of a coordinator.

    Every step runs `check_invariants()` afterwards: structural invariants always, and in a Stable
    group the assignment invariants (each member holds exactly what the leader of this generation
    sent it; the partitions of the subscribed topics are each assigned exactly once)."""

    DEFAULTS: ClassVar[dict[str, Any]] = {
        "group.initial.rebalance.delay.ms": 3000,
        "group.min.session.timeout.ms": 1000,
        "group.max.session.timeout.ms": 60000,
    }

    def __init__(
        self,
        clock: FakeClock,
        settings: dict[str, Any] | None = None,
        group_id: str = "g",
        partitions: dict[str, int] | None = None,
        tick_ms: int = 10,
    ):
        self.clock = clock
        self.coordinator = GroupCoordinator(
            Settings({**self.DEFAULTS, **(settings or {})}), FakeLog(), Path("/nonexistent")
        )
        self.group_id = group_id
        self.partitions = partitions or {"topic": 6}
        self.tick_ms = tick_ms
        self.ids: dict[str, str] = {}  # name -> member id
        self.instances: dict[str, str | None] = {}
        self.joins: dict[str, Later] = {}  # name -> last JoinGroup
        self.syncs: dict[str, Later] = {}  # name -> last SyncGroup
        self.sync_generations: dict[str, int] = {}
        # identity (instance id, else member id) -> (generation, assignment bytes) the leader sent
        self.sent: dict[str, tuple[int, bytes]] = {}
        self.stable_checks = 0
        self.n = 0

    # -- observation ---------------------------------------------------------------------------

    @property
    def group(self) -> ClassicGroup | None:
        group = self.coordinator.groups.get(self.group_id)
        return group if isinstance(group, ClassicGroup) else None

    def name_of(self, member_id: str) -> str:
        for name, mid in self.ids.items():
            if mid == member_id:
                return name
        return member_id

    def check_invariants(self) -> None:
        group = self.group
        if group is None:
            return
        members = group.members
        _require(
            group.num_awaiting_join == sum(m.join_waiter is not None for m in members.values()),
            "num_awaiting_join out of step with the members' parked JoinGroups",
        )
        _require(group.pending_sync <= set(members), "pending_sync holds non-members")
        _require(
            not set(group.pending_members) & set(members), "a member id is both pending and joined"
        )
        for instance, mid in group.static_members.items():
            _require(
                mid in members and members[mid].group_instance_id == instance,
                f"static member {instance} maps to {mid}, not a member with that instance id",
            )
        support: dict[str, int] = {}
        for m in members.values():
            for name, _ in m.protocols:
                support[name] = support.get(name, 0) + 1
        _require(support == group.protocol_support, "protocol support counts out of step")
        if members:
            _require(group.leader_id in members, f"leader {group.leader_id} is not a member")
        if group.state is ClassicState.EMPTY:
            _require(not members, "an Empty group has members")
        if group.state is ClassicState.STABLE:
            self._check_stable(group)

    def _check_stable(self, group: ClassicGroup) -> None:
        self.stable_checks += 1
        owner: dict[tuple[str, int], str] = {}
        for m in group.members.values():
            identity = m.group_instance_id or m.member_id
            _require(
                identity in self.sent,
                f"member {m.member_id} of a Stable group got no assignment from a leader",
            )
            generation, data = self.sent[identity]
            _require(
                generation == group.generation_id,
                f"member {m.member_id} holds the assignment of generation {generation}, "
                f"group is at {group.generation_id}",
            )
            _require(
                m.assignment == data,
                f"member {m.member_id} holds an assignment other than the one its leader sent",
            )
            for topic, partitions in cp.decode_assignment(m.assignment).items():
                for p in partitions:
                    _require(
                        (topic, p) not in owner,
                        f"{topic}-{p} assigned to both {owner.get((topic, p))} and {m.member_id}",
                    )
                    owner[(topic, p)] = m.member_id
        subscribed = group.subscribed_topics or set()
        expected = {
            (t, p) for t in subscribed if t in self.partitions for p in range(self.partitions[t])
        }
        _require(
            set(owner) == expected,
            f"assigned {sorted(owner)}, expected each of {sorted(expected)} once",
        )
        # What the members heard from SyncGroup in this generation is what they hold.
        for name, waiter in self.syncs.items():
            mid = self.ids.get(name)
            value = waiter.value
            if (
                mid in group.members
                and value is not None
                and value["error_code"] == 0
                and self.sync_generations.get(name) == group.generation_id
            ):
                _require(
                    value["assignment"] == group.members[mid].assignment,
                    f"{name} was answered an assignment other than the one it holds",
                )

    def _expect(self, what: str, waiter: Later, expect: str | None) -> None:
        if expect is None:
            return
        if expect == "parked":
            assert waiter.value is None, f"{what}: expected to wait, answered {_show(waiter.value)}"
            return
        assert waiter.value is not None, f"{what}: expected {expect}, still waiting"
        assert code(waiter.value["error_code"]) == code(expect), (
            f"{what}: expected {expect}, answered {_show(waiter.value)}"
        )

    # -- steps ---------------------------------------------------------------------------------

    def run(self, steps) -> None:
        for i, step in enumerate(steps):
            try:
                step(self)
                self.check_invariants()
            except AssertionError as e:
                raise AssertionError(f"step {i} {step!r}: {e}") from None

    def advance(self, ms: int) -> None:
        """Moves the clock `ms` forward a tick at a time, firing the timers due at each tick."""
        target = self.clock.now + ms
        while self.clock.now < target:
            self.clock.now = min(self.clock.now + self.tick_ms, target)
            self.coordinator.timers.fire_due()
            self.check_invariants()

    def join(
        self,
        name: str,
        *,
        instance: str | None = None,
        new_id: bool = False,
        first_only: bool = False,
        member_id: str | None = None,
        require_known: bool = True,
        session: int = 10000,
        rebalance: int = 20000,
        protocols: list[str] | None = None,
        topics=("topic",),
        protocol_type: str = "consumer",
        group_id: str | None = None,
        expect: str | None = None,
        **response: Any,
    ) -> Later:
        """JoinGroup as a client does: a new member (no id yet, or `new_id`) joins with "" and,
        answered MEMBER_ID_REQUIRED, again with the id it got (unless `first_only`)."""
        if instance is not None:
            self.instances[name] = instance
        instance = self.instances.get(name)
        if member_id is None:
            member_id = "" if new_id or name not in self.ids else self.ids[name]
        self.n += 1
        metadata = subscription(topics)

        def send(mid: str) -> Later:
            return self.coordinator.join(
                join_request(
                    group_id or self.group_id,
                    mid,
                    metadata,
                    n=self.n,
                    instance_id=instance,
                    session_timeout_ms=session,
                    rebalance_timeout_ms=rebalance,
                    protocol_type=protocol_type,
                    protocols=protocols,
                    require_known_member_id=require_known,
                )
            )

        waiter = send(member_id)
        value = waiter.value
        if value is not None and value["error_code"] == ErrorCode.MEMBER_ID_REQUIRED:
            self.ids[name] = value["member_id"]
            if not first_only:
                waiter = send(value["member_id"])
        group = self.group
        if group is not None:
            for m in group.members.values():
                if m.join_waiter is waiter:
                    self.ids[name] = m.member_id
        if waiter.value is not None and waiter.value["error_code"] == 0:
            self.ids[name] = waiter.value["member_id"]
        self.joins[name] = waiter
        self._expect(f"JoinGroup of {name}", waiter, expect)
        if response:
            self.expect_join(name, **response)
        return waiter

    def expect_join(
        self,
        name: str,
        code: str | None = None,
        generation: int | None = None,
        leader: str | None = None,
        members: list[str] | None = None,
        skip_assignment: bool | None = None,
        member: str | None = None,
    ) -> None:
        waiter = self.joins[name]
        self._expect(f"JoinGroup of {name}", waiter, code)
        value = waiter.value
        if value is None:
            assert generation is leader is members is None, f"JoinGroup of {name} still waiting"
            return
        if generation is not None:
            assert value["generation_id"] == generation, f"{name}: generation {_show(value)}"
        if leader is not None:
            assert value["leader"] == self.ids[leader], f"{name}: leader {_show(value)}"
        if members is not None:
            got = sorted(self.name_of(m["member_id"]) for m in value["members"])
            assert got == sorted(members), f"{name}: members list {got}, expected {sorted(members)}"
        if skip_assignment is not None:
            assert value["skip_assignment"] is skip_assignment, f"{name}: {_show(value)}"
        if member is not None:
            assert value["member_id"] == self.ids[member], f"{name}: member id {_show(value)}"

    def assignments_for(self, name: str) -> list[tuple[str, bytes]]:
        """The leader's range assignment, computed from its JoinGroup answer's member list."""
        value = self.joins[name].value
        subscriptions = {
            m["member_id"]: cp.decode_subscription_topics(m["metadata"]) for m in value["members"]
        }
        strategy = (
            value["protocol_name"] if value["protocol_name"] in ("range", "roundrobin") else "range"
        )
        plan = cp.assign(strategy, subscriptions, self.partitions)
        return [(mid, cp.encode_assignment(plan[mid])) for mid in subscriptions]

    def sync(
        self,
        name: str,
        *,
        generation: int | None = None,
        member_id: str | None = None,
        as_leader: bool | None = None,
        expect: str | None = None,
        tamper=None,
    ) -> Later:
        """SyncGroup; as the leader (by default when its JoinGroup answer says so) with the range
        assignment computed from its member list, passed through `tamper` if given."""
        join = self.joins.get(name)
        answered = join is not None and join.value is not None and join.value["error_code"] == 0
        if generation is None:
            generation = join.value["generation_id"] if answered else self.group.generation_id
        mid = member_id or self.ids[name]
        if as_leader is None:
            as_leader = answered and join.value["leader"] == mid and bool(join.value["members"])
        assignments = self.assignments_for(name) if as_leader else []
        if tamper is not None:
            assignments = tamper(assignments)
        members = (
            {m["member_id"]: m.get("group_instance_id") for m in join.value["members"]}
            if as_leader
            else {}
        )
        waiter = self.coordinator.sync(
            self.group_id, mid, self.instances.get(name), generation, "consumer", None, assignments
        )
        self.sync_generations[name] = generation
        if as_leader and (waiter.value is None or waiter.value["error_code"] == 0):
            # The coordinator gives a member the leader left out empty bytes.
            by_member = dict(assignments)
            for m, instance in members.items():
                self.sent[instance or m] = (generation, by_member.get(m, b""))
        self.syncs[name] = waiter
        self._expect(f"SyncGroup of {name}", waiter, expect)
        return waiter

    def expect_sync(self, name: str, code: str) -> None:
        self._expect(f"SyncGroup of {name}", self.syncs[name], code)

    def until(self, state: str, limit_ms: int = 600_000) -> None:
        """Advances tick by tick until the group is in `state`."""
        waited = 0
        while self.group.state.value != state:
            assert waited < limit_ms, f"still {self.group.state.value} after {limit_ms} ms"
            self.advance(self.tick_ms)
            waited += self.tick_ms

    def sync_all(self) -> None:
        """Every member answered for this generation syncs, followers first (they must wait for
        the leader's assignment), then the leader; everyone must then be answered NONE."""
        group = self.group
        assert group.state is ClassicState.COMPLETING_REBALANCE, f"state {group.state.value}"
        names = [
            n
            for n, mid in self.ids.items()
            if mid in group.members
            and self.joins.get(n) is not None
            and self.joins[n].value is not None
            and self.joins[n].value["error_code"] == 0
            and self.joins[n].value["generation_id"] == group.generation_id
        ]
        leader = [n for n in names if self.ids[n] == group.leader_id]
        assert leader, "the leader has no JoinGroup answer of this generation"
        followers = [n for n in names if n not in leader]
        for n in followers:
            self.sync(n, expect="parked")
        self.sync(leader[0], expect="NONE")
        for n in names:
            self._expect(f"SyncGroup of {n}", self.syncs[n], "NONE")

    def heartbeat(
        self,
        name: str,
        expect: str = "NONE",
        *,
        generation: int | None = None,
        member_id: str | None = None,
    ) -> None:
        if generation is None:
            join = self.joins.get(name)
            generation = (
                join.value["generation_id"]
                if join is not None and join.value
                else self.group.generation_id
            )
        got = self.coordinator.heartbeat(
            self.group_id, member_id or self.ids[name], self.instances.get(name), generation
        )
        assert got == code(expect), f"Heartbeat of {name}: expected {expect}, got {code(got).name}"

    def keepalive(self, names: list[str], ms: int, every: int = 1000) -> None:
        """Advances `ms`, the named members heartbeating every `every` ms."""
        done = 0
        while done < ms:
            step = min(every, ms - done)
            self.advance(step)
            done += step
            for name in names:
                self.heartbeat(name, expect="NONE")

    def leave(self, name: str, expect: str = "NONE", *, by_instance: bool = False) -> None:
        mid = "" if by_instance else self.ids[name]
        left = self.coordinator.leave(self.group_id, [(mid, self.instances.get(name))])
        assert left.resolved, "LeaveGroup not answered"
        error, errors = left.value
        assert error == ErrorCode.NONE, f"LeaveGroup: {code(error).name}"
        assert [code(e) for e in errors] == [code(expect)], (
            f"LeaveGroup of {name}: expected {expect}, got {[code(e).name for e in errors]}"
        )

    def commit(
        self,
        name: str | None,
        expect: str,
        *,
        generation: int | None = None,
        member_id: str | None = None,
        instance: str | None = None,
        version: int = 8,
        group_id: str | None = None,
    ) -> None:
        if member_id is None:
            member_id = self.ids[name] if name else ""
        if instance is None and name:
            instance = self.instances.get(name)
        if generation is None:
            generation = self.group.generation_id if self.group is not None else -1
        got = self.coordinator.offsets.commit_error(
            group_id or self.group_id, member_id, instance, generation, version
        )
        assert got == code(expect), f"commit of {name}: expected {expect}, got {code(got).name}"

    def delete(self, expect: str) -> None:
        got = self.coordinator.delete_group(self.group_id).value
        assert got == code(expect), f"DeleteGroups: expected {expect}, got {code(got).name}"

    def expect(
        self,
        state: str | None = None,
        *,
        generation: int | None = None,
        members: list[str] | None = None,
        leader: str | None = None,
        pending: int | None = None,
        protocol: str | None = None,
        exists: bool = True,
    ) -> None:
        group = self.group
        if not exists:
            assert group is None, f"group exists in state {group.state.value}"
            return
        assert group is not None, "no such group"
        if state is not None:
            assert group.state.value == state, f"state {group.state.value}, expected {state}"
        if generation is not None:
            assert group.generation_id == generation, (
                f"generation {group.generation_id}, expected {generation}"
            )
        if members is not None:
            got = sorted(self.name_of(m) for m in group.members)
            assert got == sorted(members), f"members {got}, expected {sorted(members)}"
        if leader is not None:
            assert group.leader_id == self.ids[leader], (
                f"leader {self.name_of(group.leader_id)}, expected {leader}"
            )
        if pending is not None:
            assert len(group.pending_members) == pending, (
                f"{len(group.pending_members)} pending members, expected {pending}"
            )
        if protocol is not None:
            assert group.protocol_name == protocol, f"protocol {group.protocol_name}"

    def stabilize(self, *names: str) -> None:
        """From a group whose members all joined: wait out the join phase, then everyone syncs."""
        waited = 0
        while self.group.state is ClassicState.PREPARING_REBALANCE and waited < 600_000:
            self.advance(self.tick_ms)
            waited += self.tick_ms
        self.sync_all()
        assert self.group.state is ClassicState.STABLE, self.group.state.value
        if names:
            self.expect("Stable", members=list(names))


class Step:
    """One step of a scenario: a ClassicDriver method with its arguments (`S.join("a")`)."""

    def __init__(self, name: str, args: tuple, kwargs: dict[str, Any]):
        self.name, self.args, self.kwargs = name, args, kwargs

    def __call__(self, driver: ClassicDriver) -> None:
        getattr(driver, self.name)(*self.args, **self.kwargs)

    def __repr__(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.name}({', '.join(parts)})"


class _Steps:
    def __getattr__(self, name: str):
        if not hasattr(ClassicDriver, name):
            raise AttributeError(name)
        return lambda *args, **kwargs: Step(name, args, kwargs)


S = _Steps()


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise InvariantError("invariant: " + message)


def _show(value: dict[str, Any] | None) -> str:
    if value is None:
        return "nothing yet"
    shown = dict(value)
    shown["error_code"] = code(value["error_code"]).name
    shown.pop("members", None)
    return repr(shown)


def stable(*names, **join):
    """Steps: the named members join a new group and it stabilizes at generation 1."""
    return [S.join(n, expect="parked", **join) for n in names] + [
        S.stabilize(*names),
        S.expect("Stable", generation=1, leader=names[0]),
    ]


def run_case(steps, settings=None, partitions=None) -> ClassicDriver:
    async def main():
        with patched_clock(FakeClock()) as clock:
            driver = ClassicDriver(clock, settings, partitions=partitions)
            driver.run(steps)
            return driver

    return trio.run(main)


MEMBERSHIP = [
    (
        "kip394_member_id_required_then_join",
        [
            S.join("a", first_only=True, expect="MEMBER_ID_REQUIRED"),
            S.expect("Empty", members=[], pending=1),
            S.join("a", expect="parked"),
            S.expect("PreparingRebalance", members=["a"], pending=0, generation=0),
        ],
    ),
    (
        "old_client_joins_without_member_id_required",
        [
            S.join("a", require_known=False, expect="parked"),
            S.expect("PreparingRebalance", members=["a"], pending=0),
        ],
    ),
    (
        "unknown_member_id_on_unknown_group",
        [S.join("x", member_id="made-up", expect="UNKNOWN_MEMBER_ID"), S.expect(exists=False)],
    ),
    (
        "unknown_member_id_on_stable_group",
        stable("a")
        + [
            S.join("x", member_id="made-up", expect="UNKNOWN_MEMBER_ID"),
            S.expect("Stable", generation=1, members=["a"]),
        ],
    ),
    (
        "session_timeout_below_min",
        [
            S.join("a", first_only=True, session=999, expect="INVALID_SESSION_TIMEOUT"),
            S.expect(exists=False),
        ],
    ),
    (
        "session_timeout_at_min",
        [S.join("a", first_only=True, session=1000, expect="MEMBER_ID_REQUIRED")],
    ),
    (
        "session_timeout_at_max",
        [S.join("a", first_only=True, session=60000, expect="MEMBER_ID_REQUIRED")],
    ),
    (
        "session_timeout_above_max",
        [S.join("a", first_only=True, session=60001, expect="INVALID_SESSION_TIMEOUT")],
    ),
    (
        "rejoin_with_bad_session_leaves_group_alone",
        stable("a")
        + [
            S.join("a", session=60001, expect="INVALID_SESSION_TIMEOUT"),
            S.expect("Stable", generation=1, members=["a"]),
        ],
    ),
    (
        "pending_member_expires_after_session",
        [
            S.join("a", first_only=True, session=5000, expect="MEMBER_ID_REQUIRED"),
            S.advance(4990),
            S.expect("Empty", pending=1),
            S.advance(10),
            S.expect("Empty", pending=0),
            S.join("a", expect="UNKNOWN_MEMBER_ID"),
        ],
    ),
    (
        "pending_member_holds_join_phase_until_it_expires",
        stable("a")
        + [
            S.advance(1000),
            S.join("b", first_only=True, expect="MEMBER_ID_REQUIRED"),
            S.expect("Stable", generation=1, pending=1),
            S.join("a", expect="parked"),  # the leader rejoining starts a rebalance
            S.expect("PreparingRebalance"),
            S.advance(9990),
            S.expect("PreparingRebalance", pending=1),
            S.advance(10),
            S.expect("CompletingRebalance", generation=2, members=["a"], pending=0),
            S.sync_all(),
            S.expect("Stable", generation=2),
        ],
    ),
    (
        "static_member_may_not_use_a_pending_id",
        [
            S.join("a", first_only=True, expect="MEMBER_ID_REQUIRED"),
            S.join("a", instance="ia", expect="UNKNOWN_MEMBER_ID"),
        ],
    ),
    (
        "inconsistent_protocol_type",
        stable("a")
        + [
            S.join("b", protocol_type="connect", expect="INCONSISTENT_GROUP_PROTOCOL"),
            S.expect("Stable", members=["a"], pending=0),
        ],
    ),
    (
        "no_protocol_in_common",
        stable("a") + [S.join("b", protocols=["roundrobin"], expect="INCONSISTENT_GROUP_PROTOCOL")],
    ),
    (
        "leave_pending_member",
        [
            S.join("a", first_only=True, expect="MEMBER_ID_REQUIRED"),
            S.leave("a"),
            S.expect("Empty", pending=0),
        ],
    ),
    ("leave_twice", stable("a") + [S.leave("a"), S.leave("a", expect="UNKNOWN_MEMBER_ID")]),
]


REBALANCE = [
    (
        "initial_delay",
        [
            S.join("a", expect="parked"),
            S.advance(2990),
            S.expect("PreparingRebalance", generation=0),
            S.expect_join("a", code="parked"),
            S.advance(10),
            S.expect("CompletingRebalance", generation=1, leader="a"),
            S.expect_join("a", code="NONE", generation=1, leader="a", members=["a"]),
            S.sync_all(),
            S.expect("Stable", generation=1),
        ],
    ),
    (
        "initial_delay_extended_by_a_new_member",
        [
            S.join("a", expect="parked"),
            S.advance(2000),
            S.join("b", expect="parked"),
            S.advance(3990),
            S.expect("PreparingRebalance", generation=0),
            S.advance(10),
            S.expect("CompletingRebalance", generation=1, members=["a", "b"], leader="a"),
            S.expect_join("b", code="NONE", generation=1, leader="a", members=[]),
            S.sync_all(),
            S.expect("Stable", generation=1),
        ],
    ),
    (
        "second_member_joins_stable_group",
        stable("a")
        + [
            S.join("b", expect="parked"),
            S.expect("PreparingRebalance", generation=1, members=["a", "b"]),
            S.heartbeat("a", "REBALANCE_IN_PROGRESS"),
            S.join("a", expect="NONE", generation=2, leader="a", members=["a", "b"]),
            S.expect("CompletingRebalance", generation=2, leader="a"),
            S.expect_join("b", code="NONE", generation=2, leader="a", members=[]),
            S.heartbeat("a", "NONE"),
            S.heartbeat("b", "NONE"),
            S.sync_all(),
            S.expect("Stable", generation=2, members=["a", "b"]),
        ],
    ),
    (
        "follower_sync_waits_for_leader_assignment",
        [
            S.join("a"),
            S.join("b"),
            S.until("CompletingRebalance"),
            S.sync("b", expect="parked"),
            S.expect("CompletingRebalance"),
            S.sync("a", expect="NONE"),
            S.expect_sync("b", "NONE"),
            S.expect("Stable", generation=1),
        ],
    ),
    (
        "stale_generation_is_illegal",
        stable("a")
        + [
            S.join("b"),
            S.join("a", expect="NONE", generation=2),
            S.sync("a", generation=1, expect="ILLEGAL_GENERATION"),
            S.heartbeat("a", "ILLEGAL_GENERATION", generation=1),
            S.sync_all(),
            S.expect("Stable", generation=2),
            S.heartbeat("b", "ILLEGAL_GENERATION", generation=3),
            S.heartbeat("b", "NONE", generation=2),
        ],
    ),
    (
        "sync_and_heartbeat_while_preparing",
        stable("a", "b")
        + [
            S.join("c", expect="parked"),
            S.sync("b", generation=1, expect="REBALANCE_IN_PROGRESS"),
            S.heartbeat("b", "REBALANCE_IN_PROGRESS", generation=1),
            S.join("a"),
            S.join("b"),
            S.expect("CompletingRebalance", generation=2, members=["a", "b", "c"]),
            S.sync_all(),
        ],
    ),
    (
        "leader_leaves_and_a_rejoiner_leads",
        stable("a", "b")
        + [
            S.leave("a"),
            S.expect("PreparingRebalance", members=["b"]),
            S.join("b", expect="NONE", generation=2, leader="b", members=["b"]),
            S.sync_all(),
            S.expect("Stable", generation=2, members=["b"], leader="b"),
            S.heartbeat("a", "UNKNOWN_MEMBER_ID"),
        ],
    ),
    (
        "leader_not_rejoining_in_rebalance_timeout_is_replaced",
        stable("a", "b", session=30000)
        + [
            S.join("c", session=30000, expect="parked"),
            S.join("b", session=30000, expect="parked"),
            S.advance(19990),
            S.expect("PreparingRebalance", members=["a", "b", "c"]),
            S.advance(10),
            S.expect("CompletingRebalance", generation=2, members=["b", "c"], leader="b"),
            S.sync_all(),
            S.expect("Stable", generation=2),
        ],
    ),
    (
        "follower_not_rejoining_in_rebalance_timeout_is_removed",
        stable("a", "b", session=30000)
        + [
            S.join("c", session=30000),
            S.join("a", session=30000),
            S.advance(19990),
            S.expect("PreparingRebalance"),
            S.advance(10),
            S.expect("CompletingRebalance", generation=2, members=["a", "c"], leader="a"),
            S.sync_all(),
            S.heartbeat("b", "UNKNOWN_MEMBER_ID"),
        ],
    ),
    (
        "follower_rejoin_with_same_protocols_keeps_stable",
        stable("a", "b")
        + [
            S.join("b", expect="NONE", generation=1, leader="a", members=[]),
            S.expect("Stable", generation=1),
        ],
    ),
    (
        "leader_rejoin_rebalances",
        stable("a", "b")
        + [
            S.join("a", expect="parked"),
            S.expect("PreparingRebalance", generation=1),
            S.join("b", expect="NONE", generation=2),
            S.sync_all(),
            S.expect("Stable", generation=2, leader="a"),
        ],
    ),
    (
        "lost_join_response_answered_again_in_completing",
        [
            S.join("a"),
            S.join("b"),
            S.until("CompletingRebalance"),
            S.join("b", expect="NONE", generation=1, leader="a", members=[]),
            S.join("a", expect="NONE", generation=1, leader="a", members=["a", "b"]),
            S.expect("CompletingRebalance", generation=1),
            S.sync_all(),
            S.expect("Stable", generation=1),
        ],
    ),
    (
        "member_that_never_syncs_is_removed_after_rebalance_timeout",
        [
            S.join("a"),
            S.join("b"),
            S.until("CompletingRebalance"),
            S.sync("a", expect="NONE"),
            S.expect("Stable", generation=1),
            S.keepalive(["a", "b"], 19000),
            S.advance(990),
            S.expect("Stable"),
            S.advance(10),
            S.expect("PreparingRebalance", members=["a"]),
            S.join("a", expect="NONE", generation=2, members=["a"]),
            S.sync_all(),
            S.expect("Stable", generation=2),
        ],
    ),
    (
        "last_member_leaving_empties_group",
        stable("a")
        + [
            S.leave("a"),
            S.expect("Empty", generation=2, members=[]),
            S.delete("NONE"),
            S.expect(exists=False),
            S.delete("GROUP_ID_NOT_FOUND"),
        ],
    ),
    (
        "delete_non_empty_group_refused",
        stable("a") + [S.delete("NON_EMPTY_GROUP"), S.expect("Stable")],
    ),
]


STATIC = [
    (
        "static_leader_rejoins_with_new_id_group_stays_stable",
        [
            S.join("a", instance="ia"),
            S.join("b"),
            S.stabilize("a", "b"),
            S.join(
                "a2",
                instance="ia",
                expect="NONE",
                generation=1,
                skip_assignment=True,
                members=["a2", "b"],
            ),
            S.expect("Stable", generation=1, members=["a2", "b"], leader="a2"),
            S.heartbeat("a", "FENCED_INSTANCE_ID"),
            S.sync("a", generation=1, expect="FENCED_INSTANCE_ID"),
            S.commit("a", "FENCED_INSTANCE_ID", generation=1),
            S.leave("a", expect="FENCED_INSTANCE_ID"),
            S.sync("a2", as_leader=False, expect="NONE"),
            S.heartbeat("a2", "NONE"),
            S.commit("a2", "NONE"),
        ],
    ),
    (
        "static_follower_rejoins_with_new_id",
        [
            S.join("a"),
            S.join("b", instance="ib"),
            S.stabilize("a", "b"),
            S.join(
                "b2",
                instance="ib",
                expect="NONE",
                generation=1,
                leader="a",
                members=[],
                skip_assignment=False,
            ),
            S.expect("Stable", generation=1, members=["a", "b2"]),
            S.heartbeat("b", "FENCED_INSTANCE_ID"),
            S.sync("b2", expect="NONE"),
        ],
    ),
    (
        "static_rejoin_with_changed_protocol_rebalances",
        [
            S.join("a", instance="ia", protocols=["range", "roundrobin"]),
            S.join("b", protocols=["range", "roundrobin"]),
            S.stabilize("a", "b"),
            S.expect(protocol="range"),
            S.join("a2", instance="ia", protocols=["roundrobin", "range"], expect="parked"),
            S.expect("PreparingRebalance", generation=1),
            S.join("b", protocols=["range", "roundrobin"], expect="NONE", generation=2),
            S.expect("CompletingRebalance", protocol="roundrobin"),
            S.sync_all(),
            S.expect("Stable", generation=2, members=["a2", "b"]),
        ],
    ),
    (
        "static_rejoin_while_completing_fences_parked_sync_and_rebalances",
        [
            S.join("a"),
            S.join("b", instance="ib"),
            S.until("CompletingRebalance"),
            S.sync("b", expect="parked"),
            S.join("b2", instance="ib", expect="parked"),
            S.expect_sync("b", "FENCED_INSTANCE_ID"),
            S.expect("PreparingRebalance", generation=1, members=["a", "b2"]),
            S.join("a", expect="NONE", generation=2),
            S.sync_all(),
            S.expect("Stable", generation=2, members=["a", "b2"]),
        ],
    ),
    (
        "static_member_not_rejoining_stays_in_next_generation",
        [
            S.join("a", session=30000),
            S.join("b", instance="ib", session=30000),
            S.stabilize("a", "b"),
            S.join("c", session=30000, expect="parked"),
            S.join("a", session=30000),
            S.advance(20000),
            S.expect("CompletingRebalance", generation=2, members=["a", "b", "c"]),
            S.sync_all(),
            S.expect("Stable", generation=2),
            S.heartbeat("b", "ILLEGAL_GENERATION", generation=1),
            S.heartbeat("b", "NONE", generation=2),
        ],
    ),
    (
        "static_member_removed_by_instance_id",
        [
            S.join("a"),
            S.join("b", instance="ib"),
            S.stabilize("a", "b"),
            S.leave("b", by_instance=True),
            S.expect("PreparingRebalance", members=["a"]),
            S.join("a", expect="NONE", generation=2),
            S.sync_all(),
        ],
    ),
    (
        "static_member_expires_on_session_timeout",
        [
            S.join("a", session=30000),
            S.join("b", instance="ib"),
            S.stabilize("a", "b"),
            S.keepalive(["a"], 9000),
            S.advance(990),
            S.expect("Stable", members=["a", "b"]),
            S.advance(10),
            S.expect("PreparingRebalance", members=["a"]),
            S.heartbeat("b", "UNKNOWN_MEMBER_ID"),
        ],
    ),
]


EXPIRY = [
    (
        "session_timeout_removes_member_and_rebalances",
        stable("a", "b")
        + [
            S.keepalive(["b"], 9000),
            S.advance(990),
            S.expect("Stable", members=["a", "b"]),
            S.advance(10),
            S.expect("PreparingRebalance", generation=1, members=["b"]),
            S.heartbeat("b", "REBALANCE_IN_PROGRESS"),
            S.join("b", expect="NONE", generation=2, leader="b", members=["b"]),
            S.sync_all(),
            S.expect("Stable", generation=2),
        ],
    ),
    (
        "every_member_expires_group_empty",
        stable("a")
        + [
            S.advance(9990),
            S.expect("Stable"),
            S.advance(10),
            S.expect("Empty", generation=2, members=[]),
            S.heartbeat("a", "UNKNOWN_MEMBER_ID"),
        ],
    ),
    (
        "member_awaiting_join_outlives_its_session",
        stable("a", "b")
        + [
            S.advance(1000),
            S.heartbeat("b"),
            S.join("a", expect="parked"),
            S.advance(9000),
            S.expect("PreparingRebalance", members=["a", "b"]),  # a's deadline passed
            S.advance(990),
            S.expect("PreparingRebalance", members=["a", "b"]),
            S.advance(10),  # b's deadline
            S.expect("CompletingRebalance", generation=2, members=["a"]),
            S.expect_join("a", code="NONE", generation=2, members=["a"]),
            S.sync_all(),
        ],
    ),
    (
        "heartbeats_keep_a_stable_group",
        stable("a", "b") + [S.keepalive(["a", "b"], 60000), S.expect("Stable", generation=1)],
    ),
]


# Found by these tests: when two deadlines fall on the same millisecond, the first callback can
# complete the join phase (answering a member's parked JoinGroup and rescheduling its session);
# the second, now stale deadline of the same batch must not fire (it used to, expiring the member
# just answered). Members that synced together share their session deadline, so this is the
# ordinary case. Kafka cancels the old heartbeat expiration when it schedules the next.
SAME_DEADLINE = [
    (
        "member_awaiting_join_outlives_its_session_same_deadline",
        stable("a", "b")
        + [
            S.join("a", expect="parked"),
            S.advance(9990),
            S.expect("PreparingRebalance", members=["a", "b"]),
            S.advance(10),
            S.expect("CompletingRebalance", generation=2, members=["a"]),
        ],
    ),
    (
        "pending_member_expiry_same_deadline_as_rejoined_leader",
        stable("a")
        + [
            S.join("b", first_only=True, expect="MEMBER_ID_REQUIRED"),
            S.join("a", expect="parked"),
            S.advance(10000),
            S.expect("CompletingRebalance", generation=2, members=["a"], pending=0),
        ],
    ),
]


COMMITS = [
    (
        "simple_commit_without_group",
        [S.commit(None, "NONE", generation=-1), S.expect(exists=False)],
    ),
    (
        "generation_for_unknown_group_before_v9",
        [S.commit(None, "ILLEGAL_GENERATION", generation=3, member_id="m", version=8)],
    ),
    (
        "generation_for_unknown_group_v9",
        [S.commit(None, "GROUP_ID_NOT_FOUND", generation=3, member_id="m", version=9)],
    ),
    (
        "stable_member_commits",
        stable("a", "b") + [S.commit("a", "NONE"), S.commit("b", "NONE", version=9)],
    ),
    ("stale_generation", stable("a") + [S.commit("a", "ILLEGAL_GENERATION", generation=0)]),
    (
        "unknown_member",
        stable("a") + [S.commit(None, "UNKNOWN_MEMBER_ID", member_id="made-up", generation=1)],
    ),
    (
        "simple_commit_into_live_group",
        stable("a") + [S.commit(None, "UNKNOWN_MEMBER_ID", generation=-1)],
    ),
    (
        "completing_rebalance",
        [
            S.join("a"),
            S.join("b"),
            S.until("CompletingRebalance"),
            S.commit("a", "REBALANCE_IN_PROGRESS"),
            S.commit("b", "REBALANCE_IN_PROGRESS"),
            S.commit("b", "ILLEGAL_GENERATION", generation=0),
            S.sync_all(),
            S.commit("b", "NONE"),
        ],
    ),
    (
        "preparing_rebalance_accepts_current_generation",
        stable("a", "b")
        + [
            S.join("c", expect="parked"),
            S.expect("PreparingRebalance"),
            S.commit("a", "NONE", generation=1),
            S.commit("c", "ILLEGAL_GENERATION", generation=0),
        ],
    ),
    (
        "empty_group_takes_simple_commits_only",
        stable("a")
        + [
            S.leave("a"),
            S.expect("Empty"),
            S.commit(None, "NONE", generation=-1),
            S.commit("a", "UNKNOWN_MEMBER_ID", generation=2),
        ],
    ),
]


# Every table above runs with default settings, one case per row.
TABLES = {
    "membership": MEMBERSHIP,
    "rebalance": REBALANCE,
    "static": STATIC,
    "expiry": EXPIRY,
    "same_deadline": SAME_DEADLINE,
    "commits": COMMITS,
}


# ============================== KIP-848 consumer groups in process ===============================


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


# ======================== classic members inside KIP-848 consumer groups =========================


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
    from corral.load import consumer_protocol as cp

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
