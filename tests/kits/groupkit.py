"""Helpers of the group tests: real members in child processes, and waiting on what they report."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

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


def partitioned(members: list[Member], partitions: int) -> bool:
    """Every partition owned by exactly one of `members`."""
    owned = [p for m in members for p in m.assigned]
    return sorted(owned) == list(range(partitions))


def stop_all(members: list[Member]) -> None:
    for m in members:
        if m.proc.poll() is None:
            m.kill()
