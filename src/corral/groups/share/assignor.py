"""Kafka's `simple` share-group assignor (GC/assignor/SimpleAssignor.java; reference/share-groups.md
§2), a pure function: every member may get every partition of its subscription, and a partition
may go to several members when they outnumber the partitions.

Per topic, over that topic's subscribers (in the group's member order): with P partitions and M
members, each partition gets S = ceil(M / P) members, and member i wants
ceil(x(i+1)) - ceil(xi) of the S*P slots (x = S*P / M). What members hold and may keep, they keep
(only while they want it and the partition is not over-shared); the rest is filled round robin,
a member never getting a partition twice. Balance beats stickiness. O(M + S*P) a topic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# topic id -> partitions, ascending.
Assignment = dict[bytes, tuple[int, ...]]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def assign(
    members: Sequence[str],
    subscriptions: Mapping[str, frozenset[bytes]],
    partitions: Mapping[bytes, int],
    current: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """The target of every member: `subscriptions` its topic ids, `partitions` the assignable
    partitions of each topic (0..n-1), `current` what it holds now."""
    targets: dict[str, dict[bytes, list[int]]] = {m: {} for m in members}
    subscribers: dict[bytes, list[str]] = {}
    for member in members:
        for topic in subscriptions.get(member, ()):
            if partitions.get(topic, 0) > 0:
                subscribers.setdefault(topic, []).append(member)
    for topic in sorted(subscribers):
        _assign_topic(topic, subscribers[topic], partitions[topic], current, targets)
    return {
        m: {t: tuple(sorted(ps)) for t, ps in by_topic.items() if ps}
        for m, by_topic in targets.items()
    }


def _assign_topic(
    topic: bytes,
    members: list[str],
    count: int,
    current: Mapping[str, Assignment],
    targets: dict[str, dict[bytes, list[int]]],
) -> None:
    m = len(members)
    sharing = _ceil_div(m, count)
    slots = sharing * count
    wants = [_ceil_div(slots * (i + 1), m) - _ceil_div(slots * i, m) for i in range(m)]
    holders = [0] * count
    held: list[list[int]] = []
    # Keep what is held, while the member wants it and the partition has room.
    for i, member in enumerate(members):
        kept: list[int] = []
        for p in current.get(member, {}).get(topic, ()):
            if p < count and len(kept) < wants[i] and holders[p] < sharing:
                kept.append(p)
                holders[p] += 1
        held.append(kept)
    # Fill round robin: the next partition with room the member does not have yet.
    cursor = 0
    for i in range(len(members)):
        mine = set(held[i])
        tried = 0
        while len(held[i]) < wants[i] and tried < count:
            p = cursor % count
            cursor += 1
            tried += 1
            if holders[p] < sharing and p not in mine:
                held[i].append(p)
                mine.add(p)
                holders[p] += 1
                tried = 0
        while len(held[i]) < wants[i] and _swap_in(i, held, holders, sharing):
            pass
    for i, member in enumerate(members):
        if held[i]:
            targets[member][topic] = held[i]


def _swap_in(i: int, held: list[list[int]], holders: list[int], sharing: int) -> bool:
    """Member i wants another partition, but the only ones with room are its own: an earlier
    member j gives it a partition q and takes one p with room instead. Whether one was found."""
    mine = set(held[i])
    for p in (p for p in mine if holders[p] < sharing):
        for j in range(i):
            if p in held[j]:
                continue
            for q in held[j]:
                if q not in mine:
                    held[j][held[j].index(q)] = p
                    held[i].append(q)
                    holders[p] += 1
                    return True
    return False
