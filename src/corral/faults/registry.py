"""The faults in force: added, listed, removed; and the one question the dispatch asks of each
request while any is active, `fire(request)`.

The hot path pays one attribute test: `Faults.active` is an empty list (falsy) when no fault is
in force, and the server asks nothing more. With faults active, each request is checked against
them in the order they were added; the first that fires decides. A request's groups, topics and
members are read from its body only when a fault matches on them (targets.py).

Faults that are done (their count used up, their duration over, or removed) leave `active`; the
last DONE_KEPT of them stay listed, with their counters, so that a test can read what fired.
A fault added with `after_ms` waits in `pending` (listed, matching nothing) until `expire` finds
its start time come; it then joins `active` in the order of ids.

Faults on the broker (model.BROKER_KINDS) match no request: `on_start` acts on one when it is
added (and may refuse it, model.FaultRefused: it is then not added), `on_end` when it ends. A
group fault (model.ONE_SHOT_KINDS) is done as soon as it has acted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from corral.faults.model import (
    BROKER_KINDS,
    FIRED_ON_KEPT,
    ONE_SHOT_KINDS,
    Fault,
    FaultError,
    api_name,
    parse,
)
from corral.faults.targets import Targets, targets
from corral.network.apis import ApiKey

log = logging.getLogger("corral.faults")

DONE_KEPT = 1000


@dataclass(frozen=True)
class Fired:
    """A fault that fired on a request, and what it does: for a delay, the drawn delay."""

    fault: Fault
    delay_s: float = 0.0


class Faults:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        # In force, in the order added. Empty (falsy) when none: the dispatch's only check.
        self.active: list[Fault] = []
        self.done: dict[int, Fault] = {}
        # Added with after_ms and not started yet, by start time.
        self.pending: list[Fault] = []
        self.next_id = 1
        # Called after the set of active faults changed (the server flips the short paths).
        self.on_change: Callable[[], None] = lambda: None
        # Called with each fault that ends or is removed, `ended` saying why (the server
        # releases a hold's requests when it is removed or its duration is over).
        self.on_end: Callable[[Fault], None] = lambda fault: None
        # Called with a broker fault before it is added: acts on it, or raises FaultRefused.
        self.on_start: Callable[[Fault], None] = lambda fault: None
        # Called before the faults are listed (the server brings broker faults' counters up to
        # date, and ends the ones that are over).
        self.on_list: Callable[[], None] = lambda: None
        # Fired and matched counts of every fault ever added, by action kind (for /metrics).
        self.fired_by_kind: dict[str, int] = {}

    def add(self, spec: Any) -> Fault:
        """Adds the fault `spec` describes (model.py); raises FaultError (FaultRefused when the
        broker refused to act on it)."""
        fault = parse(spec, self.next_id, self.clock())
        if fault.after_ms:
            # A broker fault acts when it starts (`expire`), not now.
            self.next_id += 1
            fault.active = False
            self.pending.append(fault)
            self.pending.sort(key=lambda f: (f.starts_at, f.id))
            log.info(
                "fault %d added, starts in %d ms: %s", fault.id, fault.after_ms, _summary(fault)
            )
            return fault
        if fault.action.kind in BROKER_KINDS:
            self.on_start(fault)
        self.next_id += 1
        log.info("fault %d added: %s", fault.id, _summary(fault))
        self._activate(fault)
        self.on_change()
        return fault

    def _activate(self, fault: Fault) -> None:
        """Into `active`; a group fault, which acted when it started, is done at once."""
        fault.active = True
        self.active.append(fault)
        self.active.sort(key=lambda f: f.id)
        kind = fault.action.kind
        if kind in ONE_SHOT_KINDS:
            fault.matched = fault.fired = 1
            self.count_fired(kind)
            self._end(fault, "done")

    def count_fired(self, kind: str, n: int = 1) -> None:
        self.fired_by_kind[kind] = self.fired_by_kind.get(kind, 0) + n

    def finish(self, fault: Fault, why: str) -> None:
        """Ends an active fault for `why` (a broker fault whose effect is over)."""
        if fault.active:
            self._end(fault, why)
            self.on_change()

    def get(self, fault_id: int) -> Fault | None:
        for fault in (*self.active, *self.pending):
            if fault.id == fault_id:
                return fault
        return self.done.get(fault_id)

    def remove(self, fault_id: int) -> bool:
        """Removes the fault, active or done; False when there is none of that id."""
        fault = self.get(fault_id)
        if fault is None:
            return False
        self.done.pop(fault_id, None)
        if fault.pending:
            self.pending.remove(fault)
            fault.ended = "removed"
            self.on_end(fault)
            self.on_change()
        elif fault.active:
            self._end(fault, "removed", keep=False)
            self.on_change()
        else:
            fault.ended = "removed"
            self.on_end(fault)
        log.info("fault %d removed", fault_id)
        return True

    def clear(self) -> int:
        """Removes every fault; returns how many there were."""
        n = len(self.active) + len(self.done) + len(self.pending)
        ended = list(self.active)
        waiting = bool(self.pending)
        for fault in [*self.pending, *self.done.values()]:
            fault.ended = "removed"
            self.on_end(fault)
        self.done.clear()
        self.pending.clear()
        for fault in ended:
            self._end(fault, "removed", keep=False)
        if ended or waiting:
            self.on_change()
        if n:
            log.info("faults cleared (%d)", n)
        return n

    def listing(self) -> list[dict[str, Any]]:
        self.on_list()
        self.expire()
        faults = sorted([*self.active, *self.pending, *self.done.values()], key=lambda f: f.id)
        return [fault.describe() for fault in faults]

    def expire(self) -> float | None:
        """Starts the pending faults whose start time has come and ends the faults whose
        duration is over; returns the next start or end time, if any."""
        now = self.clock()
        next_end = None
        changed = False
        while self.pending and self.pending[0].starts_at <= now:
            fault = self.pending.pop(0)
            changed = True
            if fault.action.kind in BROKER_KINDS:
                try:
                    self.on_start(fault)
                except FaultError as e:  # it never acted: nothing to undo
                    fault.ended = f"refused: {e}"
                    self.done[fault.id] = fault
                    log.warning("fault %d could not start: %s", fault.id, e)
                    continue
            log.info("fault %d started", fault.id)
            self._activate(fault)
        if self.pending:
            next_end = self.pending[0].starts_at
        for fault in list(self.active):
            at = fault.expires_at
            if at is None:
                continue
            if at <= now:
                self._end(fault, "duration")
                changed = True
            elif next_end is None or at < next_end:
                next_end = at
        if changed:
            self.on_change()
        return next_end

    def _end(self, fault: Fault, why: str, *, keep: bool = True) -> None:
        fault.active, fault.ended = False, why
        fault.per_connection.clear()
        self.active.remove(fault)
        if keep:
            self.done[fault.id] = fault
            while len(self.done) > DONE_KEPT:
                del self.done[next(iter(self.done))]
            log.info("fault %d done (%s): fired %d times", fault.id, why, fault.fired)
        self.on_end(fault)

    def fire(self, request: Any) -> Fired | None:
        """The fault that fires on `request` (counted and logged), or None: handle it as usual."""
        now = self.clock()
        found: Targets | None = None
        for fault in list(self.active):
            kind = fault.action.kind
            if kind in BROKER_KINDS:
                continue
            if kind == "coordinator" and request.api_key == ApiKey.FIND_COORDINATOR:
                continue  # the client must still find this broker, to come back to it
            m = fault.match
            if m.api_key is not None and request.api_key != m.api_key:
                continue
            if not m.versions[0] <= request.api_version <= m.versions[1]:
                continue
            if m.client_id is not None and request.client_id != m.client_id:
                continue
            if m.listener is not None and request.listener != m.listener:
                continue
            at = fault.expires_at
            if at is not None and at <= now:
                self._end(fault, "duration")
                self.on_change()
                continue
            if m.needs_body:
                if found is None:
                    found = targets(request.api_key, request.body)
                if m.group is not None and m.group not in found.groups:
                    continue
                if m.member is not None and m.member not in found.members:
                    continue
                if (m.topic is not None or m.partition is not None) and not found.has_partition(
                    m.topic, m.partition
                ):
                    continue
            fault.matched += 1
            if fault.probability < 1.0 and fault.rng.random() >= fault.probability:
                continue
            action = fault.action
            if action.kind == "close":
                seen = fault.per_connection.get(request.connection, 0) + 1
                if seen < action.close_after:
                    fault.per_connection[request.connection] = seen
                    continue
                fault.per_connection.pop(request.connection, None)
            delay_s = 0.0
            if action.kind == "delay":
                lo, hi = action.delay_ms
                delay_s = (lo if lo == hi else fault.rng.uniform(lo, hi)) / 1000
            fault.fired += 1
            if len(fault.fired_on) < FIRED_ON_KEPT:
                fault.fired_on.append(fault.matched)
            self.count_fired(action.kind)
            _log_fired(fault, request, delay_s)
            if fault.count is not None and fault.fired >= fault.count:
                self._end(fault, "count")
                self.on_change()
            return Fired(fault, delay_s)
        return None


def _summary(fault: Fault) -> str:
    described = fault.describe()
    for name in ("id", "matched", "fired", "active", "fired_on", "pending"):
        described.pop(name, None)
    return " ".join(f"{k}={v}" for k, v in described.items())


def _log_fired(fault: Fault, request: Any, delay_s: float) -> None:
    action = fault.action
    if action.kind in ("error", "coordinator"):
        what = f"answered {fault.describe()[action.kind]}"
    elif action.kind == "delay":
        what = f"delayed {delay_s * 1000:.0f} ms"
    elif action.kind == "hold":
        what = "held until released"
    else:
        what = "connection closed"
    log.info(
        "fault %d fired (%d of %s): %s v%d from %s (client id %s, listener %s) %s",
        fault.id,
        fault.fired,
        fault.count if fault.count is not None else "unbounded",
        api_name(request.api_key),
        request.api_version,
        request.client_host,
        request.client_id,
        request.listener,
        what,
    )
