"""No cost that grows with the group (DESIGN.md; issue 29 item 1), for KIP-848 consumer groups,
in process: groups of 1,000, 10,000 and 50,000 members live side by side in one coordinator, and
each per-request operation costs the same in all three: a join, an incremental heartbeat (the
Python path), an offset commit, a change of subscribed topics, of regex, of server assignor, a
leave, a static member's temporary leave and rejoin under a new id, a session expiry, and a
classic member's JoinGroup, Heartbeat and LeaveGroup. A whole group expiring costs O(members): an expiry costs
the same with 50,000 members left, with a few thousand, and in a 1,000-member group.

Cost is measured twice. Python bytecode instructions executed (sys.settrace opcode events;
median of runs) are exact and immune to the shared machine's noise: they catch any Python loop
over members, regexes or topics that grows with the group, and must stay within 1.25x of the
1,000-member group's. Time (perf_counter, the least mean per operation over batches, the three
groups' batches interleaved so that a noisy moment hits all of them, cyclic GC off while timing)
catches what bytecode misses (a loop in C: a copy, a set of every member), within 2x.

What this measures is the per-request bookkeeping only, not the target assignment (item 2 of the
issue): `group.consumer.assignment.interval.ms` is an hour and the groups' target of epoch 2 was
just computed, so no target is computed while the test runs; every epoch bump waits for the next
one, and members reconcile toward the existing target.

The groups are built as a coordinator loading them from its log does (their records replayed,
then every session armed), as joins would leave them, only faster: a mix of members subscribed
by name, by a regex they share, by a regex of their own (so a group holds thousands of regexes),
static members, members naming a server assignor, and classic-protocol members (1 in 20).
"""

from __future__ import annotations

import gc
import statistics
import time
import uuid
from collections.abc import Callable

from harness import (
    FakeLog,
    Topics,
    join_request,
    make_coordinator,
    opcodes,
    request,
    subscription,
)

from corral.clock import wall_ms
from corral.errors import ErrorCode
from corral.groups.consumer import ConsumerGroup
from corral.groups.consumer.members import resolve_regex
from corral.groups.consumer.targets.inputs import metadata_hash
from corral.groups.storage import consumer_records as cr

SIZES = (1_000, 10_000, 50_000)
HOUR_MS = 3_600_000
SETTINGS = {
    "group.consumer.assignment.interval.ms": HOUR_MS,
    "group.consumer.max.assignment.interval.ms": HOUR_MS,
}
NAMES = ["t0", "t1"]
CLASSIC_PROTOCOLS = ["range", "cooperative-sticky"]
# How far a big group's cost may be from the 1,000-member group's.
MAX_OPCODE_RATIO = 1.25
MAX_TIME_RATIO = 2.0


def coordinator():
    """A coordinator with four topics whose analytics events go nowhere (a broker's go to its
    analytics log: making them is part of a request's cost)."""
    topics = Topics()
    for name in ("t0", "t1", "t2", "t3"):
        topics.add(name, 8)
    c = make_coordinator(topics, SETTINGS, log=FakeLog())
    c.events.sink = lambda event, time_ms: None
    return c


class Fleet:
    """The members of one group as the test plays them: what each one's client knows."""

    def __init__(self, coordinator, group_id: str):
        self.c = coordinator
        self.group_id = group_id
        self.epochs: dict[str, int] = {}  # consumer members' epochs
        self.classic: dict[str, int] = {}  # classic members' generations
        self.instances: dict[str, str] = {}  # static members' instance ids

    @property
    def group(self) -> ConsumerGroup:
        group = self.c.groups[self.group_id]
        assert isinstance(group, ConsumerGroup)
        return group

    def load(self, size: int) -> None:
        """Builds the group as a coordinator loading it from its log does (replaying its
        records, then arming every session), in the state joins leave it in: members of every
        kind STABLE at epoch 2, the target of epoch 2 (empty: what is measured here does not
        depend on it) computed now, the group epoch bumped by each later join."""
        gid, now = self.group_id, wall_ms()
        recs: list = []
        regexes: dict[str, cr.RegexTopics] = {}
        for i in range(size):
            member_id = str(uuid.uuid4())
            names, regex, instance_id, classic = NAMES, "", None, None
            kind = i % 10
            if i % 20 == 10:
                self.classic[member_id] = 2
                classic = cr.ClassicMetadata(
                    45000, [(name, subscription(NAMES)) for name in CLASSIC_PROTOCOLS]
                )
            elif kind in (3, 7):
                names, regex = (), "t[0-3]" if kind == 3 else f"t0|own-{i}"
                if regex not in regexes:
                    regexes[regex] = cr.RegexTopics(
                        gid, regex, resolve_regex(regex, self.c.topics.names()), 0, now
                    )
            elif kind == 5:
                instance_id = self.instances[member_id] = f"instance-{i}"
            if classic is None:
                self.epochs[member_id] = 2
            recs.append(
                cr.MemberMetadata(
                    gid,
                    member_id,
                    instance_id,
                    None,
                    "client",
                    "/127.0.0.1",
                    tuple(names),
                    regex,
                    60000,
                    "range" if i % 25 == 1 else None,
                    classic,
                )
            )
            recs.append(cr.CurrentAssignment(gid, member_id, 2, 1, 0, {}, {}))
        recs += regexes.values()
        hash_ = metadata_hash({*NAMES, "t2", "t3"}, self.c.topics)
        recs += [cr.GroupEpoch(gid, size + 1, hash_), cr.TargetEpoch(gid, 2, now)]
        for record in recs:
            self.c.replay(record)
        self.c.shard_of(self.group.group_id).consumer.arm_loaded_timers(self.group)

    def _heartbeat(self, req) -> dict:
        answer = self.c.consumer_heartbeat(req).value
        assert answer["error_code"] == ErrorCode.NONE, answer
        return answer

    def join(self, instance_id: str | None = None) -> str:
        member_id = str(uuid.uuid4())
        answer = self._heartbeat(
            request(
                self.group_id,
                member_id,
                0,
                names=NAMES,
                owned={},
                instance_id=instance_id,
                rebalance_timeout_ms=60000,
            )
        )
        self.epochs[member_id] = answer["member_epoch"]
        if instance_id is not None:
            self.instances[member_id] = instance_id
        return member_id

    def heartbeat(self, member_id: str, **changes) -> None:
        answer = self._heartbeat(
            request(
                self.group_id,
                member_id,
                self.epochs[member_id],
                owned={},
                instance_id=self.instances.get(member_id),
                **changes,
            )
        )
        self.epochs[member_id] = answer["member_epoch"]

    def commit(self, member_id: str) -> None:
        offsets = self.c.offsets
        assert (
            offsets.commit_error(self.group_id, member_id, None, self.epochs[member_id], 9)
            == ErrorCode.NONE
        )
        offsets.commit(self.group_id, [("t0", [(0, 42, -1, "")])], 0, -1)

    def leave(self, member_id: str) -> None:
        self._heartbeat(request(self.group_id, member_id, -1))
        del self.epochs[member_id]

    def restart_static(self, member_id: str) -> str:
        """A static member leaves temporarily (epoch -2), then rejoins under a new id."""
        instance_id = self.instances.pop(member_id)
        self._heartbeat(request(self.group_id, member_id, -2, instance_id=instance_id))
        del self.epochs[member_id]
        return self.join(instance_id=instance_id)

    def expire(self, member_id: str) -> None:
        """The member's session timer fires."""
        member = self.group.members[member_id]
        callback, *args = self.c.timers.callbacks[member.session_key]
        callback(*args)
        assert member_id not in self.group.members
        self.epochs.pop(member_id, None)
        self.classic.pop(member_id, None)

    def classic_join(self) -> str:
        member_id = str(uuid.uuid4())
        answer = self.c.join(
            join_request(self.group_id, member_id, subscription(NAMES), protocols=CLASSIC_PROTOCOLS)
        ).value
        assert answer["error_code"] == ErrorCode.NONE, answer
        self.classic[member_id] = answer["generation_id"]
        return member_id

    def classic_heartbeat(self, member_id: str) -> None:
        assert (
            self.c.heartbeat(self.group_id, member_id, None, self.classic[member_id])
            == ErrorCode.NONE
        )

    def classic_leave(self, member_id: str) -> None:
        assert self.c.leave(self.group_id, [(member_id, None)]).value == (
            ErrorCode.NONE,
            [ErrorCode.NONE],
        )
        del self.classic[member_id]


def operations(fleet: Fleet) -> dict[str, Callable[[], object]]:
    """One of each per-request operation on `fleet`'s group, as closures of no argument that
    leave the group as big as they found it (a join is undone by the leave that follows it)."""
    state: dict[str, str] = {}

    def join() -> None:
        state["new"] = fleet.join()

    def static_join() -> None:
        state["static"] = fleet.join(instance_id=f"restart-{uuid.uuid4()}")

    def static_restart() -> None:
        state["static"] = fleet.restart_static(state["static"])

    def classic_join() -> None:
        state["classic"] = fleet.classic_join()

    return {
        "join": join,
        "heartbeat": lambda: fleet.heartbeat(state["new"]),
        "commit": lambda: fleet.commit(state["new"]),
        "subscription change": lambda: fleet.heartbeat(state["new"], names=["t0", "t2"]),
        "regex change": lambda: fleet.heartbeat(state["new"], regex=f"t1|own-{uuid.uuid4()}"),
        "assignor change": lambda: fleet.heartbeat(state["new"], assignor="uniform"),
        "leave": lambda: fleet.leave(state["new"]),
        "static join": static_join,
        "static restart": static_restart,
        "session expiry": lambda: fleet.expire(state["static"]),
        "classic join": classic_join,
        "classic heartbeat": lambda: fleet.classic_heartbeat(state["classic"]),
        "classic leave": lambda: fleet.classic_leave(state["classic"]),
    }


def measure(fleets: list[Fleet], rounds: int, per_batch: int) -> dict[str, list[float]]:
    """Per operation, per fleet: the least mean time (s) over `rounds` batches of `per_batch`
    runs of the operation sequence, the fleets' batches interleaved."""
    ops = [operations(f) for f in fleets]
    best = {name: [float("inf")] * len(fleets) for name in ops[0]}
    for _ in range(rounds):
        for k, fleet_ops in enumerate(ops):
            spent = dict.fromkeys(fleet_ops, 0.0)
            for _ in range(per_batch):
                for name, operation in fleet_ops.items():
                    started = time.perf_counter()
                    operation()
                    spent[name] += time.perf_counter() - started
            for name, total in spent.items():
                best[name][k] = min(best[name][k], total / per_batch)
    return best


def count_opcodes(fleets: list[Fleet], runs: int) -> dict[str, list[float]]:
    """Per operation, per fleet: the median bytecode count over `runs` runs."""
    counts: dict[str, list[list[int]]] = {}
    for k, fleet in enumerate(fleets):
        for _ in range(runs):
            for name, operation in operations(fleet).items():
                counts.setdefault(name, [[] for _ in fleets])[k].append(opcodes(operation))
    return {name: [statistics.median(c) for c in per_fleet] for name, per_fleet in counts.items()}


def excess(costs: dict[str, list[float]], limit: float, unit: str) -> list[str]:
    """The operations whose cost in a bigger group is over `limit` times the first group's."""
    out = []
    for name, per_size in costs.items():
        base = per_size[0]
        for size, cost in zip(SIZES[1:], per_size[1:]):
            if cost > limit * base:
                out.append(
                    f"{name}: {cost:.3g} {unit} at {size} members against {base:.3g} at "
                    f"{SIZES[0]} ({cost / base:.1f}x)"
                )
    return out


def report(title: str, costs: dict[str, list[float]], scale: float, unit: str) -> None:
    print(f"\n{title} at {', '.join(map(str, SIZES))} members:")
    for name, per_size in costs.items():
        print(f"  {name:20s} " + "  ".join(f"{c * scale:9.1f}" for c in per_size) + f" {unit}")


def test_per_request_cost_does_not_grow_with_the_group():
    c = coordinator()
    fleets = [Fleet(c, f"g{size}") for size in SIZES]
    for fleet, size in zip(fleets, SIZES):
        fleet.load(size)
        assert len(fleet.group.regexes) > size // 20 and fleet.group.classic_members >= size // 25
    gc.collect()
    gc.freeze()  # the groups are old objects: no collection walks them while measuring

    counted = count_opcodes(fleets, runs=9)
    report("bytecode instructions per operation", counted, 1, "")
    gc.disable()
    try:
        timed = measure(fleets, rounds=7, per_batch=20)
    finally:
        gc.enable()
    report("time per operation (least batch mean)", timed, 1e6, "us")
    for fleet, size in zip(fleets, SIZES):
        group = fleet.group
        assert len(group.members) == size
        assert group.group_epoch > group.assignment_epoch == 2, "a target was computed again"

    too_costly = excess(counted, MAX_OPCODE_RATIO, "instructions") + excess(
        timed, MAX_TIME_RATIO, "s"
    )
    assert not too_costly, "cost grows with the group:\n" + "\n".join(too_costly)


def test_a_whole_group_expiring_costs_what_its_members_do():
    """Every session of a 50,000-member group expires, one timer after the other (a network
    partition, a deploy that stops every consumer): an expiry costs the same whether 50,000
    members remain or a few thousand, and what one costs in a 1,000-member group, so the whole
    costs O(members)."""
    c = coordinator()
    small, big = Fleet(c, "small"), Fleet(c, "big")
    small.load(SIZES[0])
    big.load(SIZES[-1])
    gc.collect()
    gc.freeze()

    def expiring(fleet: Fleet):
        """Its members in join order (the last one speaks the consumer protocol: the group is
        never left with classic members only, which would downgrade it)."""
        return iter(list(fleet.group.members))

    def count(fleet: Fleet, members, n: int) -> float:
        """The median bytecode count of expiring the next n members."""
        return statistics.median(opcodes(lambda: fleet.expire(next(members))) for _ in range(n))

    def expire(fleet: Fleet, members, n: int) -> float:
        """Expires the next n members: the least mean time of batches of 500."""
        best = float("inf")
        for k in range(0, n, 500):
            batch = [next(members) for _ in range(min(500, n - k))]
            started = time.perf_counter()
            for member_id in batch:
                fleet.expire(member_id)
            best = min(best, (time.perf_counter() - started) / len(batch))
        return best

    gc.disable()
    try:
        members = expiring(small)
        in_small = count(small, members, 25)
        expire(small, members, SIZES[0] - 25)
        members = expiring(big)
        first = count(big, members, 25)
        assert first <= MAX_OPCODE_RATIO * in_small, (
            f"an expiry costs {first} instructions in a {SIZES[-1]}-member group, {in_small} in a "
            f"{SIZES[0]}-member one"
        )
        time_first = expire(big, members, 5_000)
        expire(big, members, SIZES[-1] - 10_050)
        last, time_last = count(big, members, 25), expire(big, members, 5_000)
    finally:
        gc.enable()
    assert not small.group.members and not big.group.members
    print(
        f"\nan expiry in a {SIZES[0]}-member group: {in_small:.0f} instructions; in a "
        f"{SIZES[-1]}-member one, with {SIZES[-1]} to {SIZES[-1] - 5_025} members left: "
        f"{first:.0f} instructions, {time_first * 1e6:.1f} us; with 5,025 to 0: {last:.0f} "
        f"instructions, {time_last * 1e6:.1f} us"
    )
    assert first <= MAX_OPCODE_RATIO * last
    assert time_first <= MAX_TIME_RATIO * time_last
