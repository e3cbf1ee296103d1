"""Transactions through a broker: corral, and Apache Kafka 4.4 as the reference, in one run.

One confluent-kafka (librdkafka) transactional producer sends N records of 1 KiB to an
8-partition topic in transactions of 100 (begin, 100 produces, commit): records/s from
init_transactions to the last commit. Then one consumer reads them all back, with
isolation.level read_committed and with read_uncommitted (assign, no group): the cost of
read_committed is the ratio of the two times. Client and broker share this machine's cores, the
same way for both brokers; each broker gets an unmeasured warm-up run first.

    python benches/transactions.py                         # corral, then Kafka
    python benches/transactions.py --broker corral --records 20000
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).parent))
from data_plane import corral_broker
from kafka_ref import kafka_broker

RECORD_BYTES = 1024
PARTITIONS = 8
PER_TRANSACTION = 100
WARMUP_RECORDS = 5_000


def produce(bootstrap: str, topic: str, records: int) -> float:
    """Seconds for `records` records in transactions of PER_TRANSACTION."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": "bench-" + topic,
            "linger.ms": 5,
            "queue.buffering.max.messages": max(records, 100_000),
        }
    )
    value = b"x" * RECORD_BYTES
    started = time.perf_counter()
    producer.init_transactions(60)
    for first in range(0, records, PER_TRANSACTION):
        producer.begin_transaction()
        for i in range(first, min(first + PER_TRANSACTION, records)):
            producer.produce(topic, value=value, key=str(i).encode())
        producer.commit_transaction(60)
    return time.perf_counter() - started


def consume(bootstrap: str, topic: str, records: int, isolation: str, timeout: float) -> float:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-" + uuid.uuid4().hex,
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "fetch.max.bytes": 50 << 20,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    started = time.perf_counter()
    deadline = started + timeout
    while got < records and time.perf_counter() < deadline:
        got += sum(1 for m in consumer.consume(10_000, 0.5) if not m.error())
    elapsed = time.perf_counter() - started
    consumer.close()
    if got < records:
        raise RuntimeError(f"read {got} of {records} records ({isolation})")
    return elapsed


def measure(bootstrap: str, records: int, timeout: float) -> dict[str, float]:
    topic = "txbench-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    produce_s = produce(bootstrap, topic, records)
    committed_s = consume(bootstrap, topic, records, "read_committed", timeout)
    uncommitted_s = consume(bootstrap, topic, records, "read_uncommitted", timeout)
    return {
        "produce_records_per_s": round(records / produce_s),
        "produce_mb_per_s": round(records * RECORD_BYTES / produce_s / 1e6, 1),
        "read_committed_s": round(committed_s, 3),
        "read_uncommitted_s": round(uncommitted_s, 3),
        "read_committed_cost": round(committed_s / uncommitted_s, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", choices=["corral", "kafka", "both"], default="both")
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args()
    results = {}
    brokers = ["corral", "kafka"] if args.broker == "both" else [args.broker]
    for name in brokers:
        starter = corral_broker({}) if name == "corral" else kafka_broker()
        with starter as bootstrap:
            measure(bootstrap, WARMUP_RECORDS, args.timeout)
            results[name] = measure(bootstrap, args.records, args.timeout)
        print(name, json.dumps(results[name]), flush=True)
    if len(results) == 2:
        ratio = (
            results["corral"]["produce_records_per_s"] / results["kafka"]["produce_records_per_s"]
        )
        print("corral/kafka transactional produce:", round(ratio, 2))


if __name__ == "__main__":
    main()
