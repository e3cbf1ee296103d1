"""Fetch: whole record batches straight from the segment files, with min_bytes/max_wait long-poll.

A fetch that finds fewer than min_bytes waits until an append to one of its partitions wakes it
(or max_wait_ms passes), then reads again: no polling. Sizes follow KIP-74: each partition gets
at most partition_max_bytes and the response at most max_bytes, except that the first batch of
the first partition with data is returned whole, so a batch bigger than the limits still moves.
The compiled log store reads and encodes the response frame in one call, in a worker thread, so
record bytes never become Python objects and a cold read never stalls the event loop. Incremental
fetch sessions (KIP-227) are declined: every response has session id 0, so clients keep sending
full fetch requests. A read_committed fetch (isolation level 1) reads up to the last stable offset
and gets the aborted transactions overlapping its data; consumers drop those records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from corral.errors import ErrorCode
from corral.network.apis import ApiKey, handles
from corral.partitions.store import StorageError, storage_warning
from corral.security.acls import AclOperation
from corral.security.authorize import TOPIC, filter_allowed

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.partitions.messages import FetchRequest, FetchResponse, FetchTopic

INVALID_SESSION_ID = 0


@handles(ApiKey.FETCH, 4, 12)
async def fetch(broker: Broker, request: Request[FetchRequest]) -> FetchResponse | bytes:
    body, version = request.body, request.api_version
    if version >= 7 and body["session_id"] != INVALID_SESSION_ID:
        # We never hand out a session id, so any other id is unknown.
        return {
            "error_code": ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
            "session_id": 0,
            "responses": [],
        }
    # Consumers need READ on each topic (checked once: a fetch that waits keeps its answer).
    readable = None
    if broker.authorizer is not None:
        readable = filter_allowed(
            broker, request, AclOperation.READ, TOPIC, (t["topic"] for t in body["topics"])
        )
    keys = [
        (t["topic"], p["partition"])
        for t in body["topics"]
        for p in t["partitions"]
        if readable is None or t["topic"] in readable
    ]
    deadline = trio.current_time() + max(body["max_wait_ms"], 0) / 1000
    while True:
        # In a worker thread (the store releases the GIL): a read that misses the page cache
        # must not hold up heartbeats and commits on the event loop.
        result = await trio.to_thread.run_sync(
            broker.logs.fetch_response,
            request.correlation_id,
            version,
            _plan(broker, body["topics"], readable),
            body["max_bytes"],
            body["isolation_level"],
        )
        remaining = deadline - trio.current_time()
        if (
            result.record_bytes >= body["min_bytes"]
            or result.any_error
            or remaining <= 0
            or not keys
        ):
            return result.frame
        await broker.logs.wait_for_data(keys, remaining)


def _plan(
    broker: Broker, topics: list[FetchTopic], readable: set[str] | None
) -> list[tuple[str, list[tuple[int, int, int, int]]]]:
    """(topic, [(partition, known error or 0, fetch offset, partition max bytes)]), with the
    partitions that exist opened. Looked up on every pass: a topic may go while a fetch waits.
    `readable`: the topics the principal may READ (None: all)."""
    plan: list[tuple[str, list[tuple[int, int, int, int]]]] = []
    for topic_req in topics:
        name = topic_req["topic"]
        refused = readable is not None and name not in readable
        topic = None if refused else broker.topics.get(name)
        partitions: list[tuple[int, int, int, int]] = []
        for part in topic_req["partitions"]:
            index = part["partition"]
            error = ErrorCode.NONE
            if refused:
                error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif topic is None or not 0 <= index < topic.partitions:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif not broker.leads(topic, index):
                error = ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                try:
                    broker.logs.open(topic, index)
                except StorageError as e:
                    storage_warning(
                        "fetch", "Fetch from %s-%d answered KAFKA_STORAGE_ERROR: %s", name, index, e
                    )
                    error = ErrorCode.KAFKA_STORAGE_ERROR
            partitions.append((index, error, part["fetch_offset"], part["partition_max_bytes"]))
        plan.append((name, partitions))
    return plan
