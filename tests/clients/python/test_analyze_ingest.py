"""`corral.analyze.inputs.ingest.land` (`corral analyze --bootstrap`) against a real corral and the
Apache Kafka 4.4 reference broker: confluent-kafka clients commit known offsets in several
groups, topics and partitions (one commit with metadata, one group deleted afterwards), a
classic member joins and leaves, producers move the log ends on. The landed Parquet must hold
exactly the commits made, in log order per group; live samples equal to the watermarks; on
corral the events of `__corral_analytics` (as librdkafka reads them), on Kafka the events
derived from GroupMetadata; `read_landed` reads the same rows back; `--from`/`--to` windows;
an unreachable or silent broker fails with IngestError within the timeout."""

from __future__ import annotations

import json
import socket
import time
from collections import Counter

import pyarrow.parquet as pq
import pytest
import trio
from cgkit import create_topics, wait_until
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from conftest import CorralProcess
from kafka_java import kafka_reference

from corral.analyze import inputs
from corral.analyze.inputs import analytics_records
from corral.analyze.inputs.fetching import consume, fetch_body
from corral.analyze.inputs.ingest import LIVE_SAMPLE_SEQ, IngestError, land
from corral.network.apis import ApiKey
from corral.observability.analytics_topic import TOPIC as ANALYTICS_TOPIC
from corral.ops.admin import Admin

TOPICS = {"ia": 3, "ib": 2}
BEFORE = [
    ("ig-one", "ia", 0, 1),
    ("ig-one", "ia", 1, 2),
    ("ig-two", "ib", 0, 1),
    ("ig-gone", "ia", 0, 2),
    ("ig-two", "ia", 2, 4),
]
AFTER = [("ig-one", "ia", 0, 3), ("ig-two", "ib", 1, 2), ("ig-one", "ia", 1, 5)]
METADATA = {("ig-one", "ia", 0, 3): "with metadata"}
LIVE = "ig-live"  # a classic member joins, commits what it read, and leaves
TXN = "ig-txn"  # commits offsets in transactions
SAMPLE_FOR_S, SAMPLE_EVERY_S = 0.4, 0.2  # three rounds


def produce(bootstrap: str, per_partition: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for topic, n in TOPICS.items():
        for p in range(n):
            for i in range(per_partition + p):
                producer.produce(topic, f"{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0


def commit(bootstrap: str, rows: list[tuple[str, str, int, int]]) -> None:
    """One synchronous commit per row, in order: the order they reach the log."""
    for group, topic, p, offset in rows:
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
        )
        try:
            consumer.commit(
                offsets=[
                    TopicPartition(topic, p, offset, METADATA.get((group, topic, p, offset), ""))
                ],
                asynchronous=False,
            )
        finally:
            consumer.close()


def live_member(bootstrap: str) -> list[tuple[str, str, int, int]]:
    """A classic member of LIVE reads all of `ib`, commits, leaves: the commits it made."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": LIVE,
            "group.protocol": "classic",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    want = sum(5 + p for p in range(TOPICS["ib"]))
    try:
        consumer.subscribe(["ib"])
        seen = 0
        deadline = time.monotonic() + 30
        while seen < want and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            seen += bool(m is not None and not m.error())
        assert seen == want
        done = sorted(consumer.position(consumer.assignment()), key=lambda tp: tp.partition)
        for tp in done:  # one commit each: their order in the log is known
            consumer.commit(offsets=[tp], asynchronous=False)
    finally:
        consumer.close()
    return [(LIVE, tp.topic, tp.partition, tp.offset) for tp in done]


def transactional_commits(bootstrap: str) -> list[tuple[str, str, int, int]]:
    """Offsets sent in transactions (Kafka only: corral has none), one aborted between two
    committed: the commits that count."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": TXN, "enable.auto.commit": False}
    )
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ig-txn-producer"})
    try:
        producer.init_transactions(60)
        for offset, keep in ((2, True), (3, False), (4, True)):
            producer.begin_transaction()
            producer.send_offsets_to_transaction(
                [TopicPartition("ib", 1, offset)], consumer.consumer_group_metadata(), 30
            )
            (producer.commit_transaction if keep else producer.abort_transaction)(30)
    finally:
        consumer.close()
    return [(TXN, "ib", 1, 2), (TXN, "ib", 1, 4)]


def scenario(bootstrap: str, transactions: bool = False) -> tuple[list, list, int]:
    """Builds the history: the commits made before a time, those made after, and that time."""
    create_topics(bootstrap, TOPICS)
    produce(bootstrap, 5)
    commit(bootstrap, BEFORE)
    before = BEFORE + live_member(bootstrap)
    time.sleep(0.01)
    middle = int(time.time() * 1000)
    time.sleep(0.01)
    commit(bootstrap, AFTER)
    after = AFTER + (transactional_commits(bootstrap) if transactions else [])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_consumer_groups(["ig-gone"])["ig-gone"].result(timeout=20)
    produce(bootstrap, 3)  # log ends move on past every commit
    return before, after, middle


def by_group(rows: list[dict]) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for r in sorted(rows, key=lambda r: r["seq"]):
        out.setdefault(r["group"], []).append((r["group"], r["topic"], r["partition"], r["offset"]))
    return out


def landed(directory) -> dict[str, list[dict]]:
    return {n: pq.read_table(directory / n).to_pylist() for n in inputs.NAMES}


def watermarks(bootstrap: str) -> dict[tuple[str, int], tuple[int, int]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ig-probe"})
    try:
        return {
            (t, p): consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10)
            for t, n in TOPICS.items()
            for p in range(n)
        }
    finally:
        consumer.close()


def as_rows(made: list) -> list[dict]:
    return [
        dict(zip(("group", "topic", "partition", "offset"), m), seq=i) for i, m in enumerate(made)
    ]


def check_commits(summary: dict, rows: list[dict], made: list) -> None:
    assert by_group(rows) == by_group(as_rows(made))
    for group in {r["group"] for r in rows}:  # a group's commits: one partition, one order
        seqs = [r["seq"] for r in rows if r["group"] == group]
        assert len(set(seqs)) == len(seqs)
    assert summary["inputs"]["commits"]["rows"] == len(made)
    assert summary["sources"]["__consumer_offsets"]["records"] >= len(made)


def check_live_samples(bootstrap: str, summary: dict, samples: list[dict], first_seq: int) -> None:
    live = sorted((r for r in samples if r["seq"] >= first_seq), key=lambda r: r["seq"])
    partitions = sum(TOPICS.values())
    assert summary["sources"]["live samples"] == {
        "rounds": 3,
        "rows": 3 * partitions,
        "interrupted": False,
    }
    assert [r["seq"] for r in live] == list(range(first_seq, first_seq + 3 * partitions))
    marks = watermarks(bootstrap)
    assert Counter((r["topic"], r["partition"]) for r in live) == Counter({tp: 3 for tp in marks})
    for r in live:
        assert (r["log_start_offset"], r["log_end_offset"]) == marks[(r["topic"], r["partition"])]
    times = sorted({r["time_ms"] for r in live})
    assert len(times) == 3 and times[-1] - times[0] >= 250


def check_windows(
    bootstrap: str, tmp_path, made_before: list, made_after: list, middle: int
) -> None:
    before = land(bootstrap, str(tmp_path / "before"), sample_for_s=1, to_ms=middle)
    after = land(bootstrap, str(tmp_path / "after"), sample_for_s=0, from_ms=middle)
    early, late = landed(tmp_path / "before"), landed(tmp_path / "after")
    assert by_group(early["commits"]) == by_group(as_rows(made_before))
    assert by_group(late["commits"]) == by_group(as_rows(made_after))
    assert before["skipped"]["commits outside the window"] == len(made_after)
    assert after["skipped"]["commits outside the window"] == len(made_before)
    assert "live samples" not in before["sources"] and not any(
        r["time_ms"] >= middle for r in early["samples"]
    )
    for rows in early.values():
        assert all(r["time_ms"] < middle for r in rows)
    for rows in late.values():
        assert all(r["time_ms"] >= middle for r in rows)
    assert any(r["group"] == "ig-gone" for r in late["events"])  # deleted after the middle


def check_read_back(spark, directory, rows: dict[str, list[dict]]) -> None:
    back = inputs.read_landed(spark, str(directory))
    for name, df in zip(inputs.NAMES, back):
        assert sorted(tuple(r) for r in df.collect()) == sorted(
            tuple(r.values()) for r in rows[name]
        )


# ------------------------------------------------------------------------------------- corral


def analytics_as_librdkafka_reads_it(bootstrap: str, end: int) -> analytics_records.Split:
    """The records of __corral_analytics below `end`, read by librdkafka."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "ig-reader", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(ANALYTICS_TOPIC, 0, 0)])
        records = []
        deadline = time.monotonic() + 30
        while (not records or records[-1][0] < end - 1) and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error() and m.offset() < end:
                records.append((m.offset(), m.timestamp()[1], m.key(), m.value()))
        return analytics_records.split(records)
    finally:
        consumer.close()


def test_land_from_corral(tmp_path, spark):
    broker = CorralProcess(
        tmp_path / "corral",
        {"corral.analytics.sample.interval.ms": "100", "group.initial.rebalance.delay.ms": "0"},
    )
    broker.start()
    try:
        made_before, made_after, middle = scenario(broker.bootstrap)
        made = made_before + made_after
        out = tmp_path / "landed"

        first: list[dict] = []

        def events_appended() -> bool:  # the analytics log appends what it buffered each 100 ms
            first.append(land(broker.bootstrap, str(out), sample_for_s=None))
            seen = {(r["group"], r["event"]) for r in landed(out)["events"]}
            return {("ig-gone", "group_deleted"), (LIVE, "member_left")} <= seen

        wait_until(events_appended, 20, "the group events in __corral_analytics")
        assert "live samples" not in first[-1]["sources"]  # by default none on corral
        summary = land(
            broker.bootstrap, str(out), sample_for_s=SAMPLE_FOR_S, sample_interval_s=SAMPLE_EVERY_S
        )
        rows = landed(out)
        assert summary["cluster"] == "corral" and not summary["events_derived_from_group_metadata"]
        check_commits(summary, rows["commits"], made)
        # samples and events: every record of __corral_analytics, then the live samples
        end = summary["sources"][ANALYTICS_TOPIC]["offsets"]
        expected = analytics_as_librdkafka_reads_it(broker.bootstrap, end)
        assert sorted(r["seq"] for r in rows["events"]) == expected.events["seq"].to_pylist()
        assert sorted(rows["events"], key=lambda r: r["seq"]) == expected.events.to_pylist()
        assert [
            r for r in sorted(rows["samples"], key=lambda r: r["seq"]) if r["seq"] < end
        ] == expected.samples.to_pylist()
        assert {r["event"] for r in rows["events"] if r["group"] == LIVE} >= {
            "member_joined",
            "rebalance_start",
            "rebalance_end",
            "generation_assignment",
            "member_left",
        }
        check_live_samples(broker.bootstrap, summary, rows["samples"], LIVE_SAMPLE_SEQ)
        check_read_back(spark, out, rows)
        check_windows(broker.bootstrap, tmp_path, made_before, made_after, middle)
    finally:
        broker.kill()


# ----------------------------------------------------------------------------- Apache Kafka


@pytest.mark.kafka
def test_land_from_kafka(tmp_path, spark):
    # One partition of __transaction_state (not 50): created quickly at the first transaction.
    with kafka_reference(
        {"group.initial.rebalance.delay.ms": 0, "transaction.state.log.num.partitions": 1}
    ) as bootstrap:
        made_before, made_after, middle = scenario(bootstrap, transactions=True)
        made = made_before + made_after
        out = tmp_path / "landed"
        summary = land(
            bootstrap, str(out), sample_for_s=SAMPLE_FOR_S, sample_interval_s=SAMPLE_EVERY_S
        )
        rows = landed(out)
        assert summary["cluster"] == "kafka" and summary["events_derived_from_group_metadata"]
        assert ANALYTICS_TOPIC not in summary["sources"]
        assert summary["skipped"]["records of aborted transactions"] == 1
        check_commits(summary, rows["commits"], made)
        check_live_samples(bootstrap, summary, rows["samples"], LIVE_SAMPLE_SEQ)
        events = sorted(rows["events"], key=lambda r: r["seq"])
        live = [r for r in events if r["group"] == LIVE]
        member = next(r for r in live if r["event"] == "member_joined")["value"]
        member_id = json.loads(member)["member_id"]
        shapes = [
            (r["event"], _fields(r["value"], "generation_id", "members", "members_before"))
            for r in live
        ]
        assert shapes == [
            ("member_joined", (1, None, None)),
            ("rebalance_end", (1, 1, 0)),
            ("generation_assignment", (1, None, None)),
            ("member_left", (1, None, None)),
            ("rebalance_end", (2, 0, 1)),
        ], shapes
        assignment = json.loads(live[2]["value"])
        assert assignment["assignment"] == {member_id: [["ib", 0], ["ib", 1]]}
        assert assignment["protocol_type"] == "consumer" and assignment["protocol_name"] == "range"
        assert [r["event"] for r in events if r["group"] == "ig-gone"] == ["group_deleted"]
        assert all(r["protocol"] == "classic" for r in events)
        check_read_back(spark, out, rows)
        check_windows(bootstrap, tmp_path, made_before, made_after, middle)


def _fields(value: str, *names: str) -> tuple:
    body = json.loads(value)
    assert body["v"] == 1
    return tuple(body.get(n) for n in names)


# ------------------------------------------------------------------ compression, failures


def test_compressed_batches_are_decoded(shared_corral):
    """Batches compressed by librdkafka with each codec, read back through fetching.consume:
    gzip, lz4 and zstd decoded; snappy skipped and counted."""
    create_topics(
        shared_corral.bootstrap, {f"ic-{c}": 1 for c in ("gzip", "lz4", "zstd", "snappy")}
    )
    for codec in ("gzip", "lz4", "zstd", "snappy"):
        producer = Producer(
            {
                "bootstrap.servers": shared_corral.bootstrap,
                "linger.ms": 50,
                "compression.type": codec,
            }
        )
        for i in range(20):
            producer.produce(f"ic-{codec}", f"value {i}".encode() * 4, key=f"k{i}".encode())
        assert producer.flush(30) == 0

    async def read(topic: str) -> tuple[list, Counter, int]:
        """The records consume() hands over, what it skipped, and the first batch's codec."""
        got: list = []
        skipped: Counter = Counter()
        async with Admin(shared_corral.bootstrap) as admin:
            await consume(admin, topic, {0: (0, 20)}, lambda p, rs: got.extend(rs), skipped)
            leader = (await admin.metadata([topic]))[topic][0]
            answer = await admin.call(
                await admin.node(leader), ApiKey.FETCH, fetch_body(topic, {0: 0})
            )
        first = answer["responses"][0]["partitions"][0]["records"]
        return got, skipped, int.from_bytes(first[21:23], "big") & 7

    for codec, codec_id in (("gzip", 1), ("lz4", 3), ("zstd", 4)):
        got, skipped, compressed = trio.run(read, f"ic-{codec}")
        assert compressed == codec_id  # librdkafka did compress: decompression was exercised
        assert not skipped, codec
        assert [(o, k, v) for o, _, k, v in got] == [
            (i, f"k{i}".encode(), f"value {i}".encode() * 4) for i in range(20)
        ], codec
        assert all(t > 1_600_000_000_000 for _, t, _, _ in got)
    got, skipped, compressed = trio.run(read, "ic-snappy")
    assert compressed == 2
    assert (
        got == [] and sum(skipped.values()) >= 1 and "snappy batches (no decompressor)" in skipped
    )


def test_unreachable_and_silent_brokers(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(IngestError, match=f"cannot reach 127.0.0.1:{port}"):
        land(f"127.0.0.1:{port}", str(tmp_path / "a"), sample_for_s=0, timeout_s=2)
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        with pytest.raises(IngestError, match="timed out"):
            land(
                f"127.0.0.1:{silent.getsockname()[1]}",
                str(tmp_path / "b"),
                sample_for_s=0,
                timeout_s=1,
            )
    assert time.monotonic() - started < 5
    with pytest.raises(IngestError, match="HOST:PORT"):
        land("no-port", str(tmp_path / "c"), sample_for_s=0)


def test_classic_events_from_group_metadata_records():
    """The cases the Kafka scenario does not reach: history cut by compaction (a group first seen
    at a later generation), a static member replaced within a generation, a group created empty."""
    from corral.analyze.inputs.classic_events import ClassicEvents
    from corral.groups.storage.records import GroupValue, MemberValue, group_value
    from corral.load.consumer_protocol import encode_assignment

    def value(generation: int, *members: tuple[str, str | None]) -> bytes:
        return group_value(
            GroupValue(
                "consumer",
                generation,
                "range",
                members[0][0] if members else None,
                0,
                [
                    MemberValue(
                        m, instance, "client", "/host", 300, 100, b"", encode_assignment({"t": [i]})
                    )
                    for i, (m, instance) in enumerate(members)
                ],
            )
        )

    def shapes(rows) -> list[tuple]:
        return [
            (
                event,
                {
                    k: v
                    for k, v in json.loads(body).items()
                    if k
                    in ("member_id", "generation_id", "members", "members_before", "assignment")
                },
                seq,
            )
            for _, _, event, _, body, seq in rows
        ]

    events = ClassicEvents()
    assert events.record("g", value(0), 10, 1) == []
    assert shapes(events.record("cut", value(5, ("a", None)), 10, 2)) == [
        ("rebalance_end", {"generation_id": 5, "members": 1, "members_before": None}, 2 << 20),
        (
            "generation_assignment",
            {"generation_id": 5, "assignment": {"a": [["t", 0]]}},
            (2 << 20) + 1,
        ),
    ]
    assert shapes(events.record("cut", value(5, ("b", "static-1")), 11, 3)) == [
        ("member_left", {"member_id": "a", "generation_id": 5}, 3 << 20),
        ("member_joined", {"member_id": "b", "generation_id": 5}, (3 << 20) + 1),
    ]
    assert shapes(events.record("cut", value(6, ("b", "static-1"), ("c", None)), 12, 4)) == [
        ("member_joined", {"member_id": "c", "generation_id": 6}, 4 << 20),
        ("rebalance_end", {"generation_id": 6, "members": 2, "members_before": 1}, (4 << 20) + 1),
        (
            "generation_assignment",
            {"generation_id": 6, "assignment": {"b": [["t", 0]], "c": [["t", 1]]}},
            (4 << 20) + 2,
        ),
    ]
    assert shapes(events.record("cut", None, 13, 5)) == [("group_deleted", {}, 5 << 20)]
    assert events.record("cut", value(1, ("d", None)), 14, 6)[0][2] == "member_joined"  # anew
