"""commit: stable members commit offsets of their P partitions; the commit rate ramps up.

Each member owns P partitions (the topic has N x P). Offsets committed are microsecond timestamps,
so they only grow across all members and processes; every few commits a member reads its offsets
back (OffsetFetch): a value other than the acknowledged one (or lower, after a rebalance moved the
partition) is a violation.
"""

from __future__ import annotations

import time

import trio

from corral.load.scenarios.common import Ramp, add_ramp_arguments, member_rate, paced, stay_in_group
from corral.network.apis import ApiKey

NAME = "commit"
HELP = "members commit offsets of P partitions each at a ramping rate; commits/s and latency"
REQUIRED_APIS = {
    ApiKey.JOIN_GROUP,
    ApiKey.SYNC_GROUP,
    ApiKey.HEARTBEAT,
    ApiKey.METADATA,
    ApiKey.OFFSET_COMMIT,
    ApiKey.OFFSET_FETCH,
}


def add_arguments(parser) -> None:
    add_ramp_arguments(parser)
    parser.add_argument("--partitions-per-member", type=int, default=10)
    parser.add_argument(
        "--verify-every",
        type=int,
        default=10,
        help="read offsets back after every Nth commit of a member",
    )


def topic_partitions(params) -> int:
    return params["members"] * params["partitions_per_member"]


async def verify(ctx, member, acknowledged: dict, mark) -> None:
    """`mark`: the member's ownership mark when it committed (see GroupMember.ownership_mark)."""
    fetched = await member.fetch_offsets(list(acknowledged))
    if fetched is None:
        return
    for tp, offset in acknowledged.items():
        got = fetched.get(tp, -1)
        # Partitions not moved since: nobody else may have committed this partition since.
        if got < offset or (got != offset and member.ownership_mark() == mark):
            ctx.violations.add(
                f"{member.member_id}: {tp[0]}-{tp[1]} read back {got}, acknowledged {offset}"
            )


async def run_member(ctx, member, index: int) -> None:
    commits = 0

    async def commit_once() -> None:
        nonlocal commits
        if not member.stable or not member.assignment:
            return
        mark = member.ownership_mark()
        offset = int(time.monotonic() * 1e6)
        offsets = {(t, p): offset for t, ps in member.assignment.items() for p in ps}
        acknowledged = await member.commit(offsets)
        ctx.recorder.counts["offsets_committed"] += len(acknowledged)
        commits += 1
        if acknowledged and commits % ctx.params["verify_every"] == 0:
            await verify(ctx, member, acknowledged, mark)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(stay_in_group, ctx, member)
        while "rate" not in ctx.phase:
            await ctx.phase_changed.wait()
        nursery.start_soon(paced, ctx, lambda: member_rate(ctx, ctx.phase["rate"]), commit_once)


def _ramp(run) -> Ramp:
    if "ramp" not in run.state:
        run.state["ramp"] = Ramp(
            "OFFSET_COMMIT", run, run.params["start_rate"] or run.members, default_bound_ms=100
        )
    return run.state["ramp"]


def control(run):
    ramp = _ramp(run)  # made, and its plan said, as the run starts
    if "rate" not in run.phase and run.ledger.stable_generation(run.members) is None:
        return None
    return ramp.control(run)


def summary(run) -> dict:
    return {
        "members": run.members,
        "partitions_per_member": run.params["partitions_per_member"],
        **_ramp(run).summary(run),
    }
