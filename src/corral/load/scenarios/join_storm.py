"""join-storm: N members join one empty group at once.

Measured: from the first JoinGroup sent to the moment every member holds its SyncGroup answer of
one generation that has all N members (the join itself plus any rebalances it provokes). Opening
the N connections (at most --connects-in-flight at once per worker) comes before the first
JoinGroup of the first member connected, partly overlapping the join; from the start of the run
(connections included) is reported as well.
"""

from __future__ import annotations

from corral.load.scenarios.common import stay_in_group
from corral.network.apis import ApiKey

NAME = "join-storm"
HELP = "N members join one group at once; time until all hold their assignment"
REQUIRED_APIS = {ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.METADATA}


def add_arguments(parser) -> None:
    parser.add_argument(
        "--partitions",
        type=int,
        default=None,
        help="partitions of the topic (default: join-storm one per member, share 10)",
    )


def topic_partitions(params) -> int:
    return params["partitions"] or params["members"]


async def run_member(ctx, member, index: int) -> None:
    ctx.events.mark("start")
    await stay_in_group(ctx, member)


def control(run):
    generation = run.ledger.stable_generation(run.members)
    if generation is not None:
        run.metrics["stable_generation"] = generation
        run.state["settled_at"] = run.ledger.last_change
        return "stop"
    return None


def summary(run) -> dict:
    consumer = run.params.get("group_protocol") == "consumer"
    first = run.marks.get("first_CONSUMER_GROUP_HEARTBEAT" if consumer else "first_JOIN_GROUP")
    start = run.marks.get("start")
    generation = run.metrics.get("stable_generation")
    settled = run.state.get("settled_at")
    return {
        "members": run.members,
        "group_protocol": run.params.get("group_protocol", "classic"),
        "join_seconds": round(settled - first, 3) if generation and first else None,
        "from_start_seconds": round(settled - start, 3) if generation and start else None,
        "generations_seen": run.ledger.generations_seen(),
        "stable": generation is not None,
        # Both ends of join_seconds, in seconds from the start of the run (for benches that
        # sample the broker's CPU over that window).
        "first_request_at_s": round(first - run.started, 3) if first else None,
        "converged_at_s": round(settled - run.started, 3) if generation and settled else None,
    }
