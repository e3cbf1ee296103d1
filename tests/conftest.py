"""The root conftest of every tier (tests/unit: in process, mirroring src/corral; tests/wire: raw
frames over TCP; tests/clients/<family>: real client libraries and programs; tests/kits: the
helpers they share). Fixtures: a real `corral serve` subprocess on a free port with a temporary
data dir, and the handlers' call recorders of the network thread's short-path tests."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

# Kits (helper modules, tests/kits/) and the benches' and ci's modules import by name in every
# test, whichever folder it sits in (tests/unit/..., tests/wire, tests/clients/<family>).
_KITS = Path(__file__).resolve().parent / "kits"
for _path in (_KITS.parent.parent / "ci", _KITS.parent.parent / "benches", _KITS):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

LISTENING = re.compile(r"listening on (\S+):(\d+)")
LISTENER = re.compile(r"listener (\w+) \(\w+\) listening on \S+:(\d+)")

# Every broker started in this session, so that a failed test shows what the brokers logged.
STARTED: list[CorralProcess] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        for broker in STARTED:
            if broker.alive():
                tail = "".join(broker.log().splitlines(keepends=True)[-200:])
                report.sections.append(
                    (f"corral log {broker.log_path.name} (last 200 lines)", tail)
                )


class CorralProcess:
    """One corral broker as a child process; can be stopped, killed and restarted on its data dir."""

    def __init__(
        self,
        data_dir: Path,
        settings: dict[str, str] | None = None,
        rlimit_nofile: int | None = None,
        command: list[str] | None = None,
    ):
        self.data_dir = data_dir
        # What runs `corral` (an installed wheel's, tests/wire/test_wheels.py); default this checkout's.
        self.command = command or [sys.executable, "-m", "corral.cli"]
        self.settings = dict(settings or {})
        # When set, the broker runs with RLIMIT_NOFILE (soft and hard) set to this.
        self.rlimit_nofile = rlimit_nofile
        # More `corral serve` flags (e.g. --log-format json).
        self.args: list[str] = []
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        # Bound port of each listener, by name (`listeners` set: several may be).
        self.ports: dict[str, int] = {}
        self.log_path = data_dir.parent / f"{data_dir.name}.log"
        STARTED.append(self)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> CorralProcess:
        # Reuse the ports across restarts so that clients holding the address reconnect.
        settings = dict(self.settings)
        cmd = [*self.command, "serve", "--data-dir", str(self.data_dir)]
        if "listeners" in settings:
            if self.ports:
                settings["listeners"] = ",".join(
                    f"{name}://127.0.0.1:{port}" for name, port in self.ports.items()
                )
        else:
            cmd += ["--listen", f"127.0.0.1:{self.port or 0}"]
        for name, value in settings.items():
            cmd += ["--set", f"{name}={value}"]
        cmd += self.args
        log = open(self.log_path, "ab")
        preexec = None
        if self.rlimit_nofile is not None:
            n = self.rlimit_nofile

            def preexec() -> None:
                import resource

                resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))

        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, preexec_fn=preexec)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"corral exited with {self.proc.returncode}:\n{self.log()}")
            text = self.log()
            match = LISTENING.search(text)
            ports = {m.group(1): int(m.group(2)) for m in LISTENER.finditer(text)}
            expected = len(settings.get("listeners", "x").split(","))
            if (
                match
                and len(ports) >= expected
                and (self.port is None or int(match.group(2)) == self.port)
            ):
                self.port = int(match.group(2))
                self.ports = ports
                return self
            time.sleep(0.05)
        raise RuntimeError(f"corral did not start within {timeout}s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM and wait: a clean shutdown."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout)
        # The next start appends to the log; forget the old "listening" line.
        self.log_path.rename(self.log_path.with_suffix(f".{time.monotonic_ns()}.log"))
        return code

    def kill(self) -> None:
        """SIGKILL: a crash."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()
        self.log_path.rename(self.log_path.with_suffix(f".{time.monotonic_ns()}.log"))

    def restart(self) -> CorralProcess:
        self.stop()
        return self.start()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@pytest.fixture
def corral_factory(tmp_path):
    """Start brokers with given settings: `corral_factory(**{"num.partitions": 8})`;
    `rlimit_nofile` sets the broker's RLIMIT_NOFILE; `command` runs another launcher
    (tests/kits/slow_writes.py); `args` are more `corral serve` flags (`["--faults", FILE]`)."""
    started: list[CorralProcess] = []

    def make(
        name: str = "corral",
        rlimit_nofile: int | None = None,
        command: list[str] | None = None,
        args: list[str] | None = None,
        **settings,
    ) -> CorralProcess:
        broker = CorralProcess(
            tmp_path / name,
            {k: str(v) for k, v in settings.items()},
            rlimit_nofile=rlimit_nofile,
            command=command,
        )
        broker.args += args or []
        started.append(broker)
        return broker.start()

    yield make
    for broker in started:
        if broker.alive():
            broker.proc.kill()
            broker.proc.wait()


@pytest.fixture
def corral(corral_factory) -> CorralProcess:
    """A fresh broker with default settings."""
    return corral_factory()


@pytest.fixture(scope="module")
def shared_corral(tmp_path_factory) -> CorralProcess:
    """One broker for a whole test module, for tests that do not depend on a clean state."""
    broker = CorralProcess(tmp_path_factory.mktemp("shared") / "corral").start()
    yield broker
    if broker.alive():
        broker.proc.kill()
        broker.proc.wait()


@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession for the whole run (its JVM takes ~10 s to start), with
    analytics.md's test settings; stopped with its JVM at the end."""
    from corral.analyze import session

    spark = session.start(
        "local[2]",
        "corral-analyze-tests",
        {
            "spark.sql.shuffle.partitions": "2",
            # Tiny inputs: adaptive re-planning of each shuffle only adds time.
            "spark.sql.adaptive.enabled": "false",
        },
    )
    yield spark
    session.stop(spark)


@pytest.fixture(scope="session")
def corral_scenario(tmp_path_factory):
    """One run of tests/kits/analyze_scenario.py (driven by tests/kits/analyze_scenario_driver.py)
    on one corral for the whole session (the driver's own checks and `corral analyze`'s share
    it): (broker, truth). The broker stays up, its analytics written up to after the scenario's
    end."""
    import analyze_scenario as sc
    import analyze_scenario_driver

    broker = CorralProcess(
        tmp_path_factory.mktemp("scenario") / "corral",
        {k: str(v) for k, v in sc.CORRAL_SETTINGS.items()},
    ).start()
    try:
        truth = analyze_scenario_driver.run(broker.bootstrap)
        time.sleep(2 * sc.CORRAL_SETTINGS["corral.analytics.sample.interval.ms"] / 1000)
        yield broker, truth
    finally:
        if broker.alive():
            broker.proc.kill()
            broker.proc.wait()


# What reaches corral's Python handlers (tests of what the network thread answers on its own).
@pytest.fixture
def python_calls(monkeypatch):
    """The ConsumerGroupHeartbeats that reach the Python handler."""
    from python_handlers import record_python_calls

    from corral.network.apis import ApiKey

    return record_python_calls(monkeypatch, ApiKey.CONSUMER_GROUP_HEARTBEAT)


@pytest.fixture
def commit_calls(monkeypatch):
    """The OffsetCommits that reached the Python handler."""
    from python_handlers import record_python_calls

    from corral.network.apis import ApiKey

    return record_python_calls(monkeypatch, ApiKey.OFFSET_COMMIT)


# ------------------------------------------------------------------ a broker killed and restarted
# `crashable_broker`: the same test against corral and against Apache Kafka 4.4 (the reference
# broker of benches/kafka_ref.py), each killed with kill -9 and restarted on its data and port by
# `crash_restart()`. The Kafka variant checks the harness itself: a test's expectations hold on
# the broker corral copies, so a corral failure is corral's.


@dataclass
class CrashableBroker:
    name: str
    bootstrap: str
    crash_restart: Callable[[], None]


@pytest.fixture(params=["corral", pytest.param("kafka", marks=pytest.mark.kafka)])
def crashable_broker(request, corral_factory) -> Iterator[CrashableBroker]:
    if request.param == "corral":
        corral = corral_factory(**{"group.initial.rebalance.delay.ms": 0})

        def restart_corral() -> None:
            corral.kill()
            corral.start()

        yield CrashableBroker("corral", corral.bootstrap, restart_corral)
        return
    from kafka_ref import KafkaBroker

    # Half the default heap: a Streams application or a Connect worker runs beside it on 2 cores.
    kafka = KafkaBroker(settings={"group.initial.rebalance.delay.ms": 0}, heap="512m")
    kafka.start()
    try:

        def restart_kafka() -> None:
            kafka.restart(kill=True)

        yield CrashableBroker("kafka", kafka.bootstrap, restart_kafka)
    finally:
        kafka.stop()
