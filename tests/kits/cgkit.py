"""The member kit of the group tests: real members in child processes and what they report.

Classic members (`Member`, `assigned_once`, `stop_all`): one client each
(confluent-kafka, kafka-python or aiokafka) in a tests/kits/group_member.py process, reporting its
assignments through the client's own callbacks; `FAST_GROUPS` and `wait_until` for every test.

KIP-848 members (`MemberProcess`, `CgMember`): confluent-kafka and Java kafka-clients,
`group.protocol=consumer`, or classic members for the migration tests, in child processes, the
ownership invariant checker over what every member reported, and ConsumerGroupDescribe,
ListGroups and DescribeGroups through raw frames (they carry epochs, group types and member
types, which no admin client shows).

Members: tests/kits/cg_member.py (confluent) and tests/clients/java/ConsumerGroupMember.java
(Java, compiled once into the jar cache); one process may host several members (each
KafkaConsumer on its own thread); a SIGKILL of the process crashes all of them. The Go and Node
members are tests/kits/polyglot.py's. `Script`: members speaking raw ConsumerGroupHeartbeat
frames, for a scenario compared frame by frame between brokers.

Outside pytest: `python tests/kits/cgkit.py compile` fetches the jars (the reference broker's and
kafka-tools) and compiles the Java programs, as CI setup does.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import polyglot

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benches"))
from checkout import JAVA
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_ref import DEFAULT_VERSION, compile_java
from kafka_ref import fetch as kafka_jars

HERE = Path(__file__).resolve().parent
PY_MEMBER = HERE / "cg_member.py"
JAVA_MEMBER = JAVA / "ConsumerGroupMember.java"
TOOL_RUNNER = JAVA / "ToolRunner.java"
# kafka-tools (kafka-consumer-groups is its ConsumerGroupCommand): 4.4.0 is not on Maven Central,
# 4.3.1 is the newest that is.
TOOLS_VERSION = "4.3.1"

# Broker settings that keep KIP-848 tests fast: every epoch bump computes its target at once (no
# KIP-1263 batching), members heartbeat every 500 ms, a crashed member is fenced after 4 s.
CG_FAST = {
    "group.consumer.assignment.interval.ms": 0,
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.session.timeout.ms": 4000,
    "group.consumer.min.session.timeout.ms": 1000,
}

# The JVM of a Java member: small, quick to start (these are short-lived test clients).
JVM_FLAGS = [
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-Xss512k",
    "-Xmx192m",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
]

TP = tuple[str, int]


@contextlib.contextmanager
def kafka_reference(settings: dict) -> Iterator[str]:
    """An Apache Kafka 4.4 broker (benches/kafka_ref.py) with `settings`: its bootstrap."""
    from kafka_ref import KafkaBroker

    broker = KafkaBroker(settings=settings)
    broker.start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


def java_member_classes(version: str = DEFAULT_VERSION) -> Path:
    """ConsumerGroupMember compiled against the reference broker's kafka-clients."""
    return compile_java(JAVA_MEMBER, version)


# kafka-configs: kafka.admin.ConfigCommand in the core jar up to 4.3 (4.4 moved it into
# kafka-tools, which Maven Central does not have for 4.4).
CONFIG_COMMAND = "kafka.admin.ConfigCommand"


def run_tool(
    main_class: str, commands: list[str], timeout: float = 120
) -> dict[str, tuple[int, str]]:
    """Runs a Kafka tool from kafka-tools (or, for kafka-configs, the 4.3 core jar) once per
    command line in one JVM (tests/clients/java/ToolRunner.java): {command: (exit code, output)}."""
    lib = kafka_jars(TOOLS_VERSION, "kafka_2.13" if main_class == CONFIG_COMMAND else "kafka-tools")
    classes = compile_java(
        TOOL_RUNNER
    )  # against kafka-clients 4.4.0: the Exit it uses is 4.3.1's too
    run = subprocess.run(
        ["java", *JVM_FLAGS, "-cp", f"{classes}{os.pathsep}{lib}/*", "ToolRunner", main_class],
        input="".join(c + "\n" for c in commands),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    out: dict[str, tuple[int, str]] = {}
    command, lines = None, []
    for line in run.stdout.splitlines():
        if line.startswith("### exit "):
            out[command] = (int(line[len("### exit ") :]), "\n".join(lines))
            command, lines = None, []
        elif line.startswith("### "):
            command = line[4:]
        elif command is not None:
            lines.append(line)
    missing = [c for c in commands if c not in out]
    assert not missing, (
        f"{main_class} did not run {missing}: {run.stdout[-2000:]}{run.stderr[-2000:]}"
    )
    return out


class CgMember:
    """One member as its process reports it."""

    def __init__(self, name: str, client: str, process: MemberProcess):
        self.name = name
        self.client = client
        self.process = process
        self.owned: frozenset[TP] = frozenset()
        # (monotonic ns, what it owns from then on); a crash adds (kill time, nothing).
        self.timeline: list[tuple[int, frozenset[TP]]] = []
        self.whys: list[str] = []  # "assigned" / "revoked" / "lost", one per timeline entry
        self.epochs: list[int] = []  # Java members: the member epoch at each change
        self.records: list[tuple[str, int, int]] = []
        self.errors: list[str] = []
        self.closed = False
        self.dead = False
        # When the test asked it to close (monotonic ns), if it did: see `check_ownership`.
        self.closing_since: int | None = None

    @property
    def live(self) -> bool:
        return not (self.closed or self.dead)

    @property
    def changes(self) -> int:
        """How many times what it owns changed (an incremental callback adding nothing is not a change)."""
        n, last = 0, frozenset()
        for _, owned in self.timeline:
            if owned != last:
                n, last = n + 1, owned
        return n

    def __repr__(self) -> str:
        state = "closed" if self.closed else "dead" if self.dead else "live"
        return f"{self.client}:{self.name}({state}, owns {sorted(self.owned)})"


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


# ===================================== the invariant checker =====================================


class OwnershipViolation(AssertionError):
    pass


def _reported(member: CgMember) -> list[tuple[int, frozenset[TP]]]:
    """The member's timeline, ending when the test asked it to close: from then on it is
    leaving, and what its callbacks say is the client's own affair. A librdkafka member of a
    consumer (KIP-848) group closing against Kafka 4.4 reported a partition revoked 1.2 s after
    the broker had given it to another member (so the client had already told the broker it
    let it go: its leave or acknowledgement went out before its revoke callback ran)."""
    if member.closing_since is None:
        return member.timeline
    return [(t, owned) for t, owned in member.timeline if t < member.closing_since] + [
        (member.closing_since, frozenset())
    ]


def check_ownership(members: Iterable[CgMember]) -> int:
    """Never one partition owned by two members: replays every member's reported ownership in
    clock order (each member reports inside its rebalance callbacks, so a revocation is
    reported before the client acknowledges it and an assignment after the broker granted it).
    Returns how many ownership changes it checked."""
    members = list(members)
    events = sorted((t, i, owned) for i, m in enumerate(members) for t, owned in _reported(m))
    owner: dict[TP, int] = {}
    held: dict[int, frozenset[TP]] = {}
    for t, i, owned in events:
        for tp in held.get(i, frozenset()) - owned:
            del owner[tp]
        for tp in owned - held.get(i, frozenset()):
            if tp in owner:
                raise OwnershipViolation(
                    f"{tp} owned by {members[owner[tp]].name} and {members[i].name} at once "
                    f"(t={t}); timelines: "
                    + "; ".join(
                        f"{m.name}: {[(tt, sorted(o)) for tt, o in m.timeline]}" for m in members
                    )
                )
            owner[tp] = i
        held[i] = owned
    return len(events)


def partitioned(members: Iterable[CgMember], partitions: set[TP]) -> bool:
    """Every partition owned by exactly one live member (and the dead or closed own nothing)."""
    owned = [tp for m in members for tp in m.owned]
    return len(owned) == len(set(owned)) and set(owned) == partitions


def all_partitions(topics: dict[str, int]) -> set[TP]:
    return {(t, p) for t, n in topics.items() for p in range(n)}


# =============================== ConsumerGroupDescribe, raw frames ===============================


def describe_raw(bootstrap: str, group: str) -> dict:
    """ConsumerGroupDescribe v1 of one group, as decoded."""
    from rawwire import RawClient

    with RawClient(int(bootstrap.rsplit(":", 1)[1])) as c:
        return c.call(69, 1, {"group_ids": [group], "include_authorized_operations": False})[
            "groups"
        ][0]


def list_groups_raw(bootstrap: str) -> dict[str, dict]:
    """ListGroups v5 (no filter): {group id: its entry (protocol_type, group_state, group_type)};
    retried while the coordinator loads (Kafka, until __consumer_offsets is ready)."""
    from rawwire import RawClient

    deadline = time.monotonic() + 30
    with RawClient(int(bootstrap.rsplit(":", 1)[1])) as c:
        while True:
            answer = c.call(16, 5, {"states_filter": [], "types_filter": []})
            if answer["error_code"] not in Script.TRANSIENT or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert answer["error_code"] == 0, answer
    return {g["group_id"]: g for g in answer["groups"]}


def describe_groups_raw(bootstrap: str, group: str) -> dict:
    """DescribeGroups v5 (the classic API) of one group, as decoded; each member's
    member_assignment also decoded as "assigned", {(topic, partition)} (None if the bytes are
    not a consumer protocol assignment)."""
    from rawwire import RawClient

    from corral import _core

    with RawClient(int(bootstrap.rsplit(":", 1)[1])) as c:
        g = c.call(15, 5, {"groups": [group], "include_authorized_operations": False})["groups"][0]
    for m in g["members"]:
        try:
            m["assigned"] = frozenset(
                (t, p)
                for t, ps in _core.decode_consumer_assignment(m["member_assignment"])[0]
                for p in ps
            )
        except ValueError:
            m["assigned"] = None
    return g


def describe(bootstrap: str, group: str) -> dict:
    """ConsumerGroupDescribe v1 of one group: Kafka's fields (group_state, group_epoch,
    assignment_epoch, members with member_epoch, assignment and target_assignment), with
    assignments as {(topic name, partition)}."""
    g = describe_raw(bootstrap, group)
    for m in g["members"]:
        for key in ("assignment", "target_assignment"):
            m[key] = frozenset(
                (t["topic_name"], p) for t in m[key]["topic_partitions"] for p in t["partitions"]
            )
    return g


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


# ================================== members speaking raw frames ==================================


class Script:
    """Scripted members speaking raw ConsumerGroupHeartbeat v1 to one broker. Every response is
    logged as (step, member, error, member id, epoch, heartbeat interval, assignment by topic
    name); `snapshot` logs ConsumerGroupDescribe. A member owns what its last assignment said
    and acknowledges revocations at its next heartbeat; the ownership checker watches them."""

    TRANSIENT = {
        14,
        15,
        16,
    }  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR

    def __init__(self, bootstrap: str, group: str):
        from rawwire import RawClient

        self.bootstrap, self.group = bootstrap, group
        self.client = RawClient(int(bootstrap.rsplit(":", 1)[1]))
        self.log: list = []
        self.epoch: dict[str, int] = {}
        self.owned: dict[str, dict[str, list[int]]] = {}
        self.views: dict[str, CgMember] = {}
        self._view = lambda name: self.views.setdefault(name, CgMember(name, "raw", None))
        self.names: dict[bytes, str] = {}
        self.ids: dict[str, bytes] = {}
        deadline = time.monotonic() + 60
        while True:  # Kafka creates __consumer_offsets on the first FindCoordinator
            answer = self.client.call(
                10, 4, {"key_type": 0, "coordinator_keys": [group], "key": ""}
            )
            if answer["coordinators"][0]["error_code"] == 0:
                break
            assert time.monotonic() < deadline, answer
            time.sleep(0.2)

    def refresh_topics(self) -> None:
        answer = self.client.call(
            3,
            12,
            {
                "topics": None,
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        self.names = {t["topic_id"]: t["name"] for t in answer["topics"]}
        self.ids = {name: tid for tid, name in self.names.items()}

    def wait_assignable(self, topics: dict[str, int]) -> None:
        """Waits until the coordinator assigns every partition of `topics` (Kafka's coordinator
        sees a new topic a moment after its broker does): a probe member of another group joins
        and leaves until it is given them all."""
        deadline = time.monotonic() + 30
        base = {
            "group_id": f"{self.group}-probe",
            "member_id": "probe",
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout_ms": 30000,
            "subscribed_topic_regex": None,
            "server_assignor": None,
            "topic_partitions": [],
        }
        while True:
            self.refresh_topics()
            if all(t in self.ids for t in topics):
                answer = self.client.call(
                    68, 1, {**base, "member_epoch": 0, "subscribed_topic_names": sorted(topics)}
                )
                self.client.call(
                    68,
                    1,
                    {
                        **base,
                        "member_epoch": -1,
                        "rebalance_timeout_ms": -1,
                        "subscribed_topic_names": None,
                        "topic_partitions": None,
                    },
                )
                if (
                    answer["error_code"] == 0
                    and answer["assignment"] is not None
                    and self._by_name(answer["assignment"])
                    == {t: list(range(n)) for t, n in topics.items()}
                ):
                    return
            assert time.monotonic() < deadline, f"{topics} never assignable"
            time.sleep(0.1)

    def _by_name(self, assignment) -> dict[str, list[int]]:
        return {
            self.names[t["topic_id"]]: sorted(t["partitions"])
            for t in assignment["topic_partitions"]
            if t["partitions"]
        }

    def heartbeat(
        self,
        step: str,
        name: str,
        member_id: str | None = None,
        *,
        epoch: int | None = None,
        group: str | None = None,
        owned: dict | None = None,
        track: bool | None = None,
        **fields,
    ) -> dict:
        """One heartbeat of member `name` (its id unless `member_id`); by default at its epoch,
        reporting what it owns. `track`: take the answer as the member's new state (default:
        when at its own epoch)."""
        body = {
            "group_id": group or self.group,
            "member_id": name if member_id is None else member_id,
            "member_epoch": self.epoch.get(name, 0) if epoch is None else epoch,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout_ms": -1,
            "subscribed_topic_names": None,
            "subscribed_topic_regex": None,
            "server_assignor": None,
            "topic_partitions": None,
        }
        mine = self.owned.get(name, {}) if owned is None else owned
        body["topic_partitions"] = [
            {"topic_id": self.ids[t], "partitions": ps} for t, ps in sorted(mine.items())
        ]
        body.update(fields)
        deadline = time.monotonic() + 30
        while True:
            answer = self.client.call(68, 1, body)
            if answer["error_code"] not in self.TRANSIENT:
                break
            assert time.monotonic() < deadline, answer
            time.sleep(0.2)
        assignment = None if answer["assignment"] is None else self._by_name(answer["assignment"])
        self.log.append(
            (
                step,
                name,
                answer["error_code"],
                answer["member_id"],
                answer["member_epoch"],
                answer["heartbeat_interval_ms"],
                assignment,
            )
        )
        if track is None:
            track = epoch is None and member_id is None and group is None
        if track and answer["error_code"] == 0:
            self.epoch[name] = answer["member_epoch"]
            if assignment is not None or answer["member_epoch"] < 0:
                self.owned[name] = assignment or {}
                view = self._view(name)
                view.owned = frozenset((t, p) for t, ps in self.owned[name].items() for p in ps)
                view.timeline.append((time.monotonic_ns(), view.owned))
        return answer

    def join(self, step: str, name: str, member_id: str | None = None, **fields) -> dict:
        fields = {"rebalance_timeout_ms": 30000, "subscribed_topic_names": [], **fields}
        answer = self.heartbeat(step, name, member_id, epoch=0, owned={}, track=True, **fields)
        if answer["error_code"]:
            self.epoch.pop(name, None)
        return answer

    def beat(self, step: str, *names: str, rounds: int = 1) -> None:
        for _ in range(rounds):
            for name in names:
                self.heartbeat(step, name)

    def leave(self, step: str, name: str, epoch: int = -1, **fields) -> None:
        self.heartbeat(step, name, epoch=epoch, track=True, **fields)
        view = self._view(name)
        if epoch == -1:
            self.owned[name] = {}
            view.owned = frozenset()
            view.timeline.append((time.monotonic_ns(), view.owned))

    def snapshot(self, step: str, group: str | None = None) -> dict:
        check_ownership(self.views.values())
        g = describe(self.bootstrap, group or self.group)
        members = sorted(
            (
                m["member_id"],
                m["instance_id"],
                m["member_epoch"],
                m["client_id"],
                m["client_host"],
                tuple(m["subscribed_topic_names"]),
                m["subscribed_topic_regex"],
                sorted(m["assignment"]),
                sorted(m["target_assignment"]),
                m["member_type"],
            )
            for m in g["members"]
        )
        self.log.append(
            (
                step,
                "describe",
                g["error_code"],
                g["group_state"],
                g["group_epoch"],
                g["assignment_epoch"],
                g["assignor_name"],
                members,
            )
        )
        return g


if __name__ == "__main__":
    if sys.argv[1:] != ["compile"]:
        raise SystemExit("usage: python tests/kits/cgkit.py compile")
    print(java_member_classes())
    print(
        kafka_jars(TOOLS_VERSION, "kafka-tools"),
        kafka_jars(TOOLS_VERSION),
        compile_java(TOOL_RUNNER),
    )


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
