"""Deadlines of the group coordinators, kept in the compiled timer wheel.

A deadline's owner registers a callback and its arguments once and gets an integer key; scheduling
and cancelling then only touch the wheel (O(1), nothing allocated), so a heartbeat costs one call
into Rust. One trio task wakes every tick while anything is scheduled and runs the callbacks of
every expired key in one batch. Callbacks are plain functions: they change coordinator state and
complete parked requests, they never block. The network thread also moves session deadlines in this
wheel when it answers a Heartbeat itself (rust/groups/heartbeat_view.rs), so the clock is the core's
and the task ticks whenever the wheel holds anything, whoever put it there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import trio

from corral import _core

log = logging.getLogger("corral.groups.timers")


now_ms = _core.monotonic_ms


class Timers:
    def __init__(self, tick_ms: int = 10):
        self.tick_ms = tick_ms
        self.wheel = _core.TimerWheel(now_ms(), tick_ms)
        # key -> (callback, *args): one small tuple per member's session deadline, not a closure.
        self.callbacks: dict[int, tuple[Any, ...]] = {}
        self._next_key = 1
        self._armed = trio.Event()
        # While fire_due runs a batch: the keys its callbacks cancelled.
        self._cancelled: set[int] | None = None
        # The session deadlines the network thread moves (see HeartbeatView).
        self.heartbeat_view = _core.HeartbeatView(self.wheel)

    def register(self, callback: Callable[..., None], *args: Any) -> int:
        key = self._next_key
        self._next_key += 1
        self.callbacks[key] = (callback, *args)
        return key

    def unregister(self, key: int) -> None:
        self.wheel.cancel(key)
        self.callbacks.pop(key, None)

    def schedule(self, key: int, delay_ms: int) -> None:
        self.wheel.schedule(key, now_ms() + max(delay_ms, 0))
        if not self._armed.is_set():
            self._armed.set()

    def cancel(self, key: int) -> None:
        self.wheel.cancel(key)
        if self._cancelled is not None:
            self._cancelled.add(key)

    def fire_due(self) -> int:
        """Runs the callbacks of every key due now; returns how many fired. A key that an
        earlier callback of the same batch rescheduled or cancelled (say, a member answered a
        rejoin by the expiry that completed the join phase) is stale and does not fire, as Kafka
        cancels a timer it replaces; so is one the network thread rescheduled meanwhile (a
        heartbeat). A rescheduled key is back in the wheel; a cancelled one is remembered."""
        due = self.wheel.expired(now_ms())
        fired = 0
        cancelled: set[int] = set()
        self._cancelled = cancelled
        try:
            for key in due:
                entry = self.callbacks.get(key)
                if entry is None or key in cancelled or key in self.wheel:
                    continue
                fired += 1
                try:
                    entry[0](*entry[1:])
                except Exception:
                    log.exception("timer callback failed")
        finally:
            self._cancelled = None
        return fired

    async def run(self) -> None:
        while True:
            if len(self.wheel) == 0:
                self._armed = trio.Event()
                # The network thread can schedule without setting the event: look again soon.
                with trio.move_on_after(1):
                    await self._armed.wait()
            await trio.sleep(self.tick_ms / 1000)
            self.fire_due()
