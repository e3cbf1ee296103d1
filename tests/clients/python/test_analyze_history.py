"""The benchmark's generated history (benches/analyze_history.py) is corral's real format: a
corral started on it loads every group's committed offsets, and a Kafka consumer reads its
`__corral_analytics` samples; its Parquet inputs hold the same rows."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
from analyze_history import generate
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient
from conftest import CorralProcess


def test_history_loads_in_corral(tmp_path):
    stats = generate(tmp_path / "data", 3001, groups=5, parquet=tmp_path / "inputs")
    commits = pq.read_table(tmp_path / "inputs" / "commits").to_pylist()
    samples = pq.read_table(tmp_path / "inputs" / "samples").to_pylist()
    assert len(commits) == stats["commits"] == 3001
    assert len(samples) == stats["samples"] > 0
    last = {}
    for c in sorted(commits, key=lambda c: (c["time_ms"], c["seq"])):
        last.setdefault(c["group"], {})[(c["topic"], c["partition"])] = c["offset"]
    broker = CorralProcess(tmp_path / "data").start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for group, offsets in last.items():
            answer = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
            got = answer[group].result(timeout=20).topic_partitions
            assert {(tp.topic, tp.partition): tp.offset for tp in got} == offsets
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "history-check",
                "enable.auto.commit": False,
            }
        )
        consumer.assign([TopicPartition("__corral_analytics", 0, 0)])
        read = []
        while len(read) < len(samples):
            msg = consumer.poll(10)
            assert msg is not None and not msg.error(), msg and msg.error()
            read.append((msg.timestamp()[1], json.loads(msg.value())))
        consumer.close()
        assert [(t, v["topic"], v["partition"], v["log_end_offset"]) for t, v in read] == [
            (s["time_ms"], s["topic"], s["partition"], s["log_end_offset"]) for s in samples
        ]
    finally:
        broker.stop()
