"""The KIP-848 consumer group protocol as the coordinator runs it (reference/kip848.md §1-4):
ConsumerGroupHeartbeat (join, update, reconcile, leave), group epoch bumps, session and
rebalance timeouts, static members and regex subscriptions; when targets are computed is
target_computation.py's.

`ConsumerProtocol` is one part of `GroupCoordinator` (coordinator.py). Every change follows one
discipline: a handler decides from the group as it is and returns records plus an answer; the
records are applied at once by the coordinator's `replay` (the function loading uses) and
appended to the log; the answer leaves once they are durable (`_write_consumer`). As in Kafka,
later requests of the group see the records' effect before the fsync; a failed write answers
NOT_COORDINATOR and makes the group's next write rewrite the whole group, so the log again
describes memory.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any

import trio

from ...apis import Later
from ...clock import wall_ms
from ...errors import ErrorCode
from ...logformat import fields
from ...uuids import random_uuid_text
from ..classic import ClassicGroup, ClassicState
from ..storage import consumer_records as cr
from ..storage.records import GroupMetadata, GroupTombstone
from ..timers import Timers
from .answer import assignment_answer, error_answer, heartbeat_interval_ms
from .assignment_records import EMPTY_ASSIGNMENT, as_record
from .members import (
    GroupError,
    HeartbeatRequest,
    check_epoch,
    copy_member,
    metadata_differs,
    names_after,
    preferred_assignor_after,
    refresh_regexes,
    regex_refresh_due,
    regex_topics,
    regex_users_after,
    regexes_after,
    removal_records,
    replaced_members,
    resolve_regex,
    updated_member,
)
from .migration import (
    MigrationPolicy,
    classic_protocols,
    downgrade_record,
    may_downgrade,
    upgrade_records,
)
from .reconcile import FencedMember, MemberState, Reconciled, reconcile
from .state import ConsumerGroup, ConsumerMember
from .target import TopicImage, member_topic_ids, metadata_hash
from .target_computation import TargetComputation
from .view_mirror import apply_moves

if TYPE_CHECKING:
    from ...assignors import AssignorRegistry
    from ..storage.writer import CoordinatorLog

log = logging.getLogger("corral.groups")

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
# Records whose write pauses the network thread's moves of the group's members (above).
_PAUSING_MOVES = (cr.TargetEpoch, cr.TargetMember, GroupMetadata, GroupTombstone)


class ConsumerProtocol(TargetComputation):
    # Given by GroupCoordinator.
    groups: dict
    log: CoordinatorLog
    timers: Timers
    settings: Any
    rebalance_wait_ms: Callable[[int], int]
    topics: TopicImage
    assignors: AssignorRegistry
    migration: MigrationPolicy
    max_size: int
    _nursery: trio.Nursery | None
    group_setting: Callable[[str, str], Any]
    authorize_regexes = False  # an authorizer is on: regexes resolve with a heartbeat's context

    # =========================================================================== writing ===

    def _write_consumer(
        self,
        group_id: str,
        records: list,
        batch: bytes | None = None,
        downgrade_rebalance: bool = True,
    ) -> Later:
        """Applies `records` now (through `replay`) and appends them (as `batch` when they come
        encoded); resolves with the write's error once durable. Records ending with a classic
        group record downgrade the group, with a rebalance unless `downgrade_rebalance` is
        False. The moves the network thread made before are applied first
        (rust/groups/consumer_epoch_moves.rs); while a write changes what a move is decided on (a
        new target, the whole group rewritten, a conversion) the network thread moves none of the
        group's members, so that none is moved to a target before the target is in the log.
        Other writes (a member's own records) need no such pause: the view's lock orders a
        move of a member before or after the replay (and so the append) of its records."""
        path = self.log.core_commits
        if path is None:
            return self._write_consumer_now(group_id, records, batch, downgrade_rebalance)
        group = self.groups.get(group_id)
        pause = (
            group is None
            or getattr(group, "needs_rewrite", True)
            or any(isinstance(r, _PAUSING_MOVES) for r in records)
        )
        if not pause:
            self.apply_core_moves()
            return self._write_consumer_now(group_id, records, batch, downgrade_rebalance)
        path.python_writing_group(group_id, True)
        try:
            self.apply_core_moves()
            return self._write_consumer_now(group_id, records, batch, downgrade_rebalance)
        finally:
            path.python_writing_group(group_id, False)

    def _write_consumer_now(
        self, group_id: str, records: list, batch: bytes | None, downgrade_rebalance: bool
    ) -> Later:
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and group.needs_rewrite:
            records = [*group.all_records(), *records]
            group.needs_rewrite = False
            batch = None
        downgrade = bool(records) and isinstance(records[-1], GroupMetadata)
        protocols = classic_protocols(group, records) if downgrade else {}
        for record in records:
            self.replay(record)
        if downgrade:
            classic = self.groups.get(group_id)
            if isinstance(classic, ClassicGroup):
                self._downgraded(classic, protocols, downgrade_rebalance)
        written = self.log.write(group_id, records, applied=True, batch=batch)

        def failed(error: ErrorCode) -> None:
            if error:
                current = self.groups.get(group_id)
                if isinstance(current, ConsumerGroup):
                    current.needs_rewrite = True

        written.then(failed)
        return written

    def apply_core_moves(self) -> None:
        """Memory follows the members the network thread moved to their group's target epoch
        since the last call (before any request is handled, and in every write of a consumer
        group); a group one of whose moves did not become durable is rewritten whole by its
        next write."""
        path = self.log.core_commits
        drained = path.drain_moves() if path is not None else None
        if drained is None:
            return
        moved, failed = drained
        by_group: dict[str, list[tuple[str, int, int]]] = {}
        for group_id, member_id, epoch, previous in moved:
            by_group.setdefault(group_id, []).append((member_id, epoch, previous))
        for group_id, moves in by_group.items():
            group = self.groups.get(group_id)
            if isinstance(group, ConsumerGroup):
                self.events.members_moved(group, apply_moves(group, moves))
        for group_id in failed:
            group = self.groups.get(group_id)
            if isinstance(group, ConsumerGroup):
                group.needs_rewrite = True

    def _downgraded(
        self, classic: ClassicGroup, protocols: dict[str, list[tuple[str, bytes]]], rebalance: bool
    ) -> None:
        """After a downgrade's records: the classic group's members support every protocol
        they joined with (the record keeps only the chosen one), and rejoin if `rebalance`."""
        for member in classic.members.values():
            if member.member_id in protocols:
                classic.update(
                    member,
                    protocols[member.member_id],
                    member.rebalance_timeout_ms,
                    member.session_timeout_ms,
                    None,
                )
        if rebalance:
            self._prepare_rebalance(
                classic, "the group moved from the consumer to the classic protocol"
            )

    # ========================================================================= heartbeat ===

    def consumer_heartbeat(self, req: HeartbeatRequest) -> Later:
        """ConsumerGroupHeartbeat after its static validation (handlers/consumer.py): resolves
        to the version-independent answer once its records are durable."""
        try:
            if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                records, answer = self._leave(req)
            else:
                records, answer = self._heartbeat(req)
        except GroupError as e:
            return Later.of(error_answer(e.code, e.message))
        except FencedMember as e:
            return Later.of(error_answer(e.code, str(e)))
        group_id = req.group_id
        if records:
            written = self._write_consumer(group_id, records)
        else:
            written = Later.of(ErrorCode.NONE)
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            if records and isinstance(records[-1], GroupTombstone):
                # A classic group became this group: its members' sessions start now.
                for converted in group.members.values():
                    if not converted.session_key:
                        self._arm_session(group, converted)
            member = group.members.get(answer["member_id"])
            moved = False
            if member is not None and answer["member_epoch"] >= 0:
                self._arm_session(group, member)
                moved = any(
                    isinstance(r, cr.CurrentAssignment) and r.member_id == member.member_id
                    for r in records
                )
                if moved:
                    self._rebalance_timer(group_id, member, member.current)
            self._maybe_offload(group)
            if member is not None and answer["member_epoch"] >= 0:  # adaptive (answer.py)
                answer["heartbeat_interval_ms"] = heartbeat_interval_ms(
                    group, member, moved, self.settings, self.group_setting, wall_ms()
                )
        return written.map(lambda error: error_answer(error) if error else answer)

    def _heartbeat(self, req: HeartbeatRequest) -> tuple[list, dict[str, Any]]:
        now = wall_ms()
        group_id = req.group_id
        records: list = []
        group, converted = self._group_for(req, records)
        member_id = req.member_id or random_uuid_text()  # v0: the coordinator names members
        self._check_size(group, member_id, req.instance_id)
        member, replaced = self._member_for(group, req, member_id, records)
        updated = updated_member(member, req)
        group_epoch, subscription_changed = self._subscribe(
            group, member, updated, replaced, records, now, req.topic_filter
        )
        current = self._reconcile_member(
            group, group_epoch, member, updated, subscription_changed, req.owned, records, now
        )
        group.regexes_stale &= req.topic_filter is None  # else refreshed in `records`
        if converted:
            # After the consumer records, so its replay finds a consumer group and keeps the
            # group's offsets (KIP-848 §5).
            records.append(GroupTombstone(group_id))
        answer = {
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "member_id": member_id,
            "member_epoch": current.epoch,
            "heartbeat_interval_ms": self.group_setting(group_id, "consumer.heartbeat.interval.ms"),
            "assignment": None,
        }
        if req.member_epoch == 0 or req.is_full or current.assigned != member.current.assigned:
            answer["assignment"] = assignment_answer(current.assigned)
        return records, answer

    def _group_for(self, req: HeartbeatRequest, records: list) -> tuple[ConsumerGroup, bool]:
        """The group a heartbeat is for, and whether it replaces a classic group. A joining
        member (epoch 0) creates it (through the records), converting an empty classic group,
        or upgrading a live one (its records appended)."""
        group_id = req.group_id
        existing = self.groups.get(group_id)
        if isinstance(existing, ConsumerGroup) and not existing.deleting:
            return existing, False
        if req.member_epoch != 0:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if isinstance(existing, ConsumerGroup):  # its deletion is being written
            raise GroupError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, f"Group {group_id} is being deleted."
            )
        if isinstance(existing, ClassicGroup):
            if existing.is_empty():
                log.info("group %s: the empty classic group becomes a consumer group", group_id)
                return ConsumerGroup(group_id), True
            return self._upgrade(existing, records), True
        return ConsumerGroup(group_id), False  # created by the records below

    def _check_size(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> None:
        """GROUP_MAX_SIZE_REACHED for a new member of a full group (a static member's instance
        id already in the group replaces or is refused, never grows it)."""
        max_size = self.settings["group.consumer.max.size"]
        if (
            len(group.members) >= max_size
            and member_id not in group.members
            and (instance_id is None or instance_id not in group.static_members)
        ):
            raise GroupError(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {max_size} members.",
            )

    def _upgrade(self, classic: ClassicGroup, records: list) -> ConsumerGroup:
        """An online upgrade (KIP-848 §5): the consumer group a live classic group becomes, as
        the records appended make it (applied when they are written, with the heartbeat's own).
        Its parked JoinGroup and SyncGroup requests are answered REBALANCE_IN_PROGRESS."""
        gid = classic.group_id
        if not self.migration.upgrades:
            raise GroupError(
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"Cannot upgrade classic group {gid} to consumer group because online "
                "upgrade is disabled.",
            )
        if classic.state is ClassicState.DEAD:
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"Group {gid} is being deleted.")
        converted = upgrade_records(classic, self.topics, self.settings["group.consumer.max.size"])
        self._answer_parked(classic, ErrorCode.REBALANCE_IN_PROGRESS)
        group = ConsumerGroup(gid)
        for record in converted:
            group.replay(record)
        records += converted
        log.info(
            "group %s: the classic group (generation %d, %d members) becomes a consumer group",
            gid,
            classic.generation_id,
            len(classic.members),
        )
        return group

    def _subscribe(
        self,
        group: ConsumerGroup,
        member: ConsumerMember,
        updated: ConsumerMember,
        replaced: bool,
        records: list,
        now: int,
        topic_filter=None,
    ) -> tuple[int, bool]:
        """Kafka's step 1: the member's metadata record if it changed, its regex, and a group
        epoch bump when the group's subscriptions (names, regexes, preferred assignor, the
        subscribed topics' metadata) changed. Returns (the group epoch, whether the member's
        subscription changed). From the group's counts, never walking its members."""
        group_id = group.group_id
        is_new = member.member_id not in group.members
        names_changed = updated.topic_names != member.topic_names
        if metadata_differs(member, updated) or (is_new and not replaced):
            records.append(updated.metadata_record(group_id))
        # The members `updated` takes the place of: itself, a static member's old self.
        previous = replaced_members(group, member)
        regex_bump, regex_changed = self._update_regexes(
            group, member, updated, previous, records, now, topic_filter
        )
        assignor_changed = False
        if updated.server_assignor != member.server_assignor or (
            is_new and updated.server_assignor
        ):
            assignor_changed = group.preferred_assignor() != preferred_assignor_after(
                group, previous, updated
            )
        bump = names_changed or regex_bump or assignor_changed
        group_epoch = group.group_epoch
        if bump or group.metadata_expired:
            group.metadata_expired = False
            names = names_after(group, previous, updated.topic_names, regexes_after(group, records))
            new_hash = metadata_hash(names, self.topics)
            if new_hash != group.metadata_hash:
                bump = True
            if bump:
                group_epoch += 1
                records.append(cr.GroupEpoch(group_id, group_epoch, new_hash))
                log.info(
                    "group %s: epoch %d",
                    group_id,
                    group_epoch,
                    extra=fields(group_id, epoch=group_epoch),
                )
        return group_epoch, names_changed or regex_changed

    def _reconcile_member(
        self,
        group: ConsumerGroup,
        group_epoch: int,
        member: ConsumerMember,
        updated: ConsumerMember,
        subscription_changed: bool,
        owned,
        records: list,
        now: int,
    ) -> Reconciled:
        """Kafka's steps 2 and 3: the target (computed now if due) and the member's next
        assignment toward it, its record appended when it changed. `owned`: what the client
        says it owns (None: not said)."""
        target_epoch, target = self._maybe_compute_target(
            group, group_epoch, member, updated, records, now
        )
        current = updated.current
        if (
            subscription_changed
            or current.state is not MemberState.STABLE
            or current.epoch != target_epoch
        ):
            subscribed = member_topic_ids(updated, regexes_after(group, records), self.topics)
            current = reconcile(
                current,
                target_epoch,
                target,
                subscribed,
                subscription_changed,
                owned,
                group.owner_epoch,
            )
            if current != updated.current:
                records.append(updated.assignment_record(group.group_id, current))
        return current

    def _member_for(
        self, group: ConsumerGroup, req: HeartbeatRequest, member_id: str, records: list
    ) -> tuple[ConsumerMember, bool]:
        """The member the heartbeat is from (a new one on epoch 0), epoch checked, and whether it
        replaced a static member's old self (its records appended)."""
        instance_id = req.instance_id
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if req.member_epoch != 0:
                    raise GroupError(
                        ErrorCode.UNKNOWN_MEMBER_ID,
                        f"Member {member_id} is not a member of group {group.group_id}.",
                    )
                return ConsumerMember(member_id), False
            check_epoch(member, req)
            return member, False
        old_id = group.static_members.get(instance_id)
        old = group.members.get(old_id) if old_id is not None else None
        if req.member_epoch == 0:
            if old is None:
                return group.members.get(member_id) or ConsumerMember(member_id), False
            if old.classic is None and old.epoch != STATIC_LEAVE_EPOCH:
                raise GroupError(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} cannot "
                    f"join the group because the instance id is owned by {old.member_id} member.",
                )
            return self._replace_static(group, old, member_id, records), True
        if old is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if old.member_id != member_id:
            raise GroupError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {instance_id} is fenced "
                f"by existing member {old.member_id}.",
            )
        check_epoch(old, req)
        return old, False

    def _replace_static(
        self, group: ConsumerGroup, old: ConsumerMember, member_id: str, records: list
    ) -> ConsumerMember:
        """A static member rejoining under a new id takes its old self's place (Kafka's
        replaceMember): the records that move its metadata, target and assignment."""
        new = copy_member(old, member_id)
        gid = group.group_id
        records += removal_records(gid, old.member_id)
        records += [
            new.metadata_record(gid),
            cr.TargetMember(gid, member_id, as_record(group.target.get(old.member_id, {}))),
            new.assignment_record(gid),
        ]
        self.events.static_member_replaced(group, old, member_id)
        return new

    # ===================================================================== regular exprs ===

    def _update_regexes(
        self,
        group: ConsumerGroup,
        member: ConsumerMember,
        updated: ConsumerMember,
        previous: list[ConsumerMember],
        records: list,
        now: int,
        topic_filter=None,
    ) -> tuple[bool, bool]:
        """(whether the epoch must bump, whether the member's regex changed). A new regex is
        compiled (INVALID_REGULAR_EXPRESSION) and resolved at once against the topics the
        heartbeat may describe (Kafka resolves it asynchronously, then bumps); a regex nobody
        uses once `updated` replaces the `previous` members is tombstoned. Stale (see
        on_topics_changed) or due regexes are resolved again."""
        old, new = member.regex, updated.regex
        due = regex_refresh_due(
            group, now, self.settings["group.consumer.regex.refresh.interval.ms"]
        )
        refreshed = (due or group.regexes_stale and topic_filter is not None) and refresh_regexes(
            group,
            records,
            lambda r: resolve_regex(r, self.topics.names(), topic_filter),
            self._topics_version(),
            now,
            renew_all=due,
        )
        if old == new:
            return refreshed, False
        if new and new not in group.regexes:
            topics = resolve_regex(new, self.topics.names(), topic_filter)
            records.append(cr.RegexTopics(group.group_id, new, topics, self._topics_version(), now))
        if old and regex_users_after(group, old, previous) <= 0:
            records.append(cr.ConsumerTombstone(cr.REGEX, group.group_id, old))
        return True, True

    def _topics_version(self) -> int:
        return self.topics.version

    # =========================================================================== leaving ===

    def _leave(self, req: HeartbeatRequest) -> tuple[list, dict[str, Any]]:
        group = self.groups.get(req.group_id)
        if not isinstance(group, ConsumerGroup) or group.deleting:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise GroupError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {req.member_id} is not a member of group {group.group_id}.",
                )
        else:
            member_id = group.static_members.get(req.instance_id)
            member = group.members.get(member_id) if member_id is not None else None
            if member is None:
                raise GroupError(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown."
                )
            if member.member_id != req.member_id:
                raise GroupError(
                    ErrorCode.FENCED_INSTANCE_ID,
                    f"Static member {req.member_id} with instance id {req.instance_id} "
                    f"is fenced by existing member {member.member_id}.",
                )
        answer = {
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "member_id": member.member_id,
            "member_epoch": req.member_epoch,
            "heartbeat_interval_ms": 0,
            "assignment": None,
        }
        if req.member_epoch == STATIC_LEAVE_EPOCH:
            # A temporary leave: the partitions stay owned (at epoch -2) until the instance
            # rejoins or its session ends; no epoch bump.
            c = member.current
            # Its assignment epochs go to 0: commits under this member id are fenced, and the
            # instance rejoining under a new id holds them from epoch 0 (Kafka 4.3+).
            leaving = Reconciled(
                STATIC_LEAVE_EPOCH,
                c.previous_epoch,
                c.state,
                c.assigned,
                EMPTY_ASSIGNMENT,
                c.reset_epochs(),
            )
            log.info(
                "group %s: static member %s (%s) leaves temporarily",
                group.group_id,
                member.instance_id,
                member.member_id,
            )
            return [member.assignment_record(group.group_id, leaving)], answer
        self.events.consumer_member_gone(group, member, "leaves")
        return self._fence_records(group, [member]), answer

    def _fence_records(self, group: ConsumerGroup, members: list[ConsumerMember]) -> list:
        """Kafka's consumerGroupFenceMembers: the members' (distinct, of the group) tombstones,
        those of the regexes nobody uses any more, a bumped epoch (with the target epoch moved
        too if the group is now empty, KAFKA-20442). From the group's counts: it costs what
        leaves, not what stays, so a whole group leaving one by one costs O(members)."""
        gid = group.group_id
        staying = len(group.members) - len(members)
        if may_downgrade(group, members, staying, self.migration, self.max_size):
            log.info("group %s: only classic members remain; it becomes a classic group", gid)
            leaving = {m.member_id for m in members}
            remaining = [m for m in group.members.values() if m.member_id not in leaving]
            return [
                *group.tombstones(),
                downgrade_record(group, remaining, group.target, self.topics, wall_ms()),
            ]
        records: list = []
        for member in members:
            records += removal_records(gid, member.member_id)
        gone = Counter(m.regex for m in members if m.regex)
        unused = [r for r, n in gone.items() if r in group.regexes and group.regex_counts[r] <= n]
        unused += sorted(group.unused_regexes.difference(gone))
        records += [cr.ConsumerTombstone(cr.REGEX, gid, r) for r in unused]
        names = names_after(group, members, (), regexes_after(group, records))
        epoch = group.group_epoch + 1
        records.append(cr.GroupEpoch(gid, epoch, metadata_hash(names, self.topics)))
        if not staying:
            records.append(cr.TargetEpoch(gid, epoch, 0))
        return records

    def _fence(self, group: ConsumerGroup, member: ConsumerMember, why: str) -> None:
        """Removes a member the coordinator gave up on (session or rebalance timeout)."""
        if (
            self.groups.get(group.group_id) is not group
            or member.member_id not in group.members
            or group.deleting
        ):
            return
        self.events.consumer_member_gone(group, member, why)
        self._write_consumer(group.group_id, self._fence_records(group, [member]))

    # ============================================================================ timers ===

    def _arm_session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if not member.session_key:
            member.session_key = self.timers.register(self._session_timeout, group, member)
            group.session_armed(member)  # steady heartbeats move it from the network thread
        timeout = member.session_timeout_ms  # a classic member's own
        if timeout is None:
            timeout = self.group_setting(group.group_id, "consumer.session.timeout.ms")
        self.timers.schedule(member.session_key, timeout)

    @cached_property
    def _session_timeout(self) -> Callable[[ConsumerGroup, ConsumerMember], None]:
        # One bound method for every member's session timer, not one each (~64 B per member).
        return self._on_session_timeout

    def _on_session_timeout(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        self._fence(group, member, "the member session expired")

    def _rebalance_timer(self, group_id: str, member: ConsumerMember, current: Reconciled) -> None:
        """Arms the revocation deadline when the member enters (or stays in, changed)
        UNREVOKED_PARTITIONS, for the epoch it is at; cancels it otherwise."""
        if current.state is MemberState.UNREVOKED_PARTITIONS:
            if not member.rebalance_key:
                member.rebalance_key = self.timers.register(
                    self._on_rebalance_timeout, group_id, member.member_id
                )
            member.rebalance_epoch = current.epoch
            self.timers.schedule(
                member.rebalance_key, self.rebalance_wait_ms(member.rebalance_timeout_ms)
            )
        elif member.rebalance_key:
            self.timers.cancel(member.rebalance_key)

    def _on_rebalance_timeout(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup):
            return
        member = group.members.get(member_id)
        # Fenced only if still revoking at the epoch the deadline was armed for.
        if (
            member is not None
            and member.epoch == member.rebalance_epoch
            and member.current.state is MemberState.UNREVOKED_PARTITIONS
        ):
            self._fence(
                group, member, "it did not revoke its partitions within the rebalance timeout"
            )

    def _cancel_member_timers(self, member: ConsumerMember) -> None:
        for key in (member.session_key, member.rebalance_key, member.join_key, member.sync_key):
            if key:
                self.timers.unregister(key)
        member.session_key = member.rebalance_key = member.join_key = member.sync_key = 0

    def _arm_loaded_consumer_timers(self, group: ConsumerGroup) -> None:
        """After loading: every member gets a fresh session (Kafka's onLoaded), members revoking
        partitions a fresh rebalance deadline."""
        for member in group.members.values():
            self._arm_session(group, member)
            if member.current.state is MemberState.UNREVOKED_PARTITIONS:
                self._rebalance_timer(group.group_id, member, member.current)

    # ===================================================================== topic changes ===

    def on_topics_changed(self, names: set[str]) -> None:
        """Topics were created or deleted: regexes are resolved again (an epoch bump when a
        result changed) and groups subscribed by name recompute their metadata hash at their
        next heartbeat (Kafka's onMetadataUpdate)."""
        now = wall_ms()
        self.topics.version += 1
        for group in list(self.groups.values()):
            if not isinstance(group, ConsumerGroup) or group.deleting:
                continue
            if any(name in group.topic_name_counts for name in names):
                group.metadata_expired = True
            records: list = []
            if self.authorize_regexes and group.regexes:  # nobody to authorize now: the next
                group.regexes_stale = group.metadata_expired = True  # heartbeat resolves them
                continue
            for regex, resolution in group.regexes.items():
                topics = resolve_regex(regex, self.topics.names())
                if topics != resolution.topics:
                    records.append(
                        cr.RegexTopics(group.group_id, regex, topics, self._topics_version(), now)
                    )
            if records:
                names_now = group.subscribed_topic_names(False)
                names_now |= regex_topics(regexes_after(group, records), group.regex_counts)
                records.append(
                    cr.GroupEpoch(
                        group.group_id, group.group_epoch + 1, metadata_hash(names_now, self.topics)
                    )
                )
                self._write_consumer(group.group_id, records)
                self._maybe_offload(group)
