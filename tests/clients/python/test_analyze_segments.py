"""`corral analyze --data-dir` (corral.analyze.inputs.segments): the inputs read from a real corral's
data directory, while it runs and after it stopped, against what real clients (confluent-kafka)
committed and what ListOffsets answers: a classic group, a KIP-848 group and a standalone
(assign-only) group committing known offsets; the --from/--to window; torn tails; a missing or
empty `__corral_analytics`.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from cgkit import CG_FAST, create_topics
from confluent_kafka import Consumer, Producer, TopicPartition

from corral import _core
from corral.analyze.inputs import analytics_records, segments

TOPICS = {"seg-a": 3, "seg-b": 2}
GROUPS = {"seg-classic": "classic", "seg-848": "consumer", "seg-simple": None}
# Small segments, so that __consumer_offsets rolls (time indexes, several splits per partition).
SETTINGS = {
    **CG_FAST,
    "corral.analytics.sample.interval.ms": 200,
    "log.segment.bytes": 512,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
}
PARTITIONS = [(t, p) for t, n in TOPICS.items() for p in range(n)]


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.2)


def consumer(bootstrap: str, group: str, protocol: str | None) -> Consumer:
    config = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    if protocol == "consumer":
        config["group.protocol"] = "consumer"
    elif protocol == "classic":
        config |= {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
    c = Consumer(config)
    if protocol is None:
        c.assign([TopicPartition(t, p) for t, p in PARTITIONS])
    else:
        c.subscribe(list(TOPICS))

        def assigned() -> bool:
            c.poll(0.2)
            return len(c.assignment()) == len(PARTITIONS)

        wait_until(assigned, 30, f"the assignment of {group}")
    return c


def commit_round(consumers: dict[str, Consumer], base: int) -> list[tuple]:
    """One commit per partition per group, one partition per OffsetCommit (so the log order of a
    group's records is the order here): the (group, topic, partition, offset) committed."""
    done = []
    for i, (t, p) in enumerate(PARTITIONS):
        for group, c in consumers.items():
            offset = base + 10 * i + len(done) % 7
            c.commit(offsets=[TopicPartition(t, p, offset)], asynchronous=False)
            done.append((group, t, p, offset))
    return done


def analytics(data_dir: Path) -> analytics_records.Split:
    return segments.read_analytics(str(data_dir))


def commits_of(data_dir: Path, from_ms: int | None = None, to_ms: int | None = None) -> list[tuple]:
    """(group, topic, partition, offset) per group in log order, groups by name, as the job's
    tasks read them (a split per __consumer_offsets partition)."""
    rows = [
        r
        for _, paths in segments.commit_splits(str(data_dir), from_ms)
        for r in segments.commits_table(paths, from_ms, to_ms).to_pylist()
    ]
    rows.sort(key=lambda r: (r["group"], r["seq"]))
    return [(r["group"], r["topic"], r["partition"], r["offset"]) for r in rows]


def by_group(commits: list[tuple]) -> list[tuple]:
    return sorted(commits, key=lambda c: c[0])  # stable: each group's commits keep their order


def last_samples(split: analytics_records.Split) -> dict:
    out = {}
    for s in split.samples.to_pylist():
        out[(s["topic"], s["partition"])] = (s["log_end_offset"], s["log_start_offset"])
    return out


def event_kinds(split: analytics_records.Split) -> dict[str, set]:
    kinds: dict[str, set] = {}
    for e in split.events.to_pylist():
        kinds.setdefault(e["group"], set()).add((e["event"], e["protocol"]))
    return kinds


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """A corral with three groups that committed known offsets in two rounds; yields (broker,
    the consumers, the commits (group, topic, partition, offset) in order, a time between the
    rounds, {(topic, partition): (log end, log start)}). `stop_cleanly` stops it for the tests
    that read a stopped broker's files."""
    from conftest import CorralProcess

    broker = CorralProcess(
        tmp_path_factory.mktemp("segments") / "corral", {k: str(v) for k, v in SETTINGS.items()}
    ).start()
    consumers: dict[str, Consumer] = {}
    try:
        create_topics(broker.bootstrap, TOPICS)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(7):
            producer.produce("seg-a", b"x", partition=i % 2)
        producer.produce("seg-b", b"y", partition=1)
        assert producer.flush(20) == 0
        consumers = {g: consumer(broker.bootstrap, g, protocol) for g, protocol in GROUPS.items()}
        expected = commit_round(consumers, 100)
        time.sleep(0.02)
        split_ms = int(time.time() * 1000)
        time.sleep(0.02)
        expected += commit_round(consumers, 500)
        ends = {}
        for t, p in PARTITIONS:
            low, high = consumers["seg-simple"].get_watermark_offsets(
                TopicPartition(t, p), timeout=10
            )
            ends[(t, p)] = (high, low)
        yield broker, consumers, expected, split_ms, ends
    finally:
        for c in consumers.values():
            c.close()
        if broker.alive():
            broker.proc.kill()
            broker.proc.wait()


def test_reads_a_running_broker(history):
    broker, _, expected, _, ends = history
    data_dir = broker.data_dir
    # The analytics log is written every sample interval: wait for the end state in it.
    wait_until(
        lambda: all(last_samples(analytics(data_dir)).get(tp) == ends[tp] for tp in ends),
        15,
        "log-end samples equal to ListOffsets",
    )
    wanted = {
        "seg-classic": {("member_joined", "classic"), ("rebalance_end", "classic")},
        "seg-848": {("member_joined", "consumer"), ("rebalance_end", "consumer")},
    }
    wait_until(
        lambda: all(w <= event_kinds(analytics(data_dir)).get(g, set()) for g, w in wanted.items()),
        15,
        "group events",
    )
    assert commits_of(data_dir) == by_group(expected)
    inputs = segments.read_data_dir(str(data_dir))
    assert inputs.samples.schema == analytics_records.SAMPLES
    assert inputs.events.schema == analytics_records.EVENTS
    samples = {
        (r["topic"], r["partition"]): (r["log_end_offset"], r["log_start_offset"])
        for r in inputs.samples.sort_by("seq").to_pylist()
    }
    assert {tp: samples[tp] for tp in ends} == ends
    events = inputs.events.to_pylist()
    assert {e["event"] for e in events} >= {"member_joined", "rebalance_start", "rebalance_end"}
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)


def test_window_keeps_commit_times_and_skips_old_segments(history):
    broker, _, expected, split_ms, _ = history
    half = len(expected) // 2
    data_dir = str(broker.data_dir)
    assert commits_of(broker.data_dir, from_ms=split_ms) == by_group(expected[half:])
    assert commits_of(broker.data_dir, to_ms=split_ms) == by_group(expected[:half])
    assert commits_of(broker.data_dir, from_ms=split_ms, to_ms=split_ms) == []
    # Rolled segments entirely before the window are not even listed.
    everything = [p for _, paths in segments.commit_splits(data_dir, None) for p in paths]
    kept = [p for _, paths in segments.commit_splits(data_dir, split_ms) for p in paths]
    assert len(everything) > len(segments.partition_dirs(data_dir, segments.OFFSETS_TOPIC))
    assert set(kept) < set(everything)
    for path in set(everything) - set(kept):
        assert segments.newest_ms(Path(path)) < split_ms
    window = segments.read_data_dir(data_dir, from_ms=split_ms)
    assert all(
        r["time_ms"] >= split_ms for r in window.samples.to_pylist() + window.events.to_pylist()
    )


def stop_cleanly(history) -> None:
    """The members leave (member_left events written), then the broker stops cleanly."""
    broker, consumers, *_ = history
    if not broker.alive():
        return
    for c in consumers.values():
        c.close()
    consumers.clear()
    wait_until(
        lambda: (
            {"seg-classic", "seg-848"}
            <= {
                e["group"]
                for e in analytics(broker.data_dir).events.to_pylist()
                if e["event"] == "member_left"
            }
        ),
        15,
        "member_left events",
    )
    assert broker.stop() == 0


def test_after_a_clean_stop(history):
    broker, _, expected, _, ends = history
    stop_cleanly(history)
    assert commits_of(broker.data_dir) == by_group(expected)
    assert {
        tp: v for tp, v in last_samples(analytics(broker.data_dir)).items() if tp in ends
    } == ends


def last_commit_segment(data_dir: Path) -> Path:
    """The active segment of a __consumer_offsets partition holding commits."""
    for directory in segments.partition_dirs(str(data_dir), segments.OFFSETS_TOPIC):
        active = segments.segment_files(directory)[-1]
        if _core.decode_offset_commits(str(active))[0]:
            return active
    raise AssertionError("no active segment with commits")


def test_torn_tails_end_a_segment(history, tmp_path):
    broker, _, expected, _, _ = history
    stop_cleanly(history)
    copy = tmp_path / "copy"
    shutil.copytree(broker.data_dir, copy)
    segment = last_commit_segment(copy)
    whole = segment.read_bytes()
    # A batch being written: its first half only (header whole, records cut).
    segment.write_bytes(whole + whole[:100])
    assert _core.decode_offset_commits(str(segment))[2:] == (len(whole), "torn")
    assert commits_of(copy) == by_group(expected)
    # The last batch cut short: its commits are not read, nothing else changes.
    segment.write_bytes(whole[:-1])
    rows, _, at, why = _core.decode_offset_commits(str(segment))
    assert why == "torn" and at < len(whole)
    base = int.from_bytes(whole[at : at + 8], "big")  # the cut batch's first offset
    segment.write_bytes(whole)
    lost = [
        (r["group"], r["topic"], r["partition"], r["offset"])
        for b in segments.commit_batches(str(segment))
        for r in b.to_pylist()
        if r["seq"] >= base
    ]
    segment.write_bytes(whole[:-1])
    left = by_group(expected)
    for commit in lost:
        left.reverse()
        left.remove(commit)
        left.reverse()
    assert commits_of(copy) == left


def test_missing_or_empty_analytics_topic(history, tmp_path):
    broker, _, expected, _, _ = history
    stop_cleanly(history)
    copy = tmp_path / "copy"
    shutil.copytree(broker.data_dir, copy)
    analytics_dirs = segments.partition_dirs(str(copy), "__corral_analytics")
    assert analytics_dirs
    for directory in analytics_dirs:
        for f in directory.iterdir():
            f.write_bytes(b"")
    inputs = segments.read_data_dir(str(copy))
    assert inputs.samples.num_rows == inputs.events.num_rows == 0
    for directory in analytics_dirs:
        shutil.rmtree(directory)
    inputs = segments.read_data_dir(str(copy))
    assert inputs.samples.num_rows == inputs.events.num_rows == 0
    assert inputs.samples.schema == analytics_records.SAMPLES
    assert inputs.events.schema == analytics_records.EVENTS
    assert commits_of(copy) == by_group(expected)


def test_empty_or_missing_data_dir(tmp_path):
    inputs = segments.read_data_dir(str(tmp_path))
    assert (inputs.samples.num_rows, inputs.events.num_rows) == (0, 0)
    assert segments.commit_splits(str(tmp_path), None) == []
    with pytest.raises(FileNotFoundError):
        segments.read_data_dir(str(tmp_path / "nowhere"))
