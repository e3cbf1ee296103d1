"""A KIP-848 consumer group's state: its members, epochs, target assignment and who owns which
partition, changed only by `replay` of its records (storage/consumer_records.py), live and at
load, as Kafka replays a consumer group's records into its in-memory state.

What decides whether a heartbeat is a steady-state one (rust/groups/consumer_heartbeat_view.rs) is
mirrored, as it changes, into the coordinator's `ConsumerHeartbeatView`, from which the network
thread answers those heartbeats without Python.

Also the `Group` interface (group.py) for consumer groups: offsets validated by member epoch,
describe and list views, deletion.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterable
from sys import intern
from typing import TypeVar

from corral import _core
from corral.errors import ErrorCode
from corral.groups.consumer.assignment_records import (
    EMPTY_ASSIGNMENT,
    as_sets,
    encoded,
    epochs_of_record,
    group_records,
)
from corral.groups.consumer.member_state import ConsumerMember, preferred_of
from corral.groups.consumer.reconcile import MemberState, Partitions, Reconciled
from corral.groups.consumer.targets.incremental import TargetIndex
from corral.groups.consumer.view_mirror import mirror_epoch, mirror_group, mirror_metadata
from corral.groups.storage import consumer_records as cr
from corral.groups.storage.records import GroupTombstone, Record

# The (topic id, partition) pairs an OffsetCommit would write, asked for only when the member
# epoch is older than the member's (the commits that reach the group: known topics and
# partitions, authorized, with metadata within the limit).
Committed = Callable[[], Iterable[tuple[bytes, int]]]

# Kafka's `MemberType` of ConsumerGroupDescribe v1.
MEMBER_TYPE_CLASSIC = 0
MEMBER_TYPE_CONSUMER = 1


K = TypeVar("K")


def _count(counts: Counter[K], keys: Iterable[K], delta: int) -> None:
    """Adds `delta` to the counts of `keys`, dropping those that reach zero."""
    for key in keys:
        n = counts[key] + delta
        if n:
            counts[key] = n
        else:
            del counts[key]


class ConsumerGroup:
    type = "consumer"
    protocol_type_name = "consumer"

    def __init__(
        self,
        group_id: str,
        view: _core.ConsumerHeartbeatView | None = None,
        assignment_interval_ms: Callable[[str], int] | None = None,
    ):
        self.group_id = group_id
        # The group's consumer.assignment.interval.ms (None: 0), for the view's batching.
        self._assignment_interval_ms = assignment_interval_ms
        # The network thread's view of the group, kept in step by replay and the flags below
        # (None: not mirrored, as for the group a joining heartbeat looks at before creating it).
        self.view = view
        # A group starts at epoch 1 with an empty target at epoch 1 (Kafka 4.3+, KAFKA-20268).
        self.group_epoch = 1
        self.metadata_hash = 0
        self.assignment_epoch = 1
        self.assignment_timestamp_ms = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        # member id -> topic id -> partitions: the target assignment at `assignment_epoch`.
        self.target: dict[str, dict[bytes, frozenset[int]]] = {}
        # The target in aggregate (sizes, free partitions): joins and leaves move what they must.
        self.target_index = TargetIndex()
        # topic id -> partition -> epoch of the member owning it (assigned or being revoked).
        self.owner_epochs: dict[bytes, dict[int, int]] = {}
        self.regexes: dict[str, cr.RegexTopics] = {}
        # Counts kept by `replay` (as Kafka's ConsumerGroup keeps subscribedTopicNames,
        # subscribedRegularExpressions, numClassicProtocolMembers...), so that no request
        # walks the members: a request costs the same in a group of ten or fifty thousand.
        # No key is kept at zero. How many members name each topic (their `topic_names`):
        self.topic_name_counts: Counter[str] = Counter()
        # How many of the resolved regexes (`regexes`) match each topic:
        self.regex_topic_counts: Counter[str] = Counter()
        # How many members subscribe with each regex (non-empty):
        self.regex_counts: Counter[str] = Counter()
        # The resolved regexes no member subscribes with (a log written by an older corral may
        # leave one): the next fence tombstones them.
        self.unused_regexes: set[str] = set()
        # How many members name each server assignor:
        self.assignor_counts: Counter[str] = Counter()
        # Per member epoch, how many members are STABLE at it (the group is reconciled when
        # all of them are, at the assignment epoch):
        self.stable_counts: Counter[int] = Counter()
        # Per member epoch, how many members are at it (whatever their state):
        self.epoch_counts: Counter[int] = Counter()
        # (timestamp, regex) of the resolutions, a heap pruned lazily: the oldest resolution,
        # which says whether the periodic refresh is due.
        self._regex_times: list[tuple[int, str]] = []
        # How many members speak the classic protocol, and how many of them support each of
        # its protocol names (a classic join must share one with all of them).
        self.classic_members = 0
        self.classic_protocol_counts: Counter[str] = Counter()
        self.deleting = False
        # Not durable, not replayed: the coordinator's bookkeeping of the live group.
        # The group epoch a target computation is running for (in a worker thread), if any.
        self.computing_epoch: int | None = None
        # When the last computation failed (retried after the assignment interval).
        self.assignment_failed_ms = 0
        # A subscribed topic changed: the next heartbeat recomputes the metadata hash.
        self._metadata_expired = False
        # Topics changed while an authorizer is on: the next heartbeat resolves the regexes.
        self.regexes_stale = False
        # The subscription the last member's metadata named, shared by the members naming the
        # same topics (in a big group, most of them) rather than a tuple each.
        self._last_names: tuple[str, ...] = ()
        # A write of the group failed: its next write rewrites the whole group.
        self.needs_rewrite = False
        # The network thread moves members only to a target epoch at least this: a topic or a
        # regex resolution changed, and an older target may hold partitions a member no longer
        # subscribes to (its reconciliation, here, revokes them).
        self.moves_from = 0
        mirror_group(self)

    @property
    def metadata_expired(self) -> bool:
        return self._metadata_expired

    @metadata_expired.setter
    def metadata_expired(self, expired: bool) -> None:
        self._metadata_expired = expired
        if expired:
            self.moves_from = self.group_epoch + 1
        mirror_group(self)

    # ======================================================== the network thread's view ===

    def assignment_interval_ms(self) -> int:
        interval = self._assignment_interval_ms
        return 0 if interval is None else interval(self.group_id)

    def session_armed(self, member: ConsumerMember) -> None:
        """The coordinator registered the member's session timer: the network thread may now
        move its deadline."""
        if self.view is not None:
            self.view.set_session_key(self.group_id, member.member_id, member.session_key)

    def detach(self) -> None:
        """The group is gone from the coordinator (deleted, or replaced by a classic group):
        its heartbeats go to the coordinator, and this object no longer touches the view."""
        if self.view is not None:
            self.view.remove_group(self.group_id)
            self.view = None

    # ========================================================================== replay ===

    def member(self, member_id: str) -> ConsumerMember:
        member = self.members.get(member_id)
        if member is None:
            member = self.members[member_id] = ConsumerMember(member_id)
            self._count_current(member.current, 1)
            self.target_index.member_added(member_id)
        return member

    def replay(self, record: cr.ConsumerRecord) -> None:
        """Applies one of the group's records (the group's removal is the coordinator's)."""
        if isinstance(record, cr.ConsumerTombstone):
            self._replay_tombstone(record)
        elif isinstance(record, cr.GroupEpoch):
            self.group_epoch, self.metadata_hash = record.epoch, record.metadata_hash
            mirror_group(self)
        elif isinstance(record, cr.MemberMetadata):
            member = self.member(record.member_id)
            self._count_subscription(member, -1)
            if (
                member.instance_id is not None
                and member.instance_id != record.instance_id
                and self.static_members.get(member.instance_id) == member.member_id
            ):
                del self.static_members[member.instance_id]
            if record.instance_id is not None:
                self.static_members[record.instance_id] = record.member_id
            member.instance_id, member.rack_id = record.instance_id, record.rack_id
            # Interned: every member of a big group would otherwise keep its own copy of the
            # same few strings, as decoded from its request.
            member.client_id, member.client_host = (
                intern(record.client_id),
                intern(record.client_host),
            )
            names = tuple(map(intern, record.topic_names))
            if names == self._last_names:
                names = self._last_names
            else:
                self._last_names = names
            member.topic_names, member.regex = names, record.regex
            member.rebalance_timeout_ms = record.rebalance_timeout_ms
            self._count_classic(member.classic, -1)
            self._count_classic(record.classic, 1)
            member.server_assignor, member.classic = record.server_assignor, record.classic
            self._count_subscription(member, 1)
            mirror_metadata(self, member)
        elif isinstance(record, cr.TargetMember):
            targeted = self.members.get(record.member_id)
            target = self._shared(
                as_sets(record.partitions), None if targeted is None else targeted.current.assigned
            )
            self._set_target(record.member_id, target)
            if (
                targeted is not None
                and self.view is not None
                and target is not targeted.current.assigned
            ):
                self.view.target_changed(self.group_id, record.member_id)
        elif isinstance(record, cr.TargetEpoch):
            self.assignment_epoch, self.assignment_timestamp_ms = record.epoch, record.timestamp_ms
            mirror_group(self)
        elif isinstance(record, cr.CurrentAssignment):
            member = self.member(record.member_id)
            self._release(member)
            self._set_current(
                member,
                Reconciled(
                    record.epoch,
                    record.previous_epoch,
                    MemberState.of(record.state),
                    self._shared(as_sets(record.assigned), self.target.get(record.member_id)),
                    as_sets(record.pending_revocation),
                    epochs_of_record(record),
                ),
            )
            self._own(member)
            mirror_epoch(self, member, record)
        elif isinstance(record, cr.RegexTopics):
            self._set_regex(record.regex, record)
            self.moves_from = self.group_epoch + 1  # the bump written with it
            mirror_group(self)

    def _replay_tombstone(self, record: cr.ConsumerTombstone) -> None:
        kind, name = record.kind, record.name
        if kind == cr.CURRENT_ASSIGNMENT:
            member = self.members.get(name or "")
            if member is not None:
                self._release(member)
                self._set_current(
                    member, Reconciled(0, 0, MemberState.STABLE, EMPTY_ASSIGNMENT, EMPTY_ASSIGNMENT)
                )
                mirror_epoch(self, member)
        elif kind == cr.TARGET_MEMBER:
            self._set_target(name or "", None)
            if self.view is not None and name in self.members:
                self.view.target_changed(self.group_id, name)
        elif kind == cr.MEMBER_METADATA:
            member = self.members.pop(name or "", None)
            if member is not None:
                if self.view is not None:
                    self.view.remove_member(self.group_id, member.member_id)
                self._release(member)
                self.target_index.member_removed(member.member_id)
                self._count_subscription(member, -1)
                self._count_current(member.current, -1)
                self._count_classic(member.classic, -1)
                if (
                    member.instance_id is not None
                    and self.static_members.get(member.instance_id) == member.member_id
                ):
                    del self.static_members[member.instance_id]
        elif kind == cr.TARGET_EPOCH:
            self.assignment_epoch, self.assignment_timestamp_ms = -1, 0
            mirror_group(self)
        elif kind == cr.REGEX:
            self._set_regex(name or "", None)

    @staticmethod
    def _shared(
        partitions: dict[bytes, frozenset[int]], same: Partitions | None
    ) -> dict[bytes, frozenset[int]]:
        """`same` when equal: a reconciled member's assignment and target are one object (half
        the memory of a big group). Safe because neither is ever changed in place."""
        return same if same is not None and same == partitions else partitions

    def _set_target(self, member_id: str, target: dict[bytes, frozenset[int]] | None) -> None:
        old = self.target.pop(member_id, None) if target is None else self.target.get(member_id)
        if target is not None:
            self.target[member_id] = target
        self.target_index.target_set(member_id, old, target, member_id in self.members)

    def _count_subscription(self, member: ConsumerMember, delta: int) -> None:
        _count(self.topic_name_counts, member.topic_names, delta)
        if member.regex:
            _count(self.regex_counts, (member.regex,), delta)
            self._note_regex_use(member.regex)
        if member.server_assignor:
            _count(self.assignor_counts, (member.server_assignor,), delta)

    def _count_current(self, current: Reconciled, delta: int) -> None:
        _count(self.epoch_counts, (current.epoch,), delta)
        if current.state is MemberState.STABLE:
            _count(self.stable_counts, (current.epoch,), delta)

    def _set_current(self, member: ConsumerMember, current: Reconciled) -> None:
        self._count_current(member.current, -1)
        member.current = current
        self._count_current(current, 1)

    def _set_regex(self, regex: str, resolution: cr.RegexTopics | None) -> None:
        """A regex's resolution replaced (None: removed)."""
        old = self.regexes.get(regex)
        if old is not None:
            _count(self.regex_topic_counts, old.topics, -1)
        if resolution is None:
            self.regexes.pop(regex, None)
            self.unused_regexes.discard(regex)
            return
        self.regexes[regex] = resolution  # in place: the group's regexes keep their order
        _count(self.regex_topic_counts, resolution.topics, 1)
        self._note_regex_use(regex)
        times = self._regex_times
        if len(times) > 2 * len(self.regexes) + 8:  # mostly stale entries: start again
            times[:] = [(r.timestamp_ms, name) for name, r in self.regexes.items()]
            heapq.heapify(times)
        else:
            heapq.heappush(times, (resolution.timestamp_ms, regex))

    def _note_regex_use(self, regex: str) -> None:
        if regex in self.regexes and regex not in self.regex_counts:
            self.unused_regexes.add(regex)
        else:
            self.unused_regexes.discard(regex)

    def _count_classic(self, classic: cr.ClassicMetadata | None, delta: int) -> None:
        if classic is None:
            return
        self.classic_members += delta
        _count(self.classic_protocol_counts, {name for name, _ in classic.protocols}, delta)

    def _release(self, member: ConsumerMember) -> None:
        for partitions in (member.current.assigned, member.current.pending_revocation):
            for topic, ps in partitions.items():
                epochs = self.owner_epochs.get(topic)
                if epochs is None:
                    continue
                for p in ps:
                    epochs.pop(p, None)
                if not epochs:
                    del self.owner_epochs[topic]

    def _own(self, member: ConsumerMember) -> None:
        epoch = member.current.epoch
        for partitions in (member.current.assigned, member.current.pending_revocation):
            for topic, ps in partitions.items():
                epochs = self.owner_epochs.setdefault(topic, {})
                for p in ps:
                    epochs[p] = epoch

    def target_of(self, member: ConsumerMember) -> dict[bytes, frozenset[int]]:
        """A member's target; a static member replacing its old self (not replayed yet) has the
        old self's (Kafka's targetAssignment(memberId, instanceId))."""
        target = self.target.get(member.member_id)
        if target is None and member.instance_id is not None:
            old = self.static_members.get(member.instance_id)
            target = self.target.get(old) if old is not None else None
        return target if target is not None else EMPTY_ASSIGNMENT

    def waiting_on_unreleased(self, member: ConsumerMember) -> bool:
        """Whether a member in UNRELEASED_PARTITIONS still waits for a partition of its target
        that another member owns (Kafka's waitingOnUnreleasedPartition)."""
        assigned = member.current.assigned
        for topic, ps in self.target.get(member.member_id, EMPTY_ASSIGNMENT).items():
            mine = assigned.get(topic, frozenset())
            if any(p not in mine and self.owner_epoch(topic, p) != -1 for p in ps):
                return True
        return False

    def owner_epoch(self, topic: bytes, partition: int) -> int:
        epochs = self.owner_epochs.get(topic)
        return -1 if epochs is None else epochs.get(partition, -1)

    # ========================================================================== records ===

    def all_records(self) -> list[cr.ConsumerRecord]:
        """Every record that rebuilds the group as it is (a snapshot, a rewrite after a failure)."""
        return group_records(
            self.group_id,
            self._epochs(),
            self.members.values(),
            self.regexes.values(),
            self.target.items(),
        )

    def _epochs(self) -> tuple[int, int, int, int]:
        return (
            self.group_epoch,
            self.metadata_hash,
            self.assignment_epoch,
            self.assignment_timestamp_ms,
        )

    def stored_records(self) -> list[tuple[bytes, bytes]]:
        return encoded(self.all_records())

    def stored_records_later(self) -> Callable[[], list[tuple[bytes, bytes]]]:
        """`stored_records` for a worker thread: the containers copied now (milliseconds for
        50,000 members), the records made and encoded by the returned function (seconds). A
        member the loop changes meanwhile may be encoded half old, half new: the snapshot is
        replayed with the log after the positions taken before this call, which holds every
        such change and rewrites each changed key (every consumer-group record is an upsert)."""
        gid, epochs = self.group_id, self._epochs()
        members, regexes = list(self.members.values()), list(self.regexes.values())
        targets = list(self.target.items())
        return lambda: encoded(group_records(gid, epochs, members, regexes, targets))

    def delete_records(self) -> list[Record]:
        """Its tombstones, and the classic key too: a group id that was a classic group before
        leaves nothing behind."""
        return [*self.tombstones(), GroupTombstone(self.group_id)]

    def tombstones(self, renamed: tuple[str, str] | None = None) -> list[Record]:
        """Kafka's tombstone order: current assignments, target members, target metadata,
        member metadata, regexes, (partition metadata), group metadata. `renamed` (old id, new
        id): a member replaced by records not applied yet is tombstoned under its new id."""
        gid = self.group_id
        ids = list(self.members)
        if renamed is not None:
            ids = [renamed[1] if m == renamed[0] else m for m in ids]
        targets = [
            renamed[1] if renamed is not None and m == renamed[0] else m for m in self.target
        ]
        out: list[Record] = [cr.ConsumerTombstone(cr.CURRENT_ASSIGNMENT, gid, m) for m in ids]
        out += [cr.ConsumerTombstone(cr.TARGET_MEMBER, gid, m) for m in targets]
        out.append(cr.ConsumerTombstone(cr.TARGET_EPOCH, gid))
        out += [cr.ConsumerTombstone(cr.MEMBER_METADATA, gid, m) for m in ids]
        out += [cr.ConsumerTombstone(cr.REGEX, gid, r) for r in self.regexes]
        out.append(cr.ConsumerTombstone(cr.GROUP_EPOCH, gid))
        return out

    # ============================================================================ views ===

    @property
    def state_name(self) -> str:
        if self.deleting:
            return "Dead"
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        # Every member STABLE at the assignment epoch (Kafka's isReconciledTo), counted.
        if self.stable_counts.get(self.assignment_epoch, 0) != len(self.members):
            return "Reconciling"
        return "Stable"

    def subscribed_topic_names(self, resolved_regex_topics: bool = True) -> set[str]:
        names = set(self.topic_name_counts)
        if resolved_regex_topics:
            names.update(self.regex_topic_counts)
        return names

    def is_subscribed_to(self, topic: str) -> bool:
        return topic in self.topic_name_counts or topic in self.regex_topic_counts

    def preferred_assignor(self) -> str | None:
        """The server assignor named by most members (ties: the smaller name); None if nobody
        names one (Kafka's computePreferredServerAssignor)."""
        return preferred_of(self.assignor_counts)

    def oldest_regex_ms(self) -> int | None:
        """When the oldest of the group's regex resolutions was made (None: it has none)."""
        times = self._regex_times
        while times:
            timestamp_ms, regex = times[0]
            resolution = self.regexes.get(regex)
            if resolution is not None and resolution.timestamp_ms == timestamp_ms:
                return timestamp_ms
            heapq.heappop(times)  # replaced or removed since
        return None

    # ========================================================================== offsets ===

    def validate_offset_commit(
        self,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        version: int,
        partitions: Committed = lambda: (),
        transactional: bool = False,
    ) -> ErrorCode:
        """Kafka's ConsumerGroup.validateOffsetCommit, generation_id being the member epoch, with
        its per-partition check (KIP-1251, Kafka 4.3+) of an older epoch over `partitions`. A
        transactional commit naming no member, epoch or instance is accepted; otherwise it is
        checked as a commit (any TxnOffsetCommit version)."""
        if self.deleting:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and not self.members:
            return ErrorCode.NONE  # an admin or a consumer outside group management
        if transactional and generation_id == -1 and not member_id and instance_id is None:
            return ErrorCode.NONE
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and member.classic is None and version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if generation_id == member.epoch:
            return ErrorCode.NONE
        stale = (
            ErrorCode.ILLEGAL_GENERATION
            if member.classic is not None
            else ErrorCode.STALE_MEMBER_EPOCH
        )
        if generation_id > member.epoch:
            return stale
        # An older epoch (a bump the client has not seen yet): each partition must be one the
        # member holds (assigned or pending revocation) since that epoch or before.
        current = member.current
        for topic_id, partition in partitions():
            assigned_at = current.assignment_epoch(topic_id, partition)
            if assigned_at is None or generation_id < assigned_at:
                return stale
        return ErrorCode.NONE

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode:
        if member_id is None and member_epoch < 0:
            return ErrorCode.NONE
        member = self.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.epoch:
            return (
                ErrorCode.ILLEGAL_GENERATION
                if member.classic is not None
                else ErrorCode.STALE_MEMBER_EPOCH
            )
        return ErrorCode.NONE

    def validate_offset_delete(self) -> ErrorCode:
        return ErrorCode.GROUP_ID_NOT_FOUND if self.deleting else ErrorCode.NONE

    def offset_expiry_base(self) -> tuple[bool, int | None]:
        # Each offset by its commit time; offsets of subscribed topics never expire (the
        # coordinator passes them as kept topics).
        return (not self.deleting), None

    def offset_expiry_kept_topics(self) -> list[str]:
        return sorted(self.subscribed_topic_names())

    # ========================================================================= deletion ===

    def validate_delete(self) -> ErrorCode:
        if self.deleting:
            return ErrorCode.GROUP_ID_NOT_FOUND
        return ErrorCode.NONE if not self.members else ErrorCode.NON_EMPTY_GROUP

    def is_empty(self) -> bool:
        return not self.members

    def begin_delete(self) -> None:
        self.deleting = True
        mirror_group(self)

    def abort_delete(self) -> None:
        self.deleting = False
        mirror_group(self)
