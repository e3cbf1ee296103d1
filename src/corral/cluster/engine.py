"""The one small interface between corral's cluster mode and the engine it runs on.

corral writes no consensus of its own (docs/cluster.md). An engine (etcd or PostgreSQL) gives it
four things, each through the engine's own conditional writes or transactions:

- **nodes**: a node registers itself (its id and advertised listener) and stays live while it
  renews within `ttl_ms` by the engine's clock;
- **shard leases**: a shard (a `__consumer_offsets` partition) is owned by at most one node.
  Taking a free or expired shard bumps its epoch; the lease carries it;
- **fenced writes**: every write of a shard's durable state names the lease it was made under
  and the engine applies it only while that epoch is still the shard's. A paused owner that wakes
  up after another node took its shard gets `Fenced`, whatever the clocks say;
- **a shard's durable state**: its latest snapshot and the log batches after it, keyed by
  (epoch, local offset): a new owner appends under a higher epoch, so keys never collide and
  their order is the order of the writes;
- **cluster metadata**: small named values (the topics) changed by compare-and-set.

The methods block (a network round trip): corral calls them from worker threads. Engines are
made from the `--cluster` URL by `corral.cluster.engines.connect`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol


class EngineError(Exception):
    """The engine could not be reached or refused the request (not a fencing): retry later."""


class Fenced(Exception):
    """The write was refused: the lease's epoch is no longer the shard's (another node took it)."""


@dataclass(frozen=True)
class Node:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class Lease:
    shard: int
    node_id: int
    epoch: int


# A position in a shard's durable log: (owner epoch, local log offset of that owner).
Position = tuple[int, int]


@dataclass
class ShardImage:
    """What a shard's new owner loads: the snapshot (None: none yet) and the batches after it."""

    snapshot: bytes | None = None
    # Where replay continues after the snapshot (batches at or after it are not in it).
    snapshot_position: Position = (0, 0)
    # (position, bytes: one or more RecordBatches) in order, every one at or after the snapshot.
    batches: list[tuple[Position, bytes]] = field(default_factory=list)


class Engine(Protocol):
    """What cluster mode needs of its engine. Every method may raise EngineError."""

    def close(self) -> None: ...

    # Nodes

    def register(self, node: Node, ttl_ms: int) -> None:
        """Registers `node` (or renews it) as live for `ttl_ms` from now."""

    def deregister(self, node_id: int) -> None:
        """The node leaves (a clean shutdown): it is no longer live."""

    def live_nodes(self) -> list[Node]:
        """The nodes registered and not expired, by node id."""

    # Shard leases

    def owners(self) -> dict[int, Lease]:
        """The shards currently leased and not expired, with their leases."""

    def acquire(self, shard: int, node_id: int, ttl_ms: int) -> Lease | None:
        """Takes `shard` for `node_id` if nobody holds an unexpired lease on it (a lease of the
        same node is taken over too): bumps the shard's epoch and returns the new lease. None:
        another node holds it."""

    def renew(self, leases: Sequence[Lease], ttl_ms: int) -> list[Lease]:
        """Extends `leases` by `ttl_ms`; returns those still held (a lease whose epoch moved on
        is lost and left out)."""

    def release(self, lease: Lease) -> None:
        """Gives the shard up (if still held under this lease) so another node may take it at
        once."""

    # A shard's durable state; every write is fenced by its lease's epoch.

    def append(self, lease: Lease, position: Position, data: bytes) -> None:
        """Appends `data` (RecordBatches) at `position` of the shard's log. Raises Fenced when
        the lease's epoch is no longer the shard's."""

    def put_snapshot(self, lease: Lease, position: Position, data: bytes) -> None:
        """Stores the shard's snapshot, from which replay continues at `position`, and drops the
        batches before it. Raises Fenced like `append`."""

    def load(self, shard: int) -> ShardImage:
        """The shard's snapshot and the batches after it."""

    # Cluster metadata: small named values every node reads (topic definitions), changed only
    # by compare-and-set.

    def put_meta(self, key: str, value: bytes | None, expected: bytes | None) -> bool:
        """Sets `key` to `value` (None: deletes it) if its current value is `expected` (None:
        absent). Returns whether it did."""

    def get_meta(self, prefix: str) -> dict[str, bytes]:
        """Every key starting with `prefix`, with its value."""
