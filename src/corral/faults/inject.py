"""What the server does with a request a fault fired on, and the faults' life beside the broker.

`Injector.divert(request)` is called by the dispatch (server.py) only while `faults.active` is
non-empty; True means the fault took the request:
- error: answered at once with the error response (answers.py), never handled; a Produce with
  acks=0, which has no response, closes its connection as Kafka does on such a produce error;
- delay: handled as usual once the delay is over, in a task of the broker's nursery (the
  dispatch loop goes on serving; the connection, whose next request waits for this answer,
  keeps its order);
- hold: handled as usual once released (`release`, or the fault removed or its duration over);
- close: the connection is closed, the request unanswered.

While any fault is active the network thread's short paths are off (`Reactor.set_short_paths`),
so the heartbeats and commits it would answer by itself reach the dispatch, and faults, too;
they are back on once none is. `run` ends faults whose duration is over at that time.

A coordinator fault (`coordinator`) is answered as an error is. Faults on the broker (unloaded
shards, storage faults, refused connections, group faults) are broker.py's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from corral.faults.answers import error_response
from corral.faults.broker import BrokerFaults
from corral.faults.model import BROKER_KINDS, Fault, FaultError
from corral.faults.registry import Faults
from corral.network.apis import ApiKey

if TYPE_CHECKING:
    from corral import _core
    from corral.broker import Broker

log = logging.getLogger("corral.faults")


class Injector:
    def __init__(self, faults: Faults | None = None, broker: Broker | None = None) -> None:
        self.faults = faults if faults is not None else Faults()
        self.faults.on_change = self._changed
        self.faults.on_end = self._ended
        # Faults on the broker itself; `broker` is what they act on.
        self.broker_faults = BrokerFaults(self.faults, broker)
        self.faults.on_start = self.broker_faults.start
        self.faults.on_list = self.broker_faults.refresh
        self.reactor: _core.Reactor | None = None
        self._nursery: trio.Nursery | None = None
        self._handle: Callable[[_core.Request], None] = lambda request: None
        self._respond: Callable[[_core.Request, Any], None] = lambda request, body: None
        # Held requests of each hold fault: the event that releases them, and how many wait.
        self._holds: dict[int, trio.Event] = {}
        self.held: dict[int, int] = {}
        self._wake: trio.Event | None = None

    def attach(
        self,
        reactor: _core.Reactor,
        nursery: trio.Nursery,
        handle: Callable[[_core.Request], None],
        respond: Callable[[_core.Request, Any], None],
    ) -> None:
        """The server's reactor, nursery, usual handling and answering of a request."""
        self.reactor, self._nursery = reactor, nursery
        self.broker_faults.reactor, self.broker_faults.nursery = reactor, nursery
        self._handle, self._respond = handle, respond
        self._changed()

    def divert(self, request: _core.Request) -> bool:
        try:
            return self._divert(request)
        except Exception:
            # As a handler's internal error: logged, the connection closed, the broker serving.
            log.exception("fault injection failed on %r; closing its connection", request)
            self._close(request)
            return True

    def _divert(self, request: _core.Request) -> bool:
        fired = self.faults.fire(request)
        if fired is None:
            return False
        fault = fired.fault
        kind = fault.action.kind
        if kind in ("error", "coordinator"):
            if request.api_key == ApiKey.PRODUCE and request.body["acks"] == 0:
                self._close(request)
            else:
                body = error_response(
                    request.api_key,
                    request.api_version,
                    request.body,
                    fault.action.error,
                    f"injected by corral fault {fault.id}",
                )
                self._respond(request, body)
        elif kind == "close":
            self._close(request)
        elif kind == "delay":
            self._start(self._delayed, request, fired.delay_s)
        else:
            event = self._holds.get(fault.id)
            if event is None:
                event = self._holds[fault.id] = trio.Event()
            self.held[fault.id] = self.held.get(fault.id, 0) + 1
            self._start(self._held, request, fault.id, event)
        return True

    def _close(self, request: _core.Request) -> None:
        if self.reactor is not None:
            self.reactor.close(request.connection)

    def _start(self, fn: Callable[..., Any], *args: Any) -> None:
        assert self._nursery is not None, "attach() first"
        self._nursery.start_soon(fn, *args)

    async def _delayed(self, request: _core.Request, delay_s: float) -> None:
        await trio.sleep(delay_s)
        self._handle(request)

    async def _held(self, request: _core.Request, fault_id: int, event: trio.Event) -> None:
        await event.wait()
        self._handle(request)

    def release(self, fault_id: int) -> int:
        """Lets the requests the hold fault holds go on; returns how many. Raises KeyError for
        no such fault, FaultError for a fault that is not a hold."""
        fault = self.faults.get(fault_id)
        if fault is None:
            raise KeyError(fault_id)
        if fault.action.kind != "hold":
            raise FaultError(f"fault {fault_id} is not a hold")
        return self._release(fault_id)

    def _release(self, fault_id: int) -> int:
        event = self._holds.pop(fault_id, None)
        n = self.held.pop(fault_id, 0)
        if event is not None:
            event.set()
        if n:
            log.info("fault %d released %d held request(s)", fault_id, n)
        return n

    def _ended(self, fault: Fault) -> None:
        if fault.action.kind == "hold" and fault.ended in ("removed", "duration"):
            self._release(fault.id)
        elif fault.action.kind in BROKER_KINDS:
            self.broker_faults.end(fault)

    def refresh(self) -> None:
        """Brings the broker faults' counters up to date (before /metrics is scraped)."""
        self.broker_faults.refresh()

    def _changed(self) -> None:
        if self.reactor is not None:
            self.reactor.set_short_paths(not self.faults.active)
        if self._wake is not None:
            self._wake.set()

    async def run(self) -> None:
        """Ends each fault when its duration is over (so the short paths come back on time)."""
        while True:
            self._wake = trio.Event()
            self.broker_faults.refresh()
            next_end = self.faults.expire()
            timeout = float("inf") if next_end is None else max(0.0, next_end - self.faults.clock())
            if self.broker_faults.live():
                timeout = min(timeout, 1.0)  # a failing_fsyncs fault is done when they failed
            with trio.move_on_after(timeout):
                await self._wake.wait()
