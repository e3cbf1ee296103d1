"""Steady-state ConsumerGroupHeartbeats (KIP-848) per second that corral answers, through the
network thread's short path (rust/short_paths/consumer_heartbeat.rs) and through the Python
coordinator (`corral.group.heartbeat.short.path.enable=false`), each on a fresh broker.

For each mode: N members join one consumer group over N blocking sockets (ConsumerGroupHeartbeat
v1, epoch 0, then incremental heartbeats acknowledging their partitions until the group is
Stable; targets computed at every join: group.consumer.assignment.interval.ms=0), then pre-encoded steady heartbeats (member id and epoch only: nothing changed) are sent
at paced rates, each member with at most one in flight, by benches/heartbeat-driver (its
ConsumerGroupHeartbeat v1 answers carry the error code where Heartbeat v4's do) or, with
`--driver python`, by heartbeat_capacity.step(). Each step reports achieved rate, p50/p99
latency, error codes and the broker's CPU share; the summary gives the highest rate each mode
achieved and the broker CPU per answer.

    python benches/consumer_heartbeat_capacity.py --members 1000 --rates 5000,10000,20000,40000
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from groups_scale import free_port, wait_port
from heartbeat_capacity import build_driver, call_all, lean_broker, step, step_rust

from corral import _core

HEARTBEAT, HEARTBEAT_V, CREATE_TOPICS, DESCRIBE = 68, 1, 19, 69
GROUP, TOPIC = "consumer-heartbeat-capacity", "capacity"


def join_all(
    port: int, members: int, partitions: int
) -> tuple[list[socket.socket], list[str], list[int]]:
    """N members joined and Stable: their sockets, ids and epochs."""
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(members)]
    topic = {
        "name": TOPIC,
        "num_partitions": partitions,
        "replication_factor": 1,
        "assignments": [],
        "configs": [],
    }
    [created] = call_all(socks[:1], CREATE_TOPICS, 7, [{"topics": [topic], "timeout_ms": 5000}])
    assert created["topics"][0]["error_code"] == 0, created
    ids = [f"member-{i}" for i in range(members)]
    owned: list[list] = [[] for _ in ids]
    joined = call_all(
        socks,
        HEARTBEAT,
        HEARTBEAT_V,
        [
            {
                "group_id": GROUP,
                "member_id": m,
                "member_epoch": 0,
                "rebalance_timeout_ms": 60000,
                "subscribed_topic_names": [TOPIC],
                "topic_partitions": [],
            }
            for m in ids
        ],
    )
    epochs = [r["member_epoch"] for r in joined]
    for _rounds in range(50):
        replies = call_all(
            socks,
            HEARTBEAT,
            HEARTBEAT_V,
            [
                {"group_id": GROUP, "member_id": m, "member_epoch": e, "topic_partitions": o}
                for m, e, o in zip(ids, epochs, owned)
            ],
        )
        errors = {r["error_code"] for r in replies}
        assert errors == {0}, f"heartbeat errors {errors}"
        changed = False
        for i, r in enumerate(replies):
            changed |= r["member_epoch"] != epochs[i] or r["assignment"] is not None
            epochs[i] = r["member_epoch"]
            if r["assignment"] is not None:
                owned[i] = r["assignment"]["topic_partitions"]
        [described] = call_all(socks[:1], DESCRIBE, 0, [{"group_ids": [GROUP]}])
        if not changed and described["groups"][0]["group_state"] == "Stable":
            return socks, ids, epochs
        time.sleep(0.1)
    raise RuntimeError(f"the group did not settle: {described['groups'][0]['group_state']}")


def run_mode(short_path: bool, args) -> list[dict]:
    port = free_port()
    flag = f"corral.group.heartbeat.short.path.enable={'true' if short_path else 'false'}"
    run_step = step_rust if args.driver == "rust" else step
    settings = ["--set", flag, "--set", "group.consumer.assignment.interval.ms=0"]
    with lean_broker("corral", port, settings) as broker:
        wait_port(port, time.monotonic() + 60)
        started = time.monotonic()
        socks, ids, epochs = join_all(port, args.members, args.partitions)
        name = "short path" if short_path else "Python"
        print(
            f"{name}: {args.members} members Stable in {time.monotonic() - started:.1f} s",
            flush=True,
        )
        frames = [
            _core.encode_request(
                HEARTBEAT,
                HEARTBEAT_V,
                7,
                {"group_id": GROUP, "member_id": m, "member_epoch": e},
                "cg-capacity",
            )
            for m, e in zip(ids, epochs)
        ]
        results = []
        for rate in (float(r) for r in args.rates.split(",")):
            result = run_step(socks, frames, rate, args.seconds, broker.pid)
            print(f"  {name}: {result}", flush=True)
            results.append(result)
        for sock in socks:
            sock.close()
    return results


def best(results: list[dict]) -> tuple[int, float]:
    """The highest achieved rate without errors, and the broker's CPU microseconds per answer
    at that step."""
    clean = [r for r in results if set(r["errors"]) <= {0}]
    top = max(clean, key=lambda r: r["achieved"])
    return top["achieved"], round(top["broker_cpu"] / top["achieved"] * 1e6, 1)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--rates", default="5000,10000,20000,40000,60000")
    parser.add_argument("--seconds", type=float, default=4)
    parser.add_argument(
        "--driver",
        choices=["python", "rust"],
        default="rust",
        help="what sends the paced heartbeats (rust: benches/heartbeat-driver)",
    )
    args = parser.parse_args()
    if args.driver == "rust":
        build_driver()
    short = run_mode(True, args)
    python = run_mode(False, args)
    (short_rate, short_us), (python_rate, python_us) = best(short), best(python)
    print(
        f"best: short path {short_rate}/s ({short_us} us broker CPU per answer), "
        f"Python {python_rate}/s ({python_us} us); ratio {short_rate / python_rate:.1f}x",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
