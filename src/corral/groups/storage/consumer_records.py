"""A KIP-848 consumer group's records in `__consumer_offsets`, in Kafka's formats (record types 3,
5, 6, 7, 8 and 16; reference/kip848.md §7), so Kafka's formatters read them and corral replays them.

Each record is the whole value of its key: replaying the latest record of every key rebuilds the
group, which is what `ConsumerGroup.replay` does, live and at load. Keys are non-flexible
(`[int16 type][int16-length strings]`); values are `[int16 version 0][flexible struct]`.
Schemas: apache/kafka group-coordinator/src/main/resources/common/message/ConsumerGroup*.json.
The bytes are the compiled core's (rust/groups/records/, from one schema table); this module
keeps the named records and maps them to the schema's fields.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from corral import _core

# Record types (the key's leading int16).
GROUP_EPOCH = 3
PARTITION_METADATA = 4  # obsolete since Kafka 4.1: read and dropped
MEMBER_METADATA = 5
TARGET_EPOCH = 6
TARGET_MEMBER = 7
CURRENT_ASSIGNMENT = 8
REGEX = 16
TYPES = frozenset(
    {
        GROUP_EPOCH,
        PARTITION_METADATA,
        MEMBER_METADATA,
        TARGET_EPOCH,
        TARGET_MEMBER,
        CURRENT_ASSIGNMENT,
        REGEX,
    }
)

# topic id (16 bytes) -> partitions, ascending.
Assignment = dict[bytes, tuple[int, ...]]
# topic id -> the assignment epoch of each of its partitions, in the order of the Assignment's
# partitions (KIP-1251's tagged AssignmentEpochs); a topic left out has none (the tag is absent;
# Kafka's default is an empty list, and a null list is read as none too).
AssignmentEpochs = dict[bytes, tuple[int, ...]]

# ------------------------------------------------------------------------------------ records


@dataclass(slots=True)
class GroupEpoch:
    group_id: str
    epoch: int
    metadata_hash: int = 0


@dataclass(slots=True)
class ClassicMetadata:
    """A classic protocol member of a consumer group (KIP-848 §5): its JoinGroup's timeout and
    protocols."""

    session_timeout_ms: int
    protocols: list[tuple[str, bytes]]


@dataclass(slots=True)
class MemberMetadata:
    group_id: str
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    topic_names: tuple[str, ...]
    regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMetadata | None = None


@dataclass(slots=True)
class TargetEpoch:
    group_id: str
    epoch: int
    timestamp_ms: int = 0


@dataclass(slots=True)
class TargetMember:
    group_id: str
    member_id: str
    partitions: Assignment


@dataclass(slots=True)
class CurrentAssignment:
    group_id: str
    member_id: str
    epoch: int
    previous_epoch: int
    state: int
    assigned: Assignment
    pending_revocation: Assignment = field(default_factory=dict)
    # KIP-1251 (Kafka 4.3+): when each partition was assigned to the member. Kafka writes them
    # for every topic; a record of an older writer has none.
    assigned_epochs: AssignmentEpochs = field(default_factory=dict)
    pending_epochs: AssignmentEpochs = field(default_factory=dict)
    # Its value bytes once encoded (`value_of`): the network thread's view keeps them for a
    # member it may move (rust/groups/consumer_epoch_moves.rs), and the write then reuses them.
    encoded: bytes | None = field(default=None, compare=False, repr=False)


@dataclass(slots=True)
class RegexTopics:
    group_id: str
    regex: str
    topics: tuple[str, ...]
    version: int
    timestamp_ms: int


@dataclass(slots=True)
class ConsumerTombstone:
    """The tombstone of one key: `kind` is the record type, `name` the member id (types 5, 7, 8),
    the regex (16) or None (3, 4, 6)."""

    kind: int
    group_id: str
    name: str | None = None


ConsumerRecord = (
    GroupEpoch
    | MemberMetadata
    | TargetEpoch
    | TargetMember
    | CurrentAssignment
    | RegexTopics
    | ConsumerTombstone
)


# ------------------------------------------------------------------------------------- writing


def _topics(assignment: Assignment, epochs: AssignmentEpochs) -> list[tuple[Any, ...]]:
    """The (topic id, partitions, assignment epochs) of an assignment, in topic id order (stable
    bytes); a topic without epochs has the empty list, Kafka's default, which is left out."""
    return [(t, assignment[t], epochs.get(t, ())) for t in sorted(assignment)]


def key_of(record: ConsumerRecord) -> bytes:
    if isinstance(record, ConsumerTombstone):
        kind, name = record.kind, record.name
    else:
        kind, name = _KIND[type(record)], _NAME_OF[type(record)](record)
    fields = (record.group_id,) if name is None else (record.group_id, name)
    return _core.record_key(kind, fields)


def value_of(record: ConsumerRecord) -> bytes | None:
    """The value bytes (version 0), None for a tombstone."""
    if isinstance(record, ConsumerTombstone):
        return None
    if isinstance(record, CurrentAssignment):
        if record.encoded is None:
            record.encoded = _core.record_value(CURRENT_ASSIGNMENT, 0, _value_fields(record))
        return record.encoded
    return _core.record_value(_KIND[type(record)], 0, _value_fields(record))


def _value_fields(record: ConsumerRecord) -> tuple[Any, ...]:
    """The record's value fields, in the order of its schema (rust/groups/records/schema.rs)."""
    if isinstance(record, GroupEpoch):
        return (record.epoch, record.metadata_hash)
    if isinstance(record, MemberMetadata):
        # Tag 0, ClassicMemberMetadata: Kafka's default is an empty struct (timeout 0, no
        # protocols), left out, and read back as a classic member; None (not a classic member)
        # is written as null.
        classic = record.classic
        return (
            record.instance_id,
            record.rack_id,
            record.client_id,
            record.client_host,
            record.topic_names,
            record.regex,
            record.rebalance_timeout_ms,
            record.server_assignor,
            None if classic is None else (classic.session_timeout_ms, classic.protocols),
        )
    if isinstance(record, TargetEpoch):
        return (record.epoch, record.timestamp_ms)
    if isinstance(record, TargetMember):
        return ([(t, record.partitions[t]) for t in sorted(record.partitions)],)
    if isinstance(record, CurrentAssignment):
        return (
            record.epoch,
            record.previous_epoch,
            record.state,
            _topics(record.assigned, record.assigned_epochs),
            _topics(record.pending_revocation, record.pending_epochs),
        )
    if isinstance(record, RegexTopics):
        return (record.topics, record.version, record.timestamp_ms)
    raise TypeError(f"not a consumer group record: {record!r}")


_KIND = {
    GroupEpoch: GROUP_EPOCH,
    MemberMetadata: MEMBER_METADATA,
    TargetEpoch: TARGET_EPOCH,
    TargetMember: TARGET_MEMBER,
    CurrentAssignment: CURRENT_ASSIGNMENT,
    RegexTopics: REGEX,
}
# The key's second field (the member or the regex) of each record type; None: the group only.
_NAME_OF: dict[type, Callable[[Any], str | None]] = {
    GroupEpoch: lambda r: None,
    TargetEpoch: lambda r: None,
    MemberMetadata: lambda r: r.member_id,
    TargetMember: lambda r: r.member_id,
    CurrentAssignment: lambda r: r.member_id,
    RegexTopics: lambda r: r.regex,
}


# ------------------------------------------------------------------------------------- reading


def _assignment(topics: tuple[Any, ...]) -> tuple[Assignment, AssignmentEpochs]:
    """An assignment and its topics' AssignmentEpochs (tag 0, KIP-1251): a null or empty list
    (Kafka's default) is none."""
    return {t[0]: t[1] for t in topics}, {t[0]: t[2] for t in topics if t[2]}


def decode(key: bytes, value: bytes | None) -> ConsumerRecord | None:
    """The record of a consumer-group key/value; None for the obsolete partition metadata.
    ValueError for malformed bytes or a value version corral does not read."""
    kind, key_fields = _core.decode_record_key(key)
    if kind not in TYPES or key_fields is None:
        raise ValueError(f"record type {kind} is not a consumer group record")
    return from_fields(kind, key_fields, value)


def from_fields(
    kind: int, key_fields: tuple[Any, ...], value: bytes | None
) -> ConsumerRecord | None:
    """The record of a consumer-group key (decoded) and value."""
    if kind == PARTITION_METADATA:
        return None
    group_id = key_fields[0]
    # The member id (types 5, 7, 8) or the regex (16); None for the group's own records.
    name: Any = key_fields[1] if len(key_fields) > 1 else None
    if value is None:
        return ConsumerTombstone(kind, group_id, name)
    _, v = _core.decode_record_value(kind, value)
    if kind == CURRENT_ASSIGNMENT:
        assigned, assigned_epochs = _assignment(v[3])
        pending, pending_epochs = _assignment(v[4])
        return CurrentAssignment(
            group_id, name, v[0], v[1], v[2], assigned, pending, assigned_epochs, pending_epochs
        )
    if kind == TARGET_MEMBER:
        return TargetMember(group_id, name, {t: p for t, p in v[0]})
    if kind == MEMBER_METADATA:
        classic = v[8]
        return MemberMetadata(
            group_id,
            name,
            v[0],
            v[1],
            v[2],
            v[3],
            v[4],
            v[5],
            v[6],
            v[7],
            None if classic is None else ClassicMetadata(classic[0], list(classic[1])),
        )
    if kind == GROUP_EPOCH:
        return GroupEpoch(group_id, v[0], v[1])
    if kind == TARGET_EPOCH:
        return TargetEpoch(group_id, v[0], v[1])
    return RegexTopics(group_id, name, v[0], v[1], v[2])
