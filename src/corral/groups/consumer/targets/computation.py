"""When and how a consumer group's target is computed (reference/kip848.md §2.3-2.5): Kafka's
batching (`group.consumer.assignment.interval.ms`), a new group's first target at once, an
incremental target for a big homogeneous group (incremental.py), the assignor inline for a small
group and in a worker thread for a big one. Held by `ConsumerGroups` (protocol.py) as `targets`."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import trio

from corral.assignors.builtin import UniformAssignor
from corral.clock import wall_ms
from corral.groups.consumer.assignment_records import EMPTY_ASSIGNMENT, as_sets
from corral.groups.consumer.member_state import ConsumerMember
from corral.groups.consumer.members import (
    others_than,
    preferred_assignor_after,
    regexes_after,
    replaced_members,
)
from corral.groups.consumer.reconcile import Partitions
from corral.groups.consumer.state import ConsumerGroup
from corral.groups.consumer.targets.incremental import incremental_records
from corral.groups.consumer.targets.inputs import TargetInputs, TopicImage, encoded_result
from corral.groups.consumer.view_mirror import mirror_group
from corral.groups.result import NO_RECORDS, Records
from corral.groups.storage import consumer_records as cr
from corral.groups.storage.records import Record
from corral.observability.log_lines import fields

if TYPE_CHECKING:
    from corral.assignors import Assignor, AssignorRegistry
    from corral.groups.consumer.writes import ConsumerWrites
    from corral.groups.group import Groups
    from corral.groups.metrics import GroupMetrics

log = logging.getLogger("corral.groups")

# A computation over more members plus partitions than this runs in a worker thread (when
# group.consumer.assignor.offload.enable): the built-ins take about a millisecond there.
OFFLOAD_ABOVE = 20_000


class TargetComputation:
    def __init__(
        self,
        groups: Groups,
        topics: TopicImage,
        assignors: AssignorRegistry,
        metrics: GroupMetrics,
        group_setting: Callable[[str, str], Any],
        writes: ConsumerWrites,
    ):
        self.groups = groups
        self.topics = topics
        self.assignors = assignors
        self.metrics = metrics
        self.group_setting = group_setting
        self.writes = writes
        # Where offloaded computations run: the coordinator's nursery, once it runs (None:
        # every computation is inline).
        self.nursery: trio.Nursery | None = None

    def maybe_compute_target(
        self,
        group: ConsumerGroup,
        group_epoch: int,
        member: ConsumerMember,
        updated: ConsumerMember,
        earlier: Iterable[Record],
        now: int,
    ) -> tuple[int, Partitions, Records]:
        """The target the member reconciles toward (its epoch, its partitions) and the records
        of a new one: computed now when the epoch moved and batching allows it (small groups,
        inline), else the current one (no records). `earlier`: the request's records so far."""
        current = (group.assignment_epoch, group.target_of(updated), NO_RECORDS)
        if group.assignment_epoch >= group_epoch or group.computing_epoch is not None:
            return current
        if not self._may_compute(group, now):
            return current
        moved = self._incremental(group, group_epoch, now, member, updated)
        if moved is not None:
            for record in moved:
                if isinstance(record, cr.TargetMember) and record.member_id == updated.member_id:
                    return group_epoch, as_sets(record.partitions), moved
            return group_epoch, group.target_of(updated), moved
        # A new (or emptied) group's first target is computed at once, however many
        # partitions: one member's costs O(partitions), and it gets them in this answer.
        first = group.assignment_timestamp_ms == 0 and len(group.members) <= (
            member.member_id in group.members
        )  # no other member
        if not first and self._offloads(group, extra=1):
            return current  # maybe_offload starts it once these records are applied
        members = [*others_than(group, member), updated]
        inputs = TargetInputs.of(
            group, group_epoch, members, self.topics, regexes_after(group, earlier)
        )
        preferred = preferred_assignor_after(group, replaced_members(group, member), updated)
        assignor = self.assignors.get(preferred) or self.assignors.default
        started = time.monotonic()
        target = inputs.compute(assignor)
        self.metrics.assignor_seconds.observe(time.monotonic() - started)
        if target is None:
            group.assignment_failed_ms = now  # retried after the assignment interval
            return current
        records = inputs.records(target, now)
        log.info(
            "group %s: target assignment for epoch %d (%d members, %s)",
            group.group_id,
            group_epoch,
            len(members),
            assignor.name,
            extra=fields(group.group_id, epoch=group_epoch),
        )
        return group_epoch, target.get(updated.member_id, EMPTY_ASSIGNMENT), records

    def _incremental(
        self,
        group: ConsumerGroup,
        epoch: int,
        now: int,
        member: ConsumerMember | None = None,
        updated: ConsumerMember | None = None,
    ) -> list[Record] | None:
        """The records of a target that moves only what the balance needs (incremental.py),
        when the group is a big homogeneous one on the built-in uniform assignor."""
        preferred = (
            group.preferred_assignor()
            if updated is None
            else preferred_assignor_after(group, replaced_members(group, updated), updated)
        )
        if not isinstance(self.assignors.get(preferred) or self.assignors.default, UniformAssignor):
            return None
        started = time.monotonic()
        moved = incremental_records(group, epoch, self.topics, now, member, updated)
        if moved is not None:
            self.metrics.assignor_seconds.observe(time.monotonic() - started)
            log.info(
                "group %s: target assignment for epoch %d (%d members changed, incremental)",
                group.group_id,
                epoch,
                len(moved) - 1,
                extra=fields(group.group_id, epoch=epoch),
            )
        return moved

    def _may_compute(self, group: ConsumerGroup, now: int) -> bool:
        interval = self.group_setting(group.group_id, "consumer.assignment.interval.ms")
        last = max(group.assignment_timestamp_ms, group.assignment_failed_ms)
        return last == 0 or interval == 0 or now >= last + interval

    def _offloads(self, group: ConsumerGroup, extra: int = 0) -> bool:
        """Whether the group's next target is computed in a worker thread: offload is on and
        its members plus subscribed partitions (what the built-ins are linear in) are many."""
        if (
            not self.group_setting(group.group_id, "consumer.assignor.offload.enable")
            or self.nursery is None
        ):
            return False
        topics = (self.topics.topic(name) for name in group.subscribed_topic_names())
        size = len(group.members) + extra + sum(t.partitions for t in topics if t is not None)
        return size > OFFLOAD_ABOVE

    def maybe_offload(self, group: ConsumerGroup) -> None:
        """A due target without waiting for a heartbeat: moved at once when that costs what
        moves (a leave from a big homogeneous group), or computed in a worker thread for a big
        group."""
        if (
            group.assignment_epoch >= group.group_epoch
            or group.computing_epoch is not None
            or not self._may_compute(group, wall_ms())
        ):
            return  # up to date, running or batched
        moved = self._incremental(group, group.group_epoch, wall_ms())
        if moved is not None:
            self.writes.write(group.group_id, moved)
        elif self._offloads(group):
            self._offload(group)

    def _offload(self, group: ConsumerGroup) -> None:
        inputs = TargetInputs.of(group, group.group_epoch, group.members.values(), self.topics)
        group.computing_epoch = inputs.epoch
        assignor = self.assignors.get(group.preferred_assignor()) or self.assignors.default
        assert self.nursery is not None, "_offloads is False without a nursery"
        self.nursery.start_soon(self._compute_offloaded, group, inputs, assignor)

    async def _compute_offloaded(
        self, group: ConsumerGroup, inputs: TargetInputs, assignor: Assignor
    ) -> None:
        """The computation, its records and their bytes in a worker thread; the loop only applies
        them (or, if members left meanwhile, makes the records again without them)."""
        started = time.monotonic()
        try:
            result = await trio.to_thread.run_sync(encoded_result, inputs, assignor, wall_ms())
        finally:
            group.computing_epoch = None
            self.metrics.assignor_seconds.observe(time.monotonic() - started)
        if (
            self.groups.get(group.group_id) is not group
            or group.deleting
            or group.assignment_epoch >= inputs.epoch
        ):
            return
        if result is None:
            group.assignment_failed_ms = wall_ms()
            mirror_group(group)  # the retry's due time
            return
        records, batch = result
        log.info(
            "group %s: target assignment for epoch %d (%d members, %s, worker thread)",
            group.group_id,
            inputs.epoch,
            len(inputs.members),
            assignor.name,
            extra=fields(group.group_id, epoch=inputs.epoch),
        )
        if any(member_id not in group.members for member_id, *_ in inputs.members):
            records = [
                r
                for r in records
                if not isinstance(r, cr.TargetMember) or r.member_id in group.members
            ]
            batch = None
        self.writes.write(group.group_id, records, batch)
        # Epoch bumps while it ran: the next computation, if batching allows it now.
        self.maybe_offload(group)
