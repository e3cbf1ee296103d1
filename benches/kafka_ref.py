"""Apache Kafka as the reference broker: fetch its jars, run a single-node KRaft broker on loopback.

The jars come from Maven Central through `mvn dependency:copy-dependencies` into a cache outside
the repository (~/.cache/corral/kafka-<version>/, or $CORRAL_CACHE), never into the work tree.

From Python:

    from kafka_ref import kafka_broker
    with kafka_broker(settings={"group.initial.rebalance.delay.ms": 0}) as bootstrap:
        ...  # "127.0.0.1:<port>"

From a shell:

    python benches/kafka_ref.py fetch                 # download the jars only (CI setup)
    python benches/kafka_ref.py start --port 9092 [--set NAME=VALUE ...]   # stays in background
    python benches/kafka_ref.py stop --port 9092
    python benches/kafka_ref.py run [--set ...] -- COMMAND ...   # $KAFKA_BOOTSTRAP set for it
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from corral.uuids import random_uuid_text

# The newest 4.x whose every module is on Maven Central (4.4.0's kafka-tools-api is not, and the
# broker does not need it: it is excluded below). Override with --version or $KAFKA_VERSION.
DEFAULT_VERSION = "4.4.0"
SLF4J_SIMPLE = "1.7.36"  # matches the slf4j-api that kafka_2.13 4.x pulls in
CACHE = Path(os.environ.get("CORRAL_CACHE", Path.home() / ".cache" / "corral"))
STARTUP_TIMEOUT_S = 90.0

# Settings from ../shared/reference/clients.md: one node, every internal topic with one replica.
BASE_SETTINGS: dict[str, object] = {
    "process.roles": "broker,controller",
    "node.id": 1,
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    "offsets.topic.replication.factor": 1,
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "share.coordinator.state.topic.replication.factor": 1,
    "share.coordinator.state.topic.min.isr": 1,
    "group.coordinator.rebalance.protocols": "classic,consumer",
    "num.partitions": 1,
}

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>corral.bench</groupId><artifactId>kafka-ref</artifactId><version>1</version>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId><artifactId>{artifact}</artifactId><version>{version}</version>
      <exclusions>{exclusions}</exclusions>
    </dependency>
    <dependency>
      <groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId><version>{slf4j}</version>
    </dependency>
  </dependencies>
</project>
"""
EXCLUSION = "<exclusion><groupId>org.apache.kafka</groupId><artifactId>{}</artifactId></exclusion>"
# What each artifact can do without: the broker, kafka-tools-api; the tools, Connect's runtime
# (web server and REST stack; the log dump and the console consumer do not touch it).
EXCLUDED = {"kafka_2.13": ["kafka-tools-api"], "kafka-tools": ["connect-runtime"]}


def fetch(version: str = DEFAULT_VERSION, artifact: str = "kafka_2.13") -> Path:
    """Downloads an artifact's jars with their dependencies once (the broker's, kafka_2.13, by
    default); returns the directory that holds them."""
    home = CACHE / (f"kafka-{version}" if artifact == "kafka_2.13" else f"{artifact}-{version}")
    lib = home / "lib"
    done = home / "complete"
    if done.exists():
        return lib
    home.mkdir(parents=True, exist_ok=True)
    exclusions = "".join(EXCLUSION.format(name) for name in EXCLUDED.get(artifact, []))
    with tempfile.TemporaryDirectory(prefix="kafka-pom-") as tmp:
        Path(tmp, "pom.xml").write_text(
            POM.format(
                artifact=artifact, version=version, exclusions=exclusions, slf4j=SLF4J_SIMPLE
            )
        )
        subprocess.run(
            ["mvn", "-q", "-B", "dependency:copy-dependencies", f"-DoutputDirectory={lib}"],
            cwd=tmp,
            check=True,
        )
    done.write_text(version + "\n")
    return lib


def compile_java(
    source: Path, version: str = DEFAULT_VERSION, artifact: str = "kafka_2.13"
) -> Path:
    """The class directory of a single-file Java program compiled against an artifact's jars
    (the broker's by default; `kafka-streams` for a Streams application): compiled on first use
    into the cache, kept per source text, version and artifact (`Foo.java` goes to
    `foo-<digest>/`)."""
    lib = fetch(version, artifact)
    key = (
        source.read_bytes()
        + version.encode()
        + (b"" if artifact == "kafka_2.13" else artifact.encode())
    )
    digest = hashlib.sha256(key).hexdigest()[:16]
    name = re.sub(r"(?<!^)(?=[A-Z])", "-", source.stem).lower()
    classes = CACHE / f"{name}-{digest}"
    if not (classes / f"{source.stem}.class").exists():
        # Per process: two test workers may compile the same program at once; the first
        # rename wins and the other's copy is dropped.
        tmp = classes.with_name(f"{classes.name}.{os.getpid()}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        subprocess.run(
            ["javac", "-nowarn", "-d", str(tmp), "-cp", f"{lib}/*", str(source)],
            check=True,
            capture_output=True,
        )
        try:
            tmp.rename(classes)
        except OSError:
            if not (classes / f"{source.stem}.class").exists():
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    return classes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers_api_versions(port: int) -> bool:
    """True once the broker answers an ApiVersions v0 request without error."""
    request = struct.pack(">hhih", 18, 0, 1, 0)  # key, version, correlation id, null client id
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(struct.pack(">i", len(request)) + request)
            size = struct.unpack(">i", _read_exactly(s, 4))[0]
            body = _read_exactly(s, size)
    except OSError:
        return False
    correlation_id, error_code = struct.unpack(">ih", body[:6])
    return correlation_id == 1 and error_code == 0


def _read_exactly(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


class KafkaBroker:
    """One single-node KRaft broker in a fresh temporary directory."""

    def __init__(
        self,
        port: int = 0,
        settings: dict[str, object] | None = None,
        version: str = DEFAULT_VERSION,
        heap: str = "1g",
    ):
        self.version = version
        self.port = port or free_port()
        self.controller_port = free_port()
        self.settings = dict(settings or {})
        self.heap = heap
        self.dir: Path | None = None
        self.process: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _properties(self) -> dict[str, object]:
        assert self.dir is not None
        props = dict(BASE_SETTINGS)
        props.update(
            {
                "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
                "listeners": f"PLAINTEXT://127.0.0.1:{self.port},"
                f"CONTROLLER://127.0.0.1:{self.controller_port}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                "log.dirs": str(self.dir / "data"),
            }
        )
        props.update(self.settings)
        return props

    def _java(self, main: str, *args: str) -> list[str]:
        lib = fetch(self.version)
        return [
            "java",
            f"-Xms{self.heap}",
            f"-Xmx{self.heap}",
            "-XX:+UseG1GC",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-cp",
            f"{lib}/*",
            main,
            *args,
        ]

    def start(self) -> str:
        self.dir = Path(tempfile.mkdtemp(prefix="kafka-ref-"))
        config = self.dir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self._properties().items()))
        cluster_id = (
            random_uuid_text()
        )  # never starting with "-": the tools' parser would take it for an option
        subprocess.run(
            self._java(
                "kafka.tools.StorageTool",
                "format",
                "--standalone",
                "-t",
                cluster_id,
                "-c",
                str(config),
            ),
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.log_path = self.dir / "server.log"
        return self._launch()

    def _launch(self) -> str:
        assert self.dir is not None
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self._java("kafka.Kafka", str(self.dir / "server.properties")),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not _answers_api_versions(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                tail = self.log_path.read_text(errors="replace")[-3000:]
                self.stop()
                raise RuntimeError(f"Kafka did not start on {self.bootstrap}:\n{tail}")
            time.sleep(0.25)
        return self.bootstrap

    def restart(self, kill: bool = False) -> str:
        """Stops the process (SIGTERM, or SIGKILL with `kill`) and starts it on the same data."""
        self._terminate(signal.SIGKILL if kill else signal.SIGTERM)
        return self._launch()

    def _terminate(self, sig: int) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def stop(self) -> None:
        self._terminate(signal.SIGTERM)
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


@contextlib.contextmanager
def kafka_broker(
    port: int = 0, settings: dict[str, object] | None = None, version: str = DEFAULT_VERSION
) -> Iterator[str]:
    """Starts a reference broker, yields its bootstrap address, stops it afterwards."""
    broker = KafkaBroker(port, settings, version)
    broker.start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


def _state_file(port: int) -> Path:
    return CACHE / "run" / f"kafka-{port}.json"


def _parse_sets(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--set wants NAME=VALUE, got {item!r}")
        out[name.strip()] = value.strip()
    return out


def _kill_and_wait(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
        for _ in range(120):
            os.kill(pid, 0)
            # Reap it if it is our child (`run`), otherwise wait for it to vanish.
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    return
            time.sleep(0.25)
        os.kill(pid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default=os.environ.get("KAFKA_VERSION", DEFAULT_VERSION))
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("fetch", help="download the jars into the cache")
    for name in ("start", "run"):
        p = sub.add_parser(name)
        p.add_argument("--port", type=int, default=0)
        p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
        if name == "run":
            p.add_argument("cmd", nargs=argparse.REMAINDER)
    stop = sub.add_parser("stop")
    stop.add_argument("--port", type=int, required=True)
    restart = sub.add_parser(
        "restart", help="restart a broker begun with `start`, keeping its data"
    )
    restart.add_argument("--port", type=int, required=True)
    restart.add_argument("--kill", action="store_true", help="SIGKILL instead of SIGTERM")
    args = parser.parse_args(argv)

    if args.command == "fetch":
        print(fetch(args.version))
        return 0
    if args.command in ("stop", "restart"):
        state_path = _state_file(args.port)
        if not state_path.exists():
            print(f"no reference broker recorded on port {args.port}", file=sys.stderr)
            return 1
        state = json.loads(state_path.read_text())
        _kill_and_wait(
            state["pid"], signal.SIGKILL if getattr(args, "kill", False) else signal.SIGTERM
        )
        if args.command == "stop":
            shutil.rmtree(state["dir"], ignore_errors=True)
            state_path.unlink()
            return 0
        with open(Path(state["dir"]) / "server.log", "ab") as log:
            process = subprocess.Popen(
                state["cmd"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not _answers_api_versions(state["port"]):
            if process.poll() is not None or time.monotonic() > deadline:
                print("Kafka did not come back", file=sys.stderr)
                return 1
            time.sleep(0.25)
        state_path.write_text(json.dumps(dict(state, pid=process.pid)))
        return 0

    broker = KafkaBroker(args.port, _parse_sets(args.set), args.version)
    bootstrap = broker.start()
    if args.command == "start":
        state_path = _state_file(broker.port)
        state_path.parent.mkdir(parents=True, exist_ok=True)
        state_path.write_text(
            json.dumps(
                {
                    "pid": broker.process.pid,
                    "dir": str(broker.dir),
                    "port": broker.port,
                    "cmd": broker._java("kafka.Kafka", str(broker.dir / "server.properties")),
                }
            )
        )
        print(bootstrap)
        return 0
    try:
        cmd = [c for c in args.cmd if c != "--"] if args.cmd[:1] == ["--"] else args.cmd
        env = dict(os.environ, KAFKA_BOOTSTRAP=bootstrap)
        return subprocess.run(cmd, env=env).returncode if cmd else 0
    finally:
        broker.stop()


if __name__ == "__main__":
    sys.exit(main())
