"""Replaying share group records (types 10-15 and their tombstones) into a shard's memory: live, as
a share write applies them, and at load. Registered with the share group type in the shard's
registrations (shard.py). A share record for a group id an empty classic group holds replaces it;
the group epoch's tombstone removes the group (Kafka's replay of ShareGroupMetadata), and, live,
forgets its share partitions' state (`on_deleted`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from corral.groups.share.state import ShareGroup, ShareMember
from corral.groups.storage import share_records as sr

if TYPE_CHECKING:
    from corral.groups.group import Group, Groups
    from corral.groups.share.protocol import ShareGroups

log = logging.getLogger("corral.groups")


class ShareReplay:
    record_types = (
        sr.ShareMemberMetadata,
        sr.ShareGroupEpoch,
        sr.ShareTargetEpoch,
        sr.ShareTargetMember,
        sr.ShareCurrentAssignment,
        sr.ShareStatePartitions,
        sr.ShareTombstone,
    )

    def __init__(
        self,
        groups: Groups,
        shares: ShareGroups,
        forget: Callable[[Group], None],
        on_deleted: Callable[[ShareGroup], None],
    ):
        self.groups = groups
        self.shares = shares
        self.forget = forget
        self.on_deleted = on_deleted

    def _group(self, group_id: str) -> ShareGroup:
        group = self.groups.get(group_id)
        if isinstance(group, ShareGroup):
            return group
        if group is not None:
            self.forget(group)  # an empty classic group becomes a share group
        created = ShareGroup(group_id)
        self.groups[group_id] = created
        return created

    def replay(self, record: sr.ShareRecord, loading: bool) -> None:
        if isinstance(record, sr.ShareTombstone):
            self._tombstone(record, loading)
            return
        group = self._group(record.group_id)
        if isinstance(record, sr.ShareGroupEpoch):
            group.epoch, group.metadata_hash = record.epoch, record.metadata_hash
        elif isinstance(record, sr.ShareTargetEpoch):
            group.assignment_epoch = record.epoch
            group.assignment_timestamp_ms = record.timestamp_ms
        elif isinstance(record, sr.ShareStatePartitions):
            group.initializing = record.initializing
            group.initialized = record.initialized
            group.deleting_topics = record.deleting
        else:
            member = group.members.get(record.member_id)
            if member is None:
                member = group.members[record.member_id] = ShareMember(record.member_id)
            if isinstance(record, sr.ShareMemberMetadata):
                group.subscribe(member, record.topic_names)
                member.rack_id = record.rack_id
                member.client_id = record.client_id
                member.client_host = record.client_host
            elif isinstance(record, sr.ShareTargetMember):
                member.target = record.partitions
            else:
                member.epoch = record.epoch
                member.previous_epoch = record.previous_epoch
                member.assigned = record.assigned

    def _tombstone(self, record: sr.ShareTombstone, loading: bool) -> None:
        group = self.groups.get(record.group_id)
        if not isinstance(group, ShareGroup):
            return
        if record.kind == sr.MEMBER_METADATA and record.member_id is not None:
            member = group.members.pop(record.member_id, None)
            if member is not None:
                group.subscribe(member, ())
                self.shares.forget_member(member)
        elif record.kind == sr.GROUP_METADATA:
            del self.groups[record.group_id]
            self.forget(group)
            if not loading:
                self.on_deleted(group)
