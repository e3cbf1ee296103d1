"""Which node owns which coordinator shard (cluster/placement.py): every node computes the same
answer, each shard has exactly one preferred owner, load is spread, and a node joining or leaving
moves only the shards it gains or held."""

from __future__ import annotations

import pytest

from corral.cluster.placement import preferred_owner, preferred_shards

SHARDS = 50  # offsets.topic.num.partitions' default


@pytest.mark.parametrize("nodes", [[1], [1, 2], [1, 2, 3], [3, 7, 11, 40, 41]])
def test_every_shard_has_exactly_one_preferred_owner_whoever_computes_it(nodes: list[int]) -> None:
    owned = {node: preferred_shards(SHARDS, node, nodes) for node in nodes}
    everything = [shard for shards in owned.values() for shard in shards]
    assert sorted(everything) == list(range(SHARDS))
    for node, shards in owned.items():
        assert all(preferred_owner(shard, reversed(nodes)) == node for shard in shards)


def test_shards_are_spread_over_the_nodes() -> None:
    nodes = [1, 2, 3]
    counts = [len(preferred_shards(SHARDS, node, nodes)) for node in nodes]
    assert min(counts) >= SHARDS // 3 // 2, counts  # rendezvous hashing: roughly even


@pytest.mark.parametrize(("before", "after"), [([1, 2, 3], [1, 2]), ([1, 2], [1, 2, 3])])
def test_a_node_coming_or_going_moves_only_its_own_shards(
    before: list[int], after: list[int]
) -> None:
    changed = set(before) ^ set(after)
    for shard in range(SHARDS):
        old, new = preferred_owner(shard, before), preferred_owner(shard, after)
        if old != new:
            assert old in changed or new in changed, (shard, old, new)


def test_no_node_no_owner_and_a_node_counts_itself() -> None:
    assert preferred_owner(0, []) is None
    assert preferred_shards(4, 9, []) == {0, 1, 2, 3}
