"""Data-plane requests as raw frames (CreateTopics, Produce with its record batches, Fetch,
DeleteRecords) on a `rawwire.RawClient`, at the versions a test asks for."""

from __future__ import annotations

import struct

from rawwire import RawClient

from corral import _core
from corral.network.apis import ApiKey


def produce_body(topic: str, partition: int, records: bytes | None, acks: int = -1) -> dict:
    return {
        "acks": acks,
        "timeout_ms": 5000,
        "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": records}]}
        ],
    }


def produce(
    client: RawClient,
    topic: str,
    partition: int,
    records: bytes | None,
    version: int = 9,
    acks: int = -1,
) -> dict:
    response = client.call(ApiKey.PRODUCE, version, produce_body(topic, partition, records, acks))
    return response["responses"][0]["partition_responses"][0]


def fetch(
    client: RawClient,
    topic: str,
    partition: int,
    offset: int,
    version: int = 12,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
    max_bytes: int = 1 << 20,
    partition_max_bytes: int = 1 << 20,
) -> dict:
    body = {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "fetch_offset": offset,
                        "log_start_offset": -1,
                        "partition_max_bytes": partition_max_bytes,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    return client.call(ApiKey.FETCH, version, body)


def create(client: RawClient, name: str, partitions: int = 1, **configs: str) -> None:
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": 1,
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in configs.items()],
            }
        ],
        "timeout_ms": 5000,
        "validate_only": False,
    }
    result = client.call(ApiKey.CREATE_TOPICS, 7, body)["topics"][0]
    assert result["error_code"] == 0, result


def batch(n: int, ts: int = 1000, **producer) -> bytes:
    return _core.build_batch(
        [(f"k{i}".encode(), f"v{i}".encode()) for i in range(n)], ts, **producer
    )


def _legacy_produce(version: int, acks: int, correlation_id: int) -> bytes:
    """A Produce v0-2 request by hand (the codec starts at v3): two partitions of topic "old"."""
    header = struct.pack(">hhih", ApiKey.PRODUCE, version, correlation_id, 3) + b"raw"
    records = b"\x00" * 30

    def partition(i):
        return struct.pack(">ii", i, len(records)) + records

    body = (
        struct.pack(">hii", acks, 1000, 1)
        + struct.pack(">h", 3)
        + b"old"
        + struct.pack(">i", 2)
        + partition(0)
        + partition(1)
    )
    return struct.pack(">i", len(header + body)) + header + body


def delete_records(
    client: RawClient, topics: list[tuple[str, list[tuple[int, int]]]], version: int = 2
) -> list[tuple[str, int, int, int]]:
    """[(topic, partition, error code, low watermark)] in answer order."""
    body = {
        "timeout_ms": 5000,
        "topics": [
            {"name": name, "partitions": [{"partition_index": p, "offset": o} for p, o in parts]}
            for name, parts in topics
        ],
    }
    answer = client.call(ApiKey.DELETE_RECORDS, version, body)
    return [
        (t["name"], p["partition_index"], p["error_code"], p["low_watermark"])
        for t in answer["topics"]
        for p in t["partitions"]
    ]
