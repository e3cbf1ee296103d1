"""A standalone Spark cluster on loopback for tests: one master and one worker, started from the
installed pyspark's own `sbin/spark-daemon.sh`.

The pyspark wheel ships `sbin/spark-daemon.sh` but not `start-master.sh` / `start-worker.sh`,
which only call it (`spark-daemon.sh start <Master|Worker class> 1 <args>`); so this does the
same, with `SPARK_NO_DAEMONIZE` so that each daemon stays a child of this process (no nohup, no
pid file) in its own process group, which teardown signals whole: the JVM, and for the worker
its executors and their Python workers. Every process of the cluster runs in `directory` (logs,
pid, work, local and conf dirs are all under it), so `leftovers(directory)` finds any that
survived, and teardown kills them too: no JVM outlives a failed test.

    with standalone(tmp_path / "spark") as cluster:
        ...  # cluster.url is "spark://127.0.0.1:PORT"; run drivers with cluster.driver_env

Loopback only: SPARK_LOCAL_IP=127.0.0.1 binds the daemons' RPC and web UIs (ports chosen by the
kernel: --port 0, --webui-port 0) there; the master's REST submission server (a fixed port 6066)
is off. What the scripts need: bash, `nice` (coreutils) and Java 17 (`java` on PATH or
$JAVA_HOME, as ci/setup.sh installs); `ps` only in daemon mode, which this does not use.

A driver must not live in the test process: tests/conftest.py's `spark` fixture holds the one
SparkContext a process may have. Run it as a subprocess with `driver_env` (SPARK_LOCAL_IP, this
Python for the Python workers, corral importable: PYTHONPATH), in `directory` too.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import corral

MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"
MASTER_URL = re.compile(r"Starting Spark master at (spark://127\.0\.0\.1:\d+)")
REGISTERED = re.compile(r"Successfully registered with master")
START_TIMEOUT_S = 120.0  # a JVM start on a loaded 2-core machine
STOP_TIMEOUT_S = 20.0
WORKER_CORES, WORKER_MEMORY, EXECUTOR_MEMORY = 2, "1g", "512m"
# Short-lived JVMs on tiny inputs: start fast rather than peak (as tests/kits/kafka_java.py's
# JVM_FLAGS).
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def spark_home() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


def python_path() -> str:
    """PYTHONPATH with this corral first (a worktree's src, not an installed copy)."""
    src = str(Path(corral.__file__).resolve().parent.parent)
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != src]
    return os.pathsep.join([src, *rest])


@dataclass(frozen=True)
class Cluster:
    url: str  # spark://127.0.0.1:PORT
    directory: Path
    driver_env: dict[str, str]

    def conf(self) -> dict[str, str]:
        """Settings for a driver's session on this cluster (corral.analyze.session.start)."""
        return {
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.executor.memory": EXECUTOR_MEMORY,
            "spark.cores.max": str(WORKER_CORES),
            "spark.executorEnv.PYTHONPATH": self.driver_env["PYTHONPATH"],
            "spark.pyspark.python": sys.executable,
            "spark.local.dir": str(self.directory / "local"),
            "spark.driver.extraJavaOptions": QUICK_JVM,
            "spark.executor.extraJavaOptions": QUICK_JVM,
        }


class Daemon:
    """A master or worker: spark-daemon.sh in the foreground, in its own process group."""

    def __init__(self, name: str, main: str, args: list[str], directory: Path, env: dict[str, str]):
        self.log_path = directory / f"{name}.log"
        script = spark_home() / "sbin" / "spark-daemon.sh"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                ["bash", str(script), "start", main, "1", *args],
                cwd=directory,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, pattern: re.Pattern, timeout: float = START_TIMEOUT_S) -> re.Match:
        deadline = time.monotonic() + timeout
        while True:
            found = pattern.search(self.log())
            if found:
                return found
            if self.proc.poll() is not None or time.monotonic() > deadline:
                state = "exited" if self.proc.poll() is not None else f"not there after {timeout}s"
                raise RuntimeError(
                    f"{self.log_path.name}: {pattern.pattern!r} {state}:\n" + self.log()[-4000:]
                )
            time.sleep(0.2)

    def stop(self) -> None:
        """SIGTERM to the whole group (the JVM stops its executors), SIGKILL if it lingers."""
        for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, STOP_TIMEOUT_S)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            deadline = time.monotonic() + wait
            while _group_alive(self.proc.pid) and time.monotonic() < deadline:
                self.proc.poll()  # reap the script once it ends
                time.sleep(0.1)
            if not _group_alive(self.proc.pid):
                break
        self.proc.wait(5)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return not all(_zombie(pid) for pid in _pids() if _pgid(pid) == pgid)


def _pids() -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True


def leftovers(directory: Path) -> list[int]:
    """Live processes running in `directory` or below: what is left of a cluster (or of a driver
    started there)."""
    root = str(directory.resolve())
    found = []
    for pid in _pids():
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if (cwd == root or cwd.startswith(root + os.sep)) and not _zombie(pid):
            found.append(pid)
    return found


def _kill_leftovers(directory: Path) -> None:
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while (pids := leftovers(directory)) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def daemon_env(directory: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k != "SPARK_MASTER"
    }  # SPARK_MASTER: rsync from it
    for sub in ("logs", "pids", "work", "local", "conf"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    env.update(
        {
            "SPARK_HOME": str(spark_home()),
            "SPARK_NO_DAEMONIZE": "1",
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_MASTER_HOST": "127.0.0.1",
            "SPARK_IDENT_STRING": "corral-tests",
            "SPARK_LOG_DIR": str(directory / "logs"),
            "SPARK_PID_DIR": str(directory / "pids"),
            "SPARK_WORKER_DIR": str(directory / "work"),
            "SPARK_LOCAL_DIRS": str(directory / "local"),
            "SPARK_CONF_DIR": str(directory / "conf"),  # empty: no spark-env.sh, no defaults
            "SPARK_DAEMON_MEMORY": "256m",
            "SPARK_DAEMON_JAVA_OPTS": QUICK_JVM,
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            "SPARK_WORKER_CORES": str(WORKER_CORES),
            "SPARK_WORKER_MEMORY": WORKER_MEMORY,
            # The Python workers of executors: this Python, importing this corral.
            "PYSPARK_PYTHON": sys.executable,
            "PYTHONPATH": python_path(),
        }
    )
    return env


@contextlib.contextmanager
def standalone(directory: Path) -> Iterator[Cluster]:
    """A master and one worker (WORKER_CORES cores, WORKER_MEMORY) on 127.0.0.1, yielded once the
    worker registered with the master; both stopped, and anything left in `directory` killed,
    when the block ends, whatever happened in it."""
    directory.mkdir(parents=True, exist_ok=True)
    env = daemon_env(directory)
    daemons: list[Daemon] = []
    try:
        master = Daemon(
            "master",
            MASTER,
            ["--host", "127.0.0.1", "--port", "0", "--webui-port", "0"],
            directory,
            env,
        )
        daemons.append(master)
        url = master.wait_for(MASTER_URL).group(1)
        worker = Daemon(
            "worker",
            WORKER,
            [
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--webui-port",
                "0",
                "--cores",
                str(WORKER_CORES),
                "--memory",
                WORKER_MEMORY,
                "--work-dir",
                str(directory / "work"),
                url,
            ],
            directory,
            env,
        )
        daemons.append(worker)
        worker.wait_for(REGISTERED)
        driver_env = {
            **{k: v for k, v in env.items() if not k.startswith("SPARK_")},
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
        yield Cluster(url, directory, driver_env)
    finally:
        for d in reversed(daemons):
            d.stop()
        _kill_leftovers(directory)
