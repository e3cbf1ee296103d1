"""Invariants every run checks. A broken one is a violation: counted, described, never ignored."""

from __future__ import annotations

from collections import defaultdict
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
        self.examples.extend(other.examples[:MAX_DESCRIBED - len(self.examples)])


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

    def leader(self, generation: int, member_count: int) -> None:
        self.size[generation] = member_count
        self._check_complete(generation)

    def synced_member(self, generation: int, member_id: str, assignment: dict[str, list[int]]) -> None:
        if member_id in self.synced[generation]:
            return
        self.synced[generation].add(member_id)
        owners = self.owner[generation]
        for topic, parts in assignment.items():
            for p in parts:
                tp = (topic, p)
                if tp in owners:
                    self.violations.add(f"generation {generation}: {topic}-{p} assigned to both "
                                        f"{owners[tp]} and {member_id}")
                else:
                    owners[tp] = member_id
        self._check_complete(generation)

    def _check_complete(self, generation: int) -> None:
        size = self.size.get(generation)
        if size is None or generation in self.checked_complete or len(self.synced[generation]) < size:
            return
        self.checked_complete.add(generation)
        missing = self.all_partitions - self.owner[generation].keys()
        if missing:
            sample = ", ".join(f"{t}-{p}" for t, p in sorted(missing)[:5])
            self.violations.add(f"generation {generation}: {len(missing)} partitions assigned to "
                                f"no member ({sample})")

    def stable_generation(self, members: int) -> int | None:
        """The newest generation, if it has exactly `members` members that all hold their assignment."""
        if not self.size:
            return None
        generation = max(self.size)
        if self.size[generation] == members and len(self.synced[generation]) >= members:
            return generation
        return None
