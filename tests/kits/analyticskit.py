"""Reading `__corral_analytics` back with a real consumer: the group events a test waits for."""

from __future__ import annotations

import json
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from corral.observability.analytics_topic import (
    TOPIC,
)


def read_all(bootstrap: str) -> list[tuple[int, str, dict]]:
    """Every record of the topic: (timestamp, key, value)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "analytics-reader",
            "enable.auto.commit": False,
        }
    )
    tp = TopicPartition(TOPIC, 0)
    try:
        _, high = consumer.get_watermark_offsets(tp, timeout=10)
        consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        out, position = [], 0
        deadline = time.monotonic() + 20
        while position < high and time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is None or msg.error():
                continue
            position = msg.offset() + 1
            out.append((msg.timestamp()[1], msg.key().decode(), json.loads(msg.value())))
        assert position >= high, f"read {position} of {high} records"
        return out
    finally:
        consumer.close()


def wait_until(condition, timeout: float, what: str) -> None:
    """Polls `condition` every 0.3 s (each poll reads the whole topic)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.3)


def group_events(records, group: str, event: str | None = None) -> list[dict]:
    return [
        v
        for _, k, v in records
        if k == "group_event" and v["group_id"] == group and (event is None or v["event"] == event)
    ]


def wait_events(bootstrap: str, group: str, check, timeout: float = 30) -> list:
    """Reads the topic until `check(events of the group)` holds; returns all records."""
    found: list = []

    def ready() -> bool:
        found[:] = read_all(bootstrap)
        return check(group_events(found, group))

    wait_until(ready, timeout, what=f"analytics events of {group}")
    return found
