"""Heartbeats per second that corral answers for one group of N stable members, with a lean driver.

`corral load --scenario heartbeat` runs full simulated members (trio tasks, per-request checks) and
on this 2-core machine its own CPU (~300 us per heartbeat) caps what it can offer. This driver
costs a few us per heartbeat: it joins N members over N blocking sockets (KIP-394 two-step join,
one generation: the initial rebalance delay stays at Kafka's 3 s default), then, from one Python
thread on epoll, sends pre-encoded Heartbeat v4 frames at a paced rate, each member with at most
one heartbeat in flight (as a client), and times every answer. Each step reports achieved rate,
p50/p99 latency, error codes seen and the broker's CPU share.

By default the paced phase runs in benches/heartbeat-driver (Rust, built with cargo on first use),
which receives the joined sockets as inherited descriptors and does the same without the Python
interpreter's per-heartbeat cost; `--driver python` keeps the Python loop (step()).

    python benches/heartbeat_capacity.py --members 10000 --rates 5000,10000,20000,40000
    python benches/heartbeat_capacity.py --broker kafka    # Apache Kafka (benches/kafka_ref.py)
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import select
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from groups_scale import cpu_seconds, free_port, rss_kb, stop_broker, wait_port
from kafka_ref import KafkaBroker

from corral import _core

JOIN, SYNC, HEARTBEAT, FIND_COORDINATOR = 11, 14, 12, 10
JOIN_V, SYNC_V, HEARTBEAT_V = 5, 3, 4
GROUP = "heartbeat-capacity"
DRIVER_DIR = Path(__file__).resolve().parent / "heartbeat-driver"
DRIVER_BIN = DRIVER_DIR / "target" / "release" / "heartbeat-driver"
SUBSCRIPTION = (
    struct.pack(">hih", 0, 1, 5) + b"topic" + struct.pack(">i", -1)
)  # ConsumerProtocol v0


def read_frame(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    return recv_exact(sock, size)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    parts = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("closed")
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


def call_all(socks, key, version, bodies) -> list[dict]:
    for sock, body in zip(socks, bodies):
        sock.sendall(_core.encode_request(key, version, 1, body, "hb-capacity"))
    return [_core.decode_response(key, version, read_frame(sock))[1] for sock in socks]


@contextlib.contextmanager
def lean_broker(
    kind: str, port: int, corral_args: list[str], kafka_settings: dict[str, object] | None = None
) -> Iterator[subprocess.Popen]:
    """corral (fresh data dir) or Apache Kafka on `port`, stopped on exit. `kafka_settings` are
    added to Kafka's server.properties (corral takes its settings as `--set` in `corral_args`)."""
    if kind == "kafka":
        # A 10,000-member group's metadata record passes Kafka's default 1 MiB.
        kafka = KafkaBroker(
            port, settings={"message.max.bytes": 10485760, **(kafka_settings or {})}
        )
        kafka.start()
        try:
            yield kafka.process
        finally:
            kafka.stop()
        return
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
                "WARNING",
                *corral_args,
            ]
        )
        try:
            yield broker
        finally:
            stop_broker(broker)


def join_all(
    port: int, members: int, group: str = GROUP, connect=socket.create_connection
) -> tuple[list[socket.socket], list[str], int]:
    """`connect((host, port))` makes each member's socket (benches/tls_overhead.py: TLS)."""
    socks = [connect(("127.0.0.1", port)) for _ in range(members)]
    join = {
        "group_id": group,
        "session_timeout_ms": 45000,
        "rebalance_timeout_ms": 60000,
        "protocol_type": "consumer",
        "group_instance_id": None,
        "protocols": [{"name": "range", "metadata": SUBSCRIPTION}],
    }
    first = call_all(socks, JOIN, JOIN_V, [{**join, "member_id": ""}] * members)
    ids = [r["member_id"] for r in first]
    joined = call_all(socks, JOIN, JOIN_V, [{**join, "member_id": m} for m in ids])
    errors = {r["error_code"] for r in joined}
    assert errors == {0}, f"JoinGroup errors {errors}"
    generation = joined[0]["generation_id"]
    leader = joined[0]["leader"]
    syncs = [
        {
            "group_id": group,
            "generation_id": generation,
            "member_id": m,
            "group_instance_id": None,
            "assignments": [{"member_id": x, "assignment": b""} for x in ids]
            if m == leader
            else [],
        }
        for m in ids
    ]
    synced = call_all(socks, SYNC, SYNC_V, syncs)
    assert {r["error_code"] for r in synced} == {0}
    return socks, ids, generation


def wait_for_coordinator(port: int, group: str) -> None:
    """FindCoordinator until the group's coordinator is ready (Kafka creates its offsets topic)."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        for _ in range(120):
            [found] = call_all([sock], FIND_COORDINATOR, 3, [{"key": group, "key_type": 0}])
            if found["error_code"] == 0:
                return
            time.sleep(0.5)
    raise RuntimeError(f"no coordinator: {found}")


def heartbeat_errors(frame: bytes) -> list[int]:
    # Heartbeat v4 response: correlation id, header tags, throttle time, error code.
    return [struct.unpack_from(">h", frame, 4 + 1 + 4)[0]]


def step(
    socks, frames, rate: float, seconds: float, broker_pid: int, errors_of=heartbeat_errors
) -> dict:
    """Sends frames[i] on socks[i] at `rate` per second, one in flight per socket; times answers."""
    epoll = select.epoll()
    by_fd = {}
    for i, sock in enumerate(socks):
        sock.setblocking(False)
        epoll.register(sock.fileno(), select.EPOLLIN)
        by_fd[sock.fileno()] = i
    idle = collections.deque(range(len(socks)))
    sent_at = [0.0] * len(socks)
    buffers = [b""] * len(socks)
    latencies: list[float] = []
    errors: collections.Counter = collections.Counter()
    sent = 0
    cpu_start = cpu_seconds(broker_pid)
    own_start = time.process_time()
    start = time.perf_counter()
    end = start + seconds
    while True:
        now = time.perf_counter()
        if now >= end:
            break
        due = int((now - start) * rate) - sent
        while due > 0 and idle:
            i = idle.popleft()
            sent_at[i] = now
            socks[i].send(frames[i])
            sent += 1
            due -= 1
        for fd, _ in epoll.poll(0.0005):
            i = by_fd[fd]
            try:
                data = buffers[i] + socks[i].recv(65536)
            except ssl.SSLWantReadError:  # a TLS socket: the record is not whole yet
                continue
            while len(data) >= 4:
                size = struct.unpack_from(">i", data)[0]
                if len(data) < 4 + size:
                    break
                errors.update(errors_of(data[4 : 4 + size]))
                latencies.append(time.perf_counter() - sent_at[i])
                idle.append(i)
                data = data[4 + size :]
            buffers[i] = data
    elapsed = time.perf_counter() - start
    cpu = cpu_seconds(broker_pid) - cpu_start
    own = time.process_time() - own_start
    # Let answers in flight arrive before the next step.
    deadline = time.perf_counter() + 2
    while len(idle) < len(socks) and time.perf_counter() < deadline:
        for fd, _ in epoll.poll(0.01):
            i = by_fd[fd]
            try:
                data = buffers[i] + socks[i].recv(65536)
            except ssl.SSLWantReadError:
                continue
            while len(data) >= 4 and len(data) >= 4 + struct.unpack_from(">i", data)[0]:
                data = data[4 + struct.unpack_from(">i", data)[0] :]
                idle.append(i)
            buffers[i] = data
    epoll.close()
    for sock in socks:
        sock.setblocking(True)
    latencies.sort()

    def pick(q):
        if not latencies:
            return None
        return round(latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000, 2)

    return {
        "target": rate,
        "achieved": round(len(latencies) / elapsed),
        "p50_ms": pick(0.5),
        "p99_ms": pick(0.99),
        "errors": dict(errors),
        "broker_cpu": round(cpu / elapsed, 2),
        "driver_cpu": round(own / elapsed, 2),
    }


def build_driver() -> None:
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=DRIVER_DIR, check=True)


def step_rust(socks, frames, rate: float, seconds: float, broker_pid: int) -> dict:
    """step() run by benches/heartbeat-driver (see build_driver): same pacing, same figures."""
    fds = [sock.fileno() for sock in socks]
    spec = f"{rate} {seconds}\n" + "".join(
        f"{fd} {frame.hex()}\n" for fd, frame in zip(fds, frames)
    )
    driver = subprocess.Popen(
        [str(DRIVER_BIN)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, pass_fds=fds
    )
    try:
        driver.stdin.write(spec)
        driver.stdin.close()
        if driver.stdout.readline() != "started\n":
            raise RuntimeError(f"heartbeat-driver failed to start (exit {driver.wait()})")
        # The broker's CPU over the paced phase only, as step() measures it.
        cpu_start = cpu_seconds(broker_pid)
        line = driver.stdout.readline()
        cpu = cpu_seconds(broker_pid) - cpu_start
        # It then waits up to 2 s for answers in flight, leaving the sockets idle and blocking.
        if driver.wait(timeout=30) != 0 or not line:
            raise RuntimeError(f"heartbeat-driver exited with {driver.returncode}")
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    result = json.loads(line)
    errors = {
        int(code) if code.lstrip("-").isdigit() else code: n for code, n in result["errors"].items()
    }
    report = {
        "target": rate,
        "achieved": round(result["achieved"]),
        "p50_ms": result["p50_ms"],
        "p99_ms": result["p99_ms"],
        "max_ms": result["max_ms"],
        "errors": errors,
        "broker_cpu": round(cpu / result["elapsed"], 2),
        "driver_cpu": round(result["driver_cpu"], 3),
        "driver_user_cpu": round(result["driver_user_cpu"], 3),
    }
    if result["closed"]:
        report["closed_connections"] = result["closed"]
    return report


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--members", type=int, default=10000)
    parser.add_argument("--rates", default="5000,10000,20000,30000,40000")
    parser.add_argument("--seconds", type=float, default=4)
    parser.add_argument("--broker", choices=["corral", "kafka"], default="corral")
    parser.add_argument(
        "--driver",
        choices=["python", "rust"],
        default="rust",
        help="what sends the paced heartbeats (rust: benches/heartbeat-driver)",
    )
    args = parser.parse_args()
    if args.driver == "rust":
        build_driver()
    run_step = step_rust if args.driver == "rust" else step
    port = free_port()
    with lean_broker(args.broker, port, []) as broker:
        wait_port(port, time.monotonic() + 60)
        wait_for_coordinator(port, GROUP)
        rss_before = rss_kb(broker.pid)
        started = time.monotonic()
        socks, ids, generation = join_all(port, args.members)
        print(
            f"{args.broker}: {args.members} members joined and synced in {time.monotonic() - started:.1f} s "
            f"(3 s of it the initial rebalance delay); broker RSS {rss_before} -> "
            f"{rss_kb(broker.pid)} KiB",
            flush=True,
        )
        frames = [
            _core.encode_request(
                HEARTBEAT,
                HEARTBEAT_V,
                7,
                {
                    "group_id": GROUP,
                    "generation_id": generation,
                    "member_id": m,
                    "group_instance_id": None,
                },
                "hb-capacity",
            )
            for m in ids
        ]
        for rate in (float(r) for r in args.rates.split(",")):
            print(run_step(socks, frames, rate, args.seconds, broker.pid), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
