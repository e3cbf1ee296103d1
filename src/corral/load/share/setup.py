"""What a share-group run prepares in the parent before it forks its workers: where each partition
leads (Metadata), the group's settings (IncrementalAlterConfigs on the GROUP resource: at least
share.auto.offset.reset=earliest, so that records produced before the share partitions are
initialized are consumed too) and, with `--produce first`, the records themselves."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import trio

from corral.errors import ErrorCode
from corral.load.probe import BrokerInfo, LoadError
from corral.load.share.producer import ProduceError, produce, split
from corral.load.share.session import ShareConfig
from corral.load.wire import BrokerError, Connection
from corral.network.apis import ApiKey

GROUP_RESOURCE = 32
SET = 0
# Without it a share group starts at the log end (share.auto.offset.reset=latest).
DEFAULT_GROUP_CONFIGS = {"share.auto.offset.reset": "earliest"}
ACQUIRE_MODES = {"batch_optimized": 0, "record_limit": 1}


@dataclass
class ShareSetup:
    config: ShareConfig
    produced: list[tuple[tuple[str, int], int, int]] = field(default_factory=list)
    produce_seconds: float | None = None
    group_configs: dict[str, str] = field(default_factory=dict)


def group_configs(params: dict[str, Any]) -> dict[str, str]:
    out = dict(DEFAULT_GROUP_CONFIGS)
    for item in params.get("group_config") or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise LoadError(f"--group-config wants NAME=VALUE, got {item!r}")
        out[name.strip()] = value.strip()
    return out


def quota(partitions: dict[str, int], records: int) -> dict[tuple[str, int], int]:
    """`records` spread over every partition of the run's topics."""
    tps = [(t, p) for t, n in sorted(partitions.items()) for p in range(n)]
    return dict(zip(tps, split(records, len(tps))))


async def prepare(broker: BrokerInfo, params: dict[str, Any]) -> ShareSetup:
    host, _, port = broker.bootstrap.rpartition(":")
    try:
        conn = await Connection.open(host, int(port), broker.versions)
    except BrokerError as e:
        raise LoadError(f"cannot reach {broker.bootstrap}: {e}") from e
    try:
        with trio.fail_after(60):
            leaders, brokers = await _leaders(conn, sorted(broker.partitions))
            configs = group_configs(params)
            await _set_group_configs(conn, params["group"], configs)
    except (BrokerError, trio.TooSlowError) as e:
        raise LoadError(f"share-group setup against {broker.bootstrap}: {e}") from e
    finally:
        await conn.aclose()
    batch = params["max_records"]
    config = ShareConfig(
        leaders=leaders,
        brokers=brokers,
        max_wait_ms=params["max_wait_ms"],
        max_records=batch,
        batch_size=params["batch_size"] or batch,
        acquire_mode=ACQUIRE_MODES[params["acquire_mode"]],
        process_ms=params["process_ms"],
        topic_ids=dict(broker.topic_ids),
    )
    setup = ShareSetup(config, group_configs=configs)
    if params["produce"] == "first":
        started = time.monotonic()
        try:
            await produce(
                brokers,
                broker.versions,
                quota(broker.partitions, params["records"]),
                config.leader_of,
                params["produce_batch"],
                params["record_bytes"],
                lambda tp, base, count: setup.produced.append((tp, base, count)),
            )
        except ProduceError as e:
            raise LoadError(f"producing the run's records: {e}") from e
        setup.produce_seconds = time.monotonic() - started
    return setup


async def _leaders(
    conn: Connection, topics: list[str]
) -> tuple[dict[str, dict[int, int]], dict[int, tuple[str, int]]]:
    deadline = trio.current_time() + 30
    while True:
        answer = await conn.call(
            ApiKey.METADATA,
            {
                "topics": [{"name": t, "topic_id": bytes(16)} for t in topics],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        brokers = {b["node_id"]: (b["host"], b["port"]) for b in answer["brokers"]}
        leaders = {
            t["name"]: {p["partition_index"]: p["leader_id"] for p in t["partitions"]}
            for t in answer["topics"]
            if t["error_code"] == ErrorCode.NONE
        }
        ready = all(
            t in leaders and leaders[t] and all(n in brokers for n in leaders[t].values())
            for t in topics
        )
        if ready:
            return leaders, brokers
        if trio.current_time() > deadline:
            raise LoadError(f"no leader for every partition of {', '.join(topics)} in Metadata")
        await trio.sleep(0.5)


async def _set_group_configs(conn: Connection, group: str, configs: dict[str, str]) -> None:
    if ApiKey.INCREMENTAL_ALTER_CONFIGS not in conn.versions:
        raise LoadError(
            "the broker offers no IncrementalAlterConfigs: cannot set the share group's settings"
        )
    answer = await conn.call(
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        {
            "resources": [
                {
                    "resource_type": GROUP_RESOURCE,
                    "resource_name": group,
                    "configs": [
                        {"name": k, "config_operation": SET, "value": v}
                        for k, v in sorted(configs.items())
                    ],
                }
            ],
            "validate_only": False,
        },
    )
    result = answer["responses"][0]
    if result["error_code"] != ErrorCode.NONE:
        raise LoadError(
            f"IncrementalAlterConfigs of group {group} ({configs}): "
            f"{ErrorCode(result['error_code']).name} {result.get('error_message') or ''}".strip()
        )
