"""The group APIs on the wire: decode each version's request, ask the coordinator, shape the answer.

Fields that a version lacks are left out of the response (the codec fills schema defaults and
refuses non-default values a version cannot carry).
"""

from __future__ import annotations

from typing import Any

from ..apis import ApiKey, Later, handles
from ..errors import ErrorCode
from ..clock import wall_ms
from .classic_protocol import JoinRequest, join_error, sync_error
from .coordinator import GroupCoordinator
from .log import RequestWrites

# DescribeGroups authorized_operations when not requested (schema default).
OPERATIONS_NOT_REQUESTED = -(2**31)
# Group ACL operations (no authorizer in corral): READ, DESCRIBE, DELETE.
GROUP_OPERATIONS = (1 << 3) | (1 << 8) | (1 << 6)

COORDINATOR_GROUP = 0
COORDINATOR_TRANSACTION = 1
TRANSACTIONS_UNSUPPORTED = "corral does not implement transactions (transactional.id is not supported)"


def _coordinator(broker) -> GroupCoordinator:
    return broker.groups


# ------------------------------------------------------------------------------ FindCoordinator

@handles(ApiKey.FIND_COORDINATOR, 0, 5)
def find_coordinator(broker, request) -> dict[str, Any]:
    body, version = request.body, request.api_version
    if version >= 4:
        key_type = body["key_type"]
        return {"coordinators": [_coordinator_for(broker, key, key_type)
                                 for key in body["coordinator_keys"]]}
    key_type = body["key_type"] if version >= 1 else COORDINATOR_GROUP
    found = _coordinator_for(broker, body["key"], key_type)
    response = {"error_code": found["error_code"], "node_id": found["node_id"],
                "host": found["host"], "port": found["port"]}
    if version >= 1:
        response["error_message"] = found["error_message"]
    return response


def _coordinator_for(broker, key: str, key_type: int) -> dict[str, Any]:
    if key_type == COORDINATOR_GROUP:
        return {"key": key, "node_id": broker.node_id, "host": broker.advertised_host,
                "port": broker.advertised_port, "error_code": ErrorCode.NONE, "error_message": None}
    if key_type == COORDINATOR_TRANSACTION:
        # corral has no transaction coordinator. COORDINATOR_NOT_AVAILABLE would be retried for
        # as long as clients are let (Java 60 s, librdkafka forever); an authorization failure
        # is fatal at once in both, as InitProducerId with a transactional id answers too.
        code, message = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, TRANSACTIONS_UNSUPPORTED
    else:
        code, message = ErrorCode.INVALID_REQUEST, f"Invalid coordinator type: {key_type}"
    return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": code,
            "error_message": message}


# ------------------------------------------------------------------------------------ JoinGroup

@handles(ApiKey.JOIN_GROUP, 0, 9)
async def join_group(broker, request) -> dict[str, Any]:
    body, version = request.body, request.api_version
    if not body["group_id"]:
        return _shape_join(join_error(ErrorCode.INVALID_GROUP_ID, body["member_id"]), version)
    session = body["session_timeout_ms"]
    req = JoinRequest(
        group_id=body["group_id"], member_id=body["member_id"],
        group_instance_id=body["group_instance_id"] if version >= 5 else None,
        client_id=request.client_id or "", client_host=request.client_host,
        session_timeout_ms=session,
        # v0 has no rebalance timeout: the session timeout stands in for it.
        rebalance_timeout_ms=body["rebalance_timeout_ms"] if version >= 1 else session,
        protocol_type=body["protocol_type"],
        protocols=[(p["name"], p["metadata"]) for p in body["protocols"]],
        require_known_member_id=version >= 4,
        supports_skip_assignment=version >= 9,
        reason=body["reason"] if version >= 8 else None,
    )
    waiter = _coordinator(broker).join(req)
    return _shape_join(await waiter.wait(), version)


def _shape_join(result: dict[str, Any], version: int) -> dict[str, Any]:
    response = {"error_code": result["error_code"], "generation_id": result["generation_id"],
                "leader": result["leader"] or "", "member_id": result["member_id"]}
    members = result["members"]
    if members and version < 5:
        members = [{"member_id": m["member_id"], "metadata": m["metadata"]} for m in members]
    response["members"] = members
    if version >= 7:
        response["protocol_type"] = result["protocol_type"]
        response["protocol_name"] = result["protocol_name"]
    else:
        response["protocol_name"] = result["protocol_name"] or ""
    if version >= 9:
        response["skip_assignment"] = result["skip_assignment"]
    return response


# ------------------------------------------------------------------------------------ SyncGroup

@handles(ApiKey.SYNC_GROUP, 0, 5)
async def sync_group(broker, request) -> dict[str, Any]:
    body, version = request.body, request.api_version
    if not body["group_id"]:
        return _shape_sync(sync_error(ErrorCode.INVALID_GROUP_ID), version)
    waiter = _coordinator(broker).sync(
        body["group_id"], body["member_id"],
        body["group_instance_id"] if version >= 3 else None,
        body["generation_id"],
        body["protocol_type"] if version >= 5 else None,
        body["protocol_name"] if version >= 5 else None,
        [(a["member_id"], a["assignment"]) for a in body["assignments"]],
    )
    return _shape_sync(await waiter.wait(), version)


def _shape_sync(result: dict[str, Any], version: int) -> dict[str, Any]:
    response = {"error_code": result["error_code"], "assignment": result["assignment"]}
    if version >= 5:
        response["protocol_type"] = result["protocol_type"]
        response["protocol_name"] = result["protocol_name"]
    return response


# ----------------------------------------------------------------------- Heartbeat, LeaveGroup

@handles(ApiKey.HEARTBEAT, 0, 4)
def heartbeat(broker, request) -> bytes:
    # The steady-state path: the core hands over a tuple and encodes the answer (no dicts).
    group_id, member_id, instance_id, generation_id = request.heartbeat
    if not group_id:
        return request.respond_heartbeat(ErrorCode.INVALID_GROUP_ID)
    return request.respond_heartbeat(
        _coordinator(broker).heartbeat(group_id, member_id, instance_id, generation_id))


@handles(ApiKey.LEAVE_GROUP, 0, 5)
def leave_group(broker, request) -> Later:
    body, version = request.body, request.api_version
    if version >= 3:
        leaving = [(m["member_id"], m["group_instance_id"]) for m in body["members"]]
    else:
        leaving = [(body["member_id"], None)]
    coordinator = _coordinator(broker)
    later = Later()
    if not body["group_id"]:
        later.resolve(_shape_leave(version, leaving, ErrorCode.INVALID_GROUP_ID, []))
        return later
    with coordinator.log.for_request() as writes:
        group_error, errors = coordinator.leave(body["group_id"], leaving)
    # The last member leaving writes the empty group's record: answered once it is durable.
    writes.then(lambda error: later.resolve(_shape_leave(
        version, leaving, error or group_error, [] if error else errors)))
    return later


def _shape_leave(version: int, leaving: list, group_error: ErrorCode,
                 errors: list[ErrorCode]) -> dict[str, Any]:
    if version < 3:
        # One member: its error is the response's error.
        code = group_error or (errors[0] if errors else ErrorCode.NONE)
        return {"error_code": code}
    response: dict[str, Any] = {"error_code": group_error}
    if not group_error:
        response["members"] = [
            {"member_id": member_id, "group_instance_id": instance_id, "error_code": error}
            for (member_id, instance_id), error in zip(leaving, errors)
        ]
    return response


# --------------------------------------------------------------------------------- OffsetCommit

@handles(ApiKey.OFFSET_COMMIT, 2, 9)
def offset_commit(broker, request) -> bytes | Later:
    # The steady-state write of every consumer: kept as the Rust struct and checked per partition
    # in the core (rust/offset_commit.rs); the group-level rules are the coordinator's.
    group_id, member_id, instance_id, generation, retention, topic_names = request.offset_commit
    coordinator = _coordinator(broker)
    commit_ms = wall_ms()
    # v2-4 may set a retention; -1 (and every later version) means offsets.retention.minutes.
    expire_ms = commit_ms + retention if retention >= 0 else -1
    if not group_id:
        group_error = ErrorCode.INVALID_GROUP_ID
    else:
        group_error, _ = coordinator.validate_commit(
            group_id, member_id, instance_id, generation, request.api_version)
    partition_counts = {}
    for name in topic_names:
        topic = broker.topics.get(name)
        partition_counts[name] = topic.partitions if topic is not None else 0
    accepted, answer = request.split_offset_commit(partition_counts, group_error,
                                                   coordinator.metadata_max_bytes)
    if not accepted:
        return answer.frame()
    # Durable first (one batch, group-committed fsync), then visible and acknowledged.
    later = Later()
    coordinator.log.append_offsets(
        group_id, accepted, commit_ms, expire_ms,
        lambda: coordinator.apply_commit(group_id, accepted, commit_ms, expire_ms),
        lambda code: later.resolve(answer.frame(code)))
    return later


# ---------------------------------------------------------------------------------- OffsetFetch

@handles(ApiKey.OFFSET_FETCH, 1, 9)
def offset_fetch(broker, request) -> dict[str, Any]:
    body, version = request.body, request.api_version
    coordinator = _coordinator(broker)
    if version >= 8:
        groups = []
        for g in body["groups"]:
            topics = None if g["topics"] is None else \
                [(t["name"], t["partition_indexes"]) for t in g["topics"]]
            error, fetched = _fetch_group(coordinator, g["group_id"], topics)
            groups.append({"group_id": g["group_id"], "error_code": error,
                           "topics": _shape_fetched(fetched, version)})
        return {"groups": groups}
    topics = None if body["topics"] is None else \
        [(t["name"], t["partition_indexes"]) for t in body["topics"]]
    error, fetched = _fetch_group(coordinator, body["group_id"], topics)
    response: dict[str, Any] = {"topics": _shape_fetched(fetched, version)}
    if version >= 2:
        response["error_code"] = error
    return response


def _fetch_group(coordinator: GroupCoordinator, group_id: str,
                 topics: list[tuple[str, list[int]]] | None):
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID, []
    return ErrorCode.NONE, coordinator.fetch_offsets(group_id, topics)


def _shape_fetched(fetched, version: int) -> list[dict[str, Any]]:
    with_epoch = version >= 5
    return [
        {"name": topic, "partitions": [
            {"partition_index": p, "committed_offset": offset,
             "committed_leader_epoch": epoch if with_epoch else -1,
             "metadata": metadata, "error_code": ErrorCode.NONE}
            for p, offset, epoch, metadata in partitions]}
        for topic, partitions in fetched
    ]


# --------------------------------------------------------------------------------- OffsetDelete

@handles(ApiKey.OFFSET_DELETE, 0, 0)
def offset_delete(broker, request) -> dict[str, Any] | Later:
    body = request.body
    coordinator = _coordinator(broker)
    if not body["group_id"]:
        return {"error_code": ErrorCode.INVALID_GROUP_ID, "topics": []}
    known_topics, unknown = [], []
    for t in body["topics"]:
        partitions = [p["partition_index"] for p in t["partitions"]]
        topic = broker.topics.get(t["name"])
        if topic is None:
            unknown.append((t["name"], partitions))
            continue
        valid = [p for p in partitions if 0 <= p < topic.partitions]
        if len(valid) != len(partitions):
            unknown.append((t["name"], [p for p in partitions if p not in valid]))
        known_topics.append((t["name"], valid))
    error, deleted = coordinator.delete_offsets(body["group_id"], known_topics)
    if error:
        return {"error_code": error, "topics": []}
    tombstones = [(topic, p) for topic, parts in deleted for p, code in parts if code == ErrorCode.NONE]
    later = Later()
    with coordinator.log.for_request() as writes:
        if tombstones:
            coordinator.log.write_tombstones(body["group_id"], tombstones, None, group_too=False)
    writes.then(lambda error: later.resolve(
        {"error_code": error, "topics": []} if error else _shape_offset_delete(deleted, unknown)))
    return later


def _shape_offset_delete(deleted: list, unknown: list) -> dict[str, Any]:
    out: dict[str, list] = {}
    for topic, parts in deleted:
        out.setdefault(topic, []).extend(
            {"partition_index": p, "error_code": code} for p, code in parts)
    for topic, parts in unknown:
        out.setdefault(topic, []).extend(
            {"partition_index": p, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION} for p in parts)
    return {"error_code": ErrorCode.NONE,
            "topics": [{"name": t, "partitions": parts} for t, parts in out.items()]}


# ----------------------------------------------------------------- ListGroups, DescribeGroups

@handles(ApiKey.LIST_GROUPS, 0, 5)
def list_groups(broker, request) -> dict[str, Any]:
    body, version = request.body, request.api_version
    states = {s.lower() for s in body["states_filter"]} if version >= 4 else None
    types = {t.lower() for t in body["types_filter"]} if version >= 5 else None
    groups = _coordinator(broker).list_groups(states, types)
    for g in groups:
        if version < 5:
            del g["group_type"]
        if version < 4:
            del g["group_state"]
    return {"error_code": ErrorCode.NONE, "groups": groups}


@handles(ApiKey.DESCRIBE_GROUPS, 0, 5)
def describe_groups(broker, request) -> dict[str, Any]:
    body, version = request.body, request.api_version
    coordinator = _coordinator(broker)
    with_ops = version >= 3 and body["include_authorized_operations"]
    described = []
    for group_id in body["groups"]:
        if not group_id:
            entry = {"error_code": ErrorCode.INVALID_GROUP_ID, "group_id": group_id or "",
                     "group_state": "", "protocol_type": "", "protocol_data": "", "members": []}
        else:
            entry = coordinator.describe_group(group_id)
        if version < 4:
            for m in entry["members"]:
                m["group_instance_id"] = None
        if with_ops:
            entry["authorized_operations"] = GROUP_OPERATIONS
        described.append(entry)
    return {"groups": described}


# --------------------------------------------------------------------------------- DeleteGroups

@handles(ApiKey.DELETE_GROUPS, 0, 2)
def delete_groups(broker, request) -> Later:
    coordinator = _coordinator(broker)
    results = []
    request_writes = RequestWrites()
    for group_id in request.body["groups_names"]:
        # Each group's tombstones are its own writes: a failed one fails that group only.
        with coordinator.log.for_request() as writes:
            code = ErrorCode.INVALID_GROUP_ID if not group_id else coordinator.delete_group(group_id)
        result = {"group_id": group_id, "error_code": code}
        results.append(result)
        writes.then(_set_error(result, request_writes.track()))
    later = Later()
    request_writes.then(lambda _: later.resolve({"results": results}))
    return later


def _set_error(result: dict[str, Any], done):
    def written(error: ErrorCode) -> None:
        if error:
            result["error_code"] = error
        done(error)
    return written

