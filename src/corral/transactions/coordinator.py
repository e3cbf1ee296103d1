"""The transaction coordinator, as Kafka's TransactionCoordinator and TransactionStateManager on a
single node: every transactional id lives in its partition of `__transaction_state`
(records.py); a change is written there, made durable (fsync), and only then made current, the
way the group coordinator's one write path works. At start the partitions are read back (last
record per id wins; the topic is compacted, so the log stays about as big as the live ids), every
transaction that was preparing has its markers written again, and ongoing ones are aborted when
they time out.

Ending a transaction: EndTxn is answered once Prepare{Commit,Abort} is durable; a task then
writes the COMMIT or ABORT marker to every partition of the transaction (control batches in the
data partitions through the log store; `__consumer_offsets` partitions through the group
coordinator, which commits or drops the transaction's pending offsets), waits for their fsync,
and writes Complete{Commit,Abort}. Until then the id answers CONCURRENT_TRANSACTIONS, which
clients retry.

The coordinator epoch is 0: one node, never a new leader of a `__transaction_state` partition.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

import trio

from corral import _core
from corral.clock import wall_ms
from corral.errors import ErrorCode
from corral.later import wait
from corral.partitions.store import StorageError, storage_warning
from corral.transactions import records, state
from corral.transactions.state import PREPARE, Fence, TxnMetadata, TxnState

if TYPE_CHECKING:
    from corral.broker import Broker
    from corral.topics.registry import Topic

log = logging.getLogger("corral.transactions")

TOPIC = "__transaction_state"
OFFSETS_TOPIC = "__consumer_offsets"
COORDINATOR_EPOCH = 0
MARKER_RETRY_S = 0.1
# The group coordinator's answers to a marker that are worth another try.
RETRIED = (
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
)


class TransactionCoordinator:
    def __init__(self, broker: Broker):
        self.broker = broker
        self.settings = broker.settings
        # Made on first use (FindCoordinator or InitProducerId with a transactional id), as
        # Kafka makes it: a broker that never saw a transaction has no such topic.
        self.topic: Topic | None = broker.topics.get(TOPIC)
        self.txns: dict[str, TxnMetadata] = {}
        # Ids with a write to `__transaction_state` in flight: others answer
        # CONCURRENT_TRANSACTIONS (Kafka's pendingState).
        self.pending: set[str] = set()
        self.loaded = False
        self._nursery: trio.Nursery | None = None

    # ------------------------------------------------------------------ lifetime

    async def run(self) -> None:
        """Loads the state, then completes, times out and expires transactions for the broker's
        lifetime."""
        # On the event loop, before anything is served (as the group coordinator loads): the
        # compacted topic holds about one record per live id.
        self.txns.update(self._read_all())
        self.loaded = True
        log.info("transaction coordinator loaded %d transactional ids", len(self.txns))
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for meta in list(self.txns.values()):
                if meta.state in PREPARE:
                    # Its markers may not all have been written: write them again.
                    nursery.start_soon(self._complete, meta)
            nursery.start_soon(self._abort_timed_out)
            nursery.start_soon(self._remove_expired)

    def ensure_topic(self) -> Topic:
        """`__transaction_state`, created now if it is not there yet (written and fsynced on the
        spot: once per broker)."""
        if self.topic is None:
            self.topic = self.broker.topics.get(TOPIC) or self.broker.topics.create_at_startup(
                TOPIC,
                self.settings["transaction.state.log.num.partitions"],
                {
                    "cleanup.policy": "compact",
                    "segment.bytes": str(self.settings["transaction.state.log.segment.bytes"]),
                },
                internal=True,
            )
        return self.topic

    def _read_all(self) -> dict[str, TxnMetadata]:
        """Every id's latest record, from each partition's log start to its end."""
        found: dict[str, TxnMetadata] = {}
        if self.topic is None:
            return found
        for _, key, value in self.broker.logs.keyed_records(self.topic):
            loaded = records.decode(key, value)
            if loaded is None:
                continue
            if loaded.meta is None:
                found.pop(loaded.transactional_id, None)
            else:
                found[loaded.transactional_id] = loaded.meta
        return found

    def partition_for(self, transactional_id: str) -> int:
        count = (
            self.topic.partitions
            if self.topic is not None
            else self.settings["transaction.state.log.num.partitions"]
        )
        return records.partition_for(transactional_id, count)

    def availability(self) -> ErrorCode:
        return ErrorCode.NONE if self.loaded else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

    # ------------------------------------------------------------------ writes

    async def _write(self, transactional_id: str, value: bytes | None) -> ErrorCode:
        """Appends one record to the id's partition and waits for its fsync (acks=-1). Errors as
        Kafka maps a failed append: COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR."""
        batch = _core.build_batch([(records.key(transactional_id), value)], wall_ms())
        topic = self.ensure_topic()
        try:
            result, _ = self.broker.logs.append(topic, self.partition_for(transactional_id), batch)
            if result.error_code:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            await self.broker.logs.flushed()
        except StorageError as e:
            storage_warning(
                "transactions", "__transaction_state write for %r failed: %s", transactional_id, e
            )
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    async def _transit(self, meta: TxnMetadata) -> ErrorCode:
        """Writes `meta` and makes it current once durable."""
        tid = meta.transactional_id
        self.pending.add(tid)
        try:
            error = await self._write(tid, records.value(meta))
            if error == ErrorCode.NONE:
                self.txns[tid] = meta
            return error
        finally:
            self.pending.discard(tid)

    def _start(self, meta: TxnMetadata) -> None:
        assert self._nursery is not None
        self._nursery.start_soon(self._complete, meta)

    async def _complete(self, meta: TxnMetadata) -> None:
        """Writes the markers of a Prepare* transaction, then Complete*; a failure is logged and
        the whole is tried again (markers are idempotent for the partitions that have them)."""
        while True:
            try:
                await self._complete_once(meta)
                return
            except Exception:
                log.exception("completing the transaction of %r failed", meta.transactional_id)
                await trio.sleep(MARKER_RETRY_S * 10)

    async def _complete_once(self, meta: TxnMetadata) -> None:
        commit = meta.state == TxnState.PREPARE_COMMIT
        while not await self._write_markers(meta, commit):
            await trio.sleep(MARKER_RETRY_S)
        while True:
            current = self.txns.get(meta.transactional_id)
            if current != meta:
                return  # replaced meanwhile (not expected: Prepare* blocks other changes)
            if await self._transit(state.complete(meta, wall_ms())) == ErrorCode.NONE:
                return
            await trio.sleep(MARKER_RETRY_S)

    async def _write_markers(self, meta: TxnMetadata, commit: bool) -> bool:
        """One marker per partition of the transaction, then one fsync for all. False to retry
        (the store failed)."""
        logs = self.broker.logs
        pid, epoch = meta.producer_id, meta.producer_epoch
        try:
            for name, partition in sorted(meta.partitions):
                if name == OFFSETS_TOPIC:
                    error = await wait(
                        self.broker.groups.complete_transaction(
                            partition, pid, epoch, commit, COORDINATOR_EPOCH
                        )
                    )
                    if error in RETRIED:
                        return False
                    continue
                topic = self.broker.topics.get(name)
                if topic is None or not 0 <= partition < topic.partitions:
                    continue  # deleted meanwhile: Kafka drops partitions with no leader
                result, _ = logs.write_marker(
                    topic, partition, pid, epoch, commit, COORDINATOR_EPOCH
                )
                if result.error_code:
                    # An older epoch than the partition has seen (a fenced producer's abort
                    # racing a newer one): the partition is done with this transaction.
                    log.warning(
                        "marker of %r for %s-%d answered error %d",
                        meta.transactional_id,
                        name,
                        partition,
                        result.error_code,
                    )
            await logs.flushed()
        except StorageError as e:
            storage_warning("transactions", "transaction markers not written (retried): %s", e)
            return False
        return True

    # ------------------------------------------------------------------ requests

    def _allocate(self) -> int:
        return self.broker.producer_ids.allocate()

    async def init_producer_id(
        self, tid: str, timeout_ms: int, expected_id: int, expected_epoch: int
    ) -> tuple[ErrorCode, int, int]:
        """InitProducerId with a transactional id: (error, producer id, epoch)."""
        none = (state.NO_PRODUCER_ID, state.NO_EPOCH)
        if tid == "":
            return (ErrorCode.INVALID_REQUEST, *none)
        if not 0 < timeout_ms <= self.settings["transaction.max.timeout.ms"]:
            return (ErrorCode.INVALID_TRANSACTION_TIMEOUT, *none)
        if not self.loaded:
            return (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, *none)
        if tid in self.pending:
            return (ErrorCode.CONCURRENT_TRANSACTIONS, *none)
        now = wall_ms()
        meta = self.txns.get(tid)
        if meta is None:
            meta = state.new_metadata(tid, self._allocate(), timeout_ms, now)
        rotated = self._allocate() if meta.producer_epoch >= state.EXHAUSTED_EPOCH else -1
        decision = state.init_producer_id(
            meta, expected_id, expected_epoch, timeout_ms, now, rotated
        )
        if isinstance(decision, Fence):
            error = await self._transit(state.abort_fenced(meta, decision.epoch, now))
            if error == ErrorCode.NONE:
                self._start(self.txns[tid])
                error = ErrorCode.CONCURRENT_TRANSACTIONS
            return (error, *none)
        if isinstance(decision, TxnMetadata):
            error = await self._transit(decision)
            if error:
                return (error, *none)
            return ErrorCode.NONE, decision.producer_id, decision.producer_epoch
        return (decision, *none)

    def _current(self, tid: str) -> TxnMetadata | ErrorCode:
        """The id's metadata, or the common checks' error ("C" in reference §2.1)."""
        if tid == "":
            return ErrorCode.INVALID_REQUEST
        if not self.loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        meta = self.txns.get(tid)
        if meta is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        return meta

    async def add_partitions(
        self, tid: str, producer_id: int, epoch: int, partitions: set[tuple[str, int]]
    ) -> ErrorCode:
        meta = self._current(tid)
        if isinstance(meta, ErrorCode):
            return meta
        if tid in self.pending:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        decision = state.add_partitions(meta, producer_id, epoch, partitions, wall_ms())
        if isinstance(decision, TxnMetadata):
            return await self._transit(decision)
        return decision

    def verify(
        self, tid: str, producer_id: int, epoch: int, partition: tuple[str, int]
    ) -> ErrorCode:
        """Whether `partition` is in the id's ongoing transaction (KIP-890 verification)."""
        meta = self._current(tid)
        if isinstance(meta, ErrorCode):
            return meta
        return state.verify(meta, producer_id, epoch, partition)

    async def end_transaction(
        self, tid: str, producer_id: int, epoch: int, commit: bool
    ) -> ErrorCode:
        meta = self._current(tid)
        if isinstance(meta, ErrorCode):
            return meta
        error = state.check_producer(meta, producer_id, epoch)
        if error:
            return error
        if tid in self.pending:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        decision = state.end_transaction(meta, producer_id, epoch, commit, wall_ms())
        if not isinstance(decision, TxnMetadata):
            return decision
        error = await self._transit(decision)
        if error == ErrorCode.NONE:
            self._start(decision)
        return error

    # ------------------------------------------------------------------ timeouts and expiry

    async def _abort_timed_out(self) -> None:
        interval = self.settings["transaction.abort.timed.out.transaction.cleanup.interval.ms"]
        while True:
            await trio.sleep(interval / 1000)
            now = wall_ms()
            for meta in [m for m in self.txns.values() if state.timed_out(m, now)]:
                tid = meta.transactional_id
                if tid in self.pending or self.txns.get(tid) != meta:
                    continue
                log.info(
                    "aborting transaction of %r (producer %d epoch %d): timed out after %d ms",
                    tid,
                    meta.producer_id,
                    meta.producer_epoch,
                    meta.timeout_ms,
                )
                fence = min(meta.producer_epoch + 1, state.MAX_EPOCH)
                if await self._transit(state.abort_fenced(meta, fence, now)) == ErrorCode.NONE:
                    self._start(self.txns[tid])

    async def _remove_expired(self) -> None:
        interval = self.settings["transaction.remove.expired.transaction.cleanup.interval.ms"]
        while True:
            await trio.sleep(interval / 1000)
            now = wall_ms()
            expiration = self.settings["transactional.id.expiration.ms"]
            for meta in [m for m in self.txns.values() if state.expired(m, now, expiration)]:
                tid = meta.transactional_id
                if tid in self.pending:
                    continue
                self.pending.add(tid)
                try:
                    if (
                        await self._write(tid, None) == ErrorCode.NONE
                        and self.txns.get(tid) == meta
                    ):
                        del self.txns[tid]
                        log.info("transactional id %r expired", tid)
                finally:
                    self.pending.discard(tid)

    # ------------------------------------------------------------------ admin

    def describe(self, tid: str) -> TxnMetadata | ErrorCode:
        if not self.loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        meta = self.txns.get(tid)
        return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND if meta is None else meta

    def listed(
        self,
        states: set[TxnState],
        producer_ids: set[int],
        min_duration_ms: int,
        pattern: re.Pattern[str] | None,
    ) -> Iterator[TxnMetadata]:
        """ListTransactions' filters (an empty set filters nothing; a duration keeps the
        transactions started at least that long ago, as Kafka's listTransactionStates)."""
        now = wall_ms()
        for meta in self.txns.values():
            if states and meta.state not in states:
                continue
            if producer_ids and meta.producer_id not in producer_ids:
                continue
            if min_duration_ms >= 0 and now - meta.start_ms < min_duration_ms:
                continue
            if pattern is not None and not pattern.fullmatch(meta.transactional_id):
                continue
            yield meta
