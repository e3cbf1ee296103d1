"""Checks and builders shared by the assignor tests and benchmarks: the invariants of an
assignment (complete, exclusive, only subscribed topics, balance) and how many partitions a
change of membership moved."""

from __future__ import annotations

import random
import sys
from collections import defaultdict
from collections.abc import Mapping

from corral.assignors import GroupSpec, MemberSpec, RangeAssignor, SubscriptionType, UniformAssignor


def topic_id(i: int) -> bytes:
    return i.to_bytes(16, "big")


def owners_of(assignment: Mapping) -> dict[tuple, str]:
    """(topic, partition) -> member; fails on a partition assigned twice."""
    owners: dict[tuple, str] = {}
    for member, topics in assignment.items():
        for topic, partitions in topics.items():
            assert list(partitions) == sorted(set(partitions)), (member, topic, partitions)
            for p in partitions:
                assert (topic, p) not in owners, f"{topic!r}/{p}: {owners[(topic, p)]} and {member}"
                owners[(topic, p)] = member
    return owners


def check_assignment(group: GroupSpec, counts: Mapping, assignment: Mapping) -> None:
    """Every subscribed partition exactly once, only to subscribers, every member present."""
    assert set(assignment) == set(group.members)
    owners = owners_of(assignment)
    subscribed = set()
    for member, spec in group.members.items():
        subscribed |= set(spec.subscribed_topic_ids)
        for topic in assignment[member]:
            assert topic in spec.subscribed_topic_ids, (member, topic)
            assert assignment[member][topic], (member, topic)
    expected = {(t, p) for t in subscribed for p in range(counts[t])}
    assert set(owners) == expected, (len(owners), len(expected))


def per_topic_imbalance(group: GroupSpec, assignment: Mapping) -> int:
    """The largest difference, over topics, between two subscribers' counts of that topic."""
    worst = 0
    subscribers = defaultdict(list)
    for member, spec in group.members.items():
        for topic in spec.subscribed_topic_ids:
            subscribers[topic].append(len(assignment[member].get(topic, ())))
    for counts in subscribers.values():
        worst = max(worst, max(counts) - min(counts))
    return worst


def totals(assignment: Mapping) -> dict[str, int]:
    return {m: sum(len(p) for p in topics.values()) for m, topics in assignment.items()}


def class_imbalance(group: GroupSpec, assignment: Mapping) -> int:
    """The largest difference between the totals of two members with the same subscription."""
    by_class = defaultdict(list)
    total = totals(assignment)
    for member, spec in group.members.items():
        by_class[frozenset(spec.subscribed_topic_ids)].append(total[member])
    return max((max(v) - min(v) for v in by_class.values()), default=0)


def total_imbalance(assignment: Mapping) -> int:
    values = list(totals(assignment).values())
    return max(values) - min(values) if values else 0


def moved(before: Mapping, after: Mapping) -> int:
    """Partitions that had an owner before and have another (or none) after; partitions of a
    member that left count as moved (they must move)."""
    previous = owners_of(before)
    current = owners_of(after)
    return sum(1 for key, member in previous.items() if current.get(key) != member)


def with_previous(group: GroupSpec, assignment: Mapping) -> GroupSpec:
    """The same group with `assignment` as every member's previous target."""
    return GroupSpec(
        {
            m: MemberSpec(s.subscribed_topic_ids, assignment.get(m, {}), s.rack_id, s.instance_id)
            for m, s in group.members.items()
        },
        group.subscription_type,
    )


def join(group: GroupSpec, member: str, topics) -> GroupSpec:
    members = dict(group.members)
    members[member] = MemberSpec(topics)
    return (
        GroupSpec.of(members)
        if group.subscription_type is SubscriptionType.HETEROGENEOUS
        else GroupSpec(members, SubscriptionType.HOMOGENEOUS)
    )


def leave(group: GroupSpec, member: str) -> GroupSpec:
    members = dict(group.members)
    del members[member]
    return GroupSpec(members, group.subscription_type) if members else group


def rebalancing_chain(group: GroupSpec, counts: Mapping, assignment: Mapping) -> tuple | None:
    """Two members (m, w) where m could hand one of its topics' extra partitions to a subscriber
    without one, that one another, ... down to w, whose total is 2 or more below m's; None when
    there is no such chain. Under per-topic balance (each subscriber of a topic gets its quota or
    one more) the members' totals are as even as they can be (the highest as low, the lowest as
    high) exactly when there is none: the optimality condition of a separable convex cost on
    this transportation problem."""
    subscribers: dict = defaultdict(list)
    for member, spec in group.members.items():
        for topic in spec.subscribed_topic_ids:
            subscribers[topic].append(member)
    total = totals(assignment)
    holds_extra = {
        (m, t): len(assignment[m].get(t, ())) > counts[t] // len(ms)
        for t, ms in subscribers.items()
        for m in ms
    }
    for start in sorted(group.members, key=lambda m: -total[m]):
        seen, frontier = {start}, [start]
        while frontier:
            reached = []
            for member in frontier:
                for topic in group.members[member].subscribed_topic_ids:
                    if not holds_extra[member, topic]:
                        continue
                    for other in subscribers[topic]:
                        if other not in seen and not holds_extra[other, topic]:
                            if total[other] <= total[start] - 2:
                                return start, other
                            seen.add(other)
                            reached.append(other)
            frontier = reached
    return None


def minimal_moves(group: GroupSpec, counts: Mapping, before: Mapping) -> int | None:
    """The fewest partitions that any assignment meeting `uniform`'s balance (per topic, and
    totals within each set of members with the same subscription) must move from `before`: an
    exact min-cost flow (networkx) over who gets each topic's extras. None when two different
    subscriptions share a topic (corral splits such a topic's extras by a heuristic)."""
    import networkx as nx

    classes: dict[frozenset, list[str]] = defaultdict(list)
    for member, spec in group.members.items():
        classes[frozenset(spec.subscribed_topic_ids)].append(member)
    seen_topics: set = set()
    for topics in classes:
        if seen_topics & topics:
            return None
        seen_topics |= topics
    owned = len(owners_of(before))
    kept = 0
    for topics, members in classes.items():
        if not topics:
            continue
        held = {(m, t): len(before.get(m, {}).get(t, ())) for m in members for t in topics}
        quota = {t: counts[t] // len(members) for t in topics}
        extras = {t: counts[t] % len(members) for t in topics}
        kept += sum(min(h, quota[t]) for (m, t), h in held.items())
        total = sum(extras.values())
        k, top = divmod(total, len(members))
        if total == 0:
            continue
        g = nx.DiGraph()
        for t in topics:
            g.add_edge("source", ("t", t), capacity=extras[t], weight=0)
            for m in members:
                sticky = held[(m, t)] >= quota[t] + 1
                g.add_edge(("t", t), ("m", m), capacity=1, weight=-1 if sticky else 0)
        for m in members:
            g.add_edge(("m", m), "sink", capacity=k, weight=0)
            g.add_edge(("m", m), "top", capacity=1, weight=0)
        g.add_edge("top", "sink", capacity=top, weight=0)
        flow = nx.max_flow_min_cost(g, "source", "sink")
        assert sum(flow["source"].values()) == total
        kept += -nx.cost_of_flow(g, flow)
    return owned - kept


def determinism_digest(groups: int = 150) -> str:
    """A digest of `uniform`'s and `range`'s results (contents and iteration order) on fixed
    groups: homogeneous, heterogeneous with disjoint and with overlapping subscriptions, static
    members, random str member ids and 16-byte topic ids (both hashed with the process's seed);
    full assignments, then joins and leaves from the previous result given back as it came, as
    plain dicts in another topic order, and with invalid entries. Run in processes with different
    PYTHONHASHSEED values, it must not change."""
    import hashlib
    import random

    digest = hashlib.sha256()
    assignors = (UniformAssignor(), RangeAssignor())

    def record(result: Mapping) -> None:
        digest.update(
            repr([(m, [(t, tuple(p)) for t, p in a.items()]) for m, a in result.items()]).encode()
        )

    for seed in range(groups):
        rng = random.Random(seed)
        topics = [rng.randbytes(16) for _ in range(rng.randint(1, 12))]
        counts = {t: rng.choice([0, 1, 3, 7, rng.randint(0, 90)]) for t in topics}
        shape = seed % 3
        if shape == 0:
            subscriptions = [frozenset(topics)]
        elif shape == 1:
            rng.shuffle(topics)
            n = rng.randint(1, 4)
            subscriptions = [frozenset(topics[c::n]) for c in range(n)]
        else:
            subscriptions = [
                frozenset(rng.sample(topics, rng.randint(1, len(topics)))) for _ in range(3)
            ]

        def member_id() -> str:
            return "".join(rng.choice("abcxyz-019") for _ in range(rng.randint(3, 10)))

        members = {
            member_id(): MemberSpec(
                rng.choice(subscriptions), instance_id=member_id() if rng.random() < 0.3 else None
            )
            for _ in range(rng.randint(1, 60))
        }
        kind = SubscriptionType.HOMOGENEOUS if shape == 0 else SubscriptionType.HETEROGENEOUS
        for assignor in assignors:
            group = GroupSpec(members, kind)
            result = assignor.assign(group, counts)
            record(result)
            for step in range(4):
                group = with_previous(group, result)
                specs = dict(group.members)
                if step == 1:  # plain dicts, topics in reverse order
                    specs = {
                        m: MemberSpec(
                            s.subscribed_topic_ids,
                            {t: list(p) for t, p in reversed(list(s.assignment.items()))},
                            instance_id=s.instance_id,
                        )
                        for m, s in specs.items()
                    }
                elif step == 3:  # invalid entries: out of range, unknown topic, given twice
                    for m, s in list(specs.items())[:3]:
                        messy = {t: (*p, 500) for t, p in s.assignment.items()}
                        messy[rng.randbytes(16)] = (0,)
                        messy.update(specs[next(iter(specs))].assignment)
                        specs[m] = MemberSpec(
                            s.subscribed_topic_ids, messy, instance_id=s.instance_id
                        )
                if len(specs) > 1 and rng.random() < 0.5:
                    del specs[rng.choice(list(specs))]
                else:
                    specs[member_id()] = MemberSpec(rng.choice(subscriptions))
                group = GroupSpec(specs, kind)
                result = assignor.assign(group, counts)
                record(result)
    return digest.hexdigest()


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["determinism-digest"]:
        print(determinism_digest())


def one_change(group: GroupSpec, rng: random.Random, step: int) -> GroupSpec:
    if len(group.members) > 1 and rng.random() < 0.5:
        return leave(group, rng.choice(list(group.members)))
    return join(group, f"new{step}", rng.choice(list(group.members.values())).subscribed_topic_ids)


def _seeded_group(rng: random.Random):
    topics = [topic_id(i) for i in range(rng.randint(1, 8))]
    counts = {t: rng.randint(0, 60) for t in topics}
    members = rng.randint(1, 40)
    if rng.random() < 0.5:
        subscription = frozenset(topics)
        return GroupSpec(
            {f"m{i}": MemberSpec(subscription) for i in range(members)},
            SubscriptionType.HOMOGENEOUS,
        ), counts
    rng.shuffle(topics)
    classes = rng.randint(1, 4)
    subscriptions = [frozenset(topics[c::classes]) for c in range(classes)]
    return GroupSpec.of(
        {f"m{i}": MemberSpec(rng.choice(subscriptions)) for i in range(members)}
    ), counts
