"""Acknowledged group changes are durable: DeleteGroups, OffsetDelete and the record of a group
the last member left are answered only once written and fsynced; expired offsets and groups leave
memory only once their tombstones are. The coordinator's writer is
slowed (tests/kits/slow_writes.py, fault injection) so that a kill -9 right after the
answer would lose a change answered early; after a restart each change must still be there."""

from __future__ import annotations

import time

import pytest
import slow_writes
from cgkit import FAST_GROUPS
from rawwire import RawClient
from wire_groups import commit, join, sync

from corral.errors import ErrorCode
from corral.network.apis import ApiKey

SLOW_WRITES = {"command": slow_writes.command(400), **FAST_GROUPS}
TOPIC = "durable-t"


@pytest.fixture
def broker(corral_factory):
    broker = corral_factory(**SLOW_WRITES)
    with RawClient(broker.port) as client:
        created = client.call(
            ApiKey.CREATE_TOPICS,
            7,
            {
                "topics": [
                    {
                        "name": TOPIC,
                        "num_partitions": 2,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout_ms": 30000,
                "validate_only": False,
            },
        )
        assert created["topics"][0]["error_code"] == 0
    return broker


def committed(client: RawClient, group: str) -> list[int]:
    response = client.call(
        ApiKey.OFFSET_FETCH,
        7,
        {"group_id": group, "topics": [{"name": TOPIC, "partition_indexes": [0, 1]}]},
    )
    return [p["committed_offset"] for p in response["topics"][0]["partitions"]]


def groups(client: RawClient) -> dict[str, str]:
    response = client.call(ApiKey.LIST_GROUPS, 4, {"states_filter": []})
    return {g["group_id"]: g["group_state"] for g in response["groups"]}


def kill_and_restart(broker) -> RawClient:
    broker.kill()
    broker.start()
    return RawClient(broker.port)


def test_delete_groups_is_durable_when_answered(broker):
    with RawClient(broker.port) as client:
        assert commit(client, "dg", -1, "", [(TOPIC, 0, 10), (TOPIC, 1, 11)]) == [0, 0]
        response = client.call(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["dg", "never-was"]})
        assert [(r["group_id"], r["error_code"]) for r in response["results"]] == [
            ("dg", 0),
            ("never-was", ErrorCode.GROUP_ID_NOT_FOUND),
        ]
    with kill_and_restart(broker) as client:
        assert "dg" not in groups(client)
        assert committed(client, "dg") == [-1, -1]


def test_offset_delete_is_durable_when_answered(broker):
    with RawClient(broker.port) as client:
        assert commit(client, "od", -1, "", [(TOPIC, 0, 10), (TOPIC, 1, 11)]) == [0, 0]
        response = client.call(
            ApiKey.OFFSET_DELETE,
            0,
            {"group_id": "od", "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0}]}]},
        )
        assert response["error_code"] == 0, response
        assert response["topics"][0]["partitions"][0]["error_code"] == 0
    with kill_and_restart(broker) as client:
        assert committed(client, "od") == [-1, 11]


def test_the_last_member_leaving_is_durable_when_answered(broker):
    with RawClient(broker.port) as client:
        joined = join(client, "lg")
        assert joined["error_code"] == 0, joined
        member, generation = joined["member_id"], joined["generation_id"]
        synced = sync(client, "lg", generation, member, [(member, b"")])
        assert synced["error_code"] == 0, synced
        assert commit(client, "lg", generation, member, [(TOPIC, 0, 5)]) == [0]
        assert groups(client)["lg"] == "Stable"
        left = client.call(
            ApiKey.LEAVE_GROUP,
            5,
            {
                "group_id": "lg",
                "members": [{"member_id": member, "group_instance_id": None, "reason": "test"}],
            },
        )
        assert left["error_code"] == 0 and left["members"][0]["error_code"] == 0, left
    with kill_and_restart(broker) as client:
        assert groups(client)["lg"] == "Empty"
        described = client.call(
            ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["lg"], "include_authorized_operations": False}
        )
        assert described["groups"][0]["members"] == []
        assert committed(client, "lg") == [5, -1]


def test_expiry_is_durable_when_visible(corral_factory):
    broker = corral_factory(**SLOW_WRITES, **{"offsets.retention.check.interval.ms": 200})
    with RawClient(broker.port) as client:
        created = client.call(
            ApiKey.CREATE_TOPICS,
            7,
            {
                "topics": [
                    {
                        "name": TOPIC,
                        "num_partitions": 2,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout_ms": 30000,
                "validate_only": False,
            },
        )
        assert created["topics"][0]["error_code"] == 0
        # OffsetCommit v2 may set the retention: these offsets expire 1 ms after their commit.
        for group, partition, retention in (("ex", 0, 1), ("ex", 1, -1), ("gone", 0, 1)):
            response = client.call(
                ApiKey.OFFSET_COMMIT,
                2,
                {
                    "group_id": group,
                    "generation_id_or_member_epoch": -1,
                    "member_id": "",
                    "retention_time_ms": retention,
                    "topics": [
                        {
                            "name": TOPIC,
                            "partitions": [
                                {
                                    "partition_index": partition,
                                    "committed_offset": 7,
                                    "committed_metadata": "",
                                }
                            ],
                        }
                    ],
                },
            )
            assert response["topics"][0]["partitions"][0]["error_code"] == 0
        deadline = time.monotonic() + 10
        # Visible only once durable: the moment both are seen, kill -9.
        while committed(client, "ex")[0] != -1 or "gone" in groups(client):
            assert time.monotonic() < deadline, "the offsets never expired"
            time.sleep(0.01)
        assert committed(client, "ex") == [-1, 7]
    with kill_and_restart(broker) as client:
        assert committed(client, "ex") == [-1, 7]
        assert "gone" not in groups(client) and "ex" in groups(client)
