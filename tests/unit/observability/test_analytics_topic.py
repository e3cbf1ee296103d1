"""The analytics log's buffer in process (corral.observability.analytics_topic): records batched and
bounded, each encoded with its own time. (Read back from a real corral with a real consumer:
tests/clients/python/test_analytics_log.py.)"""

from __future__ import annotations

import json

from corral import _core
from corral.observability.analytics_topic import (
    FLUSH_EVENTS,
    MAX_BUFFERED,
    AnalyticsLog,
    encode,
)
from corral.partitions.store import StorageError


class _Store:
    """A log store whose appends fail while `failing` (a full disk)."""

    def __init__(self) -> None:
        self.failing = False
        self.appends: list[bytes] = []
        self.flushes = 0

    def append(self, topic, partition, data):
        if self.failing:
            raise StorageError(28, "No space left on device")
        self.appends.append(data)
        return type("Result", (), {"error_code": 0})(), True

    def request_flush(self) -> None:
        self.flushes += 1


def test_buffer_is_batched_and_bounded(caplog):
    store = _Store()
    analytics = AnalyticsLog(store, None, None, 5000)
    for i in range(10):
        analytics.add({"event": "member_joined", "i": i}, time_ms=1000 + i // 4)
    assert not analytics._wanted.is_set()  # below FLUSH_EVENTS: waits for the interval
    assert analytics.append() and len(store.appends) == 1 and store.flushes == 1
    decoded = _core.decode_batches(store.appends[0])
    assert [(ts, json.loads(v)["i"]) for _, ts, _, v in decoded] == [
        (1000 + i // 4, i) for i in range(10)
    ]
    assert all(k == b"group_event" and json.loads(v)["v"] == 1 for _, _, k, v in decoded)

    store.failing = True
    for i in range(MAX_BUFFERED + 50):
        analytics.add({"i": i}, time_ms=2000)
    assert analytics._wanted.is_set()  # FLUSH_EVENTS reached
    assert not analytics.append()
    assert len(analytics.buffer) == MAX_BUFFERED and analytics.dropped == 50
    assert json.loads(analytics.buffer[0][2])["i"] == 50  # the oldest went
    store.failing = False
    assert analytics.append() and not analytics.buffer and analytics.dropped == 0
    assert len(_core.decode_batches(store.appends[-1])) == MAX_BUFFERED
    assert any("50 analytics records were dropped" in r.message for r in caplog.records)
    assert FLUSH_EVENTS < MAX_BUFFERED


def test_encode_keeps_each_records_time():
    data = encode([(5, b"log_end", b"{}"), (5, b"log_end", b"{}"), (7, b"group_event", b"{}")])
    assert [(ts, k) for _, ts, k, _ in _core.decode_batches(data)] == [
        (5, b"log_end"),
        (5, b"log_end"),
        (7, b"group_event"),
    ]
