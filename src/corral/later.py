"""`Later`: an answer known later, without a task waiting for it (the one deferred-answer
primitive of handlers, group writes and parked requests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from corral.errors import ErrorCode


class Later:
    """An answer known later, without a task waiting for it: the one deferred-answer primitive.
    A parked JoinGroup or SyncGroup, an OffsetCommit until its records are fsynced, a coordinator
    write until it is durable. Whoever knows the answer calls `resolve(value)` (the first value
    wins); whoever waits registers `then(callback)`, called at once if the value is already there.
    A handler may return one; the server sends its value when it is resolved."""

    __slots__ = ("_value", "_resolved", "_callbacks")

    def __init__(self) -> None:
        self._resolved = False
        self._value: Any = None
        self._callbacks: list[Callable[[Any], None]] | None = None

    @classmethod
    def of(cls, value: Any) -> Later:
        """A Later resolved already."""
        later = cls()
        later.resolve(value)
        return later

    @property
    def resolved(self) -> bool:
        return self._resolved

    @property
    def value(self) -> Any:
        """The value, or None while unresolved (in-process tests read answers this way)."""
        return self._value

    def resolve(self, value: Any) -> None:
        if self._resolved:
            return
        self._value, self._resolved = value, True
        callbacks, self._callbacks = self._callbacks, None
        for callback in callbacks or ():
            callback(value)

    def then(self, callback: Callable[[Any], None]) -> None:
        if self._resolved:
            callback(self._value)
        elif self._callbacks is None:
            self._callbacks = [callback]
        else:
            self._callbacks.append(callback)

    def map(self, fn: Callable[[Any], Any]) -> Later:
        """A Later resolved with `fn(value)` once this one is resolved."""
        out = Later()
        self.then(lambda value: out.resolve(fn(value)))
        return out


def first_error(laters: list[Later]) -> Later:
    """Resolved once every Later (each resolving to an ErrorCode) is, with the first failure in
    list order, or NONE: a request whose several writes must all be durable."""
    out = Later()
    left = len(laters)
    if not left:
        out.resolve(ErrorCode.NONE)
        return out

    def one_done(_: Any) -> None:
        nonlocal left
        left -= 1
        if left == 0:
            out.resolve(next((e for e in (w.value for w in laters) if e), ErrorCode.NONE))

    for later in laters:
        later.then(one_done)
    return out


async def wait(later: Later) -> Any:
    """A task's way to wait for a Later (its callbacks run on the event loop): its value."""
    done = trio.Event()
    later.then(lambda _: done.set())
    await done.wait()
    return later.value
