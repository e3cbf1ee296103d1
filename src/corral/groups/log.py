"""Where the coordinator's records go: the `__consumer_offsets` topic in the broker's log store.

The state machine is synchronous. A change that must be durable before it is acknowledged hands
its records over with a callback (`write_group`, `write_tombstones`, `append_offsets`); the
answer waits for the write and its fsync. Writes are group-committed: the writer
task takes everything queued since its last pass, appends one batch per partition, and waits for
one fsync pass (the log store's flusher) that covers them all.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Callable, Iterator

import trio

from .. import _core
from ..clock import wall_ms
from ..errors import ErrorCode
from ..log import StorageError, storage_warning
from . import records
from .placement import partition_for

if TYPE_CHECKING:
    from ..log import PartitionLogs
    from ..topics import Topic
    from .classic import ClassicGroup

log = logging.getLogger("corral.groups")

Done = Callable[[ErrorCode], None] | None
Record = tuple[bytes, bytes | None]
# Kafka maps a failed coordinator append (KAFKA_STORAGE_ERROR) to NOT_COORDINATOR.
WRITE_FAILED = ErrorCode.NOT_COORDINATOR


def group_records(group: "ClassicGroup") -> list[Record]:
    """The group's GroupMetadata record as of now (members with their assignments)."""
    protocol = group.protocol_name
    value = records.GroupValue(
        protocol_type=group.protocol_type or "", generation=group.generation_id,
        protocol=protocol, leader=group.leader_id if group.members else None,
        state_timestamp_ms=group.state_timestamp_ms or -1,
        members=[records.MemberValue(
            m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
            m.session_timeout_ms, m.metadata(protocol) if protocol else b"", m.assignment)
            for m in group.members.values()])
    return [(records.group_key(group.group_id), records.group_value(value))]


def tombstone_records(group_id: str, offsets: list[tuple[str, int]], group_too: bool) -> list[Record]:
    out: list[Record] = [(records.offset_key(group_id, t, p), None) for t, p in offsets]
    if group_too:
        out.append((records.group_key(group_id), None))
    return out


class RequestWrites:
    """The coordinator writes one request caused (a LeaveGroup that empties its group, a
    DeleteGroups, an OffsetDelete): the request is answered once every one is durable, with the
    first failure if one failed (`then(callback)`)."""

    __slots__ = ("outstanding", "error", "_then")

    def __init__(self) -> None:
        self.outstanding = 0
        self.error = ErrorCode.NONE
        self._then: Callable[[ErrorCode], None] | None = None

    def track(self) -> Callable[[ErrorCode], None]:
        """A `done` callback for one more write."""
        self.outstanding += 1
        return self._done

    def _done(self, error: ErrorCode) -> None:
        if error and not self.error:
            self.error = error
        self.outstanding -= 1
        self._finish()

    def then(self, callback: Callable[[ErrorCode], None]) -> None:
        """Calls `callback(error)` once every tracked write is durable (at once if none)."""
        self._then = callback
        self._finish()

    def _finish(self) -> None:
        if self.outstanding == 0 and self._then is not None:
            callback, self._then = self._then, None
            callback(self.error)


class CoordinatorLog:
    # While a request is being handled (`for_request`), writes nobody waits for are its writes.
    _request: RequestWrites | None = None

    @contextlib.contextmanager
    def for_request(self) -> Iterator[RequestWrites]:
        """Collects the writes made inside the block, for the request being handled."""
        outer, writes = self._request, RequestWrites()
        self._request = writes
        try:
            yield writes
        finally:
            self._request = outer

    def _waiter(self, done: Done) -> Done:
        """`done`, or for a write nobody waits for made while a request is handled, that request's."""
        if done is None and self._request is not None:
            return self._request.track()
        return done

    def write_group(self, group: "ClassicGroup", done: Done) -> None:
        raise NotImplementedError

    def write_tombstones(self, group_id: str, offsets: list[tuple[str, int]], done: Done,
                         group_too: bool = True) -> None:
        raise NotImplementedError

    def append_offsets(self, group_id: str,
                       topics: list[tuple[str, list[tuple[int, int, int, str]]]],
                       commit_ms: int, expire_ms: int, apply: Callable[[], None],
                       done: Callable[[ErrorCode], None]) -> None:
        """Appends the commits now; once they are fsynced runs `apply` (makes them visible) and
        then `done(error)`."""
        raise NotImplementedError

    async def run(self) -> None:
        """The writer task, for logs that have one."""


class DurableLog(CoordinatorLog):
    def __init__(self, logs: "PartitionLogs", topic: "Topic", write_delay_ms: int = 0):
        self.logs = logs
        self.topic = topic
        # Fault injection (corral.coordinator.write.delay.ms): a pause before each writer pass.
        self.write_delay_s = write_delay_ms / 1000
        self._queue: list[tuple[int, list[Record], Done]] = []
        self._wanted = trio.Event()
        # Base offsets of appended batches whose state is not applied yet, per partition: a
        # snapshot must replay from the oldest of them.
        self._in_flight: dict[int, list[int]] = {}
        # Bumped on every append: lets the snapshotter skip a pass when nothing changed.
        self.appends = 0
        self._partition_of: dict[str, int] = {}

    def partition_of(self, group_id: str) -> int:
        # Java's String.hashCode in Python is costly per commit: remember each group's partition.
        partition = self._partition_of.get(group_id)
        if partition is None:
            partition = self._partition_of[group_id] = partition_for(group_id, self.topic.partitions)
        return partition

    def write_group(self, group, done):
        self._enqueue(group.group_id, group_records(group), done)

    def write_tombstones(self, group_id, offsets, done, group_too=True):
        self._enqueue(group_id, tombstone_records(group_id, offsets, group_too), done)

    def _enqueue(self, group_id: str, recs: list[Record], done: Done) -> None:
        self._queue.append((self.partition_of(group_id), recs, self._waiter(done)))
        self._wanted.set()

    def _append(self, partition: int, batch: bytes) -> tuple[int, bool]:
        """Appends one batch; returns (base offset or -1 on a refused or failed append, needs
        fsync)."""
        try:
            code, base, _, _, needs_flush = self.logs.append(self.topic, partition, batch)
        except StorageError as e:
            storage_warning("coordinator", "write to %s-%d failed, answered NOT_COORDINATOR: %s",
                            self.topic.name, partition, e)
            return -1, False
        if code:
            return -1, False
        self.appends += 1
        self._in_flight.setdefault(partition, []).append(base)
        return base, needs_flush

    def _settled(self, partition: int, base: int) -> None:
        bases = self._in_flight[partition]
        bases.remove(base)
        if not bases:
            del self._in_flight[partition]

    def append_offsets(self, group_id, topics, commit_ms, expire_ms, apply, done):
        # records.offset_key/offset_value for every partition, built by the compiled core.
        batch = _core.offset_commit_batch(group_id, topics, commit_ms, expire_ms)
        partition = self.partition_of(group_id)
        base, needs_flush = self._append(partition, batch)
        if base < 0:
            done(WRITE_FAILED)
            return

        def durable(error: BaseException | None) -> None:
            code = WRITE_FAILED
            try:
                if error is None:
                    apply()
                    code = ErrorCode.NONE
            finally:
                self._settled(partition, base)
                done(code)

        if needs_flush:
            self.logs.after_flush(durable)
        else:
            durable(None)

    async def run(self) -> None:
        while True:
            await self._wanted.wait()
            if self.write_delay_s:
                await trio.sleep(self.write_delay_s)
            self._wanted = trio.Event()
            queue, self._queue = self._queue, []
            by_partition: dict[int, list[Record]] = {}
            for partition, recs, _ in queue:
                by_partition.setdefault(partition, []).extend(recs)
            appended: list[tuple[int, int]] = []
            error = await self._write(by_partition, appended)
            for _, _, done in queue:
                if done is not None:
                    done(error)
            for partition, base in appended:
                self._settled(partition, base)

    async def _write(self, by_partition: dict[int, list[Record]],
                     appended: list[tuple[int, int]]) -> ErrorCode:
        now = wall_ms()
        flush = False
        for partition, recs in by_partition.items():
            base, needs_flush = self._append(partition, _core.build_batch(recs, now))
            if base < 0:
                return WRITE_FAILED
            appended.append((partition, base))
            flush = flush or needs_flush
        if flush:
            try:
                await self.logs.flushed()
            except Exception:
                return WRITE_FAILED
        return ErrorCode.NONE

    def positions(self) -> dict[int, int]:
        """Per partition, where replay must start for a snapshot of the current state."""
        out = {}
        for partition in range(self.topic.partitions):
            in_flight = self._in_flight.get(partition)
            out[partition] = min(in_flight) if in_flight else self.logs.offsets(self.topic, partition)[1]
        return out

    def replay(self, positions: dict[int, int] | None = None):
        """The topic's records from `positions` (default: the log start), partition by partition:
        (key, value or None)."""
        for partition in range(self.topic.partitions):
            start, end = self.logs.offsets(self.topic, partition)
            offset = start
            if positions is not None and partition in positions:
                if positions[partition] < start:
                    log.error("%s-%d starts at %d but the snapshot needs records from %d: the "
                              "records in between are lost", self.topic.name, partition, start,
                              positions[partition])
                offset = max(start, positions[partition])
            while offset < end:
                data, _, _ = self.logs.read(self.topic, partition, offset, 8 << 20, True)
                if not data:
                    break
                for rec_offset, _, key, value in _core.decode_batches(data):
                    if rec_offset < offset:
                        continue  # the batch holding `offset` starts before it
                    offset = rec_offset + 1
                    if key is not None:
                        yield key, value
