"""`corral serve --log-format json --log-level DEBUG` (docs/operations.md): every line the broker
writes is one JSON object, and a group's life (a classic member over the wire; a KIP-848 member
with confluent-kafka) shows in DEBUG lines carrying group_id, member_id and epoch."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cgkit import FAST_GROUPS, wait_until
from confluent_kafka import Consumer
from conftest import CorralProcess
from rawwire import RawClient
from wire_groups import heartbeat, join, sync

from corral.errors import ErrorCode
from corral.network.apis import ApiKey


@pytest.fixture
def json_broker(tmp_path):
    broker = CorralProcess(tmp_path / "corral", {k: str(v) for k, v in FAST_GROUPS.items()})
    broker.args = ["--log-format", "json", "--log-level", "DEBUG"]
    broker.start()
    yield broker
    broker.proc.kill()
    broker.proc.wait()


def lines(broker) -> list[dict]:
    text = broker.log()
    # Only whole lines: the broker may be writing one.
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]


def about(broker, group: str) -> list[dict]:
    return [line for line in lines(broker) if line.get("group_id") == group]


def test_json_lines_with_group_fields(json_broker):
    broker = json_broker
    with RawClient(broker.port) as c:
        c.call(
            ApiKey.CREATE_TOPICS,
            4,
            {
                "topics": [{"name": "t", "num_partitions": 2, "replication_factor": 1}],
                "timeout_ms": 5000,
            },
        )
        joined = join(c, "classic-g")
        member, generation = joined["member_id"], joined["generation_id"]
        assert sync(c, "classic-g", generation, member, [(member, b"A")])["error_code"] == 0
        assert heartbeat(c, "classic-g", generation, member) == ErrorCode.NONE
        left = c.call(
            ApiKey.LEAVE_GROUP,
            5,
            {
                "group_id": "classic-g",
                "members": [{"member_id": member, "group_instance_id": None, "reason": "done"}],
            },
        )
        assert left["error_code"] == ErrorCode.NONE
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "consumer-g",
            "group.protocol": "consumer",
        }
    )
    consumer.subscribe(["t"])
    try:
        wait_until(
            lambda: consumer.poll(0.2) is None and len(consumer.assignment()) == 2,
            30,
            "the consumer assigned both partitions",
        )
    finally:
        consumer.close()

    def logged(group: str, needle: str, level: str = "DEBUG") -> list[dict]:
        return [
            line
            for line in about(broker, group)
            if needle in line["message"] and line["level"] == level
        ]

    wait_until(lambda: logged("consumer-g", "removed"), 20, "the consumer member's removal logged")
    for line in lines(broker):
        assert set(line) >= {"ts", "level", "logger", "message"}
    added = logged("classic-g", f"member {member} added")
    assert added and added[0]["member_id"] == member and added[0]["logger"] == "corral.groups"
    assert logged("classic-g", "PreparingRebalance -> CompletingRebalance")
    stabilized = logged("classic-g", "stabilized group", "INFO")
    assert stabilized and stabilized[0]["epoch"] == generation
    assert logged("classic-g", f"member {member} left group", "INFO")[0]["member_id"] == member
    assert logged("classic-g", f"member {member} removed")
    joined = logged("consumer-g", "joined")
    assert joined and joined[0]["member_id"]
    consumer_member = joined[0]["member_id"]
    assert logged("consumer-g", "target assignment for epoch")
    assert any(
        line["member_id"] == consumer_member and line["epoch"] >= 1
        for line in logged("consumer-g", "(stable)")
    )
    assert logged("consumer-g", f"member {consumer_member} leaves", "INFO")
    assert (
        logged("consumer-g", f"member {consumer_member} removed")[0]["member_id"] == consumer_member
    )


def test_version():
    out = subprocess.run(
        [sys.executable, "-m", "corral.cli", "--version"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.startswith("corral ") and out.split()[1][0].isdigit()
