"""The rate ramp of `corral load` (heartbeat, commit): its plan for a run's members and duration,
and the rates its search tries. Pure logic, no broker. (tests/wire/test_load_fixes.py runs the ramp
against a real corral.)"""

from __future__ import annotations

import pytest

from corral.load import ramp
from corral.load.cli import parse
from corral.load.scenarios import heartbeat


def heartbeat_plan(*args: str) -> ramp.RampPlan:
    params = parse(["--bootstrap", "127.0.0.1:9092", "--scenario", "heartbeat", *args])
    return ramp.up_front(heartbeat.start_rate(params), params["members"], params)


# members, duration -> factor, climb rates, confirmation and refinement steps, measured seconds
# per step, seconds in all. The time is --duration less the join (3 s of initial rebalance delay
# + 1 s per 2,000 members) and the settling (1 s per 500 members, at most a tenth of the run);
# each step is 0.25 s of warm-up (the first 1 s + 1 s per 2,000 members) + measured + 0.75 s of
# collecting.
@pytest.mark.parametrize(
    "members, duration, factor, rates, confirm, refine, step_s, total_s",
    [
        # The default run: x2 from the members' normal load (one heartbeat per 3 s) to --max-rate,
        # the first saturated rate once more, two refinement steps.
        (
            2000,
            60,
            2,
            [667, 1333, 2667, 5333, 10667, 21333, 42667, 85333, 170667, 341333, 682667],
            1,
            2,
            2.59,
            52.0,
        ),
        (
            100,
            60,
            2,
            [
                33,
                67,
                133,
                267,
                533,
                1067,
                2133,
                4267,
                8533,
                17067,
                34133,
                68267,
                136533,
                273067,
                546133,
            ],
            1,
            2,
            2.11,
            56.8,
        ),
        (
            10000,
            60,
            2,
            [3333, 6667, 13333, 26667, 53333, 106667, 213333, 426667, 853333],
            1,
            2,
            2.44,
            46.0,
        ),
        # Less time, a bigger factor: the climb still reaches --max-rate.
        (200, 30, 4, [67, 267, 1067, 4267, 17067, 68267, 273067], 1, 3, 1.33, 26.5),
        # Not all the refinement fits: the factor that narrows down most in the steps left (x16 and
        # 2 steps: within 2x; x4 would climb in 6 steps and leave 4x).
        (2000, 20, 16, [667, 10667, 170667], 1, 2, 1.04, 14.0),
        # Too little for the climb (if the group really takes 3 s to join: the plan is made again
        # when the ramp starts): as far as the time goes, x16 per step.
        (200, 10, 16, [67, 1067], 0, 0, 1.83, 6.5),
        (200, 12, 16, [67, 1067, 17067], 0, 0, 1.55, 8.5),
        # No step fits.
        (5, 3, 16, [], 0, 0, 1.0, 0.0),
    ],
)
def test_plan_for_members_and_duration(
    members, duration, factor, rates, confirm, refine, step_s, total_s
):
    plan = heartbeat_plan("--members", str(members), "--duration", str(duration))
    assert plan.factor == factor
    assert [round(r) for r in plan.rates] == rates
    assert (plan.confirm, plan.refine) == (confirm, refine)
    assert plan.steps == len(rates) + confirm + refine
    assert plan.step_s == pytest.approx(step_s, abs=0.01)
    assert plan.expected_s == pytest.approx(total_s, abs=0.1)
    assert plan.expected_s <= duration


def test_the_plan_line_says_rates_steps_and_duration():
    text = heartbeat_plan("--members", "2000", "--duration", "60").text()
    assert text == (
        "ramp plan: x2 per step from 667/s: 667, 1.3k, 2.7k, 5.3k, 11k, 21k, 43k, 85k, "
        "171k, 341k, 683k/s (up to --max-rate 1M/s), then the first saturated rate once "
        "more and up to 2 step(s) between the last good and the first saturated rate "
        "(to within 1.25x); at most 14 steps of 2.6 s measured (after a 0.25 s "
        "warm-up, the first 2 s), 52 s in all"
    )
    short = heartbeat_plan("--members", "200", "--duration", "10").text()
    assert "67, 1.1k/s (no time for more: a faster broker gets a lower bound, exit 3)" in short
    assert "no ramp step fits" in heartbeat_plan("--members", "5", "--duration", "3").text()


@pytest.mark.parametrize(
    "args, factor, rates, confirm, refine, step_s",
    [
        # Given factor and step: kept; as many steps as fit.
        (
            ["--ramp-factor", "1.5", "--step-seconds", "5", "--start-rate", "1000"],
            1.5,
            [1000, 1500, 2250, 3375, 5062, 7594, 11391, 17086, 25629],
            0,
            0,
            5.0,
        ),
        # Given a start and a ceiling: the plan covers that range.
        (
            ["--start-rate", "1000", "--max-rate", "64000"],
            2,
            [1000, 2000, 4000, 8000, 16000, 32000, 64000],
            1,
            2,
            4.6,
        ),
        # --settle-seconds comes out of the time: x4 rather than x2.
        (
            ["--settle-seconds", "30"],
            4,
            [33, 133, 533, 2133, 8533, 34133, 136533, 546133],
            1,
            3,
            1.18,
        ),
    ],
)
def test_given_parameters_are_kept(args, factor, rates, confirm, refine, step_s):
    plan = heartbeat_plan("--members", "100", "--duration", "60", *args)
    assert (plan.factor, [round(r) for r in plan.rates], plan.confirm, plan.refine) == (
        factor,
        rates,
        confirm,
        refine,
    )
    assert plan.step_s == pytest.approx(step_s, abs=0.01)


def search(
    start: float,
    factor: float,
    limit: float,
    steps: int,
    max_rate: float = 1e6,
    stalls: tuple[float, ...] = (),
):
    """The rates tried against a broker that sustains up to `limit` (and stalls once at each
    rate of `stalls`), and why it stopped."""
    s = ramp.RampSearch(start, factor, max_rate)
    tried, stalled = [], set()
    for _ in range(steps):
        rate, why = s.next_rate()
        if rate is None:
            return tried, why
        tried.append(round(rate))
        stall = round(rate) in stalls and round(rate) not in stalled
        stalled.add(round(rate))
        s.record(rate, rate <= limit and not stall)
    return tried, "steps"


@pytest.mark.parametrize(
    "start, factor, limit, stalls, tried, why",
    [
        # Climb x2 to the first saturated rate, try it once more, then halve the ratio until it is
        # within 1.25x.
        (
            667,
            2,
            80_000,
            (),
            [667, 1334, 2668, 5336, 10672, 21344, 42688, 85376, 85376, 60370, 71792],
            "refined",
        ),
        (
            100,
            16,
            80_000,
            (),
            [100, 1600, 25600, 409600, 409600, 102400, 51200, 72408, 86108],
            "refined",
        ),
        # A stall at 2,668/s: good the second time, the climb goes on.
        (
            667,
            2,
            80_000,
            (2668,),
            [667, 1334, 2668, 2668, 5336, 10672, 21344, 42688, 85376, 85376, 60370, 71792],
            "refined",
        ),
        # Nothing saturates: up to --max-rate.
        (1000, 4, 1e9, (), [1000, 4000, 16000, 64000, 256000], "max_rate"),
        # Even the start saturates (twice): halved (whatever the factor) until good, then refined.
        (1000, 16, 300, (), [1000, 1000, 500, 250, 354, 297], "refined"),
    ],
)
def test_search(start, factor, limit, stalls, tried, why):
    assert search(start, factor, limit, 20, stalls=stalls) == (tried, why)


def test_no_time_for_the_second_try():
    s = ramp.RampSearch(100, 2, 1e6)
    s.record(100, True)
    s.record(200, False)
    assert (s.saturated, s.suspect, s.next_rate()) == (None, 200, (200, "confirm"))
    s.accept_suspect()
    assert (s.good, s.saturated, s.next_rate()) == (100, 200, (141.4213562373095, "refine"))


def test_steps_grow_with_the_log_of_the_limit():
    """x2 from 100/s: log2(limit / 100) + 1 steps to saturate, 1 to confirm, 2 to narrow down."""
    steps = {limit: len(search(100, 2, limit, 50)[0]) for limit in (1_000, 10_000, 100_000)}
    assert steps == {1_000: 8, 10_000: 11, 100_000: 14}
