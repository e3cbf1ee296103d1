"""What an assignor gets and returns: Kafka's `PartitionAssignor` contract (group-coordinator-api),
in Python.

Kafka: `GroupAssignment assign(GroupSpec, SubscribedTopicDescriber)`. Here: `assign(group,
partition_counts)`, where `group` is a `GroupSpec` (members with their subscribed topic ids, rack,
instance id and previous target assignment; the subscription type) and `partition_counts` maps
every topic id the members subscribe to to its partition count (Kafka's `numPartitions`). The
result maps member id -> topic id -> partitions.

Topic ids are opaque hashable values; use the 16-byte `bytes` form (what the wire and the
coordinator records carry): it hashes once per object, where a `uuid.UUID` hashes in Python on
every dict operation, which dominates the built-in assignors' time on large groups.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias, runtime_checkable

TopicId: TypeAlias = Hashable
"""A topic id: 16 bytes in corral (uuid.UUID(bytes=...) in the topic registry)."""

Partitions: TypeAlias = tuple[int, ...]
GroupAssignment: TypeAlias = Mapping[str, Mapping[TopicId, Partitions]]
"""member id -> topic id -> partitions (ascending, no duplicates); every member present. The
built-ins return a TargetAssignment (compact, read lazily), validate_assignment a dict."""


class SubscriptionType(enum.Enum):
    """Kafka's SubscriptionType: HOMOGENEOUS when every member subscribes to the same topics."""

    HOMOGENEOUS = "homogeneous"
    HETEROGENEOUS = "heterogeneous"


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """One member as the assignor sees it (Kafka's MemberSubscription + memberAssignment).

    `assignment` is the member's previous target assignment (the member's current one in
    Kafka's terms for the assignor); assignors may return it, unchanged, as the member's new one.
    Members with the same subscription should share one set object: the built-ins then find
    the group's subscription classes without comparing sets.
    """

    subscribed_topic_ids: Collection[TopicId]
    assignment: Mapping[TopicId, Collection[int]] = field(default_factory=dict)
    rack_id: str | None = None
    instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """The group (Kafka's GroupSpec). `members` is ordered: the built-ins break ties by it (and
    by sorted topic ids), so pass members in a stable order (e.g. the order they joined) for
    stable results."""

    members: Mapping[str, MemberSpec]
    subscription_type: SubscriptionType

    @classmethod
    def of(cls, members: Mapping[str, MemberSpec]) -> GroupSpec:
        """A GroupSpec whose subscription type is computed from the members."""
        return cls(members, subscription_type_of(members.values()))


def subscription_type_of(members: Iterable[MemberSpec]) -> SubscriptionType:
    """HOMOGENEOUS iff every member subscribes to the same topics (Kafka's rule without regexes)."""
    first = None
    for member in members:
        topics = member.subscribed_topic_ids
        if first is None:
            first = topics if isinstance(topics, (set, frozenset)) else frozenset(topics)
        elif topics is not first and first != (
            topics if isinstance(topics, (set, frozenset)) else frozenset(topics)
        ):
            return SubscriptionType.HETEROGENEOUS
    return SubscriptionType.HOMOGENEOUS


class AssignorError(Exception):
    """The assignment cannot be computed (Kafka's PartitionAssignorException), e.g. a member
    subscribes to a topic that `partition_counts` does not have."""


@runtime_checkable
class Assignor(Protocol):
    """A server-side assignor. `name` is what clients ask for (ConsumerGroupHeartbeat
    ServerAssignor, `group.remote.assignor` in the Java client).

    `assign` returns member id -> topic id -> partitions (any iterable of ints; the built-ins
    return ascending tuples). Members left out get nothing. It must not mutate its arguments.
    It may run in a worker thread, so it must not touch the event loop's state.
    """

    name: str

    def assign(
        self, group: GroupSpec, partition_counts: Mapping[TopicId, int]
    ) -> Mapping[str, Mapping[TopicId, Iterable[int]]]: ...
