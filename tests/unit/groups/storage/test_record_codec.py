"""The core's one codec of `__consumer_offsets` records (rust/groups/records/) as Python sees it:
every record type and value version round-trips through the named records of groups/storage/,
tombstones decode, record types corral does not keep are skipped, unknown value versions and
malformed bytes raise ValueError (never crash the process). Kafka's own bytes for these records:
test_consumer_records.py (golden, against Kafka's generated classes) and test_offset_records.py."""

from __future__ import annotations

import struct
from dataclasses import astuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral import _core
from corral.groups.storage import consumer_records as cr
from corral.groups.storage import records

TOPIC_A, TOPIC_B = bytes(range(16)), bytes(range(16, 32))

CONSUMER_RECORDS = [
    cr.GroupEpoch("g", 7),
    cr.GroupEpoch("g", 7, metadata_hash=-5),
    cr.MemberMetadata("g", "m", None, None, "c", "h", (), None, 300, None),
    cr.MemberMetadata(
        "g", "m", "i", "r", "c", "h", ("a", "b"), "x.*", 300, "uniform", cr.ClassicMetadata(0, [])
    ),
    cr.MemberMetadata(
        "g",
        "m",
        None,
        None,
        "c",
        "h",
        ("a",),
        None,
        300,
        None,
        cr.ClassicMetadata(45_000, [("range", b"\x00\x01"), ("roundrobin", b"")]),
    ),
    cr.TargetEpoch("g", 3),
    cr.TargetEpoch("g", 3, timestamp_ms=1_700_000_000_000),
    cr.TargetMember("g", "m", {}),
    cr.TargetMember("g", "m", {TOPIC_B: (4,), TOPIC_A: (0, 1, 2)}),
    cr.CurrentAssignment("g", "m", 5, 4, 0, {TOPIC_A: (0, 1)}),
    cr.CurrentAssignment(
        "g",
        "m",
        5,
        4,
        2,
        {TOPIC_A: (0, 1), TOPIC_B: (3,)},
        {TOPIC_B: (7, 8)},
        assigned_epochs={TOPIC_A: (5, 2)},
        pending_epochs={TOPIC_B: (1, 1)},
    ),
    cr.RegexTopics("g", "t.*", ("t1", "t2"), 9, 1234),
    cr.RegexTopics("g", "none", (), 0, 0),
]

TOMBSTONES = [
    cr.ConsumerTombstone(cr.GROUP_EPOCH, "g"),
    cr.ConsumerTombstone(cr.MEMBER_METADATA, "g", "m"),
    cr.ConsumerTombstone(cr.TARGET_EPOCH, "g"),
    cr.ConsumerTombstone(cr.TARGET_MEMBER, "g", "m"),
    cr.ConsumerTombstone(cr.CURRENT_ASSIGNMENT, "g", "m"),
    cr.ConsumerTombstone(cr.REGEX, "g", "t.*"),
]

GROUP = records.GroupValue(
    "consumer",
    4,
    "range",
    "m1",
    1_700_000_000_000,
    [
        records.MemberValue("m1", "static-1", "c", "/10.0.0.1", 60_000, 10_000, b"sub", b"asg"),
        records.MemberValue("m2", None, "c", "/10.0.0.2", 60_000, 10_000, b"", b""),
    ],
)


@pytest.mark.parametrize("record", CONSUMER_RECORDS, ids=repr)
def test_consumer_records_round_trip(record):
    key, value = cr.key_of(record), cr.value_of(record)
    assert cr.decode(key, value) == record
    assert records.decode(key, value) == record


@pytest.mark.parametrize("tombstone", TOMBSTONES, ids=repr)
def test_consumer_tombstones_round_trip(tombstone):
    assert cr.value_of(tombstone) is None
    assert records.decode(cr.key_of(tombstone), None) == tombstone


def test_topics_are_written_in_topic_id_order():
    one = cr.TargetMember("g", "m", {TOPIC_B: (4,), TOPIC_A: (0,)})
    other = cr.TargetMember("g", "m", {TOPIC_A: (0,), TOPIC_B: (4,)})
    assert cr.value_of(one) == cr.value_of(other)


def test_kafka_defaults_are_left_out():
    """Tagged fields equal to Kafka's default are not written: the value is the same bytes as
    Kafka's generated code writes (the header, the fields, an empty tag section)."""
    assert cr.value_of(cr.GroupEpoch("g", 7)) == struct.pack(">hi", 0, 7) + b"\x00"
    with_hash = cr.value_of(cr.GroupEpoch("g", 7, metadata_hash=1))
    assert with_hash == struct.pack(">hi", 0, 7) + b"\x01\x00\x08" + struct.pack(">q", 1)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_offset_commit_values_of_every_version(version):
    key = _core.record_key(records.OFFSET_COMMIT_KEY, ("g", "t", 3))
    fields = (42, 7, "meta", 1000, 2000, TOPIC_A)
    value = _core.record_value(records.OFFSET_COMMIT_KEY, version, fields)
    epoch = 7 if version >= 3 else -1
    expire = 2000 if version == 1 else -1
    assert records.decode(key, value) == records.OffsetCommits(
        "g", [("t", [(3, 42, epoch, "meta")])], 1000, expire
    )


def test_offset_commit_key_v0_and_tombstones():
    key = _core.record_key(records.OFFSET_COMMIT_KEY_V0, ("g", "t", 3))
    assert records.decode(key, None) == records.OffsetTombstones("g", [("t", 3)])
    assert records.read_key(key) == (records.OFFSET_COMMIT_KEY_V0, ("g", "t", 3))


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_metadata_of_every_version(version):
    fields = astuple(GROUP)  # in the schema's order
    value = _core.record_value(records.GROUP_METADATA_KEY, version, fields)
    decoded = records.read_group_value(value)
    if version < 3:  # no static membership
        assert [m.group_instance_id for m in decoded.members] == [None, None]
    if version < 2:
        assert decoded.state_timestamp_ms == -1
    if version < 1:  # one timeout: the session timeout
        assert [m.rebalance_timeout_ms for m in decoded.members] == [10_000, 10_000]
    if version >= 3:
        assert decoded == GROUP


def test_group_metadata_record_keeps_its_value():
    value = records.group_value(GROUP)
    assert value[:2] == struct.pack(">h", records.GROUP_VALUE_VERSION)
    key = records.group_key("g")
    assert records.decode(key, value) == records.GroupMetadata("g", value)
    assert records.decode(key, None) == records.GroupTombstone("g")
    assert records.read_group_value(value) == GROUP


@pytest.mark.parametrize("kind", [4, 9, 17, 1000, -1])
def test_unknown_and_obsolete_record_types_are_skipped(kind):
    """As before: types corral does not keep (the obsolete partition metadata, 4, and those it
    does not know) decode to None, whatever their value holds."""
    key = struct.pack(">h", kind) + b"\x00\x01g"
    assert records.decode(key, b"\x00\x00garbage") is None
    assert records.decode(key, None) is None


@pytest.mark.parametrize(
    "key",
    [
        cr.key_of(cr.GroupEpoch("g", 1)),
        _core.record_key(records.OFFSET_COMMIT_KEY, ("g", "t", 0)),
    ],
)
def test_unknown_value_versions_raise(key):
    kind = struct.unpack_from(">h", key)[0]
    version = 1 if kind == cr.GROUP_EPOCH else 5
    with pytest.raises(ValueError, match="not supported"):
        records.decode(key, struct.pack(">h", version) + bytes(40))
    with pytest.raises(ValueError, match="not supported"):
        records.read_group_value(struct.pack(">h", 5) + bytes(40))


def _all_records() -> list[tuple[bytes, bytes]]:
    pairs = [(cr.key_of(r), cr.value_of(r)) for r in CONSUMER_RECORDS]
    pairs.append(
        (
            _core.record_key(records.OFFSET_COMMIT_KEY, ("g", "t", 0)),
            _core.record_value(records.OFFSET_COMMIT_KEY, 4, (1, 2, "m", 3, -1, TOPIC_A)),
        )
    )
    return pairs


@pytest.mark.parametrize("pair", _all_records(), ids=lambda p: repr(p[0]))
def test_truncated_records_raise_value_error(pair):
    key, value = pair
    for cut in range(len(key)):
        with pytest.raises(ValueError):
            records.decode(key[:cut], value)
    for cut in range(len(value)):
        with pytest.raises(ValueError):
            records.decode(key, value[:cut])


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_all_records()), st.binary(max_size=64), st.integers(0, 80))
def test_malformed_bytes_raise_value_error_or_decode(pair, noise, at):
    """Bytes overwritten at random decode to some record or raise ValueError: never another
    exception, never a crash of the process."""
    key, value = pair
    value = value[:at] + noise + value[at + len(noise) :]
    try:
        records.decode(key, value)
    except ValueError:
        pass


def test_huge_counts_are_truncated_records():
    """A count past the end of the bytes is refused before anything is allocated for it."""
    value = struct.pack(">h", 0) + b"\xff\xff\xff\xff\x0f"
    with pytest.raises(ValueError, match="truncated"):
        records.decode(cr.key_of(cr.RegexTopics("g", "r", (), 0, 0)), value)


@pytest.mark.parametrize(
    ("kind", "fields", "error"),
    [
        (cr.GROUP_EPOCH, ("g", "extra"), ValueError),  # a key of one field
        (cr.GROUP_EPOCH, (None,), TypeError),  # not nullable
        (cr.GROUP_EPOCH, (7,), TypeError),  # not a string
        (99, ("g",), ValueError),  # unknown type
        (records.OFFSET_COMMIT_KEY, ("g", "t", 2**31), ValueError),  # out of an int32
        (records.OFFSET_COMMIT_KEY, ("g" * 40_000, "t", 0), ValueError),  # over an int16 length
    ],
)
def test_keys_the_format_cannot_hold_raise(kind, fields, error):
    with pytest.raises(error):
        _core.record_key(kind, fields)


def test_values_of_the_wrong_shape_raise():
    with pytest.raises(TypeError):  # a uuid is bytes
        _core.record_value(cr.TARGET_MEMBER, 0, ([("not bytes", (1,))],))
    with pytest.raises(ValueError, match="16 bytes"):
        _core.record_value(cr.TARGET_MEMBER, 0, ([(b"short", (1,))],))
    with pytest.raises(ValueError, match="version"):
        _core.record_value(cr.GROUP_EPOCH, 1, (7, 0))
    with pytest.raises(TypeError):  # an int field is never null
        _core.record_value(cr.GROUP_EPOCH, 0, (None, 0))
