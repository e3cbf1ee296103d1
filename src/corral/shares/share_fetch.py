"""The ShareFetch API (reference/share-groups.md §4): Kafka's checks in order, the share session
(epoch 0 opens or replaces it, n continues it, -1 closes it after the acknowledgements), the
piggy-backed acknowledgements, then acquisition: the session's partitions hand the member their
available records, MaxRecords being one budget for the whole request. A fetch that acquired
nothing waits up to MaxWaitMs for data or for records coming back. The response of a continued
session lists only partitions with records, an error or an acknowledgement result."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import trio

from corral.errors import ErrorCode
from corral.later import wait
from corral.network.apis import ApiKey, handles
from corral.security.acls import AclOperation
from corral.security.authorize import TOPIC, filter_allowed, group_read
from corral.shares.acknowledgements import acknowledge_topics
from corral.shares.sessions import FINAL_EPOCH, INITIAL_EPOCH, ShareSession

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.shares.messages import (
        ShareFetchRequest,
        ShareFetchResponse,
        ShareFetchResponsePartitionData,
    )

MAX_MEMBER_ID = 36
UNINITIALIZED = "Read operation on uninitialized share partition not allowed."
# Kafka's broker `fetch.max.bytes` default: a share fetch's MaxBytes is capped by it.
FETCH_MAX_BYTES = 55 * 1024 * 1024


def request_error(
    broker: Broker, request: Request[Any], group_id: str | None, member_id: str | None
) -> ErrorCode | None:
    """What answers a ShareFetch or ShareAcknowledge before its session is looked at: no share
    groups here, no group id, no READ on the group, a blank or overlong member id."""
    if broker.shares is None:  # cluster mode has no share groups yet
        return ErrorCode.UNSUPPORTED_VERSION
    if group_id is None:
        return ErrorCode.INVALID_REQUEST
    if broker.authorizer is not None and not group_read(broker, request, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if member_id is None or not member_id.strip() or len(member_id) > MAX_MEMBER_ID:
        return ErrorCode.INVALID_REQUEST
    return None


def by_topic(keys: Iterable[tuple[bytes, int]]) -> dict[bytes, list[int]]:
    out: dict[bytes, list[int]] = {}
    for topic_id, index in keys:
        out.setdefault(topic_id, []).append(index)
    return out


def _error(code: ErrorCode) -> ShareFetchResponse:
    return {"error_code": code, "responses": [], "node_endpoints": []}


@handles(ApiKey.SHARE_FETCH, 1, 2)
async def share_fetch(broker: Broker, request: Request[ShareFetchRequest]) -> ShareFetchResponse:
    body, version = request.body, request.api_version
    group_id, member_id = body["group_id"], body["member_id"]
    refused = request_error(broker, request, group_id, member_id)
    if refused is not None:
        return _error(refused)
    shares = broker.shares
    assert shares is not None and group_id is not None and member_id is not None, "checked"
    renew = version >= 2 and body["is_renew_ack"]
    limits = ("max_bytes", "min_bytes", "max_records", "max_wait_ms")
    if renew and any(body[k] for k in limits):  # type: ignore[literal-required]
        return _error(ErrorCode.INVALID_REQUEST)
    epoch = body["share_session_epoch"]
    requested = [
        (t["topic_id"], p["partition_index"]) for t in body["topics"] for p in t["partitions"]
    ]
    has_acks = any(p["acknowledgement_batches"] for t in body["topics"] for p in t["partitions"])
    if epoch == INITIAL_EPOCH:
        if has_acks:
            return _error(ErrorCode.INVALID_REQUEST)
        session, _replaced = shares.sessions.open(group_id, member_id, request.connection)
        if session is None:
            await trio.sleep(max(body["max_wait_ms"], 0) / 1000)
            return _error(ErrorCode.SHARE_SESSION_LIMIT_REACHED)
        broker.sessions.watch(request.connection)
        session.partitions = dict.fromkeys(requested)
    else:
        found = shares.sessions.check(group_id, member_id, epoch)
        if not isinstance(found, ShareSession):
            return _error(found)
        session = found
        if epoch != FINAL_EPOCH:
            session.next_epoch()
            for key in requested:
                session.partitions.setdefault(key, None)
            for t in body["forgotten_topics_data"]:
                for index in t["partitions"]:
                    session.partitions.pop((t["topic_id"], index), None)
    results = acknowledge_topics(broker, request, group_id, member_id, body["topics"], renew)
    ack_codes = {key: await wait(later) for key, later in results.items()}
    partitions: dict[tuple[bytes, int], ShareFetchResponsePartitionData] = {}
    if epoch == INITIAL_EPOCH:
        for key in requested:
            partitions[key] = _partition(key[1])
    for key, (code, message) in ack_codes.items():
        entry = partitions.setdefault(key, _partition(key[1]))
        entry["acknowledge_error_code"] = code
        entry["acknowledge_error_message"] = message
    if epoch == FINAL_EPOCH:
        shares.end_session(session)
    elif not renew and body["max_records"] > 0 and body["max_bytes"] > 0:
        await _fetch(broker, request, body, group_id, member_id, session, partitions)
    return {
        "error_code": ErrorCode.NONE,
        "acquisition_lock_timeout_ms": shares.lock_duration_ms(group_id),
        "responses": [
            {"topic_id": topic_id, "partitions": [partitions[(topic_id, i)] for i in indexes]}
            for topic_id, indexes in by_topic(partitions).items()
        ],
        "node_endpoints": [],
    }


def _partition(index: int) -> ShareFetchResponsePartitionData:
    return {
        "partition_index": index,
        "error_code": ErrorCode.NONE,
        "acknowledge_error_code": ErrorCode.NONE,
        "current_leader": {"leader_id": -1, "leader_epoch": -1},
        "records": b"",
        "acquired_records": [],
    }


async def _fetch(
    broker: Broker,
    request: Request[Any],
    body: ShareFetchRequest,
    group_id: str,
    member_id: str,
    session: ShareSession,
    partitions: dict[tuple[bytes, int], ShareFetchResponsePartitionData],
) -> None:
    """Acquires from the session's partitions into `partitions`, waiting up to MaxWaitMs for
    something to acquire."""
    shares = broker.shares
    assert shares is not None, "checked by share_fetch"
    topics = broker.groups.topics
    mode = body["share_acquire_mode"] if request.api_version >= 2 else 0
    deadline = trio.current_time() + max(body["max_wait_ms"], 0) / 1000
    readable: set[str] | None = None
    while True:
        budget = body["max_records"]
        keys = list(session.partitions)
        if broker.authorizer is not None and readable is None:
            names = {t.name for t in (topics.by_id(k[0]) for k in keys) if t is not None}
            readable = filter_allowed(broker, request, AclOperation.READ, TOPIC, names)
        per_partition = min(body["max_bytes"], FETCH_MAX_BYTES) // max(len(keys), 1)
        waiting_on = []
        failed = False
        for key in keys:
            topic = topics.by_id(key[0])
            error = ErrorCode.NONE
            if topic is None:
                error = ErrorCode.UNKNOWN_TOPIC_ID
            elif readable is not None and topic.name not in readable:
                error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif not 0 <= key[1] < topic.partitions:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if error:
                partitions.setdefault(key, _partition(key[1]))["error_code"] = error
                failed = True
                continue
            assert topic is not None, "an unknown topic is an error above"
            waiting_on.append((topic, key[1]))
            if budget <= 0:
                continue
            got = shares.acquire(
                group_id,
                member_id,
                topic,
                key[1],
                budget,
                max(per_partition, 1),
                mode,
                body["batch_size"],
            )
            if got is None:
                continue
            entry = partitions.setdefault(key, _partition(key[1]))
            if isinstance(got, ErrorCode):
                entry["error_code"] = got
                entry["error_message"] = UNINITIALIZED
                failed = True
                continue
            entry["records"] = got.data
            entry["acquired_records"] = [
                {"first_offset": f, "last_offset": last, "delivery_count": count}
                for f, last, count in got.acquired
            ]
            budget -= sum(last - f + 1 for f, last, _ in got.acquired)
        remaining = deadline - trio.current_time()
        acquired = budget < body["max_records"]
        if acquired or failed or remaining <= 0 or not waiting_on:
            return
        await shares.wait_for_change(waiting_on, remaining)
