"""benches/heartbeat-driver's consumer-driver (the KIP-848 load driver of benches/consumer_scale.py)
against a real corral: a few hundred members through a join storm, churn and rolling restarts
without an ownership violation, on a connection each or 10 to a connection (with a shared
connection the broker closes reopened); and the ledger that says so does catch two owners at once, in its
Rust unit tests and end to end against a coordinator that hands one partition to every member."""

from __future__ import annotations

import json
import socket
import socketserver
import struct
import subprocess
import threading
from pathlib import Path

import pytest
from checkout import BENCHES

CRATE = BENCHES / "heartbeat-driver"
DRIVER = CRATE / "target" / "release" / "consumer-driver"
SETTINGS = {
    # Short intervals so that a converged group is confirmed within a second.
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.min.heartbeat.interval.ms": 500,
    "group.consumer.assignment.interval.ms": 200,
}


@pytest.fixture(scope="module")
def driver() -> Path:
    subprocess.run(
        ["cargo", "build", "--release", "--quiet", "--bin", "consumer-driver"],
        cwd=CRATE,
        check=True,
        timeout=600,
    )
    return DRIVER


def run_driver(
    driver: Path,
    port: int,
    members: int,
    group: str,
    topic: str,
    partitions: int,
    commands: str,
    *extra: str,
    timeout: float = 90,
) -> dict[str, dict]:
    done = subprocess.run(
        [
            str(driver),
            "--port",
            str(port),
            "--members",
            str(members),
            "--group",
            group,
            "--topics",
            topic,
            "--partitions",
            str(partitions),
            "--commands",
            commands,
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr
    phases = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(phases) == len(commands.split(";")), done.stdout
    return {p["phase"]: p for p in phases}


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    client = AdminClient({"bootstrap.servers": bootstrap})
    client.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


def test_ledger_unit_tests_pass():
    """ledger.rs: two owners at once counted, handed-over partitions not, unowned time added up."""
    done = subprocess.run(
        ["cargo", "test", "--release", "--bin", "consumer-driver"],
        cwd=CRATE,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "ledger::tests::two_owners_at_once_is_a_violation_until_one_releases ... ok" in done.stdout
    )


def test_join_churn_and_rolling_restart_without_violations(driver, corral_factory):
    broker = corral_factory(**SETTINGS)
    create_topic(broker.bootstrap, "scale", 120)
    phases = run_driver(
        driver,
        broker.port,
        300,
        "driver-dynamic",
        "scale",
        120,
        "join 40; churn 3 5 0 30; roll 30 40; leave 20",
    )
    for name, phase in phases.items():
        assert phase["ok"], (name, phase)
        assert phase["violations"] == 0, (name, phase["violation_examples"])
    join = phases["join"]
    assert join["in_group"] == 300 and join["epoch"] is not None and join["unowned_now"] == 0
    # (A join answered COORDINATOR_LOAD_IN_PROGRESS right after the start is sent again.)
    assert join["heartbeat_ms"]["count"] > 0 and join["join_ms"]["count"] >= 300
    assert join["connections"] == 300 and join["max_in_flight_per_connection"] == 1
    assert phases["churn"]["restarts"] > 0
    roll = phases["roll"]
    assert roll["restarts"] == 300 and roll["epoch"] > join["epoch"]
    # Dynamic members leaving take their partitions with them while the group rebalances.
    assert roll["unowned_partition_seconds"] > 0
    assert phases["leave"]["leave_ms"]["count"] == 300 and phases["leave"]["in_group"] == 0


def test_members_sharing_connections_without_violations(driver, corral_factory):
    """--members-per-connection 10: 300 members on 30 connections, several requests in flight on
    each, answers matched by correlation id; restarts leave and rejoin on the shared connection."""
    broker = corral_factory(**SETTINGS)
    create_topic(broker.bootstrap, "mux", 120)
    phases = run_driver(
        driver,
        broker.port,
        300,
        "driver-mux",
        "mux",
        120,
        "connect 20; join 40; churn 2 5 0 30; roll 30 40; leave 20",
        "--members-per-connection",
        "10",
    )
    # `connect` opens every connection and joins no one (what the benchmark measures RSS after).
    connect = phases["connect"]
    assert connect["in_group"] == 0 and connect["join_ms"]["count"] == 0, connect
    for name, phase in phases.items():
        assert phase["ok"], (name, phase)
        assert phase["violations"] == 0, (name, phase["violation_examples"])
        assert phase["connections"] == 30 and phase["members_per_connection"] == 10
        # Nothing timed out or dropped: a misattributed answer would have broken a connection.
        assert not {"TIMEOUT", "CONNECTION"} & phase["errors"].keys(), (name, phase["errors"])
    join = phases["join"]
    assert join["in_group"] == 300 and join["unowned_now"] == 0 and join["join_ms"]["count"] >= 300
    # The storm's joins went out together: several in flight per connection, never over 10.
    assert 1 < join["max_in_flight_per_connection"] <= 10
    assert phases["churn"]["restarts"] > 0
    roll = phases["roll"]
    assert roll["restarts"] == 300 and roll["epoch"] > join["epoch"]
    assert roll["restart"] == "leave and rejoin on the shared connection"
    assert phases["leave"]["leave_ms"]["count"] == 300 and phases["leave"]["in_group"] == 0


def test_static_rolling_restart_keeps_the_epoch(driver, corral_factory):
    """A static member leaving with epoch -2 and rejoining under its instance id gets its
    partitions back without a new group epoch (KIP-848)."""
    broker = corral_factory(**SETTINGS)
    create_topic(broker.bootstrap, "static", 60)
    phases = run_driver(
        driver,
        broker.port,
        100,
        "driver-static",
        "static",
        60,
        "join 40; roll 10 40; leave 20",
        "--static",
        "1",
        # Connections from 127.0.0.101-103, as past one address's ephemeral ports.
        "--sources",
        "3",
        "--first-source",
        "100",
    )
    for name, phase in phases.items():
        assert phase["ok"] and phase["violations"] == 0, (name, phase)
    assert phases["roll"]["restarts"] == 100
    assert phases["roll"]["epoch"] == phases["join"]["epoch"]


# ------------------------------------------------------------------ a coordinator that cheats


class GreedyCoordinator(socketserver.ThreadingTCPServer):
    """Answers ApiVersions and ConsumerGroupHeartbeat, giving partition 0 of one topic to every
    member that asks: the ledger must see two owners at once."""

    daemon_threads = True
    allow_reuse_address = True
    TOPIC_ID = bytes(range(16))

    def __init__(self):
        super().__init__(("127.0.0.1", 0), GreedyHandler)
        self.port = self.server_address[1]


class GreedyHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        while True:
            head = self._read(sock, 4)
            if head is None:
                return
            frame = self._read(sock, struct.unpack(">i", head)[0])
            if frame is None:
                return
            api, version, correlation = struct.unpack_from(">hhi", frame)
            if api == 18:  # ApiVersions v3, response header v0
                apis = [(18, 0, 3), (68, 0, 1)]
                body = struct.pack(">ih", correlation, 0) + bytes([len(apis) + 1])
                body += b"".join(struct.pack(">hhh", *a) + b"\x00" for a in apis)
                body += struct.pack(">i", 0) + b"\x00"
            else:  # ConsumerGroupHeartbeat: epoch 1, partition 0, interval 200 ms
                member = b"m-" + str(threading.get_ident()).encode()
                body = struct.pack(">i", correlation) + b"\x00"
                body += struct.pack(">ih", 0, 0) + b"\x00" + bytes([len(member) + 1]) + member
                body += struct.pack(">ii", 1, 200)
                body += (
                    b"\x01" + b"\x02" + GreedyCoordinator.TOPIC_ID + b"\x02" + struct.pack(">i", 0)
                )
                body += b"\x00" + b"\x00" + b"\x00"
            sock.sendall(struct.pack(">i", len(body)) + body)

    @staticmethod
    def _read(sock: socket.socket, n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data


def test_the_driver_reports_a_partition_owned_twice(driver):
    with GreedyCoordinator() as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        phases = run_driver(driver, server.port, 3, "greedy", "t", 1, "join 3", timeout=30)
        server.shutdown()
    join = phases["join"]
    assert not join["ok"]  # never converged: partition 0 has three owners
    assert join["violations"] == 2 and join["owned_twice_now"] == 1
    assert "owned by both" in join["violation_examples"][0]


class ClosingHandler(socketserver.BaseRequestHandler):
    """A coordinator that answers every heartbeat (epoch 1, nothing assigned) but closes each
    connection when its 6th heartbeat request comes in, leaving the requests on it unanswered."""

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as brokers do
        heartbeats = 0
        while True:
            head = GreedyHandler._read(sock, 4)
            frame = head and GreedyHandler._read(sock, struct.unpack(">i", head)[0])
            if not frame:
                return
            api, version, correlation = struct.unpack_from(">hhi", frame)
            if api == 18:
                apis = [(18, 0, 3), (68, 0, 1)]
                body = struct.pack(">ih", correlation, 0) + bytes([len(apis) + 1])
                body += b"".join(struct.pack(">hhh", *a) + b"\x00" for a in apis)
                body += struct.pack(">i", 0) + b"\x00"
            else:
                heartbeats += 1
                if heartbeats == 6:
                    return  # socketserver closes the connection
                body = (
                    struct.pack(">i", correlation)
                    + b"\x00"
                    + struct.pack(">ih", 0, 0)
                    + b"\x00\x00"
                )
                body += struct.pack(">ii", 1, 200) + b"\x01\x01\x00"  # an empty assignment
            sock.sendall(struct.pack(">i", len(body)) + body)


def test_a_shared_connection_the_broker_closes_is_reopened(driver):
    """--members-per-connection 10 against a broker that keeps closing connections: every member
    whose request was on a closed connection goes on over a new one, and all stay in the group."""
    with GreedyCoordinator() as server:
        server.RequestHandlerClass = ClosingHandler
        threading.Thread(target=server.serve_forever, daemon=True).start()
        phases = run_driver(
            driver,
            server.port,
            20,
            "closing",
            "t",
            0,
            "join 30; steady 2",
            "--members-per-connection",
            "10",
            timeout=60,
        )
        server.shutdown()
    for name, phase in phases.items():
        assert phase["ok"] and phase["violations"] == 0, (name, phase)
        assert phase["in_group"] == 20 and phase["connections"] == 2 and phase["epoch"] == 1
        assert phase["errors"].get("CONNECTION", 0) > 0, (name, phase["errors"])
    # Closed every 6 heartbeats, yet answered all along: the connections were reopened.
    assert phases["steady"]["heartbeat_ms"]["count"] > 20
