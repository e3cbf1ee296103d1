"""A healthy group's commit latency while another client auto-creates thousands of topics.

Topic creation must not stall the event loop (issue 10: rewriting the registry per creation cost
32 ms of loop at 3,800 topics, and a healthy consumer saw a 4 s commit stall under a create storm).
This joins a small group, then times paced OffsetCommits (heartbeat_capacity's lean driver, one in
flight per member) twice: alone, and while a second process auto-creates `--topics` topics through
Metadata requests on `--storm-connections` connections (one request in flight each, as clients
do). Prints both windows' p50/p99 and their ratio.

    python benches/create_storm.py                      # corral, 2,500 topics
    python benches/create_storm.py --broker kafka       # Apache Kafka (benches/kafka_ref.py)
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from commit_capacity import commit_errors
from groups_scale import free_port, wait_port
from heartbeat_capacity import call_all, join_all, lean_broker, step, wait_for_coordinator

from corral import _core

CREATE_TOPICS, OFFSET_COMMIT, METADATA = 19, 8, 3
GROUP, TOPIC = "create-storm", "create-storm-commits"


def storm(port: int, topics: int, connections: int) -> None:
    """Auto-creates `topics` topics, one per Metadata v9 request, over `connections` sockets;
    prints how long it took as JSON."""
    import selectors

    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(connections)]
    sel = selectors.DefaultSelector()
    names = iter(f"storm-{i}" for i in range(topics))
    created, errors, started = 0, 0, time.perf_counter()

    def send(sock: socket.socket) -> bool:
        name = next(names, None)
        if name is None:
            return False
        sock.sendall(
            _core.encode_request(
                METADATA,
                9,
                1,
                {
                    "topics": [{"name": name, "topic_id": bytes(16)}],
                    "allow_auto_topic_creation": True,
                    "include_topic_authorized_operations": False,
                },
                "create-storm",
            )
        )
        return True

    for sock in socks:
        if send(sock):
            sel.register(sock, selectors.EVENT_READ)
    from heartbeat_capacity import read_frame

    while sel.get_map():
        for key, _ in sel.select():
            _, response = _core.decode_response(METADATA, 9, read_frame(key.fileobj))
            code = response["topics"][0]["error_code"]
            created += code in (0, 5)  # Kafka answers LEADER_NOT_AVAILABLE while it creates
            errors += code not in (0, 5)
            if not send(key.fileobj):
                sel.unregister(key.fileobj)
    print(
        json.dumps(
            {
                "created": created,
                "errors": errors,
                "seconds": round(time.perf_counter() - started, 2),
            }
        ),
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--broker", choices=["corral", "kafka"], default="corral")
    parser.add_argument("--members", type=int, default=20)
    parser.add_argument("--rate", type=float, default=400, help="commits per second")
    parser.add_argument("--seconds", type=float, default=6, help="each measured window")
    parser.add_argument("--topics", type=int, default=2500)
    parser.add_argument("--storm-connections", type=int, default=4)
    parser.add_argument("--storm-only", metavar="PORT", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.storm_only:
        storm(args.storm_only, args.topics, args.storm_connections)
        return 0
    port = free_port()
    with lean_broker(args.broker, port, []) as broker:
        wait_port(port, time.monotonic() + 60)
        wait_for_coordinator(port, GROUP)
        socks, ids, generation = join_all(port, args.members, GROUP)
        [created] = call_all(
            socks[:1],
            CREATE_TOPICS,
            4,
            [
                {
                    "topics": [
                        {
                            "name": TOPIC,
                            "num_partitions": args.members,
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
        frames = [
            _core.encode_request(
                OFFSET_COMMIT,
                8,
                9,
                {
                    "group_id": GROUP,
                    "generation_id_or_member_epoch": generation,
                    "member_id": m,
                    "group_instance_id": None,
                    "topics": [
                        {
                            "name": TOPIC,
                            "partitions": [
                                {
                                    "partition_index": i,
                                    "committed_offset": 1,
                                    "committed_leader_epoch": -1,
                                    "committed_metadata": "",
                                }
                            ],
                        }
                    ],
                },
                "create-storm",
            )
            for i, m in enumerate(ids)
        ]
        step(socks, frames, args.rate, 2, broker.pid, commit_errors)  # warm-up
        quiet = step(socks, frames, args.rate, args.seconds, broker.pid, commit_errors)
        print("without storm:", json.dumps(quiet), flush=True)
        stormer = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--storm-only",
                str(port),
                "--topics",
                str(args.topics),
                "--storm-connections",
                str(args.storm_connections),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        stormy = step(socks, frames, args.rate, args.seconds, broker.pid, commit_errors)
        storm_done = stormer.poll() is not None
        print("during storm: ", json.dumps(stormy), flush=True)
        result = json.loads(stormer.communicate(timeout=600)[0])
        print(
            f"storm: {result['created']} topics in {result['seconds']} s ({result['errors']} errors); "
            f"{'finished inside' if storm_done else 'still running at the end of'} the window",
            flush=True,
        )
        print(
            f"p99 during storm / p99 without: {stormy['p99_ms'] / quiet['p99_ms']:.2f} "
            f"(p50 {stormy['p50_ms'] / quiet['p50_ms']:.2f})",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
