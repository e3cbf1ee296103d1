"""`__corral_analytics` records (docs/analytics.md) into the `samples` and `events` inputs
(corral.analyze.inputs), as Arrow tables: the one decoder of those records, whether they come
from segments (`--data-dir`) or from a consumer (`--bootstrap`).

Events are few (a handful per rebalance) and parsed one by one. Samples are most of the topic
(one per changed partition per sample interval: millions in a long history), so the segment reader
hands them over as lines of JSON (`_core.decode_analytics_records`) that `samples_of_lines` parses
in bulk with pyarrow's JSON reader. Records of an unknown kind or a
newer schema version are skipped and counted: a newer broker may add kinds, never change them.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from corral.observability.analytics_topic import GROUP_EVENT, LOG_END, VERSION

SAMPLES = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("time_ms", pa.int64()),
        ("log_end_offset", pa.int64()),
        ("log_start_offset", pa.int64()),
        ("seq", pa.int64()),
    ]
)
EVENTS = pa.schema(
    [
        ("time_ms", pa.int64()),
        ("group", pa.string()),
        ("event", pa.string()),
        ("protocol", pa.string()),
        ("value", pa.string()),
        ("seq", pa.int64()),
    ]
)


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
                samples.append(
                    (
                        body["topic"],
                        body["partition"],
                        time_ms,
                        body["log_end_offset"],
                        body.get("log_start_offset"),
                        offset,
                    )
                )
            elif key == GROUP_EVENT:
                events.append(
                    (
                        time_ms,
                        body["group_id"],
                        body["event"],
                        body.get("protocol"),
                        value.decode(),
                        offset,
                    )
                )
            else:
                skipped += 1
        except KeyError:  # a v1 record missing a required field: not one corral wrote
            skipped += 1
    return Split(_table(samples, SAMPLES), _table(events, EVENTS), skipped)


def _table(rows: list[tuple], schema: pa.Schema) -> pa.Table:
    columns = list(zip(*rows)) if rows else [[] for _ in schema]
    return pa.Table.from_arrays(
        [pa.array(c, f.type) for c, f in zip(columns, schema)], schema=schema
    )


# What pyarrow reads of a `log_end` value; other fields are ignored (v1 may add fields).
_LOG_END_JSON = pa.schema(
    [
        ("v", pa.int64()),
        ("topic", pa.string()),
        ("partition", pa.int64()),
        ("log_end_offset", pa.int64()),
        ("log_start_offset", pa.int64()),
    ]
)


def samples_of_lines(lines: bytes, offsets: pa.Array, timestamps: pa.Array) -> tuple[pa.Table, int]:
    """`log_end` values, one JSON object per line, with their records' offsets and timestamps,
    as SAMPLES rows, and how many were skipped (split's rules: another version, a required
    field missing). Lines pyarrow cannot read as a whole go through `split` one by one."""
    if not len(offsets):
        return SAMPLES.empty_table(), 0
    try:
        parsed = pa_json.read_json(
            io.BytesIO(lines),
            parse_options=pa_json.ParseOptions(
                explicit_schema=_LOG_END_JSON, unexpected_field_behavior="ignore"
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        values = lines.split(b"\n")
        slow = split(
            (o, t, LOG_END, v)
            for o, t, v in zip(offsets.to_pylist(), timestamps.to_pylist(), values)
        )
        return slow.samples, slow.skipped
    valid = pc.and_(
        pc.equal(parsed["v"], VERSION),
        pc.and_(
            pc.is_valid(parsed["topic"]),
            pc.and_(pc.is_valid(parsed["partition"]), pc.is_valid(parsed["log_end_offset"])),
        ),
    )
    valid = pc.fill_null(valid, False)
    table = pa.table(
        {
            "topic": parsed["topic"],
            "partition": parsed["partition"].cast(pa.int32()),
            "time_ms": pa.chunked_array([timestamps]),
            "log_end_offset": parsed["log_end_offset"],
            "log_start_offset": parsed["log_start_offset"],
            "seq": pa.chunked_array([offsets]),
        }
    ).filter(valid)
    return table.cast(SAMPLES), len(offsets) - table.num_rows
