"""Fetch: whole record batches straight from the segment files, with min_bytes/max_wait long-poll.

A fetch that finds fewer than min_bytes waits until an append to one of its partitions wakes it
(or max_wait_ms passes), then reads again: no polling. Sizes follow KIP-74: each partition gets
at most partition_max_bytes and the response at most max_bytes, except that the first batch of
the first partition with data is returned whole, so a batch bigger than the limits still moves.
Incremental fetch sessions (KIP-227) are declined: every response has session id 0, so clients
keep sending full fetch requests.
"""

from __future__ import annotations

from typing import Any

import trio

from .apis import ApiKey, handles
from .errors import ErrorCode

INVALID_SESSION_ID = 0
FINAL_EPOCH = -1


@handles(ApiKey.FETCH, 4, 12)
async def fetch(broker, request) -> dict[str, Any]:
    body, version = request.body, request.api_version
    if version >= 7 and body["session_id"] != INVALID_SESSION_ID:
        # We never hand out a session id, so any other id is unknown.
        return {"error_code": ErrorCode.FETCH_SESSION_ID_NOT_FOUND, "session_id": 0, "responses": []}
    wanted = [(topic_req["topic"], part) for topic_req in body["topics"]
              for part in topic_req["partitions"]]
    deadline = trio.current_time() + max(body["max_wait_ms"], 0) / 1000
    while True:
        responses, total, errors = _read_all(broker, wanted, body["max_bytes"], version)
        remaining = deadline - trio.current_time()
        if total >= body["min_bytes"] or errors or remaining <= 0 or not wanted:
            break
        keys = [(name, part["partition"]) for name, part in wanted]
        await broker.logs.wait_for_data(keys, remaining)
    response: dict[str, Any] = {"responses": responses}
    if version >= 7:
        response.update(error_code=ErrorCode.NONE, session_id=INVALID_SESSION_ID)
    return response


def _read_all(broker, wanted, max_bytes: int, version: int) -> tuple[list[dict[str, Any]], int, bool]:
    logs = broker.logs
    by_topic: dict[str, list[dict[str, Any]]] = {}
    order: list[str] = []
    budget = max_bytes
    total = 0
    errors = False
    for name, part in wanted:
        # Looked up on every pass: the topic may be deleted while the fetch waits.
        topic = broker.topics.get(name)
        index = part["partition"]
        entry: dict[str, Any] = {"partition_index": index, "records": b""}
        if name not in by_topic:
            by_topic[name] = []
            order.append(name)
        by_topic[name].append(entry)
        if topic is None or not 0 <= index < topic.partitions:
            entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            errors = True
            continue
        limit = max(min(part["partition_max_bytes"], budget), 0)
        data, high_watermark, log_start = logs.read(topic, index, part["fetch_offset"], limit,
                                                     total == 0)
        entry.update(high_watermark=high_watermark, last_stable_offset=high_watermark)
        if version >= 5:
            entry["log_start_offset"] = log_start
        if data is None:
            entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
            errors = True
            continue
        entry["records"] = data
        total += len(data)
        budget -= len(data)
    return [{"topic": name, "partitions": by_topic[name]} for name in order], total, errors
