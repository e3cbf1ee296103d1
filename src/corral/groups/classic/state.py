"""A classic group (JoinGroup/SyncGroup protocol) and its members: the data and its invariants.

This module holds state, the small operations Kafka's ClassicGroup offers (add, remove, update,
protocol vote, next generation) and the `Group` interface (group.py) the rest of the coordinator
uses; the decisions (when to rebalance, what to answer) live in `protocol.py`. Parked JoinGroup
and SyncGroup requests are `Later`s the protocol resolves. Every operation on one member is O(1)
in the group size: the number of members awaiting a JoinGroup response and the per-protocol
support counts are kept as counters, so a join storm of N members costs O(N) in total, not O(N^2)
(KAFKA-7142).
"""

from __future__ import annotations

import logging
import sys
import uuid
from collections.abc import Callable, Iterable
from enum import Enum
from typing import Any

from corral import _core
from corral.clock import wall_ms
from corral.errors import ErrorCode
from corral.groups.messages import DescribedGroupMember, DescribeGroupsResponseDescribedGroup
from corral.groups.storage import records
from corral.groups.subscription import subscribed_topics
from corral.later import Later
from corral.observability.log_lines import fields

log = logging.getLogger("corral.groups")

CONSUMER_PROTOCOL_TYPE = "consumer"


class ClassicState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


def shared_names(protocols: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """The protocol list with its names interned: "range" once for the process, not per member."""
    return [(sys.intern(name), metadata) for name, metadata in protocols]


def vote(protocol_lists: Iterable[list[str]]) -> str:
    """The protocol every member supports that most members prefer (Kafka's
    ClassicGroup.selectProtocol), given each member's names in its order of preference; ties go
    to the larger name."""
    lists = list(protocol_lists)
    candidates = set(lists[0]).intersection(*lists[1:])
    votes: dict[str, int] = {}
    for names in lists:
        choice = next(name for name in names if name in candidates)
        votes[choice] = votes.get(choice, 0) + 1
    return max(votes.items(), key=lambda kv: (kv[1], kv[0]))[0]


class ClassicMember:
    __slots__ = (
        "member_id",
        "group_instance_id",
        "client_id",
        "client_host",
        "rebalance_timeout_ms",
        "session_timeout_ms",
        "protocol_type",
        "protocols",
        "assignment",
        "join_waiter",
        "sync_waiter",
        "is_new",
        "timer_key",
    )

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ):
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        # Strings most members of a group repeat are kept once (each request decodes new ones).
        self.client_host = sys.intern(client_host)
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = sys.intern(protocol_type)
        # (name, metadata) in the member's order of preference.
        self.protocols = shared_names(protocols)
        self.assignment = b""
        self.join_waiter: Later | None = None
        self.sync_waiter: Later | None = None
        self.is_new = False
        self.timer_key = 0

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def has_satisfied_heartbeat(self) -> bool:
        """Kafka's rule: members parked in a rebalance need no heartbeat, unless still new."""
        if self.is_new:
            return False
        return self.awaiting_join or self.awaiting_sync


# What a member of the current generation hears from a Heartbeat in each state; None: the
# coordinator answers (Empty, and every error).
HEARTBEAT_ANSWERS = {
    ClassicState.STABLE: ErrorCode.NONE,
    ClassicState.COMPLETING_REBALANCE: ErrorCode.NONE,
    ClassicState.PREPARING_REBALANCE: ErrorCode.REBALANCE_IN_PROGRESS,
    ClassicState.EMPTY: None,
}
# The states whose members of the current generation may commit offsets (validate_offset_commit).
COMMITTING = (ClassicState.STABLE, ClassicState.PREPARING_REBALANCE)


class ClassicGroup:
    """A classic group's state. Every change of what a Heartbeat's answer depends on (state,
    generation, members, their instance ids and session timeouts) is mirrored into the
    `heartbeat_view`, from which the network thread answers steady-state Heartbeats."""

    type = "classic"

    def __init__(
        self,
        group_id: str,
        heartbeat_view: _core.HeartbeatView | None = None,
        join_key: int = 0,
        sync_key: int = 0,
    ):
        self.group_id = group_id
        self.heartbeat_view = heartbeat_view
        self.state = ClassicState.EMPTY
        self.previous_state = ClassicState.EMPTY
        self.state_timestamp_ms: int | None = None
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, ClassicMember] = {}
        self.static_members: dict[str, str] = {}
        # KIP-394: member ids handed out with MEMBER_ID_REQUIRED, not yet joined -> timer key.
        self.pending_members: dict[str, int] = {}
        self.pending_sync: set[str] = set()
        self.protocol_support: dict[str, int] = {}
        self.num_awaiting_join = 0
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None
        self.join_key = join_key
        self.sync_key = sync_key
        # What the join timer does when it fires: ("initial", delay, remaining) or ("complete",).
        self.join_action: tuple[Any, ...] = ("complete",)
        self.sync_generation = -1
        # The GroupMetadataValue last made durable (set by replay): what a snapshot holds and
        # what a restart would load. The live group may be ahead of it mid-rebalance.
        self.stored: bytes | None = None
        # While a deletion is written: the state and its timestamp to return to if it fails.
        self._before_delete: tuple[ClassicState, int | None] | None = None

    # -- state ---------------------------------------------------------------------------------

    def transition(self, state: ClassicState) -> None:
        log.debug(
            "group %s: %s -> %s at generation %d",
            self.group_id,
            self.state.value,
            state.value,
            self.generation_id,
            extra=fields(self.group_id, epoch=self.generation_id),
        )
        self.previous_state = self.state
        self.state = state
        self.state_timestamp_ms = wall_ms()
        if self.heartbeat_view is not None:
            if state is ClassicState.DEAD:
                self.heartbeat_view.remove_group(self.group_id)
            else:
                # Members of the generation may commit unless they await their assignment.
                self.heartbeat_view.set_group(
                    self.group_id, self.generation_id, HEARTBEAT_ANSWERS[state], state in COMMITTING
                )

    def _mirror_member(self, member: ClassicMember) -> None:
        if self.heartbeat_view is not None:
            self.heartbeat_view.set_member(
                self.group_id,
                member.member_id,
                member.group_instance_id,
                member.timer_key,
                member.session_timeout_ms,
            )

    def _unmirror_member(self, member_id: str) -> None:
        if self.heartbeat_view is not None:
            self.heartbeat_view.remove_member(self.group_id, member_id)

    def can_rebalance(self) -> bool:
        return self.state in (
            ClassicState.STABLE,
            ClassicState.COMPLETING_REBALANCE,
            ClassicState.EMPTY,
        )

    def size(self) -> int:
        return len(self.members)

    # -- membership ----------------------------------------------------------------------------

    def is_pending(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        return f"{group_instance_id or client_id}-{uuid.uuid4()}"

    def add(self, member: ClassicMember, waiter: Later | None) -> None:
        """Adds a member whose session timer key is already registered."""
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        for name, _ in member.protocols:
            self.protocol_support[name] = self.protocol_support.get(name, 0) + 1
        member.join_waiter = waiter
        if waiter is not None:
            self.num_awaiting_join += 1
        self.members[member.member_id] = member
        self.pending_members.pop(member.member_id, None)
        self._mirror_member(member)
        log.debug(
            "group %s: member %s added (%d members)",
            self.group_id,
            member.member_id,
            len(self.members),
            extra=fields(self.group_id, member.member_id, self.generation_id),
        )

    def remove(self, member_id: str) -> ClassicMember | None:
        self.pending_members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        log.debug(
            "group %s: member %s removed (%d members)",
            self.group_id,
            member_id,
            len(self.members),
            extra=fields(self.group_id, member_id, self.generation_id),
        )
        self._unmirror_member(member_id)
        for name, _ in member.protocols:
            self._drop_support(name)
        if member.awaiting_join:
            self.num_awaiting_join -= 1
        if (
            member.group_instance_id is not None
            and self.static_members.get(member.group_instance_id) == member_id
        ):
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def update(
        self,
        member: ClassicMember,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        waiter: Later | None,
    ) -> None:
        for name, _ in member.protocols:
            self._drop_support(name)
        for name, _ in protocols:
            self.protocol_support[name] = self.protocol_support.get(name, 0) + 1
        member.protocols = shared_names(protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        self._mirror_member(member)
        if waiter is not None and not member.awaiting_join:
            self.num_awaiting_join += 1
        elif waiter is None and member.awaiting_join:
            self.num_awaiting_join -= 1
        member.join_waiter = waiter

    def replace_static_member(
        self, instance_id: str, old_id: str, new_id: str, fenced: dict[str, Any]
    ) -> ClassicMember:
        """The same static member under a new member id; the old id's parked requests are fenced."""
        member = self.members.pop(old_id)
        if member.join_waiter is not None:
            member.join_waiter.resolve(fenced)
            member.join_waiter = None
            self.num_awaiting_join -= 1
        if member.sync_waiter is not None:
            member.sync_waiter.resolve(fenced)
            member.sync_waiter = None
        member.member_id = new_id
        self.members[new_id] = member
        self._unmirror_member(old_id)
        self._mirror_member(member)
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def complete_join(self, member: ClassicMember, response: dict[str, Any]) -> bool:
        """Answers the member's parked JoinGroup."""
        waiter = member.join_waiter
        if waiter is None:
            return False
        member.join_waiter = None
        self.num_awaiting_join -= 1
        waiter.resolve(response)
        return True

    def complete_sync(self, member: ClassicMember, response: dict[str, Any]) -> bool:
        waiter = member.sync_waiter
        if waiter is None:
            return False
        member.sync_waiter = None
        waiter.resolve(response)
        return True

    def _drop_support(self, name: str) -> None:
        left = self.protocol_support[name] - 1
        if left:
            self.protocol_support[name] = left
        else:
            del self.protocol_support[name]

    # -- protocol ------------------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        n = len(self.members)
        return protocol_type == self.protocol_type and any(
            self.protocol_support.get(name, 0) == n for name, _ in protocols
        )

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer (Kafka's vote)."""
        return vote([name for name, _ in m.protocols] for m in self.members.values())

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def not_yet_rejoined(self) -> list[ClassicMember]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keeps a leader that rejoined, else picks any member that did; False if none did."""
        if self.leader_id is not None:
            leader = self.members.get(self.leader_id)
            if leader is not None and leader.awaiting_join:
                return True
            for member in self.members.values():
                if member.awaiting_join:
                    self.leader_id = member.member_id
                    return True
            return False
        return True

    def init_next_generation(self) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition(ClassicState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition(ClassicState.EMPTY)
        self.pending_sync.clear()

    def compute_subscribed_topics(self) -> set[str] | None:
        """Union of the members' subscriptions, when every member speaks the consumer protocol."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None if self.members else set()
        topics: set[str] = set()
        for member in self.members.values():
            one = subscribed_topics(member.metadata(self.protocol_name))
            if one is None:
                return None
            topics |= one
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        return self.subscribed_topics is not None and topic in self.subscribed_topics

    def leader_members_list(self) -> list[dict[str, Any]]:
        """The JoinGroup response's member list, sent to the leader only."""
        protocol = self.protocol_name
        assert protocol is not None, "a group whose join completes has chosen its protocol"
        return [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "metadata": m.metadata(protocol),
            }
            for m in self.members.values()
        ]

    # -- the Group interface (group.py) --------------------------------------------------------

    @property
    def state_name(self) -> str:
        return self.state.value

    @property
    def protocol_type_name(self) -> str:
        return self.protocol_type or ""

    def validate_member(self, member_id: str, instance_id: str | None) -> ErrorCode:
        """A known member, and for a static one the current holder of its instance id."""
        if instance_id is not None:
            known = self.static_members.get(instance_id)
            if known is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
            return ErrorCode.NONE
        return ErrorCode.NONE if member_id in self.members else ErrorCode.UNKNOWN_MEMBER_ID

    def validate_offset_commit(
        self,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        version: int,
        partitions: Callable[[], Iterable[tuple[bytes, int]]] = lambda: (),
        transactional: bool = False,
    ) -> ErrorCode:
        """Kafka's ClassicGroup.validateOffsetCommit (simple groups included; no per-partition
        check, so `partitions` is not asked for). A transactional commit with no member, no
        generation and no instance is accepted in any state, and never told to rebalance."""
        state = self.state
        if state is ClassicState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and state is ClassicState.EMPTY:
            return ErrorCode.NONE
        if generation_id >= 0 or member_id or instance_id is not None:
            error = self.validate_member(member_id, instance_id)
            if error:
                return error
            if generation_id != self.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif not transactional and state is not ClassicState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and state is ClassicState.COMPLETING_REBALANCE:
            # The member got its JoinGroup response but not its assignment yet.
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode:
        # Classic groups answer every OffsetFetch (it carries no member before v9).
        return ErrorCode.NONE

    def validate_offset_delete(self) -> ErrorCode:
        if self.state is ClassicState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND
        # A live group may lose offsets of topics it no longer subscribes to, if its
        # subscriptions can be read (protocol type "consumer").
        if self.state is not ClassicState.EMPTY and self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return ErrorCode.NON_EMPTY_GROUP
        return ErrorCode.NONE

    def offset_expiry_base(self) -> tuple[bool, int | None]:
        if self.state is ClassicState.DEAD:
            return False, None  # its deletion is being written
        if not self.protocol_type:
            return True, None  # a simple group: each offset by its commit time
        if self.state is ClassicState.EMPTY:
            return True, self.state_timestamp_ms
        return False, None  # a live group keeps its offsets

    def offset_expiry_kept_topics(self) -> tuple[str, ...]:
        return ()  # a live classic group keeps all its offsets (offset_expiry_base)

    def validate_delete(self) -> ErrorCode:
        if self.state is ClassicState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if self.state is not ClassicState.EMPTY:
            return ErrorCode.NON_EMPTY_GROUP
        return ErrorCode.NONE

    def is_empty(self) -> bool:
        return self.state is ClassicState.EMPTY

    def delete_records(self) -> list[records.Record]:
        return [records.GroupTombstone(self.group_id)]

    def begin_delete(self) -> None:
        self._before_delete = (self.state, self.state_timestamp_ms)
        self.transition(ClassicState.DEAD)

    def abort_delete(self) -> None:
        if self._before_delete is not None and self.state is ClassicState.DEAD:
            state, timestamp = self._before_delete
            self.transition(state)
            self.state_timestamp_ms = timestamp
        self._before_delete = None

    def describe_view(self) -> DescribeGroupsResponseDescribedGroup:
        stable = self.state is ClassicState.STABLE
        protocol = self.protocol_name
        assert protocol is not None or not stable, "a stable group has chosen its protocol"
        members: list[DescribedGroupMember] = []
        for m in self.members.values():
            members.append(
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_metadata": m.metadata(protocol)
                    if protocol is not None and stable
                    else b"",
                    "member_assignment": m.assignment if stable else b"",
                }
            )
        return {
            "error_code": ErrorCode.NONE,
            "group_id": self.group_id,
            "group_state": self.state.value,
            "protocol_type": self.protocol_type or "",
            "protocol_data": protocol if stable and protocol is not None else "",
            "members": members,
        }

    def stored_records(self) -> list[tuple[bytes, bytes]]:
        return [] if self.stored is None else [(records.group_key(self.group_id), self.stored)]

    def stored_records_later(self) -> Callable[[], list[tuple[bytes, bytes]]]:
        stored = self.stored_records()  # kept encoded: nothing to make
        return lambda: stored

    # -- records ---------------------------------------------------------------------------------

    def metadata_record(self) -> records.GroupMetadata:
        """The group's GroupMetadata record as of now (members with their assignments)."""
        protocol = self.protocol_name
        value = records.GroupValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=protocol,
            leader=self.leader_id if self.members else None,
            state_timestamp_ms=self.state_timestamp_ms or -1,
            members=[
                records.MemberValue(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata(protocol) if protocol else b"",
                    m.assignment,
                )
                for m in self.members.values()
            ],
        )
        return records.GroupMetadata(self.group_id, records.group_value(value))
