"""Faults on the broker rather than on requests (model.BROKER_KINDS), acted on when they start and
when they end (the registry's `on_start` and `on_end`):

- fence, rebalance, target: groups/interventions.py, once; refused (model.FaultRefused) with
  Kafka's error when the group, a member or the target is unknown (404, 400) or the group's
  coordinator shard is not loaded (503);
- unload: the group's coordinator shard is unloaded (`GroupCoordinator.unload_shard`: its groups
  answer NOT_COORDINATOR, then COORDINATOR_LOAD_IN_PROGRESS while it loads) and loaded again
  when the fault ends, unless another unload fault still holds it;
- storage: the log store's faults (`LogStore.set_storage_faults`), the sum of the active ones: a
  full disk while any says so, the longest fsync delay, and the failing flush passes of each
  added to those still to fail; a failing_fsyncs fault alone is done when they have failed;
- refuse: `Reactor.refuse_connections` for the fault's listener (or all) and duration.

`refresh` brings the lasting ones' `fired` up to date from the core's counters (appends refused
and flush passes failed or delayed; connections refused) before they are listed or scraped.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from corral.errors import ErrorCode
from corral.faults.model import Fault, FaultError, FaultRefused
from corral.faults.registry import Faults
from corral.groups import interventions
from corral.groups.shard import ShardState

if TYPE_CHECKING:
    from corral import _core
    from corral.broker import Broker

log = logging.getLogger("corral.faults")

# The HTTP status of an intervention's error.
_STATUS = {
    ErrorCode.GROUP_ID_NOT_FOUND: 404,
    ErrorCode.UNKNOWN_MEMBER_ID: 404,
    ErrorCode.NOT_COORDINATOR: 503,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: 503,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: 503,
}


class BrokerFaults:
    def __init__(self, faults: Faults, broker: Broker | None = None) -> None:
        self.faults = faults
        self.broker = broker
        self.reactor: _core.Reactor | None = None
        self.nursery: trio.Nursery | None = None
        # The core's counter when each lasting fault started (its `fired` is the count since).
        self._base: dict[int, int] = {}
        # The core's counters last added to `fired_by_kind`, per kind.
        self._seen: dict[str, int] = {}
        # unload: fault id -> the partition of the shard it unloaded.
        self._unloads: dict[int, int] = {}
        self._shard_locks: dict[int, trio.Lock] = {}

    def live(self) -> bool:
        """Whether a lasting fault's counters move on their own (worth refreshing)."""
        return any(f.action.kind in ("storage", "refuse") for f in self.faults.active)

    # ============================================================================= start ===

    def start(self, fault: Fault) -> None:
        kind = fault.action.kind
        if kind in ("fence", "rebalance", "target"):
            self._intervene(fault)
        elif kind == "unload":
            self._unload(fault)
        elif kind == "storage":
            store = self._store()
            self._base[fault.id] = store.storage_faults[3]
            self._seen.setdefault("storage", store.storage_faults[3])
            self._apply_storage([*self._active("storage"), fault], fault.action.failing_fsyncs)
            log.info("fault %d fired: %s", fault.id, _storage_summary(fault))
        elif kind == "refuse":
            reactor = self._reactor()
            listener = fault.match.listener
            if listener is not None and self.broker and listener not in self.broker.listeners:
                raise FaultError(f"listener: no listener {listener!r}")
            self._base[fault.id] = reactor.refused_connections
            self._seen.setdefault("refuse", reactor.refused_connections)
            if not reactor.refuse_connections(fault.duration_ms, listener):
                raise FaultError(f"listener: no listener {listener!r}")
            log.info(
                "fault %d fired: new connections on %s refused %s",
                fault.id,
                f"listener {listener}" if listener else "every listener",
                f"for {fault.duration_ms} ms" if fault.duration_ms else "until removed",
            )

    def _intervene(self, fault: Fault) -> None:
        broker = self._broker()
        group = fault.match.group or ""
        kind = fault.action.kind
        if kind == "fence":
            member = fault.match.member or ""
            error, message = interventions.fence_member(broker.groups, group, member)
            what = f"member {member} of group {group} fenced (or its session expired)"
        elif kind == "rebalance":
            error, message = interventions.force_rebalance(broker.groups, group)
            what = f"group {group} rebalances"
        else:
            error, message = interventions.set_target(broker.groups, group, fault.action.target)
            what = f"target assignment of group {group} set: {fault.action.target}"
        if error:
            raise FaultRefused(_STATUS.get(error, 400), error.name, message)
        log.info("fault %d fired: %s%s", fault.id, what, f" ({message})" if message else "")

    def _unload(self, fault: Fault) -> None:
        broker = self._broker()
        nursery = self._nursery()
        group = fault.match.group or ""
        shard = broker.groups.shard_of(group)
        partition = shard.partition
        error = shard.availability()
        if error or partition in self._unloads.values():
            raise FaultRefused(
                503,
                (error or ErrorCode.NOT_COORDINATOR).name,
                f"the coordinator shard of group {group} (partition {partition}) is not loaded",
            )
        self._unloads[fault.id] = partition
        fault.matched = fault.fired = 1
        self.faults.count_fired("unload")
        nursery.start_soon(self._move, partition)
        log.info(
            "fault %d fired: coordinator shard %d (of group %s) unloaded %s",
            fault.id,
            partition,
            group,
            f"for {fault.duration_ms} ms" if fault.duration_ms else "until removed",
        )

    async def _move(self, partition: int) -> None:
        """Brings the shard where the faults want it: unloaded while an unload fault holds it,
        loaded otherwise (whichever of an unload and a reload runs first, the last word wins)."""
        assert self.broker is not None
        groups = self.broker.groups
        lock = self._shard_locks.setdefault(partition, trio.Lock())
        async with lock:
            while True:
                unloaded = partition in self._unloads.values()
                state = groups.shards[partition].state
                if unloaded and state is ShardState.LOADED:
                    await groups.unload_shard(partition)
                elif not unloaded and state is ShardState.UNLOADED:
                    await groups.load_shard(partition)
                else:
                    return

    # =============================================================================== end ===

    def end(self, fault: Fault) -> None:
        kind = fault.action.kind
        if kind == "unload":
            partition = self._unloads.pop(fault.id, None)
            if partition is not None and partition not in self._unloads.values():
                if self.nursery is not None:
                    self.nursery.start_soon(self._move, partition)
                log.info("fault %d over: coordinator shard %d loads again", fault.id, partition)
        elif kind == "storage" and self.broker is not None and fault.id in self._base:
            self._refresh_one(fault)
            self._base.pop(fault.id, None)
            remaining = self._store().storage_faults[1]
            others = self._active("storage")
            if fault.action.failing_fsyncs and not any(f.action.failing_fsyncs for f in others):
                remaining = 0
            self._apply_storage(others, 0, remaining)
            log.info("fault %d over: %s no longer", fault.id, _storage_summary(fault))
        elif kind == "refuse" and self.reactor is not None and fault.id in self._base:
            self._refresh_one(fault)
            self._base.pop(fault.id, None)
            self.reactor.refuse_connections(0, None)
            now = self.faults.clock()
            for other in self._active("refuse"):
                at = other.expires_at
                left = None if at is None else max(1, int((at - now) * 1000))
                self.reactor.refuse_connections(left, other.match.listener)
            log.info("fault %d over: new connections accepted again", fault.id)

    # =========================================================================== helpers ===

    def refresh(self) -> None:
        """The lasting faults' `fired` from the core's counters; a failing_fsyncs fault alone is
        done once its passes have failed."""
        if self.broker is not None and "storage" in self._seen:
            total = self._store().storage_faults[3]
            self.faults.count_fired("storage", total - self._seen["storage"])
            self._seen["storage"] = total
        if self.reactor is not None and "refuse" in self._seen:
            total = self.reactor.refused_connections
            self.faults.count_fired("refuse", total - self._seen["refuse"])
            self._seen["refuse"] = total
        for fault in [*self._active("storage"), *self._active("refuse")]:
            self._refresh_one(fault)
        remaining = None
        for fault in self._active("storage"):
            a = fault.action
            if a.failing_fsyncs and not a.disk_full and not a.fsync_delay_ms:
                if remaining is None:
                    remaining = self._store().storage_faults[1]
                if remaining == 0:
                    self.faults.finish(fault, "count")

    def _refresh_one(self, fault: Fault) -> None:
        base = self._base.get(fault.id)
        if base is None:
            return
        if fault.action.kind == "storage":
            total = self._store().storage_faults[3]
        elif self.reactor is not None:
            total = self.reactor.refused_connections
        else:
            return
        fault.fired = fault.matched = total - base

    def _apply_storage(self, faults: list[Fault], added: int, remaining: int | None = None) -> None:
        store = self._store()
        if remaining is None:
            remaining = store.storage_faults[1]
        store.set_storage_faults(
            disk_full=any(f.action.disk_full for f in faults),
            failing_fsyncs=min(remaining + added, 2**32 - 1),
            fsync_delay_ms=max((f.action.fsync_delay_ms for f in faults), default=0),
        )

    def _active(self, kind: str) -> list[Fault]:
        return [f for f in self.faults.active if f.action.kind == kind]

    def _broker(self) -> Broker:
        if self.broker is None:
            raise FaultRefused(503, "COORDINATOR_NOT_AVAILABLE", "no broker to act on")
        return self.broker

    def _store(self) -> _core.LogStore:
        return self._broker().logs.store

    def _reactor(self) -> _core.Reactor:
        if self.reactor is None:
            raise FaultRefused(503, "BROKER_NOT_AVAILABLE", "the broker is not serving yet")
        return self.reactor

    def _nursery(self) -> trio.Nursery:
        if self.nursery is None:
            raise FaultRefused(503, "BROKER_NOT_AVAILABLE", "the broker is not serving yet")
        return self.nursery


def _storage_summary(fault: Fault) -> str:
    a = fault.action
    parts = []
    if a.disk_full:
        parts.append("disk full (appends refused with ENOSPC)")
    if a.failing_fsyncs:
        parts.append(f"the next {a.failing_fsyncs} flush passes fail")
    if a.fsync_delay_ms:
        parts.append(f"each flush pass {a.fsync_delay_ms} ms slower")
    return ", ".join(parts)
