"""`--cluster URL` at startup: an engine corral does not know is refused in one line, and cluster
mode turns the network thread's writers off (every write goes through the engine)."""

from __future__ import annotations

from pathlib import Path

import pytest
from memory_engine import MemoryEngine

from corral.broker import Broker, StartupError
from corral.cli import main
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
