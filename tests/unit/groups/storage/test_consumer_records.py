"""KIP-848 consumer group records in `__consumer_offsets` (types 3, 5-8, 16; reference/kip848.md
§7) against Apache Kafka's own code:

- golden bytes: corral's `key_of`/`value_of` equal what Kafka 4.4.0's generated classes serialize
  (GroupCoordinatorRecordSerde) for a table of cases and for generated records, Kafka reads
  corral's bytes back to the same record, and corral's `decode` reads Kafka's bytes, including the
  AssignmentEpochs tags (KIP-1251); a member's epochs as corral replays them are those of Kafka's
  ConsumerGroupMember replaying the same record;
- round trip: decode(key_of(r), value_of(r)) == r, tombstones included;
- the log (on a real corral, with Kafka's tools): tests/clients/java/test_consumer_records_tools.py.

The JVM parts run from the caches ci/setup.sh prepares (tests/kits/kafka_records.py).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka_records import KafkaRecords, kafka_json, uuid_text

from corral.groups.consumer import ConsumerGroup
from corral.groups.storage.consumer_records import (
    CURRENT_ASSIGNMENT,
    GROUP_EPOCH,
    MEMBER_METADATA,
    PARTITION_METADATA,
    REGEX,
    TARGET_EPOCH,
    TARGET_MEMBER,
    ClassicMetadata,
    ConsumerTombstone,
    CurrentAssignment,
    GroupEpoch,
    MemberMetadata,
    RegexTopics,
    TargetEpoch,
    TargetMember,
    decode,
    key_of,
    value_of,
)

T1, T2, T3 = bytes(range(16)), b"\xff" * 16, b"\x00" * 15 + b"\x07"
LONG = "ü" * 100  # 200 bytes: a two-byte varint length


@pytest.fixture(scope="module")
def kafka():
    records = KafkaRecords()
    yield records
    records.close()


def member(**changes) -> MemberMetadata:
    fields = dict(
        group_id="g",
        member_id="m-1",
        instance_id=None,
        rack_id=None,
        client_id="c",
        client_host="/127.0.0.1",
        topic_names=("t",),
        regex=None,
        rebalance_timeout_ms=300000,
        server_assignor=None,
    )
    return MemberMetadata(**(fields | changes))


CURRENT_WITH_EPOCHS = CurrentAssignment(
    "g",
    "m-1",
    5,
    4,
    1,
    {T1: (0, 1, 2), T3: (7,)},
    {T2: (3, 4)},
    {T1: (5, 3, 1), T3: (0,)},
    {T2: (4, 2)},
)

CASES = {
    "epoch-no-hash": GroupEpoch("g", 0),
    "epoch-hash": GroupEpoch("grüppe", 7, metadata_hash=7980527202691353412),
    "epoch-negative-hash": GroupEpoch("g", 2**31 - 1, metadata_hash=-(2**63)),
    "member-nulls": member(client_id="", client_host="", topic_names=()),
    "member-full": member(
        member_id="zMVavNJETNijrZ+lDhc1Qw",
        instance_id="instance-🐄",
        rack_id="rack-ß",
        client_id="日本語-client",
        topic_names=("a", "b", LONG),
        regex="^orders-.*",
        rebalance_timeout_ms=-1,
        server_assignor="uniform",
    ),
    "member-many-topics": member(topic_names=tuple(f"t{i}" for i in range(130))),
    "member-classic": member(
        classic=ClassicMetadata(45000, [("range", b"\x00\x01\x02"), ("cooperative-sticky", b"")])
    ),
    "member-classic-no-protocols": member(classic=ClassicMetadata(0, [])),
    "member-classic-long": member(classic=ClassicMetadata(-1, [(LONG, bytes(300))])),
    "target-epoch": TargetEpoch("g", 3),
    "target-epoch-timestamp": TargetEpoch("g", -1, timestamp_ms=1795481968215),
    "target-member-empty": TargetMember("g", "m-1", {}),
    "target-member": TargetMember("g", "m-1", {T1: (0, 1, 2), T2: (5,), T3: ()}),
    "target-member-big": TargetMember("g", "m-1", {T1: tuple(range(200))}),
    "current-stable": CurrentAssignment("g", "m-1", 3, 2, 0, {T1: (0, 1)}),
    "current-revoking": CurrentAssignment(
        "g", "m-1", 2, 2, 1, {T1: (0, 1), T3: (4,)}, {T1: (2, 3), T2: tuple(range(0, 400, 3))}
    ),
    "current-unreleased": CurrentAssignment("g", "m-1", 0, -1, 2, {}, {}),
    "current-negative-state": CurrentAssignment("g", "m-1", -2, -2, -128, {T2: (2**31 - 1,)}),
    # KIP-1251: tagged AssignmentEpochs per topic, as Kafka 4.3+ writes them (a topic without
    # them, as an older writer's, too; an empty list is Kafka's default, left out).
    "current-epochs": CURRENT_WITH_EPOCHS,
    "current-epochs-partial": CurrentAssignment(
        "g", "m-1", 9, 8, 0, {T1: (0, 1), T2: (5,), T3: ()}, {}, {T1: (-2, 2**31 - 1)}
    ),
    "current-epochs-big": CurrentAssignment(
        "g", "m-1", 300, 299, 0, {T1: tuple(range(100))}, {}, {T1: tuple(range(200, 300))}
    ),
    "regex-empty": RegexTopics("g", "^nothing$", (), 0, 0),
    "regex": RegexTopics("g", "^tö.*", ("töpic-1", "topic-2", LONG), 42, 1795481968215),
    **{
        f"tombstone-{kind}": ConsumerTombstone(kind, "g", name)
        for kind, name in [
            (GROUP_EPOCH, None),
            (PARTITION_METADATA, None),
            (MEMBER_METADATA, "m-1"),
            (TARGET_EPOCH, None),
            (TARGET_MEMBER, "m-1"),
            (CURRENT_ASSIGNMENT, "m-1"),
            (REGEX, "^a|b$"),
        ]
    },
}


def hexed(data: bytes | None) -> str | None:
    return None if data is None else data.hex()


def check_against_kafka(kafka: KafkaRecords, record) -> None:
    """corral's bytes are Kafka's, Kafka reads them back, corral reads Kafka's."""
    expected = kafka_json(record)
    key, value = kafka.encode(expected)
    assert hexed(key_of(record)) == hexed(key)
    assert hexed(value_of(record)) == hexed(value)
    assert kafka.decode(key_of(record), value_of(record)) == expected
    # Kafka's type 4 (partition metadata, obsolete since 4.1) is read and dropped.
    assert decode(key, value) == (None if expected["type"] == PARTITION_METADATA else record)


@pytest.mark.parametrize("record", CASES.values(), ids=CASES.keys())
def test_golden_bytes(kafka, record):
    check_against_kafka(kafka, record)


def test_assignment_epochs_as_kafka_replays_them(kafka):
    """KIP-1251: the epochs corral keeps for a member are those Kafka's ConsumerGroupMember holds
    after replaying the same record (Builder.updateWith), for records with AssignmentEpochs and
    for records without (or with a list of another length): max(member epoch, 0) each."""
    cases = [
        CURRENT_WITH_EPOCHS,
        CurrentAssignment("g", "m-1", 5, 4, 0, {T1: (0, 1), T3: (7,)}, {}),  # none: an old writer
        CurrentAssignment("g", "m-1", -2, 4, 0, {T1: (0, 1)}, {}),  # a static member, old writer
        CurrentAssignment("g", "m-1", 5, 4, 1, {T1: (0, 1)}, {T2: (3,)}, {T1: (1,)}, {T2: (2,)}),
    ]
    for record in cases:
        replayed = kafka.member(key_of(record), value_of(record))
        group = ConsumerGroup("g")
        group.replay(decode(key_of(record), value_of(record)))
        current = group.members["m-1"].current
        mine = {
            "memberEpoch": current.epoch,
            "assignedPartitions": {},
            "partitionsPendingRevocation": {},
        }
        for name, partitions in (
            ("assignedPartitions", current.assigned),
            ("partitionsPendingRevocation", current.pending_revocation),
        ):
            for topic, ps in partitions.items():
                mine[name][uuid_text(topic)] = {
                    str(p): current.assignment_epoch(topic, p) for p in ps
                }
        assert mine == replayed, record
        # corral writes them back with every topic's epochs, as Kafka does; Kafka replays that
        # record to the same member.
        rewritten = group.members["m-1"].assignment_record("g")
        assert set(rewritten.assigned_epochs) == set(rewritten.assigned)
        assert set(rewritten.pending_epochs) == set(rewritten.pending_revocation)
        assert kafka.member(key_of(rewritten), value_of(rewritten)) == replayed


def test_null_assignment_epochs_read_as_none(kafka):
    """Kafka's writer puts a null AssignmentEpochs on the wire (the tag with a null list); an
    empty list is its default, left out. corral reads both as no epochs."""
    record = CurrentAssignment("g", "m-1", 5, 4, 0, {T1: (0, 1)}, {})
    as_null = kafka_json(record)
    as_null["value"]["assignedPartitions"][0]["assignmentEpochs"] = None
    key, value = kafka.encode(as_null)
    assert len(value) > len(value_of(record))
    assert decode(key, value) == record


# ------------------------------------------------------------------------ generated records

texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
long_texts = texts | st.text(st.characters(blacklist_categories=("Cs",)), min_size=60, max_size=90)
maybe = st.none() | texts
int8s, int32s, int64s = (st.integers(-(2 ** (n - 1)), 2 ** (n - 1) - 1) for n in (8, 32, 64))
assignments = st.dictionaries(
    st.binary(min_size=16, max_size=16), st.lists(int32s, max_size=12).map(tuple), max_size=4
)
classics = st.none() | st.builds(
    ClassicMetadata, int32s, st.lists(st.tuples(texts, st.binary(max_size=40)), max_size=3)
)

records = st.one_of(
    st.builds(GroupEpoch, long_texts, int32s, int64s | st.just(0)),
    st.builds(
        MemberMetadata,
        texts,
        long_texts,
        maybe,
        maybe,
        long_texts,
        texts,
        st.lists(texts, max_size=5).map(tuple),
        maybe,
        int32s,
        maybe,
        classics,
    ),
    st.builds(TargetEpoch, texts, int32s, int64s | st.just(0)),
    st.builds(TargetMember, texts, texts, assignments),
    st.builds(CurrentAssignment, texts, texts, int32s, int32s, int8s, assignments, assignments),
    assignments.flatmap(
        lambda assigned: st.builds(
            CurrentAssignment,
            texts,
            texts,
            int32s,
            int32s,
            int8s,
            st.just(assigned),
            assignments,
            st.fixed_dictionaries(
                {
                    t: st.lists(int32s, min_size=len(ps), max_size=len(ps)).map(tuple)
                    for t, ps in assigned.items()
                    if ps
                }
            ),
        )
    ),
    st.builds(
        RegexTopics, texts, long_texts, st.lists(long_texts, max_size=5).map(tuple), int64s, int64s
    ),
)
tombstones = st.one_of(
    st.builds(ConsumerTombstone, st.sampled_from([GROUP_EPOCH, TARGET_EPOCH]), long_texts),
    st.builds(
        ConsumerTombstone,
        st.sampled_from([MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT, REGEX]),
        texts,
        long_texts,
    ),
)


@given(records)
@settings(max_examples=300, deadline=None)
def test_round_trip(record):
    assert decode(key_of(record), value_of(record)) == record


@given(tombstones)
@settings(max_examples=100, deadline=None)
def test_tombstones_round_trip(tombstone):
    assert value_of(tombstone) is None
    assert decode(key_of(tombstone), None) == tombstone


@given(records | tombstones)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_generated_records_match_kafka(kafka, record):
    check_against_kafka(kafka, record)


# ---------------------------------------------------------------- Kafka's tools on the log
