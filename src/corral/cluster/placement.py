"""Which live node should own each coordinator shard: rendezvous (highest random weight)
hashing, so that a node joining or leaving moves only the shards it gains or held, about
1/N of them, and every node computes the same answer from the same list of nodes."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def weight(shard: int, node_id: int) -> int:
    digest = hashlib.blake2b(f"{shard}/{node_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def preferred_owner(shard: int, node_ids: Iterable[int]) -> int | None:
    """The node that should own `shard` among `node_ids` (None: no node)."""
    return max(node_ids, key=lambda node: (weight(shard, node), node), default=None)


def preferred_shards(shards: int, node_id: int, node_ids: Iterable[int]) -> set[int]:
    """The shards of `shards` that `node_id` should own when `node_ids` are live."""
    nodes = sorted(set(node_ids) | {node_id})
    return {shard for shard in range(shards) if preferred_owner(shard, nodes) == node_id}
