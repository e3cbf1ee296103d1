"""The broker's front: a compiled network thread for the sockets, trio for the handlers.

Every client socket belongs to the core's network thread (`_core.Reactor`, rust/network/reactor/):
it reads, splits frames, answers ApiVersions and steady-state Heartbeats and ConsumerGroupHeartbeats
itself and writes every response. The requests Python owns arrive here in batches: one trio task
waits on the reactor's eventfd, drains what is queued and starts one handler task per request; a
handler's answer goes back with `respond`. Like Kafka, a connection has one request in a handler
at a time, so responses leave in request order; different connections are served concurrently.
"""

from __future__ import annotations

import logging
import signal
from dataclasses import replace
from typing import Any

import trio

from corral import _core
from corral.broker import Broker, BrokerFailed, StartupError
from corral.config.settings import INT32_MAX, ConfigError, Settings, parse_listener
from corral.faults import http as faults_http
from corral.faults.inject import Injector
from corral.faults.scenario import Scenario, ScenarioError
from corral.faults.scenario import install as install_scenario
from corral.faults.scenario import load as load_scenario
from corral.later import Later
from corral.network import descriptors as descriptors
from corral.network.apis import ASYNC_HANDLERS, HANDLERS, api_table
from corral.network.listeners import tls_config
from corral.observability import metrics as metrics
from corral.observability.summarised_warnings import SummarisedWarnings, flush_all

log = logging.getLogger("corral.server")
# Connections closed for what their clients sent: a line for the first of each kind, then counts.
client_warnings = SummarisedWarnings(log)


def network_limits(settings: Settings) -> dict:
    """The Reactor's limit arguments, logged once (the SASL ones are not)."""
    soft = descriptors.soft_limit()
    open_now = descriptors.open_now()
    fd_cap = descriptors.connections(soft, open_now)
    max_connections = min(settings["max.connections"], fd_cap)
    per_ip = settings["max.connections.per.ip"]
    idle = settings["connections.max.idle.ms"]
    partial = settings["corral.socket.partial.request.timeout.ms"]
    queued = settings["queued.max.request.bytes"]
    log.info(
        "connections: at most %d (max.connections=%d; RLIMIT_NOFILE=%s with %d open "
        "leaves %d), "
        "max.connections.per.ip=%d, connections.max.idle.ms=%d, "
        "corral.socket.partial.request.timeout.ms=%d",
        max_connections,
        settings["max.connections"],
        "unlimited" if soft >= INT32_MAX else soft,
        open_now,
        fd_cap,
        per_ip,
        idle,
        partial,
    )
    log.info(
        "queued.max.request.bytes=%d (%s)",
        queued,
        "unlimited" if queued < 0 else f"{queued / (1 << 20):.1f} MiB",
    )
    return {
        "sasl_max_receive_bytes": settings["sasl.server.max.receive.size"],
        "failed_authentication_delay_ms": settings["connection.failed.authentication.delay.ms"],
        "max_connections": None if max_connections >= INT32_MAX else max_connections,
        "max_connections_per_ip": None if per_ip >= INT32_MAX else per_ip,
        "idle_timeout_ms": None if idle < 0 else idle,
        "partial_request_timeout_ms": None if partial < 0 else partial,
        "queued_max_request_bytes": None if queued < 0 else queued,
    }


class Server:
    def __init__(self, settings: Settings, faults_file: str | None = None):
        self.settings = settings
        # A scenario file (`corral serve --faults FILE`, faults/scenario.py): checked first.
        self.scenario: Scenario | None = None
        if faults_file is not None:
            try:
                self.scenario = load_scenario(faults_file)
            except ScenarioError as e:
                raise StartupError(str(e)) from None
        self.broker = Broker(settings)
        self.table = api_table()
        self.max_request_bytes = settings["socket.request.max.bytes"]
        self.reactor: _core.Reactor | None = None
        self.errors = metrics.PythonErrors()
        # Injected faults (docs/faults.md): none unless the faults API adds some.
        self.faults = Injector(broker=self.broker)
        # Set when the broker cannot go on (the network thread stopped): serve() raises it after
        # a clean shutdown of everything else.
        self.failure: str | None = None

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        # SIGTERM and SIGINT are ours from before the listeners are announced: the network
        # thread answers at once, so a stop may come before any task of the loop has run (seen
        # under qemu on a loaded machine: the default action killed the process).
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            await self._serve(signals, task_status=task_status)

    async def _serve(self, signals: Any, *, task_status: Any) -> None:
        configured = list(self.broker.listeners.values())
        try:
            tls = [tls_config(self.settings, listener) for listener in configured]
        except ConfigError as e:
            raise StartupError(str(e)) from None
        sockets, bound = [], []
        for listener in configured:
            try:
                opened = await trio.open_tcp_listeners(listener.port, host=listener.host)
            except OSError as e:
                raise StartupError(
                    f"cannot listen on {listener.host}:{listener.port} for "
                    f"listener {listener.name}: {e.strerror or e}"
                ) from None
            bound_host, bound_port = opened[0].socket.getsockname()[:2]
            bound.append(replace(listener, host=bound_host, port=bound_port))
            sockets.append(opened)
        metrics_listeners = await self._http_listeners("corral.metrics.listen", "metrics")
        faults_listeners = await self._http_listeners("corral.faults.listen", "faults")
        if self.scenario is not None:
            # Before the listeners are logged (and any request read): in force from the start.
            install_scenario(self.scenario, self.faults.faults)
        self.broker.bound(bound)
        groups = self.broker.groups
        short_paths = self.settings["corral.group.heartbeat.short.path.enable"]
        reactor = self.reactor = _core.Reactor(
            self.table,
            [
                (socket.socket.detach(), listener.name, listener.sasl, config)
                for listener, opened, config in zip(configured, sockets, tls)
                for socket in opened
            ],
            self.max_request_bytes,
            groups.heartbeat_view if short_paths else None,
            consumer_heartbeat_view=groups.consumer_heartbeat_view if short_paths else None,
            commit_path=groups.writer.core_commits,
            # With ACLs, the short paths answer only groups a handler authorized on the connection.
            authorize_short_paths=self.broker.authorizer is not None,
            **network_limits(self.settings),
        )
        self.broker.sessions.attach(reactor)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._shutdown_on_signal, nursery.cancel_scope, signals)
                nursery.start_soon(self.broker.groups.run)
                if self.broker.cluster is not None:
                    nursery.start_soon(self.broker.cluster.run)
                nursery.start_soon(self.broker.logs.run)
                nursery.start_soon(self.broker.topics.run)
                nursery.start_soon(self.broker.analytics.run)
                if self.broker.transactions is not None:
                    nursery.start_soon(self.broker.transactions.run)
                if self.broker.shares is not None:
                    nursery.start_soon(self.broker.shares.run)
                nursery.start_soon(self._dispatch, reactor, nursery)
                self.faults.attach(
                    reactor,
                    nursery,
                    lambda request: self._handle_diverted(reactor, nursery, request),
                    lambda request, body: self._respond(reactor, request, body),
                )
                nursery.start_soon(self.faults.run)
                nursery.start_soon(_flush_warnings)
                if metrics_listeners:
                    nursery.start_soon(metrics.serve, metrics_listeners, metrics.registry(self))
                if faults_listeners:
                    api = faults_http.FaultsApi(
                        self.faults, self.broker, self.settings["corral.faults.enable"]
                    )
                    nursery.start_soon(faults_http.serve, faults_listeners, api)
                task_status.started(bound[0].port)
        finally:
            reactor.stop()
        if self.failure is not None:
            raise BrokerFailed(self.failure)

    async def _http_listeners(self, setting: str, what: str) -> list[trio.SocketListener]:
        """The port of an HTTP endpoint (corral.metrics.listen: /metrics, corral.faults.listen:
        /faults), if set; its bound address is logged."""
        listen = self.settings[setting]
        if not listen:
            return []
        host, port = parse_listener(listen)
        try:
            listeners = await trio.open_tcp_listeners(port, host=host)
        except OSError as e:
            raise StartupError(
                f"cannot listen on {host}:{port} for {what}: {e.strerror or e}"
            ) from None
        bound_host, bound_port = listeners[0].socket.getsockname()[:2]
        log.info("%s on http://%s:%d/%s", what, bound_host, bound_port, what)
        if what == "faults" and not self.settings["corral.faults.enable"]:
            log.info("faults API refuses everything: corral.faults.enable is false")
        return listeners

    async def _shutdown_on_signal(self, scope: trio.CancelScope, signals: Any) -> None:
        async for signum in signals:
            log.info("received %s, shutting down", signal.Signals(signum).name)
            scope.cancel()
            return

    async def _dispatch(self, reactor: _core.Reactor, nursery: trio.Nursery) -> None:
        """Answers the requests the network thread queues: plain handlers at once, in the order
        read; async ones (those that wait) in a task each."""
        notify_fd = reactor.notify_fd
        while True:
            await trio.lowlevel.wait_readable(notify_fd)
            try:
                requests, problems, closed = reactor.drain()
            except OSError as e:
                # No socket is served any more: a deaf broker must not look alive.
                log.critical("%s; shutting down", e)
                self.failure = str(e)
                nursery.cancel_scope.cancel()
                return
            for kind, client_host, message in problems:
                if kind is None:
                    log.warning("%s", message)  # already rate-limited by the network thread
                else:
                    client_warnings(kind, "%s", message, address=client_host)
            for connection in closed:
                self.broker.sessions.closed(connection)
            # Members the network thread moved are moved in memory before any request is read.
            self.broker.groups.apply_core_moves()
            faults = self.faults.faults
            for request in requests:
                # Injected faults: one falsy test while none is active.
                if faults.active and self.faults.divert(request):
                    continue
                self._handle(reactor, nursery, request)

    def _handle(
        self, reactor: _core.Reactor, nursery: trio.Nursery, request: _core.Request
    ) -> None:
        """A plain handler at once; an async one (that waits) in a task."""
        key = request.api_key
        if key in ASYNC_HANDLERS:
            nursery.start_soon(self._handle_async, reactor, request)
            return
        try:
            body = HANDLERS[key](self.broker, request)
        except Exception as e:
            self._failed(reactor, request, e)
            return
        if isinstance(body, Later):
            body.then(lambda body: self._respond(reactor, request, body))
        else:
            self._respond(reactor, request, body)

    def _handle_diverted(
        self, reactor: _core.Reactor, nursery: trio.Nursery, request: _core.Request
    ) -> None:
        """A request a delay or hold fault let go: handled as if it had just been read."""
        self.broker.groups.apply_core_moves()
        self._handle(reactor, nursery, request)

    async def _handle_async(self, reactor: _core.Reactor, request: _core.Request) -> None:
        try:
            body = await HANDLERS[request.api_key](self.broker, request)
        except Exception as e:
            self._failed(reactor, request, e)
            return
        self._respond(reactor, request, body)

    def _respond(self, reactor: _core.Reactor, request: _core.Request, body) -> None:
        # None: no response (acks=0); bytes: a frame the core encoded; else a body dict.
        try:
            response = body if body is None or isinstance(body, bytes) else request.respond(body)
        except Exception as e:
            self._failed(reactor, request, e)
            return
        self.errors.note(request.api_key, request.api_version, body)
        reactor.respond(request.connection, response)

    @staticmethod
    def _failed(reactor: _core.Reactor, request: _core.Request, error: Exception) -> None:
        if isinstance(error, _core.ProtocolError):
            client_warnings(
                "malformed request",
                "closing connection from %s: %s",
                request.client_host,
                error,
                address=request.client_host,
            )
        else:
            log.error(
                "closing connection from %s after an internal error on %r",
                request.client_host,
                request,
                exc_info=error,
            )
        reactor.close(request.connection)


async def _flush_warnings() -> None:
    """Logs the summaries of warning windows that are over, even when nothing new comes."""
    while True:
        await trio.sleep(1)
        flush_all()
