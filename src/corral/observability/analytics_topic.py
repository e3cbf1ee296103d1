"""`__corral_analytics`: the inputs of `corral analyze` that `__consumer_offsets` does not hold
(docs/analytics.md has the record schema).

Two kinds of records, key = the kind, value = one JSON object, timestamp = the event's time:
`log_end` samples of the partitions' log-end offsets (every corral.analytics.sample.interval.ms,
the partitions whose log end moved since the last sample) and `group_event`s from the group
coordinator (groups/events.py). Nothing is written on a request's path: events are buffered and
one task appends everything buffered at each interval (sooner when FLUSH_EVENTS are waiting), as
Kafka RecordBatches through the log store, so any Kafka client can consume the topic. The buffer
is bounded: while appends fail (a full disk), the oldest records are dropped and counted.

One partition: a single writer, a total order of every group's events (a rebalance's start and
end, the members' joins, in the order the coordinator saw them), and a volume (a few records per
rebalance, one per changed partition per interval) that one partition carries easily.
"""

from __future__ import annotations

import collections
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from corral import _core
from corral.clock import wall_ms
from corral.partitions.store import StorageError, storage_warning

if TYPE_CHECKING:
    from corral.broker import Broker

log = logging.getLogger("corral.analytics")

TOPIC = "__corral_analytics"
VERSION = 1
LOG_END, GROUP_EVENT = b"log_end", b"group_event"
# An append as soon as this many records wait (a burst of rebalances), else once per interval.
FLUSH_EVENTS = 1000
# At most this many records wait in memory while appends fail; older ones are dropped.
MAX_BUFFERED = 100_000
# The append interval when sampling is off.
EVENTS_ONLY_INTERVAL_MS = 5000


# One encoder for every event: json.dumps with separators builds a new one per call (a third of
# an event's cost, and a big consumer group's rebalance makes one event per member).
_JSON = json.JSONEncoder(separators=(",", ":"))


def encode(records: list[tuple[int, bytes, bytes]]) -> bytes:
    """RecordBatches of (timestamp ms, key, value): one batch per run of equal timestamps, so
    that every record carries its own time."""
    out, run, run_ts = [], [], None
    for ts, key, value in records:
        if run and ts != run_ts:
            out.append(_core.build_batch(run, run_ts))
            run = []
        run.append((key, value))
        run_ts = ts
    if run:
        out.append(_core.build_batch(run, run_ts))
    return b"".join(out)


class AnalyticsLog:
    def __init__(self, logs, topics, topic, interval_ms: int):
        self.logs = logs
        self.topics = topics
        self.topic = topic
        self.sampling = interval_ms > 0
        self.interval_s = (interval_ms or EVENTS_ONLY_INTERVAL_MS) / 1000
        self.buffer: collections.deque[tuple[int, bytes, bytes]] = collections.deque()
        self.dropped = 0  # records dropped since the last append that worked
        self.appended = 0
        self._wanted = trio.Event()
        # Called before each append, to buffer what is counted per interval (refused commits).
        self.before_append: list[Callable[[], None]] = []
        # (topic name, partition) -> the log end of the last sample.
        self._last_end: dict[tuple[str, int], int] = {}

    def add(self, event: dict[str, Any], time_ms: int | None = None) -> None:
        """Buffers one group event (a JSON object; "v" is added)."""
        self._add(GROUP_EVENT, event, wall_ms() if time_ms is None else time_ms)

    def _add(self, key: bytes, value: dict[str, Any], time_ms: int) -> None:
        if len(self.buffer) >= MAX_BUFFERED:
            self.buffer.popleft()
            self.dropped += 1
        body = _JSON.encode({"v": VERSION, **value}).encode()
        self.buffer.append((time_ms, key, body))
        if len(self.buffer) >= FLUSH_EVENTS:
            self._wanted.set()

    def sample(self, now_ms: int) -> None:
        """Buffers a log_end record per partition whose log end moved since the last sample
        (every partition the first time). Internal topics are not sampled: this one would
        sample its own appends, and `__consumer_offsets`' log end says nothing about lag."""
        seen = set()
        for topic in list(self.topics.by_name.values()):
            if topic.internal:
                continue
            for partition in range(topic.partitions):
                key = (topic.name, partition)
                seen.add(key)
                try:
                    start, end = self.logs.offsets(topic, partition)
                except StorageError:
                    continue
                if self._last_end.get(key) == end:
                    continue
                self._last_end[key] = end
                self._add(
                    LOG_END,
                    {
                        "topic": topic.name,
                        "partition": partition,
                        "log_start_offset": start,
                        "log_end_offset": end,
                    },
                    now_ms,
                )
        for key in self._last_end.keys() - seen:  # deleted topics (or partitions)
            del self._last_end[key]

    def append(self) -> bool:
        """Appends everything buffered as one write; False (the records stay buffered) when the
        log store refused it."""
        if not self.buffer:
            return True
        records = list(self.buffer)
        try:
            result, needs_flush = self.logs.append(self.topic, 0, encode(records))
            error = result.error_code
        except StorageError as e:
            error = e
        if error:
            storage_warning(
                "analytics",
                "appending %d records to %s failed (kept in memory, "
                "at most %d; %d dropped so far): %s",
                len(records),
                TOPIC,
                MAX_BUFFERED,
                self.dropped,
                error,
            )
            return False
        for _ in records:
            self.buffer.popleft()
        self.appended += len(records)
        if self.dropped:
            log.warning(
                "%d analytics records were dropped while appends to %s failed", self.dropped, TOPIC
            )
            self.dropped = 0
        if needs_flush:
            self.logs.request_flush()  # durable soon, without anyone waiting for it
        return True

    async def run(self) -> None:
        try:
            while True:
                with trio.move_on_after(self.interval_s):
                    await self._wanted.wait()
                self._wanted = trio.Event()
                if self.sampling:
                    self.sample(wall_ms())
                self._collect()
                self.append()
        finally:
            # Shutdown: what is buffered goes out if the store is still open (best effort).
            self._collect()
            self.append()

    def _collect(self) -> None:
        for collect in self.before_append:
            collect()


def analytics_log_for(broker: Broker) -> AnalyticsLog:
    """The broker's analytics log, `__corral_analytics` created when missing (internal, like
    `__consumer_offsets`: clients may read it, not write to it), its retention.ms kept equal to
    corral.analytics.retention.ms. The coordinator's events go to it from now on: after
    loading, so that a restart's replay records nothing."""
    retention = str(broker.settings["corral.analytics.retention.ms"])
    topic = broker.topics.get(TOPIC)
    if topic is None:
        topic = broker.topics.create_at_startup(
            TOPIC, 1, {"retention.ms": retention}, internal=True
        )
    elif topic.configs.get("retention.ms") != retention:
        broker.topics.reconfigure_at_startup(topic, {**topic.configs, "retention.ms": retention})
    analytics = AnalyticsLog(
        broker.logs, broker.topics, topic, broker.settings["corral.analytics.sample.interval.ms"]
    )
    broker.groups.events.sink = analytics.add
    analytics.before_append.append(broker.groups.events.flush_rejected)
    return analytics
