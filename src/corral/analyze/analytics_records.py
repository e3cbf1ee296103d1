"""`__corral_analytics` records (docs/analytics.md) into the `samples` and `events` inputs
(corral.analyze.inputs), as Arrow tables: the one decoder of those records, whether they come
from segments (`--data-dir`) or from a consumer (`--bootstrap`).

The topic is small next to `__consumer_offsets` (a few records per rebalance, one per changed
partition per sample interval), so plain JSON parsing is enough. Records of an unknown kind or a
newer schema version are skipped and counted: a newer broker may add kinds, never change them.
"""

from __future__ import annotations

import json
from typing import Iterable, NamedTuple

import pyarrow as pa

from ..analytics_log import GROUP_EVENT, LOG_END, VERSION

SAMPLES = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("time_ms", pa.int64()),
                     ("log_end_offset", pa.int64()), ("log_start_offset", pa.int64()),
                     ("seq", pa.int64())])
EVENTS = pa.schema([("time_ms", pa.int64()), ("group", pa.string()), ("event", pa.string()),
                    ("protocol", pa.string()), ("value", pa.string()), ("seq", pa.int64())])


class Split(NamedTuple):
    samples: pa.Table
    events: pa.Table
    skipped: int  # records of an unknown kind or version, or not JSON objects


def split(records: Iterable[tuple[int, int, bytes | None, bytes | None]]) -> Split:
    """Records `(offset, timestamp ms, key, value)` of `__corral_analytics`, in log order."""
    samples: list[tuple] = []
    events: list[tuple] = []
    skipped = 0
    for offset, time_ms, key, value in records:
        try:
            body = json.loads(value) if value is not None else None
        except ValueError:
            body = None
        if not isinstance(body, dict) or body.get("v") != VERSION:
            skipped += 1
            continue
        try:
            if key == LOG_END:
                samples.append((body["topic"], body["partition"], time_ms,
                                body["log_end_offset"], body.get("log_start_offset"), offset))
            elif key == GROUP_EVENT:
                events.append((time_ms, body["group_id"], body["event"], body.get("protocol"),
                               value.decode(), offset))
            else:
                skipped += 1
        except KeyError:  # a v1 record missing a required field: not one corral wrote
            skipped += 1
    return Split(_table(samples, SAMPLES), _table(events, EVENTS), skipped)


def _table(rows: list[tuple], schema: pa.Schema) -> pa.Table:
    columns = list(zip(*rows)) if rows else [[] for _ in schema]
    return pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(columns, schema)],
                                schema=schema)
