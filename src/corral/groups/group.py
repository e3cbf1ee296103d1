"""What every group type offers the rest of the coordinator (Kafka's `Group` interface).

Offsets, admin and expiry talk to a group only through this protocol; they never ask which type
it is. Classic groups implement it in classic/state.py, KIP-848 consumer groups in
consumer/state.py; `GroupType` is what a shard asks of the object running a type's groups,
`Replayer` what replays records into its memory, and a `Registration` of both is how a group type
joins a shard (shard.py: one registration per type).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar

from corral.errors import ErrorCode
from corral.groups.storage.records import Record


class Group(Protocol):
    group_id: str
    # "classic", "consumer" or "share", as ListGroups v5 reports it.
    type: str

    @property
    def state_name(self) -> str:
        """The state as Kafka names it on the wire (ListGroups, DescribeGroups)."""
        ...

    @property
    def protocol_type_name(self) -> str:
        """The protocol type ListGroups shows ("consumer", "" for a group without members)."""
        ...

    # -- offsets ---------------------------------------------------------------------------------

    def validate_offset_commit(
        self,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        version: int,
        partitions: Callable[[], Iterable[tuple[bytes, int]]] = lambda: (),
        transactional: bool = False,
    ) -> ErrorCode:
        """Whether this member may commit now (Kafka's Group.validateOffsetCommit). `partitions`
        gives the (topic id, partition) pairs the commit writes, for the groups that check them
        (a consumer group, for an older member epoch: KIP-1251). `transactional`: a
        TxnOffsetCommit (`version` is then its version), which may name no member at all."""
        ...

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode: ...

    def validate_offset_delete(self) -> ErrorCode:
        """Whether offsets may be deleted at all; per topic, `is_subscribed_to` decides."""
        ...

    def is_subscribed_to(self, topic: str) -> bool: ...

    def offset_expiry_base(self) -> tuple[bool, int | None]:
        """(whether its offsets may expire now, the time retention counts from: None for each
        offset's commit time)."""
        ...

    def offset_expiry_kept_topics(self) -> Collection[str]:
        """Topics whose offsets never expire while the group is as it is (subscribed ones)."""
        ...

    # -- deletion --------------------------------------------------------------------------------

    def validate_delete(self) -> ErrorCode:
        """Whether DeleteGroups (or expiry) may delete it now."""
        ...

    def is_empty(self) -> bool: ...

    def delete_records(self) -> list[Record]:
        """The records that delete it (its offsets' tombstones are the offsets' business)."""
        ...

    def begin_delete(self) -> None:
        """Refuses changes while its deletion is being written (Kafka's Dead state)."""
        ...

    def abort_delete(self) -> None:
        """The deletion's write failed: the group is back as it was."""
        ...

    # -- views -----------------------------------------------------------------------------------

    def stored_records(self) -> list[tuple[bytes, bytes]]:
        """Its durable metadata as `__consumer_offsets` records, for a snapshot."""
        ...

    def stored_records_later(self) -> Callable[[], list[tuple[bytes, bytes]]]:
        """`stored_records` as a function a worker thread may call, what the loop must copy
        copied now (snapshots are made off the loop)."""
        ...


G = TypeVar("G", contravariant=True)


class GroupType(Protocol[G]):
    """What a shard asks of a group type over its groups' lives (Kafka's onLoaded and onUnloaded):
    each type registers the object that runs its groups, by the class of its groups, in the
    shard's `types` (shard.py)."""

    def on_loaded(self, group: G) -> None:
        """After the shard's load: the group's deadlines armed (members get a fresh session)."""
        ...

    def on_unloaded(self, group: G) -> None:
        """The shard unloads: what waits on the group is answered NOT_COORDINATOR, then it is
        forgotten."""
        ...

    def forget(self, group: G) -> None:
        """The group leaves memory (deleted, replaced by another type's, unloaded): its deadlines
        and the network thread's view of it go."""
        ...


class Replayer(Protocol):
    """What applies some record types to a shard's memory, live (once durable) and at load
    (`loading`): offsets.py for the offsets' records, each group type for its own."""

    @property
    def record_types(self) -> tuple[type[Any], ...]: ...

    def replay(self, record: Any, loading: bool) -> None: ...


@dataclass(frozen=True)
class Registration:
    """A group type as a shard knows it: the class of its groups, what runs them, what replays
    its records. A new group type is a folder and one of these in `CoordinatorShard`."""

    group_class: type[Any]
    runs: GroupType[Any]
    replays: Replayer


if TYPE_CHECKING:
    from corral.groups.classic.state import ClassicGroup
    from corral.groups.consumer.state import ConsumerGroup
    from corral.groups.share.state import ShareGroup

    # A shard's groups by id (each of one of the group types).
    Groups: TypeAlias = dict[str, ClassicGroup | ConsumerGroup | ShareGroup]
