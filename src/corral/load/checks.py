"""Invariants every run checks. A broken one is a violation: counted, described, never ignored."""

from __future__ import annotations

from array import array
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


# Record states in the ShareLedger.
NEVER, HELD, ACKED, UNCONFIRMED, LATE = 0, 1, 2, 3, 4
STATE_NAMES = {NEVER: "never delivered", HELD: "delivered, never acknowledged"}


class ShareLedger:
    """Share consumers' records (KIP-932), across all workers: which member holds each record
    (partition, offset), and what became of it.

    With consumers that acknowledge every record ACCEPT:
    - no record is acquired while another member (or the same one) still holds it: a record
      comes again only after its holder's session ended (connection lost or closed: the broker
      releases what it held) or its acquisition lock expired;
    - an acknowledged record is never delivered again, and is acknowledged once;
    - a member acknowledges only records delivered to it (the session checks that each acquired
      offset came with its record);
    - nothing is lost: by the end every produced offset is acknowledged (an acknowledgement whose
      answer never came, the connection having failed, is counted apart, not as lost; so is a
      "late" one, answered after the record's lock could have expired: Kafka answers NONE to an
      acknowledgement of a record it has meanwhile archived, or that another member acknowledged,
      so such an answer says nothing about the record).

    Members report acquisitions stamped with the time their ShareFetch was sent and answered,
    acknowledgements with the time theirs was sent, and the end of a session with the time it
    ended. One worker's reports arrive in order; several workers' do not: an acquisition that
    finds the record still held by another member is judged once every worker has shipped past
    it (the release that explains it, if any, has then arrived), or at the end.

    State per offset is three flat arrays per partition (state, holder, time of acquisition),
    updated a range at a time; only records delivered more than once are looked at one by one.
    """

    def __init__(self, partitions: dict[str, int], violations: Violations, workers: int = 1):
        self.partitions = partitions
        self.violations = violations
        self.shipped = {w: float("-inf") for w in range(workers)}
        self.index: dict[str, int] = {}
        self.member_ids: list[str] = []
        self.state: dict[tuple[str, int], bytearray] = {}
        self.holder: dict[tuple[str, int], array] = {}
        self.since: dict[tuple[str, int], array] = {}
        self.produced: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
        self.produced_total = 0
        self.releases: dict[int, list[tuple[frozenset, float]]] = defaultdict(list)
        # Acquisitions of records someone held, judged later:
        # (answered at, tp, first, last, previous holder, its acquisition time, new holder).
        self.pending: list[tuple] = []
        self.lock_s = 0.0
        self.acquired_total = 0  # records acquired, each delivery counted
        self.acknowledged_total = 0
        self.redelivered = 0  # deliveries of records delivered before (justified ones)
        self.delivery_count_above_1 = 0  # records whose DeliveryCount said a later delivery
        self.unconfirmed = 0
        self.acknowledged_late = 0  # records acknowledged late (see above), counted apart
        self.first_acquired_at: float | None = None
        self.last_acknowledged_at: float | None = None
        self.ack_times: list[tuple[float, int]] = []  # (sent at, records) per acknowledgement
        self.members_seen: set[int] = set()
        self.finished = False

    # ------------------------------------------------------------------ input

    def shipped_by(self, worker: int, events: list[tuple], at: float) -> None:
        for event in events:
            self.apply(event)
        self.shipped[worker] = at
        self._judge(min(self.shipped.values()))

    def apply(self, event: tuple) -> None:
        kind = event[0]
        if kind == "acquired":
            self.acquired(*event[1:])
        elif kind == "acknowledged":
            self.acknowledged(*event[1:])
        elif kind == "unconfirmed":
            self.unconfirmed_ack(*event[1:])
        elif kind == "released":
            self.released(*event[1:])
        elif kind == "produced":
            self.produced_range(*event[1:])

    def produced_range(self, tp: tuple[str, int], base: int, count: int) -> None:
        ranges = self.produced[tp]
        if ranges and ranges[-1][1] + 1 == base:
            ranges[-1] = (ranges[-1][0], base + count - 1)
        else:
            ranges.append((base, base + count - 1))
        self.produced_total += count
        self._grow(tp, base + count)

    def _member(self, member_id: str) -> int:
        m = self.index.get(member_id)
        if m is None:
            m = self.index[member_id] = len(self.member_ids)
            self.member_ids.append(member_id)
        return m

    def _grow(self, tp: tuple[str, int], end: int) -> None:
        state = self.state.get(tp)
        if state is None:
            state = self.state[tp] = bytearray()
            self.holder[tp] = array("i")
            self.since[tp] = array("d")
        more = end - len(state)
        if more > 0:
            state.extend(bytes(more))
            self.holder[tp].extend(array("i", [-1]) * more)
            self.since[tp].extend(array("d", [0.0]) * more)

    def acquired(
        self,
        member_id: str,
        tp: tuple[str, int],
        first: int,
        last: int,
        delivery_count: int,
        sent_at: float,
        at: float,
        lock_ms: int,
    ) -> None:
        m = self._member(member_id)
        self.members_seen.add(m)
        n = last - first + 1
        self.lock_s = max(self.lock_s, lock_ms / 1000)
        self._grow(tp, last + 1)
        state, holder, since = self.state[tp], self.holder[tp], self.since[tp]
        if state[first : last + 1].count(NEVER) != n:
            self._seen_before(tp, first, last, m, at)
        state[first : last + 1] = bytes([HELD]) * n
        holder[first : last + 1] = array("i", [m]) * n
        since[first : last + 1] = array("d", [sent_at]) * n
        self.acquired_total += n
        if delivery_count > 1:
            self.delivery_count_above_1 += n
        if self.first_acquired_at is None or at < self.first_acquired_at:
            self.first_acquired_at = at

    def _seen_before(self, tp: tuple[str, int], first: int, last: int, m: int, at: float) -> None:
        """Records of an acquisition that were delivered before: runs of one previous holder and
        acquisition are judged later; acknowledged ones are a violation now."""
        state, holder, since = self.state[tp], self.holder[tp], self.since[tp]
        run: list | None = None
        for o in range(first, last + 1):
            s = state[o]
            if s == NEVER:
                run = None
                continue
            self.redelivered += 1
            if s == ACKED:
                run = None
                self.violations.add(
                    f"{tp[0]}-{tp[1]} offset {o}: acknowledged by {self.member_ids[holder[o]]}, "
                    f"then delivered again to {self.member_ids[m]}"
                )
                continue
            key = (holder[o], since[o])
            if run is not None and run[1] == o - 1 and (run[2], run[3]) == key:
                run[1] = o
            else:
                run = [o, o, holder[o], since[o]]
                self.pending.append((at, tp, run, m))

    def acknowledged(
        self,
        member_id: str,
        tp: tuple[str, int],
        first: int,
        last: int,
        sent_at: float,
        late: bool = False,
    ) -> None:
        m = self._member(member_id)
        n = last - first + 1
        self._grow(tp, last + 1)
        state, holder = self.state[tp], self.holder[tp]
        if late:
            # Still the member's, or not (expired, then archived or taken by another member):
            # only what it still held becomes LATE, and nothing is judged.
            for o in range(first, last + 1):
                if state[o] == HELD and holder[o] == m:
                    state[o] = LATE
            self.acknowledged_late += n
            self._count(n, sent_at)
            return
        if not (
            state[first : last + 1] == bytes([HELD]) * n
            and holder[first : last + 1] == array("i", [m]) * n
        ):
            for o in range(first, last + 1):
                s, h = state[o], holder[o]
                if s == NEVER:
                    what = "never delivered"
                elif s == ACKED:
                    what = "already acknowledged"
                elif h != m:
                    what = f"delivered to {self.member_ids[h]}"
                else:
                    continue
                self.violations.add(
                    f"{tp[0]}-{tp[1]} offset {o}: acknowledged by {member_id}, {what}"
                )
        state[first : last + 1] = bytes([ACKED]) * n
        self._count(n, sent_at)

    def _count(self, n: int, sent_at: float) -> None:
        """`n` records answered acknowledged (late ones too: the rate counts the broker's work)."""
        self.acknowledged_total += n
        self.ack_times.append((sent_at, n))
        if self.last_acknowledged_at is None or sent_at > self.last_acknowledged_at:
            self.last_acknowledged_at = sent_at

    def unconfirmed_ack(
        self, member_id: str, tp: tuple[str, int], first: int, last: int, sent_at: float
    ) -> None:
        m = self._member(member_id)
        self._grow(tp, last + 1)
        state, holder = self.state[tp], self.holder[tp]
        for o in range(first, last + 1):
            if state[o] == HELD and holder[o] == m:
                state[o] = UNCONFIRMED
                self.unconfirmed += 1

    def released(self, member_id: str, tps: list[tuple[str, int]], at: float) -> None:
        self.releases[self._member(member_id)].append((frozenset(map(tuple, tps)), at))

    # ------------------------------------------------------------------ judgement

    def _judge(self, watermark: float) -> None:
        if not self.pending:
            return
        later = []
        for item in self.pending:
            if item[0] <= watermark:
                self._judge_one(*item)
            else:
                later.append(item)
        self.pending = later

    def _judge_one(self, at: float, tp: tuple[str, int], run: list, m: int) -> None:
        first, last, previous, acquired_at = run
        if at >= acquired_at + self.lock_s > acquired_at:
            return  # its lock had expired
        for tps, released_at in self.releases.get(previous, ()):
            if tp in tps and acquired_at <= released_at <= at:
                return  # its holder's session had ended
        who = "again by" if previous == m else "by"
        self.violations.add(
            f"{tp[0]}-{tp[1]} offsets {first}-{last}: acquired {who} {self.member_ids[m]} while "
            f"{self.member_ids[previous]} held them (no release, lock of "
            f"{self.lock_s:g} s not expired)"
        )

    def finish(self, lost_is_violation: bool = True) -> dict[str, int]:
        """Judges what is left; counts produced records by what became of them (and, with
        `lost_is_violation`, says each partition's missing ones)."""
        self._judge(float("inf"))
        outcome = {
            "acknowledged": 0,
            "late": 0,
            "unconfirmed": 0,
            "never_delivered": 0,
            "unacknowledged": 0,
        }
        for tp, ranges in sorted(self.produced.items()):
            state = self.state[tp]
            missing: dict[int, list[int]] = defaultdict(list)
            for first, last in ranges:
                segment = state[first : last + 1]
                outcome["acknowledged"] += segment.count(ACKED)
                outcome["unconfirmed"] += segment.count(UNCONFIRMED)
                outcome["late"] += segment.count(LATE)
                if segment.count(NEVER) + segment.count(HELD) == 0:
                    continue
                for i, s in enumerate(segment):
                    if s in (NEVER, HELD):
                        missing[s].append(first + i)
            outcome["never_delivered"] += len(missing.get(NEVER, ()))
            outcome["unacknowledged"] += len(missing.get(HELD, ()))
            if lost_is_violation:
                for s, offsets in sorted(missing.items()):
                    sample = ", ".join(str(o) for o in offsets[:5])
                    self.violations.add(
                        f"{tp[0]}-{tp[1]}: {len(offsets)} produced records {STATE_NAMES[s]} "
                        f"(offsets {sample}{', ...' if len(offsets) > 5 else ''})"
                    )
        self.finished = True
        return outcome

    # ------------------------------------------------------------------ figures

    def complete(self) -> bool:
        """Every produced record acknowledged (late, or with its answer lost, included), as far
        as the reports that arrived say."""
        if not self.produced_total or (
            self.acknowledged_total + self.unconfirmed < self.produced_total
        ):
            return False
        for tp, ranges in self.produced.items():
            state = self.state[tp]
            for first, last in ranges:
                segment = state[first : last + 1]
                if segment.count(NEVER) or segment.count(HELD):
                    return False
        return True

    def rate(self, low: float = 0.0, high: float = 1.0) -> float | None:
        """Acknowledged records/s between the moments `low` and `high` (fractions) of all the
        acknowledged records were acknowledged; with the defaults, from the first acquisition
        to the last acknowledgement."""
        if not self.ack_times or self.first_acquired_at is None:
            return None
        times = sorted(self.ack_times)
        total = sum(n for _, n in times)
        if low == 0.0 and high == 1.0:
            span = times[-1][0] - self.first_acquired_at
            return total / span if span > 0 else None
        done, start, end, counted = 0, None, None, 0
        for at, n in times:
            done += n
            if start is None and done >= low * total:
                start, counted = at, done
            if done >= high * total:
                end = at
                break
        if start is None or end is None or end <= start:
            return None
        return (done - counted) / (end - start)

    def newest_generation(self) -> int | None:
        return None  # the display shows a generation only for consumer groups

    def generations_seen(self) -> int:
        return 0
