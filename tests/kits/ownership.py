"""The ownership invariant of the group tests: what each member reported owning, and the check
that no partition was ever owned by two members at once.

`CgMember`: one member as its process reports it (tests/kits/cgkit.py's `MemberProcess` fills it
in from the client's own rebalance callbacks; tests/kits/raw_groups.py's `Script` from what its
raw heartbeats were given). `check_ownership` replays every member's reports in clock order;
`partitioned`: every partition owned once; `all_partitions` of some topics.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cgkit import MemberProcess

TP = tuple[str, int]


class CgMember:
    """One member as its process reports it."""

    def __init__(self, name: str, client: str, process: MemberProcess):
        self.name = name
        self.client = client
        self.process = process
        self.owned: frozenset[TP] = frozenset()
        # (monotonic ns, what it owns from then on); a crash adds (kill time, nothing).
        self.timeline: list[tuple[int, frozenset[TP]]] = []
        self.whys: list[str] = []  # "assigned" / "revoked" / "lost", one per timeline entry
        self.epochs: list[int] = []  # Java members: the member epoch at each change
        self.records: list[tuple[str, int, int]] = []
        self.errors: list[str] = []
        self.closed = False
        self.dead = False
        # When the test asked it to close (monotonic ns), if it did: see `check_ownership`.
        self.closing_since: int | None = None

    @property
    def live(self) -> bool:
        return not (self.closed or self.dead)

    @property
    def changes(self) -> int:
        """How many times what it owns changed (an incremental callback adding nothing is not a change)."""
        n, last = 0, frozenset()
        for _, owned in self.timeline:
            if owned != last:
                n, last = n + 1, owned
        return n

    def __repr__(self) -> str:
        state = "closed" if self.closed else "dead" if self.dead else "live"
        return f"{self.client}:{self.name}({state}, owns {sorted(self.owned)})"


class OwnershipViolation(AssertionError):
    pass


def _reported(member: CgMember) -> list[tuple[int, frozenset[TP]]]:
    """The member's timeline, ending when the test asked it to close: from then on it is
    leaving, and what its callbacks say is the client's own affair. A librdkafka member of a
    consumer (KIP-848) group closing against Kafka 4.4 reported a partition revoked 1.2 s after
    the broker had given it to another member (so the client had already told the broker it
    let it go: its leave or acknowledgement went out before its revoke callback ran)."""
    if member.closing_since is None:
        return member.timeline
    return [(t, owned) for t, owned in member.timeline if t < member.closing_since] + [
        (member.closing_since, frozenset())
    ]


def check_ownership(members: Iterable[CgMember]) -> int:
    """Never one partition owned by two members: replays every member's reported ownership in
    clock order (each member reports inside its rebalance callbacks, so a revocation is
    reported before the client acknowledges it and an assignment after the broker granted it).
    Returns how many ownership changes it checked."""
    members = list(members)
    events = sorted((t, i, owned) for i, m in enumerate(members) for t, owned in _reported(m))
    owner: dict[TP, int] = {}
    held: dict[int, frozenset[TP]] = {}
    for t, i, owned in events:
        for tp in held.get(i, frozenset()) - owned:
            del owner[tp]
        for tp in owned - held.get(i, frozenset()):
            if tp in owner:
                raise OwnershipViolation(
                    f"{tp} owned by {members[owner[tp]].name} and {members[i].name} at once "
                    f"(t={t}); timelines: "
                    + "; ".join(
                        f"{m.name}: {[(tt, sorted(o)) for tt, o in m.timeline]}" for m in members
                    )
                )
            owner[tp] = i
        held[i] = owned
    return len(events)


def partitioned(members: Iterable[CgMember], partitions: set[TP]) -> bool:
    """Every partition owned by exactly one live member (and the dead or closed own nothing)."""
    owned = [tp for m in members for tp in m.owned]
    return len(owned) == len(set(owned)) and set(owned) == partitions


def all_partitions(topics: dict[str, int]) -> set[TP]:
    return {(t, p) for t, n in topics.items() for p in range(n)}
