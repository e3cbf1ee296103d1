"""Cluster mode's engines (docs/cluster.md): etcd and PostgreSQL, each started fresh on this machine
(tests/kits/engines.py: one etcd member, one PostgreSQL with fsync and synchronous_commit on),
through corral's engine clients (src/corral/cluster/etcd.py, postgres.py).

- **group commit**: S shards, each with a writer thread appending ~2 KB batches (about 20 offset
  commits each) back to back through fenced appends, for `--seconds`; appends per second, MB/s,
  and the latency of one append (p50, p99). Run with S = 8 and S = 1;
- **failover**: node A holds a shard with a ttl of `--ttl-ms` and stops renewing (as if killed);
  node B tries to acquire every 100 ms: the time from A's last renew (its answer) to B's lease.
  Then the time a new owner takes to load a shard of a 1 MiB snapshot + 1,000 batches of 2 KB;
- **restart**: the engine is killed (SIGKILL) and started again on its data dir: the time from
  the start until a call (a load) succeeds again, and whether the lease survived.

    python benches/cluster_engines.py --out /tmp/cluster_engines.json [--engines etcd,postgres]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "kits"))
from engines import KINDS, EngineProcess

from corral.cluster.engine import Engine, EngineError, Lease
from corral.cluster.engines import connect

BATCH = 2048
LONG_TTL_MS = 600_000


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def group_commit(engine: Engine, shards: int, seconds: float, base: int) -> dict[str, Any]:
    leases = [engine.acquire(base + s, 1, LONG_TTL_MS) for s in range(shards)]
    latencies: list[list[float]] = [[] for _ in range(shards)]
    errors: list[str] = []
    stop = time.monotonic() + seconds
    payload = os.urandom(BATCH)

    def writer(index: int, lease: Lease) -> None:
        offset = 0
        own = latencies[index]
        try:
            while time.monotonic() < stop:
                started = time.perf_counter()
                engine.append(lease, (lease.epoch, offset), payload)
                own.append(time.perf_counter() - started)
                offset += 1
        except Exception as exc:  # reported in the results
            errors.append(repr(exc))

    threads = [
        threading.Thread(target=writer, args=(i, lease))
        for i, lease in enumerate(leases)
        if lease is not None
    ]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    every = [value for own in latencies for value in own]
    for lease in leases:
        if lease is not None:
            engine.release(lease)
    return {
        "shards": shards,
        "appends": len(every),
        "appends_per_s": round(len(every) / elapsed, 1),
        "mb_per_s": round(len(every) * BATCH / elapsed / 1e6, 2),
        "p50_ms": round(percentile(every, 0.5) * 1e3, 2),
        "p99_ms": round(percentile(every, 0.99) * 1e3, 2),
        "errors": errors,
    }


def failover(engine: Engine, ttl_ms: int, shard: int, rounds: int) -> dict[str, Any]:
    times = []
    for round_ in range(rounds):
        a, b = 100 + round_, 200 + round_
        lease = engine.acquire(shard, a, ttl_ms)
        assert lease is not None, "the shard is held"
        for _ in range(3):
            time.sleep(ttl_ms / 4000)
            assert engine.renew([lease], ttl_ms) == [lease]
        last_renew = time.monotonic()
        while True:
            taken = engine.acquire(shard, b, LONG_TTL_MS)
            if taken is not None:
                break
            time.sleep(0.1)
        times.append(time.monotonic() - last_renew)
        engine.release(taken)
    return {
        "ttl_ms": ttl_ms,
        "takeover_s": [round(t, 2) for t in times],
        "median_s": round(statistics.median(times), 2),
    }


def load_time(engine: Engine, shard: int, batches: int, runs: int) -> dict[str, Any]:
    lease = engine.acquire(shard, 1, LONG_TTL_MS)
    assert lease is not None
    engine.put_snapshot(lease, (lease.epoch, 0), os.urandom(1 << 20))
    payload = os.urandom(BATCH)
    for offset in range(batches):
        engine.append(lease, (lease.epoch, offset), payload)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        image = engine.load(shard)
        times.append(time.perf_counter() - started)
        assert len(image.batches) == batches and image.snapshot is not None
    engine.release(lease)
    return {"batches": batches, "median_ms": round(statistics.median(times) * 1e3, 1)}


def restart(server: EngineProcess, engine: Engine, shard: int) -> dict[str, Any]:
    lease = engine.acquire(shard, 1, LONG_TTL_MS)
    assert lease is not None
    engine.append(lease, (lease.epoch, 0), b"before the crash")
    server.kill()
    try:
        engine.load(shard)
        down_error = "none (answered while killed?)"
    except EngineError as exc:
        down_error = type(exc).__name__
    starter = threading.Thread(target=server.start)
    started = time.monotonic()
    starter.start()
    while True:
        try:
            image = engine.load(shard)
            break
        except EngineError:
            time.sleep(0.02)
    back = time.monotonic() - started
    starter.join()
    kept = engine.renew([lease], LONG_TTL_MS) == [lease]
    return {
        "while_down": down_error,
        "back_s": round(back, 2),
        "write_kept": image.batches == [((lease.epoch, 0), b"before the crash")],
        "lease_kept": kept,
    }


def run(kind: str, seconds: float, ttl_ms: int, base: Path) -> dict[str, Any]:
    server = KINDS[kind](base / kind)
    server.prepare()
    server.start()
    engine = connect(server.url)
    try:
        results: dict[str, Any] = {"engine": kind}
        results["group_commit"] = [
            group_commit(engine, shards, seconds, base=1000 * shards) for shards in (8, 1)
        ]
        results["failover"] = failover(engine, ttl_ms, shard=5000, rounds=3)
        results["load"] = load_time(engine, shard=6000, batches=1000, runs=5)
        results["restart"] = restart(server, engine, shard=7000)
        return results
    finally:
        engine.close()
        server.stop()


def table(all_results: list[dict[str, Any]]) -> str:
    lines = [
        "| engine | shards | appends/s | MB/s | p50 ms | p99 ms |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for results in all_results:
        for row in results["group_commit"]:
            lines.append(
                f"| {results['engine']} | {row['shards']} | {row['appends_per_s']:,.0f} "
                f"| {row['mb_per_s']} | {row['p50_ms']} | {row['p99_ms']} |"
            )
    lines += [
        "",
        "| engine | ttl | takeover after last renew (3 runs) | load 1 MiB + 1,000 batches "
        "| restart: back after | write kept | lease kept |",
        "| --- | ---: | --- | ---: | ---: | --- | --- |",
    ]
    for results in all_results:
        fail, load, rst = results["failover"], results["load"], results["restart"]
        lines.append(
            f"| {results['engine']} | {fail['ttl_ms']} ms | "
            f"{', '.join(f'{t} s' for t in fail['takeover_s'])} | {load['median_ms']} ms "
            f"| {rst['back_s']} s | {rst['write_kept']} | {rst['lease_kept']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default="etcd,postgres")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--ttl-ms", type=int, default=3000)
    parser.add_argument("--out", type=Path, help="the results as JSON")
    args = parser.parse_args()
    all_results = []
    for kind in args.engines.split(","):
        print(f"== {kind}", flush=True)
        with tempfile.TemporaryDirectory() as base:
            results = run(kind, args.seconds, args.ttl_ms, Path(base))
        print(json.dumps(results), flush=True)
        all_results.append(results)
    print(table(all_results))
    if args.out:
        args.out.write_text(json.dumps(all_results, indent=2) + "\n")


if __name__ == "__main__":
    main()
