"""A corral cluster for tests: N `corral serve --cluster URL` nodes on one machine, each a child
process with its own node.id and data dir, on an engine the test started (tests/kits/engines.py).

    with CorralCluster(engine.url, 3, tmp_path) as cluster:
        node = cluster.coordinator_of("my-group")   # FindCoordinator, asked of a live node
        cluster.nodes[node].kill()                  # kill -9

The engine's own view (owners, live nodes) is read through corral's engine client.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from types import TracebackType

from rawwire import RawClient

from corral.cluster.engine import Engine
from corral.cluster.engines import connect
from corral.errors import ErrorCode
from corral.groups.storage.placement import partition_for
from corral.network.apis import ApiKey
from corral.testing.broker import EmbeddedCorral

SHARDS = 12  # offsets.topic.num.partitions of the test clusters: rounds stay short


class CorralCluster:
    def __init__(
        self,
        url: str,
        size: int,
        base: Path,
        lease_ms: int = 3000,
        settings: dict[str, object] | None = None,
    ):
        self.url, self.lease_ms = url, lease_ms
        self.engine: Engine = connect(url)
        common = {
            "corral.cluster.url": url,
            "corral.cluster.lease.ms": lease_ms,
            "offsets.topic.num.partitions": SHARDS,
            **(settings or {}),
        }
        self._paused: set[int] = set()  # nodes stopped by SIGSTOP
        self.nodes = {
            n: EmbeddedCorral(base / f"node{n}", {**common, "node.id": n}, faults_api=False)
            for n in range(1, size + 1)
        }

    def start(self) -> CorralCluster:
        for node in self.nodes.values():
            node.start()
        self.wait_until_placed()
        return self

    def live(self) -> list[int]:
        return [n for n, node in self.nodes.items() if node.alive() and not self.paused(n)]

    def paused(self, n: int) -> bool:
        return n in self._paused

    def pause(self, n: int) -> None:
        """SIGSTOP: the node stops in its tracks, leases and all."""
        proc = self.nodes[n].proc
        assert proc is not None
        os.kill(proc.pid, signal.SIGSTOP)
        self._paused.add(n)

    def resume(self, n: int) -> None:
        proc = self.nodes[n].proc
        assert proc is not None
        os.kill(proc.pid, signal.SIGCONT)
        self._paused.discard(n)

    @property
    def bootstrap(self) -> str:
        return ",".join(self.nodes[n].bootstrap for n in self.live())

    def owners(self) -> dict[int, int]:
        """Shard -> owning node id, as the engine has it."""
        return {shard: lease.node_id for shard, lease in self.engine.owners().items()}

    def wait_until_placed(self, timeout: float = 60.0) -> dict[int, int]:
        """Until every shard is owned by a live node (and served: FindCoordinator of a group
        of each answers that node)."""
        deadline = time.monotonic() + timeout
        while True:
            owners = self.owners()
            live = set(self.live())
            if len(owners) == SHARDS and set(owners.values()) <= live:
                return owners
            if time.monotonic() > deadline:
                raise AssertionError(f"shards not placed on {sorted(live)}: {owners}")
            time.sleep(0.1)

    def shard_of(self, group: str) -> int:
        return partition_for(group, SHARDS)

    def coordinator_of(self, group: str, ask: int | None = None) -> int:
        """The node FindCoordinator names for `group` (asked of node `ask`, default a live one)."""
        deadline = time.monotonic() + 20
        while True:
            node = self.nodes[ask if ask is not None else self.live()[0]]
            assert node.port is not None
            with RawClient(node.port) as client:
                answer = client.call(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
            # COORDINATOR_NOT_AVAILABLE while a shard moves: clients retry, as here.
            if answer["error_code"] != ErrorCode.COORDINATOR_NOT_AVAILABLE:
                break
            assert time.monotonic() < deadline, answer
            time.sleep(0.1)
        assert answer["error_code"] == 0, answer
        return int(answer["node_id"])

    def port(self, n: int) -> int:
        port = self.nodes[n].port
        assert port is not None
        return port

    def close(self) -> None:
        for n in list(self.nodes):
            if self.paused(n):
                self.resume(n)
            self.nodes[n].close()
        self.engine.close()

    def __enter__(self) -> CorralCluster:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
