"""Micro benchmarks of the wire codec, through the `_core` calls the server makes.

    python -m pytest benches/test_codec_bench.py

The server's path for a Python-owned API is `Connection.feed` + `Connection.next` (split, parse
the header, decode the body into a dict) and `Request.respond` (encode the response dict into a
frame); ApiVersions is answered inside `next` without Python objects per field.
"""

from __future__ import annotations

import uuid

import pytest

from corral import _core
from corral.network.apis import ApiKey, api_table

TOPICS, PARTITIONS = 50, 8
TABLE = api_table()


def metadata_request_frame() -> bytes:
    topics = [{"name": f"topic-{i:03d}", "topic_id": bytes(16)} for i in range(TOPICS)]
    return _core.encode_request(
        ApiKey.METADATA, 12, 1, {"topics": topics, "allow_auto_topic_creation": True}, "bench"
    )


def metadata_response_body() -> dict:
    def topic(i: int) -> dict:
        return {
            "error_code": 0,
            "name": f"topic-{i:03d}",
            "topic_id": uuid.uuid4().bytes,
            "is_internal": False,
            "partitions": [
                {
                    "error_code": 0,
                    "partition_index": p,
                    "leader_id": 1,
                    "leader_epoch": 0,
                    "replica_nodes": [1],
                    "isr_nodes": [1],
                    "offline_replicas": [],
                }
                for p in range(PARTITIONS)
            ],
        }

    return {
        "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
        "cluster_id": "bench-cluster",
        "controller_id": 1,
        "topics": [topic(i) for i in range(TOPICS)],
    }


def decode(frame: bytes):
    conn = _core.Connection(TABLE, 1 << 24)
    conn.feed(frame)
    return conn.next()


@pytest.fixture(scope="module")
def metadata_request():
    return decode(metadata_request_frame())


def test_metadata_request_decode(benchmark):
    frame = metadata_request_frame()
    request = benchmark(decode, frame)
    assert len(request.body["topics"]) == TOPICS


def test_metadata_response_encode(benchmark, metadata_request):
    body = metadata_response_body()
    frame = benchmark(metadata_request.respond, body)
    assert len(frame) > TOPICS * PARTITIONS * 20


def test_metadata_request_decode_and_response_encode(benchmark):
    """One whole Metadata exchange on the server side (minus the handler)."""
    frame, body = metadata_request_frame(), metadata_response_body()

    def exchange():
        return decode(frame).respond(body)

    benchmark(exchange)


def test_metadata_response_decode_client_side(benchmark, metadata_request):
    frame = metadata_request.respond(metadata_response_body())[4:]
    _, body = benchmark(_core.decode_response, ApiKey.METADATA, 12, frame)
    assert len(body["topics"]) == TOPICS


@pytest.mark.parametrize("version", [0, 3])
def test_api_versions_answer(benchmark, version):
    """Decode + answer of one ApiVersions request, all inside the core."""
    frame = _core.encode_request(ApiKey.API_VERSIONS, version, 1, {}, "bench")
    conn = _core.Connection(TABLE, 1 << 20)

    def answer():
        conn.feed(frame)
        return conn.next()

    response = benchmark(answer)
    assert isinstance(response, bytes)


def test_api_versions_pipelined_batch_of_100(benchmark):
    """100 requests arriving in one chunk, as a pipelining client sends them."""
    chunk = b"".join(
        _core.encode_request(ApiKey.API_VERSIONS, 3, i, {}, "bench") for i in range(100)
    )
    conn = _core.Connection(TABLE, 1 << 20)

    def answer_all():
        conn.feed(chunk)
        out = []
        while (item := conn.next()) is not None:
            out.append(item)
        return out

    assert len(benchmark(answer_all)) == 100
