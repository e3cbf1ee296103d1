"""Kafka's `simple` share-group assignor (groups/share/assignor.py): the examples of Kafka's
SimpleAssignor, and properties over random groups: every assignable partition is owned, each by
ceil(members / partitions) members at most, no member holds a partition twice, members' counts
are what the slots give them, and an assignment that is already balanced stays as it is."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.groups.share.assignor import assign

T1, T2 = b"\x01" * 16, b"\x02" * 16


def counts(targets, topic=T1):
    return [len(targets[m].get(topic, ())) for m in sorted(targets)]


@pytest.mark.parametrize(
    "members, partitions, expected",
    [
        # Kafka's examples: (M members, P partitions) -> each member's count, in member order.
        (3, 2, [2, 1, 1]),
        (5, 2, [2, 1, 1, 1, 1]),
        (2, 5, [3, 2]),
        (4, 4, [1, 1, 1, 1]),
        (1, 3, [3]),
        (7, 3, [2, 1, 1, 2, 1, 1, 1]),
    ],
)
def test_kafkas_counts(members, partitions, expected):
    names = [f"m{i}" for i in range(members)]
    targets = assign(names, {m: frozenset({T1}) for m in names}, {T1: partitions}, {})
    assert [len(targets[m].get(T1, ())) for m in names] == expected
    holders = [sum(p in targets[m].get(T1, ()) for m in names) for p in range(partitions)]
    sharing = -(-members // partitions)
    assert all(1 <= h <= sharing for h in holders)


def test_unsubscribed_topics_and_uninitialized_partitions_are_not_assigned():
    targets = assign(
        ["a", "b"],
        {"a": frozenset({T1}), "b": frozenset({T1, T2})},
        {T1: 2, T2: 0},  # T2 has no initialized partition yet
        {"a": {T2: (0,)}},
    )
    assert targets == {"a": {T1: (0,)}, "b": {T1: (1,)}}


def test_members_keep_what_they_may_and_balance_wins():
    current = {"a": {T1: (0, 1, 2, 3)}, "b": {}}
    targets = assign(["a", "b"], {m: frozenset({T1}) for m in "ab"}, {T1: 4}, current)
    assert targets["a"][T1] == (0, 1)  # a keeps two of its four
    assert targets["b"][T1] == (2, 3)


@settings(max_examples=100, deadline=None)
@given(
    members=st.integers(1, 40),
    partitions=st.integers(1, 12),
    second=st.integers(0, 5),
    shuffle=st.randoms(use_true_random=False),
)
def test_properties(members, partitions, second, shuffle):
    names = [f"m{i}" for i in range(members)]
    subs = {m: frozenset({T1} if i % 3 else {T1, T2}) for i, m in enumerate(names)}
    sizes = {T1: partitions, T2: second}
    # A random current assignment, partly stale (partitions the topic no longer has).
    current = {
        m: {T1: tuple(sorted(shuffle.sample(range(partitions + 2), shuffle.randint(0, 3))))}
        for m in names
    }
    targets = assign(names, subs, sizes, current)
    for topic, size in sizes.items():
        subscribers = [m for m in names if topic in subs[m]]
        if not subscribers or not size:
            assert all(topic not in targets[m] for m in names)
            continue
        sharing = -(-len(subscribers) // size)
        holders = [sum(p in targets[m].get(topic, ()) for m in subscribers) for p in range(size)]
        assert all(1 <= h <= sharing for h in holders), holders
        owned = [targets[m].get(topic, ()) for m in subscribers]
        assert all(len(set(o)) == len(o) and all(0 <= p < size for p in o) for o in owned)
        assert max(map(len, owned)) - min(map(len, owned)) <= max(1, sharing)
        assert sum(map(len, owned)) == sharing * size
    # Stable: assigning again from the result changes nothing.
    assert assign(names, subs, sizes, targets) == targets
