"""churn: members leave and come back at a rate while the others heartbeat.

Reported: rebalances completed, share of the time the group spent rebalancing (not every member
holding an assignment), members that left and rejoined, errors by code.

KIP-848 members leave with epoch -1 and rejoin at epoch 0 under the same member id, as a Java
consumer does after unsubscribe() and subscribe(). With --faults-url (a corral), the picked
members do not leave: the coordinator fences them (a classic member's session expires) through
the faults API, and they rejoin when their next heartbeat is refused, as after a long pause. A rebalance completed is an epoch at which every
member in the group met with every partition owned once; the group rebalances while not.
"""

from __future__ import annotations

import random

import trio

from corral.load.checks import ConsumerLedger
from corral.load.scenarios.common import add_faults_url, fence_through_api, stay_in_group
from corral.network.apis import ApiKey

NAME = "churn"
HELP = "members leave and rejoin at a rate while the rest heartbeat; rebalances and their cost"
REQUIRED_APIS = {
    ApiKey.JOIN_GROUP,
    ApiKey.SYNC_GROUP,
    ApiKey.HEARTBEAT,
    ApiKey.LEAVE_GROUP,
    ApiKey.METADATA,
}


def add_arguments(parser) -> None:
    parser.add_argument("--churn-rate", type=float, default=1.0, help="members leaving per second")
    parser.add_argument(
        "--rejoin-delay",
        type=float,
        default=1.0,
        help="seconds a member stays away before joining again",
    )
    add_faults_url(parser)


def topic_partitions(params) -> int:
    return params["members"]


async def _cycle(ctx, member) -> None:
    """Stay in the group until picked to leave; leave, stay away a while, come back. With
    --faults-url: stay in the group, and when picked, be fenced (and rejoin when told)."""
    leave_requests = ctx.scratch.setdefault("leave_requests", {})
    url = ctx.params["faults_url"]
    if url:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stay_in_group, ctx, member)
            while True:
                leave_requests[member] = picked = trio.Event()
                await picked.wait()
                give_up = getattr(member, "give_up", None)  # KIP-848 (see there)
                if give_up is not None:
                    give_up()
                if await fence_through_api(url, ctx.params["group"], member.member_id):
                    ctx.recorder.counts["fenced_and_rejoined"] += 1
    while True:
        leave_requests[member] = picked = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stay_in_group, ctx, member)
            await picked.wait()
            nursery.cancel_scope.cancel()
        await member.leave()
        ctx.recorder.counts["left_and_rejoined"] += 1
        await trio.sleep(ctx.params["rejoin_delay"])


async def run_member(ctx, member, index: int) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_cycle, ctx, member)
        if index == ctx.plan.first_member:
            nursery.start_soon(_churn_driver, ctx)


async def _churn_driver(ctx) -> None:
    """One per worker: its share of the churn rate, picked among its stable members."""
    while "churn" not in ctx.phase:
        await ctx.phase_changed.wait()
    share = ctx.plan.member_count / ctx.plan.total_members
    while True:
        await trio.sleep(random.expovariate(ctx.params["churn_rate"] * share))
        candidates = [m for m in ctx.members if m.stable]
        if candidates:
            ctx.scratch["leave_requests"][random.choice(candidates)].set()


def _rebalancing(run) -> bool:
    if isinstance(run.ledger, ConsumerLedger):
        return not run.ledger.converged_now()
    return run.stable_members < run.members  # a classic member rejoining holds nothing


def control(run):
    if "churn" not in run.phase:
        if run.ledger.stable_generation(run.members) is None:
            return None
        run.state["churn_started"] = run.elapsed()
        run.state["generation_at_start"] = run.ledger.newest_generation()
        run.state["ticks"] = run.state["rebalancing_ticks"] = 0
        return {"churn": True}
    run.state["ticks"] += 1
    run.state["rebalancing_ticks"] += _rebalancing(run)
    return None  # churn goes on until --duration, the bound of the whole run, runs out


def summary(run) -> dict:
    start = run.state.get("churn_started")
    if start is None:
        return {"members": run.members, "churn_started": False}
    ticks, at_start = run.state["ticks"], run.state["generation_at_start"]
    return {
        "members": run.members,
        # What is left of --duration once the group was first stable: the churn's own window.
        "churn_seconds": round(min(run.elapsed(), run.params["duration"]) - start, 3),
        "rebalances_completed": len([g for g in run.ledger.completed() if g > at_start]),
        "generations_seen": len([g for g in run.ledger.generations() if g > at_start]),
        "time_in_rebalance_share": round(run.state["rebalancing_ticks"] / ticks, 3)
        if ticks
        else None,
        "left_and_rejoined": run.recorder.counts.get("left_and_rejoined", 0),
        "fenced_and_rejoined": run.recorder.counts.get("fenced_and_rejoined", 0),
    }
