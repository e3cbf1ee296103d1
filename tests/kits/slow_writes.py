"""`corral` whose coordinator answers its durable writes late: a test-only launcher, so the fault
stays out of the broker's settings.

    python tests/kits/slow_writes.py DELAY_MS serve --data-dir ...

Each coordinator write is appended and fsynced as usual, then applied and answered only after
DELAY_MS, which widens the window between a change and its answer: a kill -9 in that window must
not lose what was acknowledged (tests/wire/test_groups_durability.py). Every OffsetCommit goes
through the coordinator here (the network thread's commit path does not wait)."""

from __future__ import annotations

import sys
from pathlib import Path

import trio

import corral.groups
from corral.groups.storage.writer import DurableLog

HERE = Path(__file__).resolve()


def command(delay_ms: int) -> list[str]:
    """The `command` for a CorralProcess running this launcher."""
    return [sys.executable, str(HERE), str(delay_ms)]


class SlowWrites(DurableLog):
    delay_s = 0.0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._ready = trio.Event()

    def _flushed(self, pending, error) -> None:
        pending.durable, pending.error = True, error
        self._ready.set()  # `run` applies them after the pause

    async def run(self) -> None:
        while True:
            await self._ready.wait()
            self._ready = trio.Event()
            await trio.sleep(self.delay_s)
            self._apply_durable()


def main(argv: list[str]) -> int:
    SlowWrites.delay_s = int(argv[0]) / 1000
    corral.groups.DurableLog = SlowWrites
    from corral.cli import main as corral_main

    rest = [*argv[1:], "--set", "corral.group.offset.commit.short.path.enable=false"]
    return corral_main(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
