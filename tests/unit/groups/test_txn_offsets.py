"""Transactional offsets in process (groups/txn_offsets.py, storage/txn_records.py): TxnOffsetCommit's
validation in classic and consumer groups, the pending offsets' replay (invisible, unstable,
committed or dropped by the producer's marker, Kafka's record-offset rule between a pending offset
and a later commit), expiry and DeleteGroups over them, and load from the log (and from a
snapshot and its tail) mid-transaction and after the marker, exactly as live."""

from __future__ import annotations

import struct

import pytest
import trio
from harness import ClassicClient, FakeLog, Topics, classic_group, converge, make_coordinator, setup

from corral import _core
from corral.errors import ErrorCode
from corral.groups.classic import ClassicState
from corral.groups.storage import records
from corral.groups.storage.txn_records import (
    TxnMarker,
    TxnOffsetCommits,
    commit_batch,
    log_records,
    marker_batch,
)
from corral.later import wait

E = ErrorCode
PID, EPOCH = 4000, 2


def coordinator_with_topic(log: FakeLog | None = None):
    topics = Topics()
    topics.add("t", 4)
    return make_coordinator(topics, log=log or FakeLog(keep=True))


def txn_commit(c, pid=PID, offsets=((0, 10),), group="g", topic="t"):
    commits = [(p, o, -1, f"m{o}") for p, o in offsets]
    assert c.offsets.txn_commit(group, pid, EPOCH, [(topic, commits)], 1000).value == E.NONE


def plain_commit(c, offsets, group="g", topic="t"):
    commits = [(p, o, -1, f"m{o}") for p, o in offsets]
    assert c.offsets.commit(group, [(topic, commits)], 1000, -1).value == E.NONE


def end(c, commit: bool, pid=PID) -> ErrorCode:
    return c.complete_transaction(0, pid, EPOCH, commit, 7).value


def seen(c, partitions=(0,), stable=False, group="g"):
    """{partition: offset or the error} as OffsetFetch answers."""
    [(_, fetched)] = c.offsets.fetch(group, [("t", list(partitions))], stable)
    return {p[0]: (p[4] if len(p) == 5 else p[1]) for p in fetched}


# ================================================================================ batches ===


def test_a_txn_commit_is_a_transactional_batch_of_offset_commit_records():
    record = TxnOffsetCommits("g", PID, EPOCH, [("t", [(0, 10, 3, "x")])], 1000, -1)
    batch = commit_batch(record, 5)
    (attributes,) = struct.unpack_from(">h", batch, 21)
    pid, epoch, sequence = struct.unpack_from(">qhi", batch, 43)
    assert (attributes, pid, epoch, sequence) == (0x10, PID, EPOCH, 5)
    assert _core.validate_batches(batch, 1 << 20).batch_count == 1  # its CRC-32C holds
    [(_, key, value, rpid, repoch, control)] = log_records(batch)
    assert (rpid, repoch, control) == (PID, EPOCH, False)
    # The same key and value as a plain commit: Kafka's tools read it as one.
    [(_, _, pkey, pvalue)] = _core.decode_batches(
        _core.offset_commit_batch("g", record.topics, 1000, -1)
    )
    assert (key, value) == (pkey, pvalue)
    decoded = records.decode(key, value, (3, 42, PID, EPOCH, False))
    assert decoded == TxnOffsetCommits("g", PID, EPOCH, record.topics, 1000, -1, 42)


@pytest.mark.parametrize("commit", [True, False])
def test_a_marker_is_a_control_batch_read_back_as_the_marker(commit):
    batch = marker_batch(TxnMarker(2, PID, EPOCH, commit, 9), 1000)
    (attributes,) = struct.unpack_from(">h", batch, 21)
    (sequence,) = struct.unpack_from(">i", batch, 53)
    assert (attributes, sequence) == (0x30, -1)
    [(_, key, value, pid, epoch, control)] = log_records(batch)
    assert key == struct.pack(">hh", 0, int(commit)) and value == struct.pack(">hi", 0, 9)
    assert records.decode(key, value, (2, 0, pid, epoch, control)) == TxnMarker(
        2, PID, EPOCH, commit, 9
    )


# ============================================================================= validation ===

NO_MEMBER = ("", None, -1)


def test_validation_without_a_group():
    c = coordinator_with_topic()
    assert c.offsets.txn_commit_error("g", *NO_MEMBER, 3) == E.NONE
    assert c.offsets.txn_commit_error("g", "m", None, 1, 3) == E.ILLEGAL_GENERATION
    assert c.offsets.txn_commit_error("g", "m", None, 1, 6) == E.GROUP_ID_NOT_FOUND


def test_validation_in_a_classic_group():
    _, _, c, driver = setup()
    client = ClassicClient(driver, "c1", ["range"])
    group = classic_group(driver, [client])
    member, generation = client.member_id, client.generation
    cases = [
        # (member, instance, generation) -> TxnOffsetCommit's answer, OffsetCommit's
        (NO_MEMBER, E.NONE, E.UNKNOWN_MEMBER_ID),
        ((member, None, generation), E.NONE, E.NONE),
        ((member, None, generation + 1), E.ILLEGAL_GENERATION, E.ILLEGAL_GENERATION),
        (("other", None, generation), E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID),
        (("", "static", generation), E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID),
    ]
    for args, txn, plain in cases:
        assert c.offsets.txn_commit_error("g", *args, 3) == txn, args
        assert c.offsets.commit_error("g", *args, 8) == plain, args
    # Waiting for its assignment: a commit is told to rebalance, a transactional one never.
    group.state = ClassicState.COMPLETING_REBALANCE
    assert c.offsets.txn_commit_error("g", member, None, generation, 3) == E.NONE
    assert c.offsets.commit_error("g", member, None, generation, 8) == E.REBALANCE_IN_PROGRESS
    group.state = ClassicState.DEAD
    assert c.offsets.txn_commit_error("g", *NO_MEMBER, 3) == E.COORDINATOR_NOT_AVAILABLE


def test_validation_in_a_consumer_group():
    _, _, c, driver = setup()
    driver.join("a")
    converge(driver)
    member = driver.clients["a"]
    epoch = member.epoch
    cases = [
        (NO_MEMBER, 3, E.NONE),
        ((member.member_id, None, epoch), 3, E.NONE),
        (("unknown", None, epoch), 3, E.UNKNOWN_MEMBER_ID),
        # A newer epoch: STALE_MEMBER_EPOCH, which TxnOffsetCommit before v6 calls
        # ILLEGAL_GENERATION.
        ((member.member_id, None, epoch + 1), 3, E.ILLEGAL_GENERATION),
        ((member.member_id, None, epoch + 1), 6, E.STALE_MEMBER_EPOCH),
    ]
    for args, version, expected in cases:
        assert c.offsets.txn_commit_error("g", *args, version) == expected, (args, version)
    # The same request as a plain OffsetCommit needs a member.
    assert c.offsets.commit_error("g", *NO_MEMBER, 9) == E.UNKNOWN_MEMBER_ID


# ================================================================================= replay ===


def test_pending_offsets_are_invisible_unstable_then_committed():
    c = coordinator_with_topic()
    plain_commit(c, [(0, 3), (1, 3)])
    txn_commit(c, offsets=[(0, 10)])
    assert seen(c, (0, 1)) == {0: 3, 1: 3}
    assert seen(c, (0, 1), stable=True) == {0: E.UNSTABLE_OFFSET_COMMIT, 1: 3}
    # A fetch of everything names only committed partitions, the pending one unstable.
    [(_, everything)] = c.offsets.fetch("g", None, True)
    assert sorted(everything) == [(0, -1, -1, "", E.UNSTABLE_OFFSET_COMMIT), (1, 3, -1, "m3")]
    assert end(c, commit=True) == E.NONE
    assert seen(c, (0, 1), stable=True) == {0: 10, 1: 3}
    [(_, [(_, _, _, metadata)])] = c.offsets.fetch("g", [("t", [0])])
    assert metadata == "m10"


def test_abort_drops_the_pending_offsets():
    c = coordinator_with_topic()
    plain_commit(c, [(0, 3)])
    txn_commit(c, offsets=[(0, 10), (2, 20)])
    assert end(c, commit=False) == E.NONE
    assert seen(c, (0, 2), stable=True) == {0: 3, 2: -1}
    # The producer's next transaction starts clean.
    txn_commit(c, offsets=[(2, 21)])
    assert end(c, commit=True) == E.NONE
    assert seen(c, (0, 2), stable=True) == {0: 3, 2: 21}


# (what happens in log order) -> the committed offset of partition 0 in the end
RECORD_OFFSET_CASES = {
    "a later commit wins over the pending offset": (
        [("txn", PID, 10), ("plain", 7), ("end", PID, True)],
        7,
    ),
    "a pending offset written after a commit wins": (
        [("plain", 7), ("txn", PID, 10), ("end", PID, True)],
        10,
    ),
    "the producer's last pending offset of the partition is the one": (
        [("txn", PID, 10), ("txn", PID, 12), ("end", PID, True)],
        12,
    ),
    "a newer pending offset of another producer committed first is kept": (
        [("txn", 1, 10), ("txn", 2, 20), ("end", 2, True), ("end", 1, True)],
        20,
    ),
    "an older pending offset committed first is replaced by a newer one": (
        [("txn", 1, 10), ("txn", 2, 20), ("end", 1, True), ("end", 2, True)],
        20,
    ),
    "the newer one aborted, the older committed": (
        [("txn", 1, 10), ("txn", 2, 20), ("end", 2, False), ("end", 1, True)],
        10,
    ),
    "a pending offset whose partition was deleted is not committed": (
        [("plain", 7), ("txn", PID, 10), ("delete",), ("end", PID, True)],
        -1,
    ),
}


def _play(c, steps) -> None:
    for step in steps:
        if step[0] == "txn":
            txn_commit(c, pid=step[1], offsets=[(0, step[2])])
        elif step[0] == "plain":
            plain_commit(c, [(0, step[1])])
        elif step[0] == "delete":
            error, _, written = c.offsets.delete("g", [("t", [0])])
            assert error == E.NONE and written.value == E.NONE
        else:
            assert end(c, commit=step[2], pid=step[1]) == E.NONE


@pytest.mark.parametrize("case", list(RECORD_OFFSET_CASES))
def test_the_record_offset_rule(case):
    steps, expected = RECORD_OFFSET_CASES[case]
    c = coordinator_with_topic()
    _play(c, steps)
    assert seen(c, stable=True) == {0: expected}
    assert not c.shard_of("g").offsets.pending.open, "nothing pending after every marker"
    # Load from the log reaches the very same state.
    reloaded = coordinator_with_topic()
    reloaded.replay_all(c.writer.pairs)
    assert seen(reloaded, stable=True) == {0: expected}


def test_a_marker_of_an_unknown_producer_changes_nothing():
    c = coordinator_with_topic()
    plain_commit(c, [(0, 3)])
    assert end(c, commit=True, pid=99) == E.NONE
    assert seen(c, stable=True) == {0: 3}


# ==================================================================== expiry and deletion ===


def test_expiry_keeps_pending_partitions_and_their_group():
    c = coordinator_with_topic()
    plain_commit(c, [(0, 3), (1, 3)])
    txn_commit(c, offsets=[(0, 10)])
    far = 10**13  # every commit is long past retention
    assert c.offsets.expire(far).value == E.NONE
    assert "g" in c.groups, "a group with an open transaction is never removed"
    assert seen(c, (0, 1)) == {0: 3, 1: -1}
    assert end(c, commit=False) == E.NONE
    assert c.offsets.expire(far).value == E.NONE
    assert "g" not in c.groups


def test_delete_group_tombstones_pending_offsets_too():
    c = coordinator_with_topic()
    plain_commit(c, [(1, 3)])
    txn_commit(c, offsets=[(0, 10)])
    assert c.delete_group("g").value == E.NONE
    assert "g" not in c.groups
    assert not c.shard_of("g").offsets.pending.open
    # The marker that comes later brings nothing back.
    assert end(c, commit=True) == E.NONE
    assert "g" not in c.groups and seen(c, (0, 1)) == {0: -1, 1: -1}


# =================================================================================== load ===


def test_load_mid_transaction_then_after_the_marker():
    c = coordinator_with_topic()
    plain_commit(c, [(0, 3)])
    txn_commit(c, offsets=[(0, 10), (1, 11)])
    mid = list(c.writer.pairs)
    reloaded = coordinator_with_topic()
    reloaded.replay_all(mid)
    assert seen(reloaded, (0, 1), stable=True) == {
        0: E.UNSTABLE_OFFSET_COMMIT,
        1: E.UNSTABLE_OFFSET_COMMIT,
    }
    assert seen(reloaded, (0, 1)) == {0: 3, 1: -1}
    # The marker arrives after the restart.
    assert end(reloaded, commit=True) == E.NONE
    assert seen(reloaded, (0, 1), stable=True) == {0: 10, 1: 11}
    # And a load of the whole log (marker included) gives the same.
    assert end(c, commit=True) == E.NONE
    again = coordinator_with_topic()
    again.replay_all(c.writer.pairs)
    assert seen(again, (0, 1), stable=True) == {0: 10, 1: 11}


def test_a_snapshot_never_covers_an_open_transaction():
    c = coordinator_with_topic()
    plain_commit(c, [(0, 3)])
    shard = c.shard_of("g")
    assert shard.replay_start(len(c.writer.pairs)) == len(c.writer.pairs)
    first_txn = len(c.writer.pairs)
    txn_commit(c, offsets=[(0, 10)])
    plain_commit(c, [(1, 5)])
    # Snapshot "now", at the log's end: its replay starts at the transaction's first record.
    position = shard.replay_start(len(c.writer.pairs))
    assert position == first_txn
    snapshot = shard.snapshot_records()
    reloaded = coordinator_with_topic()
    reloaded.shard_of("g").load(snapshot)
    reloaded.shard_of("g").load(c.writer.pairs[position:])
    assert seen(reloaded, (0, 1), stable=True) == {0: E.UNSTABLE_OFFSET_COMMIT, 1: 5}
    assert end(reloaded, commit=True) == E.NONE
    assert seen(reloaded, (0, 1), stable=True) == {0: 10, 1: 5}
    # Once the marker is in, snapshots go to the log's end again.
    assert end(c, commit=True) == E.NONE
    assert shard.replay_start(len(c.writer.pairs)) == len(c.writer.pairs)


def test_unload_forgets_pending_offsets_and_load_brings_them_back():
    log = FakeLog(keep=True)
    c = coordinator_with_topic(log)
    txn_commit(c, offsets=[(0, 10)])
    shard = c.shard_of("g")
    shard.unload()
    assert not shard.offsets.pending.open
    shard.load(log.pairs)
    shard.start()
    assert seen(c, stable=True) == {0: E.UNSTABLE_OFFSET_COMMIT}
    assert end(c, commit=True) == E.NONE
    assert seen(c, stable=True) == {0: 10}


def test_complete_transaction_resolves_once_the_marker_is_durable():
    """The transaction coordinator awaits `complete_transaction` (later.wait): it resolves once
    the marker's write is durable (here: once the held log releases it), the pending offsets
    then applied."""
    log = FakeLog(keep=True)
    c = coordinator_with_topic(log)
    txn_commit(c, offsets=[(0, 10)])
    returned: list[ErrorCode] = []

    async def main():
        async with trio.open_nursery() as nursery:

            async def complete():
                returned.append(await wait(c.complete_transaction(0, PID, EPOCH, True, 7)))

            log.hold()
            nursery.start_soon(complete)
            await trio.sleep(0.01)
            assert not returned, "not before the marker is durable"
            assert seen(c, stable=True) == {0: E.UNSTABLE_OFFSET_COMMIT}
            log.release()

    trio.run(main)
    assert returned == [E.NONE]
    assert seen(c, stable=True) == {0: 10}
    # A shard that is not loaded answers its availability error.
    c.shard_of("g").unload()
    assert c.complete_transaction(0, PID, EPOCH, True, 7).value == E.NOT_COORDINATOR
