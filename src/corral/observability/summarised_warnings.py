"""WARNING lines for conditions that repeat without bound: malformed frames, requests before
authentication, slow requests, writes refused by a full disk. A client can trigger any of them
thousands of times a second, and a line each would flood the log (70,000 lines in 10 s from one
client opening a connection per bad frame).

Per kind, the first occurrence is logged in full at once, which opens a window of
`WARNING_INTERVAL_S`; later ones in the window are only counted, per client address where one is
given (the busiest named, the rest counted together), and logged as one summary line when the
window ends, naming the last one's message; at DEBUG each is logged in full too. So a kind costs
at most two lines per interval, whatever the clients do. Windows end on the next warning or on
`flush_all()`, which the server calls once a second, so a burst's count is never left unsaid.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

WARNING_INTERVAL_S = 10.0
# Addresses counted by name in one window; the others are counted together.
MAX_ADDRESSES = 32
# Addresses named in a summary line, busiest first.
NAMED_IN_SUMMARY = 5


@dataclass
class _Window:
    opened: float
    count: int = 0
    by_address: dict[str, int] = field(default_factory=dict)
    elsewhere: int = 0  # counted beyond MAX_ADDRESSES addresses, or with no address
    last: tuple[str, tuple] = ("", ())  # formatted only if a summary names it


class SummarisedWarnings:
    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float = WARNING_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        level: int = logging.WARNING,
    ):
        self.logger = logger
        self.level = level  # of the full line and the summary (INFO for failed authentications)
        self.interval_s = interval_s
        self.clock = clock
        self._windows: dict[str, _Window] = {}
        _ALL.add(self)

    def __call__(self, kind: str, message: str, *args: object, address: str | None = None) -> None:
        now = self.clock()
        self.flush(now)
        window = self._windows.get(kind)
        if window is None:
            self._windows[kind] = _Window(now)
            self.logger.log(self.level, message, *args)
            return
        window.count += 1
        window.last = (message, args)
        # Each one in full for whoever debugs (corral.* at DEBUG, e.g. via broker-loggers).
        self.logger.debug(message, *args)
        if address is not None and (
            address in window.by_address or len(window.by_address) < MAX_ADDRESSES
        ):
            window.by_address[address] = window.by_address.get(address, 0) + 1
        else:
            window.elsewhere += 1

    def flush(self, now: float | None = None) -> None:
        """Closes the windows that are over, logging a summary for those that counted any."""
        if not self._windows:
            return
        now = self.clock() if now is None else now
        for kind, window in list(self._windows.items()):
            if now - window.opened < self.interval_s:
                continue
            del self._windows[kind]
            if window.count:
                message, args = window.last
                self.logger.log(
                    self.level,
                    "%s: %d more%s in the last %.0fs; the last: %s",
                    kind,
                    window.count,
                    _sources(window),
                    now - window.opened,
                    message % args if args else message,
                )


def _sources(window: _Window) -> str:
    if not window.by_address:
        return ""
    busiest = sorted(window.by_address.items(), key=lambda item: -item[1])
    named = [f"{address} ({count})" for address, count in busiest[:NAMED_IN_SUMMARY]]
    others = sum(count for _, count in busiest[NAMED_IN_SUMMARY:]) + window.elsewhere
    if others:
        named.append(f"{others} from other addresses")
    return " from " + ", ".join(named)


_ALL: weakref.WeakSet[SummarisedWarnings] = weakref.WeakSet()


def flush_all() -> None:
    for warnings in list(_ALL):
        warnings.flush()
