"""A share group's records in `__consumer_offsets`, in Kafka's formats (record types 10-15;
reference/share-groups.md §5), so Kafka's formatters read them and corral replays them.

As for consumer groups, each record is the whole value of its key (replaying the latest of every
key rebuilds the group); keys are `[int16 type][int16-length strings]`, values
`[int16 version 0][flexible struct]`, the bytes the compiled core's schema table's
(rust/groups/records/schema.rs). Schemas: apache/kafka group-coordinator/src/main/resources/
common/message/ShareGroup*.json.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from corral import _core

MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_EPOCH = 12
TARGET_MEMBER = 13
CURRENT_ASSIGNMENT = 14
STATE_PARTITIONS = 15
TYPES = frozenset(range(10, 16))
# Types keyed by group and member (the others by group only).
MEMBER_TYPES = frozenset({MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT})

# topic id -> partitions, ascending.
Assignment = dict[bytes, tuple[int, ...]]
# topic id -> (topic name, partitions): a ShareGroupStatePartitionMetadata list.
TopicPartitions = dict[bytes, tuple[str, tuple[int, ...]]]


@dataclass(slots=True)
class ShareMemberMetadata:
    group_id: str
    member_id: str
    rack_id: str | None
    client_id: str
    client_host: str
    topic_names: tuple[str, ...]


@dataclass(slots=True)
class ShareGroupEpoch:
    group_id: str
    epoch: int
    metadata_hash: int = 0


@dataclass(slots=True)
class ShareTargetEpoch:
    group_id: str
    epoch: int
    timestamp_ms: int = 0


@dataclass(slots=True)
class ShareTargetMember:
    group_id: str
    member_id: str
    partitions: Assignment


@dataclass(slots=True)
class ShareCurrentAssignment:
    group_id: str
    member_id: str
    epoch: int
    previous_epoch: int
    assigned: Assignment
    state: int = 0  # STABLE: share members never revoke


@dataclass(slots=True)
class ShareStatePartitions:
    """Which share partitions of the group are being initialized, are initialized (their state
    exists in `__share_group_state`: they may be assigned) and are being deleted."""

    group_id: str
    initializing: TopicPartitions = field(default_factory=dict)
    initialized: TopicPartitions = field(default_factory=dict)
    deleting: dict[bytes, str] = field(default_factory=dict)


@dataclass(slots=True)
class ShareTombstone:
    """The tombstone of one key: `kind` its record type, `member_id` for types 10, 13 and 14."""

    kind: int
    group_id: str
    member_id: str | None = None


ShareRecord = (
    ShareMemberMetadata
    | ShareGroupEpoch
    | ShareTargetEpoch
    | ShareTargetMember
    | ShareCurrentAssignment
    | ShareStatePartitions
    | ShareTombstone
)

_KIND: dict[type, int] = {
    ShareMemberMetadata: MEMBER_METADATA,
    ShareGroupEpoch: GROUP_METADATA,
    ShareTargetEpoch: TARGET_EPOCH,
    ShareTargetMember: TARGET_MEMBER,
    ShareCurrentAssignment: CURRENT_ASSIGNMENT,
    ShareStatePartitions: STATE_PARTITIONS,
}


def key_of(record: ShareRecord) -> bytes:
    kind = record.kind if isinstance(record, ShareTombstone) else _KIND[type(record)]
    member = getattr(record, "member_id", None)
    fields = (record.group_id, member) if kind in MEMBER_TYPES else (record.group_id,)
    return _core.record_key(kind, fields)


def _topics(assignment: Assignment) -> list[tuple[bytes, tuple[int, ...]]]:
    return [(t, assignment[t]) for t in sorted(assignment)]


def _infos(topics: TopicPartitions) -> list[tuple[bytes, str, tuple[int, ...]]]:
    return [(t, *topics[t]) for t in sorted(topics)]


def value_of(record: ShareRecord) -> bytes | None:
    """The value bytes (version 0), None for a tombstone."""
    if isinstance(record, ShareTombstone):
        return None
    fields: tuple[Any, ...]
    if isinstance(record, ShareMemberMetadata):
        fields = (record.rack_id, record.client_id, record.client_host, record.topic_names)
    elif isinstance(record, ShareGroupEpoch):
        fields = (record.epoch, record.metadata_hash)
    elif isinstance(record, ShareTargetEpoch):
        fields = (record.epoch, record.timestamp_ms)
    elif isinstance(record, ShareTargetMember):
        fields = (_topics(record.partitions),)
    elif isinstance(record, ShareCurrentAssignment):
        fields = (record.epoch, record.previous_epoch, record.state, _topics(record.assigned))
    else:
        fields = (
            _infos(record.initializing),
            _infos(record.initialized),
            [(t, record.deleting[t]) for t in sorted(record.deleting)],
        )
    return _core.record_value(_KIND[type(record)], 0, fields)


def from_fields(kind: int, key_fields: tuple[Any, ...], value: bytes | None) -> ShareRecord:
    """The record of a share-group key (decoded) and value."""
    group_id = key_fields[0]
    member: Any = key_fields[1] if len(key_fields) > 1 else None
    if value is None:
        return ShareTombstone(kind, group_id, member)
    _, v = _core.decode_record_value(kind, value)
    if kind == MEMBER_METADATA:
        return ShareMemberMetadata(group_id, member, v[0], v[1], v[2], tuple(v[3]))
    if kind == GROUP_METADATA:
        return ShareGroupEpoch(group_id, v[0], v[1])
    if kind == TARGET_EPOCH:
        return ShareTargetEpoch(group_id, v[0], v[1])
    if kind == TARGET_MEMBER:
        return ShareTargetMember(group_id, member, {t: tuple(p) for t, p in v[0]})
    if kind == CURRENT_ASSIGNMENT:
        return ShareCurrentAssignment(
            group_id, member, v[0], v[1], {t: tuple(p) for t, p in v[3]}, v[2]
        )
    return ShareStatePartitions(
        group_id,
        {t: (name, tuple(p)) for t, name, p in v[0]},
        {t: (name, tuple(p)) for t, name, p in v[1]},
        {t: name for t, name in v[2]},
    )
