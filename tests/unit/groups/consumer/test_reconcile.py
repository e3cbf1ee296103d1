"""Member reconciliation (groups/consumer/reconcile.py): every transition of Kafka's
CurrentAssignmentBuilder as a table, and a property test driving many members through random
targets and heartbeats: no partition ever has two owners, and once the clients acknowledge
everything every member reaches its target."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.groups.consumer.reconcile import FencedMember, MemberState, Reconciled, reconcile

T1, T2 = b"\x01" * 16, b"\x02" * 16
S, UR, UL, UK = (
    MemberState.STABLE,
    MemberState.UNREVOKED_PARTITIONS,
    MemberState.UNRELEASED_PARTITIONS,
    MemberState.UNKNOWN,
)


def P(**topics):
    """P(t1=[0, 1]) -> {T1: frozenset({0, 1})}."""
    ids = {"t1": T1, "t2": T2}
    return {ids[name]: frozenset(ps) for name, ps in topics.items() if ps}


def free(topic, partition):
    return -1


def owned_by_other(*pairs):
    owned = set(pairs)
    return lambda topic, p: 7 if (topic, p) in owned else -1


BOTH = frozenset({T1, T2})

# (name, member, target epoch, target, subscribed, subscription changed, owned, owners, expected)
CASES = [
    (
        "stable at the target: unchanged",
        Reconciled(5, 4, S, P(t1=[0, 1]), {}),
        5,
        P(t1=[0, 1]),
        BOTH,
        False,
        P(t1=[0, 1]),
        free,
        "same",
    ),
    (
        "stable, new epoch, only additions: moves at once",
        Reconciled(5, 4, S, P(t1=[0]), {}),
        6,
        P(t1=[0, 1]),
        BOTH,
        False,
        P(t1=[0]),
        free,
        Reconciled(6, 5, S, P(t1=[0, 1]), {}),
    ),
    (
        "stable, new epoch, a revocation still owned: UNREVOKED at the same epoch",
        Reconciled(5, 4, S, P(t1=[0, 1]), {}),
        6,
        P(t1=[0]),
        BOTH,
        False,
        P(t1=[0, 1]),
        free,
        Reconciled(5, 5, UR, P(t1=[0]), P(t1=[1])),
    ),
    (
        "stable, new epoch, revocation already done by the client: straight to the target",
        Reconciled(5, 4, S, P(t1=[0, 1]), {}),
        6,
        P(t1=[0]),
        BOTH,
        False,
        P(t1=[0]),
        free,
        Reconciled(6, 5, S, P(t1=[0]), {}),
    ),
    (
        "owned unknown (null) counts as still owning the revoked partitions",
        Reconciled(5, 4, S, P(t1=[0, 1]), {}),
        6,
        P(t1=[0]),
        BOTH,
        False,
        None,
        free,
        Reconciled(5, 5, UR, P(t1=[0]), P(t1=[1])),
    ),
    (
        "unrevoked, still owns a revoked partition: unchanged",
        Reconciled(5, 5, UR, P(t1=[0]), P(t1=[1])),
        6,
        P(t1=[0]),
        BOTH,
        False,
        P(t1=[0, 1]),
        free,
        "same",
    ),
    (
        "unrevoked, revocation acknowledged: to the target epoch",
        Reconciled(5, 5, UR, P(t1=[0]), P(t1=[1])),
        6,
        P(t1=[0]),
        BOTH,
        False,
        P(t1=[0]),
        free,
        Reconciled(6, 5, S, P(t1=[0]), {}),
    ),
    (
        "unrevoked, acknowledged, a new partition owned by another: UNRELEASED at the target",
        Reconciled(5, 5, UR, P(t1=[0]), P(t1=[1])),
        6,
        P(t1=[0, 2]),
        BOTH,
        False,
        P(t1=[0]),
        owned_by_other((T1, 2)),
        Reconciled(6, 5, UL, P(t1=[0]), {}),
    ),
    (
        "its own pending revocation is not unreleased (KAFKA-19449)",
        Reconciled(5, 5, UR, P(t1=[0]), P(t1=[1])),
        6,
        P(t1=[0, 1]),
        BOTH,
        False,
        P(t1=[0]),
        owned_by_other((T1, 1)),
        Reconciled(6, 5, S, P(t1=[0, 1]), {}),
    ),
    (
        "unreleased: gets the partition once it is free",
        Reconciled(6, 5, UL, P(t1=[0]), {}),
        6,
        P(t1=[0, 2]),
        BOTH,
        False,
        P(t1=[0]),
        free,
        Reconciled(6, 6, S, P(t1=[0, 2]), {}),
    ),
    (
        "unreleased: still held elsewhere, epoch unchanged, previous epoch moves",
        Reconciled(6, 5, UL, P(t1=[0]), {}),
        6,
        P(t1=[0, 2]),
        BOTH,
        False,
        P(t1=[0]),
        owned_by_other((T1, 2)),
        Reconciled(6, 6, UL, P(t1=[0]), {}),
    ),
    (
        "partly free, partly held: the free ones now, UNRELEASED for the rest",
        Reconciled(5, 4, S, P(), {}),
        6,
        P(t1=[0, 1]),
        BOTH,
        False,
        P(),
        owned_by_other((T1, 1)),
        Reconciled(6, 5, UL, P(t1=[0]), {}),
    ),
    (
        "an unsubscribed topic's target counts as empty",
        Reconciled(5, 4, S, P(t1=[0], t2=[0]), {}),
        6,
        P(t1=[0], t2=[0]),
        frozenset({T1}),
        False,
        P(t1=[0], t2=[0]),
        free,
        Reconciled(5, 5, UR, P(t1=[0]), P(t2=[0])),
    ),
    (
        "stable at the target, subscription dropped a topic the client owns: UNREVOKED",
        Reconciled(6, 5, S, P(t1=[0], t2=[1]), {}),
        6,
        P(t1=[0], t2=[1]),
        frozenset({T1}),
        True,
        P(t1=[0], t2=[1]),
        free,
        Reconciled(6, 6, UR, P(t1=[0]), P(t2=[1])),
    ),
    (
        "stable at the target, dropped topic already released by the client: shrinks only",
        Reconciled(6, 5, S, P(t1=[0], t2=[1]), {}),
        6,
        P(t1=[0], t2=[1]),
        frozenset({T1}),
        True,
        P(t1=[0]),
        free,
        Reconciled(6, 6, S, P(t1=[0]), {}),
    ),
    (
        "unrevoked with a subscription change: more to revoke, same epoch",
        Reconciled(5, 5, UR, P(t1=[0], t2=[3]), P(t1=[1])),
        6,
        P(t1=[0], t2=[3]),
        frozenset({T1}),
        True,
        P(t1=[0, 1], t2=[3]),
        free,
        Reconciled(5, 5, UR, P(t1=[0]), P(t1=[1], t2=[3])),
    ),
    (
        "unknown state with an empty owned set: recomputed at the target epoch",
        Reconciled(5, 4, UK, P(t1=[0]), {}),
        7,
        P(t1=[0, 1]),
        BOTH,
        False,
        P(),
        free,
        Reconciled(7, 5, S, P(t1=[0, 1]), {}),
    ),
    (
        "subscription change to nothing: everything revoked",
        Reconciled(6, 5, S, P(t1=[0, 1]), {}),
        6,
        P(t1=[0, 1]),
        frozenset(),
        True,
        P(t1=[0, 1]),
        free,
        Reconciled(6, 6, UR, {}, P(t1=[0, 1])),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_transition(case):
    _, member, epoch, target, subscribed, changed, owned, owners, expected = case
    got = reconcile(member, epoch, target, subscribed, changed, owned, owners)
    if expected == "same":
        assert got is member
    else:
        # The assignment epochs are EPOCH_CASES' (below); here, only that each is there.
        assert replace(got, epochs=expected.epochs) == expected
        held = {t: set(ps) for t, ps in got.assigned.items()}
        for t, ps in got.pending_revocation.items():
            held.setdefault(t, set()).update(ps)
        assert {t: set(es) for t, es in got.epochs.items() if es} == held


def E(**topics):
    """E(t1={0: 5, 1: 6}) -> {T1: {0: 5, 1: 6}}: assignment epochs by partition."""
    ids = {"t1": T1, "t2": T2}
    return {ids[name]: dict(es) for name, es in topics.items() if es}


# KIP-1251: (name, member, target epoch, target, subscribed, subscription changed, owned, owners,
# expected member epoch, expected assignment epochs). Kept partitions keep the epoch they were
# assigned at; a partition the member gets is assigned at the target's epoch; partitions being
# revoked keep theirs until revoked.
EPOCH_CASES = [
    (
        "kept keep theirs, new get the target's",
        Reconciled(5, 4, S, P(t1=[0, 1]), {}, E(t1={0: 3, 1: 5})),
        6,
        P(t1=[0, 1, 2]),
        BOTH,
        False,
        P(t1=[0, 1]),
        free,
        6,
        E(t1={0: 3, 1: 5, 2: 6}),
    ),
    (
        "epoch bump without changes keeps them",
        Reconciled(5, 4, S, P(t1=[0, 1]), {}, E(t1={0: 2, 1: 5})),
        9,
        P(t1=[0, 1]),
        BOTH,
        False,
        P(t1=[0, 1]),
        free,
        9,
        E(t1={0: 2, 1: 5}),
    ),
    (
        "revoking keeps the epochs of kept and revoked",
        Reconciled(5, 4, S, P(t1=[0, 1], t2=[0]), {}, E(t1={0: 4, 1: 5}, t2={0: 3})),
        6,
        P(t1=[0], t2=[0, 1]),
        BOTH,
        False,
        P(t1=[0, 1], t2=[0]),
        free,
        5,
        E(t1={0: 4, 1: 5}, t2={0: 3}),
    ),
    (
        "revocation acknowledged: the revoked lose theirs, new ones at the target's",
        Reconciled(5, 5, UR, P(t1=[0], t2=[0]), P(t1=[1]), E(t1={0: 4, 1: 5}, t2={0: 3})),
        6,
        P(t1=[0], t2=[0, 1]),
        BOTH,
        False,
        P(t1=[0], t2=[0]),
        free,
        6,
        E(t1={0: 4}, t2={0: 3, 1: 6}),
    ),
    (
        "unreleased, later released: at the epoch it is got",
        Reconciled(6, 5, UL, P(t1=[0]), {}, E(t1={0: 2})),
        7,
        P(t1=[0, 2]),
        BOTH,
        False,
        P(t1=[0]),
        free,
        7,
        E(t1={0: 2, 2: 7}),
    ),
    (
        "taken back while pending revocation: at the target's",
        Reconciled(5, 5, UR, P(t1=[0]), P(t1=[1]), E(t1={0: 4, 1: 2})),
        6,
        P(t1=[0, 1]),
        BOTH,
        False,
        P(t1=[0]),
        free,
        6,
        E(t1={0: 4, 1: 6}),
    ),
    (
        "unsubscribed topic revoked at the same epoch, epochs kept",
        Reconciled(6, 5, S, P(t1=[0], t2=[1]), {}, E(t1={0: 6}, t2={1: 2})),
        6,
        P(t1=[0], t2=[1]),
        frozenset({T1}),
        True,
        P(t1=[0], t2=[1]),
        free,
        6,
        E(t1={0: 6}, t2={1: 2}),
    ),
    (
        "unsubscribed topic already revoked: its epochs go",
        Reconciled(6, 5, S, P(t1=[0], t2=[1]), {}, E(t1={0: 6}, t2={1: 2})),
        6,
        P(t1=[0], t2=[1]),
        frozenset({T1}),
        True,
        P(t1=[0]),
        free,
        6,
        E(t1={0: 6}),
    ),
    (
        "a record without epochs: max(member epoch, 0), then kept",
        Reconciled(5, 4, S, P(t1=[0]), {}),
        6,
        P(t1=[0, 1]),
        BOTH,
        False,
        P(t1=[0]),
        free,
        6,
        E(t1={0: 5, 1: 6}),
    ),
]


@pytest.mark.parametrize("case", EPOCH_CASES, ids=[c[0] for c in EPOCH_CASES])
def test_assignment_epochs(case):
    _, member, epoch, target, subscribed, changed, owned, owners, member_epoch, epochs = case
    got = reconcile(member, epoch, target, subscribed, changed, owned, owners)
    assert got.epoch == member_epoch
    assert {t: dict(es) for t, es in got.epochs.items() if es} == epochs


@pytest.mark.parametrize("owned", [None, P(t1=[0])])
def test_unknown_state_with_partitions_is_fenced(owned):
    member = Reconciled(5, 4, UK, P(t1=[0]), {})
    with pytest.raises(FencedMember):
        reconcile(member, 6, P(t1=[0]), BOTH, False, owned, free)


def test_state_byte_beyond_known_is_unknown():
    assert MemberState.of(1) is UR
    assert MemberState.of(42) is UK


# ---------------------------------------------------------------------------------- property


class World:
    """Members reconciling toward random targets, each client acknowledging revocations at its
    own pace; `owners` is the group's ownership index, updated as the coordinator's replay does."""

    def __init__(self, members: int, partitions: int, rng: random.Random):
        self.rng = rng
        self.partitions = partitions
        self.state = {m: Reconciled(0, 0, S, {}, {}) for m in range(members)}
        # What each client believes it owns (it drops revoked partitions when it acknowledges).
        self.client = {m: {} for m in range(members)}
        self.epoch = 1
        self.target = {m: {} for m in range(members)}

    def owner_epoch(self):
        def lookup(topic, p):
            for _m, st_ in self.state.items():
                for part in (st_.assigned, st_.pending_revocation):
                    if p in part.get(topic, ()):
                        return st_.epoch
            return -1

        return lookup

    def new_target(self):
        self.epoch += 1
        members = list(self.state)
        self.rng.shuffle(members)
        target = {m: set() for m in members}
        for p in range(self.partitions):
            target[self.rng.choice(members)].add(p)
        self.target = {m: ({T1: frozenset(ps)} if ps else {}) for m, ps in target.items()}

    def heartbeat(self, m):
        before = self.state[m]
        owned = self.client[m]
        after = reconcile(
            before, self.epoch, self.target[m], BOTH, False, owned, self.owner_epoch()
        )
        self.state[m] = after
        # The client applies its answer: it keeps the assigned partitions (a revocation it
        # acknowledges by leaving them out of its next heartbeat).
        if self.rng.random() < 0.7:
            self.client[m] = dict(after.assigned)
        else:
            # Slow to revoke: still holds what it held plus what it was given.
            merged = {T1: after.assigned.get(T1, frozenset()) | owned.get(T1, frozenset())}
            self.client[m] = {t: ps for t, ps in merged.items() if ps}

    def check_single_owner(self):
        seen = {}
        for m, st_ in self.state.items():
            for part in (st_.assigned, st_.pending_revocation):
                for p in part.get(T1, ()):
                    assert p not in seen, f"partition {p} owned by {seen[p]} and {m}"
                    seen[p] = m
        # What clients think they own never overlaps either: a client is only ever given free
        # partitions and drops revoked ones before anyone else gets them.
        held = {}
        for m, owned in self.client.items():
            for p in owned.get(T1, ()):
                assert p not in held, f"clients {held[p]} and {m} both consume partition {p}"
                held[p] = m


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 8), st.integers(1, 24), st.integers(0, 2**32 - 1), st.integers(1, 6))
def test_no_partition_ever_has_two_owners(members, partitions, seed, rounds):
    rng = random.Random(seed)
    world = World(members, partitions, rng)
    for _ in range(rounds):
        world.new_target()
        for _ in range(members * 4):
            world.heartbeat(rng.randrange(members))
            world.check_single_owner()
    # Clients that acknowledge everything converge: every member stable at the target.
    for _ in range(6):
        for m in world.state:
            world.client[m] = dict(world.state[m].assigned)
            after = reconcile(
                world.state[m],
                world.epoch,
                world.target[m],
                BOTH,
                False,
                world.client[m],
                world.owner_epoch(),
            )
            world.state[m] = after
            world.client[m] = dict(after.assigned)
            world.check_single_owner()
    for m, st_ in world.state.items():
        assert st_.epoch == world.epoch and st_.state is S, (m, st_)
        assert st_.assigned == world.target[m]
