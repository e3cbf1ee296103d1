"""The KIP-848 consumer group protocol as the coordinator runs it (reference/kip848.md §1-4):
ConsumerGroupHeartbeat (join, update, reconcile, leave), group epoch bumps, session and
rebalance timeouts, static members and regex subscriptions; when targets are computed is
targets/computation.py's.

Every change follows one discipline: a request decides from the group as it is and returns
records plus an answer; `writes` (writes.py) applies the records at once through the coordinator's
`replay` and appends them; the answer leaves once they are durable.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import cached_property
from itertools import chain
from typing import TYPE_CHECKING, Any

from corral.clock import wall_ms
from corral.errors import ErrorCode
from corral.groups.classic import ClassicGroup, ClassicState
from corral.groups.consumer.answer import assignment_answer, error_answer, heartbeat_interval_ms
from corral.groups.consumer.assignment_records import EMPTY_ASSIGNMENT, as_record
from corral.groups.consumer.fencing import fence_records
from corral.groups.consumer.member_state import ConsumerMember
from corral.groups.consumer.members import (
    GroupError,
    HeartbeatRequest,
    TopicFilter,
    check_epoch,
    copy_member,
    metadata_differs,
    names_after,
    preferred_assignor_after,
    regex_topics,
    regexes_after,
    removal_records,
    replaced_members,
    resolve_regex,
    update_regexes,
    updated_member,
)
from corral.groups.consumer.migration import (
    MigrationPolicy,
    upgrade_records,
)
from corral.groups.consumer.reconcile import (
    FencedMember,
    MemberState,
    Partitions,
    Reconciled,
    reconcile,
)
from corral.groups.consumer.state import ConsumerGroup
from corral.groups.consumer.targets.computation import TargetComputation
from corral.groups.consumer.targets.inputs import TopicImage, member_topic_ids, metadata_hash
from corral.groups.result import NO_RECORDS, Records, Result
from corral.groups.storage import consumer_records as cr
from corral.groups.storage.records import GroupTombstone, Record
from corral.groups.timers import Timers
from corral.later import Later
from corral.observability.log_lines import fields
from corral.uuids import random_uuid_text

if TYPE_CHECKING:
    from corral.groups.classic.rebalance import ClassicRebalance
    from corral.groups.consumer.writes import ConsumerWrites
    from corral.groups.events import AnalyticsEvents
    from corral.groups.group import Groups
    from corral.groups.limits import GroupLimits

log = logging.getLogger("corral.groups")

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class ConsumerGroups:
    """ConsumerGroupHeartbeat for consumer groups: joins, updates, reconciliation, leaves, and the
    deadlines that fence members."""

    authorize_regexes = False  # an authorizer is on: regexes resolve with a heartbeat's context

    def __init__(
        self,
        groups: Groups,
        writes: ConsumerWrites,
        targets: TargetComputation,
        rebalance: ClassicRebalance,
        timers: Timers,
        settings: Any,
        limits: GroupLimits,
        topics: TopicImage,
        migration: MigrationPolicy,
        events: AnalyticsEvents,
        group_setting: Callable[[str, str], Any],
    ):
        self.groups = groups
        self.writes = writes
        self.targets = targets
        # An upgrade answers the classic group's parked requests.
        self.rebalance = rebalance
        self.timers = timers
        self.settings = settings
        self.limits = limits
        self.topics = topics
        self.migration = migration
        self.events = events
        self.group_setting = group_setting

    def heartbeat(self, req: HeartbeatRequest) -> Later:
        """ConsumerGroupHeartbeat after its static validation
        (handlers/consumer_group_heartbeat.py): resolves to the version-independent answer once
        its records are durable."""
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
            written = self.writes.write(group_id, records)
        else:
            written = Later.of(ErrorCode.NONE)
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            if records and isinstance(records[-1], GroupTombstone):
                # A classic group became this group: its members' sessions start now.
                for converted in group.members.values():
                    if not converted.session_key:
                        self.arm_session(group, converted)
            member = group.members.get(answer["member_id"])
            moved = False
            if member is not None and answer["member_epoch"] >= 0:
                self.arm_session(group, member)
                moved = any(
                    isinstance(r, cr.CurrentAssignment) and r.member_id == member.member_id
                    for r in records
                )
                if moved:
                    self.rebalance_timer(group_id, member, member.current)
            self.targets.maybe_offload(group)
            if member is not None and answer["member_epoch"] >= 0:  # adaptive (answer.py)
                answer["heartbeat_interval_ms"] = heartbeat_interval_ms(
                    group, member, moved, self.settings, self.group_setting, wall_ms()
                )
        return written.map(lambda error: error_answer(error) if error else answer)

    def _heartbeat(self, req: HeartbeatRequest) -> Result[dict[str, Any]]:
        now = wall_ms()
        group_id = req.group_id
        # The heartbeat's records: each step's in turn (a step reads those before its own).
        group, converted, made = self._group_for(req)
        records: list[Record] = [*made]
        member_id = req.member_id or random_uuid_text()  # v0: the coordinator names members
        self.check_size(group, member_id, req.instance_id)
        member, replaced, made = self._member_for(group, req, member_id)
        records += made
        updated = updated_member(member, req)
        group_epoch, subscription_changed, made = self.subscribe(
            group, member, updated, replaced, records, now, req.topic_filter
        )
        records += made
        current, made = self.reconcile_member(
            group, group_epoch, member, updated, subscription_changed, req.owned, records, now
        )
        records += made
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
        return Result(records, answer)

    def _group_for(self, req: HeartbeatRequest) -> tuple[ConsumerGroup, bool, Records]:
        """The group a heartbeat is for, whether it replaces a classic group, and the records
        that make it so. A joining member (epoch 0) creates it (through the heartbeat's
        records), converting an empty classic group, or upgrading a live one (the upgrade's
        records returned)."""
        group_id = req.group_id
        existing = self.groups.get(group_id)
        if isinstance(existing, ConsumerGroup) and not existing.deleting:
            return existing, False, NO_RECORDS
        if req.member_epoch != 0:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if isinstance(existing, ConsumerGroup):  # its deletion is being written
            raise GroupError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, f"Group {group_id} is being deleted."
            )
        if isinstance(existing, ClassicGroup):
            if existing.is_empty():
                log.info("group %s: the empty classic group becomes a consumer group", group_id)
                return ConsumerGroup(group_id), True, NO_RECORDS
            upgraded, upgrade = self._upgrade(existing)
            return upgraded, True, upgrade
        return ConsumerGroup(group_id), False, NO_RECORDS  # created by the heartbeat's records

    def check_size(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> None:
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

    def _upgrade(self, classic: ClassicGroup) -> tuple[ConsumerGroup, Records]:
        """An online upgrade (KIP-848 §5): the consumer group a live classic group becomes, and
        the records that make it (applied when they are written, with the heartbeat's own).
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
        self.rebalance.answer_parked(classic, ErrorCode.REBALANCE_IN_PROGRESS)
        group = ConsumerGroup(gid)
        for record in converted:
            group.replay(record)
        log.info(
            "group %s: the classic group (generation %d, %d members) becomes a consumer group",
            gid,
            classic.generation_id,
            len(classic.members),
        )
        return group, converted

    def subscribe(
        self,
        group: ConsumerGroup,
        member: ConsumerMember,
        updated: ConsumerMember,
        replaced: bool,
        earlier: Records,
        now: int,
        topic_filter: TopicFilter | None = None,
    ) -> tuple[int, bool, Records]:
        """Kafka's step 1: the member's metadata record if it changed, its regex, and a group
        epoch bump when the group's subscriptions (names, regexes, preferred assignor, the
        subscribed topics' metadata) changed. `earlier`: the request's records before these.
        Returns (the group epoch, whether the member's subscription changed, the records).
        From the group's counts, never walking its members."""
        group_id = group.group_id
        is_new = member.member_id not in group.members
        names_changed = updated.topic_names != member.topic_names
        records: Records = NO_RECORDS
        if metadata_differs(member, updated) or (is_new and not replaced):
            records = [updated.metadata_record(group_id)]
        # The members `updated` takes the place of: itself, a static member's old self.
        previous = replaced_members(group, member)
        regex_bump, regex_changed, regex_records = update_regexes(
            group,
            member,
            updated,
            previous,
            earlier,
            now,
            self.topics,
            self.settings["group.consumer.regex.refresh.interval.ms"],
            topic_filter,
        )
        if regex_records:
            records = [*records, *regex_records]
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
            regexes = regexes_after(group, chain(earlier, records))
            names = names_after(group, previous, updated.topic_names, regexes)
            new_hash = metadata_hash(names, self.topics)
            if new_hash != group.metadata_hash:
                bump = True
            if bump:
                group_epoch += 1
                records = [*records, cr.GroupEpoch(group_id, group_epoch, new_hash)]
                log.info(
                    "group %s: epoch %d",
                    group_id,
                    group_epoch,
                    extra=fields(group_id, epoch=group_epoch),
                )
        return group_epoch, names_changed or regex_changed, records

    def reconcile_member(
        self,
        group: ConsumerGroup,
        group_epoch: int,
        member: ConsumerMember,
        updated: ConsumerMember,
        subscription_changed: bool,
        owned: Partitions | None,
        earlier: Records,
        now: int,
    ) -> tuple[Reconciled, Records]:
        """Kafka's steps 2 and 3: the target (computed now if due) and the member's next
        assignment toward it, with the records (the target's, the assignment's when it
        changed). `owned`: what the client says it owns (None: not said); `earlier`: the
        request's records before these."""
        target_epoch, target, records = self.targets.maybe_compute_target(
            group, group_epoch, member, updated, earlier, now
        )
        current = updated.current
        if (
            subscription_changed
            or current.state is not MemberState.STABLE
            or current.epoch != target_epoch
        ):
            regexes = regexes_after(group, chain(earlier, records))
            subscribed = member_topic_ids(updated, regexes, self.topics)
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
                records = [*records, updated.assignment_record(group.group_id, current)]
        return current, records

    def _member_for(
        self, group: ConsumerGroup, req: HeartbeatRequest, member_id: str
    ) -> tuple[ConsumerMember, bool, Records]:
        """The member the heartbeat is from (a new one on epoch 0), epoch checked, whether it
        replaced a static member's old self, and the records of the replacement."""
        instance_id = req.instance_id
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if req.member_epoch != 0:
                    raise GroupError(
                        ErrorCode.UNKNOWN_MEMBER_ID,
                        f"Member {member_id} is not a member of group {group.group_id}.",
                    )
                return ConsumerMember(member_id), False, NO_RECORDS
            check_epoch(member, req)
            return member, False, NO_RECORDS
        old_id = group.static_members.get(instance_id)
        old = group.members.get(old_id) if old_id is not None else None
        if req.member_epoch == 0:
            if old is None:
                return group.members.get(member_id) or ConsumerMember(member_id), False, NO_RECORDS
            if old.classic is None and old.epoch != STATIC_LEAVE_EPOCH:
                raise GroupError(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} cannot "
                    f"join the group because the instance id is owned by {old.member_id} member.",
                )
            new, records = self.replace_static(group, old, member_id)
            return new, True, records
        if old is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if old.member_id != member_id:
            raise GroupError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {instance_id} is fenced "
                f"by existing member {old.member_id}.",
            )
        check_epoch(old, req)
        return old, False, NO_RECORDS

    def replace_static(
        self, group: ConsumerGroup, old: ConsumerMember, member_id: str
    ) -> tuple[ConsumerMember, list[Record]]:
        """A static member rejoining under a new id takes its old self's place (Kafka's
        replaceMember): the new member, and the records that move its metadata, target and
        assignment."""
        new = copy_member(old, member_id)
        gid = group.group_id
        records: list[Record] = [
            *removal_records(gid, old.member_id),
            new.metadata_record(gid),
            cr.TargetMember(gid, member_id, as_record(group.target.get(old.member_id, {}))),
            new.assignment_record(gid),
        ]
        self.events.static_member_replaced(group, old, member_id)
        return new, records

    def _leave(self, req: HeartbeatRequest) -> Result[dict[str, Any]]:
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
            return Result([member.assignment_record(group.group_id, leaving)], answer)
        self.events.consumer_member_gone(group, member, "leaves")
        return Result(self.fence_records(group, [member]), answer)

    def fence_records(self, group: ConsumerGroup, members: list[ConsumerMember]) -> list[Record]:
        return fence_records(group, members, self.topics, self.migration, self.limits.max_size)

    def fence(self, group: ConsumerGroup, member: ConsumerMember, why: str) -> None:
        """Removes a member the coordinator gave up on (session or rebalance timeout)."""
        if (
            self.groups.get(group.group_id) is not group
            or member.member_id not in group.members
            or group.deleting
        ):
            return
        self.events.consumer_member_gone(group, member, why)
        self.writes.write(group.group_id, self.fence_records(group, [member]))

    def arm_session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
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
        self.fence(group, member, "the member session expired")

    def rebalance_timer(self, group_id: str, member: ConsumerMember, current: Reconciled) -> None:
        """Arms the revocation deadline when the member enters (or stays in, changed)
        UNREVOKED_PARTITIONS, for the epoch it is at; cancels it otherwise."""
        if current.state is MemberState.UNREVOKED_PARTITIONS:
            if not member.rebalance_key:
                member.rebalance_key = self.timers.register(
                    self._on_rebalance_timeout, group_id, member.member_id
                )
            member.rebalance_epoch = current.epoch
            self.timers.schedule(
                member.rebalance_key, self.limits.rebalance_wait_ms(member.rebalance_timeout_ms)
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
            self.fence(
                group, member, "it did not revoke its partitions within the rebalance timeout"
            )

    def cancel_member_timers(self, member: ConsumerMember) -> None:
        for key in (member.session_key, member.rebalance_key, member.join_key, member.sync_key):
            if key:
                self.timers.unregister(key)
        member.session_key = member.rebalance_key = member.join_key = member.sync_key = 0

    def on_loaded(self, group: ConsumerGroup) -> None:
        self.arm_loaded_timers(group)

    def on_unloaded(self, group: ConsumerGroup) -> None:
        self.forget(group)

    def forget(self, group: ConsumerGroup) -> None:
        group.detach()
        for member in group.members.values():
            self.cancel_member_timers(member)

    def arm_loaded_timers(self, group: ConsumerGroup) -> None:
        """After loading: every member gets a fresh session (Kafka's onLoaded), members revoking
        partitions a fresh rebalance deadline."""
        for member in group.members.values():
            self.arm_session(group, member)
            if member.current.state is MemberState.UNREVOKED_PARTITIONS:
                self.rebalance_timer(group.group_id, member, member.current)

    def on_topics_changed(self, names: set[str]) -> None:
        """Topics were created or deleted: regexes are resolved again (an epoch bump when a
        result changed) and groups subscribed by name recompute their metadata hash at their
        next heartbeat (Kafka's onMetadataUpdate)."""
        now = wall_ms()
        for group in list(self.groups.values()):
            if not isinstance(group, ConsumerGroup) or group.deleting:
                continue
            if any(name in group.topic_name_counts for name in names):
                group.metadata_expired = True
            records: list[Record] = []
            if self.authorize_regexes and group.regexes:  # nobody to authorize now: the next
                group.regexes_stale = group.metadata_expired = True  # heartbeat resolves them
                continue
            for regex, resolution in group.regexes.items():
                topics = resolve_regex(regex, self.topics.names())
                if topics != resolution.topics:
                    records.append(
                        cr.RegexTopics(group.group_id, regex, topics, self.topics.version, now)
                    )
            if records:
                names_now = group.subscribed_topic_names(False)
                names_now |= regex_topics(regexes_after(group, records), group.regex_counts)
                records.append(
                    cr.GroupEpoch(
                        group.group_id, group.group_epoch + 1, metadata_hash(names_now, self.topics)
                    )
                )
                self.writes.write(group.group_id, records)
                self.targets.maybe_offload(group)
