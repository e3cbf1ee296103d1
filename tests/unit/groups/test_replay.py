"""Live and load never disagree: thousands of random group operations run against a coordinator
writing to a real `__consumer_offsets` log; then a second coordinator loads the same data dir
(from the snapshot taken midway plus the log after it, and from the log alone) and must hold
exactly the same durable state: every committed offset and every group's metadata record.

Operations interleave with writes still waiting for their fsync, so the order in which durable
writes are applied to memory (the log's order) is exercised, not just their content.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
import trio
from harness import FakeClock, patched_clock
from random_groups import RandomGroups, durable_state, readable

from corral.broker import Broker
from corral.clock import wall_ms
from corral.config.settings import Settings
from corral.groups.storage import records

SETTINGS = {
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
    "offsets.topic.num.partitions": 3,
    "offsets.retention.minutes": 1,
    # Timers are fired by hand; nothing periodic runs on its own.
    "offsets.retention.check.interval.ms": 1 << 40,
    "corral.coordinator.snapshot.interval.ms": 1 << 40,
}


def start_broker(data_dir: Path) -> Broker:
    return Broker(Settings({**SETTINGS, "log.dirs": str(data_dir)}))


def stop_broker(broker: Broker) -> None:
    broker.logs.close()
    os.close(broker._lock_fd)


@pytest.mark.parametrize("seed", [1, 2])
def test_live_state_equals_loaded_state(tmp_path, seed):
    rng = random.Random(seed)
    with patched_clock(FakeClock()) as clock:
        broker = start_broker(tmp_path)

        async def play() -> tuple[list, dict]:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(broker.logs.run)
                player = RandomGroups(broker, clock, rng)
                for i in range(3000):
                    player.step()
                    if rng.random() < 0.15:
                        await player.settle()  # else the next steps run with writes in flight
                    if i == 1500:
                        # With writes in flight (commits of a group nothing else touches): the
                        # snapshot must not hold them, and must replay from the oldest of them.
                        for p in range(3):
                            player.writes.append(
                                broker.groups.offsets.commit(
                                    "snapshotted",
                                    [("t0", [(p, 42 + p, -1, "")])],
                                    wall_ms(),
                                    1 << 60,
                                )
                            )
                        assert broker.groups.writer._pending
                        await broker.groups.take_snapshot()
                await player.settle()
                nursery.cancel_scope.cancel()
            return durable_state(broker), player.counts

        live, counts = trio.run(play)
        stop_broker(broker)
    # The run did what it is meant to exercise.
    assert min(counts.values()) > 30, counts
    kinds = {type(records.decode(k, v)).__name__ for k, v in live}
    assert kinds == {"OffsetCommits", "GroupMetadata"}, kinds

    for from_snapshot in (True, False):
        if not from_snapshot:
            for shard_snapshot in tmp_path.glob("__consumer_offsets-*.snapshot"):
                shard_snapshot.unlink()
        with patched_clock(FakeClock()):
            loaded_broker = start_broker(tmp_path)
        loaded = durable_state(loaded_broker)
        stop_broker(loaded_broker)
        assert readable(loaded) == readable(live), f"from_snapshot={from_snapshot}"
