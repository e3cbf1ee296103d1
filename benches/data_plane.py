"""Produce and fetch throughput through a broker: corral, and Apache Kafka 4.x as the reference.

One confluent-kafka (librdkafka) producer sends N records of 1 KiB to an 8-partition topic with
acks=all, batching as the client does by default (linger.ms=5, up to 1 MB per request); then one
consumer reads them all back with assign (no group). Wall time from the first send to the last
acknowledgement, and from assign to the last record, gives MB/s and records/s. "raw fetch" reads
the same records again with bare Fetch requests that do not decode records, which shows the
broker's side when the Python consumer loop is the bottleneck. Client and broker
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
import socket
import struct
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
PHASES = ["produce", "fetch", "raw_fetch", "kcat_produce", "kcat_fetch"]
LISTENING = re.compile(r"listening on (\S+):(\d+)")


@contextlib.contextmanager
def corral_broker(settings: dict[str, str]) -> Iterator[str]:
    data = Path(tempfile.mkdtemp(prefix="corral-bench-"))
    cmd = [
        sys.executable,
        "-m",
        "corral.cli",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        str(data / "data"),
    ]
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
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": True}
    )
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
                    raise TimeoutError("produce phase timed out") from None
    producer.flush(max(deadline - time.monotonic(), 1))
    produce_s = time.monotonic() - started
    if acked != records:
        raise RuntimeError(f"only {acked} of {records} records acknowledged")

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52428800,
        }
    )
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
    raw_s = raw_fetch(bootstrap, topic, records, deadline=time.monotonic() + timeout)
    kcat_produce_s, kcat_fetch_s = kcat_phases(bootstrap, topic + "-kcat", records, timeout)
    megabytes = records * RECORD_BYTES / 1e6
    result = {"records": records}
    for phase, seconds in [
        ("produce", produce_s),
        ("fetch", fetch_s),
        ("raw_fetch", raw_s),
        ("kcat_produce", kcat_produce_s),
        ("kcat_fetch", kcat_fetch_s),
    ]:
        result.update(
            {
                f"{phase}_s": seconds,
                f"{phase}_MBps": megabytes / seconds,
                f"{phase}_rps": records / seconds,
            }
        )
    return result


def kcat_phases(bootstrap: str, topic: str, records: int, timeout: float) -> tuple[float, float]:
    """The same volume through kcat (librdkafka from C, no Python per record): produce from a
    file of 1 KiB lines with acks=all, then consume everything to the end."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=30)
    with tempfile.NamedTemporaryFile(suffix=".lines") as lines:
        line = b"x" * RECORD_BYTES + b"\n"
        lines.write(line * records)
        lines.flush()
        started = time.monotonic()
        subprocess.run(
            [
                "kcat",
                "-P",
                "-b",
                bootstrap,
                "-t",
                topic,
                "-X",
                "acks=all",
                "-X",
                "linger.ms=5",
                "-l",
                lines.name,
            ],
            check=True,
            timeout=timeout,
            stderr=subprocess.DEVNULL,
        )
        produce_s = time.monotonic() - started
    started = time.monotonic()
    out = subprocess.run(
        ["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q", "-f", "\n"],
        check=True,
        timeout=timeout,
        capture_output=True,
    ).stdout
    fetch_s = time.monotonic() - started
    consumed = out.count(b"\n")
    if consumed != records:
        raise RuntimeError(f"kcat consumed {consumed} of {records} records")
    return produce_s, fetch_s


def raw_fetch(bootstrap: str, topic: str, records: int, deadline: float) -> float:
    """Reads the topic with bare Fetch v12 requests (librdkafka's default sizes: 50 MB per
    response, 1 MB per partition) and only walks batch headers: what the broker can serve when
    the client does not decode records."""
    from corral import _core

    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    frames = _core.Frames(1 << 30)
    offsets = dict.fromkeys(range(PARTITIONS), 0)
    got = 0
    started = time.monotonic()
    correlation_id = 0
    while got < records:
        if time.monotonic() > deadline:
            raise TimeoutError("raw fetch timed out")
        correlation_id += 1
        body = {
            "replica_id": -1,
            "max_wait_ms": 500,
            "min_bytes": 1,
            "max_bytes": 52428800,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": p,
                            "fetch_offset": o,
                            "log_start_offset": -1,
                            "partition_max_bytes": 1048576,
                        }
                        for p, o in offsets.items()
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        sock.sendall(_core.encode_request(1, 12, correlation_id, body, "bench"))
        ready: list[bytes] = []
        while not ready:
            ready = frames.feed(sock.recv(1 << 20))
        _, response = _core.decode_response(1, 12, ready[0])
        for part in response["responses"][0]["partitions"]:
            data, pos = part["records"], 0
            while pos + 61 <= len(data):
                base, length = struct.unpack_from(">qi", data, pos)
                (last_delta,) = struct.unpack_from(">i", data, pos + 23)
                (count,) = struct.unpack_from(">i", data, pos + 57)
                if pos + 12 + length > len(data):
                    break
                if base + last_delta >= offsets[part["partition_index"]]:
                    got += count
                    offsets[part["partition_index"]] = base + last_delta + 1
                pos += 12 + length
    sock.close()
    return time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--broker", choices=["corral", "kafka", "both"], default="both")
    parser.add_argument(
        "--bootstrap",
        metavar="HOST:PORT",
        help="measure a broker that is already running (e.g. under a profiler)",
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a corral setting for the run",
    )
    args = parser.parse_args(argv)
    settings = dict(item.split("=", 1) for item in args.set)
    results = {}
    if args.bootstrap:
        results[args.bootstrap] = [
            run(args.bootstrap, f"bench{time.time_ns()}", args.records, args.timeout)
            for _ in range(args.runs)
        ]
    elif args.broker in ("corral", "both"):
        with corral_broker(settings) as bootstrap:
            run(bootstrap, "warmup", WARMUP_RECORDS, args.timeout)
            results["corral"] = [
                run(bootstrap, f"bench{i}", args.records, args.timeout) for i in range(args.runs)
            ]
    if args.broker in ("kafka", "both") and not args.bootstrap:
        from kafka_ref import kafka_broker

        with kafka_broker() as bootstrap:
            run(bootstrap, "warmup", WARMUP_RECORDS, args.timeout)
            results["kafka"] = [
                run(bootstrap, f"bench{i}", args.records, args.timeout) for i in range(args.runs)
            ]
    for name, runs in results.items():
        for r in runs:
            print(
                f"{name:7s} "
                + "  ".join(f"{phase} {r[phase + '_MBps']:6.1f} MB/s" for phase in PHASES)
                + f"  ({r['records']} x 1 KiB)"
            )
    if "corral" in results and "kafka" in results:

        def best(name: str, key: str) -> float:
            return max(r[key] for r in results[name])

        print(
            "ratio corral/kafka (best runs): "
            + ", ".join(
                f"{phase} {best('corral', phase + '_MBps') / best('kafka', phase + '_MBps'):.2f}"
                for phase in PHASES
            )
        )
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
