"""Where the coordinator's records go: the `__consumer_offsets` log.

The state machine is synchronous; a change that must be durable before it is acknowledged hands
its records to the log with a callback (or awaits `append_offsets`), and the callback runs once the
records are written. `VolatileLog` writes nothing and calls back at once: it is the coordinator
without durability, used until the broker has a log store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ..errors import ErrorCode

if TYPE_CHECKING:
    from .classic import ClassicGroup

Done = Callable[[ErrorCode], None] | None


class CoordinatorLog:
    durable = False

    def write_group(self, group: "ClassicGroup", done: Done) -> None:
        raise NotImplementedError

    def write_tombstones(self, group_id: str, offsets: list[tuple[str, int]], done: Done,
                         group_too: bool = True) -> None:
        raise NotImplementedError

    async def append_offsets(self, group_id: str, topic: str,
                             partitions: list[tuple[int, int, int, str]], commit_ms: int,
                             expire_ms: int) -> ErrorCode:
        raise NotImplementedError

    async def run(self) -> None:
        """The writer task, for logs that have one."""


class VolatileLog(CoordinatorLog):
    """Keeps nothing: every write 'succeeds' at once, and a restart forgets all groups."""

    def write_group(self, group, done):
        if done is not None:
            done(ErrorCode.NONE)

    def write_tombstones(self, group_id, offsets, done, group_too=True):
        if done is not None:
            done(ErrorCode.NONE)

    async def append_offsets(self, group_id, topic, partitions, commit_ms, expire_ms):
        return ErrorCode.NONE
