"""Transactional offset commits over TCP with raw frames: TxnOffsetCommit's offsets stay pending
(invisible, UNSTABLE_OFFSET_COMMIT under RequireStable) until WriteTxnMarkers on their
`__consumer_offsets` partition commits them (or aborts: dropped); they stay pending across a
kill -9 of corral (from the log, past a snapshot taken meanwhile) until the marker; a consumer
group member's commit is checked against its epoch, with the ownership checker watching.

Most tests drive the markers themselves (WriteTxnMarkers, the request a transaction coordinator
sends), so KIP-890's verification, which asks corral's own transaction coordinator, is off for
them; the last ones run the whole transaction through it (InitProducerId, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn), verification on."""

from __future__ import annotations

import time

import pytest
from ownership import check_ownership
from raw_groups import Script
from rawwire import RawClient
from wire_groups import commit, join, subscription, sync

from corral.errors import ErrorCode
from corral.groups.storage.placement import OFFSETS_TOPIC, partition_for
from corral.network.apis import ApiKey

TOPIC = "txo"
OFFSETS_PARTITIONS = 3
# The test plays the transaction coordinator (producer 7000, WriteTxnMarkers): KIP-890's check
# that a transaction added the offsets partition is off here, and tested with a real transaction
# coordinator in test_transactions_wire.py.
SETTINGS = {
    "offsets.topic.num.partitions": OFFSETS_PARTITIONS,
    "corral.coordinator.snapshot.interval.ms": 100,
    "transaction.partition.verification.enable": False,
}
PID, EPOCH = 7000, 0


@pytest.fixture
def broker(corral_factory):
    return _with_topic(corral_factory(**SETTINGS))


@pytest.fixture
def verifying_broker(corral_factory):
    return _with_topic(
        corral_factory(**{**SETTINGS, "transaction.partition.verification.enable": "true"})
    )


def _with_topic(broker):
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
        # __consumer_offsets exists once a coordinator was asked for.
        found = client.call(
            ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g"], "key": ""}
        )
        assert found["coordinators"][0]["error_code"] == 0
    return broker


def txn_commit(
    client: RawClient,
    group: str,
    offsets: dict[int, int],
    *,
    pid: int = PID,
    epoch: int = EPOCH,
    tid: str = "tx",
    version: int = 3,
    member: tuple[str, int] = ("", -1),
    metadata: str = "",
) -> list[int]:
    body = {
        "transactional_id": tid,
        "group_id": group,
        "producer_id": pid,
        "producer_epoch": epoch,
        "generation_id": member[1],
        "member_id": member[0],
        "group_instance_id": None,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": o,
                        "committed_leader_epoch": -1,
                        "committed_metadata": metadata,
                    }
                    for p, o in offsets.items()
                ],
            }
        ],
    }
    answer = client.call(ApiKey.TXN_OFFSET_COMMIT, version, body)
    return [p["error_code"] for t in answer["topics"] for p in t["partitions"]]


def marker(client: RawClient, group: str, commit: bool, pid: int = PID) -> list[int]:
    body = {
        "markers": [
            {
                "producer_id": pid,
                "producer_epoch": EPOCH,
                "transaction_result": commit,
                "coordinator_epoch": 0,
                "topics": [
                    {
                        "name": OFFSETS_TOPIC,
                        "partition_indexes": [partition_for(group, OFFSETS_PARTITIONS)],
                    }
                ],
            }
        ]
    }
    answer = client.call(ApiKey.WRITE_TXN_MARKERS, 1, body)
    return [
        p["error_code"] for m in answer["markers"] for t in m["topics"] for p in t["partitions"]
    ]


def fetched(client: RawClient, group: str, stable: bool) -> list[tuple[int, int]]:
    """[(committed offset, error)] of the topic's partitions 0 and 1 (OffsetFetch v7)."""
    answer = client.call(
        ApiKey.OFFSET_FETCH,
        7,
        {
            "group_id": group,
            "topics": [{"name": TOPIC, "partition_indexes": [0, 1]}],
            "require_stable": stable,
        },
    )
    return [(p["committed_offset"], p["error_code"]) for p in answer["topics"][0]["partitions"]]


UNSTABLE = ErrorCode.UNSTABLE_OFFSET_COMMIT


def test_commit_marker_makes_pending_offsets_visible(broker):
    with RawClient(broker.port) as client:
        assert txn_commit(client, "g", {0: 10, 1: 11}) == [0, 0]
        assert fetched(client, "g", stable=False) == [(-1, 0), (-1, 0)]
        assert fetched(client, "g", stable=True) == [(-1, UNSTABLE), (-1, UNSTABLE)]
        assert marker(client, "g", commit=True) == [0]
        assert fetched(client, "g", stable=True) == [(10, 0), (11, 0)]
        # The same producer's next transaction (same epoch, as transaction version 1 keeps it).
        assert txn_commit(client, "g", {0: 20, 1: 21}) == [0, 0]
        assert fetched(client, "g", stable=True) == [(-1, UNSTABLE), (-1, UNSTABLE)]
        assert fetched(client, "g", stable=False) == [(10, 0), (11, 0)]
        assert marker(client, "g", commit=True) == [0]
        assert fetched(client, "g", stable=True) == [(20, 0), (21, 0)]
    # Both transactions are in the log (the second is no "duplicate" of the first there).
    broker.kill()
    broker.start()
    with RawClient(broker.port) as client:
        assert fetched(client, "g", stable=True) == [(20, 0), (21, 0)]


def test_abort_marker_drops_pending_offsets(broker):
    with RawClient(broker.port) as client:
        assert txn_commit(client, "g", {0: 10}) == [0]
        assert marker(client, "g", commit=False) == [0]
        assert fetched(client, "g", stable=True) == [(-1, 0), (-1, 0)]


def test_requests_refused_per_partition(broker):
    with RawClient(broker.port) as client:
        too_long = "x" * 5000  # offset.metadata.max.bytes is 4096
        assert txn_commit(client, "g", {0: 1}, metadata=too_long) == [
            ErrorCode.OFFSET_METADATA_TOO_LARGE
        ]
        assert txn_commit(client, "g", {5: 1}) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        assert txn_commit(client, "", {0: 1}) == [ErrorCode.INVALID_GROUP_ID]
        # No such group, yet a generation: ILLEGAL_GENERATION before v6.
        assert txn_commit(client, "g", {0: 1}, member=("m", 3)) == [ErrorCode.ILLEGAL_GENERATION]
        assert fetched(client, "g", stable=True) == [(-1, 0), (-1, 0)]
        # A partition of another topic is not __consumer_offsets: unknown here.
        body = {
            "markers": [
                {
                    "producer_id": PID,
                    "producer_epoch": EPOCH,
                    "transaction_result": True,
                    "coordinator_epoch": 0,
                    "topics": [{"name": "nope", "partition_indexes": [0]}],
                }
            ]
        }
        answer = client.call(ApiKey.WRITE_TXN_MARKERS, 1, body)
        errors = [p["error_code"] for p in answer["markers"][0]["topics"][0]["partitions"]]
        assert errors == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]


def plain_commit(client: RawClient, group: str, partition: int, offset: int) -> None:
    answer = client.call(
        ApiKey.OFFSET_COMMIT,
        8,
        {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [
                        {
                            "partition_index": partition,
                            "committed_offset": offset,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                    ],
                }
            ],
        },
    )
    assert answer["topics"][0]["partitions"][0]["error_code"] == 0


def test_a_commit_after_the_pending_offset_wins(broker):
    """Kafka's record-offset rule over the wire: the plain commit, written after the pending
    offset, stays when the transaction commits (the network thread's commit path leaves the
    group's commits to the coordinator while it has pending offsets)."""
    with RawClient(broker.port) as client:
        # A classic member's commits: the ones the network thread's commit path takes.
        joined = join(client, "g", protocols=[{"name": "range", "metadata": subscription(TOPIC)}])
        member, generation = joined["member_id"], joined["generation_id"]
        assert sync(client, "g", generation, member, [(member, b"")])["error_code"] == 0
        as_member = (member, generation)
        assert commit(client, "g", generation, member, [(TOPIC, 0, 1), (TOPIC, 1, 1)]) == [0, 0]
        assert txn_commit(client, "g", {0: 10, 1: 11}, member=as_member) == [0, 0]
        assert commit(client, "g", generation, member, [(TOPIC, 0, 7)]) == [0]
        assert fetched(client, "g", stable=True) == [(-1, UNSTABLE), (-1, UNSTABLE)]
        assert marker(client, "g", commit=True) == [0]
        assert fetched(client, "g", stable=True) == [(7, 0), (11, 0)]
        # No transaction open: the next commits are the network thread's again.
        assert commit(client, "g", generation, member, [(TOPIC, 1, 12)]) == [0]
        assert fetched(client, "g", stable=True) == [(7, 0), (12, 0)]


def test_fenced_producers_and_coordinators(broker):
    """The log's producer state fences a zombie: an older producer epoch's TxnOffsetCommit, an
    older coordinator epoch's marker; what is pending stays pending."""
    with RawClient(broker.port) as client:
        assert txn_commit(client, "g", {0: 10}, epoch=3) == [0]
        assert txn_commit(client, "g", {0: 11}, epoch=2) == [ErrorCode.INVALID_PRODUCER_EPOCH]
        body = {
            "markers": [
                {
                    "producer_id": PID,
                    "producer_epoch": 3,
                    "transaction_result": True,
                    "coordinator_epoch": 5,
                    "topics": [
                        {
                            "name": OFFSETS_TOPIC,
                            "partition_indexes": [partition_for("g", OFFSETS_PARTITIONS)],
                        }
                    ],
                }
            ]
        }
        answer = client.call(ApiKey.WRITE_TXN_MARKERS, 1, body)
        assert answer["markers"][0]["topics"][0]["partitions"][0]["error_code"] == 0
        assert fetched(client, "g", stable=True)[0] == (10, 0)
        assert txn_commit(client, "g", {0: 12}, epoch=3) == [0]
        body["markers"][0]["coordinator_epoch"] = 4
        answer = client.call(ApiKey.WRITE_TXN_MARKERS, 1, body)
        assert answer["markers"][0]["topics"][0]["partitions"][0]["error_code"] == (
            ErrorCode.TRANSACTION_COORDINATOR_FENCED
        )
        assert fetched(client, "g", stable=True)[0] == (-1, UNSTABLE)
        assert fetched(client, "g", stable=False)[0] == (10, 0)


def test_kill_mid_transaction_keeps_offsets_pending(broker):
    with RawClient(broker.port) as client:
        assert txn_commit(client, "g", {0: 10, 1: 11}) == [0, 0]
        # A plain commit after it, and time for a snapshot or two past both.
        plain_commit(client, "g2", 0, 5)
        time.sleep(0.5)
    broker.kill()
    broker.start()
    with RawClient(broker.port) as client:
        assert fetched(client, "g", stable=True) == [(-1, UNSTABLE), (-1, UNSTABLE)]
        assert fetched(client, "g2", stable=False)[0] == (5, 0)
        assert marker(client, "g", commit=True) == [0]
        assert fetched(client, "g", stable=True) == [(10, 0), (11, 0)]
    broker.kill()
    broker.start()
    with RawClient(broker.port) as client:
        assert fetched(client, "g", stable=True) == [(10, 0), (11, 0)]


def test_consumer_group_member_commits_in_a_transaction(broker):
    script = Script(broker.bootstrap, "cg")
    script.wait_assignable({TOPIC: 2})
    joined = script.join("join", "a", subscribed_topic_names=[TOPIC])
    assert joined["error_code"] == 0
    member_id, epoch = joined["member_id"], joined["member_epoch"]
    script.beat("steady", "a", rounds=2)
    epoch = script.epoch["a"]
    with RawClient(broker.port) as client:
        assert txn_commit(client, "cg", {0: 3}, member=(member_id, epoch)) == [0]
        assert txn_commit(client, "cg", {0: 4}, member=("stranger", epoch)) == [
            ErrorCode.UNKNOWN_MEMBER_ID
        ]
        # A newer epoch than the member's: STALE_MEMBER_EPOCH, ILLEGAL_GENERATION before v6.
        assert txn_commit(client, "cg", {0: 4}, member=(member_id, epoch + 1)) == [
            ErrorCode.ILLEGAL_GENERATION
        ]
        assert marker(client, "cg", commit=True) == [0]
        assert fetched(client, "cg", stable=True)[0] == (3, 0)
    script.beat("after", "a")
    check_ownership(script.views.values())


# ------------------------------------------------------------- through the transaction coordinator


def txn_call(client: RawClient, key: ApiKey, version: int, **body) -> int:
    return client.call(key, version, body)["error_code"]


def begin(client: RawClient, tid: str, group: str) -> tuple[int, int]:
    """InitProducerId then AddOffsetsToTxn: (producer id, epoch) of an ongoing transaction. An
    InitProducerId that ends the id's open transaction answers CONCURRENT_TRANSACTIONS until its
    abort is written: retried, as clients do."""
    deadline = time.monotonic() + 15
    while True:
        answer = client.call(
            ApiKey.INIT_PRODUCER_ID,
            4,
            {
                "transactional_id": tid,
                "transaction_timeout_ms": 60000,
                "producer_id": -1,
                "producer_epoch": -1,
            },
        )
        if answer["error_code"] != ErrorCode.CONCURRENT_TRANSACTIONS:
            break
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert answer["error_code"] == 0
    pid, epoch = answer["producer_id"], answer["producer_epoch"]
    ids = {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch}
    assert txn_call(client, ApiKey.ADD_OFFSETS_TO_TXN, 3, **ids, group_id=group) == 0
    return pid, epoch


def end_txn(client: RawClient, tid: str, pid: int, epoch: int, commit: bool) -> int:
    ids = {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch}
    return txn_call(client, ApiKey.END_TXN, 3, **ids, committed=commit)


def settled(client: RawClient, group: str) -> list[tuple[int, int]]:
    """The stable offsets once no partition is unstable (markers follow EndTxn's answer)."""
    deadline = time.monotonic() + 15
    while True:
        answer = fetched(client, group, stable=True)
        if all(error != UNSTABLE for _, error in answer):
            return answer
        assert time.monotonic() < deadline, answer
        time.sleep(0.05)


def test_end_txn_commits_and_aborts_through_the_transaction_coordinator(verifying_broker):
    with RawClient(verifying_broker.port) as client:
        pid, epoch = begin(client, "app", "eo")
        assert txn_commit(client, "eo", {0: 10, 1: 11}, pid=pid, epoch=epoch, tid="app") == [0, 0]
        assert fetched(client, "eo", stable=True) == [(-1, UNSTABLE), (-1, UNSTABLE)]
        assert end_txn(client, "app", pid, epoch, commit=True) == 0
        assert settled(client, "eo") == [(10, 0), (11, 0)]
        # The next transaction of the same producer, aborted: its offsets are dropped.
        ids = {"transactional_id": "app", "producer_id": pid, "producer_epoch": epoch}
        assert txn_call(client, ApiKey.ADD_OFFSETS_TO_TXN, 3, **ids, group_id="eo") == 0
        assert txn_commit(client, "eo", {0: 20}, pid=pid, epoch=epoch, tid="app") == [0]
        assert end_txn(client, "app", pid, epoch, commit=False) == 0
        assert settled(client, "eo") == [(10, 0), (11, 0)]


def test_a_commit_outside_the_transaction_is_refused(verifying_broker):
    """KIP-890: the group's offsets partition was not added (no AddOffsetsToTxn), or the
    producer was fenced by a newer InitProducerId."""
    with RawClient(verifying_broker.port) as client:
        answer = client.call(
            ApiKey.INIT_PRODUCER_ID,
            4,
            {
                "transactional_id": "lone",
                "transaction_timeout_ms": 60000,
                "producer_id": -1,
                "producer_epoch": -1,
            },
        )
        pid, epoch = answer["producer_id"], answer["producer_epoch"]
        assert txn_commit(client, "eo", {0: 1}, pid=pid, epoch=epoch, tid="lone") == [
            ErrorCode.INVALID_TXN_STATE
        ]
        # Verified before the group is looked at (which would answer ILLEGAL_GENERATION).
        lone = {"pid": pid, "epoch": epoch, "tid": "lone", "member": ("m", 3)}
        assert txn_commit(client, "eo", {0: 1}, **lone) == [ErrorCode.INVALID_TXN_STATE]
        pid, epoch = begin(client, "zombie", "eo")
        newer, newer_epoch = begin(client, "zombie", "eo")
        assert newer == pid and newer_epoch > epoch
        assert txn_commit(client, "eo", {0: 1}, pid=pid, epoch=epoch, tid="zombie") == [
            ErrorCode.INVALID_PRODUCER_EPOCH
        ]
        assert fetched(client, "eo", stable=True) == [(-1, 0), (-1, 0)]
