"""Heartbeat and LeaveGroup of classic groups: the session timer's renewal and members leaving
(one by one, or static members removed by an admin through their instance ids). A part of
`GroupCoordinator` like `ClassicProtocol` (protocol.py), whose join, rebalance and removal steps
it uses; a consumer group's classic members go to consumer/classic_members.py."""

from __future__ import annotations

from corral.errors import ErrorCode
from corral.groups.classic.protocol import join_error
from corral.groups.classic.state import ClassicGroup, ClassicState


class ClassicMembership:
    # Given by GroupCoordinator, ClassicProtocol and ClassicMembers.
    groups: dict

    def heartbeat(
        self, group_id: str, member_id: str, instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not isinstance(group, ClassicGroup):  # a consumer group
            return self.classic_heartbeat_consumer(group, member_id, instance_id, generation_id)
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

    def leave(
        self, group_id: str, leaving: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Removes members [(member_id, group_instance_id)]; returns (group error, member errors)."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, []
        if not isinstance(group, ClassicGroup):  # a consumer group
            return self.classic_leave_consumer(group, leaving)
        if group.state is ClassicState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
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
                self._drop_member(group, member_id)
                errors.append(ErrorCode.NONE)
            else:
                error = group.validate_member(member_id, instance_id)
                if not error:
                    self._remove_current_member(group, member_id)
                errors.append(error)
        if any(e == ErrorCode.NONE for e in errors):
            if group.state in (ClassicState.STABLE, ClassicState.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(group, "members left the group")
            elif group.state is ClassicState.PREPARING_REBALANCE:
                self._maybe_complete_join_phase(group)
        return ErrorCode.NONE, errors

    def _remove_current_member(self, group: ClassicGroup, member_id: str) -> None:
        member = group.members[member_id]
        self.events.classic_member_gone(group, member, left=True)
        group.complete_join(member, join_error(ErrorCode.UNKNOWN_MEMBER_ID))
        self._drop_member(group, member_id)
