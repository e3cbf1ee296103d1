"""A tiny blocking Kafka client over a raw socket, speaking through corral's own codec.

Tests use it where a real client cannot be steered precisely (exact versions, exact flags,
deliberately bad bytes). Real-client behaviour is tested with the real clients.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from corral import _core


class RawClient:
    def __init__(self, port: int, timeout: float = 10.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.frames = _core.Frames(1 << 30)
        self.ready: list[bytes] = []
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> int:
        self.correlation_id += 1
        self.sock.sendall(
            _core.encode_request(api_key, version, self.correlation_id, body, "rawwire")
        )
        return self.correlation_id

    def receive_frame(self) -> bytes:
        """The next response frame (without its size prefix)."""
        while not self.ready:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            self.ready.extend(self.frames.feed(chunk))
        return self.ready.pop(0)

    def receive(self, api_key: int, version: int) -> tuple[int, dict[str, Any]]:
        return _core.decode_response(api_key, version, self.receive_frame())

    def call(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        sent = self.send(api_key, version, body)
        correlation_id, response = self.receive(api_key, version)
        assert correlation_id == sent
        return response


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """True if the peer closes `sock` (EOF or reset) within `seconds`, reading and dropping data."""
    sock.settimeout(seconds)
    try:
        while sock.recv(1 << 16):
            pass
        return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload
