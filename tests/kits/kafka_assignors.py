"""Kafka's own assignors (UniformAssignor, RangeAssignor from kafka-group-coordinator 4.4.0, the
jars the reference broker uses) behind a small Java harness, tests/clients/java/AssignorHarness.java,
compiled once with javac into the cache next to the jars. One JVM answers many requests.

    python tests/kits/kafka_assignors.py compile     # CI setup: fetch the jars, compile the harness

    with KafkaAssignors() as kafka:
        assignment = kafka.assign("uniform", group, partition_counts)   # corral's form
        median_ms, moved = kafka.bench("range", group, partition_counts, "join", warmup=5, runs=9)

Topic ids must be corral's test form, `n.to_bytes(16, "big")`; the harness sees Uuid(1, n).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benches"))
from checkout import JAVA
from kafka_ref import DEFAULT_VERSION, compile_java
from kafka_ref import fetch as kafka_jars

from corral.assignors import GroupSpec

SOURCE = JAVA / "AssignorHarness.java"


def compiled(version: str = DEFAULT_VERSION) -> Path:
    """The harness's class directory (compiled on first use, kept per source and version)."""
    return compile_java(SOURCE, version)


def _topic(topic: bytes) -> int:
    return int.from_bytes(topic, "big")


def encode(command: str, assignor: str, group: GroupSpec, counts: Mapping, extra: str = "") -> str:
    """The harness's request for `group` (previous assignments included)."""
    lines = [f"{command} {assignor} {group.subscription_type.value} {extra}".rstrip()]
    subscribed = set()
    set_index: dict[frozenset, int] = {}
    members = []
    for member_id, spec in group.members.items():
        topics = frozenset(spec.subscribed_topic_ids)
        subscribed |= topics
        index = set_index.setdefault(topics, len(set_index))
        instance = "-" if spec.instance_id is None else "+" + spec.instance_id
        parts = [member_id, instance, str(index), str(len(spec.assignment))]
        for topic, partitions in spec.assignment.items():
            parts += [str(_topic(topic)), str(len(partitions)), *map(str, partitions)]
        members.append(" ".join(parts))
    lines.append(f"topics {len(subscribed)}")
    lines += [f"{_topic(t)} {counts[t]}" for t in subscribed]
    lines.append(f"sets {len(set_index)}")
    lines += [" ".join([str(len(s)), *(str(_topic(t)) for t in s)]) for s in set_index]
    lines.append(f"members {len(members)}")
    lines += members
    lines.append("end")
    return "\n".join(lines) + "\n"


class KafkaAssignors:
    def __init__(self, version: str = DEFAULT_VERSION, heap: str = "2g"):
        classes = compiled(version)
        lib = kafka_jars(version)
        self.process = subprocess.Popen(
            [
                "java",
                f"-Xmx{heap}",
                "-XX:+UseParallelGC",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                "-cp",
                f"{classes}:{lib}/*",
                "AssignorHarness",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1 << 20,
        )

    def _request(self, text: str) -> str:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(text)
        self.process.stdin.flush()
        first = self.process.stdout.readline()
        if not first:
            raise RuntimeError("the assignor harness exited")
        if first.startswith("error "):
            raise RuntimeError(first[6:].strip())
        return first

    def assign(
        self, assignor: str, group: GroupSpec, counts: Mapping
    ) -> dict[str, dict[bytes, tuple]]:
        """Kafka's assignment, in corral's form (member -> topic -> ascending tuple)."""
        first = self._request(encode("assign", assignor, group, counts))
        count = int(first.split()[1])
        result: dict[str, dict[bytes, tuple]] = {}
        for _ in range(count):
            fields = self.process.stdout.readline().split()
            member, topics, i = fields[0], int(fields[1]), 2
            assignment = {}
            for _ in range(topics):
                topic, n = int(fields[i]), int(fields[i + 1])
                assignment[topic.to_bytes(16, "big")] = tuple(
                    int(p) for p in fields[i + 2 : i + 2 + n]
                )
                i += 2 + n
            result[member] = assignment
        return result

    def bench(
        self,
        assignor: str,
        group: GroupSpec,
        counts: Mapping,
        scenario: str,
        warmup: int,
        runs: int,
    ) -> tuple[float, int]:
        """(median ms, partitions moved) of Kafka's assign() for `scenario`: "full" on `group`;
        "join"/"leave" after assigning `group` fully, a member "newMember" with the last
        member's subscription joins, or the first member leaves."""
        first = self._request(
            encode(f"bench-{scenario}", assignor, group, counts, f"{warmup} {runs}")
        )
        _, median, moved = first.split()
        return float(median), int(moved)

    def close(self) -> None:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.close()  # the harness exits at the end of its input
        self.process.wait(timeout=30)
        self.process.stdout.close()

    def __enter__(self) -> KafkaAssignors:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


if __name__ == "__main__":
    if sys.argv[1:] == ["compile"]:
        print(compiled())
    else:
        raise SystemExit("usage: python tests/kits/kafka_assignors.py compile")
