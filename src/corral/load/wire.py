"""One Kafka connection of the load generator: raw frames through corral's compiled codec.

Like a Kafka client's connection to its coordinator, it has one request in flight at a time: Kafka
brokers read the next request of a connection only after answering the previous one, and a JoinGroup
can be parked for seconds, so members never share a connection (each member owns one, as a real
consumer does).
"""

from __future__ import annotations

import time
from typing import Any

import trio

from .. import _core
from ..apis import ApiKey

MAX_RESPONSE_BYTES = 64 * 1024 * 1024
CLIENT_ID = "corral-load"
SOFTWARE_NAME = "corral-load"
SOFTWARE_VERSION = "0.1.0"


# The highest version whose body this generator fills in; the codec may know more.
MODEL_MAX_VERSION = {
    ApiKey.METADATA: 12, ApiKey.OFFSET_COMMIT: 9, ApiKey.OFFSET_FETCH: 9, ApiKey.FIND_COORDINATOR: 4,
    ApiKey.JOIN_GROUP: 9, ApiKey.HEARTBEAT: 4, ApiKey.LEAVE_GROUP: 5, ApiKey.SYNC_GROUP: 5,
    ApiKey.API_VERSIONS: 3, ApiKey.CREATE_TOPICS: 7,
}


class BrokerError(Exception):
    """A request failed at the connection level (closed, undecodable, timed out)."""


class Connection:
    def __init__(self, stream: trio.SocketStream, versions: dict[int, int]):
        self.stream = stream
        self.versions = versions
        self._frames = _core.Frames(MAX_RESPONSE_BYTES)
        self._pending: list[bytes] = []
        self._correlation_id = 0

    @classmethod
    async def open(cls, host: str, port: int, versions: dict[int, int] | None = None,
                   handshake: bool = True) -> Connection:
        """Connects; with `handshake`, sends ApiVersions first as every real client does."""
        try:
            stream = await trio.open_tcp_stream(host, port)
        except OSError as e:
            raise BrokerError(f"connect {host}:{port}: {e}") from e
        conn = cls(stream, dict(versions or {}))
        if handshake:
            await conn.api_versions()
        return conn

    async def api_versions(self) -> dict[str, Any]:
        version = min(MODEL_MAX_VERSION[ApiKey.API_VERSIONS], _core.codec_versions(ApiKey.API_VERSIONS)[1])
        body = await self.call(ApiKey.API_VERSIONS, {
            "client_software_name": SOFTWARE_NAME, "client_software_version": SOFTWARE_VERSION,
        }, version=version)
        if body["error_code"] != 0:
            raise BrokerError(f"ApiVersions v{version}: error {body['error_code']}")
        return body

    async def call(self, api: int, body: dict[str, Any], version: int | None = None) -> dict[str, Any]:
        """Sends one request and returns the decoded response body."""
        if version is None:
            version = self.versions[api]
        self._correlation_id += 1
        cid = self._correlation_id
        frame = _core.encode_request(api, version, cid, body, CLIENT_ID)
        try:
            await self.stream.send_all(frame)
            while not self._pending:
                chunk = await self.stream.receive_some(65536)
                if not chunk:
                    raise BrokerError("connection closed by the broker")
                self._pending.extend(self._frames.feed(chunk))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
            raise BrokerError(f"connection lost: {e}") from e
        except _core.ProtocolError as e:
            raise BrokerError(f"bad response frame: {e}") from e
        frame = self._pending.pop(0)
        if frame[:4] != cid.to_bytes(4, "big", signed=True):
            raise BrokerError(f"correlation id {frame[:4].hex()}, expected {cid}")
        try:
            return _core.decode_response(api, version, frame)[1]
        except _core.ProtocolError as e:
            raise BrokerError(f"undecodable {ApiKey(api).name} v{version} response: {e}") from e

    async def timed_call(self, api: int, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
        """call() and its latency in seconds."""
        start = time.perf_counter()
        response = await self.call(api, body)
        return response, time.perf_counter() - start

    async def aclose(self) -> None:
        await self.stream.aclose()


def negotiate(advertised: dict[int, tuple[int, int]]) -> dict[int, int]:
    """Per API the generator uses, the highest version the broker, the codec and it all speak."""
    out: dict[int, int] = {}
    for api in MODEL_MAX_VERSION:
        codec = _core.codec_versions(api)
        theirs = advertised.get(api)
        if codec is None or theirs is None:
            continue
        high = min(theirs[1], codec[1], MODEL_MAX_VERSION[api])
        low = max(theirs[0], codec[0])
        if low <= high:
            out[api] = high
    return out
