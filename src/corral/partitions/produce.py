"""Produce: validate each partition's record batch, append it as received, acknowledge.

Records stay bytes end to end: the compiled core checks the batch (sizes, magic, CRC-32C) and the
producer's sequence, assigns offsets in place and writes it; no record is decoded here. Only for a
compacted topic (cleanup.policy with `compact`) does the core read the records, decompressing them
if need be, to refuse records without a key as Kafka does. All of a request's appends share one
group-committed fsync before the response (see store.py). A partition whose append or fsync fails
(disk full, I/O error) is answered KAFKA_STORAGE_ERROR.

Transactional batches need the request's transactional id and WRITE on it. With
`transaction.partition.verification.enable` (KIP-890 part 1), the first transactional batch of a
producer's transaction in a partition is checked against the transaction coordinator: a partition
the transaction has not added is refused (INVALID_TXN_STATE, or TRANSACTION_ABORTABLE from v11),
so a late or stray batch cannot open a transaction that nothing will ever end.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from corral import _core
from corral.clock import wall_ms
from corral.errors import ErrorCode
from corral.network.apis import ApiKey, handles
from corral.partitions.store import StorageError, storage_warning
from corral.security.acls import AclOperation
from corral.security.authorize import TOPIC, TRANSACTIONAL_ID, allowed, filter_allowed
from corral.transactions.verification import verify_write

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.partitions.messages import (
        PartitionProduceResponse,
        ProduceRequest,
        ProduceResponse,
    )

LOG_APPEND_TIME = "LogAppendTime"


# Advertised from v0 because older librdkafka stops compressing when the minimum is 3
# (KAFKA-18659); v0-2 (message formats 0 and 1) get UNSUPPORTED_VERSION on every partition,
# answered inside the core (rust/codec/requests.rs) before a handler sees the request.
@handles(ApiKey.PRODUCE, 0, 12)
async def produce(broker: Broker, request: Request[ProduceRequest]) -> ProduceResponse | None:
    body, version = request.body, request.api_version
    acks = body["acks"]
    logs = broker.logs
    results: list[tuple[str, list[PartitionProduceResponse]]] = []
    appended: list[PartitionProduceResponse] = []
    needs_flush = False
    writable = None
    if broker.authorizer is not None:
        writable = filter_allowed(
            broker, request, AclOperation.WRITE, TOPIC, (t["name"] for t in body["topic_data"])
        )
    transactional_refused = _transactional_refused(broker, request)
    for topic_data in body["topic_data"]:
        name = topic_data["name"]
        topic = broker.topics.get(name)
        refused = writable is not None and name not in writable
        partitions: list[PartitionProduceResponse] = []
        for part in topic_data["partition_data"]:
            index = part["index"]
            entry: PartitionProduceResponse = {"index": index, "base_offset": -1}
            partitions.append(entry)
            if acks not in (-1, 0, 1):
                entry["error_code"] = ErrorCode.INVALID_REQUIRED_ACKS
                continue
            if refused:
                entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if topic is None or not 0 <= index < topic.partitions:
                entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if not broker.leads(topic, index):
                entry["error_code"] = ErrorCode.NOT_LEADER_OR_FOLLOWER
                continue
            if topic.internal:
                entry["error_code"] = ErrorCode.INVALID_TOPIC_EXCEPTION
                _message(entry, version, f"Cannot append to internal topic {name}")
                continue
            records = part["records"] or b""
            max_bytes = int(broker.topics.config(topic, "max.message.bytes"))
            try:
                batches = _core.validate_batches(records, max_bytes).batch_count
            except _core.InvalidBatch as e:
                entry["error_code"], message = e.args
                _message(entry, version, message)
                continue
            transactional = (
                len(records) > TRANSACTIONAL_AT and records[TRANSACTIONAL_AT] & TRANSACTIONAL_BIT
            )
            if transactional:
                producer_id, epoch = struct.unpack_from(">qh", records, PRODUCER_AT)
                error = transactional_refused or verify_write(
                    broker,
                    body["transactional_id"] or "",
                    producer_id,
                    epoch,
                    topic,
                    index,
                    abortable_error=version >= 11,
                )
                if error:
                    entry["error_code"] = error
                    continue
            if batches != 1:
                entry["error_code"] = ErrorCode.INVALID_RECORD
                _message(
                    entry,
                    version,
                    f"Produce requests with version {version} are only "
                    "allowed to contain exactly one record batch",
                )
                continue
            if "compact" in broker.topics.config(topic, "cleanup.policy").split(","):
                # Only compacted topics read their records (decompressing them if need be).
                try:
                    keyless = _core.keyless_records(records, max_bytes)
                except _core.InvalidBatch as e:
                    entry["error_code"], message = e.args
                    _message(entry, version, message)
                    continue
                if keyless:
                    _refuse_keyless(entry, version, f"{name}-{index}", keyless)
                    if version >= 5:
                        entry["log_start_offset"] = logs.offsets(topic, index)[0]
                    continue
            append_time = None
            if broker.topics.config(topic, "message.timestamp.type") == LOG_APPEND_TIME:
                append_time = wall_ms()
            try:
                result, flush = logs.append(topic, index, records, append_time)
            except StorageError as e:
                # Nothing of it was kept; the producer retries (KAFKA_STORAGE_ERROR is retriable).
                storage_warning(
                    "produce", "Produce to %s-%d answered KAFKA_STORAGE_ERROR: %s", name, index, e
                )
                entry["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
                _message(entry, version, str(e))
                continue
            entry["error_code"] = result.error_code
            if result.error_code:
                continue
            needs_flush |= flush
            entry["base_offset"] = result.base_offset
            if version >= 2:
                entry["log_append_time_ms"] = result.log_append_time
            if version >= 5:
                entry["log_start_offset"] = logs.offsets(topic, index)[0]
            appended.append(entry)
        results.append((name, partitions))
    if needs_flush:
        if acks == 0:
            logs.request_flush()
        else:
            try:
                await logs.flushed()
            except StorageError as e:
                for entry in appended:
                    entry.update({"error_code": ErrorCode.KAFKA_STORAGE_ERROR, "base_offset": -1})
                    _message(entry, version, str(e))
    if acks == 0:
        return None
    return {"responses": [{"name": name, "partition_responses": parts} for name, parts in results]}


# The transactional flag: bit 4 of the batch attributes (int16 at byte 21), in their low byte.
TRANSACTIONAL_AT = 22
TRANSACTIONAL_BIT = 0x10
PRODUCER_AT = 43


def _transactional_refused(broker: Broker, request: Request[ProduceRequest]) -> ErrorCode:
    """What every transactional batch of the request gets: TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    without a transactional id or WRITE on it (KafkaApis.handleProduceRequest), else NONE."""
    tid = request.body["transactional_id"]
    if tid is None or broker.transactions is None:
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if not allowed(broker, request, AclOperation.WRITE, TRANSACTIONAL_ID, tid):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return ErrorCode.NONE


def _message(entry: PartitionProduceResponse, version: int, message: str) -> None:
    if version >= 8:
        entry["error_message"] = message


def _refuse_keyless(
    entry: PartitionProduceResponse, version: int, partition: str, keyless: list[int]
) -> None:
    """INVALID_RECORD for a compacted topic's batch with records without a key, as Kafka's
    LogValidator (validateKey, processRecordErrors) words it: one RecordError per keyless record
    (v8+), and a message naming how many and showing the first three."""
    entry["error_code"] = ErrorCode.INVALID_RECORD
    if version < 8:
        return
    each = f"Compacted topic cannot accept message without key in topic partition {partition}"
    entry["record_errors"] = [
        {"batch_index": i, "batch_index_error_message": each} for i in keyless
    ]
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{each}')" for i in keyless[:3])
    entry["error_message"] = (
        f"One or more records have been rejected due to {len(keyless)} record "
        "errors in total, and only showing the first three errors at most: "
        f"[{shown}]"
    )
