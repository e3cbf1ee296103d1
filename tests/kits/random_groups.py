"""Random classic-group operations against a real coordinator (joins, syncs, heartbeats, leaves,
commits, offset deletions, group deletions, expiry, time moving), and the durable state a restart
or another node must bring back: tests/unit/groups/test_replay.py (one process) and
tests/unit/cluster/test_cluster_replay.py (through a cluster's engine)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import trio
from harness import FakeClock, join_request, subscription

from corral.clock import wall_ms
from corral.errors import ErrorCode
from corral.groups.classic import ClassicGroup
from corral.groups.storage import records
from corral.groups.storage.writer import WRITE_FAILED
from corral.later import Later

if TYPE_CHECKING:
    from corral.broker import Broker

GROUPS = ["g0", "g1", "g2", "g3"]
NAMES = ["a", "b", "c", "d", "e"]
TOPICS = {"t0": 3, "t1": 2}


def durable_state(broker: Broker) -> list[tuple[bytes, bytes]]:
    """Everything a restart must bring back, as records: offsets and group metadata."""
    return sorted(broker.groups.snapshot_records())


def readable(state: list[tuple[bytes, bytes]]) -> list:
    out = []
    for key, value in state:
        record = records.decode(key, value)
        if isinstance(record, records.GroupMetadata):
            out.append((record.group_id, records.read_group_value(record.value)))
        else:
            out.append(record)
    return out


class RandomGroups:
    """Plays members of a few classic groups, commits, deletions and expiry at random."""

    def __init__(self, broker: Broker, clock: FakeClock, rng: random.Random):
        self.broker = broker
        self.coordinator = broker.groups
        self.clock = clock
        self.rng = rng
        self.wall_offset = 0  # how far the test moved wall time (offset expiry)
        self.ids: dict[tuple[str, str], str] = {}  # (group, name) -> member id
        self.joins: dict[tuple[str, str], Later] = {}
        self.writes: list[Later] = []
        self.counts: dict[str, int] = {}

    def now_wall(self) -> int:
        return wall_ms() + self.wall_offset

    def step(self) -> None:
        op = self.rng.choices(
            [
                "join",
                "sync",
                "heartbeat",
                "leave",
                "advance",
                "commit",
                "offset_delete",
                "delete_group",
                "expire",
            ],
            weights=[20, 25, 10, 4, 10, 25, 4, 2, 2],
        )[0]
        self.counts[op] = self.counts.get(op, 0) + 1
        getattr(self, op)(self.rng.choice(GROUPS))

    def join(self, group_id: str) -> None:
        name = self.rng.choice(NAMES)
        static = name in ("a", "b")
        member_id = self.ids.get((group_id, name), "") if self.rng.random() < 0.8 else ""
        req = join_request(
            group_id,
            member_id,
            subscription(list(TOPICS)),
            n=NAMES.index(name),
            instance_id=f"{group_id}-{name}" if static else None,
            session_timeout_ms=20000,
            rebalance_timeout_ms=8000,
            require_known_member_id=False,
        )
        answer = self.coordinator.join(req)
        self.joins[(group_id, name)] = answer
        answer.then(lambda value, key=(group_id, name): self._joined(key, value))

    def _joined(self, key, value) -> None:
        if value["error_code"] == ErrorCode.NONE:
            self.ids[key] = value["member_id"]

    def sync(self, group_id: str) -> None:
        answered = [
            (name, later.value)
            for (g, name), later in self.joins.items()
            if g == group_id and later.value is not None and later.value["error_code"] == 0
        ]
        if not answered:
            return
        name, value = self.rng.choice(answered)
        assignments = [
            (m["member_id"], self.rng.randbytes(self.rng.randrange(1, 12)))
            for m in value["members"]
        ]
        self.coordinator.sync(
            group_id,
            value["member_id"],
            f"{group_id}-{name}" if name in ("a", "b") else None,
            value["generation_id"],
            "consumer",
            value["protocol_name"],
            assignments,
        )

    def _member(self, group_id: str) -> tuple[str, str] | None:
        known = [(name, mid) for (g, name), mid in self.ids.items() if g == group_id]
        return self.rng.choice(known) if known else None

    def heartbeat(self, group_id: str) -> None:
        """Every known member of the group heartbeats (most stay in their sessions)."""
        group = self.coordinator.groups.get(group_id)
        if not isinstance(group, ClassicGroup):
            return
        for (g, name), mid in list(self.ids.items()):
            if g == group_id:
                self.coordinator.heartbeat(
                    group_id,
                    mid,
                    f"{group_id}-{name}" if name in ("a", "b") else None,
                    group.generation_id,
                )

    def leave(self, group_id: str) -> None:
        member = self._member(group_id)
        if member:
            name, mid = member
            left = self.coordinator.leave(
                group_id, [(mid, f"{group_id}-{name}" if name in ("a", "b") else None)]
            )
            self.writes.append(left.map(lambda answer: answer[0]))  # the group or write error

    def advance(self, _: str) -> None:
        ms = self.rng.choice([10, 100, 500, 2000, 2000, 25000])
        target = self.clock.now + ms
        while self.clock.now < target:
            self.clock.now = min(self.clock.now + 10, target)
            self.coordinator.timers.fire_due()
        self.wall_offset += ms

    def commit(self, group_id: str) -> None:
        offsets = self.coordinator.offsets
        group = self.coordinator.groups.get(group_id)
        member = self._member(group_id)
        if member and isinstance(group, ClassicGroup) and self.rng.random() < 0.7:
            name, mid = member
            args = (mid, f"{group_id}-{name}" if name in ("a", "b") else None, group.generation_id)
        else:
            args = ("", None, -1)  # a simple (admin) commit
        if offsets.commit_error(group_id, *args, 8):
            return
        topic = self.rng.choice(list(TOPICS))
        partitions = self.rng.sample(range(TOPICS[topic]), self.rng.randrange(1, TOPICS[topic] + 1))
        commits = [
            (p, self.rng.randrange(1000), self.rng.choice([-1, 3]), self.rng.choice(["", "m"]))
            for p in partitions
        ]
        expire = self.now_wall() + 30_000 if self.rng.random() < 0.1 else -1
        self.writes.append(offsets.commit(group_id, [(topic, commits)], self.now_wall(), expire))

    def offset_delete(self, group_id: str) -> None:
        topic = self.rng.choice(list(TOPICS))
        _, _, written = self.coordinator.offsets.delete(group_id, [(topic, [0, 1])])
        self.writes.append(written)

    def delete_group(self, group_id: str) -> None:
        self.writes.append(self.coordinator.delete_group(group_id))

    def expire(self, _: str) -> None:
        self.writes.append(self.coordinator.offsets.expire(self.now_wall()))

    async def settle(self) -> None:
        """Waits until every write made so far is durable and applied."""
        with trio.fail_after(10):
            while any(not w.resolved for w in self.writes) or self.broker.groups.writer._pending:
                await trio.sleep(0.001)
        # DeleteGroups answers refusals (NON_EMPTY_GROUP...) this way too; a write never fails here.
        failed = [w.value for w in self.writes if w.value == WRITE_FAILED]
        assert not failed, f"writes failed: {failed}"
        self.writes.clear()
