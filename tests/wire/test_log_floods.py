"""Clients cannot flood corral's log: a thousand connections closed for each kind of bad input
(malformed frames, unknown APIs, requests before SASL authentication, requests left half-sent)
give a bounded number of WARNING lines, the first in full and the rest as counts per kind and
client address (src/corral/observability/summarised_warnings.py). The summariser's rules in
process: tests/unit/observability/test_summarised_warnings.py."""

from __future__ import annotations

import socket
import struct
import time

from rawwire import closed_within, frame

from corral import _core

CONNECTIONS = 1000
SASL_SETTINGS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN",
    "corral.socket.partial.request.timeout.ms": 300,
}


def _request(api_key: int, version: int, body: dict) -> bytes:
    return _core.encode_request(api_key, version, 1, body, "flood")


def _bad_frame() -> bytes:
    return frame(b"\xff\xff\xff\xff\x00\x00\x00\x00")  # api key -1: no such API


def _negative_size() -> bytes:
    return struct.pack(">i", -5) + b"xxxx"


def _metadata() -> bytes:
    return _request(
        3,
        12,
        {
            "topics": [],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )


def _bad_password() -> bytes:
    return _request(17, 1, {"mechanism": "PLAIN"}) + _request(
        36, 2, {"auth_bytes": b"\0nobody\0wrong"}
    )


def _half_sent() -> bytes:
    return struct.pack(">i", 100) + b"\x00\x12\x00"


def _flood(port: int, payload: bytes, count: int, wait_close: float) -> int:
    """Opens `count` connections, each sending `payload`; returns how many the broker closed."""
    closed = 0
    batch = 250
    for start in range(0, count, batch):
        socks = []
        for _ in range(min(batch, count - start)):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(payload)
            socks.append(s)
        for s in socks:
            closed += closed_within(s, wait_close)
            s.close()
    return closed


def _warnings(broker) -> list[str]:
    """The WARNING lines, and the INFO lines of failed authentications."""
    return [
        line
        for line in broker.log().splitlines()
        if "WARNING" in line or ("INFO corral.security.sasl" in line and "authenticat" in line)
    ]


def test_a_thousand_bad_connections_of_each_kind_log_a_bounded_number_of_lines(corral_factory):
    broker = corral_factory(**SASL_SETTINGS)
    plain, sasl = broker.ports["PLAINTEXT"], broker.ports["SASL_PLAINTEXT"]
    floods = {
        "malformed request": [(plain, _bad_frame()), (plain, _negative_size())],
        "unauthenticated request": [(sasl, _metadata())],
        "slow request": [(plain, _half_sent())],
        "failed authentication": [(sasl, _bad_password())],
    }
    started = time.monotonic()
    for kind, sources in floods.items():
        for port, payload in sources:
            assert _flood(port, payload, CONNECTIONS, 5.0) == CONNECTIONS, kind
    sent = {kind: CONNECTIONS * len(sources) for kind, sources in floods.items()}
    # Every window closes within 10 s of its first line; the flusher logs each summary.
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        lines = _warnings(broker)
        if all(any(f"{kind}: " in line for line in lines) for kind in floods):
            break
        time.sleep(0.5)
    elapsed = time.monotonic() - started
    lines = _warnings(broker)
    for kind, total in sent.items():
        summaries = [line for line in lines if f"{kind}: " in line]
        assert summaries, (kind, lines[-20:])
        # Every refusal is either the full line of its window or counted in that window's summary.
        counted = sum(int(line.split(f"{kind}: ")[1].split(" more")[0]) for line in summaries)
        # The rest were logged in full, one per window (the last window may have counted none).
        assert counted >= total - (len(summaries) + 1), (kind, counted, summaries)
        assert "from /127.0.0.1 (" in summaries[0], summaries[0]
    # Two lines (a full one and a summary) per kind per 10 s window, whatever the clients did.
    bound = 2 * len(floods) * (int(elapsed // 10) + 2)
    assert len(lines) <= bound, (len(lines), bound, lines[:30])
    assert "Traceback" not in broker.log()
