"""The classic group machine over time, as Kafka's GroupMetadataManager runs classic groups:
rebalances (prepare, complete the join phase, propagate the leader's assignment), the join, sync
and session timers, members expiring, and groups built from their record at load.

As in Kafka, the machine changes the live group itself (its parked requests, timers and protocol
lists are in no record) and writes the group's record as its durable projection (`write`);
`replay` of that record sets `group.stored`, and loading builds the group from it
(`from_record`). The requests that drive it are protocol.py's.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from corral.errors import ErrorCode
from corral.groups.classic.requests import join_error, sync_error
from corral.groups.classic.state import ClassicGroup, ClassicMember, ClassicState
from corral.groups.storage import records
from corral.later import Later
from corral.observability.log_lines import fields

if TYPE_CHECKING:
    from corral.groups.events import AnalyticsEvents
    from corral.groups.group import Groups
    from corral.groups.limits import GroupLimits
    from corral.groups.metrics import GroupMetrics
    from corral.groups.storage.writer import CoordinatorLog
    from corral.groups.timers import Timers

log = logging.getLogger("corral.groups")


class ClassicRebalance:
    def __init__(
        self,
        groups: Groups,
        writer: CoordinatorLog,
        timers: Timers,
        limits: GroupLimits,
        events: AnalyticsEvents,
        metrics: GroupMetrics,
    ):
        self.groups = groups
        self.writer = writer
        self.timers = timers
        self.limits = limits
        self.events = events
        self.metrics = metrics

    def schedule_rebalance_wait(self, key: int, group: ClassicGroup) -> None:
        """The join or sync timer: the group's rebalance timeout (its members' longest)."""
        self.timers.schedule(key, self.limits.rebalance_wait_ms(group.rebalance_timeout_ms()))

    def new_group(self, group_id: str) -> ClassicGroup:
        group = ClassicGroup(group_id, self.timers.heartbeat_view)
        group.join_key = self.timers.register(self._on_join_timer, group)
        group.sync_key = self.timers.register(self._on_sync_timer, group)
        self.groups[group_id] = group
        return group

    def write(self, group: ClassicGroup) -> Later:
        """Writes the group's record as it is now; the Later resolves once it is durable."""
        return self.writer.write(group.group_id, [group.metadata_record()])

    def from_record(self, group_id: str, stored: bytes) -> ClassicGroup:
        """The group a GroupMetadata record describes (loading): members get a fresh session to
        rejoin or heartbeat in once loading is over."""
        value = records.read_group_value(stored)
        group = self.new_group(group_id)
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        for m in value.members:
            member = ClassicMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                value.protocol_type,
                [(value.protocol or "", m.subscription)],
            )
            member.assignment = m.assignment
            member.timer_key = self.timers.register(self.expire_member, group, member)
            group.add(member, None)
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        group.transition(ClassicState.STABLE if group.members else ClassicState.EMPTY)
        group.state_timestamp_ms = (
            value.state_timestamp_ms if value.state_timestamp_ms >= 0 else None
        )
        group.subscribed_topics = group.compute_subscribed_topics()
        group.stored = stored
        return group

    def on_loaded(self, group: ClassicGroup) -> None:
        for member in group.members.values():
            self.schedule_heartbeat(member)

    def on_unloaded(self, group: ClassicGroup) -> None:
        self.answer_parked(group, ErrorCode.NOT_COORDINATOR)
        self.forget(group)

    def forget(self, group: ClassicGroup) -> None:
        """Drops the group's members, deadlines and Heartbeat view: the group is going away (a
        write still pending for it finds it Dead and does nothing)."""
        self.timers.heartbeat_view.remove_group(group.group_id)
        group.heartbeat_view = None
        group.transition(ClassicState.DEAD)
        for member_id in list(group.members) + list(group.pending_members):
            self.drop_member(group, member_id)
        self.timers.unregister(group.join_key)
        self.timers.unregister(group.sync_key)

    def drop_member(self, group: ClassicGroup, member_id: str) -> None:
        """Removes a member or pending member and its timer; a parked SyncGroup learns it is
        gone."""
        pending_key = group.pending_members.get(member_id)
        if pending_key is not None:
            self.timers.unregister(pending_key)
        member = group.remove(member_id)
        if member is not None:
            self.timers.unregister(member.timer_key)
            if member.sync_waiter is not None:
                member.sync_waiter.resolve(sync_error(ErrorCode.UNKNOWN_MEMBER_ID))
                member.sync_waiter = None

    def schedule_heartbeat(self, member: ClassicMember, timeout_ms: int | None = None) -> None:
        self.timers.schedule(
            member.timer_key, member.session_timeout_ms if timeout_ms is None else timeout_ms
        )

    def join_response(
        self,
        group: ClassicGroup,
        member_id: str,
        members: list[dict[str, Any]],
        skip_assignment: bool = False,
        leader: str | None = None,
    ) -> dict[str, Any]:
        return {
            "error_code": ErrorCode.NONE,
            "generation_id": group.generation_id,
            "protocol_type": group.protocol_type,
            "protocol_name": group.protocol_name,
            "leader": group.leader_id if leader is None else leader,
            "skip_assignment": skip_assignment,
            "member_id": member_id,
            "members": members,
        }

    # The methods below return the write of the group's record they made, if one (the group
    # became Empty): a LeaveGroup is answered once it is durable.

    def maybe_prepare_rebalance_or_complete_join(
        self, group: ClassicGroup, reason: str
    ) -> Later | None:
        if group.can_rebalance():
            return self.prepare_rebalance(group, reason)
        return self.maybe_complete_join_phase(group)

    def maybe_complete_join_phase(self, group: ClassicGroup) -> Later | None:
        # The initial rebalance of a new group waits for its delay even when everyone is in.
        if (
            group.state is ClassicState.PREPARING_REBALANCE
            and group.has_all_members_joined()
            and group.previous_state is not ClassicState.EMPTY
        ):
            return self.complete_join_phase(group)
        return None

    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> Later | None:
        if group.state is ClassicState.COMPLETING_REBALANCE:
            self.reset_and_propagate_assignment(group, ErrorCode.REBALANCE_IN_PROGRESS)
        group.pending_sync.clear()
        self.timers.cancel(group.sync_key)
        initial = group.state is ClassicState.EMPTY
        if initial:
            delay = self.limits.initial_delay_ms
            remaining = max(self.limits.rebalance_wait_ms(group.rebalance_timeout_ms()) - delay, 0)
            group.join_action = ("initial", delay, remaining)
            self.timers.schedule(group.join_key, delay)
        group.transition(ClassicState.PREPARING_REBALANCE)
        self.events.classic_rebalance_start(group, reason)
        if initial:
            return None
        return self._maybe_complete_join_else_schedule(group)

    def _maybe_complete_join_else_schedule(self, group: ClassicGroup) -> Later | None:
        if group.has_all_members_joined():
            return self.complete_join_phase(group)
        group.join_action = ("complete",)
        self.schedule_rebalance_wait(group.join_key, group)
        return None

    def _on_join_timer(self, group: ClassicGroup) -> None:
        if group.join_action[0] == "initial":
            _, delay, remaining = group.join_action
            if group.new_member_added and remaining != 0:
                group.new_member_added = False
                new_delay = min(self.limits.initial_delay_ms, remaining)
                group.join_action = ("initial", new_delay, max(remaining - delay, 0))
                self.timers.schedule(group.join_key, new_delay)
                return
        self.complete_join_phase(group)

    def complete_join_phase(self, group: ClassicGroup) -> Later | None:
        self.timers.cancel(group.join_key)
        gone = [m.member_id for m in group.not_yet_rejoined() if m.group_instance_id is None]
        self.events.classic_members_expired(group, gone, "rebalance_timeout")
        for member_id in gone:
            self.drop_member(group, member_id)
        if group.state is ClassicState.DEAD:
            return None
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait for the session timeouts to clear the group out.
            group.join_action = ("complete",)
            self.schedule_rebalance_wait(group.join_key, group)
            return None
        self.metrics.classic_rebalanced(group.state_timestamp_ms, bool(group.members))
        group.init_next_generation()
        if group.state is ClassicState.EMPTY:
            self.events.classic_rebalance_end(group)
            return self.write(group)
        log.info(
            "stabilized group %s generation %d (%s) with %d members",
            group.group_id,
            group.generation_id,
            group.protocol_name,
            group.size(),
            extra=fields(group.group_id, epoch=group.generation_id),
        )
        # The leader's answer goes out first: its SyncGroup is the rebalance's critical path.
        assert group.leader_id is not None, "a group with members has a leader"
        leader = group.members[group.leader_id]
        group.complete_join(
            leader, self.join_response(group, leader.member_id, group.leader_members_list())
        )
        for member in group.members.values():
            if member is not leader:
                group.complete_join(member, self.join_response(group, member.member_id, []))
            self.schedule_heartbeat(member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        group.sync_generation = group.generation_id
        self.schedule_rebalance_wait(group.sync_key, group)
        return None

    def _on_sync_timer(self, group: ClassicGroup) -> None:
        if group.sync_generation != group.generation_id:
            return
        if (
            group.state in (ClassicState.COMPLETING_REBALANCE, ClassicState.STABLE)
            and group.pending_sync
        ):
            missing = list(group.pending_sync)
            self.events.classic_members_expired(group, missing, "sync_timeout")
            for member_id in missing:
                self.drop_member(group, member_id)
            self.prepare_rebalance(group, f"{len(missing)} members did not send SyncGroup in time")

    def expire_member(self, group: ClassicGroup, member: ClassicMember) -> None:
        if group.state is ClassicState.DEAD or group.members.get(member.member_id) is not member:
            return
        if member.has_satisfied_heartbeat():
            return
        self.events.classic_member_gone(group, member, left=False)
        self.remove_member_and_update_group(group, member)

    def expire_pending_member(self, group: ClassicGroup, member_id: str) -> None:
        if not group.is_pending(member_id):
            return
        self.drop_member(group, member_id)
        if group.state is ClassicState.PREPARING_REBALANCE and group.has_all_members_joined():
            self.complete_join_phase(group)

    def remove_member_and_update_group(self, group: ClassicGroup, member: ClassicMember) -> None:
        group.complete_join(member, join_error(ErrorCode.UNKNOWN_MEMBER_ID))
        self.drop_member(group, member.member_id)
        if group.state in (ClassicState.STABLE, ClassicState.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance_or_complete_join(
                group, f"member {member.member_id} left or expired"
            )
        elif group.state is ClassicState.PREPARING_REBALANCE and group.has_all_members_joined():
            self.complete_join_phase(group)

    def reset_and_propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self.propagate_assignment(group, error)

    def propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        ok = error == ErrorCode.NONE
        for member in group.members.values():
            response = {
                "error_code": error,
                "protocol_type": group.protocol_type if ok else None,
                "protocol_name": group.protocol_name if ok else None,
                "assignment": member.assignment,
            }
            if group.complete_sync(member, response):
                self.schedule_heartbeat(member)

    def answer_parked(self, group: ClassicGroup, error: ErrorCode) -> None:
        """Answers every parked JoinGroup and SyncGroup with `error` (the group is upgraded)."""
        for member in group.members.values():
            group.complete_join(member, join_error(error, member.member_id))
            group.complete_sync(member, sync_error(error))
