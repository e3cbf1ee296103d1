"""failover: the broker is restarted (by a command given on the command line) in mid-run, or,
against corral, its coordinator moves (--faults-url: the group's coordinator shard is unloaded
for --move-ms through the faults API, then loaded back from its log).

Members heartbeat and commit offsets (microsecond timestamps, which only grow) throughout.
Reported: how long the restart command took, and the time from its end until every member has
again been answered without error; after the restart each member reads its offsets back, and a
committed offset that went backwards is a violation.

KIP-848 members live through the restart as the Java consumer does: they keep their partitions
while the coordinator is away, heartbeat again with every field once it is back (so that it may
take them in at their epoch), and rejoin at epoch 0 if it answers that they are fenced or unknown
(errors counts those). No partition may have two owners meanwhile, and the run ends only once the
group is stable again with every partition owned (or --duration runs out: `stable_generation` is
then null).
"""

from __future__ import annotations

import subprocess
import time

import trio

from corral.load.scenarios.commit import verify
from corral.load.scenarios.common import CoordinatorMove, add_faults_url, stay_in_group
from corral.network.apis import ApiKey

NAME = "failover"
HELP = "restart the broker mid-run; time until all members are stable, offsets never go back"
REQUIRED_APIS = {
    ApiKey.JOIN_GROUP,
    ApiKey.SYNC_GROUP,
    ApiKey.HEARTBEAT,
    ApiKey.METADATA,
    ApiKey.OFFSET_COMMIT,
    ApiKey.OFFSET_FETCH,
}


def add_arguments(parser) -> None:
    parser.add_argument(
        "--restart-cmd",
        required=False,
        default=None,
        help="shell command that restarts the broker (required for failover)",
    )
    parser.add_argument(
        "--restart-at",
        type=float,
        default=5.0,
        help="seconds after the group is stable to run the restart command",
    )
    parser.add_argument(
        "--commit-interval", type=float, default=1.0, help="seconds between a member's commits"
    )
    add_faults_url(parser)
    parser.add_argument(
        "--move-ms",
        type=int,
        default=3000,
        help="with --faults-url: how long the coordinator is away (ms)",
    )


def topic_partitions(params) -> int:
    return params["members"]


async def run_member(ctx, member, index: int) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(stay_in_group, ctx, member)
        checked_after_restart = False
        while True:
            await trio.sleep(ctx.params["commit_interval"])
            if not member.stable or not member.assignment:
                continue
            mark = member.ownership_mark()
            offset = int(time.monotonic() * 1e6)
            acknowledged = await member.commit(
                {(t, p): offset for t, ps in member.assignment.items() for p in ps}
            )
            if acknowledged and "since" in ctx.phase and not checked_after_restart:
                await verify(ctx, member, acknowledged, mark)
                checked_after_restart = True


def control(run):
    phase, st = run.phase, run.state
    if not phase:
        if run.ledger.stable_generation(run.members) is None:
            return None
        st["stable_at"] = time.monotonic()
        return {"stable": True}
    if "restart" not in st and time.monotonic() - st["stable_at"] >= run.params["restart_at"]:
        st["restart_started"] = time.monotonic()
        if run.params["restart_cmd"]:
            st["restart"] = subprocess.Popen(run.params["restart_cmd"], shell=True)
        elif run.params["faults_url"]:
            st["restart"] = CoordinatorMove(
                run.params["faults_url"], run.params["group"], run.params["move_ms"]
            )
        else:
            raise ValueError("failover needs --restart-cmd or --faults-url")
        return None
    if "restart" in st and "restarted_at" not in st:
        code = st["restart"].poll()
        if code is None:
            return None
        st["restart_exit"] = code
        st["restarted_at"] = time.monotonic()
        return {"since": st["restarted_at"]}
    if "restarted_at" in st:
        if sum(run.ok_since.values()) >= run.members and "recovered_at" not in st:
            st["recovered_at"] = time.monotonic()
        if (
            "recovered_at" in st
            and time.monotonic() - st["recovered_at"] > 2 * run.params["commit_interval"] + 1
        ):
            # Every member has had the chance to read its offsets back. KIP-848: and the group
            # is stable again (a classic generation is checked as its members sync).
            generation = run.ledger.stable_generation(run.members)
            if generation is not None or run.params["group_protocol"] == "classic":
                run.metrics["stable_generation"] = generation
                return "stop"
    return None


def summary(run) -> dict:
    st = run.state
    out = {
        "members": run.members,
        "restart_exit_code": st.get("restart_exit"),
        "stable_generation": None,
    }  # set when the run stops with the group stable
    if "restarted_at" in st:
        out["restart_command_seconds"] = round(st["restarted_at"] - st["restart_started"], 3)
    if "recovered_at" in st:
        out["stable_again_seconds"] = round(st["recovered_at"] - st["restarted_at"], 3)
    else:
        out["stable_again_seconds"] = None
    return out
