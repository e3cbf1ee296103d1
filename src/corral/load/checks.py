"""Invariants every run checks. A broken one is a violation: counted, described, never ignored."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

MAX_DESCRIBED = 20  # violations described in full; all are counted


@dataclass
class Violations:
    count: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, what: str) -> None:
        self.count += 1
        if len(self.examples) < MAX_DESCRIBED:
            self.examples.append(what)

    def take(self) -> Violations:
        out = Violations(self.count, self.examples)
        self.count, self.examples = 0, []
        return out

    def merge(self, other: Violations) -> None:
        self.count += other.count
        self.examples.extend(other.examples[: MAX_DESCRIBED - len(self.examples)])


class AssignmentLedger:
    """Per generation, what each member was handed: disjoint always, complete once all synced.

    Fed from every worker (members of one group can live in several processes), so it runs in
    the parent.
    """

    def __init__(self, partitions: dict[str, int], violations: Violations):
        self.all_partitions = {(t, p) for t, n in partitions.items() for p in range(n)}
        self.violations = violations
        self.owner: dict[int, dict[tuple[str, int], str]] = defaultdict(dict)
        self.synced: dict[int, set[str]] = defaultdict(set)
        self.size: dict[int, int] = {}
        self.checked_complete: set[int] = set()
        self.last_change = 0.0  # when the newest assignment was received

    def generations_seen(self) -> int:
        return len(self.size)

    def generations(self) -> set[int]:
        return set(self.size)

    def completed(self) -> set[int]:
        """Generations whose every member holds its assignment."""
        return self.checked_complete

    def newest_generation(self) -> int | None:
        return max(self.size, default=None)

    def leader(self, generation: int, member_count: int) -> None:
        self.size[generation] = member_count
        self._check_complete(generation)

    def synced_member(
        self, generation: int, member_id: str, assignment: dict[str, list[int]], at: float = 0.0
    ) -> None:
        if member_id in self.synced[generation]:
            return
        self.last_change = max(self.last_change, at)
        self.synced[generation].add(member_id)
        owners = self.owner[generation]
        for topic, parts in assignment.items():
            for p in parts:
                tp = (topic, p)
                if tp in owners:
                    self.violations.add(
                        f"generation {generation}: {topic}-{p} assigned to both "
                        f"{owners[tp]} and {member_id}"
                    )
                else:
                    owners[tp] = member_id
        self._check_complete(generation)

    def _check_complete(self, generation: int) -> None:
        size = self.size.get(generation)
        if (
            size is None
            or generation in self.checked_complete
            or len(self.synced[generation]) < size
        ):
            return
        self.checked_complete.add(generation)
        missing = self.all_partitions - self.owner[generation].keys()
        if missing:
            sample = ", ".join(f"{t}-{p}" for t, p in sorted(missing)[:5])
            self.violations.add(
                f"generation {generation}: {len(missing)} partitions assigned to "
                f"no member ({sample})"
            )

    def stable_generation(self, members: int) -> int | None:
        """The newest generation, if it has exactly `members` members that all hold their
        assignment."""
        if not self.size:
            return None
        generation = max(self.size)
        if self.size[generation] == members and len(self.synced[generation]) >= members:
            return generation
        return None


class ConsumerLedger:
    """KIP-848 members' epochs and partitions over time, across all workers: never one partition
    owned by two members at once, and every partition owned once the group is stable.

    Members report each change with its time (`Events.owned`). Workers ship twice a second, so a
    release in one worker may reach the parent after an acquisition it preceded in another: events
    are applied in time order, up to the oldest time every worker has shipped (the watermark).

    A member cannot see its group's epoch, so "stable" is inferred: every member in the group at
    one epoch, the partitions owned exactly once between them, and nothing changed while every
    member was answered again more than a heartbeat interval later. Whenever the members in the
    group (however many: members come and go in churn) are quiet like that, every partition must
    be owned: checked at each shipment, once per epoch. (Right after a join storm all
    members may sit at an old epoch, the first member owning everything: the next target, pending
    behind group.consumer.assignment.interval.ms, is computed at a later heartbeat and changes some
    member's epoch; the quiet heartbeat round rules that out as long as the interval is at least
    the assignment interval, as Kafka's bounds have it by default.)
    """

    def __init__(self, partitions: dict[str, int], violations: Violations, workers: int):
        self.all_partitions = {(t, p) for t, n in partitions.items() for p in range(n)}
        self.violations = violations
        self.shipped = {w: float("-inf") for w in range(workers)}  # each worker's watermark
        self.pending: list[tuple] = []
        self.members: dict[str, tuple[int, frozenset]] = {}  # in the group: epoch, owned
        self.at_epoch: Counter = Counter()  # members in the group by epoch
        self.owner: dict[tuple[str, int], str] = {}
        self.owned = 0  # partitions of all_partitions that have an owner
        self.last_change = 0.0
        self.epochs_seen: set[int] = set()
        # Epochs at which every member in the group met with every partition owned once: a
        # rebalance completed (the classic ledger's complete generation).
        self.converged: set[int] = set()
        self.oldest_ok = 0.0  # every member in the group was last answered at or after this
        self.interval_s = 0.0  # the longest heartbeat interval a member was given
        self.checked_quiet: set[int] = set()
        self.incomplete: set[int] = set()

    def shipped_by(self, worker: int, events: list[tuple], at: float) -> None:
        self.pending.extend(events)
        self.shipped[worker] = at
        self._advance()
        self._check_quiet()

    def _advance(self) -> None:
        watermark = min(self.shipped.values())
        self.pending.sort(key=lambda e: e[4])
        ready = 0
        while ready < len(self.pending) and self.pending[ready][4] <= watermark:
            ready += 1
        for _, member_id, epoch, assignment, at in self.pending[:ready]:
            self._apply(member_id, epoch, assignment, at)
        del self.pending[:ready]

    def _apply(
        self, member_id: str, epoch: int, assignment: dict[str, list[int]], at: float
    ) -> None:
        old_epoch, before = self.members.get(member_id, (None, frozenset()))
        after = frozenset((t, p) for t, ps in assignment.items() for p in ps)
        for tp in before - after:
            if self.owner.get(tp) == member_id:
                del self.owner[tp]
                self.owned -= tp in self.all_partitions
        for tp in after - before:
            other = self.owner.get(tp)
            if other is not None and other != member_id:
                self.violations.add(
                    f"{tp[0]}-{tp[1]} owned by both {other} (epoch "
                    f"{self.members[other][0]}) and {member_id} (epoch {epoch})"
                )
            else:
                self.owned += tp in self.all_partitions
            self.owner[tp] = member_id
        if old_epoch is not None:
            self.at_epoch[old_epoch] -= 1
            if not self.at_epoch[old_epoch]:
                del self.at_epoch[old_epoch]
        if epoch < 0:
            self.members.pop(member_id, None)
        else:
            self.members[member_id] = (epoch, after)
            self.at_epoch[epoch] += 1
            self.epochs_seen.add(epoch)
        if self.converged_now():
            self.converged.add(epoch)
        self.last_change = max(self.last_change, at)

    def converged_now(self) -> bool:
        """Every member in the group at one epoch, every partition owned (up to the watermark)."""
        return len(self.at_epoch) == 1 and self.owned == len(self.all_partitions)

    def generations_seen(self) -> int:
        return len(self.epochs_seen)

    def generations(self) -> set[int]:
        return self.epochs_seen

    def completed(self) -> set[int]:
        return self.converged

    def newest_generation(self) -> int | None:
        return max(self.epochs_seen, default=None)

    def _quiet_epoch(self) -> int | None:
        """The one epoch of the members in the group, if nothing changed while every one of them
        was answered again more than a heartbeat interval later."""
        if self.pending or len(self.at_epoch) != 1:
            return None
        if self.oldest_ok < self.last_change + max(self.interval_s, 1.0):
            return None
        return next(iter(self.at_epoch))

    def _check_quiet(self) -> None:
        epoch = self._quiet_epoch()
        if epoch is None or epoch in self.checked_quiet:
            return
        self.checked_quiet.add(epoch)
        missing = self.all_partitions - self.owner.keys()
        if missing:
            self.incomplete.add(epoch)
            sample = ", ".join(f"{t}-{p}" for t, p in sorted(missing)[:5])
            self.violations.add(
                f"epoch {epoch}: every member stable, {len(missing)} "
                f"partitions owned by no member ({sample})"
            )

    def stable_generation(self, members: int) -> int | None:
        """The epoch every one of `members` members is stable at, once that is certain."""
        epoch = self._quiet_epoch()
        if epoch is None or self.at_epoch[epoch] != members:
            return None
        self._check_quiet()
        return None if epoch in self.incomplete else epoch
