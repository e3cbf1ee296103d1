"""One real consumer-group member in its own process, for the group tests.

    python tests/kits/group_member.py CLIENT BOOTSTRAP GROUP TOPIC [--strategy S] [--session-ms N]
                                 [--instance-id ID]

CLIENT is confluent, kafka-python or aiokafka. The member subscribes to TOPIC and prints one JSON
line per assignment change: {"assigned": [partitions...]}. It leaves
the group cleanly (close) when its stdin closes or on SIGTERM; SIGKILL is a crash.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import os
import signal
import sys
import threading

stop = threading.Event()


def report(partitions) -> None:
    print(json.dumps({"assigned": sorted(partitions)}), flush=True)


def watch_stdin() -> None:
    sys.stdin.read()
    stop.set()


def run_confluent(args) -> None:
    import confluent_kafka as ck

    conf = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "session.timeout.ms": args.session_ms,
        "heartbeat.interval.ms": max(args.session_ms // 6, 100),
        "partition.assignment.strategy": args.strategy,
        "enable.auto.commit": False,
        "topic.metadata.refresh.interval.ms": 1000,
        "log_level": 3,
    }
    if args.instance_id:
        conf["group.instance.id"] = args.instance_id
    consumer = ck.Consumer(conf)
    owned: set[int] = set()
    cooperative = args.strategy == "cooperative-sticky"

    def on_assign(c, parts):
        if cooperative:
            owned.update(p.partition for p in parts)
        else:
            owned.clear()
            owned.update(p.partition for p in parts)
        report(owned)

    def on_revoke(c, parts):
        if cooperative:
            owned.difference_update(p.partition for p in parts)
            if parts:
                report(owned)
        else:
            owned.clear()

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
    while not stop.is_set():
        consumer.poll(0.05)
    consumer.close()


def run_kafka_python(args) -> None:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    assignors = {
        "range": [RangePartitionAssignor],
        "roundrobin": [RoundRobinPartitionAssignor],
        "range,roundrobin": [RangePartitionAssignor, RoundRobinPartitionAssignor],
        "roundrobin,range": [RoundRobinPartitionAssignor, RangePartitionAssignor],
    }
    extra = {"group_instance_id": args.instance_id} if args.instance_id else {}
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=max(args.session_ms // 6, 100),
        partition_assignment_strategy=assignors[args.strategy],
        enable_auto_commit=False,
        **extra,
    )
    consumer.subscribe([args.topic])
    last = None
    while not stop.is_set():
        # Long enough for a JoinGroup/SyncGroup round to finish inside one poll. kafka-python
        # 3.0.12 can lose a cross-thread wakeup when poll returns while its join is still in
        # flight: the consumer thread then waits in net.run() forever (seen against corral and
        # against Apache Kafka 4.4.0 alike, about once in 30 groups with a 50 ms poll).
        consumer.poll(timeout_ms=500)
        now = sorted(tp.partition for tp in consumer.assignment())
        if now != last:
            last = now
            report(now)
    consumer.close()


def run_aiokafka(args) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    assignors = {
        "range": (RangePartitionAssignor,),
        "roundrobin": (RoundRobinPartitionAssignor,),
        "range,roundrobin": (RangePartitionAssignor, RoundRobinPartitionAssignor),
        "roundrobin,range": (RoundRobinPartitionAssignor, RangePartitionAssignor),
    }

    async def main():
        extra = {"group_instance_id": args.instance_id} if args.instance_id else {}
        consumer = AIOKafkaConsumer(
            args.topic,
            bootstrap_servers=args.bootstrap,
            group_id=args.group,
            session_timeout_ms=args.session_ms,
            heartbeat_interval_ms=max(args.session_ms // 6, 100),
            partition_assignment_strategy=assignors[args.strategy],
            enable_auto_commit=False,
            **extra,
        )
        await consumer.start()
        last = None
        while not stop.is_set():
            await asyncio.sleep(0.05)
            now = sorted(tp.partition for tp in consumer.assignment())
            if now != last:
                last = now
                report(now)
        await consumer.stop()

    asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("client", choices=["confluent", "kafka-python", "aiokafka"])
    parser.add_argument("bootstrap")
    parser.add_argument("group")
    parser.add_argument("topic")
    parser.add_argument("--strategy", default="range")
    parser.add_argument("--session-ms", type=int, default=6000)
    parser.add_argument("--instance-id")
    args = parser.parse_args()
    # kafka-python's and aiokafka's coordinator logs go to stderr (cgkit's Member keeps them for failures).
    logging.basicConfig(
        level=os.environ.get("GROUP_MEMBER_LOG_LEVEL", "INFO"),
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    # SIGUSR1 dumps every thread's stack to stderr (cgkit's Member asks for it when a wait times out).
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=watch_stdin, daemon=True).start()
    {"confluent": run_confluent, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka}[
        args.client
    ](args)


if __name__ == "__main__":
    main()
