"""Classic members inside a consumer group (reference/kip848.md §5): JoinGroup, SyncGroup,
Heartbeat and LeaveGroup from clients still speaking the classic protocol, to a group that is a
KIP-848 consumer group, so that a fleet moves between the protocols one member at a time.

A classic member is a consumer-group member like any other (its subscription and owned
partitions come from the ConsumerProtocolSubscription in its JoinGroup, its `ClassicMetadata`
keeps its session timeout and protocols) and is reconciled the same way. What differs is how it
hears about it: its JoinGroup is answered with its member epoch as the generation and no leader,
so it acts as a follower; SyncGroup hands it its assigned partitions; Heartbeat answers
REBALANCE_IN_PROGRESS when it must rejoin to move on. Its deadlines are the classic ones: a
session, a rejoin deadline after REBALANCE_IN_PROGRESS and a SyncGroup deadline after a join,
each fencing it when missed.

`ClassicMembers` is what classic/protocol.py's `ClassicGroups` hands a request for a group that
is a consumer group.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from corral.clock import wall_ms
from corral.errors import ErrorCode
from corral.groups.classic.requests import JoinRequest, join_error, left, sync_error
from corral.groups.classic.state import CONSUMER_PROTOCOL_TYPE as PROTOCOL_TYPE
from corral.groups.consumer.member_state import ConsumerMember
from corral.groups.consumer.members import GroupError, copy_member
from corral.groups.consumer.migration import (
    MigrationPolicy,
    by_id,
    downgrade_record,
    encode_assignment,
    protocol_version,
    read_subscription,
    supports_classic_protocols,
)
from corral.groups.consumer.reconcile import MemberState
from corral.groups.consumer.state import ConsumerGroup
from corral.groups.result import NO_RECORDS, Records
from corral.groups.storage import consumer_records as cr
from corral.groups.storage.records import Record
from corral.later import Later
from corral.observability.log_lines import fields
from corral.uuids import random_uuid_text

if TYPE_CHECKING:
    from corral.groups.classic.rebalance import ClassicRebalance
    from corral.groups.consumer.protocol import ConsumerGroups
    from corral.groups.consumer.targets.computation import TargetComputation
    from corral.groups.consumer.targets.inputs import TopicImage
    from corral.groups.consumer.writes import ConsumerWrites
    from corral.groups.events import AnalyticsEvents
    from corral.groups.group import Groups
    from corral.groups.limits import GroupLimits
    from corral.groups.timers import Timers

log = logging.getLogger("corral.groups")


class ClassicMembers:
    """Classic requests to a group that is a consumer group; its members are reconciled by
    `consumer` like any other."""

    def __init__(
        self,
        consumer: ConsumerGroups,
        writes: ConsumerWrites,
        targets: TargetComputation,
        rebalance: ClassicRebalance,
        groups: Groups,
        timers: Timers,
        limits: GroupLimits,
        topics: TopicImage,
        migration: MigrationPolicy,
        events: AnalyticsEvents,
    ):
        self.consumer = consumer
        self.writes = writes
        self.targets = targets
        # An empty consumer group replaced by a classic one.
        self.rebalance = rebalance
        self.groups = groups
        self.timers = timers
        self.limits = limits
        self.topics = topics
        self.migration = migration
        self.events = events

    def join(self, group: ConsumerGroup, req: JoinRequest) -> dict[str, Any] | Later:
        """A JoinGroup to a non-empty consumer group (Kafka's classicGroupJoinToConsumerGroup):
        answered once the member's records are durable."""
        group_id = group.group_id
        if self.migration.disabled:
            return join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
        unknown = req.member_id == ""
        member_id = req.member_id or random_uuid_text()  # Kafka's Uuid, as for consumer members
        instance_id = req.group_instance_id
        names = [name for name, _ in req.protocols]
        try:
            self.consumer.check_size(group, member_id, instance_id)
        except GroupError:
            return join_error(ErrorCode.GROUP_MAX_SIZE_REACHED, req.member_id)
        if not supports_classic_protocols(group, req.protocol_type, names):
            return join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
        if unknown and req.require_known_member_id and instance_id is None:
            # KIP-394: the member comes back with this id (nothing is kept until it does).
            return join_error(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        try:
            subscription = read_subscription(req.protocols[0][1])
        except ValueError:
            return join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id)

        now = wall_ms()
        try:
            member, replaced, made = self._classic_member_for(
                group, member_id, instance_id, unknown
            )
        except GroupError as e:
            return join_error(e.code, req.member_id)
        existing = (
            group.members.get(group.static_members.get(instance_id, ""))
            if instance_id is not None
            else None
        )
        downgrade = existing is not None and self._may_downgrade_replacing(group, existing)

        updated = copy_member(member, member.member_id)
        if instance_id is not None:
            updated.instance_id = instance_id
        if subscription.rack_id is not None:
            updated.rack_id = subscription.rack_id
        if req.rebalance_timeout_ms != -1:
            updated.rebalance_timeout_ms = req.rebalance_timeout_ms
        updated.topic_names = tuple(sorted(set(subscription.topics)))
        updated.regex = ""  # classic members have no regex subscription
        updated.client_id, updated.client_host = req.client_id, req.client_host
        updated.classic = cr.ClassicMetadata(req.session_timeout_ms, list(req.protocols))
        # The join's records: each step's in turn (a step reads those before its own).
        records: list[Record] = [*made]
        group_epoch, changed, made = self.consumer.subscribe(
            group, member, updated, replaced, records, now
        )
        records += made
        owned = by_id(subscription.owned, self.topics)

        rebalance = False
        if downgrade:
            assert existing is not None
            # The one consumer-protocol member is replaced by a classic one: back to a classic
            # group, rebalancing only if the target is stale (KAFKA-20273).
            rebalance = group.assignment_epoch < group_epoch
            current = updated.current
            if not rebalance:
                current, made = self.consumer.reconcile_member(
                    group, group_epoch, member, updated, changed, owned, records, now
                )
                records += made
            records += self._downgrade_replacing(group, existing, updated, now)
        else:
            current, made = self.consumer.reconcile_member(
                group, group_epoch, member, updated, changed, owned, records, now
            )
            records += made
        answer = {
            "error_code": ErrorCode.NONE,
            "generation_id": current.epoch,
            "protocol_type": PROTOCOL_TYPE,
            "protocol_name": names[0],
            "leader": "",
            "skip_assignment": False,
            "member_id": updated.member_id,
            "members": [],
        }
        written = self.writes.write(group_id, records, downgrade_rebalance=rebalance)
        joined = self.groups.get(group_id)
        if isinstance(joined, ConsumerGroup):  # not downgraded
            now_member = joined.members.get(updated.member_id)
            if now_member is not None:
                self.timers.cancel(now_member.join_key)
                self.consumer.arm_session(joined, now_member)
                self._arm_sync_deadline(joined, now_member, req.rebalance_timeout_ms)
        return written.map(lambda error: join_error(error, req.member_id) if error else answer)

    def _classic_member_for(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        unknown: bool,
    ) -> tuple[ConsumerMember, bool, Records]:
        """The member a JoinGroup is from: known, new, or a static member replacing its old
        self; whether it did, and the replacement's records. Raises GroupError."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                log.info(
                    "group %s: member %s joins with the classic protocol",
                    group.group_id,
                    member_id,
                    extra=fields(group.group_id, member_id),
                )
                member = ConsumerMember(member_id)
            return member, False, NO_RECORDS
        old_id = group.static_members.get(instance_id)
        old = group.members.get(old_id) if old_id is not None else None
        if unknown:
            if old is None:
                return ConsumerMember(member_id), False, NO_RECORDS
            new, records = self.consumer.replace_static(group, old, member_id)
            return new, True, records
        if old is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if old.member_id != member_id:
            raise GroupError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {instance_id} is fenced "
                f"by existing member {old.member_id}.",
            )
        return old, False, NO_RECORDS

    def _may_downgrade_replacing(self, group: ConsumerGroup, replaced: ConsumerMember) -> bool:
        """Kafka's validateOnlineDowngradeWithReplacedMember: the replaced member is the group's
        only consumer-protocol member."""
        if replaced.classic is not None or group.classic_members != len(group.members) - 1:
            return False
        if not self.migration.downgrades or len(group.members) > self.limits.max_size:
            return False
        return True

    def _downgrade_replacing(
        self, group: ConsumerGroup, replaced: ConsumerMember, joining: ConsumerMember, now: int
    ) -> list[Record]:
        """The downgrade records when `joining` (a classic static member) takes the place of
        `replaced`, the replacement's records coming first: every consumer record tombstoned
        (under the joining id) and the classic group record, `joining` holding the replaced
        member's target."""
        members = [joining if m is replaced else m for m in group.members.values()]
        targets = dict(group.target)
        targets[joining.member_id] = group.target.get(replaced.member_id, {})
        log.info(
            "group %s: a classic static member replaces the last consumer-protocol member; "
            "it becomes a classic group",
            group.group_id,
        )
        return [
            *group.tombstones(renamed=(replaced.member_id, joining.member_id)),
            downgrade_record(group, members, targets, self.topics, now),
        ]

    def replace_empty_group(self, group: ConsumerGroup) -> None:
        """A classic join to an empty consumer group: its records are tombstoned (its offsets
        stay) and an empty classic group takes its place."""
        self.writes.write(group.group_id, group.tombstones())
        log.info("group %s: the empty consumer group becomes a classic group", group.group_id)
        if group.group_id not in self.groups:
            self.rebalance.new_group(group.group_id)

    def sync(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> dict[str, Any]:
        """A SyncGroup to a consumer group (Kafka's classicGroupSyncToConsumerGroup): the
        member's assigned partitions, unless it must rejoin first."""
        member, error = self._classic_member(group, member_id, instance_id, generation_id)
        if error:
            return sync_error(error)
        assert member is not None and member.classic is not None
        first = member.classic.protocols[0]
        if (protocol_type is not None and protocol_type != PROTOCOL_TYPE) or (
            protocol_name is not None and protocol_name != first[0]
        ):
            return sync_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if (
            group.assignment_epoch > member.epoch
            and member.current.state is not MemberState.UNREVOKED_PARTITIONS
        ):
            # A newer target: rejoin to catch up (a member revoking finishes that first).
            self._arm_join_deadline(group, member)
            return sync_error(ErrorCode.REBALANCE_IN_PROGRESS)
        self.timers.cancel(member.sync_key)
        self.consumer.arm_session(group, member)
        return {
            "error_code": ErrorCode.NONE,
            "protocol_type": protocol_type,
            "protocol_name": protocol_name,
            "assignment": encode_assignment(
                member.current.assigned, protocol_version(first[1]), self.topics
            ),
        }

    def heartbeat(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        """A Heartbeat to a consumer group (Kafka's classicGroupHeartbeatToConsumerGroup):
        REBALANCE_IN_PROGRESS when the member must rejoin to move on: a newer target, partitions
        to revoke, or partitions it waited for that are now free."""
        member, error = self._classic_member(group, member_id, instance_id, generation_id)
        if error:
            return error
        assert member is not None
        self.consumer.arm_session(group, member)
        if group.group_epoch > group.assignment_epoch and group.classic_members == len(
            group.members
        ):
            # No consumer-protocol member heartbeats to compute the next target (Kafka waits for
            # a rejoin that nothing asks for): a classic heartbeat does.
            _, _, records = self.targets.maybe_compute_target(
                group, group.group_epoch, member, member, NO_RECORDS, wall_ms()
            )
            if records:
                self.writes.write(group.group_id, list(records))
            self.targets.maybe_offload(group)
        state = member.current.state
        if (
            member.epoch < group.assignment_epoch
            or state is MemberState.UNREVOKED_PARTITIONS
            or (
                state is MemberState.UNRELEASED_PARTITIONS
                and not group.waiting_on_unreleased(member)
            )
        ):
            self._arm_join_deadline(group, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def _classic_member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int
    ) -> tuple[ConsumerMember | None, ErrorCode]:
        """SyncGroup's and Heartbeat's checks: a known classic member at that generation."""
        if group.deleting:
            return None, ErrorCode.COORDINATOR_NOT_AVAILABLE
        if instance_id is None:
            member = group.members.get(member_id)
        else:
            member = group.members.get(group.static_members.get(instance_id, ""))
            if member is not None and member.member_id != member_id:
                return None, ErrorCode.FENCED_INSTANCE_ID
        if member is None or member.classic is None:
            return None, ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != member.epoch:
            return None, ErrorCode.ILLEGAL_GENERATION
        return member, ErrorCode.NONE

    def leave(self, group: ConsumerGroup, leaving: list[tuple[str, str | None]]) -> Later:
        """A LeaveGroup to a consumer group (Kafka's classicGroupLeaveToConsumerGroup): the
        listed members, of either protocol, are fenced; an admin may name a static member by
        its instance id alone."""
        if group.deleting:
            return Later.of((ErrorCode.COORDINATOR_NOT_AVAILABLE, []))
        errors: list[ErrorCode] = []
        fenced: dict[str, ConsumerMember] = {}
        for member_id, instance_id in leaving:
            if instance_id is None:
                member = group.members.get(member_id)
            else:
                member = group.members.get(group.static_members.get(instance_id, ""))
                if member is not None and member_id and member.member_id != member_id:
                    errors.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
            if member is None:
                errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            self.events.consumer_member_gone(group, member, "leaves (LeaveGroup)")
            fenced[member.member_id] = member
            errors.append(ErrorCode.NONE)
        written = None
        if fenced:
            written = self.writes.write(
                group.group_id, self.consumer.fence_records(group, list(fenced.values()))
            )
        return left(errors, written)

    def _arm_join_deadline(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """A member told to rejoin must within its rebalance timeout (armed once, not moved by
        later heartbeats: Kafka's scheduleIfAbsent)."""
        if member.join_key and member.join_key in self.timers.wheel:
            return
        if not member.join_key:
            member.join_key = self.timers.register(
                self._on_classic_deadline,
                group,
                member,
                "the classic member failed to join within the rebalance timeout",
            )
        self.timers.schedule(
            member.join_key, self.limits.rebalance_wait_ms(member.rebalance_timeout_ms)
        )

    def _arm_sync_deadline(
        self, group: ConsumerGroup, member: ConsumerMember, timeout_ms: int
    ) -> None:
        if not member.sync_key:
            member.sync_key = self.timers.register(
                self._on_classic_deadline, group, member, "the member failed to sync within timeout"
            )
        self.timers.schedule(member.sync_key, self.limits.rebalance_wait_ms(timeout_ms))

    def _on_classic_deadline(self, group: ConsumerGroup, member: ConsumerMember, why: str) -> None:
        self.consumer.fence(group, member, why)
