"""Property tests (hypothesis) of the built-in assignors: every subscribed partition assigned
exactly once and only to a subscriber; balance (per topic, and the totals of members with the same
subscription); stickiness (a member joining or leaving moves no more partitions than balance
needs, measured against an exact min-cost flow); determinism, also across hash seeds; range's
co-partitioning. Examples are derandomized so that CI runs the same ones every time."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from assignor_checks import (
    _seeded_group,
    check_assignment,
    class_imbalance,
    determinism_digest,
    join,
    leave,
    minimal_moves,
    moved,
    one_change,
    per_topic_imbalance,
    rebalancing_chain,
    topic_id,
    with_previous,
)
from checkout import KITS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import corral
from corral._core import _assign
from corral.assignors import GroupSpec, MemberSpec, RangeAssignor, SubscriptionType, UniformAssignor

UNIFORM, RANGE = UniformAssignor(), RangeAssignor()
CHECKS = settings(derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def groups(draw, max_members=12, max_topics=6, max_partitions=24, kind=None, disjoint=False):
    """(GroupSpec, partition counts). kind: "homogeneous", "heterogeneous" or either. With
    `disjoint`, different subscriptions share no topic."""
    topics = [topic_id(i) for i in range(draw(st.integers(1, max_topics)))]
    counts = {t: draw(st.integers(0, max_partitions)) for t in topics}
    kind = kind or draw(st.sampled_from(["homogeneous", "heterogeneous"]))
    if kind == "homogeneous":
        subscriptions = [frozenset(topics)]
    elif disjoint:
        labels = draw(st.lists(st.integers(0, 3), min_size=len(topics), max_size=len(topics)))
        subscriptions = [
            frozenset(t for t, label in zip(topics, labels) if label == c) for c in set(labels)
        ]
    else:
        subscriptions = draw(
            st.lists(st.frozensets(st.sampled_from(topics)), min_size=1, max_size=4)
        )
    n = draw(st.integers(1, max_members))
    chosen = draw(st.lists(st.integers(0, len(subscriptions) - 1), min_size=n, max_size=n))
    statics = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    members = {
        f"m{i:04d}": MemberSpec(
            subscriptions[c], instance_id=f"i{(i * 7919) % 10007}" if s else None
        )
        for i, (c, s) in enumerate(zip(chosen, statics))
    }
    group = (
        GroupSpec(members, SubscriptionType.HOMOGENEOUS)
        if kind == "homogeneous"
        else GroupSpec.of(members)
    )
    return group, counts


@st.composite
def messy_previous(draw, group_and_counts):
    """A group whose previous assignments are arbitrary: partitions out of range, given twice,
    of topics the member does not subscribe to or that do not exist."""
    group, counts = group_and_counts
    topics = list(counts) + [topic_id(999)]
    members = {}
    for member, spec in group.members.items():
        previous = draw(
            st.dictionaries(
                st.sampled_from(topics),
                st.lists(st.integers(-2, 30), max_size=6, unique=True).map(tuple),
                max_size=3,
            )
        )
        members[member] = MemberSpec(
            spec.subscribed_topic_ids, previous, spec.rack_id, spec.instance_id
        )
    return GroupSpec(members, group.subscription_type), counts


def assert_balanced(group, counts, assignment):
    check_assignment(group, counts, assignment)
    assert per_topic_imbalance(group, assignment) <= 1
    assert class_imbalance(group, assignment) <= 1


@CHECKS
@given(groups().flatmap(messy_previous))
def test_uniform_is_complete_exclusive_and_balanced_whatever_the_previous_assignment(case):
    group, counts = case
    result = UNIFORM.assign(group, counts)
    assert_balanced(group, counts, result)
    assert rebalancing_chain(group, counts, result) is None  # totals as even as balance allows


@settings(CHECKS, max_examples=30)
@given(groups(max_members=3000, max_topics=8, max_partitions=400))
def test_uniform_on_thousands_of_members(case):
    group, counts = case
    first = UNIFORM.assign(group, counts)
    assert_balanced(group, counts, first)
    again = with_previous(group, first)
    assert moved(first, UNIFORM.assign(again, counts)) == 0  # nothing to change: nothing moves


@CHECKS
@given(
    groups(max_members=40, max_topics=8, max_partitions=60, disjoint=True),
    st.randoms(use_true_random=False),
)
def test_uniform_moves_exactly_what_balance_needs(case, rng):
    """From uniform's own assignment, members join and leave; each step moves exactly the fewest
    partitions any balanced assignment could (an exact min-cost flow over who gets each topic's
    extra partitions)."""
    group, counts = case
    before = UNIFORM.assign(group, counts)
    group = with_previous(group, before)
    for step in range(3):
        group = one_change(group, rng, step)
        after = UNIFORM.assign(group, counts)
        assert_balanced(group, counts, after)
        assert moved(before, after) == minimal_moves(group, counts, before)
        group, before = with_previous(group, after), after


def test_uniform_moves_exactly_what_balance_needs_on_fixed_groups():
    """The same over 300 fixed random groups of up to 40 members, two joins or leaves each; and
    from 300 arbitrary previous assignments (partitions of members that left, unowned, owned
    by a random subscriber or in runs), where the sticky choices interlock more. None needs
    uniform's fallback placement (balanced, but not the fewest moves)."""
    fallbacks = _assign.fallback_count()
    for seed in range(300):
        rng = random.Random(seed)
        group, counts = _seeded_group(rng)
        before = UNIFORM.assign(group, counts)
        group = with_previous(group, before)
        for step in range(2):
            group = one_change(group, rng, step)
            after = UNIFORM.assign(group, counts)
            assert moved(before, after) == minimal_moves(group, counts, before), (seed, step)
            group, before = with_previous(group, after), after
    for seed in range(300):
        rng = random.Random(seed)
        group, counts = _seeded_group(rng)
        before: dict = {member: {} for member in [*group.members, "left1", "left2"]}
        runs = rng.random() < 0.5
        for topic, count in counts.items():
            subscribers = [
                m for m, spec in group.members.items() if topic in spec.subscribed_topic_ids
            ]
            for p in range(count):
                r = rng.random()
                owner = (
                    None
                    if r < 0.1 or not subscribers
                    else rng.choice(["left1", "left2"])
                    if r < 0.2
                    else subscribers[(p * 7 + rng.randint(0, 1)) % len(subscribers)]
                    if runs
                    else rng.choice(subscribers)
                )
                if owner:
                    before[owner].setdefault(topic, []).append(p)
        group = with_previous(group, before)
        after = UNIFORM.assign(group, counts)
        assert_balanced(group, counts, after)
        assert moved(before, after) == minimal_moves(group, counts, before), seed
    assert _assign.fallback_count() == fallbacks


@pytest.mark.parametrize("kind", ["homogeneous", "heterogeneous"])
def test_a_member_joining_or_leaving_thousands_moves_only_its_share(kind):
    """5,000 members, 10 partitions each over 100 topics (5 disjoint subscriptions when
    heterogeneous): leaving moves exactly the leaver's partitions, joining exactly the newcomer's."""
    topics = [topic_id(i) for i in range(100)]
    counts = {t: 500 for t in topics}
    if kind == "homogeneous":
        members = {f"member{i}": MemberSpec(frozenset(topics)) for i in range(5000)}
        group = GroupSpec(members, SubscriptionType.HOMOGENEOUS)
    else:
        subscriptions = [frozenset(topics[b * 20 : (b + 1) * 20]) for b in range(5)]
        group = GroupSpec.of(
            {f"member{i}": MemberSpec(subscriptions[i // 1000]) for i in range(5000)}
        )
    first = UNIFORM.assign(group, counts)
    assert_balanced(group, counts, first)
    group = with_previous(group, first)
    left = leave(group, "member1234")
    after = UNIFORM.assign(left, counts)
    assert_balanced(left, counts, after)
    assert moved(first, after) == first["member1234"].partition_count == 10
    joined = join(group, "newcomer", group.members["member4321"].subscribed_topic_ids)
    after = UNIFORM.assign(joined, counts)
    assert_balanced(joined, counts, after)
    assert moved(first, after) == after["newcomer"].partition_count == 9


@CHECKS
@given(groups(max_members=30).flatmap(messy_previous))
def test_both_are_deterministic(case):
    group, counts = case
    for assignor in (UNIFORM, RANGE):
        assert assignor.assign(group, counts) == assignor.assign(group, counts)


def test_both_give_the_same_assignment_whatever_the_hash_seed():
    """str and bytes hashes are seeded per process, so set and dict iteration orders differ
    between processes: the same group must still get the same assignment (ties are broken by
    member input order and sorted topic ids, never by iteration order of a set)."""
    tests = KITS
    path = os.pathsep.join([str(Path(corral.__file__).resolve().parent.parent), str(tests)])
    digests = set()
    for seed in ("0", "1", "2", "3", "4242"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=path)
        run = subprocess.run(
            [sys.executable, str(tests / "assignor_checks.py"), "determinism-digest"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        digests.add(run.stdout.strip())
    digests.add(determinism_digest())  # this process's seed too
    assert len(digests) == 1, digests


@CHECKS
@given(groups(max_members=50))
def test_range_is_complete_exclusive_and_balanced_per_topic(case):
    group, counts = case
    result = RANGE.assign(group, counts)
    check_assignment(group, counts, result)
    assert per_topic_imbalance(group, result) <= 1


@CHECKS
@given(groups(max_members=20, kind="homogeneous"), st.integers(1, 12))
def test_range_co_partitions_topics_with_equal_partition_counts(case, partitions):
    group, counts = case
    counts = dict.fromkeys(counts, partitions)
    result = RANGE.assign(group, counts)
    for member, assignment in result.items():
        assert len({tuple(p) for p in assignment.values()}) <= 1, (
            member
        )  # same partitions of every topic
