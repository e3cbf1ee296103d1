"""Classic groups in process: a driver that plays named members through
JoinGroup/SyncGroup/Heartbeat/LeaveGroup/OffsetCommit validation, checking the group's invariants
after every step, and the steps (`S`) of the state machine's scripted cases."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import trio

from corral.config.settings import Settings
from corral.errors import ErrorCode
from corral.groups.classic import ClassicGroup, ClassicState
from corral.groups.coordinator import GroupCoordinator
from corral.later import Later
from corral.load import consumer_protocol as cp
from harness.common import (
    FakeClock,
    FakeLog,
    InvariantError,
    code,
    join_request,
    patched_clock,
    subscription,
)


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
