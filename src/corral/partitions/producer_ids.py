"""InitProducerId, and the producer id allocator.

Ids come in blocks of 1000, as Kafka's controller hands them to brokers: the end of the block in
use is persisted before any id of it is given out, so no id is reused after a restart (a crash
skips the rest of a block). The per-partition sequence state lives with each partition's log
(rust/log/producers.rs) and is rebuilt from the log on start.

An InitProducerId with a transactional id goes to the transaction coordinator
(transactions/coordinator.py), which bumps the id's epoch and fences its older producers.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.network.apis import ApiKey, handles
from corral.partitions.files import replace_durably
from corral.security.acls import AclOperation, ResourceType
from corral.security.authorize import (
    TRANSACTIONAL_ID,
    allowed,
    client_address,
    cluster_allowed,
)

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.partitions.messages import InitProducerIdRequest, InitProducerIdResponse

BLOCK_SIZE = 1000
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


class ProducerIdAllocator:
    FILE = "producer_id_block"

    def __init__(self, data_dir: Path):
        self.path = data_dir / self.FILE
        self.next_id = 0
        self.block_end = 0

    def allocate(self) -> int:
        if self.next_id >= self.block_end:
            start = int(self.path.read_text()) if self.path.exists() else 0
            self._persist(start + BLOCK_SIZE)
            self.next_id, self.block_end = start, start + BLOCK_SIZE
        self.next_id += 1
        return self.next_id - 1

    def _persist(self, block_end: int) -> None:
        replace_durably(self.path, str(block_end))


@handles(ApiKey.INIT_PRODUCER_ID, 0, 5)
async def init_producer_id(
    broker: Broker, request: Request[InitProducerIdRequest]
) -> InitProducerIdResponse:
    body = request.body
    tid = body["transactional_id"]
    if tid is not None:
        return await _transactional(broker, request, tid)
    if not _may_write_idempotently(broker, request):
        return {
            "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            "producer_id": NO_PRODUCER_ID,
            "producer_epoch": NO_PRODUCER_EPOCH,
        }
    # v3+ may name the current id and epoch (KIP-360): both or neither. Like Kafka, an idempotent
    # producer gets a fresh id either way.
    given = (body["producer_id"] != NO_PRODUCER_ID, body["producer_epoch"] != NO_PRODUCER_EPOCH)
    if given[0] != given[1]:
        return {
            "error_code": ErrorCode.INVALID_REQUEST,
            "producer_id": NO_PRODUCER_ID,
            "producer_epoch": NO_PRODUCER_EPOCH,
        }
    return {
        "error_code": ErrorCode.NONE,
        "producer_id": broker.producer_ids.allocate(),
        "producer_epoch": 0,
    }


async def _transactional(
    broker: Broker, request: Request[InitProducerIdRequest], tid: str
) -> InitProducerIdResponse:
    body, version = request.body, request.api_version
    none: InitProducerIdResponse = {
        "producer_id": NO_PRODUCER_ID,
        "producer_epoch": NO_PRODUCER_EPOCH,
    }
    if tid and not allowed(broker, request, AclOperation.WRITE, TRANSACTIONAL_ID, tid):
        return {**none, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    given = (body["producer_id"] != NO_PRODUCER_ID, body["producer_epoch"] != NO_PRODUCER_EPOCH)
    if given[0] != given[1]:
        return {**none, "error_code": ErrorCode.INVALID_REQUEST}
    if broker.transactions is None:
        return {**none, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    error, producer_id, epoch = await broker.transactions.init_producer_id(
        tid, body["transaction_timeout_ms"], body["producer_id"], body["producer_epoch"]
    )
    if error == ErrorCode.PRODUCER_FENCED and version < 4:
        error = ErrorCode.INVALID_PRODUCER_EPOCH  # KIP-588's code is v4+
    return {"error_code": error, "producer_id": producer_id, "producer_epoch": epoch}


def _may_write_idempotently(broker: Broker, request: Request[InitProducerIdRequest]) -> bool:
    """Kafka 4: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic."""
    authorizer = broker.authorizer
    if authorizer is None or cluster_allowed(
        broker, request, AclOperation.IDEMPOTENT_WRITE, log_denied=False
    ):
        return True
    return authorizer.authorize_by_resource_type(
        request.principal, client_address(request), AclOperation.WRITE, ResourceType.TOPIC
    )
