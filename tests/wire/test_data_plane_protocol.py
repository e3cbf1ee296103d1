"""Produce, Fetch, ListOffsets and InitProducerId at exact versions over a raw socket: the error
codes and edge cases real clients cannot be steered into."""

from __future__ import annotations

import struct
import time

import pytest
from rawwire import RawClient, closed_within
from wire_data import _legacy_produce, batch, create, fetch, produce, produce_body

from corral import _core
from corral.errors import ErrorCode
from corral.network.apis import ApiKey


def list_offset(
    client: RawClient, topic: str, partition: int, timestamp: int, version: int = 7
) -> dict:
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {"name": topic, "partitions": [{"partition_index": partition, "timestamp": timestamp}]}
        ],
    }
    return client.call(ApiKey.LIST_OFFSETS, version, body)["topics"][0]["partitions"][0]


@pytest.fixture
def client(shared_corral):
    with RawClient(shared_corral.port) as c:
        yield c


def test_produce_fetch_round_trip_at_every_version(client):
    create(client, "versions")
    for version in range(3, 13):
        result = produce(client, "versions", 0, batch(2), version=version)
        assert result["error_code"] == 0 and result["base_offset"] == 2 * (version - 3)
    for version in range(4, 13):
        response = fetch(client, "versions", 0, 3, version=version)
        part = response["responses"][0]["partitions"][0]
        assert part["error_code"] == 0 and part["high_watermark"] == 20
        records = _core.decode_batches(part["records"])
        # Whole batches: the one holding offset 3 starts at 2.
        assert [r[0] for r in records] == list(range(2, 20))
        assert records[1][2:] == (b"k1", b"v1")


def test_produce_errors(client):
    create(client, "small", **{"max.message.bytes": "200"})
    assert (
        produce(client, "nope", 0, batch(1))["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert (
        produce(client, "small", 5, batch(1))["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    big = produce(client, "small", 0, batch(30))
    assert big["error_code"] == ErrorCode.MESSAGE_TOO_LARGE and big["base_offset"] == -1
    corrupt = bytearray(batch(2))
    corrupt[-1] ^= 0xFF
    assert produce(client, "small", 0, bytes(corrupt))["error_code"] == ErrorCode.CORRUPT_MESSAGE
    assert produce(client, "small", 0, batch(1)[:40])["error_code"] == ErrorCode.CORRUPT_MESSAGE
    two = produce(client, "small", 0, batch(1) + batch(1))
    assert two["error_code"] == ErrorCode.INVALID_RECORD
    assert produce(client, "small", 0, None)["error_code"] == ErrorCode.INVALID_RECORD
    assert (
        produce(client, "small", 0, batch(1), acks=2)["error_code"]
        == ErrorCode.INVALID_REQUIRED_ACKS
    )
    # Nothing of that was appended.
    assert produce(client, "small", 0, batch(1))["base_offset"] == 0


def test_acks_0_gets_no_response(client):
    create(client, "fire")
    client.send(ApiKey.PRODUCE, 9, produce_body("fire", 0, batch(3), acks=0))
    # The next response on the connection answers the next request.
    assert list_offset(client, "fire", 0, -1)["offset"] == 3


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_gets_unsupported_version(shared_corral, version):
    # Advertised from 0 (older librdkafka only compresses then), but message formats 0 and 1 are
    # gone since Kafka 4: every partition is answered UNSUPPORTED_VERSION in the v0-2 layout.
    assert _core.codec_versions(ApiKey.PRODUCE)[0] == 3
    with RawClient(shared_corral.port) as c:
        c.sock.sendall(_legacy_produce(version, acks=1, correlation_id=41))
        frame = c.receive_frame()
        correlation_id, topics, name_len = struct.unpack_from(">iih", frame)
        assert (correlation_id, topics, frame[10:13]) == (41, 1, b"old")
        offset, partitions = 13 + 4, struct.unpack_from(">i", frame, 13)[0]
        assert partitions == 2
        entry = ">ihqq" if version == 2 else ">ihq"
        for expected in (0, 1):
            index, error, base_offset, *rest = struct.unpack_from(entry, frame, offset)
            assert (index, error, base_offset) == (expected, ErrorCode.UNSUPPORTED_VERSION, -1)
            offset += struct.calcsize(entry)
        assert len(frame) == offset + (4 if version >= 1 else 0)
        # The connection keeps serving newer requests.
        assert c.call(ApiKey.METADATA, 12, {"topics": []})["brokers"]


def test_produce_v0_with_acks_0_closes_the_connection(shared_corral):
    with RawClient(shared_corral.port) as c:
        c.sock.sendall(_legacy_produce(0, acks=0, correlation_id=1))
        assert closed_within(c.sock, 5)


def test_log_append_time_topic_stamps_batches(client):
    create(client, "lat", **{"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    result = produce(client, "lat", 0, batch(3, ts=5))
    assert result["log_append_time_ms"] >= before
    part = fetch(client, "lat", 0, 0)["responses"][0]["partitions"][0]
    assert {r[1] for r in _core.decode_batches(part["records"])} == {result["log_append_time_ms"]}


def test_fetch_sizes_and_out_of_range(client):
    create(client, "sizes")
    for i in range(5):
        produce(client, "sizes", 0, _core.build_batch([(None, b"x" * 1000)] * 3, 1000 + i))
    one = len(
        batch_bytes := fetch(client, "sizes", 0, 0, partition_max_bytes=1)["responses"][0][
            "partitions"
        ][0]["records"]
    )
    assert one > 1 and len(_core.decode_batches(batch_bytes)) == 3, "the first batch comes whole"
    two = fetch(client, "sizes", 0, 0, partition_max_bytes=2 * one)["responses"][0]["partitions"][0]
    assert len(two["records"]) == 2 * one
    capped = fetch(client, "sizes", 0, 0, max_bytes=3 * one + 10)["responses"][0]["partitions"][0]
    assert len(capped["records"]) == 3 * one
    at_end = fetch(client, "sizes", 0, 15)["responses"][0]["partitions"][0]
    assert at_end["error_code"] == 0 and at_end["records"] == b""
    beyond = fetch(client, "sizes", 0, 16)["responses"][0]["partitions"][0]
    assert beyond["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
    # As Kafka 4.4: an out-of-range answer carries no offsets.
    assert (beyond["high_watermark"], beyond["last_stable_offset"], beyond["log_start_offset"]) == (
        -1,
        -1,
        -1,
    )
    unknown = fetch(client, "no-such-topic", 0, 0)["responses"][0]["partitions"][0]
    assert unknown["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_fetch_waits_max_wait_for_min_bytes_and_declines_sessions(client):
    create(client, "waiting")
    started = time.monotonic()
    response = fetch(client, "waiting", 0, 0, max_wait_ms=300, min_bytes=1)
    waited = time.monotonic() - started
    assert 0.25 < waited < 5, waited
    assert (
        response["session_id"] == 0 and response["responses"][0]["partitions"][0]["records"] == b""
    )
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1000,
        "isolation_level": 0,
        "session_id": 1234,
        "session_epoch": 1,
        "topics": [],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    assert client.call(ApiKey.FETCH, 12, body)["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_list_offsets(client):
    create(client, "times", 2)
    for ts in (1000, 3000, 2000):
        produce(client, "times", 0, batch(2, ts=ts))
    assert list_offset(client, "times", 0, -2)["offset"] == 0
    assert list_offset(client, "times", 0, -1)["offset"] == 6
    assert (lambda r: (r["timestamp"], r["offset"]))(list_offset(client, "times", 0, 1500)) == (
        3000,
        2,
    )
    assert (lambda r: (r["timestamp"], r["offset"]))(list_offset(client, "times", 0, 2000)) == (
        3000,
        2,
    )
    assert list_offset(client, "times", 0, 5000)["offset"] == -1
    top = list_offset(client, "times", 0, -3)
    assert (top["timestamp"], top["offset"]) == (3000, 2)
    assert list_offset(client, "times", 1, -3)["offset"] == -1, "empty partition has no max"
    assert list_offset(client, "times", 1, -1, version=1)["offset"] == 0
    assert list_offset(client, "times", 7, -1)["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def init_producer_id(client: RawClient, version: int = 4, **body) -> dict:
    request = {
        "transactional_id": None,
        "transaction_timeout_ms": 60000,
        "producer_id": -1,
        "producer_epoch": -1,
        **body,
    }
    return client.call(ApiKey.INIT_PRODUCER_ID, version, request)


def test_idempotent_sequences(client):
    create(client, "idem")
    ids = init_producer_id(client)
    assert ids["error_code"] == 0 and ids["producer_epoch"] == 0
    pid = ids["producer_id"]
    assert init_producer_id(client, version=0)["producer_id"] != pid

    def send(seq: int, n: int = 2, epoch: int = 0) -> dict:
        return produce(
            client, "idem", 0, batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
        )

    assert send(0)["base_offset"] == 0
    assert send(2)["base_offset"] == 2
    retry = send(2)
    assert (retry["error_code"], retry["base_offset"]) == (0, 2), (
        "a retried batch is acknowledged once"
    )
    assert send(5)["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert send(4)["base_offset"] == 4
    assert send(0, epoch=1)["base_offset"] == 6, "a new epoch starts at sequence 0"
    assert send(6, epoch=0)["error_code"] == ErrorCode.INVALID_PRODUCER_EPOCH
    assert list_offset(client, "idem", 0, -1)["offset"] == 8


def test_producer_state_and_ids_survive_restart(corral):
    with RawClient(corral.port) as c:
        create(c, "idem")
        pid = init_producer_id(c)["producer_id"]
        for seq in (0, 2):
            produce(c, "idem", 0, batch(2, producer_id=pid, producer_epoch=0, base_sequence=seq))
    corral.kill()
    corral.start()
    with RawClient(corral.port) as c:
        retry = produce(c, "idem", 0, batch(2, producer_id=pid, producer_epoch=0, base_sequence=2))
        assert (retry["error_code"], retry["base_offset"]) == (0, 2)
        gap = produce(c, "idem", 0, batch(2, producer_id=pid, producer_epoch=0, base_sequence=7))
        assert gap["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert init_producer_id(c)["producer_id"] > pid


def test_init_producer_id_with_a_transactional_id_bumps_its_epoch(client):
    first = init_producer_id(client, transactional_id="txn")
    assert (first["error_code"], first["producer_epoch"]) == (0, 0)
    again = init_producer_id(client, transactional_id="txn")
    assert (again["producer_id"], again["producer_epoch"]) == (first["producer_id"], 1)
    # KIP-360: naming an older epoch of the id is a zombie: PRODUCER_FENCED (v4+).
    stale = init_producer_id(
        client, transactional_id="txn", producer_id=first["producer_id"], producer_epoch=7
    )
    assert stale["error_code"] == ErrorCode.PRODUCER_FENCED
    too_long = init_producer_id(client, transactional_id="t2", transaction_timeout_ms=900001)
    assert too_long["error_code"] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert init_producer_id(client, producer_id=5)["error_code"] == ErrorCode.INVALID_REQUEST


def test_retention_deletes_old_segments(corral_factory):
    broker = corral_factory(**{"log.retention.check.interval.ms": 100})
    with RawClient(broker.port) as c:
        create(c, "short", **{"segment.bytes": "1000", "retention.bytes": "3000"})
        create(c, "old", **{"retention.ms": "60000"})
        now_ms = int(time.time() * 1000)
        for _ in range(40):
            produce(c, "short", 0, batch(5, ts=now_ms))
        produce(c, "old", 0, batch(5, ts=now_ms - 120_000))
        deadline = time.monotonic() + 10
        while (
            list_offset(c, "short", 0, -2)["offset"] == 0
            or list_offset(c, "old", 0, -2)["offset"] == 0
        ) and time.monotonic() < deadline:
            time.sleep(0.1)
        start = list_offset(c, "short", 0, -2)["offset"]
        assert 0 < start < 200
        assert list_offset(c, "short", 0, -1)["offset"] == 200
        gone = fetch(c, "short", 0, 0)["responses"][0]["partitions"][0]
        assert (gone["error_code"], gone["log_start_offset"]) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
        kept = fetch(c, "short", 0, start)["responses"][0]["partitions"][0]
        assert _core.decode_batches(kept["records"])[0][0] == start
        # Expired by time: the active segment goes too, the log starts at its end.
        assert list_offset(c, "old", 0, -2)["offset"] == 5
        assert list_offset(c, "old", 0, -1)["offset"] == 5
    assert "retention deleted" in broker.log()


def test_deleted_topic_takes_its_log_along(corral):
    with RawClient(corral.port) as c:
        create(c, "doomed", 2)
        produce(c, "doomed", 1, batch(3))
        assert (corral.data_dir / "doomed-1").is_dir()
        result = c.call(
            ApiKey.DELETE_TOPICS,
            6,
            {"topics": [{"name": "doomed", "topic_id": bytes(16)}], "timeout_ms": 5000},
        )
        assert result["responses"][0]["error_code"] == 0
        assert not (corral.data_dir / "doomed-1").exists()
        assert (
            produce(c, "doomed", 1, batch(1))["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )
        create(c, "doomed", 2)
        assert produce(c, "doomed", 1, batch(1))["base_offset"] == 0
