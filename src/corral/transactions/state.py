"""A transactional id's state and the transaction coordinator's decisions on it, as pure
functions (Kafka's TransactionMetadata and TransactionCoordinator; reference/transactions.md
§2): each takes the current metadata and a request, and returns the error to answer or the
metadata to write. The coordinator (coordinator.py) writes it to `__transaction_state`, and only
once it is durable makes it current. Transaction version 1 (the EndTxn of clients up to v4): the
producer epoch is bumped by InitProducerId and by a fence, not by every EndTxn.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from corral.errors import ErrorCode

NO_PRODUCER_ID = -1
NO_EPOCH = -1
# An epoch at or past this cannot be bumped twice more: the id is rotated (Short.MAX_VALUE - 1).
EXHAUSTED_EPOCH = 32766
MAX_EPOCH = 32767


class TxnState(IntEnum):
    """Kafka's TransactionState ids (persisted)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use ("PrepareCommit")."""
        return "".join(w.capitalize() for w in self.name.split("_"))


PREPARE = frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})
COMPLETE = frozenset({TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})
STATE_NAMES = {s.kafka_name: s for s in TxnState}


@dataclass(frozen=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]] = frozenset()
    start_ms: int = -1
    update_ms: int = -1
    prev_producer_id: int = NO_PRODUCER_ID
    # The epoch before the last bump (not persisted, as in Kafka): a retried InitProducerId
    # naming it gets the current epoch again.
    last_producer_epoch: int = NO_EPOCH

    def but(self, **changes: Any) -> TxnMetadata:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class Fence:
    """InitProducerId (or a timeout) met an ongoing transaction: write this PrepareEpochFence
    epoch and abort; the requester is answered CONCURRENT_TRANSACTIONS and retries."""

    epoch: int


Decision = ErrorCode | TxnMetadata | Fence


def new_metadata(
    transactional_id: str, producer_id: int, timeout_ms: int, now_ms: int
) -> TxnMetadata:
    """An id seen for the first time: {new producer id, epoch -1, Empty}."""
    return TxnMetadata(
        transactional_id, producer_id, NO_EPOCH, timeout_ms, TxnState.EMPTY, update_ms=now_ms
    )


def _valid_producer(meta: TxnMetadata, producer_id: int, epoch: int) -> bool:
    return (
        meta.producer_epoch == NO_EPOCH
        or producer_id == meta.producer_id
        or (producer_id == meta.prev_producer_id and epoch >= EXHAUSTED_EPOCH)
    )


def init_producer_id(
    meta: TxnMetadata,
    expected_id: int,
    expected_epoch: int,
    timeout_ms: int,
    now_ms: int,
    next_producer_id: int,
) -> Decision:
    """InitProducerId with a transactional id (§2.3 steps 8-12), the pending state checked by
    the caller. `next_producer_id`: a fresh id, used if the epoch is exhausted."""
    given = expected_id != NO_PRODUCER_ID
    if given and not _valid_producer(meta, expected_id, expected_epoch):
        return ErrorCode.PRODUCER_FENCED
    if meta.state in PREPARE:
        return ErrorCode.CONCURRENT_TRANSACTIONS
    if meta.state == TxnState.ONGOING:
        return Fence(
            meta.producer_epoch if meta.producer_epoch == MAX_EPOCH else meta.producer_epoch + 1
        )
    reset = dict(
        timeout_ms=timeout_ms,
        state=TxnState.EMPTY,
        partitions=frozenset(),
        start_ms=-1,
        update_ms=now_ms,
    )
    if meta.producer_epoch >= EXHAUSTED_EPOCH and (
        not given or expected_epoch == meta.producer_epoch
    ):
        return meta.but(
            producer_id=next_producer_id,
            producer_epoch=0,
            prev_producer_id=meta.producer_id,
            last_producer_epoch=expected_epoch if given else NO_EPOCH,
            **reset,
        )
    if not given:
        return meta.but(
            producer_epoch=meta.producer_epoch + 1, last_producer_epoch=NO_EPOCH, **reset
        )
    if meta.producer_epoch == NO_EPOCH or expected_epoch == meta.producer_epoch:
        return meta.but(
            producer_epoch=meta.producer_epoch + 1, last_producer_epoch=meta.producer_epoch, **reset
        )
    if expected_epoch == meta.last_producer_epoch:
        return meta.but(**reset)  # a retry of the last bump: the same epoch again
    return ErrorCode.PRODUCER_FENCED


def check_producer(meta: TxnMetadata, producer_id: int, epoch: int) -> ErrorCode:
    if producer_id != meta.producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if epoch != meta.producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    return ErrorCode.NONE


def add_partitions(
    meta: TxnMetadata, producer_id: int, epoch: int, partitions: set[tuple[str, int]], now_ms: int
) -> ErrorCode | TxnMetadata:
    """AddPartitionsToTxn / AddOffsetsToTxn (§2.4): NONE when nothing is to be written."""
    error = check_producer(meta, producer_id, epoch)
    if error:
        return error
    if meta.state in PREPARE:
        return ErrorCode.CONCURRENT_TRANSACTIONS
    if meta.state == TxnState.ONGOING and partitions <= meta.partitions:
        return ErrorCode.NONE
    starts = meta.state != TxnState.ONGOING
    return meta.but(
        state=TxnState.ONGOING,
        partitions=(frozenset() if starts else meta.partitions) | partitions,
        start_ms=now_ms if starts else meta.start_ms,
        update_ms=now_ms,
    )


def verify(
    meta: TxnMetadata, producer_id: int, epoch: int, partition: tuple[str, int]
) -> ErrorCode:
    """AddPartitionsToTxn's VerifyOnly (KIP-890 part 1) for one partition."""
    error = check_producer(meta, producer_id, epoch)
    if error:
        return error
    if meta.state in PREPARE:
        return ErrorCode.CONCURRENT_TRANSACTIONS
    if meta.state == TxnState.ONGOING and partition in meta.partitions:
        return ErrorCode.NONE
    return ErrorCode.TRANSACTION_ABORTABLE


def end_transaction(
    meta: TxnMetadata, producer_id: int, epoch: int, commit: bool, now_ms: int
) -> ErrorCode | TxnMetadata:
    """EndTxn v0-4 (§2.5, TV1), the pending state checked by the caller: Prepare* to write,
    NONE for a retry of a finished end, or the error."""
    error = check_producer(meta, producer_id, epoch)
    if error:
        return error
    target_prepare = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
    target_complete = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
    if meta.state == TxnState.ONGOING:
        return meta.but(state=target_prepare, update_ms=now_ms)
    if meta.state == target_complete:
        return ErrorCode.NONE
    if meta.state == target_prepare:
        return ErrorCode.CONCURRENT_TRANSACTIONS
    return ErrorCode.INVALID_TXN_STATE


def abort_fenced(meta: TxnMetadata, fence_epoch: int, now_ms: int) -> TxnMetadata:
    """The abort a fence (InitProducerId during a transaction, or a timeout) writes: PrepareAbort
    at the fenced epoch, so the markers fence the old producer in every partition."""
    return meta.but(
        state=TxnState.PREPARE_ABORT,
        producer_epoch=fence_epoch,
        last_producer_epoch=meta.producer_epoch,
        update_ms=now_ms,
    )


def complete(meta: TxnMetadata, now_ms: int) -> TxnMetadata:
    """Complete* once every marker is written: the transaction's partitions are cleared."""
    state = (
        TxnState.COMPLETE_COMMIT
        if meta.state == TxnState.PREPARE_COMMIT
        else TxnState.COMPLETE_ABORT
    )
    return meta.but(state=state, partitions=frozenset(), update_ms=now_ms)


def timed_out(meta: TxnMetadata, now_ms: int) -> bool:
    return meta.state == TxnState.ONGOING and meta.start_ms + meta.timeout_ms < now_ms


def expired(meta: TxnMetadata, now_ms: int, expiration_ms: int) -> bool:
    return (meta.state == TxnState.EMPTY or meta.state in COMPLETE) and (
        meta.update_ms <= now_ms - expiration_ms
    )
