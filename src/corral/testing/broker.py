"""An embedded corral for tests: `corral serve` as a child process on a free port, in a data
directory of its own, with the faults API on (docs/testing.md).

    with EmbeddedCorral() as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        broker.faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=1)

`stop()` shuts it down cleanly (SIGTERM), `kill()` crashes it (SIGKILL), `restart()` starts it
again on the same data directory and the same ports, so clients holding the address reconnect.
Its log (stdout and stderr) goes to `log_path`; `log()` reads it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO

from corral.faults.client import FaultsClient

LISTENING = re.compile(r"listener \w+ \(\w+\) listening on (\S+):(\d+)")
FAULTS_AT = re.compile(r"faults on http://(\S+):(\d+)/faults")

# Settings of a broker for tests, unless given: groups form at once (as testcontainers' Kafka),
# the faults API on a free port.
DEFAULTS = {
    "group.initial.rebalance.delay.ms": "0",
    "corral.faults.enable": "true",
    "corral.faults.listen": "127.0.0.1:0",
}


class CorralStartError(RuntimeError):
    """The broker exited, or did not listen, in time; the message ends with its log."""


class EmbeddedCorral:
    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        settings: Mapping[str, object] | None = None,
        *,
        faults_file: str | os.PathLike[str] | None = None,
        faults_api: bool = True,
        args: list[str] | None = None,
        log_level: str = "INFO",
        start_timeout: float = 30.0,
        command: list[str] | None = None,
    ):
        """`data_dir`: where the broker keeps its data (default: a new temporary directory,
        removed by `close()`); `settings`: Kafka's and corral's settings by name (over
        DEFAULTS); `faults_file`: a scenario file (docs/faults.md); `faults_api`: False leaves
        the faults API off; `args`: more `corral serve` flags; `command`: what runs `corral`
        (default this Python's `-m corral.cli`)."""
        self._owned: Path | None = None
        if data_dir is None:
            self._owned = Path(tempfile.mkdtemp(prefix="corral-"))
            data_dir = self._owned / "data"
        self.data_dir = Path(data_dir)
        self.log_path = self.data_dir.with_name(self.data_dir.name + ".log")
        defaults = {
            k: v for k, v in DEFAULTS.items() if faults_api or not k.startswith("corral.faults.")
        }
        self.settings = {**defaults, **{k: _text(v) for k, v in (settings or {}).items()}}
        self.faults_file = None if faults_file is None else Path(faults_file)
        self.args = list(args or [])
        self.log_level = log_level
        self.start_timeout = start_timeout
        self.command = command or [sys.executable, "-m", "corral.cli"]
        self.proc: subprocess.Popen[bytes] | None = None
        # Bound on the first start, kept on restarts.
        self.port: int | None = None
        self.faults_port: int | None = None
        self._log_file: IO[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """`bootstrap.servers` for a client: "127.0.0.1:PORT"."""
        if self.port is None:
            raise RuntimeError("the broker has not started")
        return f"127.0.0.1:{self.port}"

    @property
    def faults_url(self) -> str:
        if self.faults_port is None:
            raise RuntimeError("no faults API: not started, or started with faults_api=False")
        return f"http://127.0.0.1:{self.faults_port}"

    @property
    def faults(self) -> FaultsClient:
        """A client of the broker's faults API (corral.faults.client)."""
        return FaultsClient(self.faults_url)

    def start(self) -> EmbeddedCorral:
        """Starts the broker and waits until it listens; raises CorralStartError."""
        if self.alive():
            raise RuntimeError("already running")
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        settings = dict(self.settings)
        listen = settings.get("corral.faults.listen", "")
        if self.faults_port is not None and listen.endswith(":0"):
            settings["corral.faults.listen"] = f"{listen[: -len(':0')]}:{self.faults_port}"
        cmd = [*self.command, "serve", "--data-dir", str(self.data_dir)]
        cmd += ["--listen", f"127.0.0.1:{self.port or 0}", "--log-level", self.log_level]
        for name, value in settings.items():
            cmd += ["--set", f"{name}={value}"]
        if self.faults_file is not None:
            cmd += ["--faults", str(self.faults_file)]
        cmd += self.args
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._log_file = open(self.log_path, "ab")  # closed by _reap
        self.proc = subprocess.Popen(cmd, stdout=self._log_file, stderr=subprocess.STDOUT)
        wants_faults = bool(settings.get("corral.faults.listen"))
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self._reap()
                raise CorralStartError(
                    f"corral exited with {self.proc.returncode}:\n{self.log()[offset:]}"
                )
            text = self._read_from(offset)
            listening = LISTENING.search(text)
            faults_at = FAULTS_AT.search(text)
            if listening and (faults_at or not wants_faults):
                self.port = int(listening.group(2))
                if faults_at:
                    self.faults_port = int(faults_at.group(2))
                return self
            time.sleep(0.05)
        self.kill()
        raise CorralStartError(
            f"corral did not listen within {self.start_timeout}s:\n{self.log()[offset:]}"
        )

    def _read_from(self, offset: int) -> str:
        with open(self.log_path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")

    def log(self) -> str:
        """Everything the broker logged (every start's, appended)."""
        return self._read_from(0) if self.log_path.exists() else ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> int:
        """A clean shutdown (SIGTERM); SIGKILL if it takes longer than `timeout`. Returns the
        exit code."""
        if self.proc is None:
            raise RuntimeError("the broker has not started")
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reap()
        return self.proc.returncode

    def kill(self) -> None:
        """A crash (SIGKILL): what was acknowledged must survive it."""
        if self.proc is None:
            raise RuntimeError("the broker has not started")
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._reap()

    def restart(self) -> EmbeddedCorral:
        """Stops the broker if it runs, and starts it again: same data, same ports."""
        if self.alive():
            self.stop()
        return self.start()

    def close(self) -> None:
        """Stops the broker if it runs; removes the data directory if it made it."""
        if self.alive():
            self.stop()
        self._reap()
        if self._owned is not None:
            shutil.rmtree(self._owned, ignore_errors=True)

    def _reap(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> EmbeddedCorral:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "running" if self.alive() else "stopped"
        return f"EmbeddedCorral({self.data_dir}, port={self.port}, {state})"


def _text(value: object) -> str:
    """A setting's value as `--set` takes it (True -> "true")."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
