"""Transactions over raw frames against a real corral: the last stable offset and the aborted
list that read_committed consumers get, KIP-890's check of a produce to a partition not in the
transaction, the admin views (DescribeTransactions, ListTransactions, DescribeProducers), and
durability: a kill -9 in the middle of a transaction leaves it open after the restart (its
records still invisible to read_committed consumers) until it times out and is aborted with its
producer fenced; a transactional id's epoch carries on across restarts."""

from __future__ import annotations

import pytest
from rawwire import RawClient
from txnwire import (
    TOPIC,
    add,
    committed_offset,
    describe,
    end,
    init,
    latest,
    produce,
    read_committed,
    txn_commit,
    until,
)
from wire_data import create

from corral.errors import ErrorCode
from corral.network.apis import ApiKey

FAST = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 100,
    "log.flush.interval.messages": 1,
}


@pytest.fixture
def broker(corral_factory):
    broker = corral_factory(**FAST)
    with RawClient(broker.port) as c:
        create(c, TOPIC, partitions=2)
    return broker


def test_commit_abort_and_what_read_committed_consumers_get(broker):
    with RawClient(broker.port) as c:
        found = c.call(ApiKey.FIND_COORDINATOR, 3, {"key": "t1", "key_type": 1})
        assert (found["error_code"], found["port"]) == (0, broker.port)
        error, pid, epoch = init(c, "t1")
        assert (error, epoch) == (0, 0)
        assert add(c, "t1", pid, epoch, [0]) == [0]
        assert produce(c, "t1", pid, epoch, 0, 0, 3)["error_code"] == 0
        # KIP-890: partition 1 was not added to the transaction.
        assert produce(c, "t1", pid, epoch, 1, 0, 1)["error_code"] == ErrorCode.INVALID_TXN_STATE
        # Open: read_committed stops before it; the producer is listed with its first offset.
        assert (latest(c, 0, committed=True), latest(c, 0, committed=False)) == (0, 3)
        assert read_committed(c, 0)["last_stable_offset"] == 0
        assert read_committed(c, 0)["records"] == b""
        producers = c.call(
            ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [{"name": TOPIC, "partition_indexes": [0]}]}
        )["topics"][0]["partitions"][0]["active_producers"]
        assert [(p["producer_id"], p["current_txn_start_offset"]) for p in producers] == [(pid, 0)]
        state = describe(c, "t1")
        assert (state["transaction_state"], state["topics"]) == (
            "Ongoing",
            [{"topic": TOPIC, "partitions": [0]}],
        )
        listed = c.call(
            ApiKey.LIST_TRANSACTIONS,
            1,
            {
                "state_filters": ["Ongoing", "Nope"],
                "producer_id_filters": [],
                "duration_filter": -1,
            },
        )
        assert listed["unknown_state_filters"] == ["Nope"]
        assert [t["transactional_id"] for t in listed["transaction_states"]] == ["t1"]

        assert end(c, "t1", pid, epoch, commit=True) == 0
        until(lambda: describe(c, "t1")["transaction_state"] == "CompleteCommit")
        # Records 0-2 and the COMMIT marker at 3.
        assert (latest(c, 0, committed=True), latest(c, 0, committed=False)) == (4, 4)
        committed = read_committed(c, 0)
        assert (committed["last_stable_offset"], committed["aborted_transactions"]) == (4, [])
        assert end(c, "t1", pid, epoch, commit=True) == 0  # a retry of the finished commit
        assert end(c, "t1", pid, epoch, commit=False) == ErrorCode.INVALID_TXN_STATE

        # A second transaction, aborted: listed for read_committed consumers to drop.
        assert add(c, "t1", pid, epoch, [0]) == [0]
        assert produce(c, "t1", pid, epoch, 0, 3, 2)["error_code"] == 0
        assert end(c, "t1", pid, epoch, commit=False) == 0
        until(lambda: describe(c, "t1")["transaction_state"] == "CompleteAbort")
        aborted = read_committed(c, 0)
        assert aborted["last_stable_offset"] == 7
        assert [(a["producer_id"], a["first_offset"]) for a in aborted["aborted_transactions"]] == [
            (pid, 4)
        ]
        assert read_committed(c, 0, offset=7)["aborted_transactions"] == []
        # Errors by version: PRODUCER_FENCED from v2, INVALID_PRODUCER_EPOCH before.
        assert end(c, "t1", pid, epoch + 1, commit=True) == ErrorCode.PRODUCER_FENCED
        assert end(c, "t1", pid, epoch + 1, True, version=1) == ErrorCode.INVALID_PRODUCER_EPOCH
        assert end(c, "t1", pid + 1, epoch, True) == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_open_transaction_survives_kill_9_then_times_out_and_fences(broker):
    with RawClient(broker.port) as c:
        error, pid, epoch = init(c, "t2", timeout_ms=2000)
        assert error == 0
        assert add(c, "t2", pid, epoch, [1]) == [0]
        assert produce(c, "t2", pid, epoch, 1, 0, 5)["error_code"] == 0
    broker.kill()
    broker.start()
    with RawClient(broker.port) as c:
        # Loaded from __transaction_state and the partition's own producer state.
        until(lambda: describe(c, "t2")["error_code"] == 0)
        assert latest(c, 1, committed=True) == 0
        # Then aborted when it times out, its producer fenced by an epoch bump.
        state = until(
            lambda: (s := describe(c, "t2"))["transaction_state"] == "CompleteAbort" and s
        )
        assert state["producer_epoch"] == epoch + 1
        assert latest(c, 1, committed=True) == latest(c, 1, committed=False) == 6
        listed = read_committed(c, 1)["aborted_transactions"]
        assert [(a["producer_id"], a["first_offset"]) for a in listed] == [(pid, 0)]
        assert end(c, "t2", pid, epoch, commit=True) == ErrorCode.PRODUCER_FENCED
        late = produce(c, "t2", pid, epoch, 1, 5, 1)
        assert late["error_code"] == ErrorCode.INVALID_PRODUCER_EPOCH
    broker.kill()
    broker.start()
    with RawClient(broker.port) as c:
        # The epoch carries on across restarts.
        assert init(c, "t2")[1:] == (pid, epoch + 2)


def test_init_producer_id_fences_an_open_transaction(broker):
    with RawClient(broker.port) as c:
        _, pid, epoch = init(c, "t3")
        assert add(c, "t3", pid, epoch, [0]) == [0]
        assert produce(c, "t3", pid, epoch, 0, 0, 2)["error_code"] == 0
        # A new producer with the same id: the open transaction is aborted, the old epoch fenced.
        assert init(c, "t3")[0] == ErrorCode.CONCURRENT_TRANSACTIONS
        error, pid2, epoch2 = until(lambda: (r := init(c, "t3"))[0] == 0 and r)
        assert (pid2, epoch2) == (pid, epoch + 2)
        assert end(c, "t3", pid, epoch, commit=True) == ErrorCode.PRODUCER_FENCED
        assert latest(c, 0, committed=True) == latest(c, 0, committed=False)


def test_offsets_in_a_transaction_need_add_offsets_and_show_on_commit(broker):
    with RawClient(broker.port) as c:
        _, pid, epoch = init(c, "t4")
        # KIP-890: the transaction has not added the group's offsets partition.
        assert txn_commit(c, "t4", pid, epoch, 5, 3) == ErrorCode.INVALID_TXN_STATE
        assert txn_commit(c, "t4", pid, epoch, 5, 4) == ErrorCode.TRANSACTION_ABORTABLE
        add_offsets = {
            "transactional_id": "t4",
            "producer_id": pid,
            "producer_epoch": epoch,
            "group_id": "g-tx",
        }
        assert c.call(ApiKey.ADD_OFFSETS_TO_TXN, 3, add_offsets)["error_code"] == 0
        assert txn_commit(c, "t4", pid, epoch, 5, 3) == 0
        assert txn_commit(c, "t4", pid + 1, epoch, 5, 3) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        assert committed_offset(c) == -1  # pending until the commit marker
        assert end(c, "t4", pid, epoch, commit=True) == 0
        until(lambda: committed_offset(c) == 5)
        done = until(
            lambda: (d := describe(c, "t4"))["transaction_state"] == "CompleteCommit" and d
        )
        assert done["topics"] == []  # Complete: the partitions are cleared
