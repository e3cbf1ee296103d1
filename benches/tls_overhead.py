"""What TLS costs the broker: CPU per heartbeat and per OffsetCommit over an SSL listener against
a PLAINTEXT one, measured in one run on one broker.

One corral listens on PLAINTEXT and SSL (PEM certificates made for the run by tests/kits/tlscerts.py).
Two groups of N members join, one over each listener (the TLS members use Python's ssl, TLS 1.3).
Then rounds alternate, at the same offered rate: a paced heartbeat step on each group
(heartbeat_capacity.step), then a paced commit step on each (OffsetCommit v8 of P partitions per
member, as commit_capacity). Reported per step: achieved rate, latency, errors, and the broker's CPU
microseconds per request; at the end the medians per kind and the ratio TLS / PLAINTEXT (issue 17's
target: at most 1.5).

    python benches/tls_overhead.py --members 500 --heartbeat-rate 10000 --commit-rate 1000
"""

from __future__ import annotations

import argparse
import json
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "kits"))
from commit_capacity import commit_errors, commit_topics, send_and_read  # noqa: E402
from groups_scale import cpu_seconds, free_port, stop_broker, wait_port  # noqa: E402
from heartbeat_capacity import (  # noqa: E402
    HEARTBEAT,
    HEARTBEAT_V,
    call_all,
    join_all,
    step,
    wait_for_coordinator,
)
from tlscerts import make_certs  # noqa: E402

from corral import _core  # noqa: E402

CREATE_TOPICS, OFFSET_COMMIT = 19, 8


def tls_connector(ca: Path):
    context = ssl.create_default_context(cafile=str(ca))
    context.minimum_version = ssl.TLSVersion.TLSv1_3

    def connect(address):
        return context.wrap_socket(socket.create_connection(address), server_hostname="localhost")

    return connect


def measured_step(socks, frames, rate: float, seconds: float, broker_pid: int, **extra) -> dict:
    """heartbeat_capacity.step, plus the broker's CPU microseconds per answered request (from
    unrounded CPU time: the step's own broker_cpu is rounded to 0.01 of a core)."""
    cpu_start = cpu_seconds(broker_pid)
    result = step(socks, frames, rate, seconds, broker_pid, **extra)
    # The step's 2 s wait for answers in flight after the paced phase costs next to nothing.
    cpu = cpu_seconds(broker_pid) - cpu_start
    result["broker_us_per_request"] = round(cpu * 1e6 / max(result["achieved"] * seconds, 1), 1)
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--members", type=int, default=500)
    parser.add_argument("--partitions", type=int, default=4, help="committed per member")
    parser.add_argument("--heartbeat-rate", type=float, default=10000)
    parser.add_argument("--commit-rate", type=float, default=1000)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    plain_port, tls_port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as scratch:
        certs = make_certs(Path(scratch) / "certs")
        broker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "corral.cli",
                "serve",
                "--data-dir",
                f"{scratch}/data",
                "--log-level",
                "WARNING",
                "--set",
                f"listeners=PLAINTEXT://127.0.0.1:{plain_port},SSL://127.0.0.1:{tls_port}",
                "--set",
                f"ssl.keystore.location={certs.server}",
            ]
        )
        try:
            wait_port(plain_port, time.monotonic() + 60)
            results = run(args, broker.pid, plain_port, tls_port, tls_connector(certs.ca))
        finally:
            stop_broker(broker)
    print(json.dumps(results), flush=True)
    return 0


def run(args, broker_pid: int, plain_port: int, tls_port: int, connect_tls) -> dict:
    groups = {}
    for name, port, connect in (
        ("plaintext", plain_port, socket.create_connection),
        ("tls", tls_port, connect_tls),
    ):
        group = f"tls-overhead-{name}"
        wait_for_coordinator(plain_port, group)
        socks, ids, generation = join_all(port, args.members, group, connect)
        groups[name] = (group, socks, ids, generation)
    total = args.members * args.partitions
    assert total <= 2000, "one topic of members x partitions, at most 2000 (CreateTopics' bound)"
    topic = "tls-overhead"
    [created] = call_all(
        groups["plaintext"][1][:1],
        CREATE_TOPICS,
        4,
        [
            {
                "topics": [
                    {
                        "name": topic,
                        "num_partitions": total,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout_ms": 60000,
                "validate_only": False,
            }
        ],
    )
    assert created["topics"][0]["error_code"] == 0, created
    frames = {}
    offset = int(time.time() * 1000)
    for name, (group, socks, ids, generation) in groups.items():
        beats = [
            _core.encode_request(
                HEARTBEAT,
                HEARTBEAT_V,
                7,
                {
                    "group_id": group,
                    "generation_id": generation,
                    "member_id": m,
                    "group_instance_id": None,
                },
                "tls-overhead",
            )
            for m in ids
        ]
        commits = [
            _core.encode_request(
                OFFSET_COMMIT,
                8,
                9,
                {
                    "group_id": group,
                    "generation_id_or_member_epoch": generation,
                    "member_id": m,
                    "group_instance_id": None,
                    "topics": commit_topics([topic], i * args.partitions, args.partitions, offset),
                },
                "tls-overhead",
            )
            for i, m in enumerate(ids)
        ]
        assert {c for c in commit_errors(send_and_read(socks[0], commits[0]))} == {0}
        frames[name] = (beats, commits)
    cost: dict[str, list[float]] = {}
    for round_ in range(args.rounds):
        for kind, rate, errors_of in (
            ("heartbeat", args.heartbeat_rate, None),
            ("commit", args.commit_rate, commit_errors),
        ):
            for name, (_group, socks, _ids, _generation) in groups.items():
                beats, commits = frames[name]
                sent = beats if kind == "heartbeat" else commits
                extra = {} if errors_of is None else {"errors_of": errors_of}
                result = measured_step(socks, sent, rate, args.seconds, broker_pid, **extra)
                result.update(kind=kind, listener=name, round=round_)
                cost.setdefault(f"{kind}/{name}", []).append(result["broker_us_per_request"])
                print(json.dumps(result), flush=True)
    medians = {key: statistics.median(values) for key, values in cost.items()}
    return {
        "members": args.members,
        "medians_us": medians,
        "heartbeat_tls_over_plaintext": round(
            medians["heartbeat/tls"] / medians["heartbeat/plaintext"], 2
        ),
        "commit_tls_over_plaintext": round(medians["commit/tls"] / medians["commit/plaintext"], 2),
    }


if __name__ == "__main__":
    sys.exit(main())
