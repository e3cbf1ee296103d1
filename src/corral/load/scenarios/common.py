"""Member loops and the rate ramp that several scenarios share."""

from __future__ import annotations

import random
import time
from typing import Any

import trio

from ..member import GroupMember
from ..runner import SATURATED_CPU
from ..stats import percentiles

# The start of each ramp step is not measured: members are still moving to the new pace. That
# takes one member's interval at the new rate, at least WARMUP_S and at most MAX_WARMUP_S.
WARMUP_S = 1.0
MAX_WARMUP_S = 5.0
SHIP_LAG_S = 1.0


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
    """Steps a request rate up until the p99 latency or the achieved rate gives way.

    The parent drives it: each step lasts `step_s`; the figure kept is the highest rate achieved
    in a step whose p99 stayed within the bound.
    """

    def __init__(self, api: str, params: dict[str, Any], start_rate: float, default_bound_ms: float):
        self.api = api
        self.step_s = params["step_seconds"]
        self.factor = params["ramp_factor"]
        self.bound_ms = params["p99_bound_ms"] or default_bound_ms
        self.max_rate = params["max_rate"]
        self.settle_s = params["settle_seconds"]
        self.settle_started = 0.0
        self.rate = start_rate
        self.step = -1
        self.step_started = 0.0
        self.steps: list[dict[str, Any]] = []
        self.finished = False
        # Why the ramp stopped: the broker gave way ("p99_bound": a step's p99 passed the bound,
        # "rate_not_achieved": a step got < 90% of its target; saturation), "max_rate", or
        # "duration" (out of time before either: the figure is a lower bound).
        self.stopped_by: str | None = None

    def control(self, run) -> dict | str | None:
        now = time.monotonic()
        if self.step < 0:
            # Steady state first: a broker is still busy for a while after a big rebalance.
            self.settle_started = self.settle_started or now
            if now - self.settle_started < self.settle_s:
                return None
            return self._next(now)
        warmup = min(MAX_WARMUP_S, max(WARMUP_S, run.members / self.rate))
        if self.cpu_at_step_start is None and now - self.step_started >= warmup:
            self.cpu_at_step_start = (now, dict(run.cpu))
        if now - self.step_started < warmup + self.step_s + SHIP_LAG_S:
            return None
        # Samples reach the parent in batches: the newest SHIP_LAG_S are not all here yet.
        self._measure(run, self.step_started + warmup, now - SHIP_LAG_S)
        last = self.steps[-1]
        if not last["within_bound"]:
            self.stopped_by = "p99_bound"
        elif last["achieved"] < 0.9 * last["target"]:
            self.stopped_by = "rate_not_achieved"
        elif self.rate * self.factor > self.max_rate:
            self.stopped_by = "max_rate"
        elif run.elapsed() + self.step_s > run.params["duration"]:
            self.stopped_by = "duration"
        if self.stopped_by is not None:
            self.finished = True
            return "stop"
        self.rate *= self.factor
        return self._next(now)

    def _next(self, now: float) -> dict:
        self.step += 1
        self.step_started = now
        self.cpu_at_step_start = None   # taken at the first measurement after the warm-up
        return {"step": self.step, "rate": self.rate}

    def _measure(self, run, start: float, end: float) -> None:
        samples = run.recorder.samples.get(self.api)
        window = [lat for at, lat in zip(samples.at, samples.latency) if start <= at < end] \
            if samples else []
        pct = percentiles(window)
        achieved = len(window) / max(1e-9, end - start)
        # The busiest generator process during the step, as a share of one core.
        cpu = 0.0
        if self.cpu_at_step_start is not None:
            at, before = self.cpu_at_step_start
            cpu = max((run.cpu[w] - before.get(w, 0.0)) / max(1e-9, time.monotonic() - at)
                      for w in run.cpu) if run.cpu else 0.0
        self.steps.append({"step": self.step, "target": round(self.rate, 1),
                           "achieved": round(achieved, 1), "latency_ms": pct,
                           "within_bound": bool(window) and pct["p99"] <= self.bound_ms,
                           "generator_cpu_busiest_worker": round(cpu, 3)})

    def summary(self, run) -> dict[str, Any]:
        # Not stopped by the ramp itself: the run's --duration ran out (or a failure stopped it).
        stopped_by = self.stopped_by or ("duration" if run.metrics.get("timed_out") else "failure")
        good = [s for s in self.steps if s["within_bound"] and s["achieved"] >= 0.9 * s["target"]]
        best = max(good, key=lambda s: s["achieved"], default=None)
        last = self.steps[-1] if self.steps else None
        return {"sustained_per_s": best["achieved"] if best else 0.0,
                "stopped_by": stopped_by,
                "saturation_reached": stopped_by in ("p99_bound", "rate_not_achieved"),
                "at_latency_ms": best["latency_ms"] if best else None,
                "p99_bound_ms": self.bound_ms,
                # If the generator was this busy when the ramp stopped, the limit may be its own.
                "generator_saturated_at_limit": bool(
                    last and last["generator_cpu_busiest_worker"] > SATURATED_CPU),
                "steps": self.steps}


def add_ramp_arguments(parser) -> None:
    parser.add_argument("--step-seconds", type=float, default=5.0,
                        help="measured length of a ramp step (after its warm-up)")
    parser.add_argument("--ramp-factor", type=float, default=1.5, help="rate multiplier per step")
    parser.add_argument("--p99-bound-ms", type=float, default=None,
                        help="the ramp stops at the first step whose p99 latency passes this "
                             "(default: heartbeat 50, commit 100)")
    parser.add_argument("--max-rate", type=float, default=1e6, help="highest rate tried (per s)")
    parser.add_argument("--settle-seconds", type=float, default=10.0,
                        help="seconds between the group becoming stable and the first step")
    parser.add_argument("--start-rate", type=float, default=None,
                        help="first step's rate (per s); default: one per member per heartbeat "
                             "interval")


async def paced(ctx, rate_of_phase, action) -> None:
    """Calls `action()` at the per-member rate of the current phase, closed loop (a member never
    has two requests out, and a late member does not burst to catch up)."""
    next_at = time.monotonic() + random.uniform(0, 1 / max(1e-9, rate_of_phase()))
    while True:
        now = time.monotonic()
        if next_at > now:
            await trio.sleep(next_at - now)
        await action()
        next_at = max(next_at + 1 / max(1e-9, rate_of_phase()), time.monotonic())
