"""Join-storm with a lean driver: N members join one empty classic group at once, against corral
and/or Apache Kafka, each run on a fresh broker with group.initial.rebalance.delay.ms=0.

`corral load --scenario join-storm` is the reference behaviour, but it spends ~1 ms of CPU per
member, which on a 2-core machine hides the broker's side of a 10,000-member join. The members
here are the same state machine (ApiVersions handshake, JoinGroup v9 with KIP-394's member id,
the leader's range assignment in SyncGroup v5, Heartbeat v4 every 3 s, rejoins on
REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID) run by
benches/heartbeat-driver's `join-storm` binary (Rust, epoll; built with cargo on first use).

Measured as corral load measures it: join_seconds from the first JoinGroup sent to the last
member synced in the first generation that has all N members, all of them synced;
from_start_seconds includes opening the N connections (at most --connects-in-flight at once).
Each line adds the broker's CPU seconds over the driver's run and its RSS at the end.

    python benches/join_storm.py --members 1000,10000 --broker both
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from groups_scale import cpu_seconds, free_port, rss_kb, wait_port
from heartbeat_capacity import DRIVER_DIR, build_driver, lean_broker, wait_for_coordinator

from corral.errors import ErrorCode
from corral.load.probe import topic_layout
from corral.load.runner import default_topic

JOIN_STORM_BIN = DRIVER_DIR / "target" / "release" / "join-storm"


def error_names(errors: dict[str, int]) -> dict[str, int]:
    """ "JOIN_GROUP:79" -> "JOIN_GROUP:MEMBER_ID_REQUIRED", as corral load reports them."""
    out = {}
    for key, n in errors.items():
        api, _, code = key.partition(":")
        try:
            code = ErrorCode(int(code)).name
        except ValueError:
            pass
        out[f"{api}:{code}"] = n
    return out


def run_once(broker_kind: str, members: int, args) -> dict:
    port = free_port()
    group = f"join-storm-{uuid.uuid4().hex[:8]}"
    # The subscribed topics as corral load lays them out (one per member's partition, at most
    # 2,000 per topic). The coordinator never looks them up, so they are not created.
    topics = topic_layout(default_topic(group), members)
    kafka_settings = {
        "group.initial.rebalance.delay.ms": 0,
        **dict(kv.split("=", 1) for kv in args.kafka_set),
    }
    with lean_broker(
        broker_kind,
        port,
        ["--set", "group.initial.rebalance.delay.ms=0"],
        kafka_settings=kafka_settings,
    ) as broker:
        wait_port(port, time.monotonic() + 60)
        wait_for_coordinator(port, group)
        rss_before = rss_kb(broker.pid)
        command = [
            str(JOIN_STORM_BIN),
            "--port",
            str(port),
            "--members",
            str(members),
            "--group",
            group,
            "--topics",
            ",".join(f"{t}:{n}" for t, n in topics.items()),
            "--heartbeat-interval-ms",
            str(args.heartbeat_interval_ms),
            "--connects-in-flight",
            str(args.connects_in_flight),
            "--timeout",
            str(args.timeout),
        ]
        cpu_start = cpu_seconds(broker.pid)
        done = subprocess.run(command, stdout=subprocess.PIPE, text=True, timeout=args.timeout + 30)
        broker_cpu = cpu_seconds(broker.pid) - cpu_start
        rss_after = rss_kb(broker.pid)
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(f"join-storm driver exited with {done.returncode}")
    result = json.loads(done.stdout)
    result["errors"] = error_names(result["errors"])
    return {
        "broker": broker_kind,
        **result,
        "broker_cpu": round(broker_cpu, 2),
        "broker_rss_mib": {"before": rss_before // 1024, "after": rss_after // 1024},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", default="1000,10000", help="comma-separated group sizes")
    parser.add_argument("--broker", choices=["corral", "kafka", "both"], default="both")
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds the driver waits for a stable group (then stable=false)",
    )
    parser.add_argument("--heartbeat-interval-ms", type=int, default=3000)
    parser.add_argument("--connects-in-flight", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=1, help="runs per broker and size")
    parser.add_argument(
        "--kafka-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Kafka broker setting, e.g. socket.listen.backlog.size=4096 "
        "(Kafka's default backlog of 50 drops most of 500 SYNs at once)",
    )
    args = parser.parse_args()
    # One socket per member.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    build_driver()
    brokers = ["corral", "kafka"] if args.broker == "both" else [args.broker]
    for members in (int(m) for m in args.members.split(",")):
        for kind in brokers:
            for _ in range(args.repeat):
                print(json.dumps(run_once(kind, members, args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
