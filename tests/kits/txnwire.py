"""Transaction requests over raw frames (tests/kits/rawwire.py), for the wire tests of transactions
and the scenario run side by side against Apache Kafka: TV1 versions, as clients send them."""

from __future__ import annotations

import time

from rawwire import RawClient
from wire_data import fetch

from corral import _core
from corral.network.apis import ApiKey

TOPIC = "txw"


def init(c: RawClient, tid: str, timeout_ms: int = 60000, **ids: int) -> tuple[int, int, int]:
    body = {
        "transactional_id": tid,
        "transaction_timeout_ms": timeout_ms,
        "producer_id": ids.get("producer_id", -1),
        "producer_epoch": ids.get("producer_epoch", -1),
    }
    r = c.call(ApiKey.INIT_PRODUCER_ID, 4, body)
    return r["error_code"], r["producer_id"], r["producer_epoch"]


def add(c: RawClient, tid: str, pid: int, epoch: int, partitions: list[int]) -> list[int]:
    body = {
        "v3_and_below_transactional_id": tid,
        "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": TOPIC, "partitions": partitions}],
        "transactions": [],
    }
    r = c.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, body)
    return [
        p["partition_error_code"]
        for t in r["results_by_topic_v3_and_below"]
        for p in t["results_by_partition"]
    ]


def produce(c: RawClient, tid: str, pid: int, epoch: int, partition: int, seq: int, n: int) -> dict:
    records = _core.build_batch(
        [(f"k{i}".encode(), f"v{i}".encode()) for i in range(n)],
        1000,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=True,
    )
    body = {
        "transactional_id": tid,
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [
            {"name": TOPIC, "partition_data": [{"index": partition, "records": records}]}
        ],
    }
    return c.call(ApiKey.PRODUCE, 9, body)["responses"][0]["partition_responses"][0]


def end(c: RawClient, tid: str, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
    body = {
        "transactional_id": tid,
        "producer_id": pid,
        "producer_epoch": epoch,
        "committed": commit,
    }
    return c.call(ApiKey.END_TXN, version, body)["error_code"]


def describe(c: RawClient, tid: str) -> dict:
    return c.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]})[
        "transaction_states"
    ][0]


def latest(c: RawClient, partition: int, committed: bool) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": int(committed),
        "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": partition, "timestamp": -1}]}
        ],
    }
    return c.call(ApiKey.LIST_OFFSETS, 5, body)["topics"][0]["partitions"][0]["offset"]


def read_committed(c: RawClient, partition: int, offset: int = 0) -> dict:
    response = fetch(c, TOPIC, partition, offset)  # read_uncommitted, to build on
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": 1,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": TOPIC,
                "partitions": [
                    {
                        "partition": partition,
                        "fetch_offset": offset,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    assert response["responses"][0]["partitions"][0]["error_code"] == 0
    return c.call(ApiKey.FETCH, 12, body)["responses"][0]["partitions"][0]


def until(condition, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def txn_commit(c: RawClient, tid: str, pid: int, epoch: int, offset: int, version: int) -> int:
    body = {
        "transactional_id": tid,
        "group_id": "g-tx",
        "producer_id": pid,
        "producer_epoch": epoch,
        "generation_id": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": offset,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    }
    r = c.call(ApiKey.TXN_OFFSET_COMMIT, version, body)
    return r["topics"][0]["partitions"][0]["error_code"]


def committed_offset(c: RawClient) -> int:
    body = {"group_id": "g-tx", "topics": [{"name": TOPIC, "partition_indexes": [0]}]}
    return c.call(ApiKey.OFFSET_FETCH, 7, body)["topics"][0]["partitions"][0]["committed_offset"]
