"""Per-partition assignment epochs (KIP-1251, Kafka 4.3+) in process: Kafka 4.4's OffsetCommit
rule (ConsumerGroup.validateOffsetCommit and its per-partition validator) as a table over a group
rebuilt from its records, the records' epochs surviving replay (a snapshot is the same records),
Kafka's defaults for records without them, and OffsetFetch, which still wants the exact epoch.
The wire comparison with Kafka 4.4 is tests/wire/test_assignment_epochs_wire.py."""

from __future__ import annotations

import pytest

from corral.errors import ErrorCode
from corral.groups.consumer import ConsumerGroup
from corral.groups.storage import consumer_records as cr

T1, T2 = b"\x01" * 16, b"\x02" * 16
OK, STALE, ILLEGAL = ErrorCode.NONE, ErrorCode.STALE_MEMBER_EPOCH, ErrorCode.ILLEGAL_GENERATION


def group_of(*records) -> ConsumerGroup:
    """A group rebuilt from the bytes of its records, as a restart does."""
    group = ConsumerGroup("g")
    for record in records:
        group.replay(cr.decode(cr.key_of(record), cr.value_of(record)))
    return group


def member(member_id="m", classic=None) -> cr.MemberMetadata:
    return cr.MemberMetadata(
        "g", member_id, None, None, "c", "/127.0.0.1", ("t",), "", 45000, None, classic
    )


# Member at epoch 7: T1-0 assigned at 3, T1-1 at 7, T1-2 pending revocation since 5.
CURRENT = cr.CurrentAssignment(
    "g", "m", 7, 6, 1, {T1: (0, 1)}, {T1: (2,)}, {T1: (3, 7)}, {T1: (5,)}
)

# (name, request epoch, committed (topic id, partition), expected for a consumer member)
CASES = [
    ("current epoch, anything", 7, [(T1, 0), (T1, 9), (T2, 0)], OK),
    ("newer epoch", 8, [(T1, 0)], STALE),
    ("older, kept since before", 6, [(T1, 0)], OK),
    ("older, equal to its assignment epoch", 3, [(T1, 0)], OK),
    ("older than its assignment epoch", 2, [(T1, 0)], STALE),
    ("older, newly assigned at the bump", 6, [(T1, 1)], STALE),
    ("older, pending revocation since before", 5, [(T1, 2)], OK),
    ("older than a pending one's epoch", 4, [(T1, 2)], STALE),
    ("older, a partition it does not hold", 6, [(T1, 3)], STALE),
    ("older, a topic it does not hold", 6, [(T2, 0)], STALE),
    ("older, one bad partition fails the commit", 6, [(T1, 0), (T1, 2), (T1, 1)], STALE),
    ("older, nothing to write", 6, [], OK),
    ("-1 from a member id of a live group", -1, [(T1, 0)], STALE),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_offset_commit_rule(case):
    _, epoch, committed, expected = case
    group = group_of(member(), CURRENT)
    assert group.validate_offset_commit("m", None, epoch, 9, lambda: committed) == expected
    # A classic member of the consumer group: the same rule, ILLEGAL_GENERATION.
    classic = group_of(member(classic=cr.ClassicMetadata(45000, [("range", b"")])), CURRENT)
    assert classic.validate_offset_commit("m", None, epoch, 8, lambda: committed) == (
        ILLEGAL if expected == STALE else expected
    )


def test_partitions_asked_for_only_with_an_older_epoch():
    group = group_of(member(), CURRENT)

    def never():
        raise AssertionError("partitions asked for")

    for epoch in (7, 8):
        group.validate_offset_commit("m", None, epoch, 9, never)
    assert group.validate_offset_commit("x", None, 6, 9, never) == ErrorCode.UNKNOWN_MEMBER_ID
    assert group.validate_offset_commit("m", None, 6, 8, never) == ErrorCode.UNSUPPORTED_VERSION


def test_offset_fetch_still_wants_the_current_epoch():
    group = group_of(member(), CURRENT)
    assert group.validate_offset_fetch("m", 7) == OK
    assert group.validate_offset_fetch("m", 6) == STALE


def test_a_record_without_epochs_reads_as_the_member_epoch():
    """Kafka's assignmentFromTopicPartitions: no AssignmentEpochs (a record of Kafka < 4.3 or of
    an older corral), or a list of another length, is max(member epoch, 0) for each partition."""
    old = cr.CurrentAssignment(
        "g", "m", 7, 6, 0, {T1: (0, 1), T2: (4,)}, {}, {T2: (1, 2)}
    )  # T2: length mismatch
    group = group_of(member(), old)
    assert group.members["m"].current.held_epochs() == {T1: {0: 7, 1: 7}, T2: {4: 7}}
    assert group.validate_offset_commit("m", None, 6, 9, lambda: [(T1, 0)]) == STALE
    static_left = cr.CurrentAssignment("g", "m", -2, 6, 0, {T1: (0,)}, {})
    assert group_of(member(), static_left).members["m"].current.held_epochs() == {T1: {0: 0}}


def test_epochs_survive_replay_and_are_written_for_every_topic():
    group = group_of(member(), CURRENT)
    assert group.members["m"].current.held_epochs() == {T1: {0: 3, 1: 7, 2: 5}}
    # The snapshot (and a rewrite) is the group's records: the same epochs, written out.
    [record] = [r for r in group.all_records() if isinstance(r, cr.CurrentAssignment)]
    assert record == CURRENT
    again = group_of(*group.all_records())
    assert again.members["m"].current == group.members["m"].current
