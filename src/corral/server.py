"""The network side: a trio listener, one task per connection, responses in request order.

Like Kafka, a connection is served one request at a time (the next request is read only when the
previous one is answered), so responses leave in request order; different connections run
concurrently. Responses answered by the compiled core are coalesced into one write.
"""

from __future__ import annotations

import errno
import logging
import signal
import socket

import trio

from . import _core
from .apis import HANDLERS, api_table
from .broker import Broker
from .config import Settings, parse_listener

log = logging.getLogger("corral.server")

RECEIVE_CHUNK = 256 * 1024
# accept() errors that mean "out of resources for now": wait a little instead of spinning.
ACCEPT_RESOURCE_ERRORS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}
ACCEPT_BACKOFF_S = 0.1


class Server:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.broker = Broker(settings)
        self.table = api_table()
        self.max_request_bytes = settings["socket.request.max.bytes"]

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        host, port = parse_listener(self.settings["listeners"])
        listeners = await trio.open_tcp_listeners(port, host=host)
        bound_host, bound_port = listeners[0].socket.getsockname()[:2]
        self.broker.bound(bound_host, bound_port)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._shutdown_on_signal, nursery.cancel_scope)
            nursery.start_soon(self.broker.groups.run)
            nursery.start_soon(self.broker.logs.run)
            for listener in listeners:
                nursery.start_soon(self._accept_all, listener.socket.detach(), nursery)
            task_status.started(bound_port)

    async def _accept_all(self, fd: int, nursery: trio.Nursery) -> None:
        """Kafka's acceptor: every wake-up takes all connections waiting in the backlog.

        trio.serve_listeners takes one connection per scheduling round; when thousands of clients
        connect at once while thousands of connections are busy, rounds are long, the backlog
        overflows and the kernel drops SYNs, which clients only resend after 1, 3, 7... s.
        """
        sock = socket.socket(fileno=fd)
        sock.setblocking(False)
        with sock:
            while True:
                await trio.lowlevel.wait_readable(sock)
                while True:
                    try:
                        conn, _ = sock.accept()
                    except BlockingIOError:
                        break
                    except OSError as e:
                        if e.errno in ACCEPT_RESOURCE_ERRORS:
                            log.error("accept failed (%s); retrying in %.1fs", e, ACCEPT_BACKOFF_S)
                            await trio.sleep(ACCEPT_BACKOFF_S)
                        elif e.errno != errno.ECONNABORTED:
                            raise
                        break
                    conn.setblocking(False)
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    nursery.start_soon(self._serve_connection, conn)

    async def _shutdown_on_signal(self, scope: trio.CancelScope) -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                log.info("received %s, shutting down", signal.Signals(signum).name)
                scope.cancel()
                return

    async def _serve_connection(self, sock: socket.socket) -> None:
        peer = _peer_name(sock)
        conn = _core.Connection(self.table, self.max_request_bytes)
        pending: list[bytes] = []
        try:
            with sock:
                while True:
                    data = await _receive(sock)
                    if not data:
                        return
                    conn.feed(data)
                    while (item := conn.next()) is not None:
                        if isinstance(item, bytes):
                            pending.append(item)
                            continue
                        if pending:
                            await _send_all(sock, b"".join(pending))
                            pending.clear()
                        response = await self._handle(item)
                        if response is not None:
                            await _send_all(sock, response)
                    if pending:
                        await _send_all(sock, b"".join(pending))
                        pending.clear()
        except _core.ProtocolError as e:
            log.warning("closing connection from %s: %s", peer, e)
        except ConnectionError:
            pass
        except Exception:
            log.exception("closing connection from %s after an internal error", peer)

    async def _handle(self, request: _core.Request) -> bytes | None:
        handler = HANDLERS[request.api_key]
        body = await handler(self.broker, request)
        if body is None or isinstance(body, bytes):  # no response, or a frame encoded by the core
            return body
        return request.respond(body)


# A connection's I/O on the bare non-blocking socket: trio's SocketStream adds, per request, a
# receive attempt that fails (the next request is rarely there yet), a scheduling round for every
# send that completes at once, and stream bookkeeping; with 10,000 connections that was most of
# a Heartbeat's cost. Waiting is still trio's (cancellable, fair).

async def _receive(sock: socket.socket) -> bytes:
    while True:
        await trio.lowlevel.wait_readable(sock)
        try:
            return sock.recv(RECEIVE_CHUNK)
        except BlockingIOError:
            continue


async def _send_all(sock: socket.socket, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            sent = sock.send(view)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
            continue
        view = view[sent:]


def _peer_name(sock: socket.socket) -> str:
    try:
        host, port = sock.getpeername()[:2]
        return f"{host}:{port}"
    except OSError:
        return "?"
