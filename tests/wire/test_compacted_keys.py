"""Compacted topics refuse records without a key, as Kafka's LogValidator.validateKey: Produce
answers INVALID_RECORD for the partition, with a RecordError per keyless record and Kafka's
message, whether the batch is compressed or not and whether `compact` was there at creation or
appended at run time. Compressed batches are decompressed for the check, within the topic's
max.message.bytes. Raw Produce requests (exact fields) and real clients (confluent-kafka,
kafka-python), against a real corral; the raw requests against Apache Kafka 4.4 too."""

from __future__ import annotations

import gzip
import struct
import time

import pyarrow
import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from rawwire import RawClient

from corral import _core
from corral.errors import ErrorCode
from corral.network.apis import ApiKey

KEYLESS = "Compacted topic cannot accept message without key in topic partition {}"
CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
HEADER_LEN = 61


# -- building what producers send ----------------------------------------------------------------


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC32C[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 of a short input (< 16 bytes): the LZ4 frame descriptor's checksum."""
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    mask = 0xFFFFFFFF

    def rotl(x, r):
        return ((x << r) | (x >> (32 - r))) & mask

    assert len(data) < 16
    h = (seed + p5 + len(data)) & mask
    i = 0
    while i + 4 <= len(data):
        h = rotl((h + struct.unpack_from("<I", data, i)[0] * p3) & mask, 17) * p4 & mask
        i += 4
    for b in data[i:]:
        h = rotl((h + b * p5) & mask, 11) * p1 & mask
    h ^= h >> 15
    h = h * p2 & mask
    h ^= h >> 13
    h = h * p3 & mask
    return h ^ (h >> 16)


def _lz4_frame(data: bytes) -> bytes:
    """An LZ4 frame as Kafka's Lz4BlockOutputStream writes it: independent 64 KiB blocks (the Java
    broker reads no other kind), no checksums."""
    descriptor = bytes([0x60, 0x40])  # version 1, independent blocks; 64 KiB blocks
    out = struct.pack("<I", 0x184D2204) + descriptor + bytes([(_xxh32(descriptor) >> 8) & 0xFF])
    raw = pyarrow.Codec("lz4_raw")
    for at in range(0, len(data), 64 * 1024):
        block = raw.compress(data[at : at + 64 * 1024], asbytes=True)
        out += struct.pack("<I", len(block)) + block
    return out + struct.pack("<I", 0)


def _xerial_snappy(data: bytes) -> bytes:
    """snappy-java's stream format, as Kafka's Java producer writes it: 32 KiB blocks."""
    out = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for at in range(0, len(data), 32 * 1024):
        block = pyarrow.Codec("snappy").compress(data[at : at + 32 * 1024], asbytes=True)
        out += struct.pack(">i", len(block)) + block
    return out


def compress(codec: str, data: bytes) -> bytes:
    if codec == "gzip":
        return gzip.compress(data)
    if codec == "snappy":
        return _xerial_snappy(data)
    if codec == "lz4":
        return _lz4_frame(data)
    return pyarrow.Codec("zstd").compress(data, asbytes=True)


def batch(records: list[tuple[bytes | None, bytes | None]], codec: str | None = None) -> bytes:
    """A v2 batch of (key, value) records, compressed with `codec` when given."""
    plain = _core.build_batch(records, int(time.time() * 1000))
    if codec is None:
        return plain
    out = bytearray(plain[:HEADER_LEN] + compress(codec, plain[HEADER_LEN:]))
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, CODECS[codec])
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


MIXED = [
    (b"a", b"1"),
    (None, b"2"),
    (b"", b"3"),
    (None, None),
    (b"e", None),
    (None, b"6"),
    (None, b"7"),
]
KEYLESS_AT = [1, 3, 5, 6]


# -- raw requests ---------------------------------------------------------------------------------


def produce(client: RawClient, topic: str, records: bytes, version: int = 9) -> dict:
    body = {
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }
    return client.call(ApiKey.PRODUCE, version, body)["responses"][0]["partition_responses"][0]


def create(client: RawClient, name: str, **configs: str) -> None:
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": 1,
                "replication_factor": 1,
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in configs.items()],
            }
        ],
        "timeout_ms": 5000,
        "validate_only": False,
    }
    result = client.call(ApiKey.CREATE_TOPICS, 7, body)["topics"][0]
    assert result["error_code"] == 0, result


def append_config(client: RawClient, topic: str, name: str, value: str) -> None:
    body = {
        "validate_only": False,
        "resources": [
            {
                "resource_type": 2,
                "resource_name": topic,
                "configs": [{"name": name, "config_operation": 2, "value": value}],
            }
        ],
    }  # 2: APPEND
    [response] = client.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"]
    assert response["error_code"] == 0, response


def topic_config(client: RawClient, topic: str, name: str) -> str:
    body = {
        "resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": [name]}],
        "include_synonyms": False,
        "include_documentation": False,
    }
    [result] = client.call(ApiKey.DESCRIBE_CONFIGS, 4, body)["results"]
    return result["configs"][0]["value"]


def expected_refusal(topic: str, keyless: list[int]) -> tuple[list[dict], str]:
    """Kafka's record_errors and error_message for these keyless records of partition 0."""
    each = KEYLESS.format(f"{topic}-0")
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{each}')" for i in keyless[:3])
    return (
        [{"batch_index": i, "batch_index_error_message": each} for i in keyless],
        f"One or more records have been rejected due to {len(keyless)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]",
    )


@pytest.fixture
def client(shared_corral):
    with RawClient(shared_corral.port) as c:
        yield c


@pytest.mark.parametrize("codec", [None, *CODECS])
def test_compacted_topic_refuses_records_without_a_key(client, codec):
    topic = f"compacted-{codec or 'none'}"
    create(client, topic, **{"cleanup.policy": "compact"})
    refused = produce(client, topic, batch(MIXED, codec), version=9)
    record_errors, message = expected_refusal(topic, KEYLESS_AT)
    assert refused["error_code"] == ErrorCode.INVALID_RECORD
    assert refused["record_errors"] == record_errors
    assert refused["error_message"] == message
    assert (refused["base_offset"], refused["log_append_time_ms"], refused["log_start_offset"]) == (
        -1,
        -1,
        0,
    )
    # Nothing of the batch was kept; keyed records (an empty key is a key) are taken.
    keyed = [(k if k is not None else b"k", v) for k, v in MIXED]
    accepted = produce(client, topic, batch(keyed, codec))
    assert (accepted["error_code"], accepted["base_offset"], accepted["record_errors"]) == (
        0,
        0,
        [],
    )
    # Before v8 there is no room for record errors or a message: the code alone.
    old = produce(client, topic, batch([(None, b"x")], codec), version=7)
    assert old["error_code"] == ErrorCode.INVALID_RECORD


def test_delete_topic_takes_keyless_records_until_compact_is_appended(client):
    create(client, "turns-compact", **{"cleanup.policy": "delete"})
    assert produce(client, "turns-compact", batch([(None, b"v")]))["error_code"] == 0
    assert produce(client, "turns-compact", batch([(None, b"v")], "zstd"))["error_code"] == 0
    append_config(client, "turns-compact", "cleanup.policy", "compact")
    assert topic_config(client, "turns-compact", "cleanup.policy") == "delete,compact"
    for codec in [None, "zstd"]:
        refused = produce(client, "turns-compact", batch([(b"k", b"v"), (None, b"v")], codec))
        assert refused["error_code"] == ErrorCode.INVALID_RECORD
        assert (refused["record_errors"], refused["error_message"]) == expected_refusal(
            "turns-compact", [1]
        )
    assert produce(client, "turns-compact", batch([(b"k", b"v")], "zstd"))["base_offset"] == 2


def test_a_compressed_batch_inflating_past_max_message_bytes_is_refused_on_a_compacted_topic(
    client,
):
    # 256 keyed records of 16 KiB of zeros: 4 MiB uncompressed, a few KiB compressed.
    records = [(f"k{i}".encode(), bytes(16 * 1024)) for i in range(256)]
    create(client, "bomb-compacted", **{"cleanup.policy": "compact"})
    create(client, "bomb-plain")
    for codec in CODECS:
        bomb = batch(records, codec)
        assert len(bomb) < 256 * 1024, (codec, len(bomb))
        refused = produce(client, "bomb-compacted", bomb)
        assert refused["error_code"] == ErrorCode.MESSAGE_TOO_LARGE, (codec, refused)
        assert refused["error_message"].startswith(
            "The record batch is larger than max.message.bytes 1048588 once decompressed"
        ), refused
        # Other topics never decompress: the batch is stored as sent.
        assert produce(client, "bomb-plain", bomb)["error_code"] == 0
    # Within a larger max.message.bytes the same batches are read whole, and taken.
    create(
        client,
        "roomy-compacted",
        **{"cleanup.policy": "compact", "max.message.bytes": str(8 << 20)},
    )
    for n, codec in enumerate(CODECS):
        assert produce(client, "roomy-compacted", batch(records, codec))["base_offset"] == 256 * n


def test_corrupt_compressed_batch_on_a_compacted_topic_is_invalid(client):
    create(client, "compacted-corrupt", **{"cleanup.policy": "compact"})
    plain = _core.build_batch([(b"k", b"v" * 100)], 1000)
    for codec, id_ in CODECS.items():
        payload = compress(codec, plain[HEADER_LEN:])
        out = bytearray(plain[:HEADER_LEN] + payload[: len(payload) // 2])
        struct.pack_into(">i", out, 8, len(out) - 12)
        struct.pack_into(">h", out, 21, id_)
        struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
        result = produce(client, "compacted-corrupt", bytes(out))
        assert result["error_code"] == ErrorCode.INVALID_RECORD, (codec, result)
        assert result["record_errors"] == []


def test_kafka_answers_the_same_raw_produce_the_same(shared_corral):
    """Apache Kafka 4.4 (benches/kafka_ref.py) and corral answer the same requests alike."""
    from kafka_java import kafka_reference

    # From v7: Kafka refuses zstd below it (UNSUPPORTED_COMPRESSION_TYPE), corral does not.
    requests = [(codec, version) for codec in [None, *CODECS] for version in (7, 8, 12)]

    def answers(port: int) -> list[tuple]:
        out = []
        with RawClient(port, timeout=30) as c:
            create(c, "same-answers", **{"cleanup.policy": "compact"})
            deadline = time.monotonic() + 30
            while produce(c, "same-answers", batch([(b"k", b"v")]))["error_code"] != 0:
                assert time.monotonic() < deadline, "the topic never took a record"
                time.sleep(0.2)
            for codec, version in requests:
                r = produce(c, "same-answers", batch(MIXED, codec), version)
                out.append(
                    (
                        codec,
                        version,
                        r["error_code"],
                        r["base_offset"],
                        r["log_append_time_ms"],
                        r["log_start_offset"],
                        r["record_errors"],
                        r["error_message"],
                    )
                )
            keyed = produce(c, "same-answers", batch([(b"", b"v")], "zstd"))
            out.append((keyed["error_code"], keyed["base_offset"], keyed["record_errors"]))
        return out

    with kafka_reference({}) as bootstrap:
        kafka = answers(int(bootstrap.rsplit(":", 1)[1]))
    ours = answers(shared_corral.port)
    assert ours == kafka
    assert kafka[0][2] == ErrorCode.INVALID_RECORD


# -- real clients ---------------------------------------------------------------------------------


def _create_topic(bootstrap: str, name: str, **configs: str) -> None:
    from confluent_kafka.admin import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(timeout=10)


def _deliver(bootstrap: str, topic: str, key: bytes | None, **config) -> KafkaError | None:
    """One record through librdkafka: its delivery error, None once written."""
    results = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **config})
    producer.produce(
        topic, key=key, value=b"value " * 50, on_delivery=lambda err, msg: results.append(err)
    )
    assert producer.flush(20) == 0
    return results[0]


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_producer_gets_invalid_record_for_a_keyless_record(shared_corral, compression):
    topic = f"librdkafka-compacted-{compression}"
    _create_topic(shared_corral.bootstrap, topic, **{"cleanup.policy": "compact"})
    err = _deliver(shared_corral.bootstrap, topic, None, **{"compression.type": compression})
    assert err is not None and err.code() == KafkaError.INVALID_RECORD, err
    assert (
        _deliver(shared_corral.bootstrap, topic, b"key", **{"compression.type": compression})
        is None
    )


def test_kafka_python_producer_gets_invalid_record_for_a_keyless_record(shared_corral):
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError

    _create_topic(
        shared_corral.bootstrap, "kafka-python-compacted", **{"cleanup.policy": "compact"}
    )
    for compression in [None, "gzip"]:
        # kafka-python's idempotent producer (its default) takes any error that is not retriable
        # as fatal, against Kafka too: the keyed record goes through a producer of its own.
        for key, refused in [(None, True), (b"k", False)]:
            producer = KafkaProducer(
                bootstrap_servers=shared_corral.bootstrap, acks="all", compression_type=compression
            )
            try:
                future = producer.send("kafka-python-compacted", key=key, value=b"v" * 100)
                if refused:
                    with pytest.raises(
                        InvalidRecordError,
                        match="Compacted topic cannot accept message "
                        "without key in topic partition kafka-python-compacted-0",
                    ):
                        future.get(timeout=20)
                else:
                    assert future.get(timeout=20).offset >= 0
            finally:
                producer.close()


def test_confluent_admin_appends_compact_and_keyless_records_are_refused(shared_corral):
    bootstrap = shared_corral.bootstrap
    _create_topic(bootstrap, "librdkafka-turns-compact", **{"cleanup.policy": "delete"})
    assert _deliver(bootstrap, "librdkafka-turns-compact", None) is None
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        "librdkafka-turns-compact",
        incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(timeout=10)
    described = admin.describe_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, "librdkafka-turns-compact")]
    )
    [configs] = [f.result(timeout=10) for f in described.values()]
    assert configs["cleanup.policy"].value == "delete,compact"
    for compression in ["none", "snappy"]:
        err = _deliver(
            bootstrap, "librdkafka-turns-compact", None, **{"compression.type": compression}
        )
        assert err is not None and err.code() == KafkaError.INVALID_RECORD, err
    assert (
        _deliver(bootstrap, "librdkafka-turns-compact", b"k", **{"compression.type": "snappy"})
        is None
    )
