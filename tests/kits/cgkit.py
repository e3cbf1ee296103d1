"""The member kit of the group tests: real members in child processes and what they report.

Classic members (`Member`, `assigned_once`, `stop_all`): one client each
(confluent-kafka, kafka-python or aiokafka) in a tests/kits/group_member.py process, reporting its
assignments through the client's own callbacks; `FAST_GROUPS` and `wait_until` for every test.

KIP-848 members (`MemberProcess`): confluent-kafka and Java kafka-clients,
`group.protocol=consumer`, or classic members for the migration tests, in child processes, each
member's reports kept in a `CgMember` for the ownership invariant checker
(tests/kits/ownership.py); `wait_stable` until the coordinator agrees with them
(ConsumerGroupDescribe through raw frames, tests/kits/raw_groups.py). Records and offsets through
confluent-kafka: `create_topics`, `produce`, `wait_consumed`, `committed`.

Members: tests/kits/cg_member.py (confluent) and tests/clients/java/ConsumerGroupMember.java
(Java, compiled once into the jar cache by tests/kits/kafka_java.py); one process may host
several members (each KafkaConsumer on its own thread); a SIGKILL of the process crashes all of
them. The Go and Node members are tests/kits/polyglot.py's.

Outside pytest: `python tests/kits/cgkit.py compile` fetches the jars (the reference broker's and
kafka-tools) and compiles the Java programs (tests/kits/kafka_java.py), as CI setup does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import polyglot
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_java import JVM_FLAGS, compile_programs, java_member_classes, kafka_jars
from ownership import TP, CgMember, check_ownership, partitioned
from raw_groups import describe

HERE = Path(__file__).resolve().parent
PY_MEMBER = HERE / "cg_member.py"

# Broker settings that keep KIP-848 tests fast: every epoch bump computes its target at once (no
# KIP-1263 batching), members heartbeat every 500 ms, a crashed member is fenced after 4 s.
CG_FAST = {
    "group.consumer.assignment.interval.ms": 0,
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.session.timeout.ms": 4000,
    "group.consumer.min.session.timeout.ms": 1000,
}


class MemberProcess:
    """A process hosting members: `client` is "confluent", "java", "franz-go", "sarama" or
    "kafkajs"; `members` are names or dicts (name, instance_id, client_id, topics, regex,
    regex_kind, assignor, commit, protocol, strategy, session_timeout_ms, heartbeat_interval_ms,
    max_poll_interval_ms: see tests/kits/cg_member.py; the Go and Node members of tests/kits/polyglot.py
    take the group's settings, names, client and instance ids only)."""

    def __init__(
        self,
        client: str,
        bootstrap: str,
        group: str,
        members: Iterable,
        topics: list[str] | None = None,
        regex: str | None = None,
        **config,
    ):
        specs = [m if isinstance(m, dict) else {"name": m} for m in members]
        cfg = {"bootstrap": bootstrap, "group": group, "members": specs, **config}
        if topics is not None:
            cfg["topics"] = topics
        if regex is not None:
            cfg["regex"] = regex
        env = None
        if client == "confluent":
            cmd = [sys.executable, str(PY_MEMBER), json.dumps(cfg)]
        elif client == "java":
            lib = kafka_jars()
            cmd = [
                "java",
                *JVM_FLAGS,
                "-cp",
                f"{java_member_classes()}{os.pathsep}{lib}/*",
                "ConsumerGroupMember",
                json.dumps(cfg),
            ]
        else:  # franz-go, sarama, kafkajs (tests/kits/polyglot.py)
            cmd, env = polyglot.member_command(client, cfg)
        self.client = client
        self.members = {s["name"]: CgMember(s["name"], client, self) for s in specs}
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            env=env,
        )
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            member = self.members.get(event.get("m"))
            if member is None:
                continue
            with self.lock:
                kind = event["ev"]
                if kind == "owned":
                    member.owned = frozenset((t, p) for t, p in event["owned"])
                    member.timeline.append((event["t"], member.owned))
                    member.whys.append(event["why"])
                    if "epoch" in event:
                        member.epochs.append(event["epoch"])
                elif kind == "records":
                    member.records.extend(tuple(r) for r in event["records"])
                elif kind == "error":
                    member.errors.append(event["error"])
                elif kind == "closed":
                    member.closed = True

    def __getitem__(self, name: str) -> CgMember:
        return self.members[name]

    def close(self, name: str) -> None:
        """A clean leave of one member."""
        self.members[name].closing_since = time.monotonic_ns()
        self.proc.stdin.write(f"close {name}\n")
        self.proc.stdin.flush()

    def start(self, name: str) -> None:
        """Starts a member held back ("hold": true; confluent members only)."""
        self.proc.stdin.write(f"start {name}\n")
        self.proc.stdin.flush()

    def close_all(self, timeout: float = 30) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout)
        self.reader.join(5)

    def kill(self) -> None:
        """A crash of every member of the process (no leave heartbeat)."""
        self.proc.kill()
        self.proc.wait()
        self.reader.join(5)
        now = time.monotonic_ns()
        with self.lock:
            for m in self.members.values():
                if not m.closed:
                    m.dead = True
                    m.owned = frozenset()
                    m.timeline.append((now, frozenset()))
                    m.whys.append("killed")

    def log_tail(self, lines: int = 40) -> str:
        self.stderr.seek(0)
        return "".join(self.stderr.readlines()[-lines:])


def members_of(processes: Iterable[MemberProcess]) -> list[CgMember]:
    return [m for p in processes for m in p.members.values()]


def stop_processes(processes: Iterable[MemberProcess]) -> None:
    for p in processes:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait()


def stable_view(
    bootstrap: str, group: str, members: list[CgMember], partitions: set[TP]
) -> dict | None:
    """The describe answer if the group is settled: the live members own every partition once,
    the coordinator says Stable with exactly those members, each holding its target at the
    group epoch and what its client reports. None otherwise."""
    live = [m for m in members if m.live]
    if not partitioned(members, partitions):
        return None
    g = describe(bootstrap, group)
    if g["error_code"] or g["group_state"] != "Stable" or len(g["members"]) != len(live):
        return None
    by_client = {m["client_id"]: m for m in g["members"]}
    for m in live:
        d = by_client.get(m.name)
        if (
            d is None
            or d["assignment"] != m.owned
            or d["target_assignment"] != m.owned
            or d["member_epoch"] != g["group_epoch"]
        ):
            return None
    return g


def wait_stable(
    bootstrap: str,
    group: str,
    processes: list[MemberProcess],
    partitions: set[TP],
    timeout: float = 40,
    retired: Iterable[CgMember] = (),
) -> dict:
    """Waits until the group is settled (see stable_view), checking the ownership invariant on
    the way (over `retired` too: members of processes gone, whose history still counts);
    returns the describe answer."""
    members = members_of(processes)
    watched = [*members, *retired]
    found: list[dict] = []

    def settled() -> bool:
        check_ownership(watched)
        g = stable_view(bootstrap, group, members, partitions)
        if g is not None:
            found.append(g)
        return g is not None

    try:
        wait_until(settled, timeout, f"group {group} stable over {len(partitions)} partitions")
    except AssertionError as e:
        raise AssertionError(
            f"{e}\nmembers: {members}\ndescribe: {describe(bootstrap, group)}"
            + "".join(f"\n--- {p.client} log\n{p.log_tail()}" for p in processes)
        ) from None
    return found[-1]


# ========================= records and offsets, through confluent-kafka =========================


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()])
    for f in futures.values():
        f.result(timeout=20)


def committed(bootstrap: str, group: str, partitions) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(t, p) for t, p in sorted(partitions)]
    )
    answer = admin.list_consumer_group_offsets([request])[group].result(timeout=10)
    return {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions}


def produce(
    bootstrap: str, topics: dict[str, int], per_partition: int
) -> set[tuple[str, int, int]]:
    """`per_partition` records into every partition; returns the (topic, partition, offset) it
    wrote, counting from each partition's end before."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    acked: set[tuple[str, int, int]] = set()

    def done(err, msg):
        assert err is None, err
        acked.add((msg.topic(), msg.partition(), msg.offset()))

    for topic, n in topics.items():
        for p in range(n):
            for i in range(per_partition):
                producer.produce(topic, f"{topic}-{p}-{i}".encode(), partition=p, on_delivery=done)
    assert producer.flush(30) == 0
    return acked


def consumed(members) -> list[tuple[str, int, int]]:
    return [r for m in members for r in m.records]


def wait_consumed(members, expected: set, timeout: float = 30) -> None:
    """Every expected record consumed, and none twice (the members commit before every poll, so
    a partition moving between members does not replay anything)."""
    wait_until(
        lambda: expected <= set(consumed(members)), timeout, f"{len(expected)} records consumed"
    )
    got = consumed(members)
    twice = sorted(r for r in set(got) if got.count(r) > 1)
    assert not twice, f"consumed twice: {twice[:20]}; members {members}"


# ==================== classic members, one client per group_member.py process ====================


MEMBER_SCRIPT = Path(__file__).with_name("group_member.py")

# Broker settings that keep group tests fast: no initial delay, short sessions allowed.
FAST_GROUPS = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 500}


class Member:
    """A consumer-group member process (tests/kits/group_member.py) and the assignments it reported."""

    def __init__(
        self,
        client: str,
        bootstrap: str,
        group: str,
        topic: str,
        *,
        strategy: str = "range",
        session_ms: int = 6000,
        instance_id: str | None = None,
    ):
        cmd = [
            sys.executable,
            str(MEMBER_SCRIPT),
            client,
            bootstrap,
            group,
            topic,
            "--strategy",
            strategy,
            "--session-ms",
            str(session_ms),
        ]
        if instance_id:
            cmd += ["--instance-id", instance_id]
        self.name = f"{client}:{instance_id or ''}"
        # The client's own log (INFO), shown when a wait on this member times out.
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True
        )
        self.history: list[list[int]] = []
        self._changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            event = json.loads(line)
            with self._changed:
                self.history.append(event["assigned"])
                self._changed.notify_all()

    def log_tail(self, lines: int = 60) -> str:
        if self.proc.poll() is None:
            # Where each of its threads is now (tests/kits/group_member.py registers faulthandler).
            self.proc.send_signal(signal.SIGUSR1)
            time.sleep(0.2)
        self.stderr.seek(0)
        return "".join(self.stderr.readlines()[-lines:])

    @property
    def assigned(self) -> list[int]:
        return self.history[-1] if self.history else []

    def close(self, timeout: float = 20) -> None:
        """A clean leave: the client closes (LeaveGroup for dynamic members)."""
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout)

    def kill(self) -> None:
        """A crash: no LeaveGroup, the session timeout has to notice."""
        self.proc.kill()
        self.proc.wait()


def wait_until(
    condition: Callable[[], bool], timeout: float, what: str, members: list[Member] = ()
) -> float:
    """Polls `condition`; returns the seconds it took, or fails naming `what` (and showing what
    each of `members` reported, and how it ended)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if condition():
            return time.monotonic() - start
        time.sleep(0.05)
    seen = "; ".join(f"{m.name} exit={m.proc.poll()} history={m.history}" for m in members)
    logs = "".join(f"\n--- {m.name} log (last lines)\n{m.log_tail()}" for m in members)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}. {seen}{logs}")


def assigned_once(members: list[Member], partitions: int) -> bool:
    """Every partition owned by exactly one of `members`."""
    owned = [p for m in members for p in m.assigned]
    return sorted(owned) == list(range(partitions))


def stop_all(members: list[Member]) -> None:
    for m in members:
        if m.proc.poll() is None:
            m.kill()


if __name__ == "__main__":
    if sys.argv[1:] != ["compile"]:
        raise SystemExit("usage: python tests/kits/cgkit.py compile")
    classes, *jars = compile_programs()
    print(classes)
    print(*jars)
