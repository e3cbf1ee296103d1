"""One Kafka connection of the load generator: raw frames through corral's compiled codec.

Like a Kafka client's connection to its coordinator, it has one request in flight at a time: Kafka
brokers read the next request of a connection only after answering the previous one, and a JoinGroup
can be parked for seconds, so members never share a connection (each member owns one, as a real
consumer does).

It drives a non-blocking socket with trio's low-level waits rather than a trio SocketStream: a
stream send or receive passes through the scheduler two or three times, which for thousands of
members is most of the generator's CPU; here a request is one send() that does not yield, and
its answer one wait_readable() and recv().
"""

from __future__ import annotations

import os
import socket
import struct
from typing import Any

import trio

from corral import _core
from corral.network.apis import ApiKey

MAX_RESPONSE_BYTES = 64 * 1024 * 1024
CLIENT_ID = "corral-load"
SOFTWARE_NAME = "corral-load"
SOFTWARE_VERSION = "0.1.0"


# The highest version whose body this generator fills in; the codec may know more.
MODEL_MAX_VERSION = {
    ApiKey.METADATA: 12,
    ApiKey.OFFSET_COMMIT: 9,
    ApiKey.OFFSET_FETCH: 9,
    ApiKey.FIND_COORDINATOR: 4,
    ApiKey.JOIN_GROUP: 9,
    ApiKey.HEARTBEAT: 4,
    ApiKey.LEAVE_GROUP: 5,
    ApiKey.SYNC_GROUP: 5,
    ApiKey.API_VERSIONS: 3,
    ApiKey.CREATE_TOPICS: 7,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: 1,
    # Share groups (KIP-932): the share consumer's APIs, the records it reads (Produce by topic
    # name, v13 names topics by id) and its group's settings.
    ApiKey.SHARE_GROUP_HEARTBEAT: 1,
    ApiKey.SHARE_FETCH: 2,
    ApiKey.SHARE_ACKNOWLEDGE: 2,
    ApiKey.PRODUCE: 12,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: 1,
}


# A request frame: size (4), api key (2), api version (2), correlation id (4), ...
CORRELATION_ID = struct.Struct(">i")
CORRELATION_ID_AT = 8
ERROR_CODE = struct.Struct(">h")


def heartbeat_error_code(version: int, frame: bytes) -> int | None:
    """The error code of a Heartbeat response (frame without its size prefix) read at its fixed
    offset, or None when the frame is not the plain shape (tagged fields, or anything else) and
    must be decoded in full. Decoding every answer costs more than the rest of a heartbeat."""
    if version >= 4:  # correlation id, empty header tags, throttle_time_ms, error_code, empty tags
        if len(frame) == 12 and frame[4] == 0 and frame[11] == 0:
            return ERROR_CODE.unpack_from(frame, 9)[0]
    elif version >= 1:  # correlation id, throttle_time_ms, error_code
        if len(frame) == 10:
            return ERROR_CODE.unpack_from(frame, 8)[0]
    elif len(frame) == 6:  # correlation id, error_code
        return ERROR_CODE.unpack_from(frame, 4)[0]
    return None


class BrokerError(Exception):
    """A request failed at the connection level (closed, undecodable, timed out)."""


class Connection:
    def __init__(self, sock: socket.socket, versions: dict[int, int]):
        self.sock = sock
        self.versions = versions
        self._frames = _core.Frames(MAX_RESPONSE_BYTES)
        self._pending: list[bytes] = []
        self._correlation_id = 0

    @classmethod
    async def open(
        cls, host: str, port: int, versions: dict[int, int] | None = None, handshake: bool = True
    ) -> Connection:
        """Connects; with `handshake`, sends ApiVersions first as every real client does."""
        try:
            sock = await _connect(host, port)
        except OSError as e:
            raise BrokerError(f"connect {host}:{port}: {e}") from e
        conn = cls(sock, dict(versions or {}))
        if handshake:
            try:
                await conn.api_versions()
            except BaseException:
                await conn.aclose()
                raise
        return conn

    async def api_versions(self) -> dict[str, Any]:
        version = min(
            MODEL_MAX_VERSION[ApiKey.API_VERSIONS], _core.codec_versions(ApiKey.API_VERSIONS)[1]
        )
        body = await self.call(
            ApiKey.API_VERSIONS,
            {
                "client_software_name": SOFTWARE_NAME,
                "client_software_version": SOFTWARE_VERSION,
            },
            version=version,
        )
        if body["error_code"] != 0:
            raise BrokerError(f"ApiVersions v{version}: error {body['error_code']}")
        return body

    async def call(
        self, api: int, body: dict[str, Any], version: int | None = None
    ) -> dict[str, Any]:
        """Sends one request and returns the decoded response body."""
        if version is None:
            version = self.versions[api]
        frame = await self.exchange(
            bytearray(_core.encode_request(api, version, 0, body, CLIENT_ID))
        )
        return self.decode(api, version, frame)

    async def heartbeat(self, version: int, frame: bytearray) -> int:
        """Sends a pre-encoded Heartbeat and returns its answer's error code."""
        return self.heartbeat_answer(version, await self.exchange(frame))

    def heartbeat_answer(self, version: int, response: bytes) -> int:
        """The error code of the answer to the Heartbeat just sent (its correlation id checked)."""
        self.check_correlation_id(response)
        code = heartbeat_error_code(version, response)
        if code is None:
            code = self.decode(ApiKey.HEARTBEAT, version, response)["error_code"]
        return code

    def send_nowait(self, frame: bytearray) -> None:
        """Sends a request frame (its correlation id set) without waiting; a request is small
        and at most one is in flight, so the socket buffer always has room for it."""
        self._correlation_id += 1
        CORRELATION_ID.pack_into(frame, CORRELATION_ID_AT, self._correlation_id)
        try:
            sent = self.sock.send(frame)
        except OSError as e:
            raise BrokerError(f"connection lost: {e}") from e
        if sent != len(frame):
            raise BrokerError("socket send buffer full")

    def receive_nowait(self) -> list[bytes]:
        """The response frames that arrived (without size prefix), possibly none."""
        try:
            chunk = self.sock.recv(65536)
        except BlockingIOError:
            return []
        except OSError as e:
            raise BrokerError(f"connection lost: {e}") from e
        if not chunk:
            raise BrokerError("connection closed by the broker")
        try:
            return self._frames.feed(chunk)
        except _core.ProtocolError as e:
            raise BrokerError(f"bad response frame: {e}") from e

    def check_correlation_id(self, response: bytes) -> None:
        if len(response) < 4 or CORRELATION_ID.unpack_from(response)[0] != self._correlation_id:
            raise BrokerError(
                f"correlation id {response[:4].hex()}, expected {self._correlation_id}"
            )

    async def exchange(self, frame: bytearray) -> bytes:
        """Sends a request frame, its correlation id overwritten with the next one, and returns
        the response frame (without size prefix) once its correlation id is checked."""
        self._correlation_id += 1
        CORRELATION_ID.pack_into(frame, CORRELATION_ID_AT, self._correlation_id)
        try:
            view = memoryview(frame)
            while view:
                try:
                    view = view[self.sock.send(view) :]
                except BlockingIOError:
                    await trio.lowlevel.wait_writable(self.sock)
            while not self._pending:
                await trio.lowlevel.wait_readable(self.sock)
                try:
                    chunk = self.sock.recv(65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    raise BrokerError("connection closed by the broker")
                self._pending.extend(self._frames.feed(chunk))
        except (trio.ClosedResourceError, OSError) as e:
            raise BrokerError(f"connection lost: {e}") from e
        except _core.ProtocolError as e:
            raise BrokerError(f"bad response frame: {e}") from e
        response = self._pending.pop(0)
        self.check_correlation_id(response)
        return response

    @staticmethod
    def decode(api: int, version: int, frame: bytes) -> dict[str, Any]:
        try:
            return _core.decode_response(api, version, frame)[1]
        except _core.ProtocolError as e:
            raise BrokerError(f"undecodable {ApiKey(api).name} v{version} response: {e}") from e

    async def aclose(self) -> None:
        trio.lowlevel.notify_closing(self.sock)  # wakes (with an error) any task waiting on it
        self.sock.close()
        await trio.lowlevel.checkpoint()


async def _connect(host: str, port: int) -> socket.socket:
    """A connected non-blocking TCP socket to the first address of `host` that accepts."""
    addresses = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    error: OSError = OSError(f"no address for {host}")
    for family, type_, proto, _, address in addresses:
        sock = socket.socket(family, type_, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                sock.connect(address)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(sock)
                code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if code:
                    raise OSError(code, os.strerror(code)) from None
            return sock
        except BaseException as e:
            trio.lowlevel.notify_closing(sock)
            sock.close()
            if not isinstance(e, OSError):
                raise
            error = e
    raise error


def negotiate(
    advertised: dict[int, tuple[int, int]], model: dict[int, int] = MODEL_MAX_VERSION
) -> dict[int, int]:
    """Per API in `model` (the generator's by default), the highest version the broker, the
    codec and the model all speak."""
    out: dict[int, int] = {}
    for api in model:
        codec = _core.codec_versions(api)
        theirs = advertised.get(api)
        if codec is None or theirs is None:
            continue
        high = min(theirs[1], codec[1], model[api])
        low = max(theirs[0], codec[0])
        if low <= high:
            out[api] = high
    return out
