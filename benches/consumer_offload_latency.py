"""How long another group waits while a big consumer group's target assignment is computed, with
the computation in a worker thread (group.consumer.assignor.offload.enable=true, the default) and
on the event loop (false). In process, one coordinator on trio:

1. N members join group "big" on a topic of P partitions, with batching holding back every
   computation but the first;
2. a probe heartbeats group "small" every millisecond, measuring each wait from when it meant to
   send to when its answer was decided (event-loop lag plus the heartbeat itself);
3. one heartbeat of "big" with batching lifted starts the computation for all N members; the
   probe runs until the target is in and the members' next heartbeats are through, then
   reports p50 / p99 / max of its waits over that window.

    python benches/consumer_offload_latency.py --members 5000 --partitions 40000
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "kits"))
from harness import Topics, answer, make_coordinator, request


async def run(members: int, partitions: int, offload: bool, snapshot: Path) -> dict:
    topics = Topics()
    topics.add("big", partitions)
    topics.add("small", 4)
    coordinator = make_coordinator(
        topics,
        {
            "group.consumer.assignment.interval.ms": 3_600_000,
            "group.consumer.assignor.offload.enable": offload,
        },
        snapshot_path=snapshot,
    )
    waits: list[float] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(coordinator.run)
        while coordinator._nursery is None:
            await trio.sleep(0)
        answer(
            coordinator.consumer_heartbeat(
                request("small", "s", 0, names=["small"], owned={}, rebalance_timeout_ms=1000)
            )
        )
        for i in range(members):
            answer(
                coordinator.consumer_heartbeat(
                    request("big", f"m{i}", 0, names=["big"], owned={}, rebalance_timeout_ms=60000)
                )
            )
        group = coordinator.groups["big"]
        coordinator.settings.set("group.consumer.assignment.interval.ms", 0)
        small_epoch = coordinator.groups["small"].members["s"].epoch
        done = trio.Event()

        async def probe() -> None:
            due = time.perf_counter()
            while not done.is_set():
                due += 0.001
                await trio.sleep(max(due - time.perf_counter(), 0))
                answer(coordinator.consumer_heartbeat(request("small", "s", small_epoch)))
                waits.append(time.perf_counter() - due)

        nursery.start_soon(probe)
        await trio.sleep(0.05)
        started = time.perf_counter()
        # The heartbeat that starts the computation (inline: it is the computation).
        answer(coordinator.consumer_heartbeat(request("big", "m1", group.members["m1"].epoch)))
        while group.assignment_epoch < group.group_epoch:
            await trio.sleep(0.001)
        computed = time.perf_counter() - started
        await trio.sleep(0.05)
        done.set()
        nursery.cancel_scope.cancel()
    waits.sort()
    return {
        "offload": offload,
        "members": members,
        "partitions": partitions,
        "target_seconds": round(computed, 4),
        "probes": len(waits),
        "wait_p50_ms": round(statistics.median(waits) * 1000, 3),
        "wait_p99_ms": round(waits[int(len(waits) * 0.99) - 1] * 1000, 3),
        "wait_max_ms": round(waits[-1] * 1000, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=5000)
    parser.add_argument("--partitions", type=int, default=40000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.repeat):
            for offload in (True, False):
                result = trio.run(
                    run,
                    args.members,
                    args.partitions,
                    offload,
                    Path(tmp) / f"snapshot-{n}-{offload}",
                )
                print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
