"""heartbeat: N stable members heartbeat; the rate ramps up until the broker saturates (p99
latency past a bound, or the rate not achieved), then narrows down on the limit (load/ramp.py).

Reported: the highest heartbeats/s sustained within the bound, and latency percentiles per step.
`--skip-join` heartbeats with a made-up member id and generation, for servers that answer only
Heartbeat (the ceiling server in benches/heartbeat-ceiling).

KIP-848 members ramp their incremental ConsumerGroupHeartbeat (GroupId, MemberId, MemberEpoch)
from the broker's interval, their normal load, up; an answer that assigns or fences is acted on
as at the normal interval, and ownership is checked throughout.
"""

from __future__ import annotations

import trio

from corral.load.heartbeat_pump import HeartbeatPump
from corral.load.probe import LoadError
from corral.load.scenarios.common import Ramp, add_ramp_arguments, member_rate, stay_in_group
from corral.network.apis import ApiKey

NAME = "heartbeat"
HELP = "stable members heartbeat at a ramping rate; sustained heartbeats/s within a p99 bound"
REQUIRED_APIS = {ApiKey.HEARTBEAT}
JOIN_APIS = {ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.METADATA}


def add_arguments(parser) -> None:
    add_ramp_arguments(parser)
    parser.add_argument(
        "--skip-join",
        action="store_true",
        help="do not join: heartbeat with a fixed member id (ceiling server)",
    )


def required_apis(params) -> set:
    if params.get("skip_join") and params.get("group_protocol") == "consumer":
        raise LoadError(
            "--skip-join heartbeats classic Heartbeat frames: not with --group-protocol consumer"
        )
    return REQUIRED_APIS if params.get("skip_join") else REQUIRED_APIS | JOIN_APIS


def topic_partitions(params) -> int:
    return params["members"]


async def run_member(ctx, member, index: int) -> None:
    if ctx.params["skip_join"]:
        member.member_id, member.generation, member.stable = f"corral-load-{index}", 1, True
        while "rate" not in ctx.phase:
            await ctx.phase_changed.wait()
    else:
        # Join and stay in the group at the normal interval until the ramp starts.
        with trio.CancelScope() as waiting:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(stay_in_group, ctx, member)
                while "rate" not in ctx.phase:
                    await ctx.phase_changed.wait()
                waiting.cancel()

    if "pump" not in ctx.scratch:
        ctx.scratch["pump"] = HeartbeatPump(
            ctx.recorder, lambda: member_rate(ctx, ctx.phase["rate"])
        )
    while True:
        if member.stable or ctx.params["skip_join"]:
            # Returns at an answer that changes something (an error; KIP-848: an epoch or
            # assignment), or a lost connection: react, then go on.
            if not await member.heartbeats(ctx.scratch["pump"]) and not ctx.params["skip_join"]:
                continue
            await trio.sleep(1 / member_rate(ctx, ctx.phase["rate"]))
        else:
            await member.join()


def start_rate(params, interval_ms: int | None = None) -> float:
    """--start-rate, else the members' normal load: one heartbeat each per interval (KIP-848:
    `interval_ms`, the broker's)."""
    interval_ms = interval_ms or params["heartbeat_interval_ms"]
    return params["start_rate"] or params["members"] / (interval_ms / 1000)


def _ramp(run) -> Ramp:
    if "ramp" not in run.state:
        api = (
            ApiKey.CONSUMER_GROUP_HEARTBEAT
            if run.params["group_protocol"] == "consumer"
            else ApiKey.HEARTBEAT
        )
        rate = start_rate(run.params, run.metrics.get("heartbeat_interval_ms"))
        run.state["ramp"] = Ramp(
            api.name, run, rate, default_bound_ms=50, joins=not run.params["skip_join"]
        )
    return run.state["ramp"]


def control(run):
    ramp = _ramp(run)  # made, and its plan said, as the run starts
    if not run.params["skip_join"] and "rate" not in run.phase:
        if run.ledger.stable_generation(run.members) is None:
            return None
    return ramp.control(run)


def summary(run) -> dict:
    return {"members": run.members, **_ramp(run).summary(run)}
