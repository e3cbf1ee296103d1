"""share: a share group (KIP-932) of N consumers reads and acknowledges every record of a topic.

`--records` records are produced to the topic's `--partitions` partitions, before the members
start (`--produce first`, the default) or while they consume (`--produce alongside`, at
`--produce-rate` records/s). Each member heartbeats (ShareGroupHeartbeat) and fetches from the
leaders of the partitions it is assigned (ShareFetch in share sessions, MaxRecords
`--max-records`), acknowledging ACCEPT every record of a fetch in its next one. Once every produced
record is acknowledged the members close their sessions (ShareAcknowledge at epoch -1) and leave;
a run where nothing is acknowledged for `--stall-seconds` ends too, its missing records counted
as violations.

Measured: acknowledged records/s, from the first acquisition to the last acknowledgement, and
between 10 % and 90 % of the records acknowledged (steady state). Checked (checks.ShareLedger):
no record held by two members at once, none delivered again once acknowledged, each acknowledged
once and only by the member it was delivered to, every acquired offset delivered with its record,
and every produced record acknowledged.
"""

from __future__ import annotations

import time

import trio

from corral.load.share.member import ShareMember
from corral.load.share.producer import produce
from corral.load.share.session import ShareSession
from corral.load.share.setup import ACQUIRE_MODES, quota
from corral.network.apis import ApiKey

NAME = "share"
HELP = (
    "a share group (--group-type share) of N consumers acknowledges every record of a topic; "
    "acknowledged records/s"
)
REQUIRED_APIS = {
    ApiKey.SHARE_GROUP_HEARTBEAT,
    ApiKey.SHARE_FETCH,
    ApiKey.SHARE_ACKNOWLEDGE,
    ApiKey.METADATA,
    ApiKey.PRODUCE,
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
}
DEFAULT_PARTITIONS = 10
DEFAULT_HEARTBEAT_S = 5.0  # until the broker says its interval
FETCH_BACKOFF_S = 0.5
IDLE_LOOK_S = 10.0


def add_arguments(parser) -> None:
    parser.add_argument(
        "--partitions",
        type=int,
        default=None,
        help="partitions of the topic (default: join-storm one per member, share "
        f"{DEFAULT_PARTITIONS})",
    )
    parser.add_argument(
        "--records",
        type=int,
        default=10_000,
        help="share: records produced, all to be acknowledged",
    )
    parser.add_argument("--record-bytes", type=int, default=100, help="share: value size")
    parser.add_argument(
        "--produce",
        choices=["first", "alongside"],
        default="first",
        help="share: produce every record before the members start, or while they consume",
    )
    parser.add_argument(
        "--produce-rate",
        type=float,
        default=0.0,
        help="share, --produce alongside: records/s over all partitions (0: as fast as taken)",
    )
    parser.add_argument(
        "--produce-batch", type=int, default=100, help="share: records per produced batch"
    )
    parser.add_argument(
        "--max-records",
        type=int,
        default=500,
        help="share: ShareFetch MaxRecords (the Java consumer's max.poll.records)",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="share: ShareFetch BatchSize (default: --max-records)",
    )
    parser.add_argument(
        "--max-wait-ms",
        type=int,
        default=500,
        help="share: ShareFetch MaxWaitMs (fetch.max.wait.ms)",
    )
    parser.add_argument(
        "--acquire-mode",
        choices=sorted(ACQUIRE_MODES),
        default="batch_optimized",
        help="share: ShareAcquireMode (ShareFetch v2; record_limit caps a fetch at MaxRecords)",
    )
    parser.add_argument(
        "--process-ms",
        type=float,
        default=0.0,
        help="share: a member's time with each fetch's records before it acknowledges them",
    )
    parser.add_argument(
        "--group-config",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="share: a group setting set before the run (IncrementalAlterConfigs), e.g. "
        "share.record.lock.duration.ms=15000; share.auto.offset.reset=earliest is always set",
    )
    parser.add_argument(
        "--stall-seconds",
        type=float,
        default=60.0,
        help="share: end the run when nothing was acknowledged for this long (records still "
        "missing are violations)",
    )


def topic_partitions(params) -> int:
    return params["partitions"] or DEFAULT_PARTITIONS


# ---------------------------------------------------------------- in the workers


def _closing(ctx) -> bool:
    return bool(ctx.phase.get("close"))


async def run_worker(ctx) -> None:
    """The worker's own tasks: it wakes its members when the run closes, and with --produce
    alongside produces to its share of the partitions."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_wake_at_close, ctx)
        if ctx.params["produce"] == "alongside":
            nursery.start_soon(_produce, ctx)


async def _wake_at_close(ctx) -> None:
    while not _closing(ctx):
        await ctx.phase_changed.wait()
    for member in ctx.members:
        member.regroup()


async def _produce(ctx) -> None:
    """Partition i of the run's list goes to worker i % workers."""
    params = ctx.params
    config = ctx.plan.member_config
    workers = max(1, params["workers"])
    full = quota(config.partitions, params["records"])
    mine = {
        tp: n for i, (tp, n) in enumerate(sorted(full.items())) if i % workers == ctx.plan.worker
    }
    # A ProduceError fails the worker (the run stops, the failure reported).
    await produce(
        config.share.brokers,
        config.versions,
        mine,
        config.share.leader_of,
        params["produce_batch"],
        params["record_bytes"],
        ctx.events.produced,
        rate=params["produce_rate"] / workers,
    )
    ctx.events.mark(f"produced_{ctx.plan.worker}")


async def run_member(ctx, member: ShareMember, index: int) -> None:
    ctx.events.mark("start")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_heartbeats, member)
        await _consume(ctx, member)
        nursery.cancel_scope.cancel()
    await member.leave()


async def _heartbeats(member: ShareMember) -> None:
    while member.fatal is None:
        if not member.stable:
            await member.join()
            continue
        await trio.sleep(member.next_heartbeat_in(DEFAULT_HEARTBEAT_S))
        await member.heartbeat()
    member.regroup()  # wakes the consumer, which stops


async def _consume(ctx, member: ShareMember) -> None:
    """A fetch loop per leader the member has something to fetch from or to acknowledge to,
    until the run closes (or the member failed)."""
    running: set[int] = set()
    async with trio.open_nursery() as nursery:
        while not _closing(ctx) and member.fatal is None:
            wanted = member.wanted()
            for node, session in member.sessions.items():
                if node not in wanted:
                    session.want = set()
            for node, tps in wanted.items():
                member.session(node).want = tps
            for node, session in list(member.sessions.items()):
                if session.busy and node not in running:
                    running.add(node)
                    nursery.start_soon(_fetch_loop, ctx, member, session, running)
            # Woken by a new assignment, a partition's leader moving, the run closing (the
            # worker's _wake_at_close) or the member failing; a look now and then all the same.
            with trio.move_on_after(IDLE_LOOK_S):
                await member.assignment_changed.wait()


async def _fetch_loop(ctx, member: ShareMember, session: ShareSession, running: set[int]) -> None:
    process_s = member.share.process_ms / 1000
    try:
        while session.busy and not _closing(ctx) and not session.closed:
            got = await session.fetch()
            if got < 0:
                await trio.sleep(FETCH_BACKOFF_S)
            elif got and process_s:
                await trio.sleep(process_s)
            if any(member.share.leader_of(tp) != session.node for tp in session.want):
                member.regroup()  # a partition moved to another leader
    finally:
        running.discard(session.node)


# ---------------------------------------------------------------- in the parent


def _production_done(run) -> bool:
    if run.params["produce"] == "first":
        return True
    return all(f"produced_{w}" in run.marks for w in range(run.workers))


def control(run):
    ledger, state, now = run.ledger, run.state, time.monotonic()
    if "all_in_group_s" not in state and run.stable_members >= run.members:
        state["all_in_group_s"] = round(run.elapsed(), 3)
    if "close" in run.phase:
        return None  # members acknowledge what they hold, close their sessions and leave
    if not _production_done(run):
        return None
    state.setdefault("produced_at", now)
    if ledger.acknowledged_total != state.get("acknowledged"):
        state["acknowledged"] = ledger.acknowledged_total
        state["progress_at"] = now
    if ledger.complete():
        state["outcome"] = "complete"
        return {"close": True}
    quiet_since = max(state.get("progress_at", 0.0), state["produced_at"])
    if now - quiet_since > run.params["stall_seconds"]:
        state["outcome"] = "stalled"
        run.note(f"nothing acknowledged for {run.params['stall_seconds']:g} s: closing")
        return {"close": True}
    return None


def _at(run, t: float | None) -> float | None:
    return None if t is None else round(t - run.started, 3)


def summary(run) -> dict:
    ledger = run.ledger
    outcome = run.state.get("outcome") or (
        "timed_out" if run.metrics.get("timed_out") else "failed"
    )
    counts = ledger.finish(lost_is_violation=outcome in ("complete", "stalled"))
    span = (
        ledger.last_acknowledged_at - ledger.first_acquired_at
        if ledger.last_acknowledged_at is not None and ledger.first_acquired_at is not None
        else None
    )
    rate, steady = ledger.rate(), ledger.rate(0.1, 0.9)
    out = {
        "group_type": "share",
        "members": run.members,
        "partitions": sum(run.broker.partitions.values()),
        "records": run.params["records"],
        "produce": run.params["produce"],
        "produced": ledger.produced_total,
        "acknowledged": counts["acknowledged"],
        "acknowledged_per_s": round(rate, 1) if rate else None,
        "acknowledged_per_s_10_90": round(steady, 1) if steady else None,
        "consume_seconds": round(span, 3) if span is not None else None,
        "outcome": outcome,
        # Deliveries beyond the first (after a session ended or a lock expired: justified, else
        # a violation); records a DeliveryCount above 1 came with.
        "redelivered": ledger.redelivered,
        "delivery_count_above_1": ledger.delivery_count_above_1,
        "acknowledgements_unconfirmed": counts["unconfirmed"],
        # Acknowledged after their lock could have expired (Kafka answers NONE to those of
        # records it archived meanwhile): neither counted acknowledged nor lost.
        "acknowledged_late": counts["late"],
        "never_delivered": counts["never_delivered"],
        "delivered_unacknowledged": counts["unacknowledged"],
        "members_that_acquired": len(ledger.members_seen),
        "all_in_group_s": run.state.get("all_in_group_s"),
        # Both ends of the consumption, in seconds from the start of the run (for benches that
        # sample the broker's CPU over that window).
        "first_acquired_at_s": _at(run, ledger.first_acquired_at),
        "last_acknowledged_at_s": _at(run, ledger.last_acknowledged_at),
        "acquisition_lock_ms": round(ledger.lock_s * 1000),
    }
    ends = [run.marks.get(f"produced_{w}") for w in range(run.workers)]
    if run.params["produce"] == "alongside" and all(ends):
        out["produced_at_s"] = _at(run, max(ends))
    if outcome == "timed_out":
        out["unfinished"] = (
            f"--duration {run.params['duration']:g} s ran out with {counts['acknowledged']:,} of "
            f"{ledger.produced_total:,} produced records acknowledged: give it a longer --duration"
        )
    return out
