"""`kafka-transactions` (TransactionsCommand, from kafka-tools) against a real corral with a
transaction left open by a producer: list, describe and describe-producers show it as Kafka's
tool prints it."""

from __future__ import annotations

from kafka_java import run_tool
from rawwire import RawClient
from wire_data import create

from corral import _core
from corral.network.apis import ApiKey

TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"


def test_kafka_transactions_lists_describes_and_finds_the_open_transaction(corral):
    with RawClient(corral.port) as c:
        create(c, "tool-txn")
        init = c.call(
            ApiKey.INIT_PRODUCER_ID,
            4,
            {
                "transactional_id": "tool-tx",
                "transaction_timeout_ms": 60000,
                "producer_id": -1,
                "producer_epoch": -1,
            },
        )
        pid, epoch = init["producer_id"], init["producer_epoch"]
        added = c.call(
            ApiKey.ADD_PARTITIONS_TO_TXN,
            3,
            {
                "v3_and_below_transactional_id": "tool-tx",
                "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": "tool-txn", "partitions": [0]}],
                "transactions": [],
            },
        )
        assert (
            added["results_by_topic_v3_and_below"][0]["results_by_partition"][0][
                "partition_error_code"
            ]
            == 0
        )
        records = _core.build_batch([(b"k", b"v")], 1000, pid, epoch, 0, transactional=True)
        produced = c.call(
            ApiKey.PRODUCE,
            9,
            {
                "transactional_id": "tool-tx",
                "acks": -1,
                "timeout_ms": 5000,
                "topic_data": [
                    {"name": "tool-txn", "partition_data": [{"index": 0, "records": records}]}
                ],
            },
        )
        assert produced["responses"][0]["partition_responses"][0]["error_code"] == 0
    bootstrap = f"--bootstrap-server {corral.bootstrap}"
    commands = [
        f"{bootstrap} list",
        f"{bootstrap} describe --transactional-id tool-tx",
        f"{bootstrap} describe-producers --topic tool-txn --partition 0",
    ]
    out = run_tool(TRANSACTIONS_COMMAND, commands)
    listed, described, producers = (out[c] for c in commands)
    assert listed[0] == 0 and "tool-tx" in listed[1] and "Ongoing" in listed[1], listed
    assert described[0] == 0 and "Ongoing" in described[1] and "tool-txn-0" in described[1], (
        described
    )
    assert producers[0] == 0 and str(pid) in producers[1], producers
    # The open transaction's first offset is its start (0): what finds a hanging transaction.
    row = next(line for line in producers[1].splitlines() if line.split()[:1] == [str(pid)])
    assert row.split()[-1] == "0", producers[1]
