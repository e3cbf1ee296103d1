"""A scripted run of consumer groups whose ground truth is known exactly, for `corral analyze`:
its plan, the truth a run records (`Truth`) and the statuses expected of it. The run itself is
tests/kits/analyze_scenario_driver.py's.

`run(bootstrap)` drives, against any Kafka-compatible bootstrap (a fresh corral from conftest.py
started with CORRAL_SETTINGS, or the Apache Kafka reference,
`kafka_java.kafka_reference(SETTINGS)`), on one clock of ticks (TICK_MS each, counted, so a slow
machine stretches the run but changes no count):

- a producer appending RATES[p] records per tick to partition p of STATUS_TOPIC, every record
  acknowledged before anything else happens in the tick (the log end is known exactly);
- two status groups, one classic and one KIP-848 (`group.protocol=consumer`), each a single
  confluent-kafka member in this process owning every partition of STATUS_TOPIC (paused: it
  fetches nothing) and committing explicit offsets (`commit(offsets=[...],
  asynchronous=False)`, one OffsetCommit per tick) by a role per partition (ROLES, rotated per
  group so that no reader can mix the groups up): keep up, fall behind, stall, rewind, stop;
- two membership groups, classic and KIP-848, of tests/kits/cg_member.py processes on IDLE_TOPIC
  (nothing produced, nothing committed), whose membership changes at each phase's start: a static
  member replaced under a new member id, a member joining, the same member leaving, a member
  killed (its session expires).

Phases (PHASES): `steady` (everyone keeps up), `trouble` (each role misbehaves), `recover` (all
catch up but the laggard), `settle` (all caught up). A phase lasts at least its `min_ticks`, and
ends only once its membership changes are settled (the coordinator shows the expected members,
Stable, every assignment handed out); phases with a `tail` keep it after that (the rewind happens
at the start of `trouble`'s tail, so it is within the last 10 commits at the phase's end).

The truth (`Truth`): every commit (offset, and the times around its request: the broker's commit
timestamp is within [sent_ms, acked_ms]), every tick's log end, each phase's times and the Burrow
status expected of each (group, topic, partition) and group at the phase's end (the status of the
last evaluation before `Phase.end_ms`, docs/analytics-rules.md: `status_before`), the rebalances and
membership events with the times they were asked for and seen settled. The phases are
[Phase.start_ms, Phase.end_ms), together [Truth.start_ms, Truth.end_ms); the setup (topics
created, every group formed: the status groups of 1 member, the membership groups of 3) is
before Truth.start_ms, the teardown (every member closing) after Truth.end_ms.

What the expected statuses assume of the log-end samples an analysis uses: one at least every
MAX_SAMPLE_INTERVAL_MS while the scenario runs (corral's `corral.analytics.sample.interval.ms`
is 300 in CORRAL_SETTINGS; a live sampler must be as frequent). Then they hold exactly, whatever
the samples' phase against the ticks: the laggard commits every BEHIND_EVERY ticks (1 s) so a
newer sample always comes between two of its commits (WARN needs its lag never to decrease);
STOP and STALL have many samples and commits to spare. Tolerances: commit times (broker's within
[sent_ms, acked_ms]); rebalance and membership times (the coordinator's within [requested_ms,
settled_ms], the expiry's start about a session timeout after requested_ms); lag in seconds
(the time the log end reached an offset is known within one tick: `Truth.reached_bounds`).
Events after `Truth.end_ms` (members leaving at teardown, a closed static member's session
running out) are not part of the truth.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

from cgkit import CG_FAST

from corral.analyze import rules

TICK_MS = 250
STATUS_TOPIC, STATUS_PARTITIONS = "sc-status", 5
IDLE_TOPIC, IDLE_PARTITIONS = "sc-idle", 4
RATES = (4, 6, 8, 10, 12)  # records per tick, by partition of STATUS_TOPIC
BEHIND_EVERY = 4  # the laggard commits every 4th tick, one record further each time
MAX_SAMPLE_INTERVAL_MS = 500

# Kafka's names: for corral and the reference broker alike (KIP-848 sessions of 4 s, classic
# sessions down to 1 s, no initial rebalance delay).
SETTINGS = {**CG_FAST, "group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1000}
CORRAL_SETTINGS = {**SETTINGS, "corral.analytics.sample.interval.ms": 300}

KEEP, BEHIND, STALL, REWIND, STOP = "keep", "behind", "stall", "rewind", "stop"
ROLES = (KEEP, BEHIND, STALL, REWIND, STOP)
STATUS_GROUPS = {"sc-status-classic": "classic", "sc-status-consumer": "consumer"}
# Partition p of STATUS_TOPIC has role ROLES[(p + rotation) % 5] in each status group.
ROTATION = {"sc-status-classic": 0, "sc-status-consumer": 2}
MEMBER_GROUPS = {"sc-members-classic": "classic", "sc-members-consumer": "consumer"}
CLASSIC_SESSION_MS = 4000  # the killed classic member's session, as the broker's KIP-848 one
STATIC_SESSION_MS = 10000  # a closed static classic member is kept this long for its successor


@dataclass(frozen=True)
class PhasePlan:
    name: str
    min_ticks: int
    tail: int  # ticks kept after the membership changes settled
    action: str  # membership change at the phase's start
    acts: dict[str, str]  # role -> what it does in this phase (REWIND: keep up, rewind in the tail)
    expect: dict[str, str]  # role -> status at the phase's end


_ALL_KEEP = {r: KEEP for r in ROLES}
_ALL_OK = {r: "OK" for r in ROLES}
PHASES = (
    PhasePlan("steady", 12, 0, "replace_static", _ALL_KEEP, _ALL_OK),
    # 44 ticks: ten laggard commits (WARN needs the whole window lagging) and STOP well past
    # its window's span and ten samples.
    PhasePlan(
        "trouble",
        44,
        6,
        "join",
        {r: r for r in ROLES},
        {KEEP: "OK", BEHIND: "WARN", STALL: "STALL", REWIND: "REWIND", STOP: "STOP"},
    ),
    PhasePlan(
        "recover", 16, 0, "leave", {**_ALL_KEEP, BEHIND: BEHIND}, {**_ALL_OK, BEHIND: "WARN"}
    ),
    PhasePlan("settle", 16, 0, "expire", _ALL_KEEP, _ALL_OK),
)

Key = tuple[str, str, int]  # (group, topic, partition)


@dataclass(frozen=True)
class Commit:
    sent_ms: int  # before the OffsetCommit request
    acked_ms: int  # after its answer: the broker's commit timestamp is in [sent_ms, acked_ms]
    offset: int
    log_end: int  # the partition's log end then (nothing is produced while a commit is in flight)


@dataclass(frozen=True)
class Tick:
    """One production step of one partition."""

    start_ms: int  # before its first record was sent
    done_ms: int  # after every record was acknowledged
    log_end: int


@dataclass(frozen=True)
class Phase:
    name: str
    start_ms: int  # the start of its first tick
    end_ms: int  # the start of the next phase's first tick: the phase is [start_ms, end_ms)
    ticks: int
    expected: dict[Key, str]  # status of every status-group partition at its end (status_before)
    expected_group: dict[str, str]  # status of each status group at its end


@dataclass(frozen=True)
class Rebalance:
    group: str
    protocol: str
    phase: str
    cause: str  # member_joined, member_left or member_expired
    members_before: int
    members_after: int
    requested_ms: int  # the change was made (a process started, closed, killed)
    settled_ms: int  # the coordinator was seen Stable with members_after members


@dataclass(frozen=True)
class Membership:
    group: str
    protocol: str
    phase: str
    event: str  # member_joined, member_left, member_expired, member_fenced
    client_id: str
    instance_id: str | None
    requested_ms: int
    settled_ms: int


@dataclass
class Truth:
    bootstrap: str
    start_ms: int = 0
    end_ms: int = 0
    topics: dict[str, int] = field(
        default_factory=lambda: {STATUS_TOPIC: STATUS_PARTITIONS, IDLE_TOPIC: IDLE_PARTITIONS}
    )
    groups: dict[str, str] = field(default_factory=lambda: {**STATUS_GROUPS, **MEMBER_GROUPS})
    roles: dict[Key, str] = field(default_factory=dict)
    phases: list[Phase] = field(default_factory=list)
    commits: dict[Key, list[Commit]] = field(default_factory=dict)
    ticks: dict[tuple[str, int], list[Tick]] = field(default_factory=dict)
    rebalances: list[Rebalance] = field(default_factory=list)
    memberships: list[Membership] = field(default_factory=list)

    def phase(self, name: str) -> Phase:
        return next(p for p in self.phases if p.name == name)

    def commit_rows(self, key: Key) -> list[tuple[int, int]]:
        """(acked_ms, offset) of every commit of the key: the rules' commits input."""
        return [(c.acked_ms, c.offset) for c in self.commits[key]]

    def samples(self, topic: str, partition: int) -> list[tuple[int, int]]:
        """(done_ms, log_end) of every tick: exact log-end samples."""
        return [(t.done_ms, t.log_end) for t in self.ticks[(topic, partition)]]

    def log_end_bounds(self, topic: str, partition: int, time_ms: int) -> tuple[int, int]:
        """What the log end can have been at `time_ms`: at least the last tick done by then, at
        most the last tick started by then."""
        ticks = self.ticks[(topic, partition)]
        done = bisect_right(ticks, time_ms, key=lambda t: t.done_ms)
        started = bisect_right(ticks, time_ms, key=lambda t: t.start_ms)
        return (
            ticks[done - 1].log_end if done else 0,
            ticks[started - 1].log_end if started else 0,
        )

    def reached_bounds(self, topic: str, partition: int, offset: int) -> tuple[int, int] | None:
        """When the log end reached `offset`, within one tick: (start_ms, done_ms) of the tick
        that took it there; None if it never did."""
        for t in self.ticks[(topic, partition)]:
            if t.log_end >= offset:
                return t.start_ms, t.done_ms
        return None


def status_before(rows: list[tuple[int, int | str]], time_ms: int) -> str | None:
    """The status name of the last evaluation before `time_ms` (None before the first), from
    rows `(time_ms, status)` sorted by time: the rules' StatusRows (codes) or a table's rows
    (names)."""
    i = bisect_left(rows, time_ms, key=lambda r: r[0])
    return rules.STATUS_NAMES.get(rows[i - 1][1], rows[i - 1][1]) if i else None


def phase_statuses(
    truth: Truth, partitions: dict[Key, list], groups: dict[str, list]
) -> tuple[dict, dict]:
    """The status at every phase's end (status_before its end_ms) of each status-group
    partition and group, from their timelines `[(time_ms, status)]` (the rules' rows, or rows of
    `corral analyze`'s partition_status and group_status tables, sorted by time): ({(phase,
    key): status}, {(phase, group): status}), expected_statuses' shape."""
    return (
        {
            (p.name, key): status_before(partitions[key], p.end_ms)
            for p in truth.phases
            for key in truth.roles
        },
        {
            (p.name, g): status_before(groups[g], p.end_ms)
            for p in truth.phases
            for g in STATUS_GROUPS
        },
    )


def statuses_by_rules(
    truth: Truth,
    commits: dict[Key, list[tuple[int, int]]],
    samples: dict[tuple[str, int], list[tuple[int, int]]],
    burrow_compatible: bool = True,
) -> tuple[dict, dict]:
    """phase_statuses of the rules' timelines from the given commits `[(time_ms, offset)]` per
    key and log-end samples `[(time_ms, log_end)]` per partition."""
    partitions = {
        key: rules.partition_status_timeline(
            commits[key], samples[key[1:]], burrow_compatible=burrow_compatible
        )
        for key in truth.roles
    }
    groups = {
        g: rules.group_status_timeline([rows for key, rows in partitions.items() if key[0] == g])
        for g in STATUS_GROUPS
    }
    return phase_statuses(truth, partitions, groups)


def expected_statuses(truth: Truth) -> tuple[dict, dict]:
    """The truth's expectations: ({(phase, key): status}, {(phase, group): status})."""
    return (
        {(p.name, k): s for p in truth.phases for k, s in p.expected.items()},
        {(p.name, g): s for p in truth.phases for g, s in p.expected_group.items()},
    )
