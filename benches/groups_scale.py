"""Classic groups at scale: one fresh corral per scenario, driven by `corral load`, plus its RSS.

Reports what docs/benchmarks.md "Classic groups at scale" shows: join-storm time, heartbeat
capacity, commit rate, and the broker's resident memory before and after the members joined.

    python benches/groups_scale.py join-storm --members 10000
    python benches/groups_scale.py heartbeat --members 10000 -- --start-rate 20000 --max-rate 80000
    python benches/groups_scale.py commit --members 1000 -- --partitions-per-member 10
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time


def stop_broker(broker: subprocess.Popen) -> None:
    """SIGTERM (a clean shutdown, snapshots included), SIGKILL if it takes over 30 s."""
    broker.send_signal(signal.SIGTERM)
    try:
        broker.wait(timeout=30)
    except subprocess.TimeoutExpired:
        broker.kill()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_port(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("corral did not start")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario")
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--duration", type=float, default=120)
    parser.add_argument("--profile", metavar="SVG", help="py-spy record the broker into SVG")
    args, load_args = parser.parse_known_args()  # the rest goes to `corral load`
    args.load_args = [a for a in load_args if a != "--"]
    port = free_port()
    with tempfile.TemporaryDirectory() as data:
        broker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "corral.cli",
                "serve",
                "--listen",
                f"127.0.0.1:{port}",
                "--data-dir",
                data,
                "--log-level",
                os.environ.get("CORRAL_LOG_LEVEL", "WARNING"),
                "--set",
                "group.initial.rebalance.delay.ms=0",
                "--set",
                "group.min.session.timeout.ms=6000",
                *(x for kv in os.environ.get("CORRAL_SET", "").split() for x in ("--set", kv)),
            ]
        )
        spy = None
        try:
            wait_port(port, time.monotonic() + 30)
            rss_before = rss_kb(broker.pid)
            cpu_before = cpu_seconds(broker.pid)
            if args.profile:
                spy = subprocess.Popen(
                    [
                        "py-spy",
                        "record",
                        "-o",
                        args.profile,
                        "--pid",
                        str(broker.pid),
                        "--nonblocking",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            out = os.path.join(data, "load.json")
            cmd = [
                sys.executable,
                "-m",
                "corral.cli",
                "load",
                "--bootstrap",
                f"127.0.0.1:{port}",
                "--scenario",
                args.scenario,
                "--members",
                str(args.members),
                "--workers",
                str(args.workers),
                "--duration",
                str(args.duration),
                "--quiet",
                "--json",
                out,
                *args.load_args,
            ]
            subprocess.run(cmd, check=False)
            rss_after = rss_kb(broker.pid)
            cpu_used = cpu_seconds(broker.pid) - cpu_before
            with open(out) as f:
                result = json.load(f)
            print(
                json.dumps(
                    {
                        "metrics": result.get("metrics"),
                        "latency_ms": result.get("latency_ms"),
                        "errors": result.get("errors"),
                        "violations": result.get("violations"),
                        "generator": result.get("generator"),
                        "broker_cpu_seconds": round(cpu_used, 2),
                        "broker_rss_kb": {
                            "before": rss_before,
                            "after": rss_after,
                            "per_member_bytes": (rss_after - rss_before) * 1024 // args.members,
                        },
                    },
                    indent=1,
                )
            )
        finally:
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(timeout=60)
            stop_broker(broker)
    return 0


if __name__ == "__main__":
    sys.exit(main())
