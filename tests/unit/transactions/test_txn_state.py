"""The transaction coordinator's decisions (transactions/state.py) against Kafka's rules
(reference/transactions.md §2), table by table, and its records in Kafka's format."""

from __future__ import annotations

import pytest

from corral.errors import ErrorCode
from corral.transactions import records, state
from corral.transactions.state import Fence, TxnMetadata, TxnState

E = ErrorCode
NOW = 1_000_000


def meta(state_: TxnState = TxnState.EMPTY, epoch: int = 3, **more) -> TxnMetadata:
    return TxnMetadata("t", 10, epoch, 60000, state_, **more)


@pytest.mark.parametrize(
    ("current", "expected", "answer"),
    [
        # A new id: epoch -1 becomes 0, whatever was asked (KIP-360 allows naming it).
        (meta(epoch=-1), (-1, -1), (10, 0)),
        (meta(), (-1, -1), (10, 4)),
        (meta(TxnState.COMPLETE_COMMIT), (-1, -1), (10, 4)),
        (meta(TxnState.COMPLETE_ABORT), (10, 3), (10, 4)),
        # A retry naming the epoch before the last bump gets the current one again.
        (meta(last_producer_epoch=2), (10, 2), (10, 3)),
        (meta(), (10, 1), E.PRODUCER_FENCED),
        (meta(), (11, 3), E.PRODUCER_FENCED),
        (meta(TxnState.PREPARE_COMMIT), (-1, -1), E.CONCURRENT_TRANSACTIONS),
        (meta(TxnState.PREPARE_ABORT), (10, 3), E.CONCURRENT_TRANSACTIONS),
        # An exhausted epoch rotates the producer id.
        (meta(epoch=32766), (-1, -1), (99, 0)),
        (meta(epoch=32766), (10, 32766), (99, 0)),
    ],
)
def test_init_producer_id(current, expected, answer):
    decision = state.init_producer_id(current, *expected, 5000, NOW, 99)
    if isinstance(answer, ErrorCode):
        assert decision == answer
        return
    assert isinstance(decision, TxnMetadata)
    assert (decision.producer_id, decision.producer_epoch) == answer
    assert decision.state == TxnState.EMPTY and decision.partitions == frozenset()
    assert (decision.timeout_ms, decision.start_ms) == (5000, -1)


def test_init_producer_id_fences_an_ongoing_transaction():
    ongoing = meta(TxnState.ONGOING, partitions=frozenset({("a", 0)}), start_ms=NOW)
    assert state.init_producer_id(ongoing, -1, -1, 5000, NOW, 99) == Fence(4)
    assert state.init_producer_id(meta(TxnState.ONGOING, epoch=32767), -1, -1, 1, NOW, 9) == Fence(
        32767
    )
    aborting = state.abort_fenced(ongoing, 4, NOW + 1)
    assert (aborting.state, aborting.producer_epoch, aborting.partitions) == (
        TxnState.PREPARE_ABORT,
        4,
        ongoing.partitions,
    )
    done = state.complete(aborting, NOW + 2)
    assert (done.state, done.partitions, done.producer_epoch) == (
        TxnState.COMPLETE_ABORT,
        frozenset(),
        4,
    )


@pytest.mark.parametrize(
    ("current", "pid", "epoch", "answer"),
    [
        (meta(), 10, 3, TxnState.ONGOING),
        (meta(TxnState.COMPLETE_COMMIT), 10, 3, TxnState.ONGOING),
        (meta(TxnState.ONGOING, partitions=frozenset({("a", 0)})), 10, 3, E.NONE),
        (meta(TxnState.ONGOING, partitions=frozenset({("b", 1)})), 10, 3, TxnState.ONGOING),
        (meta(), 11, 3, E.INVALID_PRODUCER_ID_MAPPING),
        (meta(), 10, 2, E.PRODUCER_FENCED),
        (meta(TxnState.PREPARE_ABORT), 10, 3, E.CONCURRENT_TRANSACTIONS),
    ],
)
def test_add_partitions(current, pid, epoch, answer):
    decision = state.add_partitions(current, pid, epoch, {("a", 0)}, NOW)
    if isinstance(answer, ErrorCode):
        assert decision == answer
        return
    assert isinstance(decision, TxnMetadata) and decision.state == answer
    assert ("a", 0) in decision.partitions
    # A new transaction starts now; one going on keeps its start and its partitions.
    if current.state == TxnState.ONGOING:
        assert decision.start_ms == current.start_ms
        assert current.partitions <= decision.partitions
    else:
        assert (decision.start_ms, decision.partitions) == (NOW, frozenset({("a", 0)}))


@pytest.mark.parametrize(
    ("current", "commit", "answer"),
    [
        (TxnState.ONGOING, True, TxnState.PREPARE_COMMIT),
        (TxnState.ONGOING, False, TxnState.PREPARE_ABORT),
        (TxnState.COMPLETE_COMMIT, True, E.NONE),
        (TxnState.COMPLETE_ABORT, False, E.NONE),
        (TxnState.COMPLETE_COMMIT, False, E.INVALID_TXN_STATE),
        (TxnState.COMPLETE_ABORT, True, E.INVALID_TXN_STATE),
        (TxnState.PREPARE_COMMIT, True, E.CONCURRENT_TRANSACTIONS),
        (TxnState.PREPARE_COMMIT, False, E.INVALID_TXN_STATE),
        (TxnState.EMPTY, True, E.INVALID_TXN_STATE),
        (TxnState.EMPTY, False, E.INVALID_TXN_STATE),
    ],
)
def test_end_transaction_tv1(current, commit, answer):
    decision = state.end_transaction(meta(current), 10, 3, commit, NOW)
    if isinstance(answer, ErrorCode):
        assert decision == answer
    else:
        assert isinstance(decision, TxnMetadata)
        assert (decision.state, decision.producer_epoch) == (answer, 3)  # TV1: no bump


def test_end_transaction_checks_the_producer_first():
    assert state.end_transaction(meta(TxnState.ONGOING), 11, 3, True, NOW) == (
        E.INVALID_PRODUCER_ID_MAPPING
    )
    assert state.end_transaction(meta(TxnState.ONGOING), 10, 4, True, NOW) == E.PRODUCER_FENCED


def test_verify_only():
    ongoing = meta(TxnState.ONGOING, partitions=frozenset({("a", 0)}))
    assert state.verify(ongoing, 10, 3, ("a", 0)) == E.NONE
    assert state.verify(ongoing, 10, 3, ("a", 1)) == E.TRANSACTION_ABORTABLE
    assert state.verify(meta(), 10, 3, ("a", 0)) == E.TRANSACTION_ABORTABLE
    assert state.verify(ongoing, 10, 2, ("a", 0)) == E.PRODUCER_FENCED
    assert state.verify(meta(TxnState.PREPARE_COMMIT), 10, 3, ("a", 0)) == (
        E.CONCURRENT_TRANSACTIONS
    )


def test_timeouts_and_expiry():
    ongoing = meta(TxnState.ONGOING, start_ms=NOW)
    assert not state.timed_out(ongoing, NOW + 60000)
    assert state.timed_out(ongoing, NOW + 60001)
    assert not state.timed_out(meta(TxnState.PREPARE_ABORT, start_ms=0), NOW)
    assert state.expired(meta(update_ms=0), NOW, NOW)
    assert not state.expired(meta(update_ms=1), NOW, NOW)
    assert not state.expired(meta(TxnState.ONGOING, update_ms=0), NOW, NOW)


def test_state_names_are_kafkas():
    assert [s.kafka_name for s in TxnState] == [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    ]


def test_partition_for_is_javas_string_hash():
    # "hello".hashCode() = 99162322; "polygenelubricants".hashCode() = Integer.MIN_VALUE.
    assert records.partition_for("hello", 50) == 99162322 % 50
    assert records.partition_for("polygenelubricants", 50) == 0
    # A negative hash (it wraps): "zzzzzz".hashCode() = -685785664 (java, checked by hand).
    assert records.partition_for("zzzzzz", 50) == 685785664 % 50


@pytest.mark.parametrize(
    "value",
    [
        meta(),
        meta(TxnState.ONGOING, partitions=frozenset({("a", 0), ("a", 3), ("b", 1)}), start_ms=5),
        meta(TxnState.PREPARE_COMMIT, partitions=frozenset({("é", 2)}), update_ms=7),
    ],
)
def test_records_round_trip(value):
    loaded = records.decode(records.key("t"), records.value(value))
    assert loaded is not None and loaded.transactional_id == "t"
    assert loaded.meta == value
    tombstone = records.decode(records.key("t"), None)
    assert tombstone is not None and tombstone.meta is None
