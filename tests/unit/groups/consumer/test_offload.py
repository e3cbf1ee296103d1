"""A big consumer group's target assignment runs in a worker thread: while 5,000 members'
assignment over 40,000 partitions is computed, the event loop keeps answering another group's
heartbeats (DESIGN.md: heavy work never holds other groups hostage). How low their latency stays
is measured in benches/; here: that they are answered during the computation at all, and that
the result is complete and is what members reconcile to. (The members ask for `range`: a
homogeneous group on `uniform` moves only what changes, inline, test_incremental.py.)"""

from __future__ import annotations

import time

import trio
from harness import Topics, answer, make_coordinator, request

from corral.errors import ErrorCode


def test_big_group_assigned_off_loop_while_another_group_is_served(tmp_path):
    trio.run(_scenario, tmp_path)


async def _scenario(tmp_path):
    topics = Topics()
    big = topics.add("big", 40_000)
    topics.add("small", 4)
    coordinator = make_coordinator(
        topics, {"group.consumer.assignment.interval.ms": 0}, snapshot_path=tmp_path / "snapshot"
    )
    served_while_computing = 0
    latencies = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(coordinator.run)
        while coordinator._nursery is None:  # trio may run this task first
            await trio.sleep(0)
        small = answer(
            coordinator.consumer_heartbeat(
                request("small", "s1", 0, names=["small"], owned={}, rebalance_timeout_ms=1000)
            )
        )
        assert small["member_epoch"] == 2
        ids = [f"m{i}" for i in range(5000)]
        for member_id in ids:
            r = answer(
                coordinator.consumer_heartbeat(
                    request(
                        "big",
                        member_id,
                        0,
                        names=["big"],
                        owned={},
                        rebalance_timeout_ms=60000,
                        assignor="range",
                    )
                )
            )
            assert r["error_code"] == ErrorCode.NONE
        group = coordinator.groups["big"]
        assert group.computing_epoch is not None  # started in a worker thread
        epoch = group.group_epoch
        deadline = trio.current_time() + 60
        while group.assignment_epoch < epoch:
            assert trio.current_time() < deadline, "the target was never computed"
            started = time.perf_counter()
            r = answer(coordinator.consumer_heartbeat(request("small", "s1", 2, owned={})))
            latencies.append(time.perf_counter() - started)
            assert r["error_code"] == ErrorCode.NONE
            if group.computing_epoch is not None:
                served_while_computing += 1
            await trio.sleep(0.001)
        nursery.cancel_scope.cancel()
    assert served_while_computing > 0
    # Every partition of the topic is in exactly one member's target.
    seen = [p for t in group.target.values() for p in t.get(big, ())]
    assert sorted(seen) == list(range(40_000))
    assert {len(t.get(big, ())) for t in group.target.values()} == {8}
    # The records were encoded in the worker thread: the log holds exactly what memory does.
    loaded = make_coordinator(topics)
    loaded.replay_all(coordinator.writer.pairs)
    assert loaded.groups["big"].target == group.target
    assert loaded.groups["big"].assignment_epoch == group.assignment_epoch
