"""Storage limits: more partitions than the process may open files (the log store keeps a bounded
cache of open segment files), and a full disk (KAFKA_STORAGE_ERROR / NOT_COORDINATOR, recovery
without a restart, nothing acknowledged lost)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from conftest import CorralProcess
from rawwire import RawClient

from corral import _core
from corral.errors import ErrorCode
from corral.network.apis import ApiKey

LATEST, EARLIEST = -1, -2


def create(client: RawClient, name: str, partitions: int, **configs: str) -> None:
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": 1,
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in configs.items()],
            }
        ],
        "timeout_ms": 30000,
        "validate_only": False,
    }
    result = client.call(ApiKey.CREATE_TOPICS, 7, body)["topics"][0]
    assert result["error_code"] == 0, result


def produce(client: RawClient, topic: str, batches: dict[int, bytes]) -> dict[int, tuple[int, int]]:
    """One Produce (v9, acks=all) of a batch per partition: {partition: (error, base offset)}."""
    body = {
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [
            {
                "name": topic,
                "partition_data": [{"index": p, "records": b} for p, b in batches.items()],
            }
        ],
    }
    response = client.call(ApiKey.PRODUCE, 9, body)
    return {
        r["index"]: (r["error_code"], r["base_offset"])
        for t in response["responses"]
        for r in t["partition_responses"]
    }


def fetch(
    client: RawClient, topic: str, offsets: dict[int, int], partition_max_bytes: int = 1 << 20
) -> dict[int, tuple[int, int, list]]:
    """One Fetch (v12): {partition: (error, high watermark, [(offset, key, value)])}."""
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 64 << 20,
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
                        "partition_max_bytes": partition_max_bytes,
                    }
                    for p, o in offsets.items()
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    out = {}
    for t in client.call(ApiKey.FETCH, 12, body)["responses"]:
        for part in t["partitions"]:
            records = [(o, k, v) for o, _, k, v in _core.decode_batches(part["records"] or b"")]
            out[part["partition_index"]] = (part["error_code"], part["high_watermark"], records)
    return out


def list_offsets(
    client: RawClient, topic: str, partitions: range, timestamp: int
) -> dict[int, tuple[int, int]]:
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {
                "name": topic,
                "partitions": [{"partition_index": p, "timestamp": timestamp} for p in partitions],
            }
        ],
    }
    response = client.call(ApiKey.LIST_OFFSETS, 7, body)
    return {
        p["partition_index"]: (p["error_code"], p["offset"])
        for t in response["topics"]
        for p in t["partitions"]
    }


def commit(client: RawClient, group: str, topic: str, offset: int, metadata: str = "") -> int:
    body = {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": offset,
                        "committed_metadata": metadata,
                    }
                ],
            }
        ],
    }
    response = client.call(ApiKey.OFFSET_COMMIT, 8, body)
    return response["topics"][0]["partitions"][0]["error_code"]


def committed(client: RawClient, group: str, topic: str) -> int:
    response = client.call(
        ApiKey.OFFSET_FETCH,
        7,
        {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]},
    )
    return response["topics"][0]["partitions"][0]["committed_offset"]


def still_serving(broker: CorralProcess, topic: str) -> None:
    with RawClient(broker.port) as client:
        versions = client.call(
            ApiKey.API_VERSIONS,
            3,
            {"client_software_name": "check", "client_software_version": "1"},
        )
        assert versions["error_code"] == 0 and versions["api_keys"]
        metadata = client.call(
            ApiKey.METADATA, 12, {"topics": [{"name": topic, "topic_id": bytes(16)}]}
        )
        assert metadata["topics"][0]["error_code"] == 0, metadata


def assert_clean_log(text: str) -> None:
    assert "internal error" not in text and "Traceback" not in text, text[-5000:]


# ======================================================================== file descriptors ===

PARTITIONS = 1000
FD_LIMIT = 256


def _value(partition: int, round_: int) -> bytes:
    return f"p{partition}-r{round_}".encode()


def _check_all(broker: CorralProcess, rounds: int) -> None:
    """Every partition holds `rounds` records, readable by Fetch and counted by ListOffsets."""
    with RawClient(broker.port, timeout=60) as client:
        assert list_offsets(client, "many", range(PARTITIONS), LATEST) == {
            p: (0, rounds) for p in range(PARTITIONS)
        }
        assert list_offsets(client, "many", range(PARTITIONS), EARLIEST) == {
            p: (0, 0) for p in range(PARTITIONS)
        }
        fetched = fetch(client, "many", {p: 0 for p in range(PARTITIONS)})
        for p in range(PARTITIONS):
            error, hw, records = fetched[p]
            assert (error, hw) == (0, rounds), (p, fetched[p])
            assert [(o, v) for o, _, v in records] == [(r, _value(p, r)) for r in range(rounds)], p


def _produce_round(broker: CorralProcess, round_: int) -> None:
    with RawClient(broker.port, timeout=60) as client:
        batches = {
            p: _core.build_batch([(b"k", _value(p, round_))], 1000 + round_)
            for p in range(PARTITIONS)
        }
        assert produce(client, "many", batches) == {p: (0, round_) for p in range(PARTITIONS)}


def test_more_partitions_than_open_files_allowed(corral_factory):
    broker = corral_factory(rlimit_nofile=FD_LIMIT)
    log = broker.log()
    assert f"soft {FD_LIMIT}" in log and f"hard {FD_LIMIT}" in log, log
    assert f"at most {FD_LIMIT // 4} segment files open" in log, log
    with RawClient(broker.port, timeout=60) as client:
        create(client, "many", PARTITIONS)
    _produce_round(broker, 0)
    _check_all(broker, 1)

    broker.stop()
    broker.start(timeout=60)
    _check_all(broker, 1)
    _produce_round(broker, 1)
    _check_all(broker, 2)

    broker.kill()
    broker.start(timeout=60)
    _check_all(broker, 2)
    _produce_round(broker, 2)
    _check_all(broker, 3)
    assert_clean_log(broker.log())
    # The descriptors in use stay far below the limit.
    open_fds = len(os.listdir(f"/proc/{broker.proc.pid}/fd"))
    assert open_fds < FD_LIMIT // 4 + 64, open_fds
    broker.stop()


# ================================================================================ disk full ===

RECORD = 64 * 1024


@pytest.fixture
def small_disk(tmp_path):
    """A 20 MB tmpfs, unmounted afterwards."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs for the disk-full test (needs root or CAP_SYS_ADMIN): "
            f"{result.stderr.strip()}"
        )
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _big_batch(tag: str) -> bytes:
    value = tag.encode() + b"." * (RECORD - len(tag))
    return _core.build_batch([(tag.encode(), value)], int(time.time() * 1000))


def test_a_huge_topic_costs_no_files_until_written(corral_factory):
    # Reproduced on main: one ListOffsets of a 30,000-partition topic opened a file per partition
    # (EMFILE, an ~11 s stall) and then the broker could not restart. Partitions that never got a
    # record have no files at all.
    broker = corral_factory(rlimit_nofile=FD_LIMIT)
    partitions = 30_000
    with RawClient(broker.port, timeout=120) as client:
        create(client, "huge", partitions)
        assert set(list_offsets(client, "huge", range(partitions), LATEST).values()) == {(0, 0)}
        assert produce(client, "huge", {7: _core.build_batch([(b"k", b"v")], 1000)}) == {7: (0, 0)}
        fetched = fetch(client, "huge", {p: 0 for p in range(partitions)}, partition_max_bytes=1024)
    assert {p: r[0] for p, r in fetched.items()} == dict.fromkeys(range(partitions), 0)
    assert fetched[7][2] == [(0, b"k", b"v")]
    on_disk = sorted(d.name for d in broker.data_dir.iterdir() if d.name.startswith("huge-"))
    assert on_disk == ["huge-7"]
    broker.kill()
    broker.start(timeout=120)
    with RawClient(broker.port, timeout=120) as client:
        offsets = list_offsets(client, "huge", range(partitions), LATEST)
    assert offsets == {p: (0, 1 if p == 7 else 0) for p in range(partitions)}
    assert "internal error" not in broker.log() and "Traceback" not in broker.log()


def test_disk_full_answers_storage_errors_and_recovers(tmp_path, small_disk):
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (5 << 20))
    broker = CorralProcess(
        small_disk / "corral",
        {
            "log.segment.bytes": str(1 << 20),
            "offsets.topic.num.partitions": "2",
            "corral.coordinator.snapshot.interval.ms": "300",
        },
    )
    # The broker's own log goes elsewhere: it must not share the full disk.
    broker.log_path = tmp_path / "corral.log"
    try:
        _disk_full_scenario(broker, filler)
    finally:
        if broker.alive():
            broker.proc.kill()
            broker.proc.wait()


def _disk_full_scenario(broker: CorralProcess, filler) -> None:
    broker.start()
    acked: dict[int, dict[int, bytes]] = {0: {}, 1: {}}  # partition -> offset -> key
    with RawClient(broker.port, timeout=30) as client:
        create(client, "fill", 2)
        create(client, "t", 1)
        assert commit(client, "g", "t", 1) == 0
        last_commit = 1

        # Fill the disk with 64 KB records until both partitions answer KAFKA_STORAGE_ERROR.
        refused = {0: 0, 1: 0}
        n = 0
        while min(refused.values()) < 3:
            n += 1
            assert n < 1000, "the disk never filled"
            tag = f"r{n}"
            for p, (error, base) in produce(client, "fill", {n % 2: _big_batch(tag)}).items():
                if error == 0:
                    acked[p][base] = tag.encode()
                else:
                    assert error == ErrorCode.KAFKA_STORAGE_ERROR, error
                    refused[p] += 1
        assert sum(len(a) for a in acked.values()) > 100

        # Offset commits: each with 2 KB of metadata, so the log's last page fills quickly.
        answers = []
        for i in range(50):
            answer = commit(client, "g", "t", 100 + i, metadata="m" * 2000)
            answers.append(answer)
            if answer == 0:
                last_commit = 100 + i
            else:
                assert answer == ErrorCode.NOT_COORDINATOR, answers
                if answers.count(ErrorCode.NOT_COORDINATOR) >= 3:
                    break
        assert ErrorCode.NOT_COORDINATOR in answers, answers
        assert committed(client, "g", "t") == last_commit

        # CreateTopics on a full disk: each refused, the log told once and then a count.
        creates = 300
        refused_creates = 0
        for i in range(creates):
            body = {
                "topics": [
                    {
                        "name": f"late{i}",
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout_ms": 30000,
                "validate_only": False,
            }
            result = client.call(ApiKey.CREATE_TOPICS, 7, body)["topics"][0]
            refused_creates += result["error_code"] != 0
        assert refused_creates > creates // 2, refused_creates

        # Reads still work on a full disk.
        fetched = fetch(
            client, "fill", {0: min(acked[0]), 1: min(acked[1])}, partition_max_bytes=2 * RECORD
        )
        assert all(error == 0 and records for error, _, records in fetched.values()), fetched
    time.sleep(1)  # a coordinator snapshot attempt or two on the full disk
    assert broker.alive()
    still_serving(broker, "fill")
    log = broker.log()
    assert_clean_log(log)
    warnings = [line for line in log.splitlines() if " WARNING " in line]
    assert any("KAFKA_STORAGE_ERROR" in line for line in warnings), log[-5000:]
    assert any("NOT_COORDINATOR" in line for line in warnings), log[-5000:]
    # Rate-limited: not one line per refused request.
    assert len([w for w in warnings if "KAFKA_STORAGE_ERROR" in w]) < sum(refused.values())
    journal = [w for w in warnings if "could not write topic changes" in w]
    assert 1 <= len(journal) <= 4, journal

    # Space comes back: writes resume without a restart.
    filler.unlink()
    with RawClient(broker.port, timeout=30) as client:
        for i in range(4):
            tag = f"after{i}"
            [(p, (error, base))] = produce(client, "fill", {i % 2: _big_batch(tag)}).items()
            assert error == 0, error
            acked[p][base] = tag.encode()
        assert commit(client, "g", "t", 500) == 0
        last_commit = 500
        assert committed(client, "g", "t") == 500

    def everything_acknowledged_is_there() -> None:
        with RawClient(broker.port, timeout=30) as client:
            for p in (0, 1):
                found: dict[int, bytes] = {}
                offset = 0
                while True:
                    error, hw, records = fetch(client, "fill", {p: offset})[p]
                    assert error == 0
                    if not records:
                        break
                    for o, key, _ in records:
                        found[o] = key
                    offset = records[-1][0] + 1
                assert offset == hw
                # Offsets are dense, and every acknowledged record is where it was acknowledged.
                assert sorted(found) == list(range(hw)), p
                assert {o: found[o] for o in acked[p]} == acked[p], p
            assert committed(client, "g", "t") == last_commit

    broker.stop()
    broker.start()
    everything_acknowledged_is_there()
    broker.kill()
    broker.start()
    everything_acknowledged_is_there()
    assert_clean_log(broker.log())
    broker.stop()
