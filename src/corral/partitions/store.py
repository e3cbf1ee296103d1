"""Topic-partition logs: ties the topic registry to the compiled log store (`_core.LogStore`).

- Partitions are opened at start (recovery runs then, and what it repaired is logged) and when
  first used after a topic is created; a deleted topic's directories go with it.
- Appends are written before they are acknowledged. fsync is group-committed: once
  `log.flush.interval.messages` records await it, the appender waits for the flusher task, whose
  one fsync pass (in a worker thread) covers every append made before it started;
  `log.flush.interval.ms` adds a periodic pass. When appenders kept arriving during the last
  pass (load), the next one first lets every runnable task run once (one scheduling round) and
  lingers `corral.log.flush.linger.ms` (default 0), so one fsync covers more appends; an append
  arriving at an idle flusher is flushed at once. A process crash loses nothing written; a power
  loss loses nothing acknowledged while `log.flush.interval.messages` is 1 (corral's default).
- Fetches that wait for data (`wait_for_data`) are woken by the append itself: no polling.
- Any number of partitions: the store keeps no file open per partition, only a bounded cache of
  segment files (`corral.log.open.files.max`, default a quarter of the open-files limit).
- Storage failures (disk full, I/O errors) raise `StorageError` for the call that hit them; the
  store stays consistent (a failed write counts for nothing) and later calls succeed once the
  cause is gone. Callers answer KAFKA_STORAGE_ERROR (or NOT_COORDINATOR) with a rate-limited
  warning (`storage_warning`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import trio

from corral import _core
from corral.clock import wall_ms
from corral.config.settings import INT64_MAX, Settings
from corral.network import descriptors as descriptors
from corral.observability.durations import Durations
from corral.observability.summarised_warnings import SummarisedWarnings
from corral.topics.registry import Topic, TopicStore

log = logging.getLogger("corral.log")

Key = tuple[str, int]


# An append could not be written or made durable, or a segment file could not be read (Kafka's
# KAFKA_STORAGE_ERROR): the store's `_core.StorageError`, an OSError with (errno, message).
StorageError = _core.StorageError

# storage_warning(kind, message, *args): a failed write or read, answered with an error; at most
# one line per kind per 10 s and one summary of the rest (summarised_warnings.py).
storage_warning = SummarisedWarnings(log)


def open_files_max(settings: Settings) -> int:
    """`corral.log.open.files.max`, or when 0, the log store's share of the descriptor budget."""
    return settings["corral.log.open.files.max"] or descriptors.segment_files(
        descriptors.soft_limit()
    )


# How much of an internal topic a coordinator reads at a time when it loads its state.
INTERNAL_READ_CHUNK = 1 << 20

# Called after an fsync pass with its error (None: durable).
FlushCallback = Callable[[BaseException | None], None]


# Broker settings whose change reconfigures the open partitions.
_TOPIC_DEFAULTS = {
    "log.segment.bytes",
    "log.retention.ms",
    "log.retention.bytes",
    "log.cleanup.policy",
}


class PartitionLogs:
    def __init__(self, data_dir: Path, settings: Settings, topics: TopicStore):
        self.settings = settings
        self.topics = topics
        open_files = open_files_max(settings)
        self.store = _core.LogStore(str(data_dir), open_files)
        log.info(
            "log store keeps at most %d segment files open (corral.log.open.files.max)", open_files
        )
        self.flush_messages: int = settings["log.flush.interval.messages"]
        self.flush_interval_ms: int = settings["log.flush.interval.ms"]
        self.flush_linger_s: float = settings["corral.log.flush.linger.ms"] / 1000
        self._open: set[Key] = set()
        self._data_waiters: dict[Key, set[trio.Event]] = {}
        self._flush_waiters: list[FlushCallback] = []
        self._flush_wanted = trio.Event()
        self.flush_seconds = Durations()  # fsync passes that made records durable (/metrics)
        topics.on_delete.append(self._topic_deleted)
        topics.on_configs.append(self.reconfigure)
        settings.on_change.append(self._settings_changed)
        started = time.monotonic()
        for topic in list(topics.by_name.values()):
            for p in range(topic.partitions):
                try:
                    self.open(topic, p)
                except StorageError as e:
                    # Tried again on first use.
                    storage_warning("open", "could not open %s-%d: %s", topic.name, p, e)
        if self._open:
            log.info(
                "opened %d partitions in %.2fs (%s)",
                len(self._open),
                time.monotonic() - started,
                "clean shutdown before"
                if self.store.clean_start
                else "unclean shutdown before: active segments validated",
            )

    # Partitions

    def open(self, topic: Topic, partition: int) -> Key:
        """Ensures the partition's log is open; returns its key. Raises StorageError when its
        files cannot be created or recovered."""
        key = (topic.name, partition)
        if key not in self._open:
            notes = self.store.open_partition(topic.name, partition, *self._partition_config(topic))
            for note in notes:
                log.warning("recovered %s-%d: %s", topic.name, partition, note)
            self._open.add(key)
        return key

    def recreate(self, topic: Topic, partition: int) -> None:
        """Removes the partition's log and opens it again empty (blocking: from a worker thread;
        a cluster node adopting a coordinator shard whose truth is the engine's)."""
        self.store.delete_partition(topic.name, partition)
        self._open.discard((topic.name, partition))
        self.open(topic, partition)

    def _partition_config(self, topic: Topic) -> tuple[int, int, int]:
        """(segment.bytes, retention.ms, retention.bytes) for the store. A topic whose
        cleanup.policy lacks `delete` (compact alone: corral does not compact) is kept whole."""
        cfg = self.topics.config
        if "delete" not in cfg(topic, "cleanup.policy").split(","):
            return int(cfg(topic, "segment.bytes")), -1, -1
        return (
            int(cfg(topic, "segment.bytes")),
            int(cfg(topic, "retention.ms")),
            int(cfg(topic, "retention.bytes")),
        )

    def reconfigure(self, topic: Topic) -> None:
        """Gives the topic's open partitions its settings as they are now (AlterConfigs)."""
        config = self._partition_config(topic)
        for p in range(topic.partitions):
            if (topic.name, p) in self._open:
                self.store.open_partition(topic.name, p, *config)

    def _settings_changed(self, names: set[str]) -> None:
        """Dynamic broker settings: the flush policy, and the topic defaults."""
        self.flush_messages = self.settings["log.flush.interval.messages"]
        self.flush_interval_ms = self.settings["log.flush.interval.ms"]
        self._flush_wanted.set()  # the flusher takes up a new interval at once
        if names & _TOPIC_DEFAULTS:
            for topic in list(self.topics.by_name.values()):
                self.reconfigure(topic)

    async def _topic_deleted(self, topic: Topic) -> None:
        for p in range(topic.partitions):
            key = (topic.name, p)
            self._open.discard(key)
            self._wake(key)
        await trio.to_thread.run_sync(self._remove_files, topic)

    def _remove_files(self, topic: Topic) -> None:
        for p in range(topic.partitions):
            self.store.delete_partition(topic.name, p)

    # Writes

    def append(
        self, topic: Topic, partition: int, data: bytes, log_append_time: int | None = None
    ) -> tuple[_core.AppendResult, bool]:
        """Appends validated batches (written, not yet fsynced). Returns (the store's
        AppendResult, whether the flush policy wants an fsync before acknowledging: then
        `await flushed()` once for all of a request's appends). Raises StorageError when nothing
        could be written."""
        key = self.open(topic, partition)
        result = self.store.append(topic.name, partition, data, log_append_time)
        if result.error_code == 0:
            self._wake(key)
        return result, result.unflushed >= self.flush_messages

    def write_marker(
        self,
        topic: Topic,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
    ) -> tuple[_core.AppendResult, bool]:
        """Appends the COMMIT or ABORT marker of a producer's transaction (a control batch), as
        `append` (the caller awaits `flushed()` when told to). The result's error is
        TRANSACTION_COORDINATOR_FENCED or INVALID_PRODUCER_EPOCH for a marker older than the
        partition's producer state. Raises StorageError when nothing could be written."""
        key = self.open(topic, partition)
        result = self.store.write_marker(
            topic.name, partition, producer_id, producer_epoch, commit, coordinator_epoch, wall_ms()
        )
        if result.error_code == 0:
            # A read_committed fetch waiting past the last stable offset may now have data.
            self._wake(key)
        return result, result.unflushed >= self.flush_messages

    def request_flush(self) -> None:
        """Asks for an fsync pass without waiting for it (acks=0 appends)."""
        self._flush_wanted.set()

    def after_flush(self, callback: FlushCallback) -> None:
        """Calls `callback(error)` once an fsync pass that started after this call has finished:
        what a request that needs no task of its own (OffsetCommit) waits with."""
        self._flush_waiters.append(callback)
        self._flush_wanted.set()

    async def flushed(self) -> None:
        """Returns once an fsync pass that started after this call has finished."""
        done = trio.Event()
        failure: list[BaseException] = []

        def finished(error: BaseException | None) -> None:
            if error is not None:
                failure.append(error)
            done.set()

        self.after_flush(finished)
        await done.wait()
        if failure:
            raise StorageError(str(failure[0]))

    async def run(self) -> None:
        """The flusher, the retention checker and the log cleaner; runs for the broker's lifetime and closes the
        store cleanly when cancelled (shutdown). An append racing the close is still safe: the
        next start validates every active segment's tail past its last index entry."""
        from corral.partitions.cleaner import run_cleaner  # it imports this module

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._flusher)
                nursery.start_soon(self._retention)
                nursery.start_soon(run_cleaner, self)
        finally:
            self.close()

    async def _flusher(self) -> None:
        busy = False  # whether appenders queued up for a pass while the last one ran
        while True:
            period = (
                math.inf if self.flush_interval_ms >= INT64_MAX else self.flush_interval_ms / 1000
            )
            with trio.move_on_after(period):
                await self._flush_wanted.wait()
            if busy:
                # More appenders are likely on their way: let the requests already read run
                # first (one scheduling round: sleep(0)), plus the configured linger.
                await trio.sleep(self.flush_linger_s)
            self._flush_wanted = trio.Event()
            waiters, self._flush_waiters = self._flush_waiters, []
            error = None
            started = time.monotonic()
            try:
                if await trio.to_thread.run_sync(self.store.flush):
                    self.flush_seconds.observe(time.monotonic() - started)
            except OSError as e:
                storage_warning(
                    "fsync", "fsync failed, appends waiting for it are not acknowledged: %s", e
                )
                error = e
            for callback in waiters:
                try:
                    callback(error)
                except Exception:
                    log.exception("a flush callback failed")
            busy = bool(self._flush_waiters)

    async def _retention(self) -> None:
        interval = self.settings["log.retention.check.interval.ms"] / 1000
        while True:
            await trio.sleep(interval)
            now_ms = wall_ms()
            try:
                deleted = await trio.to_thread.run_sync(self.store.apply_retention, now_ms)
            except OSError as e:
                storage_warning(
                    "retention", "retention check failed (next one in %gs): %s", interval, e
                )
                continue
            for r in deleted:
                log.info(
                    "retention deleted %d segments of %s-%d; log start offset now %d",
                    r.segments_deleted,
                    r.topic,
                    r.partition,
                    r.log_start_offset,
                )

    def open_partitions(self) -> list[Key]:
        """The partitions opened so far (topic name, partition)."""
        return list(self._open)

    def close(self) -> None:
        """Clean shutdown: everything fsynced, indexes written, next start skips full recovery."""
        try:
            self.store.close()
        except OSError as e:
            log.warning(
                "log store not closed cleanly (the next start validates every active segment): %s",
                e,
            )

    # Reads

    def read(
        self, topic: Topic, partition: int, offset: int, max_bytes: int, min_one: bool
    ) -> _core.ReadResult:
        """Whole batches from `offset` (`data`, None if out of range), the high watermark and
        the log start offset."""
        key = self.open(topic, partition)
        return self.store.read(key[0], partition, offset, max_bytes, min_one)

    def keyed_records(self, topic: Topic) -> Iterator[tuple[int, bytes, bytes | None]]:
        """(offset, key, value) of every keyed record of an internal topic, each partition from
        its log start to its end: how a coordinator loads its state log."""
        for partition in range(topic.partitions):
            start, end = self.offsets(topic, partition)
            offset = start
            while offset < end:
                data = self.read(topic, partition, offset, INTERNAL_READ_CHUNK, True).data
                if not data:
                    break
                last = offset
                for at, _, key, value in _core.decode_batches(data):
                    if at < offset or key is None:
                        continue
                    last = at
                    yield at, key, value
                offset = last + 1

    def fetch_response(
        self,
        correlation_id: int,
        version: int,
        plan: list[tuple[str, list[tuple[int, int, int, int]]]],
        max_bytes: int,
        isolation_level: int = 0,
    ) -> _core.FetchResult:
        """A whole Fetch response frame read and encoded by the store (with the record bytes in
        it and whether a partition had an error). `plan`: (topic, [(partition, known error or 0,
        fetch offset, partition max bytes)]), partitions opened with `open` beforehand."""
        return self.store.fetch_response(correlation_id, version, plan, max_bytes, isolation_level)

    def offsets(self, topic: Topic, partition: int) -> tuple[int, int]:
        """(log start offset, high watermark)."""
        self.open(topic, partition)
        return self.store.offsets(topic.name, partition)

    def stable_offset(self, topic: Topic, partition: int) -> int:
        """The last stable offset: the first offset of the oldest open transaction, else the
        high watermark."""
        self.open(topic, partition)
        return self.store.stable_offset(topic.name, partition)

    def aborted_transactions(
        self, topic: Topic, partition: int, fetch_offset: int, upper: int
    ) -> list[tuple[int, int]]:
        """The aborted transactions overlapping [fetch_offset, upper): (producer id, first
        offset)."""
        self.open(topic, partition)
        return self.store.aborted_transactions(topic.name, partition, fetch_offset, upper)

    def in_transaction(
        self, topic: Topic, partition: int, producer_id: int, producer_epoch: int
    ) -> bool:
        """Whether (producer id, epoch) has a transaction open in the partition."""
        state = self.producer(topic, partition, producer_id)
        return state is not None and state[0] == producer_epoch and state[2]

    def producer(
        self, topic: Topic, partition: int, producer_id: int
    ) -> tuple[int, int, bool] | None:
        """One producer of the partition: (epoch, last sequence or -1, whether its transaction
        is open), or None."""
        self.open(topic, partition)
        return self.store.producer(topic.name, partition, producer_id)

    def producers(self, topic: Topic, partition: int) -> list[tuple[int, int, int, int, int, int]]:
        """The partition's active producers (DescribeProducers): (producer id, epoch, last
        sequence, last timestamp, coordinator epoch, open transaction's first offset or -1)."""
        self.open(topic, partition)
        return self.store.producers(topic.name, partition)

    def size(self, topic: Topic, partition: int) -> int:
        """Bytes of the partition's segment files."""
        self.open(topic, partition)
        return self.store.size(topic.name, partition)

    def delete_records(self, topic: Topic, partition: int, offset: int) -> int | None:
        """DeleteRecords (blocks on fsyncs: from a worker thread, the partition opened before):
        the log start offset moves up to `offset` (-1: the high watermark) durably and the
        segments below it are deleted. Returns the new log start offset, or None when `offset` is
        negative or past the high watermark. Raises KeyError once the topic is gone."""
        start = self.store.delete_records(topic.name, partition, offset)
        if start is not None:
            log.info("DeleteRecords: log start offset of %s-%d is %d", topic.name, partition, start)
        return start

    def offset_for_timestamp(
        self, topic: Topic, partition: int, timestamp: int
    ) -> tuple[int, int] | None:
        self.open(topic, partition)
        return self.store.offset_for_timestamp(topic.name, partition, timestamp)

    def max_timestamp(self, topic: Topic, partition: int) -> tuple[int, int] | None:
        self.open(topic, partition)
        return self.store.max_timestamp(topic.name, partition)

    async def wait_for_data(self, keys: list[Key], timeout_s: float) -> None:
        """Returns when any of `keys` gets an append (or its topic is deleted), or on timeout."""
        event = trio.Event()
        for key in keys:
            self._data_waiters.setdefault(key, set()).add(event)
        try:
            with trio.move_on_after(timeout_s):
                await event.wait()
        finally:
            for key in keys:
                waiters = self._data_waiters.get(key)
                if waiters is not None:
                    waiters.discard(event)
                    if not waiters:
                        del self._data_waiters[key]

    def _wake(self, key: Key) -> None:
        waiters = self._data_waiters.pop(key, None)
        if waiters:
            for event in waiters:
                event.set()
