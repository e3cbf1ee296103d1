"""Produce and fetch throughput through a broker: corral, and Apache Kafka 4.x as the reference.

One confluent-kafka (librdkafka) producer sends N records of 1 KiB to an 8-partition topic with
acks=all, batching as the client does by default (linger.ms=5, up to 1 MB per request); then one
consumer reads them all back with assign (no group). Wall time from the first send to the last
acknowledgement, and from assign to the last record, gives MB/s and records/s. Client and broker
share this machine's cores, the same way for both brokers.

    python benches/data_plane.py                      # corral, then Kafka
    python benches/data_plane.py --broker corral --records 50000
    python benches/data_plane.py --set log.flush.interval.messages=9223372036854775807

Each broker gets an unmeasured warm-up run, then --runs measured runs (the best is compared).
Bounded: each phase gives up after --timeout seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).parent))

RECORD_BYTES = 1024
PARTITIONS = 8
# One unmeasured run first: the JVM's JIT, Kafka's first InitProducerId (COORDINATOR_LOAD_IN_PROGRESS
# until its transaction log is up) and both page caches warm up there.
WARMUP_RECORDS = 20_000
LISTENING = re.compile(r"listening on (\S+):(\d+)")


@contextlib.contextmanager
def corral_broker(settings: dict[str, str]) -> Iterator[str]:
    data = Path(tempfile.mkdtemp(prefix="corral-bench-"))
    cmd = [sys.executable, "-m", "corral.cli", "serve", "--listen", "127.0.0.1:0",
           "--data-dir", str(data / "data")]
    for name, value in settings.items():
        cmd += ["--set", f"{name}={value}"]
    log_path = data / "corral.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while not (match := LISTENING.search(log_path.read_text(errors="replace"))):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"corral did not start:\n{log_path.read_text()}")
            time.sleep(0.05)
        yield f"127.0.0.1:{match.group(2)}"
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(data, ignore_errors=True)


def run(bootstrap: str, topic: str, records: int, timeout: float) -> dict[str, float]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=30)
    payload = bytes(RECORD_BYTES)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "enable.idempotence": True})
    acked = 0

    def on_delivery(err, _msg):
        nonlocal acked
        if err is None:
            acked += 1

    started = time.monotonic()
    deadline = started + timeout
    for i in range(records):
        while True:
            try:
                producer.produce(topic, payload, partition=i % PARTITIONS, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
                if time.monotonic() > deadline:
                    raise TimeoutError("produce phase timed out")
    producer.flush(max(deadline - time.monotonic(), 1))
    produce_s = time.monotonic() - started
    if acked != records:
        raise RuntimeError(f"only {acked} of {records} records acknowledged")

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                         "enable.auto.commit": False, "fetch.max.bytes": 52428800})
    started = time.monotonic()
    deadline = started + timeout
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    while got < records and time.monotonic() < deadline:
        for msg in consumer.consume(num_messages=10_000, timeout=0.5):
            if msg.error() is None:
                got += 1
    fetch_s = time.monotonic() - started
    consumer.close()
    if got != records:
        raise RuntimeError(f"only {got} of {records} records consumed")
    megabytes = records * RECORD_BYTES / 1e6
    return {"records": records, "produce_s": produce_s, "produce_MBps": megabytes / produce_s,
            "produce_rps": records / produce_s, "fetch_s": fetch_s,
            "fetch_MBps": megabytes / fetch_s, "fetch_rps": records / fetch_s}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--broker", choices=["corral", "kafka", "both"], default="both")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a corral setting for the run")
    args = parser.parse_args(argv)
    settings = dict(item.split("=", 1) for item in args.set)
    results = {}
    if args.broker in ("corral", "both"):
        with corral_broker(settings) as bootstrap:
            run(bootstrap, "warmup", WARMUP_RECORDS, args.timeout)
            results["corral"] = [run(bootstrap, f"bench{i}", args.records, args.timeout)
                                 for i in range(args.runs)]
    if args.broker in ("kafka", "both"):
        from kafka_ref import kafka_broker
        with kafka_broker() as bootstrap:
            run(bootstrap, "warmup", WARMUP_RECORDS, args.timeout)
            results["kafka"] = [run(bootstrap, f"bench{i}", args.records, args.timeout)
                                for i in range(args.runs)]
    for name, runs in results.items():
        for r in runs:
            print(f"{name:7s} produce {r['produce_MBps']:7.1f} MB/s {r['produce_rps']:9.0f} rec/s   "
                  f"fetch {r['fetch_MBps']:7.1f} MB/s {r['fetch_rps']:9.0f} rec/s   ({r['records']} x 1 KiB)")
    if "corral" in results and "kafka" in results:
        def best(name: str, key: str) -> float:
            return max(r[key] for r in results[name])
        print(f"ratio corral/kafka (best runs): "
              f"produce {best('corral', 'produce_MBps') / best('kafka', 'produce_MBps'):.2f}, "
              f"fetch {best('corral', 'fetch_MBps') / best('kafka', 'fetch_MBps'):.2f}")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
