"""The server's side of a fired fault (corral/faults/inject.py), in process on trio with real
decoded requests: the short paths off while any fault is active, an error answered without the
handler, a delay and a hold handled later without blocking, a close, the holds released when
their fault goes, and a failure inside fault injection closing the connection instead of
stopping the dispatch."""

from __future__ import annotations

from typing import Any

import trio

from corral import _core
from corral.errors import ErrorCode
from corral.faults import inject
from corral.faults.inject import Injector
from corral.network.apis import ApiKey, api_table

TABLE = _core.ApiTable(api_table().advertised())


def heartbeat() -> _core.Request:
    connection = _core.Connection(TABLE, 1 << 20)
    body = {"group_id": "g", "generation_id": 1, "member_id": "m"}
    connection.feed(_core.encode_request(ApiKey.HEARTBEAT, 4, 3, body, "app"))
    item = connection.next()
    assert isinstance(item, _core.Request)
    return item


class Reactor:
    """What the injector tells the network thread."""

    def __init__(self) -> None:
        self.short_paths: list[bool] = []
        self.closed: list[int] = []

    def set_short_paths(self, enabled: bool) -> None:
        self.short_paths.append(enabled)

    def close(self, connection: int) -> None:
        self.closed.append(connection)


def run(scenario) -> None:
    async def main() -> None:
        async with trio.open_nursery() as nursery:
            reactor = Reactor()
            handled: list[tuple[float, Any]] = []
            answered: list[Any] = []
            injector = Injector()
            injector.attach(
                reactor,  # type: ignore[arg-type]
                nursery,
                lambda request: handled.append((trio.current_time(), request)),
                lambda request, body: answered.append(body),
            )
            nursery.start_soon(injector.run)
            await scenario(injector, reactor, handled, answered)
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_short_paths_are_off_while_any_fault_is_active():
    async def scenario(injector, reactor, handled, answered):
        assert reactor.short_paths == [True]
        one = injector.faults.add({"error": "NOT_COORDINATOR"})
        injector.faults.add({"api": "Fetch", "delay_ms": 5})
        assert reactor.short_paths[-1] is False
        injector.faults.remove(one.id)
        assert reactor.short_paths[-1] is False
        injector.faults.clear()
        assert reactor.short_paths[-1] is True
        injector.faults.add({"error": "NOT_COORDINATOR", "duration_ms": 50})
        assert reactor.short_paths[-1] is False
        await trio.sleep(0.2)  # over with no request: run() ends it
        assert reactor.short_paths[-1] is True

    run(scenario)


def test_error_close_delay_and_hold():
    async def scenario(injector, reactor, handled, answered):
        faults = injector.faults
        assert not injector.divert(heartbeat())  # no fault matches: handled as usual
        faults.add({"api": "Heartbeat", "error": "REBALANCE_IN_PROGRESS", "count": 1})
        assert injector.divert(heartbeat())
        assert answered == [{"error_code": ErrorCode.REBALANCE_IN_PROGRESS}] and not handled
        faults.add({"api": "Heartbeat", "close_after": 1, "count": 1})
        assert injector.divert(heartbeat()) and reactor.closed == [0]
        faults.add({"api": "Heartbeat", "delay_ms": 100, "count": 1})
        start = trio.current_time()
        assert injector.divert(heartbeat())
        await trio.sleep(0.05)
        assert not handled
        await trio.sleep(0.1)
        assert len(handled) == 1 and handled[0][0] - start >= 0.1
        hold = faults.add({"api": "Heartbeat", "hold": True})
        assert injector.divert(heartbeat()) and injector.divert(heartbeat())
        await trio.sleep(0.05)
        assert len(handled) == 1 and injector.held == {hold.id: 2}
        assert injector.release(hold.id) == 2
        await trio.sleep(0.01)
        assert len(handled) == 3 and injector.held == {}
        assert injector.divert(heartbeat())
        faults.remove(hold.id)  # removing a hold lets its requests go
        await trio.sleep(0.01)
        assert len(handled) == 4

    run(scenario)


def test_a_failure_inside_fault_injection_closes_the_connection(monkeypatch):
    def broken(*args):
        raise KeyError("a bug")

    monkeypatch.setattr(inject, "error_response", broken)

    async def scenario(injector, reactor, handled, answered):
        injector.faults.add({"error": "NOT_COORDINATOR"})
        assert injector.divert(heartbeat())
        assert reactor.closed == [0] and not answered and not handled

    run(scenario)
