"""A small admin client for any Kafka-compatible cluster, on the load generator's connections.

As Kafka's AdminClient does: versions are negotiated with each broker (ApiVersions), group
requests go to the group's coordinator (FindCoordinator, found again on NOT_COORDINATOR),
ListGroups to every broker, ListOffsets to each partition's leader (Metadata).
"""

from __future__ import annotations

from typing import Any

import trio

from corral.errors import ErrorCode
from corral.load.wire import BrokerError, Connection, negotiate
from corral.network.apis import ApiKey

# The highest version whose body this client fills in and reads.
ADMIN_MAX_VERSION = {
    ApiKey.API_VERSIONS: 3,
    ApiKey.METADATA: 12,
    ApiKey.FIND_COORDINATOR: 4,
    ApiKey.LIST_GROUPS: 5,
    ApiKey.DESCRIBE_GROUPS: 6,
    ApiKey.CONSUMER_GROUP_DESCRIBE: 1,
    ApiKey.SHARE_GROUP_DESCRIBE: 1,
    ApiKey.OFFSET_FETCH: 9,
    ApiKey.LIST_OFFSETS: 9,
    ApiKey.DELETE_TOPICS: 6,
    ApiKey.DELETE_GROUPS: 2,
    ApiKey.FETCH: 12,
}
# Answers that mean "ask again in a moment" (the coordinator is loading, moving or not ready).
RETRIABLE = {
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
}
RETRY_EVERY_S = 0.2
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2

TP = tuple[str, int]


class AdminError(Exception):
    """A request could not be answered (broker unreachable, API missing, error code)."""


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


class Admin:
    """`async with Admin("host:port") as admin:` one connection per broker, opened on demand."""

    def __init__(self, bootstrap: str, timeout_s: float = 30.0):
        host, _, port = bootstrap.rpartition(":")
        if not host or not port.isdigit():
            raise AdminError(f"--bootstrap wants HOST:PORT, got {bootstrap!r}")
        self.bootstrap = bootstrap
        self.address = (host, int(port))
        self.timeout_s = timeout_s
        self.brokers: dict[int, tuple[str, int]] = {}
        self.internal: set[str] = set()  # internal topics seen in the last Metadata answer
        self._by_address: dict[tuple[str, int], Connection] = {}
        self._coordinators: dict[str, tuple[int, str, int]] = {}

    async def __aenter__(self) -> Admin:
        await self._connect(self.address)
        return self

    async def __aexit__(self, *exc) -> None:
        for conn in self._by_address.values():
            await conn.aclose()
        self._by_address.clear()

    async def _connect(self, address: tuple[str, int]) -> Connection:
        conn = self._by_address.get(address)
        if conn is not None:
            return conn
        where = f"{address[0]}:{address[1]}"
        try:
            with trio.fail_after(self.timeout_s):
                conn = await Connection.open(*address, handshake=False)
                try:
                    answer = await conn.api_versions()
                except BaseException:
                    await conn.aclose()
                    raise
        except (BrokerError, OSError, trio.TooSlowError) as e:
            raise AdminError(f"cannot reach {where}: {str(e) or 'timed out'}") from e
        conn.versions = negotiate(
            {k["api_key"]: (k["min_version"], k["max_version"]) for k in answer["api_keys"]},
            ADMIN_MAX_VERSION,
        )
        self._by_address[address] = conn
        return conn

    def version(self, conn: Connection, api: ApiKey) -> int:
        if api not in conn.versions:
            raise AdminError(f"the broker does not offer {api.name} in a version this tool speaks")
        return conn.versions[api]

    async def call(self, conn: Connection, api: ApiKey, body: dict[str, Any]) -> dict[str, Any]:
        try:
            with trio.fail_after(self.timeout_s):
                return await conn.call(api, body, self.version(conn, api))
        except (BrokerError, trio.TooSlowError) as e:
            raise AdminError(f"{api.name}: {str(e) or 'timed out'}") from e

    async def bootstrap_connection(self) -> Connection:
        return await self._connect(self.address)

    # ------------------------------------------------------------------ cluster

    async def metadata(self, topics: list[str] | None) -> dict[str, dict[int, int]]:
        """{topic: {partition: leader node}} of `topics` (None: every topic); fills `brokers`."""
        conn = await self.bootstrap_connection()
        body: dict[str, Any] = {"allow_auto_topic_creation": False}
        body["topics"] = None if topics is None else [{"name": t} for t in topics]
        if topics is None and self.version(conn, ApiKey.METADATA) == 0:
            body["topics"] = []  # v0: an empty list means every topic
        answer = await self.call(conn, ApiKey.METADATA, body)
        self.brokers = {b["node_id"]: (b["host"], b["port"]) for b in answer["brokers"]}
        self.internal = {t["name"] for t in answer["topics"] if t.get("is_internal")}
        return {
            t["name"]: {p["partition_index"]: p["leader_id"] for p in t["partitions"]}
            for t in answer["topics"]
            if t["error_code"] == 0
        }

    async def node(self, node_id: int) -> Connection:
        if node_id not in self.brokers:
            await self.metadata([])
        if node_id not in self.brokers:
            raise AdminError(f"broker {node_id} is not in the cluster's metadata")
        return await self._connect(self.brokers[node_id])

    async def log_end_offsets(self, partitions: list[TP]) -> dict[TP, int]:
        """The latest offset of each partition (ListOffsets to its leader); partitions of topics
        that no longer exist, or whose leader answered an error, are left out."""
        if not partitions:
            return {}
        return await self.list_offsets(
            await self.metadata(sorted({t for t, _ in partitions})), partitions, LATEST_TIMESTAMP
        )

    async def list_offsets(
        self,
        leaders: dict[str, dict[int, int]],
        partitions: list[TP],
        timestamp: int,
        isolation_level: int = 0,
    ) -> dict[TP, int]:
        """ListOffsets of `partitions` at `timestamp` (LATEST, EARLIEST...), one request per
        leader of `leaders` (a `metadata` answer); errors and leaderless partitions left out.
        LATEST is the high watermark, or with isolation_level 1 the last stable offset."""
        by_leader: dict[int, dict[str, list[int]]] = {}
        for topic, p in partitions:
            leader = leaders.get(topic, {}).get(p)
            if leader is not None and leader >= 0:
                by_leader.setdefault(leader, {}).setdefault(topic, []).append(p)
        out: dict[TP, int] = {}
        for leader, topics in sorted(by_leader.items()):
            answer = await self.call(
                await self.node(leader),
                ApiKey.LIST_OFFSETS,
                {
                    "replica_id": -1,
                    "isolation_level": isolation_level,
                    "topics": [
                        {
                            "name": t,
                            "partitions": [
                                {
                                    "partition_index": p,
                                    "timestamp": timestamp,
                                    "current_leader_epoch": -1,
                                }
                                for p in ps
                            ],
                        }
                        for t, ps in topics.items()
                    ],
                },
            )
            for topic in answer["topics"]:
                for part in topic["partitions"]:
                    if part["error_code"] == 0:  # else unknown: shown as such, not a failure
                        out[(topic["name"], part["partition_index"])] = part["offset"]
        return out

    async def delete_topics(self, names: list[str]) -> dict[str, int]:
        """DeleteTopics: {topic: error code}."""
        conn = await self.bootstrap_connection()
        if self.version(conn, ApiKey.DELETE_TOPICS) >= 6:
            body = {"topics": [{"name": n} for n in names], "timeout_ms": 30000}
        else:
            body = {"topic_names": names, "timeout_ms": 30000}
        answer = await self.call(conn, ApiKey.DELETE_TOPICS, body)
        return {r["name"]: r["error_code"] for r in answer["responses"]}

    # ------------------------------------------------------------------ groups

    async def list_groups(self) -> list[dict[str, Any]]:
        """Every group of every broker: group_id, protocol_type, group_state and group_type
        (None where the broker's ListGroups version does not carry them)."""
        await self.metadata([])
        groups: dict[str, dict[str, Any]] = {}
        for node_id in sorted(self.brokers):
            conn = await self.node(node_id)
            answer = await self._retrying(
                lambda: self.call(conn, ApiKey.LIST_GROUPS, {}), lambda a: a["error_code"]
            )
            if answer["error_code"]:
                raise AdminError(f"ListGroups: {error_name(answer['error_code'])}")
            for g in answer["groups"]:
                groups[g["group_id"]] = {
                    "group_id": g["group_id"],
                    "protocol_type": g["protocol_type"],
                    "group_state": g.get("group_state"),
                    "group_type": g.get("group_type"),
                }
        return [groups[g] for g in sorted(groups)]

    async def _retrying(self, ask, code_of):
        """`await ask()`, asked again every RETRY_EVERY_S while `code_of(answer)` is RETRIABLE,
        for at most the client's timeout: the last answer."""
        deadline = trio.current_time() + self.timeout_s
        while True:
            answer = await ask()
            if code_of(answer) not in RETRIABLE or trio.current_time() > deadline:
                return answer
            await trio.sleep(RETRY_EVERY_S)

    async def coordinator(self, group: str, refresh: bool = False) -> tuple[int, str, int]:
        """(node id, host, port) of the group's coordinator."""
        if not refresh and group in self._coordinators:
            return self._coordinators[group]
        conn = await self.bootstrap_connection()
        v = self.version(conn, ApiKey.FIND_COORDINATOR)
        body = (
            {"key_type": 0, "coordinator_keys": [group]}
            if v >= 4
            else {"key": group, "key_type": 0}
        )
        # Retried: Kafka creates __consumer_offsets on the first ask.
        answer = await self._retrying(
            lambda: self.call(conn, ApiKey.FIND_COORDINATOR, body),
            lambda a: (a["coordinators"][0] if v >= 4 else a)["error_code"],
        )
        found = answer["coordinators"][0] if v >= 4 else answer
        if found["error_code"]:
            raise AdminError(f"FindCoordinator {group}: {error_name(found['error_code'])}")
        self._coordinators[group] = (found["node_id"], found["host"], found["port"])
        return self._coordinators[group]

    async def group_call(
        self, group: str, api: ApiKey, body_of, code_of
    ) -> tuple[dict, Connection]:
        """A request to the group's coordinator, retried while it loads or moves: `body_of(conn)`
        builds the body, `code_of(answer)` reads the group's error code."""
        asked: list[tuple[dict, Connection]] = []

        async def ask() -> dict:
            moved = bool(asked) and code_of(asked[-1][0]) == ErrorCode.NOT_COORDINATOR
            _, host, port = await self.coordinator(group, refresh=moved)
            conn = await self._connect((host, port))
            asked.append((await self.call(conn, api, body_of(conn)), conn))
            return asked[-1][0]

        answer = await self._retrying(ask, code_of)
        if code_of(answer) in RETRIABLE:
            raise AdminError(f"{api.name} {group}: {error_name(code_of(answer))}")
        return asked[-1]

    async def consumer_group_describe(self, group: str) -> dict | None:
        """ConsumerGroupDescribe of a KIP-848 group; None when it is no such group (or the broker
        has no ConsumerGroupDescribe): the caller asks DescribeGroups, as Kafka's admin does."""
        return await self._describe_typed_group(ApiKey.CONSUMER_GROUP_DESCRIBE, group)

    async def share_group_describe(self, group: str) -> dict | None:
        """ShareGroupDescribe of a share group (KIP-932); None when it is no such group (or the
        broker has no ShareGroupDescribe, or share groups are off)."""
        return await self._describe_typed_group(ApiKey.SHARE_GROUP_DESCRIBE, group)

    async def _describe_typed_group(self, api: ApiKey, group: str) -> dict | None:
        """ConsumerGroupDescribe or ShareGroupDescribe (the same shape) of one group."""
        conn = await self.bootstrap_connection()
        if api not in conn.versions:
            return None
        answer, _ = await self.group_call(
            group,
            api,
            lambda c: {"group_ids": [group], "include_authorized_operations": False},
            lambda a: a["groups"][0]["error_code"],
        )
        g = answer["groups"][0]
        if g["error_code"] in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNSUPPORTED_VERSION):
            return None
        if g["error_code"]:
            raise AdminError(f"{api.name} {group}: {error_name(g['error_code'])}")
        return g

    async def describe_groups(self, group: str) -> dict | None:
        """DescribeGroups of a classic group; None if it does not exist (state Dead, or
        GROUP_ID_NOT_FOUND from v6)."""
        answer, _ = await self.group_call(
            group,
            ApiKey.DESCRIBE_GROUPS,
            lambda c: {"groups": [group], "include_authorized_operations": False},
            lambda a: a["groups"][0]["error_code"],
        )
        g = answer["groups"][0]
        if g["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND or (
            g["error_code"] == 0 and g["group_state"] == "Dead"
        ):
            return None
        if g["error_code"]:
            raise AdminError(f"DescribeGroups {group}: {error_name(g['error_code'])}")
        return g

    async def committed_offsets(self, group: str) -> dict[TP, int]:
        """Every offset the group committed (OffsetFetch of all topics); -1 entries left out."""

        def body(conn: Connection) -> dict:
            if self.version(conn, ApiKey.OFFSET_FETCH) >= 8:
                return {"groups": [{"group_id": group, "topics": None}], "require_stable": False}
            return {"group_id": group, "topics": None, "require_stable": False}

        def code(answer: dict) -> int:
            return (
                answer["groups"][0]["error_code"]
                if "groups" in answer and answer["groups"]
                else answer.get("error_code", 0)
            )

        answer, conn = await self.group_call(group, ApiKey.OFFSET_FETCH, body, code)
        if code(answer):
            raise AdminError(f"OffsetFetch {group}: {error_name(code(answer))}")
        topics = (
            answer["groups"][0]["topics"]
            if self.version(conn, ApiKey.OFFSET_FETCH) >= 8
            else answer["topics"]
        )
        out: dict[TP, int] = {}
        for topic in topics:
            for part in topic["partitions"]:
                if part["error_code"]:
                    raise AdminError(
                        f"OffsetFetch {group} {topic['name']}-"
                        f"{part['partition_index']}: {error_name(part['error_code'])}"
                    )
                if part["committed_offset"] >= 0:
                    out[(topic["name"], part["partition_index"])] = part["committed_offset"]
        return out

    async def delete_groups(self, groups: list[str]) -> dict[str, int]:
        """DeleteGroups, each at its coordinator: {group: error code}."""
        out = {}
        for group in groups:
            answer, _ = await self.group_call(
                group,
                ApiKey.DELETE_GROUPS,
                lambda c: {"groups_names": [group]},
                lambda a: a["results"][0]["error_code"],
            )
            out[group] = answer["results"][0]["error_code"]
        return out
