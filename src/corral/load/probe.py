"""What a run learns before it forks its workers: the broker's versions and features, the
group's coordinator, and the topic the members consume (created when missing)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import trio

from corral.load.wire import BrokerError, Connection, negotiate
from corral.network.apis import ApiKey

MAX_PARTITIONS_PER_TOPIC = 2000
TOPIC_IDS_METADATA_VERSION = 10


class LoadError(Exception):
    """The run cannot start (broker unreachable, APIs missing, bad parameters)."""


@dataclass
class BrokerInfo:
    bootstrap: str
    coordinator: tuple[str, int]
    advertised: dict[int, tuple[int, int]]
    versions: dict[int, int]
    features: dict[str, Any]
    partitions: dict[str, int]
    topic_ids: dict[str, bytes] = field(default_factory=dict)
    created_topics: list[str] = field(default_factory=list)  # by this run (--cleanup deletes them)

    def describe(self) -> dict[str, Any]:
        return {
            "bootstrap": self.bootstrap,
            "coordinator": f"{self.coordinator[0]}:{self.coordinator[1]}",
            # Every API the broker advertises, by key: its range tells its release apart.
            "api_versions": {str(k): list(v) for k, v in sorted(self.advertised.items())},
            "versions_used": {ApiKey(k).name: v for k, v in sorted(self.versions.items())},
            **self.features,
        }


# ---------------------------------------------------------------- setup (parent, before forking)


async def probe(
    bootstrap: str,
    required: set[ApiKey],
    group: str,
    topic: str,
    partitions: int,
    skip_join: bool,
    need_topic_ids: bool = False,
) -> BrokerInfo:
    host, _, port = bootstrap.rpartition(":")
    try:
        conn = await Connection.open(host, int(port), handshake=False)
        with trio.fail_after(30):
            av = await conn.api_versions()
    except (BrokerError, OSError, trio.TooSlowError) as e:
        raise LoadError(f"cannot reach {bootstrap}: {e}") from e
    advertised = {k["api_key"]: (k["min_version"], k["max_version"]) for k in av["api_keys"]}
    versions = negotiate(advertised)
    missing = sorted(api.name for api in required if api not in versions)
    if missing:
        raise LoadError(
            f"{bootstrap} does not offer {', '.join(missing)} (in a version this "
            f"generator speaks): this scenario cannot run against it"
        )
    if need_topic_ids and versions.get(ApiKey.METADATA, 0) < TOPIC_IDS_METADATA_VERSION:
        raise LoadError(
            f"{bootstrap} offers no Metadata v{TOPIC_IDS_METADATA_VERSION}+: KIP-848 "
            "members need topic ids"
        )
    features = {
        "supported_features": {
            f["name"]: [f["min_version"], f["max_version"]]
            for f in av.get("supported_features") or []
        },
        "finalized_features": {
            f["name"]: f["max_version_level"] for f in av.get("finalized_features") or []
        },
    }
    coordinator = (host, int(port))
    conn.versions = versions
    with trio.fail_after(180):
        if not skip_join:
            coordinator = await _find_coordinator(conn, group)
            found = {
                name: await _ensure_topic(conn, name, n)
                for name, n in topic_layout(topic, partitions).items()
            }
    await conn.aclose()
    if skip_join:
        found = {topic: (partitions, b"", False)}
    return BrokerInfo(
        bootstrap,
        coordinator,
        advertised,
        versions,
        features,
        {name: n for name, (n, _, _) in found.items()},
        {name: tid for name, (_, tid, _) in found.items()},
        [name for name, (_, _, made) in found.items() if made],
    )


def topic_layout(topic: str, partitions: int) -> dict[str, int]:
    """The topics that carry `partitions` in all: one, or several of at most
    MAX_PARTITIONS_PER_TOPIC (Kafka's controller refuses a CreateTopics of more than 10,000
    records, POLICY_VIOLATION)."""
    if partitions <= MAX_PARTITIONS_PER_TOPIC:
        return {topic: partitions}
    count = -(-partitions // MAX_PARTITIONS_PER_TOPIC)
    per, extra = divmod(partitions, count)
    return {f"{topic}-{i}": per + (1 if i < extra else 0) for i in range(count)}


async def _find_coordinator(conn: Connection, group_key: str) -> tuple[str, int]:
    if ApiKey.FIND_COORDINATOR not in conn.versions:
        host, port = conn.sock.getpeername()[:2]
        return host, port
    v = conn.versions[ApiKey.FIND_COORDINATOR]
    for _ in range(60):
        body = (
            {"key_type": 0, "coordinator_keys": [group_key]}
            if v >= 4
            else {"key": group_key, "key_type": 0}
        )
        response = await conn.call(ApiKey.FIND_COORDINATOR, body)
        answer = response["coordinators"][0] if v >= 4 else response
        if answer["error_code"] == 0:
            return answer["host"], answer["port"]
        await trio.sleep(0.5)  # the offsets topic is being created: COORDINATOR_NOT_AVAILABLE
    raise LoadError(f"FindCoordinator kept failing with error {answer['error_code']}")


async def _ensure_topic(conn: Connection, topic: str, partitions: int) -> tuple[int, bytes, bool]:
    """The topic's partition count and id (Metadata v10+; else empty) and whether this call
    created it, creating it with `partitions` if it does not exist, and waiting (up to a minute:
    thousands of partitions take a while) until it is in Metadata."""
    created = made = False
    deadline = trio.current_time() + 60
    while trio.current_time() < deadline:
        response = await conn.call(
            ApiKey.METADATA, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
        )
        entry = response["topics"][0]
        if entry["error_code"] == 0 and entry["partitions"]:
            return len(entry["partitions"]), bytes(entry.get("topic_id") or b""), made
        if not created:
            if ApiKey.CREATE_TOPICS not in conn.versions:
                raise LoadError(
                    f"topic {topic} does not exist and the broker offers no CreateTopics"
                )
            answer = await conn.call(
                ApiKey.CREATE_TOPICS,
                {
                    "topics": [
                        {
                            "name": topic,
                            "num_partitions": partitions,
                            "replication_factor": 1,
                            "assignments": [],
                            "configs": [],
                        }
                    ],
                    "timeout_ms": 60000,
                },
            )
            code = answer["topics"][0]["error_code"]
            if code not in (0, 36):  # 36: TOPIC_ALREADY_EXISTS
                raise LoadError(f"CreateTopics {topic} ({partitions} partitions): error {code}")
            created, made = True, code == 0
        await trio.sleep(0.5)
    raise LoadError(f"topic {topic} did not appear in Metadata within a minute")
