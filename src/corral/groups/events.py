"""The coordinator's group events for `__corral_analytics` (docs/analytics.md has the schema):
rebalances, member joins and departures, epochs and assignments, of both group types; and the
OffsetCommits refused as a whole, counted per interval (`commit_rejected`).

The coordinator calls these where it decides (classic groups: classic/protocol.py, each call
also writing the INFO line it replaces) or where a consumer group's records are applied live
(`consumer_record`, from coordinator.py). `sink` is None until the broker's analytics log takes
the events (after loading, so that replaying the log at startup records nothing; None in
in-process tests), and then gets each event as a JSON-able dict, buffered, never written here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from corral import _core
from corral.clock import wall_ms
from corral.errors import ErrorCode
from corral.groups.consumer.reconcile import MemberState
from corral.groups.storage import consumer_records as cr
from corral.observability.log_lines import fields

if TYPE_CHECKING:
    from corral.groups.classic.state import ClassicGroup, ClassicMember
    from corral.groups.consumer.member_state import ConsumerMember
    from corral.groups.consumer.reconcile import Partitions
    from corral.groups.consumer.state import ConsumerGroup
    from corral.groups.consumer.targets.inputs import TopicImage

log = logging.getLogger("corral.groups")

CLASSIC, CONSUMER = "classic", "consumer"
# Refused OffsetCommits are counted per (group, error code) until the analytics log's next append;
# at most this many such counts wait at once (a storm aimed at many group ids cannot grow it).
MAX_REJECTED_KEYS = 1000
# A consumer group's target_assignment event lists every member: up to this many members, every
# target has one; a bigger group's target has one when as many member targets changed since the
# last as it has members, else once the group reaches it (its rebalance end), so that a join
# costing O(what moves) does not cost O(members) in events.
EVERY_TARGET_UP_TO = 100
SESSION_EXPIRED = "the member session expired"  # consumer/protocol.py's reason to fence
STATIC_REPLACED = "static_member_replaced"


class _Rebalance:
    """A rebalance under way: when it started, the members then, why."""

    __slots__ = ("start_ms", "members_before", "cause")

    def __init__(self, start_ms: int, members_before: int, cause: str):
        self.start_ms, self.members_before, self.cause = start_ms, members_before, cause


def _all_at(
    group: ConsumerGroup, member: ConsumerMember | None, record: cr.CurrentAssignment, epoch: int
) -> bool:
    """Whether every member is at `epoch` once `record` (of `member`, None: a new one) is
    applied: from the group's count of members per epoch, O(1)."""
    at = (
        group.epoch_counts.get(epoch, 0)
        + (record.epoch == epoch)
        - (member is not None and member.current.epoch == epoch)
    )
    return at == len(group.members) + (member is None)


class AnalyticsEvents:
    def __init__(self, topics: TopicImage):
        self.topics = topics
        # Called with (event, time ms or None for now).
        self.sink: Callable[..., None] | None = None
        self._open: dict[str, _Rebalance] = {}  # group id -> its rebalance under way
        # Classic groups: the members of their last generation (a join or leave changes the
        # group before its rebalance starts).
        self._generation_size: dict[str, int] = {}
        # Consumer groups: why members are leaving (noted when the records are written) and
        # the change a coming epoch bump answers, with the member count before it.
        self._gone: dict[tuple[str, str], tuple[str, str, int]] = {}
        self._change: dict[str, tuple[str, int]] = {}
        # Big consumer groups: how many member targets changed since the last target event, and
        # the epoch of a target not described yet (described when the group reaches it).
        self._targets_changed: dict[str, int] = {}
        self._unsent_target: dict[str, int] = {}
        # (group id, group type or None, error code) -> [refusals, first ms, last ms].
        self._rejected: dict[tuple[str, str | None, int], list[int]] = {}
        self._rejected_dropped = 0

    def _emit(
        self, event: str, group_id: str, protocol: str, time_ms: int | None = None, **values: Any
    ) -> None:
        if self.sink is not None:
            self.sink(
                {"event": event, "group_id": group_id, "protocol": protocol, **values}, time_ms
            )

    def _end(
        self, group_id: str, protocol: str, epoch_field: str, epoch: int, members: int
    ) -> None:
        now = wall_ms()
        started = self._open.pop(group_id, None)
        # Dated `now`, so that its time is exactly start_ms + duration_ms.
        self._emit(
            "rebalance_end",
            group_id,
            protocol,
            now,
            **{epoch_field: epoch},
            members=members,
            members_before=None if started is None else started.members_before,
            cause=None if started is None else started.cause,
            start_ms=None if started is None else started.start_ms,
            duration_ms=None if started is None else max(now - started.start_ms, 0),
        )

    # -- classic groups --------------------------------------------------------------------------

    def classic_rebalance_start(self, group: ClassicGroup, reason: str) -> None:
        log.info(
            "preparing to rebalance group %s with old generation %d (%s)",
            group.group_id,
            group.generation_id,
            reason,
            extra=fields(group.group_id, epoch=group.generation_id),
        )
        # Unknown after a restart: the members now; a new group (generation 0) had none.
        before = self._generation_size.get(
            group.group_id, 0 if group.generation_id == 0 else group.size()
        )
        now = wall_ms()
        self._open.setdefault(group.group_id, _Rebalance(now, before, reason))
        self._emit(
            "rebalance_start",
            group.group_id,
            CLASSIC,
            now,
            generation_id=group.generation_id,
            members_before=before,
            members=group.size(),
            cause=reason,
        )

    def classic_rebalance_end(self, group: ClassicGroup) -> None:
        """The new generation is stable (its assignment durable and sent), or empty."""
        if not group.members:
            log.info(
                "group %s with generation %d is now empty", group.group_id, group.generation_id
            )
        self._end(group.group_id, CLASSIC, "generation_id", group.generation_id, group.size())
        self._generation_size[group.group_id] = group.size()
        if group.members:
            self._emit(
                "generation_assignment",
                group.group_id,
                CLASSIC,
                generation_id=group.generation_id,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                assignment={
                    m.member_id: classic_partitions(group.protocol_type, m.assignment)
                    for m in group.members.values()
                },
            )

    def member_joined(self, group: ClassicGroup, member: ClassicMember) -> None:
        self._classic_member("member_joined", group, member)

    def classic_member_gone(self, group: ClassicGroup, member: ClassicMember, left: bool) -> None:
        """A member leaves (LeaveGroup) or its session expired; logged at INFO."""
        if left:
            log.info(
                "member %s left group %s",
                member.member_id,
                group.group_id,
                extra=fields(group.group_id, member.member_id, group.generation_id),
            )
            self._classic_member("member_left", group, member, reason="left")
        else:
            log.info(
                "member %s of group %s failed its session timeout; removing it",
                member.member_id,
                group.group_id,
                extra=fields(group.group_id, member.member_id, group.generation_id),
            )
            self._classic_member("member_expired", group, member, reason="session_timeout")

    def classic_static_replaced(
        self, group: ClassicGroup, member: ClassicMember, old_id: str
    ) -> None:
        """A static member rejoined under a new id: its old id is fenced, the new one joins."""
        self._emit(
            "member_fenced",
            group.group_id,
            CLASSIC,
            member_id=old_id,
            instance_id=member.group_instance_id,
            client_id=member.client_id,
            client_host=member.client_host,
            generation_id=group.generation_id,
            reason=STATIC_REPLACED,
        )
        self.member_joined(group, member)

    def classic_members_expired(
        self, group: ClassicGroup, member_ids: list[str], reason: str
    ) -> None:
        """Members removed for missing a rebalance's JoinGroup or SyncGroup (before removal)."""
        if member_ids and reason == "rebalance_timeout":
            log.info(
                "group %s removed %d dynamic members that did not rejoin",
                group.group_id,
                len(member_ids),
            )
        for member_id in member_ids:
            member = group.members.get(member_id)
            if member is not None:
                self._classic_member("member_expired", group, member, reason=reason)

    def _classic_member(
        self, event: str, group: ClassicGroup, member: ClassicMember, **values: Any
    ) -> None:
        self._emit(
            event,
            group.group_id,
            CLASSIC,
            member_id=member.member_id,
            instance_id=member.group_instance_id,
            client_id=member.client_id,
            client_host=member.client_host,
            generation_id=group.generation_id,
            **values,
        )

    # -- both ------------------------------------------------------------------------------------

    def group_deleted(self, group_id: str, group_type: str) -> None:
        self._open.pop(group_id, None)
        self._change.pop(group_id, None)
        self._generation_size.pop(group_id, None)
        self._targets_changed.pop(group_id, None)
        self._unsent_target.pop(group_id, None)
        self._emit("group_deleted", group_id, group_type)

    def commit_rejected(self, group_id: str, group_type: str | None, error: int) -> None:
        """An OffsetCommit refused as a whole (wrong generation or member epoch, unknown member,
        rebalance in progress...): counted, written by `flush_rejected`."""
        if self.sink is None:
            return
        now = wall_ms()
        key = (group_id, group_type, int(error))
        counted = self._rejected.get(key)
        if counted is not None:
            counted[0] += 1
            counted[2] = now
        elif len(self._rejected) < MAX_REJECTED_KEYS:
            self._rejected[key] = [1, now, now]
        else:
            self._rejected_dropped += 1

    def flush_rejected(self) -> None:
        """One `commit_rejected` per group and error code refused since the last call, dated by
        its first refusal (called by the analytics log before each append)."""
        if self.sink is None:
            return
        for (group_id, group_type, error), (count, first_ms, last_ms) in self._rejected.items():
            self.sink(
                {
                    "event": "commit_rejected",
                    "group_id": group_id,
                    "protocol": group_type,
                    "error_code": error,
                    "error": ErrorCode(error).name,
                    "count": count,
                    "last_ms": last_ms,
                },
                first_ms,
            )
        self._rejected.clear()
        if self._rejected_dropped:
            log.warning(
                "%d refused offset commits were not recorded in __corral_analytics "
                "(refusals of more than %d groups in one interval)",
                self._rejected_dropped,
                MAX_REJECTED_KEYS,
            )
            self._rejected_dropped = 0

    # -- consumer groups -------------------------------------------------------------------------

    def consumer_member_gone(self, group: ConsumerGroup, member: ConsumerMember, why: str) -> None:
        """A member's removal is being written: "leaves..." (it asked), SESSION_EXPIRED, or
        another reason to fence it; logged at INFO."""
        log.info(
            "group %s: member %s %s",
            group.group_id,
            member.member_id,
            why if why.startswith("leaves") else f"fenced: {why}",
            extra=fields(group.group_id, member.member_id, member.current.epoch),
        )
        if why.startswith("leaves"):
            gone = ("member_left", "left")
        elif why == SESSION_EXPIRED:
            gone = ("member_expired", "session_timeout")
        else:
            gone = ("member_fenced", why)
        self._gone[(group.group_id, member.member_id)] = (*gone, member.current.epoch)

    def static_member_replaced(
        self, group: ConsumerGroup, old: ConsumerMember, new_id: str
    ) -> None:
        """A static member rejoins under a new id (its records are being written): the old id
        is fenced, the new one joins."""
        log.info(
            "group %s: static member %s rejoins as %s", group.group_id, old.instance_id, new_id
        )
        self._gone[(group.group_id, old.member_id)] = (
            "member_fenced",
            STATIC_REPLACED,
            old.current.epoch,
        )

    def consumer_record(
        self, group: ConsumerGroup, record: cr.ConsumerRecord, leaving: ConsumerMember | None
    ) -> None:
        """A live record of the group, before it is applied (`leaving`: the member its
        tombstone removes)."""
        if self.sink is None:
            return
        gid = group.group_id
        if isinstance(record, cr.MemberMetadata):
            if record.member_id not in group.members:
                self._note_change(gid, "member_joined", len(group.members))
                self._emit(
                    "member_joined",
                    gid,
                    CLASSIC if record.classic else CONSUMER,
                    member_id=record.member_id,
                    instance_id=record.instance_id,
                    client_id=record.client_id,
                    client_host=record.client_host,
                    group_epoch=group.group_epoch,
                )
            else:
                self._note_change(gid, "member_updated", len(group.members))
        elif leaving is not None:
            event, reason, epoch = self._gone.pop(
                (gid, leaving.member_id), ("member_left", "left", leaving.current.epoch)
            )
            self._note_change(gid, event, len(group.members))
            self._emit(
                event,
                gid,
                CLASSIC if leaving.classic else CONSUMER,
                member_id=leaving.member_id,
                instance_id=leaving.instance_id,
                client_id=leaving.client_id,
                client_host=leaving.client_host,
                group_epoch=group.group_epoch,
                member_epoch=epoch,
                reason=reason,
            )
        elif isinstance(record, cr.GroupEpoch) and record.epoch > group.group_epoch:
            cause, before = self._change.pop(gid, ("metadata_changed", len(group.members)))
            now = wall_ms()
            self._open.setdefault(gid, _Rebalance(now, before, cause))
            self._emit(
                "rebalance_start",
                gid,
                CONSUMER,
                now,
                group_epoch=record.epoch,
                members_before=before,
                members=len(group.members),
                cause=cause,
            )
        elif isinstance(record, cr.TargetEpoch):
            self._change.pop(gid, None)  # a change that bumped nothing (a rack, a timeout)
            changed = self._targets_changed.pop(gid, 0)
            if (
                len(group.members) <= EVERY_TARGET_UP_TO
                or changed >= len(group.members)
                or not group.members
            ):
                self._unsent_target.pop(gid, None)
                self._target_event(group, record.epoch)
            else:
                self._unsent_target[gid] = record.epoch
                self._targets_changed[gid] = changed  # counted toward the next one
            if not group.members and gid in self._open:
                self._end(gid, CONSUMER, "group_epoch", group.group_epoch, 0)
        elif isinstance(record, (cr.TargetMember, cr.ConsumerTombstone)):
            if isinstance(record, cr.TargetMember) or record.kind == cr.TARGET_MEMBER:
                self._targets_changed[gid] = self._targets_changed.get(gid, 0) + 1
        elif isinstance(record, cr.CurrentAssignment):
            member = group.members.get(record.member_id)
            previous = member.current.epoch if member is not None else 0
            self._member_epoch(
                group,
                record.member_id,
                record.epoch,
                previous,
                MemberState.of(record.state),
                lambda: _all_at(group, member, record, group.group_epoch),
            )

    def members_moved(self, group: ConsumerGroup, moves: list[tuple[str, int, int]]) -> None:
        """The network thread moved members (member id, epoch, previous epoch) to a new target
        epoch, their partitions as they were (applied to the group already). A group of more
        than EVERY_TARGET_UP_TO members records no `member_epoch` for these (a target moves
        nearly all of them: 50,000 events a target, saying only that the epoch moved); its
        rebalance still ends when they are all there."""
        if self.sink is None or not moves:
            return
        if len(group.members) <= EVERY_TARGET_UP_TO:
            for member_id, epoch, previous in moves:
                self._member_epoch(
                    group, member_id, epoch, previous, MemberState.STABLE, lambda: False
                )
        epoch = group.group_epoch
        self._member_epoch(
            group,
            "",
            epoch,
            epoch,
            MemberState.STABLE,
            lambda: group.epoch_counts.get(epoch, 0) == len(group.members),
        )

    def _member_epoch(
        self,
        group: ConsumerGroup,
        member_id: str,
        epoch: int,
        previous: int,
        state: MemberState,
        all_at: Callable[[], bool],
    ) -> None:
        """A member's new assignment state: its epoch change, and the end of the rebalance
        when every member is at the group's epoch (`all_at`)."""
        gid = group.group_id
        self._change.pop(gid, None)  # a change that bumped nothing (a static replacement)
        if epoch != previous:
            self._emit(
                "member_epoch",
                gid,
                CONSUMER,
                member_id=member_id,
                member_epoch=epoch,
                previous_member_epoch=previous,
                state=state.name.lower(),
            )
        group_epoch = group.group_epoch
        if gid in self._open and epoch == group_epoch == group.assignment_epoch and all_at():
            if self._unsent_target.pop(gid, None) == group_epoch:
                self._target_event(group, group_epoch)
            self._end(gid, CONSUMER, "group_epoch", group_epoch, len(group.members))

    def _target_event(self, group: ConsumerGroup, epoch: int) -> None:
        self._emit(
            "target_assignment",
            group.group_id,
            CONSUMER,
            group_epoch=epoch,
            assignment={m: self._named(parts) for m, parts in group.target.items()},
        )

    def _note_change(self, group_id: str, cause: str, members: int) -> None:
        """The change an epoch bump written next answers: the first one of the write (with the
        member count before it), unless that was only a metadata update."""
        noted = self._change.get(group_id)
        if noted is None or (noted[0] == "member_updated" and cause != noted[0]):
            self._change[group_id] = (cause, members if noted is None else noted[1])

    def _named(self, partitions: Partitions) -> list[list[Any]]:
        named: list[list[Any]] = []
        for topic_id, ps in partitions.items():
            name = self.topics.name_of(topic_id)  # once per topic: it makes a UUID
            named.extend([name, p] for p in ps)
        named.sort()
        return named


def classic_partitions(protocol_type: str | None, assignment: bytes) -> list[list[Any]] | None:
    """A classic member's assigned partitions, decoded from the ConsumerProtocol assignment;
    None when the group is not a consumer group (Connect...) or the bytes are not one."""
    if protocol_type != "consumer" or not assignment:
        return None if protocol_type != "consumer" else []
    try:
        assigned, _ = _core.decode_consumer_assignment(assignment)
    except ValueError:
        return None
    return sorted([topic, p] for topic, ps in assigned for p in ps)
