"""Replaying the consumer group records (KIP-848's 3, 5-8 and 16, and their tombstones) into a
shard's memory: live, as a consumer write applies them, and at load. Registered with the consumer
group type in the shard's `types` (shard.py).

A consumer record for a group id an empty classic group holds converts it (the classic group is
forgotten); the group epoch's tombstone removes the group, and at load, when offsets remain, an
empty classic group keeps them, as a live conversion back leaves them."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.groups.consumer.reconcile import MemberState
from corral.groups.consumer.state import ConsumerGroup
from corral.groups.storage import consumer_records as cr
from corral.observability.log_lines import fields

if TYPE_CHECKING:
    from corral import _core
    from corral.groups.classic.rebalance import ClassicRebalance
    from corral.groups.consumer.protocol import ConsumerGroups
    from corral.groups.events import AnalyticsEvents
    from corral.groups.group import Group, Groups
    from corral.groups.metrics import GroupMetrics

log = logging.getLogger("corral.groups")


class ConsumerReplay:
    record_types = (
        cr.GroupEpoch,
        cr.MemberMetadata,
        cr.TargetEpoch,
        cr.TargetMember,
        cr.CurrentAssignment,
        cr.RegexTopics,
        cr.ConsumerTombstone,
    )

    def __init__(
        self,
        groups: Groups,
        consumer: ConsumerGroups,
        rebalance: ClassicRebalance,
        offset_map: _core.OffsetMap,
        view: _core.ConsumerHeartbeatView | None,
        assignment_interval_ms: Callable[[str], int],
        metrics: GroupMetrics,
        events: AnalyticsEvents,
        forget: Callable[[Group], None],
    ):
        self.groups = groups
        self.consumer = consumer
        # An emptied consumer group's offsets stay with a new empty classic group.
        self.rebalance = rebalance
        self.offset_map = offset_map
        self.view = view
        self.assignment_interval_ms = assignment_interval_ms
        self.metrics = metrics
        self.events = events
        # The shard's: a group of any type leaves memory.
        self.forget = forget

    def replay(self, record: cr.ConsumerRecord, loading: bool) -> None:
        group_id = record.group_id
        group = self.groups.get(group_id)
        tombstone = record if isinstance(record, cr.ConsumerTombstone) else None
        if tombstone is not None and tombstone.kind == cr.GROUP_EPOCH:
            if isinstance(group, ConsumerGroup):
                del self.groups[group_id]
                self.forget(group)
                if loading and self.offset_map.count(group_id):
                    # It became a classic group that wrote no record yet: its offsets stay
                    # with an empty classic group, as a live conversion leaves them.
                    self.rebalance.new_group(group_id)
            return
        if not isinstance(group, ConsumerGroup):
            if tombstone is not None:
                return
            if group is not None:
                self.forget(group)  # an empty classic group converted
            group = self.groups[group_id] = ConsumerGroup(
                group_id, self.view, self.assignment_interval_ms
            )
        leaving = (
            group.members.get(tombstone.name or "")
            if tombstone is not None and tombstone.kind == cr.MEMBER_METADATA
            else None
        )
        if not loading:
            if isinstance(record, cr.GroupEpoch) and record.epoch > group.group_epoch:
                self.metrics.consumer_rebalances += 1
            if log.isEnabledFor(logging.DEBUG):
                _debug(record, getattr(record, "member_id", None) in group.members)
            self.events.consumer_record(group, record, leaving)
        group.replay(record)
        if leaving is not None:
            # After the replay: the network thread no longer finds the member, so it cannot
            # schedule the session timer again once it is cancelled.
            self.consumer.cancel_member_timers(leaving)


def _debug(record: cr.ConsumerRecord, known_member: bool) -> None:
    """DEBUG: what a live consumer group record changes (`known_member`: its member was in the
    group already)."""
    member, epoch = getattr(record, "member_id", None), getattr(record, "epoch", None)
    if isinstance(record, cr.GroupEpoch):
        what = f"group epoch {epoch} (rebalance)"
    elif isinstance(record, cr.TargetEpoch):
        what = f"target assignment for epoch {epoch} computed"
    elif isinstance(record, cr.CurrentAssignment):
        what = f"member {member} at epoch {epoch} ({MemberState.of(record.state).name.lower()})"
    elif isinstance(record, cr.MemberMetadata):
        what = f"member {member} {'updated' if known_member else 'joined'}"
    elif isinstance(record, cr.ConsumerTombstone) and record.kind == cr.MEMBER_METADATA:
        member = record.name
        what = f"member {member} removed"
    else:
        return
    log.debug("group %s: %s", record.group_id, what, extra=fields(record.group_id, member, epoch))
