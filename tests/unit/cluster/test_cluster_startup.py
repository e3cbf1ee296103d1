"""`--cluster URL` at startup: an engine corral does not know is refused in one line, cluster
mode turns the network thread's writers off (every write goes through the engine), and the
nodes agree on one cluster id."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio
from memory_engine import MemoryEngine

from corral.broker import Broker, StartupError
from corral.cli import main
from corral.cluster.engine import Node
from corral.config.settings import Settings


def test_an_unknown_engine_stops_the_start_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["serve", "--cluster", "zookeeper://127.0.0.1:2181", "--data-dir", str(tmp_path)])
    assert code == 1
    assert "etcd://HOST:PORT or postgresql://" in capsys.readouterr().err
    with pytest.raises(StartupError):
        Broker(Settings({"log.dirs": str(tmp_path / "b"), "corral.cluster.url": "zk://x"}))


def test_cluster_mode_writes_only_through_the_engine(tmp_path: Path) -> None:
    settings = Settings({"log.dirs": str(tmp_path), "corral.cluster.url": "memory:"})
    broker = Broker(settings, engine=MemoryEngine())
    assert broker.cluster is not None
    assert broker.groups.writer.core_commits is None
    assert not settings["corral.group.consumer.epoch.short.path.enable"]
    assert all(shard.availability() for shard in broker.groups.shards)  # none held yet
    broker.logs.close()
    os.close(broker._lock_fd)


def test_every_node_answers_the_first_node_s_cluster_id(tmp_path: Path) -> None:
    engine = MemoryEngine()
    brokers = []
    for n in (1, 2):
        settings = Settings(
            {"log.dirs": str(tmp_path / f"n{n}"), "node.id": n, "corral.cluster.url": "m:"}
        )
        brokers.append(Broker(settings, engine=engine))
    first, second = brokers
    own_ids = {b.cluster_id for b in brokers}
    assert len(own_ids) == 2  # each data dir made its own

    async def scenario() -> None:
        async with trio.open_nursery() as nursery:
            for broker in brokers:
                assert broker.cluster is not None
                broker.cluster.node = Node(broker.node_id, "127.0.0.1", 9000 + broker.node_id)
                nursery.start_soon(broker.logs.run)
                nursery.start_soon(broker.groups.writer.run)
                nursery.start_soon(broker.cluster.run)
                await trio.sleep(0.2)  # the first node's round agrees first
            with trio.fail_after(10):
                while second.cluster_id != first.cluster_id:
                    await trio.sleep(0.01)
            nursery.cancel_scope.cancel()

    trio.run(scenario)
    assert first.cluster_id in own_ids
    for broker in brokers:
        broker.logs.close()
        os.close(broker._lock_fd)
