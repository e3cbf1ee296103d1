"""The classic group protocol (JoinGroup, SyncGroup; Heartbeat and LeaveGroup are in
`membership.py`) as the coordinator runs it: joins and rebalances, static members, KIP-394
pending members, the join, sync and session timers, as Kafka's GroupMetadataManager does for
classic groups. The group state itself and its small operations are in `state.py`.

`ClassicProtocol` is one part of `GroupCoordinator` (coordinator.py), which gives it `groups`,
`timers`, `log` and the group settings. Each method is a synchronous state change: it returns a
response or a `Later` (a parked JoinGroup/SyncGroup that a later event answers) and hands the
group's record to the log. As in Kafka, the classic machine changes the live group itself (its
parked requests, timers and protocol lists are not in any record) and writes the group's record
as its durable projection; `replay` of that record sets `group.stored`, and loading builds the
group from it. Responses are version-independent dicts; handlers/classic.py shapes them per
version.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from corral.errors import ErrorCode
from corral.groups.classic.state import ClassicGroup, ClassicMember, ClassicState
from corral.groups.storage import records
from corral.groups.storage.writer import CoordinatorLog
from corral.groups.timers import Timers
from corral.later import Later
from corral.observability.log_lines import fields

log = logging.getLogger("corral.groups")

# Kafka's classicGroupNewMemberJoinTimeoutMs: a new member parked in JoinGroup that neither
# completes nor retries is dropped after this long.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


def join_error(code: ErrorCode, member_id: str = "") -> dict[str, Any]:
    return {
        "error_code": code,
        "generation_id": -1,
        "protocol_type": None,
        "protocol_name": None,
        "leader": "",
        "skip_assignment": False,
        "member_id": member_id,
        "members": [],
    }


def sync_error(code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "protocol_type": None, "protocol_name": None, "assignment": b""}


class JoinRequest:
    """What JoinGroup asks, independent of its version."""

    __slots__ = (
        "group_id",
        "member_id",
        "group_instance_id",
        "client_id",
        "client_host",
        "session_timeout_ms",
        "rebalance_timeout_ms",
        "protocol_type",
        "protocols",
        "require_known_member_id",
        "supports_skip_assignment",
        "reason",
    )

    def __init__(self, **fields: Any):
        for name in self.__slots__:
            setattr(self, name, fields[name])


class ClassicProtocol:
    # Given by GroupCoordinator (and the classic_*_consumer methods, for classic members of
    # consumer groups, by consumer/classic_members.py).
    groups: dict
    log: CoordinatorLog
    timers: Timers
    min_session_ms: int
    max_session_ms: int
    rebalance_wait_ms: Callable[[int], int]
    initial_delay_ms: int
    max_size: int

    def _schedule_rebalance_wait(self, key: int, group: ClassicGroup) -> None:
        """The join or sync timer: the group's rebalance timeout (its members' longest)."""
        self.timers.schedule(key, self.rebalance_wait_ms(group.rebalance_timeout_ms()))

    def _new_classic_group(self, group_id: str) -> ClassicGroup:
        group = ClassicGroup(group_id, self.timers.heartbeat_view)
        group.join_key = self.timers.register(self._on_join_timer, group)
        group.sync_key = self.timers.register(self._on_sync_timer, group)
        self.groups[group_id] = group
        return group

    def _classic(self, group_id: str) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ClassicGroup) else None

    def _write(self, group: ClassicGroup) -> Later:
        """Writes the group's record as it is now; the Later resolves once it is durable."""
        return self.log.write(group.group_id, [group.metadata_record()])

    def _classic_from_record(self, group_id: str, stored: bytes) -> ClassicGroup:
        """The group a GroupMetadata record describes (loading): members get a fresh session to
        rejoin or heartbeat in once loading is over."""
        value = records.read_group_value(stored)
        group = self._new_classic_group(group_id)
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
            member.timer_key = self.timers.register(self._expire_member, group, member)
            group.add(member, None)
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        group.transition(ClassicState.STABLE if group.members else ClassicState.EMPTY)
        group.state_timestamp_ms = (
            value.state_timestamp_ms if value.state_timestamp_ms >= 0 else None
        )
        group.subscribed_topics = group.compute_subscribed_topics()
        group.stored = stored
        return group

    def _forget_classic(self, group: ClassicGroup) -> None:
        """Drops the group's members, deadlines and Heartbeat view: the group is going away (a
        write still pending for it finds it Dead and does nothing)."""
        self.timers.heartbeat_view.remove_group(group.group_id)
        group.heartbeat_view = None
        group.transition(ClassicState.DEAD)
        for member_id in list(group.members) + list(group.pending_members):
            self._drop_member(group, member_id)
        self.timers.unregister(group.join_key)
        self.timers.unregister(group.sync_key)

    def _drop_member(self, group: ClassicGroup, member_id: str) -> None:
        """Removes a member or pending member and its timer; a parked SyncGroup learns it is gone."""
        pending_key = group.pending_members.get(member_id)
        if pending_key is not None:
            self.timers.unregister(pending_key)
        member = group.remove(member_id)
        if member is not None:
            self.timers.unregister(member.timer_key)
            if member.sync_waiter is not None:
                member.sync_waiter.resolve(sync_error(ErrorCode.UNKNOWN_MEMBER_ID))
                member.sync_waiter = None

    def _schedule_heartbeat(self, member: ClassicMember, timeout_ms: int | None = None) -> None:
        self.timers.schedule(
            member.timer_key, member.session_timeout_ms if timeout_ms is None else timeout_ms
        )

    def _validate_generation(
        self, group: ClassicGroup, member_id: str, instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        """SyncGroup's and Heartbeat's first checks: a live group, a known member, its generation."""
        if group.state is ClassicState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, instance_id)
        if error:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    # -- JoinGroup ------------------------------------------------------------------------------

    def join(self, req: JoinRequest) -> Later:
        waiter = Later()
        if not self.min_session_ms <= req.session_timeout_ms <= self.max_session_ms:
            waiter.resolve(join_error(ErrorCode.INVALID_SESSION_TIMEOUT, req.member_id))
            return waiter
        unknown = req.member_id == ""
        group = self.groups.get(req.group_id)
        if group is not None and not isinstance(group, ClassicGroup):  # a consumer group
            if group.deleting:
                waiter.resolve(join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, req.member_id))
                return waiter
            if not group.is_empty():
                answer = self.classic_join_consumer(group, req)
                return answer if isinstance(answer, Later) else Later.of(answer)
            if unknown:
                self.replace_empty_consumer_group(group)
            group = self.groups.get(req.group_id)
        if group is None:
            if not unknown:
                waiter.resolve(join_error(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id))
                return waiter
            group = self._new_classic_group(req.group_id)
        elif not isinstance(group, ClassicGroup):
            waiter.resolve(join_error(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id))
            return waiter

        if not self._accept_joining_member(group, req.member_id):
            self._drop_member(group, req.member_id)
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
            ) or group.num_awaiting_join < self.max_size
        return member_id in group.members or group.size() < self.max_size

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
            key = self.timers.register(self._expire_pending_member, group, new_id)
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
                    self._join_response(
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
                waiter.resolve(self._join_response(group, member_id, []))
        else:
            waiter.resolve(join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _join_response(
        self,
        group: ClassicGroup,
        member_id: str,
        members: list,
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
        member.timer_key = self.timers.register(self._expire_member, group, member)
        group.add(member, waiter)
        self.events.member_joined(group, member)
        # A new member cannot heartbeat before its JoinGroup returns; a long timeout bounds
        # defunct joiners (clients that gave up and retried under another id).
        self._schedule_heartbeat(member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance_or_complete_join(
            group, f"adding member {member_id}; client reason: {req.reason or 'not provided'}"
        )

    def _update_member(
        self, group: ClassicGroup, member: ClassicMember, req: JoinRequest, waiter: Later
    ) -> None:
        group.update(
            member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, waiter
        )
        self._maybe_prepare_rebalance_or_complete_join(group, f"member {member.member_id} rejoined")

    def _update_static_member(
        self, group: ClassicGroup, req: JoinRequest, old_id: str, new_id: str, waiter: Later
    ) -> None:
        current_leader = group.leader_id
        member = group.replace_static_member(
            req.group_instance_id, old_id, new_id, join_error(ErrorCode.FENCED_INSTANCE_ID, old_id)
        )
        self.events.classic_static_replaced(group, member, old_id)
        self._schedule_heartbeat(member)
        group.update(
            member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, waiter
        )
        state = group.state
        if state is ClassicState.STABLE:
            if group.protocol_name == group.select_protocol():
                # The same member is back: keep the group stable and give it its old assignment.
                self._write(group).then(
                    lambda error: self._static_member_persisted(
                        group, member, req, current_leader, error
                    )
                )
            else:
                self._maybe_prepare_rebalance_or_complete_join(
                    group, f"static member {req.group_instance_id} changed the selected protocol"
                )
        elif state is ClassicState.COMPLETING_REBALANCE:
            # The leader may have assigned under the old id: rebalance so the new id gets partitions.
            self._prepare_rebalance(group, f"static member {req.group_instance_id} rejoined")
        else:
            self._maybe_complete_join_phase(group)

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
                self._join_response(group, member.member_id, members, skip_assignment=is_leader),
            )
        else:
            group.complete_join(
                member, self._join_response(group, member.member_id, [], leader=previous_leader)
            )

    # -- rebalance ------------------------------------------------------------------------------

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join_phase(group)

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        # The initial rebalance of a new group waits for its delay even when everyone is in.
        if (
            group.state is ClassicState.PREPARING_REBALANCE
            and group.has_all_members_joined()
            and group.previous_state is not ClassicState.EMPTY
        ):
            self._complete_join_phase(group)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.state is ClassicState.COMPLETING_REBALANCE:
            self._reset_and_propagate_assignment(group, ErrorCode.REBALANCE_IN_PROGRESS)
        group.pending_sync.clear()
        self.timers.cancel(group.sync_key)
        initial = group.state is ClassicState.EMPTY
        if initial:
            delay = self.initial_delay_ms
            remaining = max(self.rebalance_wait_ms(group.rebalance_timeout_ms()) - delay, 0)
            group.join_action = ("initial", delay, remaining)
            self.timers.schedule(group.join_key, delay)
        group.transition(ClassicState.PREPARING_REBALANCE)
        self.events.classic_rebalance_start(group, reason)
        if not initial:
            self._maybe_complete_join_else_schedule(group)

    def _maybe_complete_join_else_schedule(self, group: ClassicGroup) -> None:
        if group.has_all_members_joined():
            self._complete_join_phase(group)
        else:
            group.join_action = ("complete",)
            self._schedule_rebalance_wait(group.join_key, group)

    def _on_join_timer(self, group: ClassicGroup) -> None:
        if group.join_action[0] == "initial":
            _, delay, remaining = group.join_action
            if group.new_member_added and remaining != 0:
                group.new_member_added = False
                new_delay = min(self.initial_delay_ms, remaining)
                group.join_action = ("initial", new_delay, max(remaining - delay, 0))
                self.timers.schedule(group.join_key, new_delay)
                return
        self._complete_join_phase(group)

    def _complete_join_phase(self, group: ClassicGroup) -> None:
        self.timers.cancel(group.join_key)
        gone = [m.member_id for m in group.not_yet_rejoined() if m.group_instance_id is None]
        self.events.classic_members_expired(group, gone, "rebalance_timeout")
        for member_id in gone:
            self._drop_member(group, member_id)
        if group.state is ClassicState.DEAD:
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait for the session timeouts to clear the group out.
            group.join_action = ("complete",)
            self._schedule_rebalance_wait(group.join_key, group)
            return
        self.metrics.classic_rebalanced(group.state_timestamp_ms, bool(group.members))
        group.init_next_generation()
        if group.state is ClassicState.EMPTY:
            self.events.classic_rebalance_end(group)
            self._write(group)
            return
        log.info(
            "stabilized group %s generation %d (%s) with %d members",
            group.group_id,
            group.generation_id,
            group.protocol_name,
            group.size(),
            extra=fields(group.group_id, epoch=group.generation_id),
        )
        # The leader's answer goes out first: its SyncGroup is the rebalance's critical path.
        leader = group.members[group.leader_id]
        group.complete_join(
            leader, self._join_response(group, leader.member_id, group.leader_members_list())
        )
        for member in group.members.values():
            if member is not leader:
                group.complete_join(member, self._join_response(group, member.member_id, []))
            self._schedule_heartbeat(member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        group.sync_generation = group.generation_id
        self._schedule_rebalance_wait(group.sync_key, group)

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
                self._drop_member(group, member_id)
            self._prepare_rebalance(group, f"{len(missing)} members did not send SyncGroup in time")

    def _expire_member(self, group: ClassicGroup, member: ClassicMember) -> None:
        if group.state is ClassicState.DEAD or group.members.get(member.member_id) is not member:
            return
        if member.has_satisfied_heartbeat():
            return
        self.events.classic_member_gone(group, member, left=False)
        self._remove_member_and_update_group(group, member)

    def _expire_pending_member(self, group: ClassicGroup, member_id: str) -> None:
        if not group.is_pending(member_id):
            return
        self._drop_member(group, member_id)
        if group.state is ClassicState.PREPARING_REBALANCE and group.has_all_members_joined():
            self._complete_join_phase(group)

    def _remove_member_and_update_group(self, group: ClassicGroup, member: ClassicMember) -> None:
        group.complete_join(member, join_error(ErrorCode.UNKNOWN_MEMBER_ID))
        self._drop_member(group, member.member_id)
        if group.state in (ClassicState.STABLE, ClassicState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(
                group, f"member {member.member_id} left or expired"
            )
        elif group.state is ClassicState.PREPARING_REBALANCE and group.has_all_members_joined():
            self._complete_join_phase(group)

    def _reset_and_propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        ok = error == ErrorCode.NONE
        for member in group.members.values():
            response = {
                "error_code": error,
                "protocol_type": group.protocol_type if ok else None,
                "protocol_name": group.protocol_name if ok else None,
                "assignment": member.assignment,
            }
            if group.complete_sync(member, response):
                self._schedule_heartbeat(member)

    # -- SyncGroup ------------------------------------------------------------------------------

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
        if group is None or group.is_empty():
            waiter.resolve(sync_error(ErrorCode.UNKNOWN_MEMBER_ID))
            return waiter
        if not isinstance(group, ClassicGroup):  # a consumer group
            waiter.resolve(
                self.classic_sync_consumer(
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
                self._write(group).then(
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
            self._reset_and_propagate_assignment(group, error)
            self._maybe_prepare_rebalance_or_complete_join(
                group, f"storing the assignment failed: {error.name}"
            )
            return
        self._propagate_assignment(group, ErrorCode.NONE)
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


def _inconsistent(asked: str | None, actual: str | None) -> bool:
    return asked is not None and actual is not None and asked != actual
