"""An in-process `Engine` (corral/cluster/engine.py) for fast tests of cluster logic: the same
rules as the real engines (expiry by the engine's clock, epochs, fencing, compare-and-set), kept
in dicts under a lock. Wire tests run on real etcd and PostgreSQL (tests/kits/engines.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from corral.cluster.engine import EngineError, Fenced, Lease, Node, Position, ShardImage


class MemoryEngine:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.nodes: dict[int, tuple[Node, float]] = {}
        self.leases: dict[int, tuple[Lease, float]] = {}
        self.epochs: dict[int, int] = {}
        self.batches: dict[int, dict[Position, bytes]] = {}
        self.snapshots: dict[int, tuple[Position, bytes]] = {}
        self.meta: dict[str, bytes] = {}
        self.down = False  # True: every call raises EngineError (an outage)
        self.now = time.monotonic  # the engine's clock

    def _check(self) -> None:
        if self.down:
            raise EngineError("memory engine is down")

    def close(self) -> None:
        pass

    def register(self, node: Node, ttl_ms: int) -> None:
        with self._lock:
            self._check()
            self.nodes[node.node_id] = (node, self.now() + ttl_ms / 1000)

    def deregister(self, node_id: int) -> None:
        with self._lock:
            self._check()
            self.nodes.pop(node_id, None)

    def live_nodes(self) -> list[Node]:
        with self._lock:
            self._check()
            now = self.now()
            return [node for _, (node, until) in sorted(self.nodes.items()) if until > now]

    def owners(self) -> dict[int, Lease]:
        with self._lock:
            self._check()
            now = self.now()
            return {s: lease for s, (lease, until) in self.leases.items() if until > now}

    def acquire(self, shard: int, node_id: int, ttl_ms: int) -> Lease | None:
        with self._lock:
            self._check()
            held = self.leases.get(shard)
            if held is not None and held[1] > self.now() and held[0].node_id != node_id:
                return None
            epoch = self.epochs[shard] = self.epochs.get(shard, 0) + 1
            lease = Lease(shard, node_id, epoch)
            self.leases[shard] = (lease, self.now() + ttl_ms / 1000)
            return lease

    def renew(self, leases: Sequence[Lease], ttl_ms: int) -> list[Lease]:
        with self._lock:
            self._check()
            kept = []
            for lease in leases:
                held = self.leases.get(lease.shard)
                if held is not None and held[0] == lease:
                    self.leases[lease.shard] = (lease, self.now() + ttl_ms / 1000)
                    kept.append(lease)
            return kept

    def release(self, lease: Lease) -> None:
        with self._lock:
            self._check()
            held = self.leases.get(lease.shard)
            if held is not None and held[0] == lease:
                del self.leases[lease.shard]

    def _fence(self, lease: Lease) -> None:
        if self.epochs.get(lease.shard) != lease.epoch:
            raise Fenced(f"shard {lease.shard} is at epoch {self.epochs.get(lease.shard)}")

    def append(self, lease: Lease, position: Position, data: bytes) -> None:
        with self._lock:
            self._check()
            self._fence(lease)
            self.batches.setdefault(lease.shard, {})[position] = data

    def put_snapshot(self, lease: Lease, position: Position, data: bytes) -> None:
        with self._lock:
            self._check()
            self._fence(lease)
            self.snapshots[lease.shard] = (position, data)
            log = self.batches.get(lease.shard, {})
            for at in [at for at in log if at < position]:
                del log[at]

    def load(self, shard: int) -> ShardImage:
        with self._lock:
            self._check()
            position, data = self.snapshots.get(shard, ((0, 0), None))  # type: ignore[arg-type]
            log = self.batches.get(shard, {})
            return ShardImage(data, position, [(at, log[at]) for at in sorted(log)])

    def put_meta(self, key: str, value: bytes | None, expected: bytes | None) -> bool:
        with self._lock:
            self._check()
            if self.meta.get(key) != expected:
                return False
            if value is None:
                self.meta.pop(key, None)
            else:
                self.meta[key] = value
            return True

    def get_meta(self, prefix: str) -> dict[str, bytes]:
        with self._lock:
            self._check()
            return {k: v for k, v in self.meta.items() if k.startswith(prefix)}
