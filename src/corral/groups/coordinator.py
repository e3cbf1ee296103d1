"""The group coordinator's runtime, as Kafka's CoordinatorRuntime with GroupCoordinatorService in
front: every group of the broker lives in the coordinator shard (shard.py) of its
`__consumer_offsets` partition; the runtime routes each request to that shard, answers
NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS while the shard is not loaded (clients find the
coordinator again and retry), runs the services the shards share (timers, the log's writer, offset
expiry, snapshots, regex refreshes) in one nursery, and loads and unloads shards while the broker
runs (`unload_shard`, `load_shard`). By default one process holds every shard.

Writes go through the writer (storage/writer.py): appended, group-committed fsync, then `replay`
of the record in its shard, then the answer. A shard's durable state is its snapshot
(`<snapshot path stem>-<partition>.snapshot`, storage/snapshot.py) and its partition's log after
it. handlers/ is the wire (decode requests, shape answers per version).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from corral import _core
from corral.assignors import AssignorRegistry
from corral.clock import wall_ms
from corral.config.groups import GROUP_SETTINGS, broker_default
from corral.errors import ErrorCode
from corral.groups.classic import JoinRequest, join_error, sync_error
from corral.groups.consumer import ConsumerGroup, HeartbeatRequest, TopicImage
from corral.groups.consumer.answer import error_answer
from corral.groups.consumer.members import regex_refresh_due
from corral.groups.consumer.migration import MigrationPolicy
from corral.groups.consumer.writes import apply_core_moves
from corral.groups.events import AnalyticsEvents
from corral.groups.group import Group
from corral.groups.limits import GroupLimits
from corral.groups.messages import DescribeGroupsResponseDescribedGroup, ListedGroup
from corral.groups.metrics import GroupMetrics
from corral.groups.offsets_view import OffsetsView
from corral.groups.shard import CoordinatorShard, ShardState, SharedServices
from corral.groups.share import ShareGroup, ShareHeartbeat
from corral.groups.share.protocol import ShareStates
from corral.groups.share.protocol import error_answer as share_error_answer
from corral.groups.storage import records, snapshot
from corral.groups.storage.records import LogEntry, Record
from corral.groups.storage.txn_records import TxnMarker
from corral.groups.storage.writer import CoordinatorLog
from corral.groups.timers import Timers
from corral.later import Later
from corral.partitions.store import storage_warning

if TYPE_CHECKING:
    from corral.config.dynamic import DynamicConfigs
    from corral.config.settings import Settings
    from corral.topics.registry import TopicStore

log = logging.getLogger("corral.groups")
# How often groups are checked for a periodic regex refresh (Kafka refreshes at most this often).
REGEX_REFRESH_CHECK_S = 10.0


class GroupsView(Mapping[str, Group]):
    """Every group of the loaded shards by id: a lookup goes to the group's own shard."""

    def __init__(self, coordinator: GroupCoordinator):
        self._coordinator = coordinator

    def __getitem__(self, group_id: str) -> Group:
        return self._coordinator.shard_of(group_id).groups[group_id]

    def get(self, group_id: str, default: Any = None) -> Any:
        return self._coordinator.shard_of(group_id).groups.get(group_id, default)

    def __contains__(self, group_id: object) -> bool:
        return isinstance(group_id, str) and group_id in self._coordinator.shard_of(group_id).groups

    def __iter__(self) -> Iterator[str]:
        for shard in self._coordinator.shards:
            yield from shard.groups

    def __len__(self) -> int:
        return sum(len(shard.groups) for shard in self._coordinator.shards)


class GroupCoordinator:
    def __init__(
        self,
        settings: Settings,
        writer: CoordinatorLog,
        snapshot_path: Path,
        topics: TopicStore | None = None,
    ):
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
        # The snapshot of every partition before shards (read once, then replaced by theirs).
        self.snapshot_path = snapshot_path
        self._legacy_snapshot = False
        self.limits = GroupLimits.of(settings)
        self.metrics = GroupMetrics()
        self.events = AnalyticsEvents(self.topics)  # for __corral_analytics (analytics_topic.py)
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
        self.group_configs: DynamicConfigs | None = None
        self.groups = GroupsView(self)
        offset_map = _core.OffsetMap()
        self.shared = SharedServices(
            settings=settings,
            writer=writer,
            timers=self.timers,
            topics=self.topics,
            assignors=self.assignors,
            migration=self.migration,
            limits=self.limits,
            events=self.events,
            metrics=self.metrics,
            offset_map=offset_map,
            consumer_heartbeat_view=self.consumer_heartbeat_view,
            group_setting=self.group_setting,
            apply_core_moves=self.apply_core_moves,
        )
        self.shards = [CoordinatorShard(p, self.shared) for p in range(writer.partitions)]
        self.offsets = OffsetsView(self, offset_map, settings)
        self._authorize_regexes = False
        # Called with (partition, replay position) after each shard snapshot is written.
        self.on_snapshot: list[Callable[[int, int], None]] = []

    def shard_of(self, group_id: str) -> CoordinatorShard:
        return self.shards[self.writer.partition_of(group_id)]

    def loaded_shards(self) -> list[CoordinatorShard]:
        return [s for s in self.shards if s.state is ShardState.LOADED]

    # ============================================================================ requests ===

    def join(self, req: JoinRequest) -> Later:
        shard = self.shard_of(req.group_id)
        error = shard.availability()
        if error:
            return Later.of(join_error(error, req.member_id))
        return shard.classic.join(req)

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
        shard = self.shard_of(group_id)
        error = shard.availability()
        if error:
            return Later.of(sync_error(error))
        return shard.classic.sync(
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
        shard = self.shard_of(group_id)
        return shard.availability() or shard.classic.heartbeat(
            group_id, member_id, instance_id, generation_id
        )

    def leave(self, group_id: str, leaving: list[tuple[str, str | None]]) -> Later:
        """Resolves to (group error, member errors) once what the leave wrote is durable."""
        shard = self.shard_of(group_id)
        error = shard.availability()
        if error:
            return Later.of((error, []))
        return shard.classic.leave(group_id, leaving)

    def consumer_heartbeat(self, req: HeartbeatRequest) -> Later:
        shard = self.shard_of(req.group_id)
        error = shard.availability()
        if error:
            return Later.of(error_answer(error))
        if isinstance(shard.groups.get(req.group_id), ShareGroup):
            return Later.of(
                error_answer(
                    ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group."
                )
            )
        return shard.consumer.heartbeat(req)

    def share_heartbeat(self, req: ShareHeartbeat) -> Later:
        shard = self.shard_of(req.group_id)
        error = shard.availability()
        if error:
            return Later.of(share_error_answer(error))
        return shard.share.heartbeat(req)

    @property
    def share_states(self) -> ShareStates | None:
        return self.shards[0].share.states

    @share_states.setter
    def share_states(self, states: ShareStates | None) -> None:
        # The share partitions' state, which share groups initialize and delete (shares/).
        for shard in self.shards:
            shard.share.states = states

    def list_groups(self, states: set[str] | None, types: set[str] | None) -> list[ListedGroup]:
        return [g for s in self.loaded_shards() for g in s.list_groups(states, types)]

    def describe_group(self, group_id: str) -> DescribeGroupsResponseDescribedGroup:
        shard = self.shard_of(group_id)
        error = shard.availability()
        if error:
            return {
                "error_code": error,
                "group_id": group_id,
                "group_state": "",
                "protocol_type": "",
                "protocol_data": "",
                "members": [],
            }
        return shard.describe_group(group_id)

    def delete_group(self, group_id: str) -> Later:
        shard = self.shard_of(group_id)
        error = shard.availability()
        return Later.of(error) if error else shard.delete_group(group_id)

    def on_topics_changed(self, names: set[str]) -> None:
        """Topics were created or deleted: every shard's consumer groups look again."""
        self.topics.version += 1
        for shard in self.loaded_shards():
            shard.consumer.on_topics_changed(names)
            shard.share.on_topics_changed(names)

    def apply_core_moves(self) -> None:
        apply_core_moves(self.writer, self.groups, self.events)

    @property
    def authorize_regexes(self) -> bool:
        return self._authorize_regexes

    @authorize_regexes.setter
    def authorize_regexes(self, on: bool) -> None:
        # An authorizer is on: regexes resolve with a heartbeat's context.
        self._authorize_regexes = on
        for shard in self.shards:
            shard.consumer.authorize_regexes = on

    # ============================================================================ settings ===

    def group_setting(self, group_id: str, name: str) -> Any:
        """A group's setting (config/groups.py): its own value, else its broker synonym's,
        else (share.auto.offset.reset...) the setting's default."""
        if self.group_configs is None:
            return broker_default(GROUP_SETTINGS[name], self.settings)
        return self.group_configs.group_setting(group_id, name)

    def _view_rule(self, _names: set[str] | None = None) -> None:
        """The network thread's heartbeat intervals follow answer.py's rule with these."""
        s = self.settings
        assert self.consumer_heartbeat_view is not None, "set only when there is a view"
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

    # ============================================================================ services ===

    async def run(self) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for shard in self.shards:
                    shard.targets.nursery = nursery  # offloaded target assignments run in it
                nursery.start_soon(self.timers.run)
                nursery.start_soon(self.writer.run)
                nursery.start_soon(self._expire_offsets_periodically)
                nursery.start_soon(self._snapshot_periodically)
                nursery.start_soon(self._refresh_regexes_periodically)
        finally:
            # A clean shutdown leaves fresh snapshots: the next start replays (almost) nothing.
            try:
                self.apply_core_moves()
                positions = self.writer.positions()
                for shard in self.loaded_shards():
                    snapshot.write(
                        self._snapshot_of(shard),
                        {shard.partition: shard.replay_start(positions.get(shard.partition, 0))},
                        shard.snapshot_records(),
                    )
                self._drop_legacy_snapshot()
            except OSError as e:
                # Disk full, say: the previous snapshot stays, the next start replays more log.
                log.warning("coordinator snapshot at shutdown failed: %s", e)
            except Exception:
                log.exception("coordinator snapshot at shutdown failed")

    def replay(self, record: Record) -> None:
        """Applies one durable record in its group's shard (a marker: its partition's shard;
        dropped while the shard is unloaded: its load reads it from the log)."""
        if isinstance(record, TxnMarker):
            shard = self.shards[record.partition]
        else:
            shard = self.shard_of(record.group_id)
        if shard.state is not ShardState.UNLOADED:
            shard.replay(record)

    def replay_all(self, pairs: Iterable[LogEntry]) -> int:
        """Replays `__consumer_offsets` (key, value) pairs as live records; returns the count."""
        count = 0
        for entry in pairs:
            count += 1
            record = records.decode(*entry)
            if record is not None:
                self.replay(record)
        return count

    def complete_transaction(
        self,
        offsets_partition: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
    ) -> Later:
        """Ends a producer's transaction in one `__consumer_offsets` partition (Kafka's
        GroupCoordinatorService.completeTransaction): appends its marker; once durable, COMMIT
        makes the producer's pending offsets there committed, ABORT drops them. Resolves to
        NONE, the shard's availability error, the log's refusal of the marker (fenced
        epochs) or NOT_COORDINATOR when the write failed (a task awaits it with later.wait)."""
        if not 0 <= offsets_partition < len(self.shards):
            return Later.of(ErrorCode.NOT_COORDINATOR)
        error = self.shards[offsets_partition].availability()
        if error:
            return Later.of(error)
        marker = TxnMarker(
            offsets_partition, producer_id, producer_epoch, commit, coordinator_epoch
        )
        return self.writer.write_marker(marker)

    def snapshot_records(self) -> list[tuple[bytes, bytes]]:
        """Every loaded shard's state as `__consumer_offsets` records."""
        return [r for shard in self.loaded_shards() for r in shard.snapshot_records()]

    def _snapshot_of(self, shard: CoordinatorShard) -> Path:
        return self.snapshot_file(shard.partition)

    def snapshot_file(self, partition: int) -> Path:
        """The snapshot file of the shard of `partition`."""
        path = self.snapshot_path
        return path.with_name(f"{path.stem}-{partition}{path.suffix}")

    async def take_snapshot(self, only_changed: bool = False) -> int:
        """Snapshots of the loaded shards (with `only_changed`, of those whose partition moved
        since their last one), made and written in a worker thread: the loop only takes the
        replay positions, then the offsets and copies of each group's containers (a big
        consumer group's records take seconds to make and encode). Positions first: the log
        after them rewrites whatever changes while the thread reads (stored_records_later)."""
        self.apply_core_moves()  # memory holds every move the positions leave out
        positions = self.writer.positions()
        jobs = []
        for shard in self.loaded_shards():
            position = shard.replay_start(positions.get(shard.partition, 0))
            if only_changed and not self._legacy_snapshot and shard.snapshot_position == position:
                continue
            jobs.append((shard, position, self._snapshot_of(shard), shard.snapshot_sources()))

        def write() -> int:
            size = 0
            for shard, position, path, sources in jobs:
                recs: list[tuple[bytes, bytes]] = []
                for offsets, stored in sources:
                    recs.extend(offsets)
                    recs.extend(stored())
                size += snapshot.write(path, {shard.partition: position}, recs)
            return size

        size: int = await trio.to_thread.run_sync(write)
        for shard, position, _, _ in jobs:
            shard.snapshot_position = position
            for listener in self.on_snapshot:
                listener(shard.partition, position)
        if len(jobs) == len(self.shards):
            self._drop_legacy_snapshot()
        return size

    def _drop_legacy_snapshot(self) -> None:
        if self._legacy_snapshot and all(s.state is ShardState.LOADED for s in self.shards):
            self.snapshot_path.unlink(missing_ok=True)
            self._legacy_snapshot = False

    async def _snapshot_periodically(self) -> None:
        interval = self.settings["corral.coordinator.snapshot.interval.ms"] / 1000
        while True:
            await trio.sleep(interval)
            started = time.monotonic()
            try:
                size = await self.take_snapshot(only_changed=True)
            except OSError as e:
                # The previous snapshots stay; tried again next interval.
                storage_warning(
                    "snapshot", "coordinator snapshot failed (retried in %gs): %s", interval, e
                )
                continue
            if size:
                log.info(
                    "coordinator snapshot: %d groups, %d bytes in %.3fs",
                    len(self.groups),
                    size,
                    time.monotonic() - started,
                )

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

    # ======================================================================== load, unload ===

    def start_unloaded(self) -> None:
        """Starts with no shard loaded (cluster mode: a shard is loaded once its lease is
        taken; cluster/node.py)."""
        for shard in self.shards:
            shard.state = ShardState.UNLOADED

    def load(self) -> dict[str, int]:
        """Loads every shard: from its snapshot (or the single snapshot of a data dir written
        before shards) and its partition's log after it, through `replay`. Returns counts."""
        legacy = snapshot.read(self.snapshot_path)
        from_snapshot = from_log = 0
        positions: dict[int, int] = {}
        if legacy is not None:
            self._legacy_snapshot = True
            positions, pairs = legacy
            by_shard: dict[int, list[Record]] = {}
            for key, value in pairs:
                from_snapshot += 1
                record = records.decode(key, value)
                if record is not None:
                    by_shard.setdefault(self.writer.partition_of(record.group_id), []).append(
                        record
                    )
        for shard in self.shards:
            shard.state = ShardState.LOADING
            if legacy is not None:
                shard.load_records(by_shard.get(shard.partition, ()))
            else:
                saved = snapshot.read(self._snapshot_of(shard))
                if saved is not None:
                    shard_positions, pairs = saved
                    positions.update(shard_positions)
                    from_snapshot += shard.load(pairs)
            from_log += shard.load(self.writer.read(positions, shard.partition))
            shard.start()
        return {
            "groups": len(self.groups),
            "offsets": sum(self.offsets.map.count(g) for g in self.groups),
            "snapshot_records": from_snapshot,
            "log_records": from_log,
        }

    async def unload_shard(self, partition: int) -> int:
        """Unloads one shard while the broker runs (its groups answer NOT_COORDINATOR from now
        on); returns once its writes in flight are durable. Returns how many groups went."""
        shard = self.shards[partition]
        if shard.state is not ShardState.LOADED:
            return 0
        self.apply_core_moves()
        gone = shard.unload()
        await self._until_settled(partition)
        log.info("unloaded coordinator shard %d (%d groups)", partition, gone)
        return gone

    async def load_shard(self, partition: int) -> int:
        """Loads an unloaded shard from its snapshot and its partition's log (its groups answer
        COORDINATOR_LOAD_IN_PROGRESS meanwhile); returns how many groups it holds."""
        shard = self.shards[partition]
        if shard.state is not ShardState.UNLOADED:
            return len(shard.groups)
        shard.state = ShardState.LOADING
        started = time.monotonic()
        await self._until_settled(partition)  # no write of the partition replays after the read
        saved = snapshot.read(self._snapshot_of(shard))
        positions: dict[int, int] = {}
        if saved is not None:
            positions, pairs = saved
            shard.load(pairs)
        shard.load(self.writer.read(positions, partition))
        shard.start()
        log.info(
            "loaded coordinator shard %d: %d groups in %.3fs",
            partition,
            len(shard.groups),
            time.monotonic() - started,
        )
        return len(shard.groups)

    async def _until_settled(self, partition: int) -> None:
        """Until no write to `partition` (Python's or the network thread's) awaits its fsync."""
        while self.writer.pending_in(partition):
            await trio.sleep(0.005)


def _warn_if_failed(error: ErrorCode) -> None:
    if error:
        log.warning(
            "writing the tombstones of expired offsets or groups failed (%s): they stay "
            "and expire at the next check",
            error.name,
        )
