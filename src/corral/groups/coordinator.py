"""The group coordinator: every group of the broker, their committed offsets and deadlines.

One coordinator holds both kinds of group (classic now, KIP-848 "consumer" groups beside them in
`groups`, keyed by group id like Kafka's single group namespace); they share the offset map
(`corral._core.OffsetMap`), the timer wheel (`Timers`) and the coordinator log (`log`). Each
method here is a synchronous state change, as in Kafka's GroupMetadataManager: it returns a
response or a `Waiter` (a parked JoinGroup/SyncGroup that a later event answers) and hands records
to the log. Responses here are version-independent dicts; `handlers.py` shapes them per version.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import trio

from .. import _core
from ..clock import wall_ms
from ..errors import ErrorCode
from ..log import storage_warning
from . import records, snapshot
from .classic import CONSUMER_PROTOCOL_TYPE, ClassicGroup, ClassicMember, ClassicState, Waiter
from .log import CoordinatorLog, group_records
from .timers import Timers

log = logging.getLogger("corral.groups")

# Kafka's classicGroupNewMemberJoinTimeoutMs: a new member parked in JoinGroup that neither
# completes nor retries is dropped after this long.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


def join_error(code: ErrorCode, member_id: str = "") -> dict[str, Any]:
    return {"error_code": code, "generation_id": -1, "protocol_type": None,
            "protocol_name": None, "leader": "", "skip_assignment": False,
            "member_id": member_id, "members": []}


def sync_error(code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "protocol_type": None, "protocol_name": None, "assignment": b""}


class JoinRequest:
    """What JoinGroup asks, independent of its version."""

    __slots__ = ("group_id", "member_id", "group_instance_id", "client_id", "client_host",
                 "session_timeout_ms", "rebalance_timeout_ms", "protocol_type", "protocols",
                 "require_known_member_id", "supports_skip_assignment", "reason")

    def __init__(self, **fields: Any):
        for name in self.__slots__:
            setattr(self, name, fields[name])


class GroupCoordinator:
    def __init__(self, settings, log_store: CoordinatorLog, snapshot_path: Path):
        self.settings = settings
        self.log = log_store
        self.snapshot_path = snapshot_path
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets = _core.OffsetMap()
        self.timers = Timers()
        # Mirrors the classic groups for the network thread's Heartbeat answers (server.py).
        self.heartbeat_view = self.timers.heartbeat_view
        self.min_session_ms = settings["group.min.session.timeout.ms"]
        self.max_session_ms = settings["group.max.session.timeout.ms"]
        self.initial_delay_ms = settings["group.initial.rebalance.delay.ms"]
        self.max_size = settings["group.max.size"]
        self.metadata_max_bytes = settings["offset.metadata.max.bytes"]

    async def run(self) -> None:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.timers.run)
                nursery.start_soon(self.log.run)
                nursery.start_soon(self._expire_offsets_periodically)
                nursery.start_soon(self._snapshot_periodically)
        finally:
            # A clean shutdown leaves a fresh snapshot: the next start replays (almost) nothing.
            try:
                snapshot.write(self.snapshot_path, self.log.positions(), self.snapshot_records())
            except OSError as e:
                # Disk full, say: the previous snapshot stays, the next start replays more log.
                log.warning("coordinator snapshot at shutdown failed: %s", e)
            except Exception:
                log.exception("coordinator snapshot at shutdown failed")

    # ============================================================================= snapshot ===

    def snapshot_records(self) -> list[tuple[bytes, bytes]]:
        """The whole state as `__consumer_offsets` records: offsets, then group metadata."""
        out = []
        offsets = self.offsets
        for group_id, group in self.groups.items():
            for topic, partitions in offsets.fetch_all(group_id):
                for p, *_ in partitions:
                    offset, epoch, metadata, commit_ms, expire_ms = offsets.get(group_id, topic, p)
                    out.append((records.offset_key(group_id, topic, p),
                                records.offset_value(offset, epoch, metadata, commit_ms, expire_ms)))
            if group.protocol_type:
                out.extend(group_records(group))
        return out

    async def take_snapshot(self) -> int:
        positions = self.log.positions()
        recs = self.snapshot_records()
        return await trio.to_thread.run_sync(snapshot.write, self.snapshot_path, positions, recs)

    async def _snapshot_periodically(self) -> None:
        interval = self.settings["corral.coordinator.snapshot.interval.ms"] / 1000
        written_at = -1
        while True:
            await trio.sleep(interval)
            if self.log.appends == written_at:
                continue
            appends = self.log.appends
            started = time.monotonic()
            try:
                size = await self.take_snapshot()
            except OSError as e:
                # The previous snapshot stays; tried again next interval.
                storage_warning("snapshot", "coordinator snapshot failed (retried in %gs): %s",
                                interval, e)
                continue
            written_at = appends
            log.info("coordinator snapshot: %d groups, %d bytes in %.3fs", len(self.groups), size,
                     time.monotonic() - started)

    # ================================================================================= load ===

    def load(self) -> dict[str, int]:
        """Rebuilds groups and offsets from the snapshot and the log after it, as Kafka's replay
        does; members get a fresh session to rejoin or heartbeat in. Returns counts."""
        saved = snapshot.read(self.snapshot_path)
        from_snapshot = 0
        if saved is None:
            from_log = self._apply_records(self.log.replay())
        else:
            positions, snapshot_records = saved
            from_snapshot = self._apply_records(snapshot_records)
            from_log = self._apply_records(self.log.replay(positions))
        for group in self.groups.values():
            for member in group.members.values():
                self._schedule_heartbeat(member)
        return {"groups": len(self.groups),
                "offsets": sum(self.offsets.count(g) for g in self.groups),
                "snapshot_records": from_snapshot, "log_records": from_log}

    def _apply_records(self, replayed) -> int:
        count = 0
        for key, value in replayed:
            count += 1
            kind, fields = records.read_key(key)
            if kind in (records.OFFSET_COMMIT_KEY_V0, records.OFFSET_COMMIT_KEY):
                group_id, topic, partition = fields
                if value is None:
                    self.offsets.delete(group_id, topic, [partition])
                    continue
                v = records.read_offset_value(value)
                if group_id not in self.groups:
                    self._new_classic_group(group_id)
                self.offsets.commit(group_id, topic, [(partition, v.offset, v.leader_epoch, v.metadata)],
                                    v.commit_ms, v.expire_ms)
            elif kind == records.GROUP_METADATA_KEY:
                (group_id,) = fields
                old = self.groups.pop(group_id, None)
                if old is not None:
                    self._forget_timers(old)
                if value is not None:
                    self._load_group(group_id, records.read_group_value(value))
        return count

    def _load_group(self, group_id: str, value: "records.GroupValue") -> None:
        group = self._new_classic_group(group_id)
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        for m in value.members:
            member = ClassicMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                   m.rebalance_timeout_ms, m.session_timeout_ms,
                                   value.protocol_type, [(value.protocol or "", m.subscription)])
            member.assignment = m.assignment
            member.timer_key = self.timers.register(self._expire_member, group, member)
            group.add(member, None)
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        group.transition(ClassicState.STABLE if group.members else ClassicState.EMPTY)
        group.state_timestamp_ms = value.state_timestamp_ms if value.state_timestamp_ms >= 0 else None
        group.subscribed_topics = group.compute_subscribed_topics()

    def _forget_timers(self, group: ClassicGroup) -> None:
        """Unregisters the group's deadlines, and its Heartbeat view: the group is going away."""
        self.timers.heartbeat_view.remove_group(group.group_id)
        for member in group.members.values():
            self.timers.unregister(member.timer_key)
        for key in group.pending_members.values():
            self.timers.unregister(key)
        self.timers.unregister(group.join_key)
        self.timers.unregister(group.sync_key)

    # ======================================================================== classic groups ===

    def _new_classic_group(self, group_id: str) -> ClassicGroup:
        group = ClassicGroup(group_id, self.timers.heartbeat_view)
        group.join_key = self.timers.register(self._on_join_timer, group)
        group.sync_key = self.timers.register(self._on_sync_timer, group)
        self.groups[group_id] = group
        return group

    def _classic(self, group_id: str) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ClassicGroup) else None

    def _drop_member(self, group: ClassicGroup, member_id: str) -> None:
        """Removes a member or pending member and its timer; a parked SyncGroup learns it is gone."""
        pending_key = group.pending_members.get(member_id)
        if pending_key is not None:
            self.timers.unregister(pending_key)
        member = group.remove(member_id)
        if member is not None:
            self.timers.unregister(member.timer_key)
            if member.sync_waiter is not None:
                member.sync_waiter.complete(sync_error(ErrorCode.UNKNOWN_MEMBER_ID))
                member.sync_waiter = None

    def _schedule_heartbeat(self, member: ClassicMember, timeout_ms: int | None = None) -> None:
        self.timers.schedule(member.timer_key,
                             member.session_timeout_ms if timeout_ms is None else timeout_ms)

    @staticmethod
    def _validate_member(group: ClassicGroup, member_id: str, instance_id: str | None) -> ErrorCode:
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
            return ErrorCode.NONE
        return ErrorCode.NONE if member_id in group.members else ErrorCode.UNKNOWN_MEMBER_ID

    # -- JoinGroup ------------------------------------------------------------------------------

    def join(self, req: JoinRequest) -> Waiter:
        waiter = Waiter()
        if not self.min_session_ms <= req.session_timeout_ms <= self.max_session_ms:
            waiter.complete(join_error(ErrorCode.INVALID_SESSION_TIMEOUT, req.member_id))
            return waiter
        unknown = req.member_id == ""
        group = self.groups.get(req.group_id)
        if group is None:
            if not unknown:
                waiter.complete(join_error(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id))
                return waiter
            group = self._new_classic_group(req.group_id)
        elif not isinstance(group, ClassicGroup):
            waiter.complete(join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id))
            return waiter

        if not self._accept_joining_member(group, req.member_id):
            self._drop_member(group, req.member_id)
            waiter.complete(join_error(ErrorCode.GROUP_MAX_SIZE_REACHED))
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
            return (member is not None and member.awaiting_join) or \
                group.num_awaiting_join < self.max_size
        return member_id in group.members or group.size() < self.max_size

    def _join_new_member(self, group: ClassicGroup, req: JoinRequest, waiter: Waiter) -> None:
        if group.state is ClassicState.DEAD:
            waiter.complete(join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(req.protocol_type, req.protocols):
            waiter.complete(join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_id = group.generate_member_id(req.client_id, req.group_instance_id)
        if req.group_instance_id is not None:
            old_id = group.static_members.get(req.group_instance_id)
            if old_id is not None:
                log.info("static member %s of group %s rejoins with a new member id; replacing %s",
                         req.group_instance_id, group.group_id, old_id)
                self._update_static_member(group, req, old_id, new_id, waiter)
            else:
                self._add_member(group, req, new_id, waiter)
        elif req.require_known_member_id:
            # KIP-394: hand out the id and expect the member back with it within its session.
            key = self.timers.register(self._expire_pending_member, group, new_id)
            group.pending_members[new_id] = key
            self.timers.schedule(key, req.session_timeout_ms)
            waiter.complete(join_error(ErrorCode.MEMBER_ID_REQUIRED, new_id))
        else:
            self._add_member(group, req, new_id, waiter)

    def _join_existing_member(self, group: ClassicGroup, req: JoinRequest, waiter: Waiter) -> None:
        member_id = req.member_id
        if group.state is ClassicState.DEAD:
            waiter.complete(join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id))
            return
        if not group.supports_protocols(req.protocol_type, req.protocols):
            waiter.complete(join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if group.is_pending(member_id):
            if req.group_instance_id is not None:
                # Pending ids are only handed to dynamic members.
                waiter.complete(join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
                return
            self._add_member(group, req, member_id, waiter)
            return
        error = self._validate_member(group, member_id, req.group_instance_id)
        if error:
            waiter.complete(join_error(error, member_id))
            return
        member = group.members[member_id]
        state = group.state
        if state is ClassicState.PREPARING_REBALANCE:
            self._update_member(group, member, req, waiter)
        elif state is ClassicState.COMPLETING_REBALANCE:
            if member.matches(req.protocols):
                # A lost JoinGroup response: answer again with the current generation.
                waiter.complete(self._join_response(
                    group, member_id, group.leader_members_list() if group.is_leader(member_id) else []))
            else:
                self._update_member(group, member, req, waiter)
        elif state is ClassicState.STABLE:
            if group.is_leader(member_id) or not member.matches(req.protocols):
                # The leader rejoining asks for a new assignment (e.g. topic metadata changed).
                self._update_member(group, member, req, waiter)
            else:
                waiter.complete(self._join_response(group, member_id, []))
        else:
            waiter.complete(join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _join_response(self, group: ClassicGroup, member_id: str, members: list,
                       skip_assignment: bool = False, leader: str | None = None) -> dict[str, Any]:
        return {"error_code": ErrorCode.NONE, "generation_id": group.generation_id,
                "protocol_type": group.protocol_type, "protocol_name": group.protocol_name,
                "leader": group.leader_id if leader is None else leader,
                "skip_assignment": skip_assignment, "member_id": member_id, "members": members}

    def _add_member(self, group: ClassicGroup, req: JoinRequest, member_id: str,
                    waiter: Waiter) -> None:
        member = ClassicMember(member_id, req.group_instance_id, req.client_id, req.client_host,
                               req.rebalance_timeout_ms, req.session_timeout_ms,
                               req.protocol_type, req.protocols)
        member.is_new = True
        if group.state is ClassicState.PREPARING_REBALANCE and \
                group.previous_state is ClassicState.EMPTY:
            group.new_member_added = True
        pending_key = group.pending_members.get(member_id)
        if pending_key is not None:
            self.timers.unregister(pending_key)
        member.timer_key = self.timers.register(self._expire_member, group, member)
        group.add(member, waiter)
        # A new member cannot heartbeat before its JoinGroup returns; a long timeout bounds
        # defunct joiners (clients that gave up and retried under another id).
        self._schedule_heartbeat(member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance_or_complete_join(
            group, f"adding member {member_id}; client reason: {req.reason or 'not provided'}")

    def _update_member(self, group: ClassicGroup, member: ClassicMember, req: JoinRequest,
                       waiter: Waiter) -> None:
        group.update(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms,
                     waiter)
        self._maybe_prepare_rebalance_or_complete_join(group, f"member {member.member_id} rejoined")

    def _update_static_member(self, group: ClassicGroup, req: JoinRequest, old_id: str,
                              new_id: str, waiter: Waiter) -> None:
        current_leader = group.leader_id
        member = group.replace_static_member(req.group_instance_id, old_id, new_id,
                                             join_error(ErrorCode.FENCED_INSTANCE_ID, old_id))
        self._schedule_heartbeat(member)
        group.update(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms,
                     waiter)
        state = group.state
        if state is ClassicState.STABLE:
            if group.protocol_name == group.select_protocol():
                # The same member is back: keep the group stable and give it its old assignment.
                self.log.write_group(group, lambda error: self._static_member_persisted(
                    group, member, req, current_leader, error))
            else:
                self._maybe_prepare_rebalance_or_complete_join(
                    group, f"static member {req.group_instance_id} changed the selected protocol")
        elif state is ClassicState.COMPLETING_REBALANCE:
            # The leader may have assigned under the old id: rebalance so the new id gets partitions.
            self._prepare_rebalance(group, f"static member {req.group_instance_id} rejoined")
        else:
            self._maybe_complete_join_phase(group)

    def _static_member_persisted(self, group: ClassicGroup, member: ClassicMember,
                                 req: JoinRequest, previous_leader: str | None,
                                 error: ErrorCode) -> None:
        if error:
            group.complete_join(member, join_error(error))
            return
        if req.supports_skip_assignment:
            is_leader = group.is_leader(member.member_id)
            members = group.leader_members_list() if is_leader else []
            group.complete_join(member, self._join_response(
                group, member.member_id, members, skip_assignment=is_leader))
        else:
            group.complete_join(member, self._join_response(
                group, member.member_id, [], leader=previous_leader))

    # -- rebalance ------------------------------------------------------------------------------

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join_phase(group)

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        # The initial rebalance of a new group waits for its delay even when everyone is in.
        if group.state is ClassicState.PREPARING_REBALANCE and group.has_all_members_joined() \
                and group.previous_state is not ClassicState.EMPTY:
            self._complete_join_phase(group)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.state is ClassicState.COMPLETING_REBALANCE:
            self._reset_and_propagate_assignment(group, ErrorCode.REBALANCE_IN_PROGRESS)
        group.pending_sync.clear()
        self.timers.cancel(group.sync_key)
        initial = group.state is ClassicState.EMPTY
        if initial:
            delay = self.initial_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            group.join_action = ("initial", delay, remaining)
            self.timers.schedule(group.join_key, delay)
        group.transition(ClassicState.PREPARING_REBALANCE)
        log.info("preparing to rebalance group %s with old generation %d (%s)",
                 group.group_id, group.generation_id, reason)
        if not initial:
            self._maybe_complete_join_else_schedule(group)

    def _maybe_complete_join_else_schedule(self, group: ClassicGroup) -> None:
        if group.has_all_members_joined():
            self._complete_join_phase(group)
        else:
            group.join_action = ("complete",)
            self.timers.schedule(group.join_key, group.rebalance_timeout_ms())

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
        for member_id in gone:
            self._drop_member(group, member_id)
        if gone:
            log.info("group %s removed %d dynamic members that did not rejoin", group.group_id, len(gone))
        if group.state is ClassicState.DEAD:
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait for the session timeouts to clear the group out.
            group.join_action = ("complete",)
            self.timers.schedule(group.join_key, group.rebalance_timeout_ms())
            return
        group.init_next_generation()
        if group.state is ClassicState.EMPTY:
            log.info("group %s with generation %d is now empty", group.group_id, group.generation_id)
            self.log.write_group(group, None)
            return
        log.info("stabilized group %s generation %d (%s) with %d members", group.group_id,
                 group.generation_id, group.protocol_name, group.size())
        leader_list = group.leader_members_list()
        followers: list[Waiter] = []
        for member in group.members.values():
            if member.member_id == group.leader_id:
                group.complete_join(member, self._join_response(group, member.member_id, leader_list))
            else:
                group.complete_join(member, self._join_response(group, member.member_id, []), followers)
            self._schedule_heartbeat(member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        group.sync_generation = group.generation_id
        if followers:
            # The leader's answer goes out first: its SyncGroup is the rebalance's critical path,
            # and woken with everyone its task would run at a random place among N (trio's order).
            # The followers are woken one scheduling round later.
            trio.lowlevel.current_trio_token().run_sync_soon(_wake_all, followers)
        self.timers.schedule(group.sync_key, group.rebalance_timeout_ms())

    def _on_sync_timer(self, group: ClassicGroup) -> None:
        if group.sync_generation != group.generation_id:
            return
        if group.state in (ClassicState.COMPLETING_REBALANCE, ClassicState.STABLE) and \
                group.pending_sync:
            missing = list(group.pending_sync)
            for member_id in missing:
                self._drop_member(group, member_id)
            self._prepare_rebalance(group, f"{len(missing)} members did not send SyncGroup in time")

    def _expire_member(self, group: ClassicGroup, member: ClassicMember) -> None:
        if group.state is ClassicState.DEAD or group.members.get(member.member_id) is not member:
            return
        if member.has_satisfied_heartbeat():
            return
        log.info("member %s of group %s failed its session timeout; removing it",
                 member.member_id, group.group_id)
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
                group, f"member {member.member_id} left or expired")
        elif group.state is ClassicState.PREPARING_REBALANCE and group.has_all_members_joined():
            self._complete_join_phase(group)

    def _reset_and_propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        ok = error == ErrorCode.NONE
        for member in group.members.values():
            response = {"error_code": error,
                        "protocol_type": group.protocol_type if ok else None,
                        "protocol_name": group.protocol_name if ok else None,
                        "assignment": member.assignment}
            if group.complete_sync(member, response):
                self._schedule_heartbeat(member)

    # -- SyncGroup ------------------------------------------------------------------------------

    def sync(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
             protocol_type: str | None, protocol_name: str | None,
             assignments: list[tuple[str, bytes]]) -> Waiter:
        waiter = Waiter()
        group = self._classic(group_id)
        if group is None:
            waiter.complete(sync_error(ErrorCode.UNKNOWN_MEMBER_ID))
            return waiter
        error = self._validate_sync(group, member_id, instance_id, generation_id,
                                    protocol_type, protocol_name)
        state = group.state
        if error:
            waiter.complete(sync_error(error))
        elif state is ClassicState.EMPTY:
            waiter.complete(sync_error(ErrorCode.UNKNOWN_MEMBER_ID))
        elif state is ClassicState.PREPARING_REBALANCE:
            waiter.complete(sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
        elif state is ClassicState.COMPLETING_REBALANCE:
            group.members[member_id].sync_waiter = waiter
            self._remove_pending_sync(group, member_id)
            if group.is_leader(member_id):
                by_member = dict(assignments)
                for member in group.members.values():
                    member.assignment = by_member.get(member.member_id, b"")
                log.info("assignment received from leader %s of group %s for generation %d",
                         member_id, group_id, generation_id)
                self.log.write_group(group, lambda err: self._assignment_persisted(
                    group, generation_id, err))
        else:  # Stable
            self._remove_pending_sync(group, member_id)
            waiter.complete({"error_code": ErrorCode.NONE, "protocol_type": group.protocol_type,
                             "protocol_name": group.protocol_name,
                             "assignment": group.members[member_id].assignment})
        return waiter

    def _assignment_persisted(self, group: ClassicGroup, generation_id: int,
                              error: ErrorCode) -> None:
        # Another join may have moved the group on while the record was being written.
        if group.state is not ClassicState.COMPLETING_REBALANCE or \
                group.generation_id != generation_id:
            return
        if error:
            self._reset_and_propagate_assignment(group, error)
            self._maybe_prepare_rebalance_or_complete_join(group, f"storing the assignment failed: {error.name}")
            return
        self._propagate_assignment(group, ErrorCode.NONE)
        group.transition(ClassicState.STABLE)

    def _validate_sync(self, group: ClassicGroup, member_id: str, instance_id: str | None,
                       generation_id: int, protocol_type: str | None,
                       protocol_name: str | None) -> ErrorCode:
        if group.state is ClassicState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_member(group, member_id, instance_id)
        if error:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if _inconsistent(protocol_type, group.protocol_type) or \
                _inconsistent(protocol_name, group.protocol_name):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return ErrorCode.NONE

    def _remove_pending_sync(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync or group.state in (
                ClassicState.DEAD, ClassicState.EMPTY, ClassicState.PREPARING_REBALANCE):
            self.timers.cancel(group.sync_key)

    # -- Heartbeat and LeaveGroup ---------------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None,
                  generation_id: int) -> ErrorCode:
        group = self.groups.get(group_id)
        if not isinstance(group, ClassicGroup):
            return ErrorCode.UNKNOWN_MEMBER_ID
        state = group.state
        if state is ClassicState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_member(group, member_id, instance_id)
        if error:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if state is ClassicState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        member = group.members[member_id]
        self.timers.schedule(member.timer_key, member.session_timeout_ms)
        if state is ClassicState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(self, group_id: str, leaving: list[tuple[str, str | None]]
              ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Removes members [(member_id, group_instance_id)]; returns (group error, member errors)."""
        group = self.groups.get(group_id)
        if not isinstance(group, ClassicGroup):
            return ErrorCode.UNKNOWN_MEMBER_ID, []
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
                error = self._validate_member(group, member_id, instance_id)
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
        log.info("member %s left group %s", member_id, group.group_id)
        group.complete_join(member, join_error(ErrorCode.UNKNOWN_MEMBER_ID))
        self._drop_member(group, member_id)

    # =============================================================================== offsets ===

    def validate_commit(self, group_id: str, member_id: str, instance_id: str | None,
                        generation_id: int, version: int) -> tuple[ErrorCode, ClassicGroup | None]:
        """Kafka's OffsetMetadataManager.validateOffsetCommit, for classic and simple groups."""
        group = self.groups.get(group_id)
        if group is None:
            if generation_id < 0:
                # Commits from outside group management create a "simple" group.
                return ErrorCode.NONE, None
            return (ErrorCode.GROUP_ID_NOT_FOUND if version >= 9 else ErrorCode.ILLEGAL_GENERATION), None
        if group.state is ClassicState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, group
        if generation_id < 0 and group.state is ClassicState.EMPTY:
            return ErrorCode.NONE, group
        if generation_id >= 0 or member_id or instance_id is not None:
            error = self._validate_member(group, member_id, instance_id)
            if error:
                return error, group
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION, group
        elif group.state is not ClassicState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID, group
        if group.state is ClassicState.COMPLETING_REBALANCE:
            # The member got its JoinGroup response but not its assignment yet.
            return ErrorCode.REBALANCE_IN_PROGRESS, group
        return ErrorCode.NONE, group

    def apply_commit(self, group_id: str, topics: list[tuple[str, list[tuple[int, int, int, str]]]],
                     commit_ms: int, expire_ms: int) -> None:
        if group_id not in self.groups:
            self._new_classic_group(group_id)
        for topic, partitions in topics:
            self.offsets.commit(group_id, topic, partitions, commit_ms, expire_ms)

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None
                      ) -> list[tuple[str, list[tuple[int, int, int, str]]]]:
        """[(topic, [(partition, offset, leader_epoch, metadata)])]; None asks for everything."""
        if topics is None:
            return self.offsets.fetch_all(group_id)
        result = []
        for topic, partitions in topics:
            found = self.offsets.fetch(group_id, topic, partitions)
            result.append((topic, [(p, *f) for p, f in zip(partitions, found)]))
        return result

    def delete_offsets(self, group_id: str, topics: list[tuple[str, list[int]]]
                       ) -> tuple[ErrorCode, list[tuple[str, list[tuple[int, ErrorCode]]]]]:
        group = self.groups.get(group_id)
        if group is None or group.state is ClassicState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND, []
        # A live group may lose offsets of topics it no longer subscribes to, if its subscriptions
        # can be read (protocol type "consumer").
        if group.state is not ClassicState.EMPTY and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return ErrorCode.NON_EMPTY_GROUP, []
        result = []
        for topic, partitions in topics:
            if group.is_subscribed_to(topic):
                result.append((topic, [(p, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC) for p in partitions]))
                continue
            self.offsets.delete(group_id, topic, partitions)
            result.append((topic, [(p, ErrorCode.NONE) for p in partitions]))
        return ErrorCode.NONE, result

    # ================================================================================= admin ===

    def list_groups(self, states: set[str] | None, types: set[str] | None
                    ) -> list[dict[str, Any]]:
        listed = []
        for group in self.groups.values():
            state = group.state.value
            if states and state.lower() not in states:
                continue
            if types and group.type not in types:
                continue
            listed.append({"group_id": group.group_id, "protocol_type": group.protocol_type or "",
                           "group_state": state, "group_type": group.type})
        return listed

    def describe_group(self, group_id: str) -> dict[str, Any]:
        group = self._classic(group_id)
        if group is None:
            return {"error_code": ErrorCode.NONE, "group_id": group_id, "group_state": "Dead",
                    "protocol_type": "", "protocol_data": "", "members": []}
        stable = group.state is ClassicState.STABLE
        members = []
        for m in group.members.values():
            members.append({
                "member_id": m.member_id, "group_instance_id": m.group_instance_id,
                "client_id": m.client_id, "client_host": m.client_host,
                "member_metadata": m.metadata(group.protocol_name) if stable else b"",
                "member_assignment": m.assignment if stable else b"",
            })
        return {"error_code": ErrorCode.NONE, "group_id": group_id,
                "group_state": group.state.value, "protocol_type": group.protocol_type or "",
                "protocol_data": group.protocol_name if stable else "", "members": members}

    def delete_group(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None or group.state is ClassicState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.state is not ClassicState.EMPTY:
            return ErrorCode.NON_EMPTY_GROUP
        self._remove_group(group)
        return ErrorCode.NONE

    def _remove_group(self, group: ClassicGroup) -> None:
        removed = self.offsets.delete_group(group.group_id)
        for member_id in list(group.members) + list(group.pending_members):
            self._drop_member(group, member_id)
        self._forget_timers(group)
        group.transition(ClassicState.DEAD)
        del self.groups[group.group_id]
        self.log.write_tombstones(group.group_id, removed, None)
        log.info("group %s deleted with %d offsets", group.group_id, len(removed))

    # ================================================================================ expiry ===

    async def _expire_offsets_periodically(self) -> None:
        interval = self.settings["offsets.retention.check.interval.ms"] / 1000
        while True:
            await trio.sleep(interval)
            with self.log.for_request() as writes:
                self.expire_offsets(wall_ms())
            writes.then(_warn_if_failed)

    def expire_offsets(self, now: int) -> int:
        """Kafka's cleanupGroupMetadata: expire old offsets, drop empty groups left without any."""
        retention = self.settings["offsets.retention.minutes"] * 60_000
        expired_total = 0
        for group in list(self.groups.values()):
            base: int | None = None
            keep: list[str] = []
            if not group.protocol_type:
                pass  # simple group: by commit time
            elif group.state is ClassicState.EMPTY:
                base = group.state_timestamp_ms
            else:
                continue  # a live classic group keeps its offsets
            removed = self.offsets.expire(group.group_id, now, retention, base, keep)
            if removed:
                expired_total += len(removed)
                self.log.write_tombstones(group.group_id, removed, None, group_too=False)
            if group.state is ClassicState.EMPTY and not self.offsets.has_offsets(group.group_id):
                self._remove_group(group)
        return expired_total


def _warn_if_failed(error: ErrorCode) -> None:
    if error:
        log.warning("writing the tombstones of expired offsets or groups failed (%s): gone from "
                    "memory, they may come back after a restart and expire again", error.name)


def _wake_all(waiters: list[Waiter]) -> None:
    for waiter in waiters:
        waiter.wake()


def _inconsistent(asked: str | None, actual: str | None) -> bool:
    return asked is not None and actual is not None and asked != actual

