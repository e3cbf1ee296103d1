"""The coordinator alone, without sockets: a join storm of N members, one generation's fan-out,
the leader's assignment, N heartbeats, and the memory each member costs. With `--protocol
consumer`: N KIP-848 members joining one consumer group (ConsumerGroupHeartbeat at epoch 0, each
with its own decoded strings, as off the wire), the time per join and the memory per member.

Calls GroupCoordinator's methods the way the handlers do (KIP-394 two-step join), with a log that
acknowledges at once (records are still encoded and replayed), so the figures are the
coordinator's own CPU and memory, per member, beyond anything a connection costs.

    python benches/groups_inprocess.py --members 10000
    python benches/groups_inprocess.py --members 50000 --protocol consumer
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests" / "kits"))

import trio  # noqa: E402

# The in-process fixture (FakeLog: a log that encodes the group record and acknowledges at
# once; JoinRequests with fresh strings as decoded off the wire) is shared with the tests.
from harness import FakeLog, join_request  # noqa: E402

from corral.config.settings import Settings  # noqa: E402
from corral.groups.coordinator import GroupCoordinator  # noqa: E402
from corral.load import consumer_protocol as cp  # noqa: E402


def rss_bytes() -> int:
    """Resident memory, Rust allocations (timer wheel) included, which tracemalloc does not see."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class MemoryMark:
    """Memory from now on: RSS, and Python objects (tracemalloc) if `trace`."""

    def __init__(self, trace: bool):
        self.trace = trace
        gc.collect()
        if trace:
            tracemalloc.start()
        self.base = tracemalloc.get_traced_memory()[0] if trace else 0
        self.rss_base = rss_bytes()

    def per_member(self, out: dict, members: int) -> None:
        gc.collect()
        out["rss_bytes_per_member"] = (rss_bytes() - self.rss_base) // members
        if self.trace:
            out["bytes_per_member"] = (tracemalloc.get_traced_memory()[0] - self.base) // members
            tracemalloc.stop()


async def storm(members: int, trace: bool) -> dict:
    settings = Settings({"group.initial.rebalance.delay.ms": 0})
    coordinator = GroupCoordinator(settings, FakeLog(), Path("/nonexistent"))
    metadata = cp.encode_subscription(["topic"], {}, -1)
    out = {}
    memory = MemoryMark(trace)

    started = time.perf_counter()
    ids = [
        coordinator.join(join_request("storm", "", metadata, n=n)).value["member_id"]
        for n in range(members)
    ]
    waiters = [coordinator.join(join_request("storm", m, metadata, n=n)) for n, m in enumerate(ids)]
    out["join_requests_s"] = time.perf_counter() - started

    group = coordinator.groups["storm"]
    started = time.perf_counter()
    coordinator.timers.fire_due()  # no-op unless due
    coordinator.shard_of("storm").rebalance.complete_join_phase(group)
    out["complete_join_s"] = time.perf_counter() - started
    await trio.sleep(0.01)  # the followers' JoinGroups are woken one scheduling round later
    assert all(w.value is not None for w in waiters)
    leader = group.leader_id
    generation = group.generation_id

    assignment = cp.encode_assignment({"topic": [0]})
    started = time.perf_counter()
    syncs = [
        coordinator.sync("storm", m, None, generation, "consumer", "range", [])
        for m in ids
        if m != leader
    ]
    syncs.append(
        coordinator.sync(
            "storm", leader, None, generation, "consumer", "range", [(m, assignment) for m in ids]
        )
    )
    out["sync_requests_s"] = time.perf_counter() - started
    assert all(s.value is not None and s.value["error_code"] == 0 for s in syncs), group.state

    del waiters, syncs
    memory.per_member(out, members)

    started = time.perf_counter()
    for m in ids:
        coordinator.heartbeat("storm", m, None, generation)
    out["heartbeat_us"] = (time.perf_counter() - started) / members * 1e6
    out["join_requests_us_per_member"] = out["join_requests_s"] / members * 1e6
    return out


def consumer_storm(members: int, trace: bool) -> dict:
    """KIP-848 joins into one group of a 1,000-partition topic (targets batched an hour apart, so
    what is measured is the joins and the members, not an assignment)."""
    from harness import FakeLog, Topics, make_coordinator, request

    topics = Topics()
    topics.add("topic", 1000)
    coordinator = make_coordinator(
        topics,
        {"group.consumer.assignment.interval.ms": 3_600_000, "group.consumer.max.size": members},
        log=FakeLog(),
    )
    coordinator.events.sink = lambda event, time_ms: None
    out = {}
    memory = MemoryMark(trace)
    started = time.perf_counter()
    for _n in range(members):
        # Fresh strings per request, as decoded from each member's frame.
        answer = coordinator.consumer_heartbeat(
            request(
                "storm",
                str(uuid.uuid4()),
                0,
                names=["".join(["top", "ic"])],
                owned={},
                rebalance_timeout_ms=45_000,
                client_id="".join(["consumer-", "1"]),
            )
        )
        assert answer.value["error_code"] == 0, answer.value
    out["join_us"] = (time.perf_counter() - started) / members * 1e6
    memory.per_member(out, members)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--members", type=int, default=10000)
    parser.add_argument("--protocol", choices=("classic", "consumer"), default="classic")
    args = parser.parse_args()
    if args.protocol == "consumer":
        timing, memory = consumer_storm(args.members, False), consumer_storm(args.members, True)
    else:
        timing = trio.run(storm, args.members, False)
        memory = trio.run(storm, args.members, True)
    # Python objects (tracemalloc) from the traced run; RSS from the untraced one.
    timing["bytes_per_member"] = memory["bytes_per_member"]
    for k, v in timing.items():
        print(f"{k:28} {v:.4f}" if isinstance(v, float) else f"{k:28} {v}")


if __name__ == "__main__":
    main()
