"""ApiVersions requests per second through a running broker, from many connections.

Each connection keeps a batch of `--depth` pipelined ApiVersions requests in flight: it sends the
batch as one write, waits for all its answers, then sends the next. Every answer has the same
size, so the load generator only counts bytes (no parsing), which keeps its own cost per request
small; it is one Python thread on an epoll loop. Latency is per batch (send to last answer byte).

    python benches/apiversions_load.py                    # starts corral, then the echo server
    python benches/apiversions_load.py --bootstrap 127.0.0.1:9092 --no-echo

With the echo server (benches/echo-server, built with cargo on first use) the same load runs
against the machine's ceiling: a Rust program that answers each frame with a fixed, identical
ApiVersions response without decoding it. corral / echo is the ratio reported.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from corral import _core
from corral.network.apis import ApiKey, api_table

HERE = Path(__file__).resolve().parent
ECHO_DIR = HERE / "echo-server"
ECHO_BIN = ECHO_DIR / "target/release/corral-echo-server"
LISTENING = re.compile(r"listening on (\S+):(\d+)")
VERSION = 3


@dataclass
class Result:
    target: str
    requests: int
    seconds: float
    batch_p50_ms: float
    batch_p99_ms: float
    generator_cpu: float  # share of one core used by this load generator
    server_cpu: float | None  # share of one core used by the server process, when we started it

    @property
    def rate(self) -> float:
        return self.requests / self.seconds

    def line(self) -> str:
        server = "" if self.server_cpu is None else f", server CPU {self.server_cpu:.0%}"
        return (
            f"{self.target:>6}: {self.rate:10,.0f} req/s  batch p50 {self.batch_p50_ms:.2f} ms"
            f"  p99 {self.batch_p99_ms:.2f} ms  (generator CPU {self.generator_cpu:.0%}{server})"
        )


def request_frame(correlation_id: int) -> bytes:
    return _core.encode_request(
        ApiKey.API_VERSIONS,
        VERSION,
        correlation_id,
        {"client_software_name": "corral-bench", "client_software_version": "1"},
        "apiversions-load",
    )


def expected_response() -> bytes:
    """The exact frame corral answers with (computed locally by the same core)."""
    conn = _core.Connection(api_table(), 1 << 20)
    conn.feed(request_frame(0))
    return conn.next()


def run_load(
    host: str,
    port: int,
    connections: int,
    depth: int,
    seconds: float,
    warmup: float,
    target: str,
    server_pid: int | None,
) -> Result:
    batch = b"".join(request_frame(i) for i in range(depth))
    answer_bytes = len(expected_response()) * depth
    selector = selectors.DefaultSelector()
    state: dict[socket.socket, list] = {}  # sock -> [bytes still expected, batch start time]
    for _ in range(connections):
        sock = socket.create_connection((host, port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
        state[sock] = [answer_bytes, time.perf_counter()]
        sock.sendall(batch)

    latencies: list[float] = []
    batches = 0
    start = time.perf_counter()
    measure_from = start + warmup
    stop_at = measure_from + seconds
    cpu0 = server0 = None
    try:
        while True:
            now = time.perf_counter()
            if cpu0 is None and now >= measure_from:
                cpu0, server0, measure_from = _cpu_now(), _process_cpu(server_pid), now
                batches, latencies = 0, []
            if now >= stop_at:
                break
            for key, _ in selector.select(timeout=1.0):
                sock = key.fileobj
                data = sock.recv(1 << 18)
                if not data:
                    raise ConnectionError(f"{target} closed a connection")
                entry = state[sock]
                entry[0] -= len(data)
                if entry[0] == 0:
                    finished = time.perf_counter()
                    latencies.append(finished - entry[1])
                    batches += 1
                    entry[0], entry[1] = answer_bytes, finished
                    sock.send(batch)  # small, and the socket buffer is empty: never partial
                elif entry[0] < 0:
                    raise ConnectionError(f"{target} sent more than {answer_bytes} bytes per batch")
        elapsed = time.perf_counter() - measure_from
        generator_cpu = (_cpu_now() - cpu0) / elapsed
        server_cpu = None if server_pid is None else (_process_cpu(server_pid) - server0) / elapsed
    finally:
        for sock in state:
            selector.unregister(sock)
            sock.close()
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return Result(
        target,
        batches * depth,
        elapsed,
        statistics.median(latencies) * 1e3,
        p99 * 1e3,
        generator_cpu,
        server_cpu,
    )


def _cpu_now() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _process_cpu(pid: int | None) -> float:
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def start_process(cmd: list[str], log_path: Path) -> tuple[subprocess.Popen, int]:
    log = open(log_path, "wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{cmd[0]} exited:\n{log_path.read_text()}")
        if match := LISTENING.search(log_path.read_text()):
            return proc, int(match.group(2))
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{cmd[0]} did not start:\n{log_path.read_text()}")


def stop_process(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def build_echo_server() -> None:
    subprocess.run(
        ["cargo", "build", "--release", "--quiet", "--manifest-path", str(ECHO_DIR / "Cargo.toml")],
        check=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="HOST:PORT of a running broker (default: start corral)")
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--depth", type=int, default=8, help="pipelined requests per connection")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured time per target")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--no-echo", action="store_true", help="skip the echo-server ceiling")
    args = parser.parse_args(argv)
    lifetime = args.warmup + args.seconds + 30  # the echo server stops by itself after this

    results = []
    with tempfile.TemporaryDirectory(prefix="corral-load-") as tmp:
        if args.bootstrap:
            host, _, port = args.bootstrap.rpartition(":")
            results.append(
                run_load(
                    host,
                    int(port),
                    args.connections,
                    args.depth,
                    args.seconds,
                    args.warmup,
                    "corral",
                    None,
                )
            )
        else:
            proc, port = start_process(
                [
                    sys.executable,
                    "-m",
                    "corral.cli",
                    "serve",
                    "--listen",
                    "127.0.0.1:0",
                    "--data-dir",
                    f"{tmp}/data",
                ],
                Path(tmp, "corral.log"),
            )
            try:
                results.append(
                    run_load(
                        "127.0.0.1",
                        port,
                        args.connections,
                        args.depth,
                        args.seconds,
                        args.warmup,
                        "corral",
                        proc.pid,
                    )
                )
            finally:
                stop_process(proc)
        if not args.no_echo:
            build_echo_server()
            body = expected_response()[8:]  # after size and correlation id
            proc, port = start_process(
                [str(ECHO_BIN), "127.0.0.1:0", body.hex(), str(int(lifetime))],
                Path(tmp, "echo.log"),
            )
            try:
                results.append(
                    run_load(
                        "127.0.0.1",
                        port,
                        args.connections,
                        args.depth,
                        args.seconds,
                        args.warmup,
                        "echo",
                        proc.pid,
                    )
                )
            finally:
                stop_process(proc)

    print(
        f"ApiVersions v{VERSION}, {args.connections} connections x {args.depth} pipelined, "
        f"{args.seconds:g} s measured after {args.warmup:g} s warm-up, {os.cpu_count()} CPUs"
    )
    for result in results:
        print(result.line())
    if len(results) == 2:
        print(f" ratio: corral / echo = {results[0].rate / results[1].rate:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
