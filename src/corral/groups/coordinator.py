"""The group coordinator: every group of the broker, their committed offsets and deadlines.

The facade of the groups layer, made of explicit parts, each constructed with what it uses:
- `classic` (classic/protocol.py): classic requests to classic groups, their machine over time in
  `rebalance` (classic/rebalance.py);
- `consumer` (consumer/protocol.py): ConsumerGroupHeartbeat; its targets in `targets`
  (consumer/target_computation.py), its write path in `writes` (consumer/writes.py);
- `classic_members` (consumer/classic_members.py): classic requests to consumer groups;
- `offsets` (offsets.py): commit, fetch, delete, expiry;
- `writer` (storage/writer.py): the log's writer; storage/ also holds records and snapshots.
It holds the group map (classic and consumer groups keyed by group id, Kafka's single group
namespace), owns the services (timers, the writer, offset expiry, snapshots) in one nursery, and
applies records to memory in `replay`, the one function used both for durable live writes and for
loading (snapshot, then the log after it). handlers/ is the wire (decode requests, shape answers
per version). Offsets, admin and expiry see groups only through the `Group` interface (group.py).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import trio

from corral import _core
from corral.assignors import AssignorRegistry
from corral.clock import wall_ms
from corral.config.groups import GROUP_SETTINGS
from corral.errors import ErrorCode
from corral.groups.classic import ClassicGroup, JoinRequest
from corral.groups.classic.protocol import ClassicGroups
from corral.groups.classic.rebalance import ClassicRebalance
from corral.groups.consumer import ConsumerGroup, HeartbeatRequest, TopicImage
from corral.groups.consumer.classic_members import ClassicMembers
from corral.groups.consumer.members import regex_refresh_due
from corral.groups.consumer.migration import MigrationPolicy
from corral.groups.consumer.protocol import ConsumerGroups
from corral.groups.consumer.reconcile import MemberState
from corral.groups.consumer.target_computation import TargetComputation
from corral.groups.consumer.writes import ConsumerWrites
from corral.groups.events import AnalyticsEvents
from corral.groups.group import Group
from corral.groups.limits import GroupLimits
from corral.groups.metrics import GroupMetrics
from corral.groups.offsets import Offsets
from corral.groups.storage import consumer_records as cr
from corral.groups.storage import records, snapshot
from corral.groups.storage.records import (
    GroupMetadata,
    GroupTombstone,
    OffsetCommits,
    OffsetTombstones,
    Record,
)
from corral.groups.storage.writer import CoordinatorLog
from corral.groups.timers import Timers
from corral.later import Later
from corral.observability.log_lines import fields
from corral.partitions.store import storage_warning

log = logging.getLogger("corral.groups")
# How often groups are checked for a periodic regex refresh (Kafka refreshes at most this often).
REGEX_REFRESH_CHECK_S = 10.0


_CONSUMER_RECORDS = (
    cr.GroupEpoch,
    cr.MemberMetadata,
    cr.TargetEpoch,
    cr.TargetMember,
    cr.CurrentAssignment,
    cr.RegexTopics,
    cr.ConsumerTombstone,
)


class GroupCoordinator:
    def __init__(self, settings, writer: CoordinatorLog, snapshot_path: Path, topics=None):
        self.settings = settings
        # The broker's topic store (None in tests without topics): consumer groups subscribe by
        # name and are assigned by topic id.
        self.topics = TopicImage(topics)
        self.assignors = AssignorRegistry.from_setting(settings["group.consumer.assignors"])
        # Whether ConsumerGroupHeartbeat/Describe are served (else UNSUPPORTED_VERSION).
        self.consumer_protocol_enabled = "consumer" in settings[
            "group.coordinator.rebalance.protocols"
        ].split(",")
        # Whether groups move between the protocols online (KIP-848 §5).
        self.migration = MigrationPolicy(settings["group.consumer.migration.policy"])
        self._nursery: trio.Nursery | None = None
        self.writer = writer
        self.writer.replay = self.replay
        self.snapshot_path = snapshot_path
        self.groups: dict[str, Group] = {}
        self.limits = GroupLimits.of(settings)
        self.metrics = GroupMetrics()
        self.events = AnalyticsEvents(self.topics)  # for __corral_analytics (analytics_topic.py)
        self.offsets = Offsets(settings, self.groups, writer, self._remove_group, self.metrics)
        self.timers = Timers()
        # Mirrors the classic groups for the network thread's Heartbeat answers (server.py).
        self.heartbeat_view = self.timers.heartbeat_view
        # Mirrors the consumer groups for its ConsumerGroupHeartbeat answers (ConsumerGroup
        # keeps it in step); None when the consumer protocol is off (every heartbeat is refused).
        self.consumer_heartbeat_view: _core.ConsumerHeartbeatView | None = None
        if self.consumer_protocol_enabled:
            self.consumer_heartbeat_view = _core.ConsumerHeartbeatView(
                self.timers.wheel,
                settings["group.consumer.session.timeout.ms"],
                settings["group.consumer.heartbeat.interval.ms"],
            )
            self._view_rule()
            if hasattr(settings, "on_change"):  # dynamic broker settings
                settings.on_change.append(self._view_rule)
        # Per-group settings (kafka-configs --entity-type groups): the broker's DynamicConfigs,
        # set by coordinator_for; None (in-process tests) means the broker's values for all.
        self.group_configs = None
        self._loading = False
        # The parts (module docstring), each given what it uses.
        self.rebalance = ClassicRebalance(
            self.groups, writer, self.timers, self.limits, self.events, self.metrics
        )
        self.writes = ConsumerWrites(self.groups, writer, self.replay, self.rebalance, self.events)
        self.targets = TargetComputation(
            self.groups, self.topics, self.assignors, self.metrics, self.group_setting, self.writes
        )
        self.consumer = ConsumerGroups(
            self.groups,
            self.writes,
            self.targets,
            self.rebalance,
            self.timers,
            settings,
            self.limits,
            self.topics,
            self.migration,
            self.events,
            self.group_setting,
        )
        self.classic_members = ClassicMembers(
            self.consumer,
            self.writes,
            self.targets,
            self.rebalance,
            self.groups,
            self.timers,
            self.limits,
            self.topics,
            self.migration,
            self.events,
        )
        self.classic = ClassicGroups(
            self.rebalance, self.classic_members, self.groups, self.timers, self.limits, self.events
        )

    # ============================================================================ requests ===

    def join(self, req: JoinRequest) -> Later:
        return self.classic.join(req)

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
        return self.classic.sync(
            group_id,
            member_id,
            instance_id,
            generation_id,
            protocol_type,
            protocol_name,
            assignments,
        )

    def heartbeat(
        self, group_id: str, member_id: str, instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        return self.classic.heartbeat(group_id, member_id, instance_id, generation_id)

    def leave(
        self, group_id: str, leaving: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        return self.classic.leave(group_id, leaving)

    def consumer_heartbeat(self, req: HeartbeatRequest) -> Later:
        return self.consumer.heartbeat(req)

    def on_topics_changed(self, names: set[str]) -> None:
        self.consumer.on_topics_changed(names)

    def apply_core_moves(self) -> None:
        self.writes.apply_core_moves()

    @property
    def authorize_regexes(self) -> bool:
        return self.consumer.authorize_regexes

    @authorize_regexes.setter
    def authorize_regexes(self, on: bool) -> None:
        self.consumer.authorize_regexes = on

    def group_setting(self, group_id: str, name: str) -> Any:
        """A consumer group's setting (group_settings.py): its own value, else the broker's."""
        broker_name = GROUP_SETTINGS[name].broker_synonym
        if self.group_configs is None:
            return self.settings[broker_name]
        return self.group_configs.group_value(group_id, name, broker_name)

    def _assignment_interval_ms(self, group_id: str) -> int:
        return self.group_setting(group_id, "consumer.assignment.interval.ms")

    def _view_rule(self, _names=None) -> None:
        """The network thread's heartbeat intervals follow answer.py's rule with these."""
        s = self.settings
        self.consumer_heartbeat_view.set_rule(
            s["corral.consumer.reconciling.heartbeat.interval.ms"],
            s["corral.consumer.reconciling.heartbeat.max.rate"],
            s["corral.group.consumer.epoch.short.path.enable"],
        )

    def group_configs_changed(self, group_id: str) -> None:
        """The network thread answers the group's steady heartbeats with its settings from now
        on (the Python path reads them at each use)."""
        if self.consumer_heartbeat_view is not None:
            self.consumer_heartbeat_view.set_group_timing(
                group_id,
                self.group_setting(group_id, "consumer.session.timeout.ms"),
                self.group_setting(group_id, "consumer.heartbeat.interval.ms"),
            )

    async def run(self) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = self.targets.nursery = nursery  # offloaded targets run in it
                nursery.start_soon(self.timers.run)
                nursery.start_soon(self.writer.run)
                nursery.start_soon(self._expire_offsets_periodically)
                nursery.start_soon(self._snapshot_periodically)
                nursery.start_soon(self._refresh_regexes_periodically)
        finally:
            # A clean shutdown leaves a fresh snapshot: the next start replays (almost) nothing.
            try:
                self.apply_core_moves()
                snapshot.write(self.snapshot_path, self.writer.positions(), self.snapshot_records())
            except OSError as e:
                # Disk full, say: the previous snapshot stays, the next start replays more log.
                log.warning("coordinator snapshot at shutdown failed: %s", e)
            except Exception:
                log.exception("coordinator snapshot at shutdown failed")

    # =============================================================================== replay ===

    def replay(self, record: Record) -> None:
        """Applies one durable record to memory: live once its write is fsynced, and at load."""
        if isinstance(record, OffsetCommits):
            if record.group_id not in self.groups:
                self.rebalance.new_group(record.group_id)  # a "simple" group
            self.offsets.replay_commits(record)
        elif isinstance(record, OffsetTombstones):
            self.offsets.replay_tombstones(record)
        elif isinstance(record, GroupMetadata):
            group = self.groups.get(record.group_id)
            if isinstance(group, ClassicGroup) and not self._loading:
                # The live classic group already is what its record says (the classic machine
                # wrote it); the record becomes what a snapshot or a restart would load.
                group.stored = record.value
            elif isinstance(group, ConsumerGroup) and not self._loading:
                # A classic write that became durable after the group was upgraded (consumer
                # records apply at once): the upgrade's records follow it in the log.
                return
            else:
                if group is not None:
                    self._forget(group)
                group = self.rebalance.from_record(record.group_id, record.value)
                if not self._loading:
                    for member in group.members.values():
                        self.rebalance.schedule_heartbeat(member)
        elif isinstance(record, GroupTombstone):
            group = self.groups.get(record.group_id)
            if isinstance(group, ConsumerGroup):
                return  # the classic key of a group that became a consumer group
            if group is not None:
                del self.groups[record.group_id]
                self._forget(group)
            # Whatever offsets a pending commit left behind go with the group.
            self.offsets.map.delete_group(record.group_id)
        elif isinstance(record, _CONSUMER_RECORDS):
            self._replay_consumer(record)

    def _replay_consumer(self, record: cr.ConsumerRecord) -> None:
        group_id = record.group_id
        group = self.groups.get(group_id)
        tombstone = isinstance(record, cr.ConsumerTombstone)
        if tombstone and record.kind == cr.GROUP_EPOCH:
            if isinstance(group, ConsumerGroup):
                del self.groups[group_id]
                self._forget(group)
                if self._loading and self.offsets.map.count(group_id):
                    # It became a classic group that wrote no record yet: its offsets stay
                    # with an empty classic group, as a live conversion leaves them.
                    self.rebalance.new_group(group_id)
            return
        if not isinstance(group, ConsumerGroup):
            if tombstone:
                return
            if group is not None:
                self._forget(group)  # an empty classic group converted
            group = self.groups[group_id] = ConsumerGroup(
                group_id, self.consumer_heartbeat_view, self._assignment_interval_ms
            )
        leaving = (
            group.members.get(record.name or "")
            if tombstone and record.kind == cr.MEMBER_METADATA
            else None
        )
        if not self._loading:
            if isinstance(record, cr.GroupEpoch) and record.epoch > group.group_epoch:
                self.metrics.consumer_rebalances += 1
            if log.isEnabledFor(logging.DEBUG):
                _debug_consumer(record, getattr(record, "member_id", None) in group.members)
            self.events.consumer_record(group, record, leaving)
        group.replay(record)
        if leaving is not None:
            # After the replay: the network thread no longer finds the member, so it cannot
            # schedule the session timer again once it is cancelled.
            self.consumer.cancel_member_timers(leaving)

    def _forget(self, group: Group) -> None:
        if isinstance(group, ClassicGroup):
            self.rebalance.forget(group)
        elif isinstance(group, ConsumerGroup):
            group.detach()
            for member in group.members.values():
                self.consumer.cancel_member_timers(member)

    # ============================================================================ snapshot ===

    def snapshot_records(self) -> list[tuple[bytes, bytes]]:
        """The durable state as `__consumer_offsets` records: per group, offsets then metadata."""
        out = []
        for group_id, group in self.groups.items():
            out.extend(self.offsets.map.records(group_id))
            out.extend(group.stored_records())
        return out

    async def take_snapshot(self) -> int:
        """A snapshot made and written in a worker thread: the loop only takes the replay
        positions, then the offsets and copies of each group's containers (a big consumer
        group's records take seconds to make and encode). Positions first: the log after them
        rewrites whatever changes while the thread reads (stored_records_later)."""
        self.apply_core_moves()  # memory holds every move the positions leave out
        positions = self.writer.positions()
        sources = [
            (self.offsets.map.records(group_id), group.stored_records_later())
            for group_id, group in self.groups.items()
        ]

        def write() -> int:
            recs = []
            for offsets, stored in sources:
                recs.extend(offsets)
                recs.extend(stored())
            return snapshot.write(self.snapshot_path, positions, recs)

        return await trio.to_thread.run_sync(write)

    async def _snapshot_periodically(self) -> None:
        interval = self.settings["corral.coordinator.snapshot.interval.ms"] / 1000
        written_at = -1
        while True:
            await trio.sleep(interval)
            appends = self.writer.appends
            if appends == written_at:
                continue
            started = time.monotonic()
            try:
                size = await self.take_snapshot()
            except OSError as e:
                # The previous snapshot stays; tried again next interval.
                storage_warning(
                    "snapshot", "coordinator snapshot failed (retried in %gs): %s", interval, e
                )
                continue
            written_at = appends
            log.info(
                "coordinator snapshot: %d groups, %d bytes in %.3fs",
                len(self.groups),
                size,
                time.monotonic() - started,
            )

    # ================================================================================= load ===

    def load(self) -> dict[str, int]:
        """Rebuilds groups and offsets from the snapshot and the log after it, through `replay`;
        members get a fresh session to rejoin or heartbeat in. Returns counts."""
        saved = snapshot.read(self.snapshot_path)
        self._loading = True
        try:
            if saved is None:
                from_snapshot, from_log = 0, self._replay_all(self.writer.read())
            else:
                positions, snapshot_records = saved
                from_snapshot = self._replay_all(snapshot_records)
                from_log = self._replay_all(self.writer.read(positions))
        finally:
            self._loading = False
        for group in self.groups.values():
            if isinstance(group, ClassicGroup):
                for member in group.members.values():
                    self.rebalance.schedule_heartbeat(member)
            elif isinstance(group, ConsumerGroup):
                self.consumer.arm_loaded_timers(group)
        return {
            "groups": len(self.groups),
            "offsets": sum(self.offsets.map.count(g) for g in self.groups),
            "snapshot_records": from_snapshot,
            "log_records": from_log,
        }

    def _replay_all(self, pairs) -> int:
        count = 0
        for key, value in pairs:
            count += 1
            record = records.decode(key, value)
            if record is not None:
                self.replay(record)
        return count

    # ================================================================================ admin ===

    def list_groups(self, states: set[str] | None, types: set[str] | None) -> list[dict[str, Any]]:
        listed = []
        for group in self.groups.values():
            state = group.state_name
            if states and state.lower() not in states:
                continue
            if types and group.type not in types:
                continue
            listed.append(
                {
                    "group_id": group.group_id,
                    "protocol_type": group.protocol_type_name,
                    "group_state": state,
                    "group_type": group.type,
                }
            )
        return listed

    def describe_group(self, group_id: str) -> dict[str, Any]:
        group = self.groups.get(group_id)
        if group is None:
            return {
                "error_code": ErrorCode.NONE,
                "group_id": group_id,
                "group_state": "Dead",
                "protocol_type": "",
                "protocol_data": "",
                "members": [],
            }
        return group.describe_view()

    def delete_group(self, group_id: str) -> Later:
        """DeleteGroups for one group: resolves to its error once its tombstones are durable."""
        # The tombstones list the map's offsets: commits the network thread wrote come first.
        return self.writer.after_core_commits(group_id, lambda: self._delete_group(group_id))

    def _delete_group(self, group_id: str) -> Later:
        group = self.groups.get(group_id)
        error = ErrorCode.GROUP_ID_NOT_FOUND if group is None else group.validate_delete()
        if error:
            return Later.of(error)
        return self._remove_group(group, self.offsets.all_partitions(group_id))

    def _remove_group(self, group: Group, offsets: list[tuple[str, int]]) -> Later:
        """Writes the tombstones of `offsets` and of the group; the group refuses changes until
        they are durable, then `replay` removes it (or, if the write failed, it is back)."""
        group_id = group.group_id
        group.begin_delete()
        recs: list[Record] = [OffsetTombstones(group_id, offsets)] if offsets else []
        recs.extend(group.delete_records())
        written = self.writer.write(group_id, recs)

        def done(error: ErrorCode) -> ErrorCode:
            if error:
                group.abort_delete()
            else:
                log.info("group %s deleted with %d offsets", group_id, len(offsets))
                self.events.group_deleted(group_id, group.type)
            return error

        return written.map(done)

    # =============================================================================== expiry ===

    async def _refresh_regexes_periodically(self) -> None:
        """Kafka resolves a group's regexes again every group.consumer.regex.refresh.interval.ms
        (so that ACL changes reach them) at a heartbeat. Steady heartbeats do not reach Python
        here: a group that is due is sent to it, and its next heartbeat refreshes (see
        ConsumerGroups._update_regexes). Checked every 10 s, Kafka's least refresh interval."""
        while True:
            await trio.sleep(REGEX_REFRESH_CHECK_S)
            interval, now = self.settings["group.consumer.regex.refresh.interval.ms"], wall_ms()
            for i, group in enumerate(list(self.groups.values())):
                if i % 10_000 == 9_999:
                    await trio.sleep(0)  # a million groups do not hold the loop in one go
                if (
                    isinstance(group, ConsumerGroup)
                    and group.regexes
                    and not group.metadata_expired
                    and regex_refresh_due(group, now, interval)
                ):
                    group.metadata_expired = True

    async def _expire_offsets_periodically(self) -> None:
        interval = self.settings["offsets.retention.check.interval.ms"] / 1000
        while True:
            await trio.sleep(interval)
            self.offsets.expire(wall_ms()).then(_warn_if_failed)


def _debug_consumer(record: cr.ConsumerRecord, known_member: bool) -> None:
    """DEBUG: what a live consumer group record changes (`known_member`: its member was in the
    group already)."""
    member, epoch = getattr(record, "member_id", None), getattr(record, "epoch", None)
    if isinstance(record, cr.GroupEpoch):
        what = f"group epoch {epoch} (rebalance)"
    elif isinstance(record, cr.TargetEpoch):
        what = f"target assignment for epoch {epoch} computed"
    elif isinstance(record, cr.CurrentAssignment):
        what = f"member {member} at epoch {epoch} ({MemberState.of(record.state).name.lower()})"
    elif isinstance(record, cr.MemberMetadata):
        what = f"member {member} {'updated' if known_member else 'joined'}"
    elif isinstance(record, cr.ConsumerTombstone) and record.kind == cr.MEMBER_METADATA:
        member = record.name
        what = f"member {member} removed"
    else:
        return
    log.debug("group %s: %s", record.group_id, what, extra=fields(record.group_id, member, epoch))


def _warn_if_failed(error: ErrorCode) -> None:
    if error:
        log.warning(
            "writing the tombstones of expired offsets or groups failed (%s): they stay "
            "and expire at the next check",
            error.name,
        )
