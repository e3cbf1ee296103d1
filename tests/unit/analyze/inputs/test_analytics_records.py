"""The bulk reader of `log_end` samples (analytics_records.samples_of_lines, fed by the core's
segment reader) gives exactly what the record-by-record decoder (`split`) gives."""

from __future__ import annotations

import json

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.analyze.inputs.analytics_records import samples_of_lines, split
from corral.observability.analytics_topic import LOG_END


def bulk(values: list[bytes], first_offset: int = 100):
    offsets = pa.array(range(first_offset, first_offset + len(values)), pa.int64())
    times = pa.array([1000 + 5 * i for i in range(len(values))], pa.int64())
    lines = b"".join(v + b"\n" for v in values)
    return samples_of_lines(lines, offsets, times)


def one_by_one(values: list[bytes], first_offset: int = 100):
    got = split((first_offset + i, 1000 + 5 * i, LOG_END, v) for i, v in enumerate(values))
    return got.samples, got.skipped


def sample(**fields) -> bytes:
    return json.dumps(
        {
            "v": 1,
            "topic": "t",
            "partition": 3,
            "log_end_offset": 40,
            "log_start_offset": 0,
            **fields,
        },
        separators=(",", ":"),
    ).encode()


CASES = {
    "a sample": [sample()],
    "another version is skipped": [sample(v=2), sample(partition=4)],
    "unknown fields are ignored": [sample(extra={"a": [1, 2]}, more="x")],
    "log_start_offset may be null": [sample(log_start_offset=None)],
    "a required field missing": [b'{"v":1,"topic":"t","log_end_offset":4}', sample()],
    "not JSON: one by one": [sample(), b"{not json", sample(partition=9)],
    "not an object: one by one": [b"[1,2]", sample()],
    "none": [],
}


def test_cases():
    for name, values in CASES.items():
        table, skipped = bulk(values)
        expected, expected_skipped = one_by_one(values)
        assert (table.to_pylist(), skipped) == (expected.to_pylist(), expected_skipped), name


_values = st.fixed_dictionaries(
    {
        "v": st.sampled_from([1, 1, 1, 2]),
        "topic": st.text(min_size=1, max_size=8),
        "partition": st.integers(0, 2**31 - 1),
        "log_end_offset": st.integers(0, 2**62),
    },
    optional={"log_start_offset": st.none() | st.integers(0, 2**62), "note": st.text(max_size=5)},
).map(lambda d: json.dumps(d).encode())


@settings(derandomize=True, max_examples=60, deadline=None)
@given(st.lists(_values, max_size=30))
def test_bulk_equals_one_by_one(values):
    table, skipped = bulk(values)
    expected, expected_skipped = one_by_one(values)
    assert table.schema == expected.schema
    assert (table.to_pylist(), skipped) == (expected.to_pylist(), expected_skipped)
