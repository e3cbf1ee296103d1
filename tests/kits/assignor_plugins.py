"""Assignors "users wrote in Python", loaded by `module:Class` in tests/unit/assignors/test_assignors.py."""

from __future__ import annotations


class RoundRobin:
    """A correct custom assignor: every subscribed partition, round robin over the members."""

    name = "round-robin"

    def assign(self, group, partition_counts):
        members = sorted(group.members)
        result = {m: {} for m in members}
        i = 0
        for topic in sorted({t for s in group.members.values() for t in s.subscribed_topic_ids}):
            subscribers = [m for m in members if topic in group.members[m].subscribed_topic_ids]
            for p in range(partition_counts[topic]):
                member = subscribers[i % len(subscribers)]
                result[member].setdefault(topic, []).append(p)
                i += 1
        return result


class Raises:
    name = "raises"

    def assign(self, group, partition_counts):
        raise RuntimeError("this assignor is broken")


class Returns:
    """Returns whatever the test put in `result` (a class attribute: the registry builds it)."""

    name = "returns"
    result: object = None

    def assign(self, group, partition_counts):
        return self.result


class NamedUniform:
    name = "uniform"  # a built-in's name: refused

    def assign(self, group, partition_counts):
        return {}


class NoName:
    def assign(self, group, partition_counts):
        return {}


class NeedsArguments:
    name = "needs-arguments"

    def __init__(self, option):
        self.option = option
