"""KIP-890 part 1: before a transactional write opens a producer's transaction in a partition
(a Produce batch, or TxnOffsetCommit's write to `__consumer_offsets`), the transaction coordinator
confirms that the transaction added that partition, so a late or stray write cannot open a
transaction nothing will ever end. Errors as ReplicaManager and AddPartitionsToTxnManager map
them for the writer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.errors import ErrorCode

if TYPE_CHECKING:
    from corral.broker import Broker
    from corral.topics.registry import Topic

# What the coordinator answers that the writer should retry: NOT_ENOUGH_REPLICAS to a Produce.
_RETRIED = (
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.CONCURRENT_TRANSACTIONS,
)


def verify_write(
    broker: Broker,
    transactional_id: str,
    producer_id: int,
    epoch: int,
    topic: Topic,
    partition: int,
    abortable_error: bool,
) -> ErrorCode:
    """NONE when the write may go on. `abortable_error`: the request's version knows
    TRANSACTION_ABORTABLE (Produce v11, TxnOffsetCommit v4); older ones get INVALID_TXN_STATE."""
    if not broker.settings["transaction.partition.verification.enable"]:
        return ErrorCode.NONE
    if broker.logs.in_transaction(topic, partition, producer_id, epoch):
        return ErrorCode.NONE  # already verified: its transaction is open here
    if broker.transactions is None:
        return ErrorCode.INVALID_TXN_STATE
    error = broker.transactions.verify(
        transactional_id, producer_id, epoch, (topic.name, partition)
    )
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if error == ErrorCode.TRANSACTION_ABORTABLE and not abortable_error:
        return ErrorCode.INVALID_TXN_STATE
    if error in _RETRIED:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    return error
