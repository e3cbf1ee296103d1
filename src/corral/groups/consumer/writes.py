"""The write path of consumer groups: a change's records are applied at once through the
coordinator's `replay` (the function loading uses) and appended to the log; the answer leaves once
they are durable. As in Kafka, later requests of the group see the records' effect before the
fsync; a failed write answers NOT_COORDINATOR and makes the group's next write rewrite the whole
group, so the log again describes memory. The moves the network thread made (members moved to
their group's target epoch, rust/groups/consumer_epoch_moves.rs) are applied here first."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.groups.classic import ClassicGroup
from corral.groups.consumer.migration import classic_protocols
from corral.groups.consumer.state import ConsumerGroup
from corral.groups.consumer.view_mirror import apply_moves
from corral.groups.storage import consumer_records as cr
from corral.groups.storage.records import GroupMetadata, GroupTombstone, Record
from corral.later import Later

if TYPE_CHECKING:
    from corral.groups.classic.rebalance import ClassicRebalance
    from corral.groups.events import AnalyticsEvents
    from corral.groups.group import Group, Groups
    from corral.groups.storage.writer import CoordinatorLog

# Records whose write pauses the network thread's moves of the group's members (above).
_PAUSING_MOVES = (cr.TargetEpoch, cr.TargetMember, GroupMetadata, GroupTombstone)


def apply_core_moves(
    writer: CoordinatorLog, groups: Mapping[str, Group], events: AnalyticsEvents
) -> None:
    """Memory follows the members the network thread moved to their group's target epoch since
    the last call (before any request is handled, and in every write of a consumer group): the
    moves of every group of the process, whatever its shard (`groups` maps ids to groups); a group
    one of whose moves did not become durable is rewritten whole by its next write."""
    path = writer.core_commits
    drained = path.drain_moves() if path is not None else None
    if drained is None:
        return
    moved, failed = drained
    by_group: dict[str, list[tuple[str, int, int]]] = {}
    for group_id, member_id, epoch, previous in moved:
        by_group.setdefault(group_id, []).append((member_id, epoch, previous))
    for group_id, moves in by_group.items():
        group = groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            events.members_moved(group, apply_moves(group, moves))
    for group_id in failed:
        group = groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            group.needs_rewrite = True


class ConsumerWrites:
    def __init__(
        self,
        groups: Groups,
        writer: CoordinatorLog,
        replay: Callable[[Record], None],
        rebalance: ClassicRebalance,
        events: AnalyticsEvents,
        apply_core_moves: Callable[[], None],
    ):
        self.groups = groups
        self.writer = writer
        self.replay = replay
        # A downgrade's classic group rebalances (its members rejoin with every protocol).
        self.rebalance = rebalance
        self.events = events
        # The process's: drains the network thread's moves for every shard (above).
        self.apply_core_moves = apply_core_moves

    def write(
        self,
        group_id: str,
        records: list[Record],
        batch: bytes | None = None,
        downgrade_rebalance: bool = True,
    ) -> Later:
        """Applies `records` now (through `replay`) and appends them (as `batch` when they come
        encoded); resolves with the write's error once durable. Records ending with a classic
        group record downgrade the group, with a rebalance unless `downgrade_rebalance` is
        False. The moves the network thread made before are applied first
        (rust/groups/consumer_epoch_moves.rs); while a write changes what a move is decided on (a
        new target, the whole group rewritten, a conversion) the network thread moves none of the
        group's members, so that none is moved to a target before the target is in the log.
        Other writes (a member's own records) need no such pause: the view's lock orders a
        move of a member before or after the replay (and so the append) of its records."""
        path = self.writer.core_commits
        if path is None:
            return self._write_now(group_id, records, batch, downgrade_rebalance)
        group = self.groups.get(group_id)
        pause = (
            group is None
            or getattr(group, "needs_rewrite", True)
            or any(isinstance(r, _PAUSING_MOVES) for r in records)
        )
        if not pause:
            self.apply_core_moves()
            return self._write_now(group_id, records, batch, downgrade_rebalance)
        path.python_writing_group(group_id, True)
        try:
            self.apply_core_moves()
            return self._write_now(group_id, records, batch, downgrade_rebalance)
        finally:
            path.python_writing_group(group_id, False)

    def _write_now(
        self, group_id: str, records: list[Record], batch: bytes | None, downgrade_rebalance: bool
    ) -> Later:
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and group.needs_rewrite:
            records = [*group.all_records(), *records]
            group.needs_rewrite = False
            batch = None
        downgrade = bool(records) and isinstance(records[-1], GroupMetadata)
        protocols = classic_protocols(group, records) if downgrade else {}
        for record in records:
            self.replay(record)
        if downgrade:
            classic = self.groups.get(group_id)
            if isinstance(classic, ClassicGroup):
                self._downgraded(classic, protocols, downgrade_rebalance)
        written = self.writer.write(group_id, records, applied=True, batch=batch)

        def failed(error: ErrorCode) -> None:
            if error:
                current = self.groups.get(group_id)
                if isinstance(current, ConsumerGroup):
                    current.needs_rewrite = True

        written.then(failed)
        return written

    def _downgraded(
        self, classic: ClassicGroup, protocols: dict[str, list[tuple[str, bytes]]], rebalance: bool
    ) -> None:
        """After a downgrade's records: the classic group's members support every protocol
        they joined with (the record keeps only the chosen one), and rejoin if `rebalance`."""
        for member in classic.members.values():
            if member.member_id in protocols:
                classic.update(
                    member,
                    protocols[member.member_id],
                    member.rebalance_timeout_ms,
                    member.session_timeout_ms,
                    None,
                )
        if rebalance:
            self.rebalance.prepare_rebalance(
                classic, "the group moved from the consumer to the classic protocol"
            )
