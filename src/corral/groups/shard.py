"""A coordinator shard: the groups, committed offsets and deadlines of one `__consumer_offsets`
partition, as Kafka's GroupCoordinatorShard. It is built from explicit parts, each constructed
with what it uses (the shard's groups, the writer, timers, settings, topic image, assignors):

- `classic` (classic/protocol.py): classic requests to classic groups, their machine over time in
  `rebalance` (classic/rebalance.py);
- `consumer` (consumer/protocol.py): ConsumerGroupHeartbeat; its targets in `targets`
  (consumer/targets/computation.py), its write path in `writes` (consumer/writes.py);
- `classic_members` (consumer/classic_members.py): classic requests to consumer groups;
- `share` (share/protocol.py): ShareGroupHeartbeat to share groups (KIP-932);
- `offsets` (offsets.py): commit, fetch, delete and expiry over the process's offset map.

`registrations` holds each group type (group.py's Registration): the class of its groups, what
runs them when the shard loads or unloads and when a group leaves memory (`types`), and what
replays its records (classic/replay.py, consumer/replay.py).

`replay` applies one durable record to memory, live (once its write is durable) and at load,
through the one replayer of its record type (`replayers`: offsets.py's, or a group type's); a
shard loads from its snapshot and the tail of its partition after it (`load`), and `unload`
forgets everything it holds so that another load (here or, later, elsewhere) takes over. The
runtime (coordinator.py) routes requests to shards and runs the services they share.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from corral import _core
from corral.errors import ErrorCode
from corral.groups.classic import ClassicGroup
from corral.groups.classic.protocol import ClassicGroups
from corral.groups.classic.rebalance import ClassicRebalance
from corral.groups.classic.replay import ClassicReplay
from corral.groups.consumer import ConsumerGroup
from corral.groups.consumer.classic_members import ClassicMembers
from corral.groups.consumer.protocol import ConsumerGroups
from corral.groups.consumer.replay import ConsumerReplay
from corral.groups.consumer.targets.computation import TargetComputation
from corral.groups.consumer.writes import ConsumerWrites
from corral.groups.group import Group, GroupType, Registration, Replayer
from corral.groups.messages import DescribeGroupsResponseDescribedGroup, ListedGroup
from corral.groups.offsets import Offsets
from corral.groups.share import ShareGroup, ShareGroups
from corral.groups.share.replay import ShareReplay
from corral.groups.storage import records
from corral.groups.storage.records import (
    LogEntry,
    OffsetTombstones,
    Record,
)
from corral.groups.storage.txn_records import TxnMarker
from corral.later import Later

if TYPE_CHECKING:
    from corral.assignors import AssignorRegistry
    from corral.groups.consumer.migration import MigrationPolicy
    from corral.groups.consumer.targets.inputs import TopicImage
    from corral.groups.events import AnalyticsEvents
    from corral.groups.group import Groups
    from corral.groups.limits import GroupLimits
    from corral.groups.metrics import GroupMetrics
    from corral.groups.storage.writer import CoordinatorLog
    from corral.groups.timers import Timers

log = logging.getLogger("corral.groups")


class ShardState(enum.Enum):
    UNLOADED = "unloaded"  # requests answer NOT_COORDINATOR
    LOADING = "loading"  # requests answer COORDINATOR_LOAD_IN_PROGRESS
    LOADED = "loaded"


@dataclass
class SharedServices:
    """What every shard of a process uses in common (the runtime makes them once)."""

    settings: Any
    writer: CoordinatorLog
    timers: Timers
    topics: TopicImage
    assignors: AssignorRegistry
    migration: MigrationPolicy
    limits: GroupLimits
    events: AnalyticsEvents
    metrics: GroupMetrics
    offset_map: _core.OffsetMap
    consumer_heartbeat_view: _core.ConsumerHeartbeatView | None
    group_setting: Callable[[str, str], Any]
    apply_core_moves: Callable[[], None]
    # Whether this process may answer for a shard it has loaded (cluster mode: it holds the
    # shard's lease, renewed within the lease time; cluster/node.py).
    serves: Callable[[int], bool] = lambda _partition: True


class CoordinatorShard:
    def __init__(self, partition: int, shared: SharedServices):
        self.partition = partition
        # Born serving, empty; the runtime's `load` fills it from disk at startup.
        self.state = ShardState.LOADED
        self.shared = shared
        self.groups: Groups = {}
        self._loading = False
        # Groups loading: the network thread leaves them to Python until `start` (load_records).
        self._held: set[str] = set()
        # The log position its last snapshot was taken at (None: none taken by this process).
        self.snapshot_position: int | None = None
        s = shared
        self.writer = s.writer
        self.timers = s.timers
        self.events = s.events
        self.metrics = s.metrics
        self.consumer_heartbeat_view = s.consumer_heartbeat_view
        self.offsets = Offsets(
            s.settings,
            self.groups,
            s.writer,
            self._remove_group,
            s.metrics,
            s.offset_map,
            new_group=lambda group_id: self.rebalance.new_group(group_id),
        )
        self.rebalance = ClassicRebalance(
            self.groups, s.writer, s.timers, s.limits, s.events, s.metrics
        )
        self.writes = ConsumerWrites(
            self.groups, s.writer, self.replay, self.rebalance, s.events, s.apply_core_moves
        )
        self.targets = TargetComputation(
            self.groups, s.topics, s.assignors, s.metrics, s.group_setting, self.writes
        )
        self.consumer = ConsumerGroups(
            self.groups,
            self.writes,
            self.targets,
            self.rebalance,
            s.timers,
            s.settings,
            s.limits,
            s.topics,
            s.migration,
            s.events,
            s.group_setting,
        )
        self.classic_members = ClassicMembers(
            self.consumer,
            self.writes,
            self.targets,
            self.rebalance,
            self.groups,
            s.timers,
            s.limits,
            s.topics,
            s.migration,
            s.events,
        )
        self.classic = ClassicGroups(
            self.rebalance, self.classic_members, self.groups, s.timers, s.limits, s.events
        )
        self.share = ShareGroups(
            self.groups,
            s.writer,
            self.replay,
            s.timers,
            s.topics,
            s.group_setting,
            s.settings,
            s.metrics,
        )
        # The group types: the class of their groups, what runs them (when the shard loads or
        # unloads, when a group leaves memory) and what replays their records. A new group type
        # registers here.
        self.registrations = [
            Registration(
                ClassicGroup,
                runs=self.rebalance,
                replays=ClassicReplay(self.groups, self.rebalance, s.offset_map, self._forget),
            ),
            Registration(
                ConsumerGroup,
                runs=self.consumer,
                replays=ConsumerReplay(
                    self.groups,
                    self.consumer,
                    self.rebalance,
                    s.offset_map,
                    s.consumer_heartbeat_view,
                    self._assignment_interval_ms,
                    s.metrics,
                    s.events,
                    self._forget,
                ),
            ),
            Registration(
                ShareGroup,
                runs=self.share,
                replays=ShareReplay(self.groups, self.share, self._forget, self._share_deleted),
            ),
        ]
        self.types: dict[type[Group], GroupType[Any]] = {
            r.group_class: r.runs for r in self.registrations
        }
        # Each record type's one replayer: the offsets', the pending transactional offsets' and
        # the group types'.
        replayers: list[Replayer] = [self.offsets, self.offsets.pending]
        replayers.extend(r.replays for r in self.registrations)
        self.replayers: dict[type[Record], Callable[[Any, bool], None]] = {
            record_type: replayer.replay
            for replayer in replayers
            for record_type in replayer.record_types
        }

    def availability(self) -> ErrorCode:
        """NONE when the shard serves its groups, else the error Kafka answers meanwhile."""
        if self.state is ShardState.LOADED:
            return (
                ErrorCode.NONE if self.shared.serves(self.partition) else ErrorCode.NOT_COORDINATOR
            )
        if self.state is ShardState.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

    def _share_deleted(self, group: ShareGroup) -> None:
        """A deleted share group's share partitions forget their state (Kafka's
        DeleteShareGroupState)."""
        states = self.share.states
        if states is not None and group.initialized:
            states.delete(group.group_id, {t: p for t, (_, p) in group.initialized.items()})

    def _assignment_interval_ms(self, group_id: str) -> int:
        interval: int = self.shared.group_setting(group_id, "consumer.assignment.interval.ms")
        return interval

    # =============================================================================== replay ===

    def replay(self, record: Record) -> None:
        """Applies one durable record to memory: live once its write is fsynced, and at load.
        Each record type has one replayer (`replayers`); a type nobody replays changes nothing."""
        replay = self.replayers.get(type(record))
        if replay is not None:
            replay(record, self._loading)

    def _forget(self, group: Group) -> None:
        self.types[type(group)].forget(group)

    # ========================================================================= load, unload ===

    def load(self, pairs: Iterable[LogEntry]) -> int:
        """Replays `pairs` (a snapshot's records, then the log after it, whose transactional
        batches' records come with their facts) into the shard; returns how many were read.
        `start` arms the deadlines once all are in."""
        count = 0

        def decoded() -> Iterator[Record]:
            nonlocal count
            for entry in pairs:
                count += 1
                record = records.decode(*entry)
                if record is not None:
                    yield record

        self.load_records(decoded())
        return count

    def load_records(self, loaded: Iterable[Record]) -> None:
        self._loading = True
        held = self._held
        try:
            for record in loaded:
                if record.group_id not in held and not isinstance(record, TxnMarker):
                    # Before its first record: the network thread (which runs on while a shard
                    # loads in a running broker) must not commit for the group or move its
                    # members while older records are replayed over what it did.
                    held.add(record.group_id)
                    self.writer.hold_group(record.group_id)
                self.replay(record)
        finally:
            self._loading = False

    def start(self) -> None:
        """After loading: members get a fresh session to rejoin or heartbeat in (Kafka's
        onLoaded), members revoking partitions a fresh rebalance deadline; requests are served."""
        for group in self.groups.values():
            self.types[type(group)].on_loaded(group)
        self.state = ShardState.LOADED
        for group_id in self._held:
            self.writer.release_group(group_id)
        self._held.clear()

    def unload(self) -> int:
        """Forgets every group of the shard (Kafka's onUnloaded): parked JoinGroup and SyncGroup
        requests are answered NOT_COORDINATOR, deadlines cancelled, the network thread's views
        and the offset map emptied of the shard's groups. Returns how many groups went."""
        self.state = ShardState.UNLOADED
        gone = len(self.groups)
        for group_id, group in list(self.groups.items()):
            self.types[type(group)].on_unloaded(group)
            self.shared.offset_map.delete_group(group_id)
        self.groups.clear()
        self.offsets.pending.clear()
        return gone

    # ============================================================================ snapshot ===

    def replay_start(self, log_position: int) -> int:
        """Where replay must start for a snapshot taken now: never past an open transaction's
        first record, whose pending offsets snapshots do not hold (txn_offsets.py)."""
        first_open = self.offsets.pending.first_open_offset()
        return log_position if first_open is None else min(log_position, first_open)

    def snapshot_sources(
        self,
    ) -> list[tuple[list[tuple[bytes, bytes]], Callable[[], list[tuple[bytes, bytes]]]]]:
        """Per group, its offsets as records now and a function making its metadata records
        (in a worker thread: see GroupCoordinator.take_snapshot)."""
        return [
            (self.offsets.map.records(group_id), group.stored_records_later())
            for group_id, group in self.groups.items()
        ]

    def snapshot_records(self) -> list[tuple[bytes, bytes]]:
        """The durable state as `__consumer_offsets` records: per group, offsets then metadata."""
        out = []
        for group_id, group in self.groups.items():
            out.extend(self.offsets.map.records(group_id))
            out.extend(group.stored_records())
        return out

    # ================================================================================ admin ===

    def list_groups(self, states: set[str] | None, types: set[str] | None) -> list[ListedGroup]:
        listed: list[ListedGroup] = []
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

    def describe_group(self, group_id: str) -> DescribeGroupsResponseDescribedGroup:
        """DescribeGroups' entry as v6 answers it: a group that is not there, or not a classic
        group, is GROUP_ID_NOT_FOUND in state Dead (older versions show it Dead, no error)."""
        group = self.groups.get(group_id)
        if isinstance(group, ClassicGroup):
            return group.describe_view()
        return {
            "error_code": ErrorCode.GROUP_ID_NOT_FOUND,
            "error_message": f"Group {group_id} not found."
            if group is None
            else f"Group {group_id} is not a classic group.",
            "group_id": group_id,
            "group_state": "Dead",
            "protocol_type": "",
            "protocol_data": "",
            "members": [],
        }

    def delete_group(self, group_id: str) -> Later:
        """DeleteGroups for one group: resolves to its error once its tombstones are durable."""
        # The tombstones list the map's offsets: commits the network thread wrote come first.
        return self.writer.after_core_commits(group_id, lambda: self._delete_group(group_id))

    def _delete_group(self, group_id: str) -> Later:
        group = self.groups.get(group_id)
        if group is None:
            return Later.of(ErrorCode.GROUP_ID_NOT_FOUND)
        error = group.validate_delete()
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
