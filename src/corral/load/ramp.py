"""The plan of a rate ramp (heartbeat, commit) and the search it runs: pure logic, no I/O.

The ramp climbs geometrically from a rate the members surely sustain (the heartbeat scenario: one
heartbeat per member per interval, their normal load), multiplying it by the factor each step,
until a step saturates the broker (p99 past the bound, or less than 90 % of the target achieved)
or the next rate would pass --max-rate. That rate is tried once more (on a busy machine one stall
of 80 ms passes the p99 of a step at 667/s: not saturation); saturated again, the ramp halves the
gap, in ratio, between the last good and the first saturated rate (their geometric mean) until
they are within PRECISION of each other. The number of steps is logarithmic in the broker's
limit: from 667/s, x2 per step, a broker doing 80,000/s saturates at the 8th step, and the 9th
confirms it, two more narrow it to within 1.19x.

The plan fits the run's time: the smallest factor of FACTORS whose climb to --max-rate, the
confirmation and the refinement fit in the time left (at MIN_STEP_S measured per step), else, of
those whose climb fits, the one whose steps left narrow the limit down most, else the largest;
then the step length is the time left divided by the steps, within MIN_STEP_S-MAX_STEP_S
measured. A run whose time fits the whole plan ends by saturation or at --max-rate, never for
lack of time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

FACTORS = (2.0, 3.0, 4.0, 8.0, 16.0)
PRECISION = 1.25  # refine until the first saturated rate is within this of the last good one
WARMUP_S = 0.25  # the start of a step is not measured (members move to the new pace at once)
# ... the first's is longer: members leave their join loops for the ramp's (a worker spends
# about 0.3 ms on each member's move on a busy machine, answering nothing meanwhile).
FIRST_WARMUP_S = 1.0
FIRST_WARMUP_PER_MEMBER_S = 1 / 2000
MAX_FIRST_WARMUP_S = 5.0
COLLECT_S = 0.75  # after a step, its last samples reach the parent (workers ship every 0.5 s)
MIN_STEP_S = 1.0  # measured seconds of a step, at least
MAX_STEP_S = 5.0  # ... and at most, when the run leaves more time than the plan needs
MAX_SETTLE_S = 10.0
SETTLE_PER_MEMBER_S = 1 / 500
INITIAL_REBALANCE_DELAY_S = 3.0  # Kafka's default group.initial.rebalance.delay.ms
JOINS_PER_S = 2000.0  # a conservative pace for N members to join a new group


def settle_default(duration: float, members: int) -> float:
    """Seconds between the group becoming stable and the first step (a broker stays busy for a
    while after a big rebalance): 1 s per 500 members, at most a tenth of the run and
    MAX_SETTLE_S."""
    return min(MAX_SETTLE_S, duration / 10, members * SETTLE_PER_MEMBER_S)


def first_warmup(members: int) -> float:
    return min(MAX_FIRST_WARMUP_S, FIRST_WARMUP_S + members * FIRST_WARMUP_PER_MEMBER_S)


def settle_seconds(params: dict[str, Any], members: int) -> float:
    """--settle-seconds, or its default."""
    given = params.get("settle_seconds")
    return settle_default(params["duration"], members) if given is None else given


def join_estimate(members: int, joins: bool = True) -> float:
    """Seconds until a new group of `members` is stable, for the plan made before it is."""
    return INITIAL_REBALANCE_DELAY_S + members / JOINS_PER_S if joins else 0.0


def climb(start: float, factor: float, max_rate: float) -> list[float]:
    """The climb's rates: start x factor^k up to max_rate (at least the start, capped by it)."""
    rates = [min(start, max_rate)]
    while rates[-1] * factor <= max_rate * (1 + 1e-9):
        rates.append(rates[-1] * factor)
    return rates


def refine_steps(factor: float) -> int:
    """Steps that narrow a ratio of `factor` to PRECISION by halving it (geometrically)."""
    if factor <= PRECISION:
        return 0
    return math.ceil(math.log2(math.log(factor) / math.log(PRECISION)) - 1e-9)


@dataclass
class RampPlan:
    start: float
    factor: float
    max_rate: float
    rates: list[float]  # the climb's rates, as far as the time allows
    confirm: int  # 1: the first saturated rate is tried again (if the time allows)
    refine: int  # refinement steps after that, as far as the time allows
    step_s: float  # measured seconds per step
    seconds: float  # the time the plan was made for
    first_warmup_s: float  # the first step's warm-up (`first_warmup`)

    @property
    def steps(self) -> int:
        return len(self.rates) + self.confirm + self.refine

    @property
    def step_total_s(self) -> float:
        return WARMUP_S + self.step_s + COLLECT_S

    @property
    def expected_s(self) -> float:
        """The longest the ramp takes (every step run): less when the broker saturates early."""
        extra = self.first_warmup_s - WARMUP_S if self.steps else 0.0
        return self.steps * self.step_total_s + extra

    @property
    def reaches_max_rate(self) -> bool:
        return self.rates[-1] * self.factor > self.max_rate * (1 + 1e-9) if self.rates else False

    def describe(self) -> dict[str, Any]:
        return {
            "start_rate": round(self.start, 1),
            "factor": self.factor,
            "max_rate": self.max_rate,
            "rates": [round(r, 1) for r in self.rates],
            "confirm_steps": self.confirm,
            "refine_steps": self.refine,
            "step_seconds": round(self.step_s, 2),
            "warmup_seconds": WARMUP_S,
            "expected_seconds": round(self.expected_s, 1),
        }

    def text(self) -> str:
        if not self.rates:
            return (
                f"no ramp step fits in the {max(0.0, self.seconds):.1f} s left: the figure "
                "will be a lower bound; give the run a longer --duration"
            )
        shown = ", ".join(short_rate(r) for r in self.rates)
        top = (
            f"up to --max-rate {short_rate(self.max_rate)}/s"
            if self.reaches_max_rate
            else "no time for more: a faster broker gets a lower bound, exit 3"
        )
        refine = (", then the first saturated rate once more" if self.confirm else "") + (
            f" and up to {self.refine} step(s) between the last good and the first saturated "
            f"rate (to within {PRECISION:g}x)"
            if self.refine
            else ""
        )
        steps = f"{self.steps} step{'s' if self.steps > 1 else ''}"
        return (
            f"ramp plan: x{self.factor:g} per step from {self.start:,.0f}/s: {shown}/s "
            f"({top}){refine}; at most {steps} of {self.step_s:.1f} s measured (after a "
            f"{WARMUP_S:g} s warm-up, the first {self.first_warmup_s:.2g} s), "
            f"{self.expected_s:.0f} s in all"
        )


def plan(
    start: float,
    max_rate: float,
    seconds: float,
    factor: float | None = None,
    step_s: float | None = None,
    members: int = 0,
) -> RampPlan:
    """The ramp to run in `seconds` (see the module's doc). `factor`, `step_s`: as given by the
    user, else chosen to fit."""
    overhead = WARMUP_S + COLLECT_S
    seconds_for_steps = seconds - (first_warmup(members) - WARMUP_S)
    fit = max(0, math.floor((seconds_for_steps + 1e-9) / ((step_s or MIN_STEP_S) + overhead)))
    candidates = [factor] if factor else list(FACTORS)
    whole = [g for g in candidates if len(climb(start, g, max_rate)) + 1 + refine_steps(g) <= fit]
    # Else the factor that narrows the limit down most in the steps left after its climb and
    # the confirmation.
    climbing = sorted(
        (g ** (0.5 ** max(0, fit - len(climb(start, g, max_rate)) - 1)), g)
        for g in candidates
        if len(climb(start, g, max_rate)) <= fit
    )
    chosen = whole[0] if whole else climbing[0][1] if climbing else candidates[-1]
    rates = climb(start, chosen, max_rate)[:fit]
    confirm = min(1, fit - len(rates))
    refine = min(refine_steps(chosen), fit - len(rates) - confirm)
    steps = len(rates) + confirm + refine
    if step_s is None:
        step_s = (
            min(MAX_STEP_S, max(MIN_STEP_S, seconds_for_steps / steps - overhead))
            if steps
            else MIN_STEP_S
        )
    return RampPlan(
        start, chosen, max_rate, rates, confirm, refine, step_s, seconds, first_warmup(members)
    )


def up_front(
    start: float, members: int, params: dict[str, Any], joins: bool = True, elapsed: float = 0.0
) -> RampPlan:
    """The plan said when a run starts: for the time --duration leaves after the group's join
    (estimated: `join_estimate`) and its settling. When the ramp starts it is made again for
    the time actually left."""
    before = join_estimate(members, joins) + settle_seconds(params, members)
    return plan(
        start,
        params["max_rate"],
        params["duration"] - elapsed - before,
        params.get("ramp_factor"),
        params.get("step_seconds"),
        members,
    )


def short_rate(rate: float) -> str:
    if rate < 1000:
        return f"{rate:.0f}"
    if rate < 10_000:
        return f"{rate / 1000:.1f}k"
    if rate < 1_000_000:
        return f"{rate / 1000:.0f}k"
    return f"{rate / 1_000_000:.2g}M"


@dataclass
class RampSearch:
    """The rates a ramp tries: the climb, the first saturated rate once more (`suspect`), then
    halving between the last good (`good`) and the first saturated (`saturated`) rate; when even
    the start saturates, halving it until a rate is good."""

    start: float
    factor: float
    max_rate: float
    good: float | None = None
    saturated: float | None = None
    suspect: float | None = None
    tried: list[tuple[float, bool]] = field(default_factory=list)

    def record(self, rate: float, good: bool) -> None:
        self.tried.append((rate, good))
        if good:
            self.good = rate if self.good is None else max(self.good, rate)
            self.suspect = None
        elif self.saturated is None and self.suspect is None:
            self.suspect = rate  # tried once more before it counts
        else:
            self.saturated = rate if self.saturated is None else min(self.saturated, rate)
            self.suspect = None

    def accept_suspect(self) -> None:
        """No time to try the suspect again: its one saturated step stands."""
        if self.suspect is not None:
            self.saturated, self.suspect = self.suspect, None

    @property
    def phase(self) -> str:
        """The phase of the next step (of the step being measured, before `record`)."""
        if self.saturated is None:
            return "climb" if self.suspect is None else "confirm"
        return "refine" if self.good is not None else "descend"

    def next_rate(self) -> tuple[float | None, str]:
        """The next step's rate, or None with why the search is over ("max_rate", "refined")."""
        if not self.tried:
            return min(self.start, self.max_rate), "climb"
        if self.suspect is not None:
            return self.suspect, "confirm"
        if self.saturated is None:
            rate = self.tried[-1][0] * self.factor
            if rate > self.max_rate * (1 + 1e-9):
                return None, "max_rate"
            return rate, "climb"
        if self.good is None:
            return self.saturated / 2, "descend"
        if self.saturated / self.good <= PRECISION * (1 + 1e-9):
            return None, "refined"
        return math.sqrt(self.good * self.saturated), "refine"
