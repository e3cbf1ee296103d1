"""Member loops, the rate ramp and the faults API calls that several scenarios share."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import trio

from corral.load import ramp
from corral.load.member import GroupMember
from corral.load.runner import SATURATED_CPU
from corral.load.stats import percentiles

# A step's samples are waited for at most this long after its end (a worker that stopped
# shipping must not hold the ramp up).
MAX_COLLECT_S = 2.0
# The achieved rate is judged (90 % of the target) only when each member was due this many
# times in the measured window: members start at random points of their interval, so a
# window shorter than a few intervals counts each member once or not at all (200 members at
# 67/s over 1 s: 71 expected, +-7). Below that rate the p99 bound decides: a closed-loop member
# falls behind only when its latency passes its interval, which is then longer than the bound.
JUDGED_ROUNDS = 4


async def stay_in_group(ctx, member: GroupMember, interval_s: float | None = None) -> None:
    """Join, then heartbeat every interval (rejoining whenever told to), until cancelled. The
    member may shorten or lengthen the interval (a KIP-848 member heartbeats at the broker's
    interval, and at once to acknowledge a new assignment)."""
    interval = interval_s or ctx.params["heartbeat_interval_ms"] / 1000
    while True:
        if not member.stable:
            await member.join()
            await trio.sleep(member.next_heartbeat_in(interval, joined=True))
            continue
        await member.heartbeat()
        await trio.sleep(member.next_heartbeat_in(interval))


def member_rate(ctx, total_rate: float) -> float:
    """Requests/s one member must send for the whole group to send `total_rate`."""
    return total_rate / ctx.plan.total_members


class Ramp:
    """Runs a ramp (ramp.py: the plan, the rates it tries) against the broker, driven by the
    parent twice a second: the group settles, then each step runs the rate for a warm-up and
    the plan's measured seconds; its p99 and achieved rate, once every worker has shipped its
    samples, decide the next rate. The figure kept is the highest rate achieved in a step whose
    p99 stayed within the bound and that achieved 90 % of its target (see JUDGED_ROUNDS). The
    plan is said up front (run.note), made again for the time actually left when the ramp
    starts, and each step is reported as it ends."""

    def __init__(
        self, api: str, run, start_rate: float, default_bound_ms: float, joins: bool = True
    ):
        params = run.params
        self.api = api
        self.bound_ms = params["p99_bound_ms"] or default_bound_ms
        self.start_rate = start_rate
        self.settle_s = ramp.settle_seconds(params, run.members)
        self.settle_started = 0.0
        self.plan = ramp.up_front(start_rate, run.members, params, joins, run.elapsed())
        run.note(self.plan.text())
        self.search = ramp.RampSearch(start_rate, self.plan.factor, params["max_rate"])
        self.rate = 0.0
        self.step = -1
        self.window = (0.0, 0.0)
        self.cpu_at_step_start: tuple[float, dict] | None = None
        self.steps: list[dict[str, Any]] = []
        # Why the climb ended: the step that confirmed saturation: "p99_bound" (its p99 passed
        # the bound) or "rate_not_achieved" (< 90 % of its target); else "max_rate", or
        # "duration" (out of time before either: the figure is a lower bound).
        self.saturated_by: str | None = None
        self.stopped_by: str | None = None

    def control(self, run) -> dict | str | None:
        now = time.monotonic()
        if self.step < 0:
            # Steady state first: a broker is still busy for a while after a big rebalance.
            self.settle_started = self.settle_started or now
            if now - self.settle_started < self.settle_s:
                return None
            return self._begin(run, now)
        start, end = self.window
        if self.cpu_at_step_start is None and now >= start:
            self.cpu_at_step_start = (now, dict(run.cpu))
        # Samples reach the parent in batches: measured once every worker shipped past the end.
        shipped = min(run.shipped_at.values()) if len(run.shipped_at) == run.workers else 0.0
        if now < end or (shipped < end and now < end + MAX_COLLECT_S):
            return None
        last = self._measure(run, start, end)
        self.search.record(self.rate, last["good"])
        out_of_time = run.elapsed() + self.plan.step_total_s > run.params["duration"]
        if out_of_time:
            self.search.accept_suspect()
        if self.search.saturated is not None and self.saturated_by is None:
            self.saturated_by = "p99_bound" if not last["within_bound"] else "rate_not_achieved"
        run.note(self._step_line(last))
        rate, why = self.search.next_rate()
        if rate is None:
            return self._finish(run, why)
        if out_of_time:
            return self._finish(run, "duration")
        self.rate = rate
        return self._next(now)

    def _begin(self, run, now: float) -> dict:
        planned = self.plan
        params = run.params
        self.plan = ramp.plan(
            self.start_rate,
            params["max_rate"],
            params["duration"] - run.elapsed(),
            params["ramp_factor"],
            params["step_seconds"],
            run.members,
        )
        self.search.factor = self.plan.factor
        if not self.plan.rates:
            # Members still do the scenario's work (and its checks) at the first rate until the
            # run ends, unmeasured.
            run.note(f"ramp starts: {self.plan.text()}; the first rate runs until the end")
        elif (self.plan.factor, self.plan.rates, self.plan.refine) != (
            planned.factor,
            planned.rates,
            planned.refine,
        ):
            run.note(
                f"ramp starts, planned again for the {self.plan.seconds:.1f} s left: "
                f"{self.plan.text()}"
            )
        else:
            run.note(
                f"ramp starts: {self.plan.steps} steps of {self.plan.step_s:.1f} s measured "
                f"fit in the {self.plan.seconds:.1f} s left"
            )
        self.rate = self.search.next_rate()[0]
        return self._next(now)

    def _next(self, now: float) -> dict:
        self.step += 1
        warmup = self.plan.first_warmup_s if self.step == 0 else ramp.WARMUP_S
        self.window = (now + warmup, now + warmup + self.plan.step_s)
        self.cpu_at_step_start = None  # taken at the first look after the warm-up
        return {"step": self.step, "rate": self.rate}

    def _finish(self, run, why: str) -> str:
        self.stopped_by = why
        run.note(self._end_line())
        return "stop"

    def _measure(self, run, start: float, end: float) -> dict[str, Any]:
        samples = run.recorder.samples.get(self.api)
        window = (
            [lat for at, lat in zip(samples.at, samples.latency) if start <= at < end]
            if samples
            else []
        )
        pct = percentiles(window)
        achieved = len(window) / max(1e-9, end - start)
        # The busiest generator process during the step, as a share of one core.
        cpu = 0.0
        if self.cpu_at_step_start is not None:
            at, before = self.cpu_at_step_start
            cpu = (
                max(
                    (run.cpu[w] - before.get(w, 0.0)) / max(1e-9, time.monotonic() - at)
                    for w in run.cpu
                )
                if run.cpu
                else 0.0
            )
        within = bool(window) and pct["p99"] <= self.bound_ms
        judged = self.rate * (end - start) >= JUDGED_ROUNDS * run.members
        self.steps.append(
            {
                "step": self.step,
                "phase": self.search.phase,
                "target": round(self.rate, 1),
                "achieved": round(achieved, 1),
                "latency_ms": pct,
                "within_bound": within,
                "good": within and (achieved >= 0.9 * self.rate or not judged),
                "generator_cpu_busiest_worker": round(cpu, 3),
            }
        )
        return self.steps[-1]

    def _step_line(self, step: dict[str, Any]) -> str:
        pct = step["latency_ms"]
        verdict = (
            "ok"
            if step["good"]
            else f"saturated (p99 over {self.bound_ms:g} ms)"
            if not step["within_bound"]
            else "saturated (under 90 % of the target achieved)"
        )
        if self.search.suspect is not None:
            verdict += ": once more, to tell a stall from saturation"
        return (
            f"step {step['step'] + 1}/{max(self.plan.steps, step['step'] + 1)} "
            f"({step['phase']}): "
            f"{step['target']:,.0f}/s -> {step['achieved']:,.0f}/s achieved, "
            f"p50 {pct.get('p50', 0):.1f} ms, p99 {pct.get('p99', 0):.1f} ms: {verdict}"
        )

    def _end_line(self) -> str:
        best = self._best()
        sustained = f"{best['achieved']:,.0f}/s" if best else "nothing"
        if self.search.saturated is not None:
            return (
                f"ramp done: {sustained} sustained within p99 {self.bound_ms:g} ms; "
                f"{self.search.saturated:,.0f}/s saturated the broker"
            )
        if self.stopped_by == "max_rate":
            return f"ramp done: {sustained} sustained, --max-rate reached without saturation"
        return (
            f"ramp out of time after {len(self.steps)} step(s): {sustained} is a lower bound "
            "of the broker's limit"
        )

    def _best(self) -> dict[str, Any] | None:
        return max((s for s in self.steps if s["good"]), key=lambda s: s["achieved"], default=None)

    def summary(self, run) -> dict[str, Any]:
        # Not stopped by the ramp itself: the run's --duration ran out (or a failure stopped it).
        stopped_by = (
            self.saturated_by
            or self.stopped_by
            or ("duration" if run.metrics.get("timed_out") else "failure")
        )
        best = self._best()
        last = self.steps[-1] if self.steps else None
        return {
            "sustained_per_s": best["achieved"] if best else 0.0,
            "stopped_by": stopped_by,
            "saturation_reached": stopped_by in ("p99_bound", "rate_not_achieved"),
            # The broker's limit lies between these targets (when both are known).
            "limit_between": [self.search.good, self.search.saturated],
            "at_latency_ms": best["latency_ms"] if best else None,
            "p99_bound_ms": self.bound_ms,
            # If the generator was this busy when the ramp stopped, the limit may be its own.
            "generator_saturated_at_limit": bool(
                last and last["generator_cpu_busiest_worker"] > SATURATED_CPU
            ),
            "plan": self.plan.describe(),
            "steps": self.steps,
        }


def add_ramp_arguments(parser) -> None:
    parser.add_argument(
        "--step-seconds",
        type=float,
        default=None,
        help="measured length of a ramp step (after its warm-up); default: "
        "the time left divided by the plan's steps, 1-5 s",
    )
    parser.add_argument(
        "--ramp-factor",
        type=float,
        default=None,
        help="rate multiplier per step of the climb; default: the smallest of "
        "2, 3, 4, 8, 16 whose plan fits in --duration",
    )
    parser.add_argument(
        "--p99-bound-ms",
        type=float,
        default=None,
        help="a step whose p99 latency passes this saturates the broker "
        "(default: heartbeat 50, commit 100)",
    )
    parser.add_argument("--max-rate", type=float, default=1e6, help="highest rate tried (per s)")
    parser.add_argument(
        "--settle-seconds",
        type=float,
        default=None,
        help="seconds between the group becoming stable and the first step; "
        "default: 1 per 500 members, at most a tenth of --duration and 10",
    )
    parser.add_argument(
        "--start-rate",
        type=float,
        default=None,
        help="first step's rate (per s); default: heartbeat one per member per "
        "heartbeat interval, commit one per member per second",
    )


async def paced(ctx, rate_of_phase, action) -> None:
    """Calls `action()` at the per-member rate of the current phase, closed loop (a member never
    has two requests out, and a late member does not burst to catch up). A new phase moves the
    member to its pace at once: its next call comes within one interval at the new rate."""
    next_at = time.monotonic() + random.uniform(0, 1 / max(1e-9, rate_of_phase()))
    while True:
        now = time.monotonic()
        if next_at > now:
            phase = ctx.phase
            await ctx.sleep_or_phase(next_at - now)
            if ctx.phase is not phase:
                interval = 1 / max(1e-9, rate_of_phase())
                next_at = time.monotonic() + random.uniform(0, interval)
            continue
        await action()
        next_at = max(next_at + 1 / max(1e-9, rate_of_phase()), time.monotonic())


def add_faults_url(parser) -> None:
    parser.add_argument(
        "--faults-url",
        default=None,
        metavar="URL",
        help="a corral's faults API (docs/faults.md): failover moves the coordinator and churn "
        "fences members through it, instead of a restart command and leaving",
    )


class CoordinatorMove:
    """Unloads the group's coordinator shard through the faults API for `ms` (corral answers
    NOT_COORDINATOR meanwhile, then loads it back from its log): a restart of the coordinator
    without restarting the broker. Polled as a restart command's process is: None until the
    shard is back, then 0 (1 if the API refused)."""

    def __init__(self, url: str, group: str, ms: int):
        from corral.faults.client import FaultsClient  # only runs that ask for it load it

        self.done_at = time.monotonic() + ms / 1000
        self.code: int | None = None
        self.error: str | None = None

        def call() -> None:
            try:
                FaultsClient(url).unload(group, duration_ms=ms)
            except Exception as e:
                self.code, self.error = 1, str(e)

        threading.Thread(target=call, daemon=True).start()

    def poll(self) -> int | None:
        if self.code is not None:
            return self.code
        if time.monotonic() < self.done_at:
            return None
        self.code = 0
        return 0


async def fence_through_api(url: str, group: str, member_id: str) -> bool:
    """Fences one member (a consumer group's) or expires its session (a classic group's), as
    the coordinator does when a session times out; the member finds out on its next request.
    False when the coordinator no longer knew the member (it was rejoining meanwhile)."""
    from corral.faults.client import FaultsApiError, FaultsClient

    def fence() -> bool:
        try:
            FaultsClient(url).fence(group, member_id)
        except FaultsApiError as e:
            if e.kafka_error != "UNKNOWN_MEMBER_ID":
                raise
            return False
        return True

    return await trio.to_thread.run_sync(fence)
