"""Member reconciliation, Kafka's `CurrentAssignmentBuilder` as one pure function
(reference/kip848.md §3): from a member's current assignment, its target, what the client says it
owns and who owns what, the member's next assignment and state.

The rule that makes it safe: a member gets a partition only once no other member owns it, and it
moves to the target epoch only once it acknowledged every revocation (by leaving the revoked
partitions out of the partitions it reports). So no partition ever has two owners.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from corral.errors import ErrorCode

# topic id -> partitions
Partitions = Mapping[bytes, frozenset[int]]
# topic id -> partition -> the epoch at which the member got it (KIP-1251)
Epochs = Mapping[bytes, Mapping[int, int]]
NO_EPOCHS: Epochs = MappingProxyType({})
_NO_PARTITION_EPOCHS: Mapping[int, int] = MappingProxyType({})


class MemberState(enum.IntEnum):
    """The `State` int8 of ConsumerGroupCurrentMemberAssignment (any other byte is UNKNOWN)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def of(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class Reconciled:
    """A member's assignment state (its ConsumerGroupCurrentMemberAssignment). `epochs`: the
    assignment epoch of each partition assigned or pending revocation (KIP-1251: kept while the
    member keeps the partition, the target's epoch when it gets it); a partition left out has
    max(epoch, 0), as Kafka reads a record without them."""

    epoch: int
    previous_epoch: int
    state: MemberState
    assigned: Partitions
    pending_revocation: Partitions
    epochs: Epochs = field(default_factory=lambda: NO_EPOCHS)

    def moved_to(
        self,
        epoch: int,
        state: MemberState,
        assigned: Partitions,
        pending_revocation: Partitions,
        epochs: Epochs,
    ) -> Reconciled:
        # Kafka's updateMemberEpoch: the previous epoch is the old one, even when unchanged.
        return Reconciled(epoch, self.epoch, state, assigned, pending_revocation, epochs)

    def assignment_epoch(self, topic: bytes, partition: int) -> int | None:
        """When the member got a partition it holds (assigned or pending revocation); None when
        it holds neither (Kafka's assignmentEpoch, then pendingRevocationEpoch)."""
        if partition not in self.assigned.get(
            topic, ()
        ) and partition not in self.pending_revocation.get(topic, ()):
            return None
        return self.epochs.get(topic, _NO_PARTITION_EPOCHS).get(partition, max(self.epoch, 0))

    def epochs_of(self, partitions: Partitions) -> dict[bytes, dict[int, int]]:
        """The assignment epochs of `partitions` (ones the member holds)."""
        return {
            topic: {p: self.assignment_epoch(topic, p) for p in ps}  # type: ignore[misc]
            for topic, ps in partitions.items()
            if ps
        }

    def held_epochs(self) -> dict[bytes, dict[int, int]]:
        """The assignment epoch of every partition the member holds, each one explicit."""
        return self.epochs_of(_merged(self.assigned, self.pending_revocation))

    def reset_epochs(self) -> dict[bytes, dict[int, int]]:
        """Kafka's resetAssignedPartitionsEpochsToZero: every assigned partition at epoch 0 (a
        static member leaving; its commits under the old member id are fenced)."""
        return {topic: dict.fromkeys(ps, 0) for topic, ps in self.assigned.items() if ps}


class FencedMember(Exception):
    """The member must give up all its partitions and rejoin (FENCED_MEMBER_EPOCH)."""

    code = ErrorCode.FENCED_MEMBER_EPOCH


def reconcile(
    member: Reconciled,
    target_epoch: int,
    target: Partitions,
    subscribed: Collection[bytes],
    subscription_changed: bool,
    owned: Partitions | None,
    owner_epoch: Callable[[bytes, int], int],
) -> Reconciled:
    """The member's next state. `target` is its target assignment at `target_epoch`;
    `subscribed` the topic ids it subscribes to now; `owned` what the client reported owning
    (None: not reported, counted as still owning everything); `owner_epoch(topic, partition)`
    the epoch of the member owning a partition (assigned or pending revocation), -1 if free.
    Returns `member` itself when nothing changes. Raises FencedMember for the UNKNOWN state
    when the client still owns partitions."""
    state = member.state
    if state is MemberState.STABLE:
        if member.epoch != target_epoch:
            return _next_assignment(
                member, member.epoch, target_epoch, target, subscribed, owned, owner_epoch
            )
        if subscription_changed:
            return _drop_unsubscribed(member, subscribed, owned)
        return member
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return _drop_unsubscribed(member, subscribed, owned) if subscription_changed else member
        return _next_assignment(
            member, member.epoch, target_epoch, target, subscribed, owned, owner_epoch
        )
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next_assignment(
            member, member.epoch, target_epoch, target, subscribed, owned, owner_epoch
        )
    if owned is None or any(owned.values()):
        raise FencedMember(
            "The consumer group member is in a unknown state. "
            "The member must abandon all its partitions and rejoin."
        )
    return _next_assignment(
        member, target_epoch, target_epoch, target, subscribed, owned, owner_epoch
    )


def _owns_any(owned: Partitions | None, partitions: Partitions) -> bool:
    """Whether the client still owns any of `partitions` (not knowing counts as owning)."""
    if owned is None:
        return True
    return any(not partitions.get(topic, frozenset()).isdisjoint(ps) for topic, ps in owned.items())


def _drop_unsubscribed(
    member: Reconciled, subscribed: Collection[bytes], owned: Partitions | None
) -> Reconciled:
    """Kafka's updateCurrentAssignment: partitions of topics no longer subscribed are revoked at
    the same epoch (the target has not caught up with the subscription yet)."""
    dropped = {t: ps for t, ps in member.assigned.items() if t not in subscribed}
    if not dropped:
        return member
    assigned = {t: ps for t, ps in member.assigned.items() if t in subscribed}
    pending = _merged(member.pending_revocation, dropped)
    # Partitions keep their assignment epochs, assigned or pending revocation.
    if _owns_any(owned, pending):
        return member.moved_to(
            member.epoch,
            MemberState.UNREVOKED_PARTITIONS,
            assigned,
            pending,
            member.epochs_of(_merged(assigned, pending)),
        )
    # Already revoked by the client: shrink the assignment, keep the state.
    return member.moved_to(
        member.epoch,
        member.state,
        assigned,
        member.pending_revocation,
        member.epochs_of(_merged(assigned, member.pending_revocation)),
    )


def _merged(a: Partitions, b: Partitions) -> dict[bytes, frozenset[int]]:
    out = dict(a)
    for topic, ps in b.items():
        out[topic] = out.get(topic, frozenset()) | ps
    return out


def _next_assignment(
    member: Reconciled,
    epoch: int,
    target_epoch: int,
    target: Partitions,
    subscribed: Collection[bytes],
    owned: Partitions | None,
    owner_epoch: Callable[[bytes, int], int],
) -> Reconciled:
    """Kafka's computeNextAssignment."""
    assigned: dict[bytes, frozenset[int]] = {}
    revoking: dict[bytes, frozenset[int]] = {}
    to_assign: dict[bytes, frozenset[int]] = {}
    unreleased = False
    empty: frozenset[int] = frozenset()
    for topic in target.keys() | member.assigned.keys():
        # An unsubscribed topic's target counts as empty.
        wanted = target.get(topic, empty) if topic in subscribed else empty
        current = member.assigned.get(topic, empty)
        kept = current & wanted
        if kept:
            assigned[topic] = kept
        if current - kept:
            revoking[topic] = current - kept
        new = wanted - kept
        if new:
            # A partition another member still owns waits; one this member holds pending
            # revocation is not "unreleased" (KAFKA-19449): only one member can own it.
            own_pending = member.pending_revocation.get(topic, empty)
            free = frozenset(p for p in new if owner_epoch(topic, p) == -1 or p in own_pending)
            unreleased = unreleased or len(free) < len(new)
            if free:
                to_assign[topic] = free
    # Kept partitions keep their assignment epochs, as revoked ones do while being revoked.
    epochs = member.epochs_of(_merged(assigned, revoking))
    if revoking and _owns_any(owned, revoking):
        # Revoke first, at the same epoch (KAFKA-19974: never a new epoch while revoking).
        return member.moved_to(epoch, MemberState.UNREVOKED_PARTITIONS, assigned, revoking, epochs)
    epochs = member.epochs_of(assigned)
    if to_assign:
        for topic, ps in to_assign.items():
            assigned[topic] = assigned.get(topic, empty) | ps
            # A partition the member gets is assigned at the target's epoch.
            epochs.setdefault(topic, {}).update(dict.fromkeys(ps, target_epoch))
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return member.moved_to(target_epoch, state, assigned, {}, epochs)
