"""The compiled OffsetCommit batch builder writes exactly records.py's Kafka-format records."""

import pytest

from corral import _core
from corral.groups import records

COMMITS = [("orders", [(0, 5, 3, "meta"), (7, 0, -1, "")]), ("påyments", [(2, 9, 1, "ünïcode")])]


@pytest.mark.parametrize("expire_ms", [-1, 99_000])
def test_offset_commit_batch_matches_records(expire_ms):
    batch = _core.offset_commit_batch("group-é", COMMITS, 1234, expire_ms)
    decoded = [(ts, key, value) for _, ts, key, value in _core.decode_batches(batch)]
    assert decoded == [
        (1234, records.offset_key("group-é", topic, p),
         records.offset_value(offset, epoch, metadata, 1234, expire_ms))
        for topic, partitions in COMMITS for p, offset, epoch, metadata in partitions]
    value = records.read_offset_value(decoded[2][2])
    assert (value.offset, value.metadata, value.expire_ms) == (9, "ünïcode", expire_ms)


def test_offset_commit_batch_refuses_oversized_strings_and_empty_commits():
    with pytest.raises(ValueError):
        _core.offset_commit_batch("g", [("t", [(0, 1, -1, "x" * 40000)])], 1, -1)
    with pytest.raises(ValueError):
        _core.offset_commit_batch("g", [], 1, -1)
