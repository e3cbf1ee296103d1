"""Bad bytes over a raw socket: a closed connection (with one log line, at DEBUG after the first of
its kind) or Kafka's error code, and every other client keeps being served."""

from __future__ import annotations

import re
import socket
import struct
import time

import pytest
from rawwire import RawClient, closed_within, frame

from corral import _core
from corral.errors import ErrorCode
from corral.network.apis import ApiKey

MAX_REQUEST_BYTES = 65536
CLOSE_PROMPTLY = 3.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from conftest import CorralProcess

    proc = CorralProcess(
        tmp_path_factory.mktemp("bad-input") / "corral",
        {"socket.request.max.bytes": str(MAX_REQUEST_BYTES)},
    )
    # At WARNING, refusals after the first of each kind in 10 s are only counted
    # (tests/wire/test_log_floods.py); at DEBUG each is logged in full, once.
    proc.args = ["--log-level", "DEBUG"]
    proc.start()
    yield proc
    proc.proc.kill()
    proc.proc.wait()


def header(
    api_key: int,
    version: int,
    correlation_id: int = 7,
    client_id: bytes = b"bad",
    flexible: bool = False,
) -> bytes:
    head = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    return head + (b"\x00" if flexible else b"")


def still_serving(broker) -> None:
    with RawClient(broker.port) as client:
        response = client.call(
            ApiKey.API_VERSIONS,
            3,
            {"client_software_name": "check", "client_software_version": "1"},
        )
    assert response["error_code"] == 0
    assert response["api_keys"]


def log_lines_about(broker, sock_name: tuple[str, int], timeout: float = 5.0) -> list[str]:
    peer = f"{sock_name[0]}:{sock_name[1]}"
    deadline = time.monotonic() + timeout
    while True:
        text = broker.log()
        # Only whole lines: the broker may be halfway through writing the last one.
        text = text[: text.rfind("\n") + 1]
        lines = [line for line in text.splitlines() if re.search(rf"{re.escape(peer)}\b", line)]
        if lines or time.monotonic() > deadline:
            return lines


def send_and_expect_close(broker, data: bytes, reason: str) -> None:
    """Sends `data` on a fresh connection; the broker must close it promptly and log it once."""
    with socket.create_connection(("127.0.0.1", broker.port)) as sock:
        name = sock.getsockname()
        sock.sendall(data)
        assert closed_within(sock, CLOSE_PROMPTLY), "the broker kept the connection open"
    lines = log_lines_about(broker, name)
    assert len(lines) == 1, lines
    assert "closing connection" in lines[0] and re.search(reason, lines[0]), lines[0]
    still_serving(broker)


def test_oversized_size_prefix_closes_without_waiting_for_the_payload(broker):
    send_and_expect_close(broker, struct.pack(">i", MAX_REQUEST_BYTES + 1), "frame size")


def test_two_gigabyte_size_prefix(broker):
    send_and_expect_close(broker, struct.pack(">i", 2**31 - 1) + b"x" * 100, "frame size")


def test_negative_size_prefix(broker):
    send_and_expect_close(broker, struct.pack(">i", -5), "frame size -5")


def test_garbage_body_for_a_known_key(broker):
    body = header(ApiKey.CREATE_TOPICS, 7, flexible=True) + bytes(range(200, 256)) * 3
    send_and_expect_close(broker, frame(body), "api key 19")


def test_truncated_body(broker):
    request = _core.encode_request(
        ApiKey.CREATE_TOPICS,
        4,
        1,
        {
            "topics": [{"name": "cut", "num_partitions": 1, "replication_factor": 1}],
            "timeout_ms": 1000,
        },
    )
    payload = request[4:-6]
    send_and_expect_close(broker, frame(payload), "api key 19")


def test_frame_shorter_than_a_header(broker):
    send_and_expect_close(broker, frame(b"\x00\x03\x00"), "shorter than a header")


def test_truncated_client_id(broker):
    send_and_expect_close(broker, frame(struct.pack(">hhih", 3, 1, 1, 50) + b"short"), "client id")


def test_unknown_api_key(broker):
    send_and_expect_close(broker, frame(header(999, 0)), "unknown api key 999")


def test_known_but_not_advertised_api_key(broker):
    # OffsetForLeaderEpoch (23): a real Kafka API that corral does not serve.
    send_and_expect_close(broker, frame(header(23, 3)), "unknown api key 23")


@pytest.mark.parametrize("version", [13, 14, 200, -1])
def test_unsupported_version_of_a_normal_api(broker, version):
    send_and_expect_close(
        broker,
        frame(header(ApiKey.METADATA, version) + b"\x00" * 8),
        f"version {version} is not in",
    )


@pytest.mark.parametrize("version", [5, 9, 32767])
def test_api_versions_too_new_gets_unsupported_version_in_a_v0_body(broker, version):
    with RawClient(broker.port) as client:
        # A body this broker cannot know the shape of: it must not be parsed.
        client.sock.sendall(
            frame(
                header(ApiKey.API_VERSIONS, version, correlation_id=4242, flexible=True)
                + b"\xff\x13\x37"
            )
        )
        raw = client.receive_frame()
        # Header v0: the correlation id, then straight into the v0 body.
        correlation_id, body = _core.decode_response(ApiKey.API_VERSIONS, 0, raw)
        assert correlation_id == 4242
        assert body["error_code"] == ErrorCode.UNSUPPORTED_VERSION
        assert [(k["api_key"], k["min_version"], k["max_version"]) for k in body["api_keys"]] == [
            (ApiKey.API_VERSIONS, 0, 4)
        ]
        assert len(raw) == 4 + 2 + 4 + 6  # correlation id, error code, one array entry
        # The connection stays usable, so the client can retry with a version we speak.
        assert client.call(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0


def test_garbled_api_versions_body_is_refused(broker):
    body = (
        header(ApiKey.API_VERSIONS, 3, flexible=True) + b"\x05ab"
    )  # compact string runs past the end
    send_and_expect_close(broker, frame(body), r"api key 18 v3: .*\S$")


SHORT_PATH_BODIES = [
    (ApiKey.HEARTBEAT, 0, {"group_id": "g", "generation_id": 1, "member_id": "m"}),
    (ApiKey.HEARTBEAT, 4, {"group_id": "g", "generation_id": 1, "member_id": "m"}),
    (
        ApiKey.OFFSET_COMMIT,
        9,
        {
            "group_id": "g",
            "generation_id_or_member_epoch": 1,
            "member_id": "m",
            "topics": [
                {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 5}]}
            ],
        },
    ),
    (ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {"group_id": "g", "member_id": "m", "member_epoch": 1}),
]


@pytest.mark.parametrize("api_key, version, body", SHORT_PATH_BODIES)
def test_truncated_short_path_body(broker, api_key, version, body):
    # Decoded where it is read (rust/short_paths/mod.rs), refused like any other body.
    payload = _core.encode_request(api_key, version, 1, body, "bad")[4:-2]
    send_and_expect_close(broker, frame(payload), rf"api key {int(api_key)} v{version}: .*\S$")


def test_answers_before_a_malformed_short_path_still_go_out(broker):
    api_key, version, body = SHORT_PATH_BODIES[1]
    with RawClient(broker.port) as client:
        name = client.sock.getsockname()
        client.sock.sendall(
            _core.encode_request(ApiKey.API_VERSIONS, 3, 11, {})
            + frame(_core.encode_request(api_key, version, 12, body)[4:-2])
        )
        assert client.receive(ApiKey.API_VERSIONS, 3)[0] == 11
        assert closed_within(client.sock, CLOSE_PROMPTLY)
    lines = log_lines_about(broker, name)
    assert len(lines) == 1 and f"api key {int(api_key)} v{version}" in lines[0], lines


@pytest.mark.parametrize(
    "api_key, version, flexible",
    [
        (ApiKey.METADATA, 1, False),  # int32 array count
        (ApiKey.CREATE_TOPICS, 2, False),
        (ApiKey.METADATA, 12, True),  # compact array: unsigned varint count
        (ApiKey.DESCRIBE_CONFIGS, 4, True),
    ],
)
def test_array_claiming_two_billion_elements(broker, api_key, version, flexible):
    if flexible:
        count = b"\xff\xff\xff\xff\x07"  # varint 2^31 - 1 (compact arrays store N + 1)
    else:
        count = struct.pack(">i", 2**31 - 1)
    send_and_expect_close(
        broker,
        frame(header(api_key, version, flexible=flexible) + count + b"\x00" * 16),
        f"api key {api_key}",
    )
    assert broker.alive()


def test_half_a_frame_then_disconnect(broker):
    request = _core.encode_request(ApiKey.METADATA, 12, 1, {"topics": None})
    for cut in (2, 4, len(request) // 2, len(request) - 1):
        with socket.create_connection(("127.0.0.1", broker.port)) as sock:
            sock.sendall(request[:cut])
    still_serving(broker)
    assert broker.alive()


def test_one_bad_client_does_not_disturb_a_connected_one(broker):
    with RawClient(broker.port) as good:
        assert good.call(ApiKey.METADATA, 12, {"topics": None})["brokers"]
        send_and_expect_close(broker, frame(header(999, 0)), "unknown api key")
        assert good.call(ApiKey.METADATA, 12, {"topics": None})["brokers"]


def test_pipelined_api_versions_come_back_in_order(broker):
    count = 300
    with RawClient(broker.port) as client:
        versions = [i % 5 for i in range(count)]
        client.sock.sendall(
            b"".join(
                _core.encode_request(ApiKey.API_VERSIONS, v, 1000 + i, {})
                for i, v in enumerate(versions)
            )
        )
        for i, version in enumerate(versions):
            correlation_id, body = client.receive(ApiKey.API_VERSIONS, version)
            assert correlation_id == 1000 + i
            assert body["error_code"] == 0


def test_pipelined_mixed_requests_come_back_in_order(broker):
    with RawClient(broker.port) as client:
        plan = [
            (ApiKey.METADATA, 12, {"topics": None}),
            (ApiKey.API_VERSIONS, 3, {}),
            (ApiKey.DESCRIBE_CLUSTER, 1, {}),
            (ApiKey.API_VERSIONS, 0, {}),
        ] * 25
        client.sock.sendall(
            b"".join(_core.encode_request(k, v, i, body) for i, (k, v, body) in enumerate(plan))
        )
        for i, (key, version, _) in enumerate(plan):
            assert client.receive(key, version)[0] == i


def test_no_internal_errors_were_logged(broker):
    still_serving(broker)
    log = broker.log()
    assert "Traceback" not in log and "internal error" not in log, log
    assert "" not in log.splitlines(), "every log record is one line"
