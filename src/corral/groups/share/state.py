"""A share group in memory (KIP-932; Kafka's ShareGroup): its members, epochs, target assignment and
which of its share partitions are initialized, as its records (storage/share_records.py) describe
it. Implements group.py's `Group`, so offsets, admin and expiry treat it like the other types:
share groups have no committed offsets (OffsetCommit and OffsetFetch answer GROUP_ID_NOT_FOUND,
"not a consumer group") and never expire.

Counts kept up to date (`subscribers`: members per subscribed topic name) keep every heartbeat's
cost independent of the group's size.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field

from corral.errors import ErrorCode
from corral.groups.storage import share_records as sr
from corral.groups.storage.records import Record
from corral.groups.storage.share_records import Assignment, TopicPartitions


@dataclass(slots=True)
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    topic_names: tuple[str, ...] = ()
    epoch: int = 0
    previous_epoch: int = 0
    assigned: Assignment = field(default_factory=dict)
    target: Assignment = field(default_factory=dict)
    # Its session deadline in the coordinator's timers (0: none armed yet).
    timer_key: int = 0

    def records(self, group_id: str) -> list[Record]:
        return [
            sr.ShareMemberMetadata(
                group_id,
                self.member_id,
                self.rack_id,
                self.client_id,
                self.client_host,
                self.topic_names,
            ),
            sr.ShareTargetMember(group_id, self.member_id, self.target),
            sr.ShareCurrentAssignment(
                group_id, self.member_id, self.epoch, self.previous_epoch, self.assigned
            ),
        ]


class ShareGroup:
    type = "share"

    def __init__(self, group_id: str):
        self.group_id = group_id
        # Kafka's ModernGroup starts a group at epoch 1 (its first member's join makes it 2).
        self.epoch = 1
        self.metadata_hash = 0
        self.assignment_epoch = 0
        self.assignment_timestamp_ms = 0
        self.members: dict[str, ShareMember] = {}
        # Subscribed topic name -> how many members subscribe to it.
        self.subscribers: Counter[str] = Counter()
        self.initializing: TopicPartitions = {}
        self.initialized: TopicPartitions = {}
        self.deleting_topics: dict[bytes, str] = {}
        # Its deletion is being written (Kafka's Dead).
        self.deleting = False
        # Topics changed since the last heartbeat looked (created, grown, deleted): the next one
        # checks for partitions to initialize and bumps the epoch when the assignable set moved.
        self.topics_changed = True
        # Partitions became initialized since the last target (Kafka's
        # initializedAssignmentPending): the next heartbeat bumps the epoch.
        self.assignment_pending = False

    # -- members ---------------------------------------------------------------------------------

    def subscribe(self, member: ShareMember, names: tuple[str, ...]) -> None:
        self.subscribers.subtract(member.topic_names)
        self.subscribers.update(names)
        for name in member.topic_names:
            if self.subscribers[name] <= 0:
                del self.subscribers[name]
        member.topic_names = names

    def assignable(self) -> dict[bytes, int]:
        """Topic id -> how many of its partitions may be assigned (the initialized ones, which
        are a prefix 0..n-1: partitions are initialized as topics grow)."""
        return {t: len(parts) for t, (_, parts) in self.initialized.items()}

    # -- Group -----------------------------------------------------------------------------------

    @property
    def state_name(self) -> str:
        if self.deleting:
            return "Dead"
        return "Stable" if self.members else "Empty"

    @property
    def protocol_type_name(self) -> str:
        return "share"

    def validate_offset_commit(
        self,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        version: int,
        partitions: Callable[[], Iterable[tuple[bytes, int]]] = lambda: (),
        transactional: bool = False,
    ) -> ErrorCode:
        return ErrorCode.GROUP_ID_NOT_FOUND  # "Group X is not a consumer group."

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode:
        return ErrorCode.NONE  # Kafka answers a share group's OffsetFetch with no offsets

    def validate_offset_delete(self) -> ErrorCode:
        return ErrorCode.GROUP_ID_NOT_FOUND

    def is_subscribed_to(self, topic: str) -> bool:
        return topic in self.subscribers

    def offset_expiry_base(self) -> tuple[bool, int | None]:
        return False, None  # share groups never expire

    def offset_expiry_kept_topics(self) -> Collection[str]:
        return self.subscribers.keys()

    def validate_delete(self) -> ErrorCode:
        if self.deleting:
            return ErrorCode.GROUP_ID_NOT_FOUND
        return ErrorCode.NON_EMPTY_GROUP if self.members else ErrorCode.NONE

    def is_empty(self) -> bool:
        return not self.members

    def delete_records(self) -> list[Record]:
        out: list[Record] = []
        for member_id in self.members:
            for kind in (sr.CURRENT_ASSIGNMENT, sr.TARGET_MEMBER, sr.MEMBER_METADATA):
                out.append(sr.ShareTombstone(kind, self.group_id, member_id))
        for kind in (sr.TARGET_EPOCH, sr.STATE_PARTITIONS, sr.GROUP_METADATA):
            out.append(sr.ShareTombstone(kind, self.group_id))
        return out

    def begin_delete(self) -> None:
        self.deleting = True

    def abort_delete(self) -> None:
        self.deleting = False

    def state_partitions_record(self) -> sr.ShareStatePartitions:
        return sr.ShareStatePartitions(
            self.group_id,
            dict(self.initializing),
            dict(self.initialized),
            dict(self.deleting_topics),
        )

    def stored_records(self) -> list[tuple[bytes, bytes]]:
        return self.stored_records_later()()

    def stored_records_later(self) -> Callable[[], list[tuple[bytes, bytes]]]:
        records: list[sr.ShareRecord] = [
            sr.ShareGroupEpoch(self.group_id, self.epoch, self.metadata_hash),
            self.state_partitions_record(),
            sr.ShareTargetEpoch(self.group_id, self.assignment_epoch, self.assignment_timestamp_ms),
        ]
        for member in self.members.values():
            records.extend(member.records(self.group_id))  # type: ignore[arg-type]

        def encode() -> list[tuple[bytes, bytes]]:
            out = []
            for record in records:
                value = sr.value_of(record)
                assert value is not None, "a live group's records are values"
                out.append((sr.key_of(record), value))
            return out

        return encode
