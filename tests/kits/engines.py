"""The cluster engines for tests and benchmarks, started in a directory of the caller's: etcd
(Debian's etcd-server) and PostgreSQL (Debian's postgresql), each on free loopback ports.

    with start_engine("postgres", tmp_path) as engine:
        engine.url        # what `corral serve --cluster` takes
        engine.kill()     # SIGKILL (a crash)
        engine.start()    # again, on the same data
        engine.reset()    # corral's state removed: a fresh cluster
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from corral.cluster.engines import connect

# Debian's server binaries (the newest version installed).
PG_BIN = max(Path("/usr/lib/postgresql").glob("*/bin"), default=Path("/usr/lib/postgresql/15/bin"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EngineProcess:
    kind = ""

    def __init__(self, base: Path):
        self.base = base
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = base / f"{self.kind}.log"

    @property
    def url(self) -> str:
        raise NotImplementedError

    def command(self) -> list[str]:
        raise NotImplementedError

    def prepare(self) -> None:
        """Once, before the first start."""

    def start(self) -> EngineProcess:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, **self._popen_options()
            )
        deadline = time.monotonic() + 60
        while True:
            try:
                engine = connect(self.url)
                engine.live_nodes()
                engine.close()
                return self
            except Exception:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"{self.kind} did not start:\n{self.log_path.read_text()[-3000:]}"
                    ) from None
                time.sleep(0.1)

    def _popen_options(self) -> dict[str, object]:
        return {}

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()

    def reset(self) -> None:
        engine = connect(self.url)
        try:
            engine.drop_everything()  # type: ignore[attr-defined]
        finally:
            engine.close()

    def pids(self) -> list[int]:
        """The engine's processes (PostgreSQL has one per connection)."""
        assert self.proc is not None
        pids = [self.proc.pid]
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == self.proc.pid:
                    pids.append(int(entry.name))
        return pids


class Postgres(EngineProcess):
    kind = "postgres"

    def __init__(self, base: Path):
        super().__init__(base)
        self.port = free_port()
        # PostgreSQL will not run as root: as the postgres user when we are root, in a
        # directory of its own (pytest's are private to root).
        self.user = "postgres" if os.getuid() == 0 else pwd.getpwuid(os.getuid()).pw_name
        self.root = Path(tempfile.mkdtemp(prefix="corral-pg-"))
        self.data = self.root / "pgdata"

    @property
    def url(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/postgres"

    def _popen_options(self) -> dict[str, object]:
        # The postmaster is our child itself: a SIGKILL reaches it, and we reap it.
        return {"user": self.user} if os.getuid() == 0 else {}

    def prepare(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        if os.getuid() == 0:
            shutil.chown(self.root, self.user)
        subprocess.run(
            [str(PG_BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U", self.user],
            check=True,
            capture_output=True,
            cwd=self.root,
            **self._popen_options(),  # type: ignore[arg-type]
        )

    def command(self) -> list[str]:
        return [
            str(PG_BIN / "postgres"),
            "-D",
            str(self.data),
            "-p",
            str(self.port),
            "-k",
            str(self.root),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "fsync=on",
            "-c",
            "synchronous_commit=on",
        ]

    def kill(self) -> None:
        # The postmaster first; its backends see it gone and end (wait for them: the next
        # postmaster refuses to start while they hold the shared memory).
        backends = self.pids()[1:]
        super().kill()
        deadline = time.monotonic() + 10
        while any(Path(f"/proc/{pid}").exists() for pid in backends):
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # a fast shutdown
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
        shutil.rmtree(self.root, ignore_errors=True)


class Etcd(EngineProcess):
    kind = "etcd"

    def __init__(self, base: Path):
        super().__init__(base)
        self.port, self.peer_port = free_port(), free_port()

    @property
    def url(self) -> str:
        return f"etcd://127.0.0.1:{self.port}"

    def prepare(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)

    def command(self) -> list[str]:
        client, peer = f"http://127.0.0.1:{self.port}", f"http://127.0.0.1:{self.peer_port}"
        return [
            "etcd",
            "--name",
            "corral-test",
            "--data-dir",
            str(self.base / "etcd-data"),
            "--listen-client-urls",
            client,
            "--advertise-client-urls",
            client,
            "--listen-peer-urls",
            peer,
            "--initial-advertise-peer-urls",
            peer,
            "--initial-cluster",
            f"corral-test={peer}",
            "--log-level",
            "warn",
            # Its MVCC history keeps every overwritten key until compacted (docs/cluster.md).
            "--auto-compaction-mode",
            "revision",
            "--auto-compaction-retention",
            "10000",
        ]


KINDS: dict[str, type[EngineProcess]] = {"postgres": Postgres, "etcd": Etcd}


@contextlib.contextmanager
def start_engine(kind: str, base: Path) -> Iterator[EngineProcess]:
    engine = KINDS[kind](base)
    engine.prepare()
    engine.start()
    try:
        yield engine
    finally:
        engine.stop()
