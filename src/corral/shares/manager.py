"""The share partitions of this broker (Kafka's SharePartitionManager): each group's view of each
topic partition it reads, created on first fetch from `__share_group_state` (state_log.py), their
share sessions (sessions.py), acknowledgements, acquisitions and acquisition locks.

Acquisition reads whole batches from the log store and hands the available records in them to
the fetching member (`batch_optimized`: whole batches up to MaxRecords, or at most MaxRecords
in `record_limit` mode). Acknowledgements, releases and lock expiries change the window in the
compiled core, then are written to `__share_group_state` and answered once durable. A fetch that
found nothing waits (up to MaxWaitMs) for new data or for records to come back (released, expired).

It is also the group coordinator's `ShareStates`: share groups initialize and delete share
partitions' state through it.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

import trio

from corral import _core
from corral.clock import wall_ms
from corral.config.shares.group_settings import reset_duration_ms
from corral.errors import ErrorCode
from corral.later import Later, first_error
from corral.partitions.store import StorageError
from corral.shares.partition import SharePartition
from corral.shares.pruning import StatePruner
from corral.shares.sessions import ShareSession, ShareSessions
from corral.shares.state_log import ShareStateLog, StateKey, StoredState

if TYPE_CHECKING:
    from corral.broker import Broker
    from corral.topics.registry import Topic

log = logging.getLogger("corral.shares")

NOT_HOSTED = "This server does not host this topic-partition."
RENEW_OFF = "Renewing acquisition locks is not enabled for the group."
# Acknowledge types.
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
RECORD_LIMIT_MODE = 1
# The least a share fetch reads of a partition at once.
READ_MIN_BYTES = 16 << 10


class ShareMetrics:
    """Kafka's ShareGroupMetrics and SharePartitionMetrics counters, read by /metrics
    (observability/metrics.py); gauges (in-flight records, sessions) are read off the partitions
    at scrape time."""

    def __init__(self) -> None:
        # RecordAcknowledgementsPerSec by ack type (Accept, Release, Reject; Gap counted as
        # Reject, as Kafka archives both).
        self.acknowledgements = {"accept": 0, "release": 0, "reject": 0}
        # AcquisitionLockTimeoutPerSec: records whose lock expired.
        self.lock_timeouts = 0

    def acknowledged(self, batches: list[tuple[int, int, list[int]]]) -> None:
        names = {ACCEPT: "accept", RELEASE: "release", REJECT: "reject", GAP: "reject"}
        for first, last, types in batches:
            if len(types) == 1:
                name = names.get(types[0])
                if name is not None:
                    self.acknowledgements[name] += last - first + 1
            else:
                for kind in types:
                    name = names.get(kind)
                    if name is not None:
                        self.acknowledgements[name] += 1


class AcquiredPartition:
    """What one fetch acquired from one share partition: the record bytes and the runs."""

    __slots__ = ("data", "acquired")

    def __init__(self, data: bytes, acquired: list[tuple[int, int, int]]):
        self.data = data
        self.acquired = acquired


class SharePartitions:
    def __init__(self, broker: Broker):
        self.broker = broker
        self.settings = broker.settings
        self.log = ShareStateLog(broker)
        # What `__share_group_state` held at start, for share partitions not yet fetched from.
        self.stored: dict[StateKey, StoredState] = {}
        self.partitions: dict[StateKey, SharePartition] = {}
        self.sessions = ShareSessions(self.settings["group.share.max.share.sessions"])
        # Share partitions holding acquired records (their locks may expire).
        self.locked: set[SharePartition] = set()
        # Set when records may have come back (released, expired): waiting fetches look again.
        self._changed = trio.Event()
        self._expiry_soon = trio.Event()
        self.loaded = False
        self.metrics = ShareMetrics()
        broker.sessions.on_closed.append(self.connection_closed)

    # ================================================================== lifetime ===

    async def run(self) -> None:
        """Loads the state, then expires acquisition locks for the broker's lifetime."""
        self.stored = self.log.load()
        self.loaded = True
        if self.stored:
            log.info("loaded the state of %d share partitions", len(self.stored))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(StatePruner(self).run)
            await self._expire_locks()

    async def _expire_locks(self) -> None:
        while True:
            now = _core.monotonic_ms()
            soonest = min((p.window.next_deadline_ms for p in self.locked), default=None)
            if soonest is not None and soonest <= now:
                self._expire(now)
                continue
            # No lock held: sleep until an acquisition sets `_expiry_soon` (an idle broker
            # does not wake for share groups).
            wait_s = math.inf if soonest is None else min((soonest - now) / 1000, 1.0)
            self._expiry_soon = trio.Event()
            with trio.move_on_after(max(wait_s, 0.001)):
                await self._expiry_soon.wait()

    def _expire(self, now: int) -> None:
        for sp in list(self.locked):
            if sp.window.next_deadline_ms > now:
                continue
            changed = sp.window.expire(now, self._limit(sp.key[0]))
            self.metrics.lock_timeouts += sum(b[1] - b[0] + 1 for b in changed)
            if changed:
                sp.persist(changed, self.snapshot_every())  # Kafka ignores a failed write
            if sp.window.acquired == 0:
                self.locked.discard(sp)
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for_change(self, keys: list[tuple[Topic, int]], timeout_s: float) -> None:
        """Returns when new data reaches one of `keys` or records come back, or on timeout."""
        changed = self._changed
        async with trio.open_nursery() as nursery:

            async def on_change() -> None:
                await changed.wait()
                nursery.cancel_scope.cancel()

            async def on_data() -> None:
                await self.broker.logs.wait_for_data([(t.name, p) for t, p in keys], timeout_s)
                nursery.cancel_scope.cancel()

            nursery.start_soon(on_change)
            nursery.start_soon(on_data)

    # ================================================================ ShareStates ===

    def initialize(
        self, group_id: str, topics: dict[bytes, tuple[int, ...]], start_offset: int
    ) -> Later:
        """The first state of each share partition: a ShareSnapshot at `start_offset` (-1:
        share.auto.offset.reset decides at first fetch)."""
        writes = []
        for topic_id, parts in topics.items():
            for index in parts:
                key = (group_id, topic_id, index)
                if key in self.partitions or key in self.stored:
                    continue
                stored = self.stored[key] = StoredState(start_offset=start_offset)
                writes.append(self.log.write(key, [self.log.snapshot_record(key, stored, -1)]))
        return first_error(writes)

    def reset(self, group_id: str, topic_id: bytes, index: int, start_offset: int) -> Later:
        """AlterShareGroupOffsets: the share partition starts over at `start_offset`."""
        key = (group_id, topic_id, index)
        self.partitions.pop(key, None)
        previous = self.stored.get(key)
        stored = self.stored[key] = StoredState(
            state_epoch=(previous.state_epoch + 1) if previous else 0, start_offset=start_offset
        )
        return self.log.write(key, [self.log.snapshot_record(key, stored, -1)])

    def delete(self, group_id: str, topics: dict[bytes, tuple[int, ...]]) -> Later:
        writes = []
        for topic_id, parts in topics.items():
            for index in parts:
                key = (group_id, topic_id, index)
                sp = self.partitions.pop(key, None)
                if sp is not None:
                    self.locked.discard(sp)
                self.stored.pop(key, None)
                writes.append(self.log.write(key, [self.log.tombstone(key)]))
        return first_error(writes)

    def describe(self, group_id: str, topic_id: bytes, index: int) -> tuple[int, int]:
        """(start offset, delivery complete count) of a share partition; (-1, -1) without state."""
        key = (group_id, topic_id, index)
        sp = self.partitions.get(key)
        if sp is not None:
            return sp.summary
        stored = self.stored.get(key)
        if stored is None or stored.start_offset < 0:
            return -1, -1
        done = sum(b[1] - b[0] + 1 for b in stored.batches if b[2] in (2, 4))
        return stored.start_offset, done

    # ============================================================== partitions ===

    def _setting(self, group_id: str, name: str) -> Any:
        return self.broker.groups.group_setting(group_id, name)

    def _limit(self, group_id: str) -> int:
        limit: int = self._setting(group_id, "share.delivery.count.limit")
        return limit

    def snapshot_every(self) -> int:
        every: int = self.settings["share.coordinator.snapshot.update.records.per.snapshot"]
        return every

    def partition(self, group_id: str, topic: Topic, index: int) -> SharePartition | None:
        """The share partition, made from its stored state on first use; None when its group
        never initialized it (Kafka refuses to read it)."""
        key = (group_id, topic.id.bytes, index)
        sp = self.partitions.get(key)
        if sp is not None:
            return sp
        stored = self.stored.pop(key, None)
        if stored is None:
            return None
        log_start, high = self.broker.logs.offsets(topic, index)
        start = stored.start_offset
        if start < 0:
            start = self._reset_offset(group_id, topic, index, log_start, high)
        start = max(start, log_start)
        sp = self.partitions[key] = SharePartition(key, stored, start, self.log)
        if sp.unresolved:
            sp.persist([], self.snapshot_every(), force=True)  # the chosen start, kept
        return sp

    def _reset_offset(
        self, group_id: str, topic: Topic, index: int, log_start: int, high: int
    ) -> int:
        """share.auto.offset.reset: latest (default), earliest or by_duration:<ISO 8601>."""
        reset = str(self._setting(group_id, "share.auto.offset.reset"))
        if reset == "earliest":
            return log_start
        ago = reset_duration_ms(reset)
        if ago is not None:
            found = self.broker.logs.offset_for_timestamp(topic, index, wall_ms() - ago)
            return high if found is None else found[0]
        return high

    # ================================================================ sessions ===

    def connection_closed(self, connection: int) -> None:
        for session in self.sessions.of_connection(connection):
            self.end_session(session)

    def end_session(self, session: ShareSession) -> None:
        """The member's acquired records in the session's partitions come back (Kafka's
        release on session close)."""
        self.sessions.close(session)
        group_id = session.group_id
        limit = self._limit(group_id) if session.partitions else 0
        for topic_id, index in session.partitions:
            sp = self.partitions.get((group_id, topic_id, index))
            owner = None if sp is None else sp.known_owner(session.member_id)
            if sp is None or owner is None or sp.window.acquired == 0:
                continue
            changed = sp.window.release_owner(owner, limit)
            if changed:
                sp.persist(changed, self.snapshot_every())
        self._wake()

    # ========================================================== acknowledgements ===

    def acknowledge(
        self,
        group_id: str,
        member_id: str,
        topic: Topic,
        index: int,
        batches: list[tuple[int, int, list[int]]],
    ) -> Later:
        """One partition's acknowledgements, all or nothing: resolves to (ErrorCode, Kafka's
        message) once the change is durable (or at once for a refusal)."""
        sp = self.partitions.get((group_id, topic.id.bytes, index))
        if sp is None:
            return Later.of((ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, NOT_HOSTED))
        renews = any(RENEW in types for _, _, types in batches)
        if renews and not self._setting(group_id, "share.renew.acknowledge.enable"):
            return Later.of((ErrorCode.INVALID_RECORD_STATE, RENEW_OFF))
        renew_ms = _core.monotonic_ms() + self._setting(group_id, "share.record.lock.duration.ms")
        # A member that never acquired here owns nothing (owner 0 is nobody's).
        owner = sp.known_owner(member_id) or 0
        window = sp.window
        start = window.start
        code, message, changed = window.acknowledge(owner, batches, self._limit(group_id), renew_ms)
        if code:
            return Later.of((ErrorCode(code), message))
        self.metrics.acknowledged(batches)
        if window.acquired == 0:
            self.locked.discard(sp)
        if any(b[2] == 0 for b in changed):  # released: a waiting fetch may take them
            self._wake()
        # As Kafka, the update carries the start from before the acknowledgement moved it, and
        # the records finished from there.
        done = window.start - start + window.delivery_complete_count
        written = sp.persist(changed, self.snapshot_every(), start=start, done=done)
        return written.map(lambda error: (error, None))

    # ================================================================== fetching ===

    def acquire(
        self,
        group_id: str,
        member_id: str,
        topic: Topic,
        index: int,
        budget: int,
        max_bytes: int,
        mode: int,
        batch_size: int = 0,
    ) -> AcquiredPartition | ErrorCode | None:
        """Acquires for the member what the partition has available, at most `budget` records
        (whole batches in batch_optimized mode). None when nothing was acquired;
        UNKNOWN_SERVER_ERROR for a share partition its group never initialized."""
        sp = self.partition(group_id, topic, index)
        if sp is None:
            return ErrorCode.UNKNOWN_SERVER_ERROR
        window = sp.window
        logs = self.broker.logs
        log_start, high = logs.offsets(topic, index)
        committed = self._setting(group_id, "share.isolation.level") == "read_committed"
        if committed:
            high = logs.stable_offset(topic, index)
        if window.start < log_start:
            window.move_start(log_start)  # the log start passed the window
        offset = window.next_fetch_offset()
        if offset >= high:
            return None
        # Read about what the budget needs (the partition's bytes per record so far, a batch at
        # least): a share fetch takes MaxRecords, and reading MaxBytes of a deep backlog to
        # keep a few hundred records copies megabytes per fetch.
        wanted = min(max_bytes, max(READ_MIN_BYTES, int(budget * sp.bytes_per_record * 1.25)))
        try:
            data = logs.read(topic, index, offset, wanted, True).data
        except StorageError:
            return None
        if not data:
            return None
        bounds = _core.batch_bounds(data)
        if not bounds:
            return None
        sp.bytes_per_record = max(len(data) / max(bounds[-1][1] - bounds[0][0] + 1, 1), 1.0)
        last = min(bounds[-1][1], high - 1)
        take = budget
        if mode != RECORD_LIMIT_MODE:
            # Whole batches: up to the end of the batch holding the budget's last record.
            for _, batch_last, *_ in bounds:
                if batch_last - offset + 1 >= budget:
                    last = min(batch_last, last)
                    break
            take = max(last - offset + 1, 0)
        lock_ms = self._setting(group_id, "share.record.lock.duration.ms")
        limit = self._limit(group_id)
        acquired = window.acquire(
            sp.owner(member_id),
            offset,
            last,
            take,
            self._setting(group_id, "share.partition.max.record.locks"),
            _core.monotonic_ms() + lock_ms,
            max(2, math.ceil(limit / 2)),
        )
        if committed and acquired:
            aborted = logs.aborted_transactions(topic, index, offset, acquired[-1][1] + 1)
            if aborted:
                acquired = self._archive_aborted(sp, member_id, acquired, bounds, aborted, limit)
        if not acquired:
            return None
        self.locked.add(sp)
        self._expiry_soon.set()
        end_offset = acquired[-1][1]
        end = next(
            (pos for _, batch_last, pos, *_ in bounds if batch_last >= end_offset), len(data)
        )
        if batch_size > 0:
            acquired = split_at_batches(acquired, bounds, batch_size)
        return AcquiredPartition(data[:end], acquired)

    def _archive_aborted(
        self,
        sp: SharePartition,
        member_id: str,
        acquired: list[tuple[int, int, int]],
        bounds: list[tuple[int, int, int, int, int]],
        aborted: list[tuple[int, int]],
        limit: int,
    ) -> list[tuple[int, int, int]]:
        """read_committed: the acquired records of aborted transactions are archived at once
        (Kafka's filterAbortedTransactionalAcquiredRecords); what is left is delivered."""
        dropped = aborted_ranges(bounds, aborted)
        rejects: list[tuple[int, int, list[int]]] = []
        kept: list[tuple[int, int, int]] = []
        for first, last, count in acquired:
            cursor = first
            for lo, hi in dropped:
                lo, hi = max(lo, cursor), min(hi, last)
                if lo > hi:
                    continue
                if cursor < lo:
                    kept.append((cursor, lo - 1, count))
                rejects.append((lo, hi, [REJECT]))
                cursor = hi + 1
            if cursor <= last:
                kept.append((cursor, last, count))
        if rejects:
            owner = sp.owner(member_id)
            _, _, changed = sp.window.acknowledge(owner, rejects, limit, 0)
            sp.persist(changed, self.snapshot_every())
        return kept

    def gauges(self) -> tuple[int, int, int, int]:
        """(share partitions in memory, records in their windows, acquired records, bytes of
        the windows) for /metrics."""
        windows = [sp.window for sp in self.partitions.values()]
        return (
            len(windows),
            sum(w.in_flight for w in windows),
            sum(w.acquired for w in windows),
            sum(w.memory_bytes for w in windows),
        )

    def lock_duration_ms(self, group_id: str) -> int:
        duration: int = self._setting(group_id, "share.record.lock.duration.ms")
        return duration


CONTROL = 0x20
TRANSACTIONAL = 0x10


def aborted_ranges(
    bounds: list[tuple[int, int, int, int, int]], aborted: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    """The offset ranges of the data batches of aborted transactions among `bounds` (base, last,
    end, producer id, attributes), as a read_committed consumer finds them: a producer's aborted
    transaction starts at its first offset and ends at its next control batch."""
    pending = sorted(aborted, key=lambda a: a[1])
    active: set[int] = set()
    out: list[tuple[int, int]] = []
    i = 0
    for base, last, _, producer, attributes in bounds:
        while i < len(pending) and pending[i][1] <= last:
            active.add(pending[i][0])
            i += 1
        if attributes & CONTROL:
            active.discard(producer)
        elif attributes & TRANSACTIONAL and producer in active:
            out.append((base, last))
    return out


def split_at_batches(
    acquired: list[tuple[int, int, int]], bounds: list[tuple[int, int, int, int, int]], size: int
) -> list[tuple[int, int, int]]:
    """Acquired runs cut at the first batch boundary after every `size` records (Kafka's
    AcquiredRecords of a ShareFetch's BatchSize)."""
    ends = sorted(b[1] for b in bounds)
    out: list[tuple[int, int, int]] = []
    taken = 0
    for first, last, count in acquired:
        start = first
        for end in ends:
            if end < start or end >= last:
                continue
            if taken + end - start + 1 >= size:
                out.append((start, end, count))
                taken, start = 0, end + 1
        if start <= last:
            out.append((start, last, count))
            taken += last - start + 1
    return out
