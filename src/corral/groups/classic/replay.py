"""Replaying the classic group records (GroupMetadata and its tombstone) into a shard's memory:
live, once a write is durable, and at load. Registered with the classic group type in the
shard's `types` (shard.py); the offsets' records are offsets.py's.

The cases where another type holds the group id: a classic record that became durable after
its group was upgraded to a consumer group is dropped (the upgrade's records follow it in the
log); at load, the last type's records win (the other type's group is forgotten)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.groups.classic.state import ClassicGroup
from corral.groups.storage.records import GroupMetadata, GroupTombstone

if TYPE_CHECKING:
    from corral import _core
    from corral.groups.classic.rebalance import ClassicRebalance
    from corral.groups.group import Group, Groups


class ClassicReplay:
    record_types = (GroupMetadata, GroupTombstone)

    def __init__(
        self,
        groups: Groups,
        rebalance: ClassicRebalance,
        offset_map: _core.OffsetMap,
        forget: Callable[[Group], None],
    ):
        self.groups = groups
        self.rebalance = rebalance
        self.offset_map = offset_map
        # The shard's: a group of any type leaves memory.
        self.forget = forget

    def replay(self, record: GroupMetadata | GroupTombstone, loading: bool) -> None:
        if isinstance(record, GroupMetadata):
            self._metadata(record, loading)
        else:
            self._tombstone(record)

    def _metadata(self, record: GroupMetadata, loading: bool) -> None:
        group = self.groups.get(record.group_id)
        if not loading and isinstance(group, ClassicGroup):
            # The live classic group already is what its record says (the classic machine
            # wrote it); the record becomes what a snapshot or a restart would load.
            group.stored = record.value
            return
        if not loading and group is not None:
            return  # durable after the group became another type's: its records follow
        if group is not None:
            self.forget(group)
        group = self.rebalance.from_record(record.group_id, record.value)
        if not loading:
            for member in group.members.values():
                self.rebalance.schedule_heartbeat(member)

    def _tombstone(self, record: GroupTombstone) -> None:
        group = self.groups.get(record.group_id)
        if group is not None and not isinstance(group, ClassicGroup):
            return  # the classic key of a group that became another type's
        if group is not None:
            del self.groups[record.group_id]
            self.forget(group)
        # Whatever offsets a pending commit left behind go with the group.
        self.offset_map.delete_group(record.group_id)
