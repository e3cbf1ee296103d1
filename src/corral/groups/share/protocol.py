"""ShareGroupHeartbeat on a shard's share groups (Kafka's GroupMetadataManager.shareGroupHeartbeat;
reference/share-groups.md §2): joins, leaves, epochs, session timeouts, the group epoch bumps,
the target assignment (assignor.py, at most once per `share.assignment.interval.ms`) and the
initialization of the share partitions a subscription reaches.

A heartbeat decides its records, applies them through the shard's `replay` (the function loading
uses) and answers once they are durable. Share members have no revocation phase: a member takes
its target and the target's epoch at its next heartbeat. Initializing a share partition writes its
first state to `__share_group_state` (the share partitions' `initialize`) in the same step, so a
subscribed partition is assignable from the heartbeat that found it (Kafka assigns it one
heartbeat later, once its share coordinator answered).

Costs: a heartbeat is O(its member) except when it recomputes the target, O(members + slots) at
most once per assignment interval; the partitions to initialize are looked for only when the
group's subscriptions or the topics changed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from corral.clock import wall_ms
from corral.errors import ErrorCode
from corral.groups.share import assignor
from corral.groups.share.state import ShareGroup, ShareMember
from corral.groups.storage import share_records as sr
from corral.later import Later

if TYPE_CHECKING:
    from corral.groups.consumer.targets.inputs import TopicImage
    from corral.groups.group import Groups
    from corral.groups.metrics import GroupMetrics
    from corral.groups.share.messages import ShareGroupHeartbeatResponse
    from corral.groups.storage.records import Record
    from corral.groups.storage.writer import CoordinatorLog
    from corral.groups.timers import Timers

log = logging.getLogger("corral.groups")

JOIN_EPOCH = 0
LEAVE_EPOCH = -1


class ShareStates(Protocol):
    """What the group coordinator asks of the share partitions' state (src/corral/shares/):
    Kafka's persister calls."""

    def initialize(
        self, group_id: str, topics: dict[bytes, tuple[int, ...]], start_offset: int
    ) -> Later:
        """Writes the first state of each share partition (StartOffset -1: share.auto.offset.reset
        decides at first use); resolves to an ErrorCode once durable."""
        ...

    def delete(self, group_id: str, topics: dict[bytes, tuple[int, ...]]) -> Later:
        """Forgets the share partitions' state; resolves to an ErrorCode once durable."""
        ...

    def reset(self, group_id: str, topic_id: bytes, index: int, start_offset: int) -> Later:
        """The share partition starts over at `start_offset` (AlterShareGroupOffsets)."""
        ...

    def describe(self, group_id: str, topic_id: bytes, index: int) -> tuple[int, int]:
        """(start offset, delivery complete count); (-1, -1) without state."""
        ...


class ShareGroupError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(slots=True)
class ShareHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None
    topic_names: list[str] | None
    client_id: str
    client_host: str


def error_answer(code: ErrorCode, message: str | None = None) -> ShareGroupHeartbeatResponse:
    """Kafka answers heartbeat errors with the code and its message (no member id)."""
    return {"error_code": code, "error_message": message, "member_id": None, "member_epoch": 0}


class ShareGroups:
    def __init__(
        self,
        groups: Groups,
        writer: CoordinatorLog,
        replay: Callable[[Record], None],
        timers: Timers,
        topics: TopicImage,
        group_setting: Callable[[str, str], Any],
        settings: Any,
        metrics: GroupMetrics,
    ):
        self.groups = groups
        self.writer = writer
        self.replay = replay
        self.timers = timers
        self.topics = topics
        self.group_setting = group_setting
        self.settings = settings
        self.metrics = metrics
        # The share partitions' state (set by the broker; None in in-process tests: nothing to
        # initialize beyond the group's own records).
        self.states: ShareStates | None = None

    # ============================================================================ heartbeat ===

    def heartbeat(self, req: ShareHeartbeat) -> Later:
        try:
            if req.member_epoch == LEAVE_EPOCH:
                return self._leave(req)
            return self._heartbeat(req)
        except ShareGroupError as e:
            return Later.of(error_answer(e.code, e.message))

    def group_of(self, group_id: str, create: bool) -> ShareGroup:
        group = self.groups.get(group_id)
        if group is None or (isinstance(group, ShareGroup) and group.deleting):
            if not create:
                raise ShareGroupError(
                    ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found."
                )
            return ShareGroup(group_id)
        if not isinstance(group, ShareGroup):
            if create and group.is_empty() and group.type == "classic":
                return ShareGroup(group_id)  # an empty classic group is replaced
            raise ShareGroupError(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
            )
        return group

    def _heartbeat(self, req: ShareHeartbeat) -> Later:
        gid = req.group_id
        joining = req.member_epoch == JOIN_EPOCH
        group = self.group_of(gid, create=joining)
        member = group.members.get(req.member_id)
        records: list[Record] = []
        if member is None:
            if not joining:
                raise ShareGroupError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {req.member_id} is not a member of group {gid}.",
                )
            max_size = self.settings["group.share.max.size"]
            if len(group.members) >= max_size:
                raise ShareGroupError(
                    ErrorCode.GROUP_MAX_SIZE_REACHED,
                    f"The share group has reached its maximum capacity of {max_size} members.",
                )
            member = ShareMember(req.member_id)
        elif not joining and req.member_epoch != member.epoch:
            if req.member_epoch > member.epoch or req.member_epoch != member.previous_epoch:
                if req.member_epoch > member.epoch:
                    why = (
                        f"The share group member has a greater member epoch ({req.member_epoch})"
                        f" than the one known by the group coordinator ({member.epoch})."
                    )
                else:
                    why = (
                        f"The share group member has a smaller member epoch ({req.member_epoch})"
                        f" than the one known by the group coordinator ({member.epoch}), and it "
                        f"does not match the previous member epoch ({member.previous_epoch})."
                    )
                raise ShareGroupError(
                    ErrorCode.FENCED_MEMBER_EPOCH,
                    why + " The member must abandon all its partitions and rejoin.",
                )
        new_member = req.member_id not in group.members
        names = member.topic_names if req.topic_names is None else tuple(sorted(req.topic_names))
        rack = member.rack_id if req.rack_id is None else req.rack_id
        changed_subscription = new_member or names != member.topic_names
        if (
            changed_subscription
            or rack != member.rack_id
            or req.client_id != member.client_id
            or req.client_host != member.client_host
        ):
            records.append(
                sr.ShareMemberMetadata(
                    gid, req.member_id, rack, req.client_id, req.client_host, names
                )
            )
        # A subscription changed, or partitions became initialized since the last target
        # (Kafka's initializedAssignmentPending, kept as a flag).
        bump = changed_subscription or group.assignment_pending
        group.assignment_pending = False
        # The subscribed partitions not yet initialized (only looked for when something moved):
        # they are initializing from now on, and assignable once their state is written.
        initialize: dict[bytes, tuple[int, ...]] = {}
        if changed_subscription or group.topics_changed:
            group.topics_changed = False
            subscribed = set(group.subscribers) | set(names)
            initialize, state = self._to_initialize(group, subscribed)
            if state is not None:
                records.append(state)
        epoch = group.epoch + 1 if bump else group.epoch
        if bump:
            self.metrics.share_rebalances += 1
            records.append(sr.ShareGroupEpoch(gid, epoch, group.metadata_hash))
        for record in records:
            self.replay(record)
        group = self.groups[gid]  # type: ignore[assignment]
        assert isinstance(group, ShareGroup), "the records made it a share group"
        member = group.members[req.member_id]
        more = self._maybe_new_target(group)
        for record in more:
            self.replay(record)
        reconciled = self._reconcile(group, member)
        for record in reconciled:
            self.replay(record)
        more.extend(reconciled)
        records.extend(more)
        self._arm_session(group, member)
        assignment_changed = any(
            isinstance(r, sr.ShareCurrentAssignment) and r.member_id == member.member_id
            for r in more
        )
        answer: ShareGroupHeartbeatResponse = {
            "error_code": ErrorCode.NONE,
            "member_id": member.member_id,
            "member_epoch": member.epoch,
            "heartbeat_interval_ms": self.group_setting(gid, "share.heartbeat.interval.ms"),
            "assignment": None,
        }
        if joining or req.topic_names is not None or assignment_changed:
            answer["assignment"] = {
                "topic_partitions": [
                    {"topic_id": t, "partitions": list(ps)}
                    for t, ps in sorted(member.assigned.items())
                ]
            }
        writes = [self.writer.write(gid, records, applied=True)] if records else []
        if initialize:
            self._initialize(gid, initialize)
        return _answer_when_durable(writes, answer)

    def _initialize(self, group_id: str, topics: dict[bytes, tuple[int, ...]]) -> None:
        """Writes the share partitions' first state (StartOffset -1: share.auto.offset.reset
        decides at the first fetch); once durable they move from initializing to initialized and
        the group's next heartbeat assigns them (Kafka's persister round trip; a failure leaves
        them uninitialized, to be tried again)."""
        states = self.states
        started = states.initialize(group_id, topics, -1) if states else Later.of(ErrorCode.NONE)

        def done(error: ErrorCode) -> None:
            group = self.groups.get(group_id)
            if not isinstance(group, ShareGroup) or group.deleting:
                return
            record = group.state_partitions_record()
            for topic_id, parts in topics.items():
                known = record.initializing.get(topic_id)
                if known is not None:
                    left = tuple(p for p in known[1] if p not in parts)
                    if left:
                        record.initializing[topic_id] = (known[0], left)
                    else:
                        del record.initializing[topic_id]
                if not error:
                    have = record.initialized.get(topic_id)
                    name = self.topics.name_of(topic_id) or (known[0] if known else "")
                    merged = tuple(sorted({*(have[1] if have else ()), *parts}))
                    record.initialized[topic_id] = (name, merged)
            self.replay(record)
            group.topics_changed = bool(error)
            group.assignment_pending = not error
            self.writer.write(group_id, [record], applied=True)

        started.then(done)

    def _to_initialize(
        self, group: ShareGroup, names: set[str]
    ) -> tuple[dict[bytes, tuple[int, ...]], sr.ShareStatePartitions | None]:
        """The subscribed partitions to initialize now (the new ones of every subscribed topic),
        and the group's state-partitions record saying they are initialized; (empty, None) when
        there are none."""
        new: dict[bytes, tuple[int, ...]] = {}
        for name in sorted(names):
            topic = self.topics.topic(name)
            topic_id = self.topics.id_of(name)
            if topic is None or topic_id is None:
                continue
            done = group.initialized.get(topic_id)
            going = group.initializing.get(topic_id)
            have = len(done[1] if done else ()) + len(going[1] if going else ())
            if topic.partitions > have:
                new[topic_id] = tuple(range(have, topic.partitions))
        if not new:
            return new, None
        record = group.state_partitions_record()
        for topic_id, parts in new.items():
            going = record.initializing.get(topic_id)
            before = going[1] if going is not None else ()
            record.initializing[topic_id] = (self.topics.name_of(topic_id), before + parts)
        return new, record

    def _maybe_new_target(self, group: ShareGroup) -> list[Record]:
        """The new target assignment, when the group epoch moved past it and the assignment
        interval allows (Kafka's maybeUpdateTargetAssignment)."""
        if group.epoch <= group.assignment_epoch:
            return []
        interval = self.group_setting(group.group_id, "share.assignment.interval.ms")
        now = wall_ms()
        ts = group.assignment_timestamp_ms
        if ts != 0 and interval != 0 and now < ts + interval:
            return []
        order = list(group.members)
        subscriptions = {}
        for member_id, member in group.members.items():
            ids = set()
            for name in member.topic_names:
                topic_id = self.topics.id_of(name)
                if topic_id is not None:
                    ids.add(topic_id)
            subscriptions[member_id] = frozenset(ids)
        targets = assignor.assign(
            order,
            subscriptions,
            group.assignable(),
            {m: member.target for m, member in group.members.items()},
        )
        gid = group.group_id
        out: list[Record] = [
            sr.ShareTargetMember(gid, m, target)
            for m, target in targets.items()
            if target != group.members[m].target
        ]
        out.append(sr.ShareTargetEpoch(gid, group.epoch, now))
        return out

    def _reconcile(self, group: ShareGroup, member: ShareMember) -> list[Record]:
        """The member takes its target and the target's epoch (no revocation phase)."""
        if member.epoch == group.assignment_epoch and member.assigned == member.target:
            return []
        return [
            sr.ShareCurrentAssignment(
                group.group_id,
                member.member_id,
                group.assignment_epoch,
                member.epoch,
                dict(member.target),
            )
        ]

    # ======================================================================== leave, fence ===

    def _leave(self, req: ShareHeartbeat) -> Later:
        gid = req.group_id
        group = self.groups.get(gid)
        if group is None:
            raise ShareGroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
        if not isinstance(group, ShareGroup):
            raise ShareGroupError(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a share group."
            )
        if req.member_id not in group.members:
            raise ShareGroupError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {req.member_id} is not a member of group {gid}.",
            )
        written = self.fence(group, req.member_id, "left the group")
        return written.map(
            lambda error: (
                error_answer(error)
                if error
                else {"error_code": ErrorCode.NONE, "member_id": req.member_id, "member_epoch": -1}
            )
        )

    def fence(self, group: ShareGroup, member_id: str, why: str) -> Later:
        """Removes a member (it left, or its session expired): its three records' tombstones,
        the group epoch bumped; the others get their new targets at their next heartbeat."""
        gid = group.group_id
        records: list[Record] = [
            sr.ShareTombstone(kind, gid, member_id)
            for kind in (sr.CURRENT_ASSIGNMENT, sr.TARGET_MEMBER, sr.MEMBER_METADATA)
        ]
        records.append(sr.ShareGroupEpoch(gid, group.epoch + 1, group.metadata_hash))
        self.metrics.share_rebalances += 1
        if len(group.members) == 1:
            records.append(sr.ShareTargetEpoch(gid, group.epoch + 1, 0))
        log.info("share group %s: member %s %s", gid, member_id, why)
        for record in records:
            self.replay(record)
        return self.writer.write(gid, records, applied=True)

    def _arm_session(self, group: ShareGroup, member: ShareMember) -> None:
        if member.timer_key == 0:
            member.timer_key = self.timers.register(
                self._session_expired, group.group_id, member.member_id
            )
        self.timers.schedule(
            member.timer_key, self.group_setting(group.group_id, "share.session.timeout.ms")
        )

    def _session_expired(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if isinstance(group, ShareGroup) and member_id in group.members and not group.deleting:
            self.fence(group, member_id, "was fenced: its session expired")

    def forget_member(self, member: ShareMember) -> None:
        if member.timer_key:
            self.timers.unregister(member.timer_key)
            member.timer_key = 0

    # ================================================================= GroupType (shard.py) ===

    def on_loaded(self, group: ShareGroup) -> None:
        for member in group.members.values():
            self._arm_session(group, member)
        # Partitions left initializing by the last run are looked at again; the targets are
        # checked against what is initialized at the next heartbeat.
        group.topics_changed = True
        group.assignment_pending = bool(group.initialized)

    def on_unloaded(self, group: ShareGroup) -> None:
        self.forget(group)

    def forget(self, group: ShareGroup) -> None:
        for member in group.members.values():
            self.forget_member(member)

    def on_topics_changed(self, names: set[str]) -> None:
        for group in self.groups.values():
            if isinstance(group, ShareGroup) and any(n in group.subscribers for n in names):
                group.topics_changed = True


def _answer_when_durable(writes: list[Later], answer: Any) -> Later:
    """`answer` once every write is durable, else the first write's error."""
    out = Later()
    left = len(writes)
    if not left:
        out.resolve(answer)
        return out
    errors: list[ErrorCode] = []

    def one(error: ErrorCode) -> None:
        nonlocal left
        left -= 1
        if error:
            errors.append(error)
        if left == 0:
            out.resolve(
                error_answer(ErrorCode.COORDINATOR_NOT_AVAILABLE if errors else ErrorCode.NONE)
                if errors
                else answer
            )

    for write in writes:
        write.then(one)
    return out


# ================================================================== admin: share offsets ===


def admin_group(groups: Groups, group_id: str, create: bool) -> ShareGroup | ErrorCode:
    """The share group Alter/DeleteShareGroupOffsets work on: GROUP_ID_NOT_FOUND for another
    type (or a missing group, unless `create`: Alter makes an empty one), NON_EMPTY_GROUP while
    it has members."""
    group = groups.get(group_id)
    if group is None or (isinstance(group, ShareGroup) and group.deleting):
        return ShareGroup(group_id) if create else ErrorCode.GROUP_ID_NOT_FOUND
    if not isinstance(group, ShareGroup):
        return ErrorCode.GROUP_ID_NOT_FOUND
    return ErrorCode.NON_EMPTY_GROUP if group.members else group


def alter_offsets(
    shares: ShareGroups,
    group: ShareGroup,
    topics: dict[bytes, tuple[str, tuple[int, ...]]],
    starts: dict[tuple[bytes, int], int],
) -> Later:
    """AlterShareGroupOffsets on an empty share group: the partitions become initialized at the
    given start offsets (the share partitions start over there)."""
    gid = group.group_id
    record = group.state_partitions_record()
    for topic_id, (name, parts) in topics.items():
        known = record.initialized.get(topic_id)
        merged = tuple(sorted(set(known[1] if known else ()) | set(parts)))
        record.initialized[topic_id] = (name, merged)
    records: list[Record] = [record]  # its replay creates the group if need be
    for r in records:
        shares.replay(r)
    writes = [shares.writer.write(gid, records, applied=True)]
    if shares.states is not None:
        for (topic_id, index), start in starts.items():
            writes.append(shares.states.reset(gid, topic_id, index, start))
    return _answer_when_durable(writes, ErrorCode.NONE).map(
        lambda answer: answer if isinstance(answer, ErrorCode) else ErrorCode(answer["error_code"])
    )


def delete_offsets(shares: ShareGroups, group: ShareGroup, topic_ids: list[bytes]) -> Later:
    """DeleteShareGroupOffsets on an empty share group: the topics' share partitions forget
    their state and are no longer initialized (a subscription initializes them again)."""
    gid = group.group_id
    record = group.state_partitions_record()
    gone = {t: record.initialized.pop(t)[1] for t in topic_ids if t in record.initialized}
    shares.replay(record)
    group.topics_changed = True
    writes = [shares.writer.write(gid, [record], applied=True)]
    if shares.states is not None and gone:
        writes.append(shares.states.delete(gid, gone))
    return _answer_when_durable(writes, ErrorCode.NONE).map(
        lambda answer: answer if isinstance(answer, ErrorCode) else ErrorCode(answer["error_code"])
    )
