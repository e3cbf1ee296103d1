"""Commit and heartbeat capacity of a corral cluster of 1, 2 and 3 processes on this machine, and
of one process alone (no cluster mode: what the engine costs), in one run.

`--groups` classic groups of `--members` members each (one generation) are spread over the
coordinator shards, so over the nodes; every member's socket goes to its group's coordinator
(FindCoordinator), as a client's would. Then, per configuration:

- heartbeats: paced by benches/heartbeat-driver (heartbeat_capacity.py's Rust driver) at each
  of `--heartbeat-rates`; answered by each node's network thread;
- commits: each member commits `--partitions` partitions of one topic (OffsetCommit v8, its
  generation checked) at each of `--commit-rates`, one request in flight per member, paced by
  heartbeat_capacity's Python `step`. In cluster mode a commit is answered once the engine holds
  it (cluster/replication.py); alone, once its fsync is done (the network thread's commit path).

CPU is the sum over the corral processes (and the engine's, reported apart). This machine has
2 cores: three nodes, the engine and the driver share them, so read the cluster's figures as
what one machine gives, not as what three would.

    python benches/cluster_capacity.py --engine postgres --out /tmp/cluster_capacity.json
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "kits"))
from commit_capacity import commit_errors
from engines import start_engine
from groups_scale import cpu_seconds, free_port, stop_broker, wait_port
from heartbeat_capacity import (
    HEARTBEAT,
    HEARTBEAT_V,
    build_driver,
    call_all,
    join_all,
    step,
    step_rust,
)

from corral import _core
from corral.cluster.engines import connect

CREATE_TOPICS, OFFSET_COMMIT, FIND_COORDINATOR = 19, 8, 10
TOPIC = "capacity"
SHARDS = 24


def start_nodes(count: int, url: str | None, base: Path) -> list[tuple[subprocess.Popen, int]]:
    nodes = []
    for n in range(1, count + 1):
        port = free_port()
        args = [
            sys.executable,
            "-m",
            "corral.cli",
            "serve",
            "--listen",
            f"127.0.0.1:{port}",
            "--data-dir",
            str(base / f"node{n}"),
            "--log-level",
            "WARNING",
            "--set",
            f"node.id={n}",
            "--set",
            f"offsets.topic.num.partitions={SHARDS}",
            "--set",
            "group.initial.rebalance.delay.ms=0",
        ]
        if url is not None:
            args += ["--cluster", url, "--set", "corral.cluster.lease.ms=6000"]
        nodes.append((subprocess.Popen(args), port))
    for _, port in nodes:
        wait_port(port, time.monotonic() + 60)
    return nodes


def coordinator_port(port: int, group: str, ports: dict[int, int]) -> int:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        for _ in range(200):
            [found] = call_all([sock], FIND_COORDINATOR, 3, [{"key": group, "key_type": 0}])
            if found["error_code"] == 0:
                return ports.get(found["node_id"], found["port"])
            time.sleep(0.1)
    raise RuntimeError(f"no coordinator for {group}: {found}")


def create_topic(port: int, partitions: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        topic = {
            "name": TOPIC,
            "num_partitions": partitions,
            "replication_factor": 1,
            "assignments": [],
            "configs": [],
        }
        body = {"topics": [topic], "timeout_ms": 60000, "validate_only": False}
        [created] = call_all([sock], CREATE_TOPICS, 4, [body])
    assert created["topics"][0]["error_code"] in (0, 36), created  # 36: TOPIC_ALREADY_EXISTS


def measure(config: str, nodes, engine_pids: list[int], args) -> dict:
    ports = {n: port for n, (_, port) in enumerate(nodes, 1)}
    pids = [proc.pid for proc, _ in nodes]
    create_topic(ports[1], args.partitions)
    time.sleep(2)  # every node knows the topic (cluster mode mirrors it about once a second)
    socks, frames_hb, frames_commit = [], [], []
    offset = int(time.time() * 1000)
    for g in range(args.groups):
        group = f"capacity-{g}"
        port = coordinator_port(ports[1], group, ports)
        members, ids, generation = join_all(port, args.members, group)
        socks += members
        for member_id in ids:
            frames_hb.append(
                _core.encode_request(
                    HEARTBEAT,
                    HEARTBEAT_V,
                    7,
                    {
                        "group_id": group,
                        "generation_id": generation,
                        "member_id": member_id,
                        "group_instance_id": None,
                    },
                    "capacity",
                )
            )
            partitions = [
                {
                    "partition_index": p,
                    "committed_offset": offset,
                    "committed_leader_epoch": -1,
                    "committed_metadata": "",
                }
                for p in range(args.partitions)
            ]
            frames_commit.append(
                _core.encode_request(
                    OFFSET_COMMIT,
                    8,
                    9,
                    {
                        "group_id": group,
                        "generation_id_or_member_epoch": generation,
                        "member_id": member_id,
                        "group_instance_id": None,
                        "topics": [{"name": TOPIC, "partitions": partitions}],
                    },
                    "capacity",
                )
            )
    report: dict = {"config": config, "heartbeats": [], "commits": []}

    def cpu() -> tuple[float, float]:
        return sum(cpu_seconds(p) for p in pids), sum(cpu_seconds(p) for p in engine_pids)

    for rate in args.heartbeat_rates:
        before, started = cpu(), time.monotonic()
        result = step_rust(socks, frames_hb, rate, args.seconds, pids[0])
        after, elapsed = cpu(), time.monotonic() - started
        result["corral_cpu"] = round((after[0] - before[0]) / elapsed, 2)
        result["engine_cpu"] = round((after[1] - before[1]) / elapsed, 2)
        report["heartbeats"].append(result)
        print(config, "heartbeats", result, flush=True)
    for rate in args.commit_rates:
        before, started = cpu(), time.monotonic()
        result = step(socks, frames_commit, rate, args.seconds, pids[0], commit_errors)
        after, elapsed = cpu(), time.monotonic() - started
        result["corral_cpu"] = round((after[0] - before[0]) / elapsed, 2)
        result["engine_cpu"] = round((after[1] - before[1]) / elapsed, 2)
        report["commits"].append(result)
        print(config, "commits", result, flush=True)
    for sock in socks:
        sock.close()
    return report


def capacity(steps: list[dict], p99_ms: float) -> float:
    """The highest achieved rate of a step without errors and within the p99 bound."""
    ok = [
        s["achieved"]
        for s in steps
        if s["p99_ms"] is not None and s["p99_ms"] <= p99_ms and set(s["errors"]) <= {0}
    ]
    return max(ok, default=0)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--engine", choices=["postgres", "etcd"], default="postgres")
    parser.add_argument("--groups", type=int, default=24)
    parser.add_argument("--members", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--heartbeat-rates", default="5000,10000,20000,30000")
    parser.add_argument("--commit-rates", default="500,1000,2000,4000")
    parser.add_argument("--seconds", type=float, default=4)
    parser.add_argument("--nodes", default="alone,1,2,3")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    args.heartbeat_rates = [float(r) for r in args.heartbeat_rates.split(",")]
    args.commit_rates = [float(r) for r in args.commit_rates.split(",")]
    build_driver()
    reports = []
    with tempfile.TemporaryDirectory() as tmp, start_engine(args.engine, Path(tmp) / "e") as engine:
        for config in args.nodes.split(","):
            engine.reset()
            base = Path(tmp) / f"run-{config}"
            url = None if config == "alone" else engine.url
            count = 1 if config == "alone" else int(config)
            nodes = start_nodes(count, url, base)
            try:
                if url is not None:
                    view = connect(url)
                    deadline = time.monotonic() + 60
                    while len(view.owners()) < SHARDS and time.monotonic() < deadline:
                        time.sleep(0.2)
                    view.close()
                reports.append(measure(config, nodes, engine.pids(), args))
            finally:
                for proc, _ in nodes:
                    stop_broker(proc)
    print("\nconfig   heartbeats/s (p99 <= 10 ms)   commits/s (p99 <= 100 ms)")
    for r in reports:
        print(
            f"{r['config']:<8} {capacity(r['heartbeats'], 10):>26,.0f}"
            f" {capacity(r['commits'], 100):>27,.0f}"
        )
    if args.out:
        args.out.write_text(json.dumps(reports, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
