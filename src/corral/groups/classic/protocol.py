"""The classic requests to classic groups, as Kafka's GroupMetadataManager answers them:
JoinGroup (new, known, static and KIP-394 pending members), SyncGroup, Heartbeat and LeaveGroup.
A request to a group that is a consumer group goes to the classic members of consumer groups
(consumer/classic_members.py). What a request sets in motion (rebalances, timers, the group's
record) runs in `ClassicRebalance` (rebalance.py); the group state itself is state.py's.

Each method is a synchronous state change returning an answer or a `Later` (a parked JoinGroup or
SyncGroup that a later event answers). Answers are version-independent dicts; the handlers
(handlers/join_group.py, sync_group.py, heartbeat.py, leave_group.py) shape them per version.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.groups.classic.requests import JoinRequest, join_error, left, sync_error
from corral.groups.classic.state import ClassicGroup, ClassicMember, ClassicState
from corral.groups.consumer.state import ConsumerGroup
from corral.groups.share.state import ShareGroup
from corral.later import Later
from corral.observability.log_lines import fields

if TYPE_CHECKING:
    from corral.groups.classic.rebalance import ClassicRebalance
    from corral.groups.consumer.classic_members import ClassicMembers
    from corral.groups.events import AnalyticsEvents
    from corral.groups.group import Groups
    from corral.groups.limits import GroupLimits
    from corral.groups.timers import Timers

log = logging.getLogger("corral.groups")

# Kafka's classicGroupNewMemberJoinTimeoutMs: a new member parked in JoinGroup that neither
# completes nor retries is dropped after this long.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


class ClassicGroups:
    """The classic requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) to classic groups; what
    they set in motion runs in `rebalance` (rebalance.py)."""

    def __init__(
        self,
        rebalance: ClassicRebalance,
        to_consumer_groups: ClassicMembers,
        groups: Groups,
        timers: Timers,
        limits: GroupLimits,
        events: AnalyticsEvents,
    ):
        self.rebalance = rebalance
        # Classic requests to groups that are consumer groups (KIP-848 §5).
        self.to_consumer_groups = to_consumer_groups
        self.groups = groups
        self.timers = timers
        self.limits = limits
        self.events = events

    def _validate_generation(
        self, group: ClassicGroup, member_id: str, instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        """SyncGroup's and Heartbeat's first checks: a live group, a known member, its
        generation."""
        if group.state is ClassicState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, instance_id)
        if error:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def join(self, req: JoinRequest) -> Later:
        waiter = Later()
        if not self.limits.min_session_ms <= req.session_timeout_ms <= self.limits.max_session_ms:
            waiter.resolve(join_error(ErrorCode.INVALID_SESSION_TIMEOUT, req.member_id))
            return waiter
        unknown = req.member_id == ""
        group = self.groups.get(req.group_id)
        if isinstance(group, ShareGroup):
            waiter.resolve(join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id))
            return waiter
        if isinstance(group, ConsumerGroup):
            if group.deleting:
                waiter.resolve(join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, req.member_id))
                return waiter
            if not group.is_empty():
                answer = self.to_consumer_groups.join(group, req)
                return answer if isinstance(answer, Later) else Later.of(answer)
            if unknown:
                self.to_consumer_groups.replace_empty_group(group)
            group = self.groups.get(req.group_id)
        if group is None:
            if not unknown:
                waiter.resolve(join_error(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id))
                return waiter
            group = self.rebalance.new_group(req.group_id)
        elif not isinstance(group, ClassicGroup):
            waiter.resolve(join_error(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id))
            return waiter

        if not self._accept_joining_member(group, req.member_id):
            self.rebalance.drop_member(group, req.member_id)
            waiter.resolve(join_error(ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif unknown:
            self._join_new_member(group, req, waiter)
        else:
            self._join_existing_member(group, req, waiter)
        return waiter

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        state = group.state
        if state in (ClassicState.EMPTY, ClassicState.DEAD):
            return True
        if state is ClassicState.PREPARING_REBALANCE:
            member = group.members.get(member_id)
            # Counting awaiting members (not members) lets the last rejoiners be kicked out when
            # the maximum was lowered.
            return (
                member is not None and member.awaiting_join
            ) or group.num_awaiting_join < self.limits.max_size
        return member_id in group.members or group.size() < self.limits.max_size

    def _join_new_member(self, group: ClassicGroup, req: JoinRequest, waiter: Later) -> None:
        if group.state is ClassicState.DEAD:
            waiter.resolve(join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(req.protocol_type, req.protocols):
            waiter.resolve(join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_id = group.generate_member_id(req.client_id, req.group_instance_id)
        if req.group_instance_id is not None:
            old_id = group.static_members.get(req.group_instance_id)
            if old_id is not None:
                log.info(
                    "static member %s of group %s rejoins with a new member id; replacing %s",
                    req.group_instance_id,
                    group.group_id,
                    old_id,
                    extra=fields(group.group_id, new_id),
                )
                self._update_static_member(group, req, old_id, new_id, waiter)
            else:
                self._add_member(group, req, new_id, waiter)
        elif req.require_known_member_id:
            # KIP-394: hand out the id and expect the member back with it within its session.
            key = self.timers.register(self.rebalance.expire_pending_member, group, new_id)
            group.pending_members[new_id] = key
            self.timers.schedule(key, req.session_timeout_ms)
            waiter.resolve(join_error(ErrorCode.MEMBER_ID_REQUIRED, new_id))
        else:
            self._add_member(group, req, new_id, waiter)

    def _join_existing_member(self, group: ClassicGroup, req: JoinRequest, waiter: Later) -> None:
        member_id = req.member_id
        if group.state is ClassicState.DEAD:
            waiter.resolve(join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id))
            return
        if not group.supports_protocols(req.protocol_type, req.protocols):
            waiter.resolve(join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if group.is_pending(member_id):
            if req.group_instance_id is not None:
                # Pending ids are only handed to dynamic members.
                waiter.resolve(join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
                return
            self._add_member(group, req, member_id, waiter)
            return
        error = group.validate_member(member_id, req.group_instance_id)
        if error:
            waiter.resolve(join_error(error, member_id))
            return
        member = group.members[member_id]
        state = group.state
        if state is ClassicState.PREPARING_REBALANCE:
            self._update_member(group, member, req, waiter)
        elif state is ClassicState.COMPLETING_REBALANCE:
            if member.matches(req.protocols):
                # A lost JoinGroup response: answer again with the current generation.
                waiter.resolve(
                    self.rebalance.join_response(
                        group,
                        member_id,
                        group.leader_members_list() if group.is_leader(member_id) else [],
                    )
                )
            else:
                self._update_member(group, member, req, waiter)
        elif state is ClassicState.STABLE:
            if group.is_leader(member_id) or not member.matches(req.protocols):
                # The leader rejoining asks for a new assignment (e.g. topic metadata changed).
                self._update_member(group, member, req, waiter)
            else:
                waiter.resolve(self.rebalance.join_response(group, member_id, []))
        else:
            waiter.resolve(join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _add_member(
        self, group: ClassicGroup, req: JoinRequest, member_id: str, waiter: Later
    ) -> None:
        member = ClassicMember(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            req.protocols,
        )
        member.is_new = True
        if (
            group.state is ClassicState.PREPARING_REBALANCE
            and group.previous_state is ClassicState.EMPTY
        ):
            group.new_member_added = True
        pending_key = group.pending_members.get(member_id)
        if pending_key is not None:
            self.timers.unregister(pending_key)
        member.timer_key = self.timers.register(self.rebalance.expire_member, group, member)
        group.add(member, waiter)
        self.events.member_joined(group, member)
        # A new member cannot heartbeat before its JoinGroup returns; a long timeout bounds
        # defunct joiners (clients that gave up and retried under another id).
        self.rebalance.schedule_heartbeat(member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self.rebalance.maybe_prepare_rebalance_or_complete_join(
            group, f"adding member {member_id}; client reason: {req.reason or 'not provided'}"
        )

    def _update_member(
        self, group: ClassicGroup, member: ClassicMember, req: JoinRequest, waiter: Later
    ) -> None:
        group.update(
            member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, waiter
        )
        self.rebalance.maybe_prepare_rebalance_or_complete_join(
            group, f"member {member.member_id} rejoined"
        )

    def _update_static_member(
        self, group: ClassicGroup, req: JoinRequest, old_id: str, new_id: str, waiter: Later
    ) -> None:
        current_leader = group.leader_id
        instance_id = req.group_instance_id
        assert instance_id is not None, "a static member's join"
        member = group.replace_static_member(
            instance_id, old_id, new_id, join_error(ErrorCode.FENCED_INSTANCE_ID, old_id)
        )
        self.events.classic_static_replaced(group, member, old_id)
        self.rebalance.schedule_heartbeat(member)
        group.update(
            member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, waiter
        )
        state = group.state
        if state is ClassicState.STABLE:
            if group.protocol_name == group.select_protocol():
                # The same member is back: keep the group stable and give it its old assignment.
                self.rebalance.write(group).then(
                    lambda error: self._static_member_persisted(
                        group, member, req, current_leader, error
                    )
                )
            else:
                self.rebalance.maybe_prepare_rebalance_or_complete_join(
                    group, f"static member {req.group_instance_id} changed the selected protocol"
                )
        elif state is ClassicState.COMPLETING_REBALANCE:
            # The leader may have assigned under the old id: rebalance so the new id gets
            # partitions.
            self.rebalance.prepare_rebalance(
                group, f"static member {req.group_instance_id} rejoined"
            )
        else:
            self.rebalance.maybe_complete_join_phase(group)

    def _static_member_persisted(
        self,
        group: ClassicGroup,
        member: ClassicMember,
        req: JoinRequest,
        previous_leader: str | None,
        error: ErrorCode,
    ) -> None:
        if error:
            group.complete_join(member, join_error(error))
            return
        if req.supports_skip_assignment:
            is_leader = group.is_leader(member.member_id)
            members = group.leader_members_list() if is_leader else []
            group.complete_join(
                member,
                self.rebalance.join_response(
                    group, member.member_id, members, skip_assignment=is_leader
                ),
            )
        else:
            group.complete_join(
                member,
                self.rebalance.join_response(group, member.member_id, [], leader=previous_leader),
            )

    def sync(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: list[tuple[str, bytes]],
    ) -> Later:
        waiter = Later()
        group = self.groups.get(group_id)
        if group is None or group.is_empty() or isinstance(group, ShareGroup):
            waiter.resolve(sync_error(ErrorCode.UNKNOWN_MEMBER_ID))
            return waiter
        if isinstance(group, ConsumerGroup):
            waiter.resolve(
                self.to_consumer_groups.sync(
                    group, member_id, instance_id, generation_id, protocol_type, protocol_name
                )
            )
            return waiter
        error = self._validate_sync(
            group, member_id, instance_id, generation_id, protocol_type, protocol_name
        )
        state = group.state
        if error:
            waiter.resolve(sync_error(error))
        elif state is ClassicState.EMPTY:
            waiter.resolve(sync_error(ErrorCode.UNKNOWN_MEMBER_ID))
        elif state is ClassicState.PREPARING_REBALANCE:
            waiter.resolve(sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
        elif state is ClassicState.COMPLETING_REBALANCE:
            group.members[member_id].sync_waiter = waiter
            self._remove_pending_sync(group, member_id)
            if group.is_leader(member_id):
                by_member = dict(assignments)
                for member in group.members.values():
                    member.assignment = by_member.get(member.member_id, b"")
                log.info(
                    "assignment received from leader %s of group %s for generation %d",
                    member_id,
                    group_id,
                    generation_id,
                    extra=fields(group_id, member_id, generation_id),
                )
                self.rebalance.write(group).then(
                    lambda err: self._assignment_persisted(group, generation_id, err)
                )
        else:  # Stable
            self._remove_pending_sync(group, member_id)
            waiter.resolve(
                {
                    "error_code": ErrorCode.NONE,
                    "protocol_type": group.protocol_type,
                    "protocol_name": group.protocol_name,
                    "assignment": group.members[member_id].assignment,
                }
            )
        return waiter

    def _assignment_persisted(
        self, group: ClassicGroup, generation_id: int, error: ErrorCode
    ) -> None:
        # Another join may have moved the group on while the record was being written.
        if (
            group.state is not ClassicState.COMPLETING_REBALANCE
            or group.generation_id != generation_id
        ):
            return
        if error:
            self.rebalance.reset_and_propagate_assignment(group, error)
            self.rebalance.maybe_prepare_rebalance_or_complete_join(
                group, f"storing the assignment failed: {error.name}"
            )
            return
        self.rebalance.propagate_assignment(group, ErrorCode.NONE)
        group.transition(ClassicState.STABLE)
        self.events.classic_rebalance_end(group)

    def _validate_sync(
        self,
        group: ClassicGroup,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> ErrorCode:
        error = self._validate_generation(group, member_id, instance_id, generation_id)
        if error:
            return error
        if _inconsistent(protocol_type, group.protocol_type) or _inconsistent(
            protocol_name, group.protocol_name
        ):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return ErrorCode.NONE

    def _remove_pending_sync(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync or group.state in (
            ClassicState.DEAD,
            ClassicState.EMPTY,
            ClassicState.PREPARING_REBALANCE,
        ):
            self.timers.cancel(group.sync_key)

    def heartbeat(
        self, group_id: str, member_id: str, instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None or isinstance(group, ShareGroup):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if isinstance(group, ConsumerGroup):
            return self.to_consumer_groups.heartbeat(group, member_id, instance_id, generation_id)
        error = self._validate_generation(group, member_id, instance_id, generation_id)
        if error:
            return error
        state = group.state
        if state is ClassicState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        member = group.members[member_id]
        self.timers.schedule(member.timer_key, member.session_timeout_ms)
        if state is ClassicState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(self, group_id: str, leaving: list[tuple[str, str | None]]) -> Later:
        """Removes members [(member_id, group_instance_id)]: resolves to (group error, member
        errors) once the write it caused (the last member leaving empties the group) is durable,
        or to (the write's error, [])."""
        group = self.groups.get(group_id)
        if group is None or isinstance(group, ShareGroup):
            return Later.of((ErrorCode.UNKNOWN_MEMBER_ID, []))
        if isinstance(group, ConsumerGroup):
            return self.to_consumer_groups.leave(group, leaving)
        if group.state is ClassicState.DEAD:
            return Later.of((ErrorCode.COORDINATOR_NOT_AVAILABLE, []))
        errors = []
        for member_id, instance_id in leaving:
            if member_id == "":
                # Admin removal of a static member by its instance id.
                known = group.static_members.get(instance_id) if instance_id is not None else None
                if known is None:
                    errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                else:
                    self._remove_current_member(group, known)
                    errors.append(ErrorCode.NONE)
            elif group.is_pending(member_id):
                self.rebalance.drop_member(group, member_id)
                errors.append(ErrorCode.NONE)
            else:
                error = group.validate_member(member_id, instance_id)
                if not error:
                    self._remove_current_member(group, member_id)
                errors.append(error)
        written = None
        if any(e == ErrorCode.NONE for e in errors):
            if group.state in (ClassicState.STABLE, ClassicState.COMPLETING_REBALANCE):
                written = self.rebalance.maybe_prepare_rebalance_or_complete_join(
                    group, "members left the group"
                )
            elif group.state is ClassicState.PREPARING_REBALANCE:
                written = self.rebalance.maybe_complete_join_phase(group)
        return left(errors, written)

    def _remove_current_member(self, group: ClassicGroup, member_id: str) -> None:
        member = group.members[member_id]
        self.events.classic_member_gone(group, member, left=True)
        group.complete_join(member, join_error(ErrorCode.UNKNOWN_MEMBER_ID))
        self.rebalance.drop_member(group, member_id)


def _inconsistent(asked: str | None, actual: str | None) -> bool:
    return asked is not None and actual is not None and asked != actual
