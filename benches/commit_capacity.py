"""Durable OffsetCommits per second for N members x P partitions, with heartbeat_capacity's lean driver.

Creates N x P partitions (topics of 2,000: Kafka refuses more than 10,000 records per
CreateTopics), joins N members (one generation), then each member commits
its own P partitions (OffsetCommit v8, generation checked) at a paced total rate, one request in
flight per member. Every answer is decoded and its per-partition error codes counted. Extra
`--set NAME=VALUE` go to corral (e.g. log.flush.interval.messages=9223372036854775807 to see what
the fsync costs).

    python benches/commit_capacity.py --members 1000 --partitions 10 --rates 500,1000,2000,4000
    python benches/commit_capacity.py --broker kafka      # Apache Kafka (benches/kafka_ref.py)
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from groups_scale import free_port, wait_port
from heartbeat_capacity import (
    call_all,
    join_all,
    lean_broker,
    read_frame,
    step,
    wait_for_coordinator,
)

from corral import _core

CREATE_TOPICS, OFFSET_COMMIT = 19, 8
GROUP, TOPIC = "commit-capacity", "commit-capacity"
PARTITIONS_PER_TOPIC = 2000


def commit_errors(frame: bytes) -> list[int]:
    _, response = _core.decode_response(OFFSET_COMMIT, 8, frame)
    return [p["error_code"] for t in response["topics"] for p in t["partitions"]]


def commit_topics(topics: list[str], first: int, count: int, offset: int) -> list[dict]:
    """OffsetCommit topics for global partitions first..first+count (spread over the topics)."""
    by_topic: dict[str, list[dict]] = {}
    for g in range(first, first + count):
        by_topic.setdefault(topics[g // PARTITIONS_PER_TOPIC], []).append(
            {
                "partition_index": g % PARTITIONS_PER_TOPIC,
                "committed_offset": offset,
                "committed_leader_epoch": -1,
                "committed_metadata": "",
            }
        )
    return [{"name": t, "partitions": ps} for t, ps in by_topic.items()]


def send_and_read(sock: socket.socket, frame: bytes) -> bytes:
    sock.sendall(frame)
    return read_frame(sock)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10, help="per member")
    parser.add_argument("--rates", default="500,1000,2000,4000")
    parser.add_argument("--seconds", type=float, default=4)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--broker", choices=["corral", "kafka"], default="corral")
    args = parser.parse_args()
    port = free_port()
    with lean_broker(args.broker, port, [x for kv in args.set for x in ("--set", kv)]) as broker:
        wait_port(port, time.monotonic() + 60)
        wait_for_coordinator(port, GROUP)
        socks, ids, generation = join_all(port, args.members, GROUP)
        total = args.members * args.partitions
        topics = [f"{TOPIC}-{t}" for t in range(-(-total // PARTITIONS_PER_TOPIC))]
        for name in topics:  # one per request: Kafka counts records per request
            [created] = call_all(
                socks[:1],
                CREATE_TOPICS,
                4,
                [
                    {
                        "topics": [
                            {
                                "name": name,
                                "num_partitions": PARTITIONS_PER_TOPIC,
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
        print(
            f"{args.broker}: {args.members} members joined; {len(topics)} topics of "
            f"{PARTITIONS_PER_TOPIC} partitions created",
            flush=True,
        )
        offset = int(time.time() * 1000)
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
                    "topics": commit_topics(topics, i * args.partitions, args.partitions, offset),
                },
                "commit-capacity",
            )
            for i, m in enumerate(ids)
        ]
        # Kafka makes new partitions known asynchronously: commit once everywhere until
        # every partition is accepted.
        deadline = time.monotonic() + 120
        while True:
            codes = {
                c
                for sock, frame in zip(socks, frames)
                for c in commit_errors(send_and_read(sock, frame))
            }
            if codes == {0} or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert codes == {0}, f"commits still refused: {codes}"
        for rate in (float(r) for r in args.rates.split(",")):
            print(step(socks, frames, rate, args.seconds, broker.pid, commit_errors), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
