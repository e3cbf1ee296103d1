"""A target that costs what changed (issue 29 item 2): in a big group whose members all subscribe
to the same topics by name and use the `uniform` assignor (the common case: one application's
consumers), a member joining or leaving moves only the partitions the balance needs, found from
an index of the target kept up to date by replay, instead of running the assignor over every
member and comparing every member's target.

The result is what the uniform assignor promises for a homogeneous group: every partition of the
subscribed topics in exactly one target, target sizes differing by at most one, and each member
keeping as much of its target as that balance allows (fewer partition moves than a full
computation from the same previous target: tests/unit/groups/consumer/test_incremental.py checks
both). It is not bit-equal to the assignor's choice of which members keep the extra partitions,
so small groups (whose full computation is cheap) keep the assignor's exact answer.

`TargetIndex` is the index: each member's target size, the members by size, the members without a
target yet, and per topic which partitions are in no target (released by a member that left or
shed them). Whether it describes the whole of the subscribed topics is checked in O(topics) before
each use (targeted + free partitions == partition count); when it does not (after a restart,
partitions added, subscriptions changing), the assignor runs over everyone as before.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Mapping
from itertools import chain, islice
from typing import TYPE_CHECKING

from corral.groups.storage import consumer_records as cr
from corral.groups.storage.records import Record

if TYPE_CHECKING:
    from corral.groups.consumer.member_state import ConsumerMember
    from corral.groups.consumer.state import ConsumerGroup
    from corral.groups.consumer.targets.inputs import TopicImage

Target = Mapping[bytes, frozenset[int]]
# Members plus subscribed partitions above which a join or leave moves partitions incrementally
# (below it the assignor's full computation costs well under a millisecond).
INCREMENTAL_ABOVE = 1_000


class TargetIndex:
    """What a consumer group's target looks like in aggregate, changed with every target record."""

    __slots__ = ("sizes", "by_size", "untargeted", "_holders", "targeted", "free")

    def __init__(self) -> None:
        self.sizes: dict[str, int] = {}  # member id -> partitions in its target
        self.by_size: dict[int, dict[str, None]] = {}  # size -> members (insertion-ordered)
        self.untargeted: dict[str, None] = {}  # members with no target entry yet
        # topic -> per partition, how many targets hold it (two while a move is half-replayed).
        self._holders: dict[bytes, array[int]] = {}
        self.targeted: Counter[bytes] = Counter()  # topic -> partitions some target holds
        self.free: dict[bytes, set[int]] = {}  # topic -> partitions released and not held again

    # ----------------------------------------------------------------------------- replay ---

    def member_added(self, member_id: str) -> None:
        if member_id not in self.sizes:
            self.untargeted[member_id] = None

    def member_removed(self, member_id: str) -> None:
        self.untargeted.pop(member_id, None)

    def target_set(
        self, member_id: str, old: Target | None, new: Target | None, is_member: bool
    ) -> None:
        """A member's target replaced (`new` None: its target tombstoned)."""
        if old is not None:
            self._resize(member_id, None)
            for topic, ps in old.items():
                kept = new.get(topic) if new is not None else None
                for p in ps if kept is None else ps - kept:
                    self._release(topic, p)
        if new is not None:
            for topic, ps in new.items():
                before = old.get(topic) if old is not None else None
                for p in ps if before is None else ps - before:
                    self._hold(topic, p)
            self._resize(member_id, sum(len(ps) for ps in new.values()))
            self.untargeted.pop(member_id, None)
        elif is_member:
            self.untargeted[member_id] = None

    def _resize(self, member_id: str, size: int | None) -> None:
        old = self.sizes.pop(member_id, None)
        if old is not None:
            bucket = self.by_size[old]
            del bucket[member_id]
            if not bucket:
                del self.by_size[old]
        if size is not None:
            self.sizes[member_id] = size
            self.by_size.setdefault(size, {})[member_id] = None

    def _hold(self, topic: bytes, p: int) -> None:
        holders = self._holders.get(topic)
        if holders is None:
            holders = self._holders[topic] = array("I")
        if p >= len(holders):
            holders.extend(array("I", bytes(4 * (p + 1 - len(holders)))))
        if holders[p] == 0:
            self.targeted[topic] += 1
            free = self.free.get(topic)
            if free is not None:
                free.discard(p)
        holders[p] += 1

    def _release(self, topic: bytes, p: int) -> None:
        holders = self._holders.get(topic)
        if holders is None or p >= len(holders) or holders[p] == 0:
            return
        holders[p] -= 1
        if holders[p] == 0:
            self.targeted[topic] -= 1
            self.free.setdefault(topic, set()).add(p)

    # -------------------------------------------------------------------------- checking ---

    def covers(self, universe: Mapping[bytes, int], members: int) -> bool:
        """Whether the index describes a whole target of `universe` (topic id -> partitions)
        held by the group's `members`: every partition either in exactly one target or free,
        nothing outside it targeted, every target holder a member. O(topics)."""
        if len(self.sizes) + len(self.untargeted) != members:
            return False
        total = 0
        for topic, count in universe.items():
            holders = self._holders.get(topic)
            if holders is not None and len(holders) > count:
                return False  # a partition beyond the topic's count
            targeted = self.targeted.get(topic, 0)
            if targeted + len(self.free.get(topic, ())) != count:
                return False
            total += targeted
        # Nothing outside the universe is targeted, and no partition is in two targets.
        return sum(self.targeted.values()) == total and self._sum_of_sizes() == total

    def _sum_of_sizes(self) -> int:
        return sum(size * len(members) for size, members in self.by_size.items())


def homogeneous_universe(
    group: ConsumerGroup,
    topics: TopicImage,
    member: ConsumerMember | None = None,
    updated: ConsumerMember | None = None,
) -> dict[bytes, int] | None:
    """The subscribed partitions (topic id -> count) if every member subscribes to the same
    topic names and none to a regex, once `updated` (if given) takes `member`'s place; else
    None. From the group's counts: O(topics)."""
    in_group = member is not None and member.member_id in group.members
    own_regex = member.regex if member is not None and in_group else ""
    if (updated is not None and updated.regex) or any(
        n for r, n in group.regex_counts.items() if not (r == own_regex and n == 1)
    ):
        return None
    counts = group.topic_name_counts
    if updated is None:
        after, own, names = len(group.members), set(counts), set(counts)
    else:
        after = len(group.members) + (0 if in_group else 1)
        own = set(member.topic_names) if member is not None and in_group else set()
        names = set(updated.topic_names)
    if not names:
        return None
    for name in names.union(counts):
        if counts.get(name, 0) - (name in own) + (name in names) != after:
            return None
    universe = {}
    for name in sorted(names):
        topic = topics.topic(name)
        if topic is not None:
            universe[topic.id.bytes] = topic.partitions
    return universe


def incremental_records(
    group: ConsumerGroup,
    epoch: int,
    topics: TopicImage,
    now: int,
    member: ConsumerMember | None = None,
    updated: ConsumerMember | None = None,
) -> list[Record] | None:
    """The records of the group's target at `epoch`, moving only what the balance needs, when
    that applies (a big homogeneous group whose index covers its topics; `updated`: a heartbeat's
    member, its records not applied yet); else None (the assignor runs over every member)."""
    if (
        updated is not None
        and updated.instance_id is not None
        and group.static_members.get(updated.instance_id, updated.member_id) != updated.member_id
    ):
        return None  # a static member replacing its old self: records not applied yet
    universe = homogeneous_universe(group, topics, member, updated)
    if universe is None:
        return None
    joining = None if updated is None or updated.member_id in group.members else updated.member_id
    members = len(group.members) + (joining is not None)
    if members + sum(universe.values()) <= INCREMENTAL_ABOVE or not group.target_index.covers(
        universe, len(group.members)
    ):
        return None
    gid = group.group_id
    changes = rebalance(group.target_index, group.target, universe, joining)
    out: list[Record] = [
        cr.TargetMember(gid, member_id, {t: tuple(sorted(ps)) for t, ps in target.items()})
        for member_id, target in changes.items()
    ]
    out.append(cr.TargetEpoch(gid, epoch, now))
    return out


def rebalance(
    index: TargetIndex,
    targets: Mapping[str, Target],
    universe: Mapping[bytes, int],
    joining: str | None,
) -> dict[str, dict[bytes, frozenset[int]]]:
    """The targets that change (member id -> its whole new target) to balance the group: the
    index's members plus `joining` (a new member with no target), `universe` covered by the
    index (`TargetIndex.covers`). Costs what moves: the members that give or take partitions."""
    zero = list(index.untargeted)
    if joining is not None and joining not in index.sizes and joining not in index.untargeted:
        zero.append(joining)
    n = len(index.sizes) + len(zero)
    total = sum(universe.values())
    quota, extra = divmod(total, n)
    pool: list[tuple[bytes, int]] = [
        (t, p) for t in universe for p in sorted(index.free.get(t, ()))
    ]
    changed: dict[str, dict[bytes, set[int]]] = {}
    sizes: dict[str, int] = {}  # the changed members' sizes as they move

    def change(member_id: str) -> dict[bytes, set[int]]:
        target = changed.get(member_id)
        if target is None:
            target = changed[member_id] = {
                t: set(ps) for t, ps in targets.get(member_id, {}).items()
            }
            sizes[member_id] = index.sizes.get(member_id, 0)
        return target

    def shed(member_id: str, count: int) -> None:
        target = change(member_id)
        for topic in sorted(target, reverse=True):
            ps = target[topic]
            while ps and count:
                pool.append((topic, ps.pop()))
                count -= 1
                sizes[member_id] -= 1
            if not ps:
                del target[topic]
            if not count:
                return

    def take(member_id: str, count: int) -> None:
        target = change(member_id)
        for _ in range(count):
            topic, p = pool.pop()
            target.setdefault(topic, set()).add(p)
        sizes[member_id] += count

    # 1. Nobody keeps more than quota + 1.
    at_top: list[str] = []
    for size in sorted(s for s in index.by_size if s > quota + 1):
        for member_id in list(index.by_size[size]):
            shed(member_id, size - quota - 1)
            at_top.append(member_id)
    # 2. At most `extra` members keep quota + 1 (those already changing shed first).
    surplus = len(at_top) + len(index.by_size.get(quota + 1, ())) - extra
    if surplus > 0:
        for member_id in islice(chain(at_top, index.by_size.get(quota + 1, ())), surplus):
            shed(member_id, 1)
    # 3. Everyone below quota takes up to it.
    if quota:
        for size in sorted(s for s in index.by_size if s < quota):
            for member_id in list(index.by_size[size]):
                take(member_id, quota - size)
        for member_id in zero:
            take(member_id, quota)
    # 4. What is left (one for each extra member still missing) goes one each to members at
    #    quota: those already changing first.
    if pool:
        at_quota = chain(
            [m for m, size in sizes.items() if size == quota],
            index.by_size.get(quota, ()),
            zero if not quota else (),
        )
        for member_id in at_quota:
            if not pool:
                break
            take(member_id, 1)
    assert not pool, "a balanced target leaves no partition unassigned"
    return {
        member_id: {t: frozenset(ps) for t, ps in target.items() if ps}
        for member_id, target in changed.items()
        if target != targets.get(member_id, {}) or member_id not in targets
    }
