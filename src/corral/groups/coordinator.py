"""The group coordinator: every group of the broker, their committed offsets and deadlines.

One coordinator holds both kinds of group (classic now, KIP-848 "consumer" groups beside them in
`groups`, keyed by group id like Kafka's single group namespace); they share the offset map
(`corral._core.OffsetMap`), the timer wheel (`Timers`) and the coordinator log (`log`). Here:
lifecycle, snapshots and loading, offsets, admin and expiry; the classic protocol itself is
`ClassicProtocol` (classic_protocol.py). Each method is a synchronous state change, as in Kafka's
GroupMetadataManager, handing records to the log; responses are version-independent dicts that
`handlers.py` shapes per version.
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
from .classic import CONSUMER_PROTOCOL_TYPE, ClassicGroup, ClassicMember, ClassicState
from .classic_protocol import ClassicProtocol
from .log import CoordinatorLog, group_records
from .timers import Timers

log = logging.getLogger("corral.groups")

class GroupCoordinator(ClassicProtocol):
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

