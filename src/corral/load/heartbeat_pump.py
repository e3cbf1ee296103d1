"""One task per worker that sends the heartbeats of all its members during a heartbeat ramp.

A trio task per member costs a sleep, a wait and their cancel scopes per heartbeat: ~200 us of CPU,
so the generator, not the broker, was the limit. Here members hand their connection, their
pre-encoded heartbeat (classic Heartbeat or KIP-848 ConsumerGroupHeartbeat) and a function that
reads its answer to the pump, which, like benches/heartbeat_capacity.py, keeps the members'
due times in a heap, sends with non-blocking send() and reads the answers of every ready socket
from its own epoll (whose descriptor trio waits on). Each member keeps at most one heartbeat in
flight and never bursts to catch up, as `common.paced` does; when the rate changes, members move
to the new pace at once. The member gets its connection back with the first answer that says
something new (an error, a KIP-848 assignment or epoch), or when the connection fails or an answer
is late (REQUEST_TIMEOUT_S): it then reacts as to any heartbeat answer.
"""

from __future__ import annotations

import heapq
import itertools
import random
import select
import time
from collections.abc import Callable
from typing import Any

import trio

from corral.load.member import REQUEST_TIMEOUT_S, GroupMember
from corral.load.stats import Recorder
from corral.load.wire import BrokerError, Connection

# What a member's answer reader returns for an answer that changes nothing: the member beats on.
UNCHANGED = None

TIMEOUT_SCAN_S = 1.0
MAX_WAIT_S = 0.005  # members that start beating are due within this


class _Beating:
    """A member whose heartbeats the pump sends."""

    __slots__ = (
        "member",
        "conn",
        "frame",
        "api",
        "read",
        "fd",
        "next_at",
        "sent_at",
        "result",
        "done",
    )

    def __init__(
        self,
        member: GroupMember,
        conn: Connection,
        frame: bytearray,
        api: str,
        read: Callable[[bytes], Any],
    ):
        self.member, self.conn, self.frame, self.api, self.read = member, conn, frame, api, read
        self.fd = conn.sock.fileno()
        self.next_at = 0.0
        self.sent_at: float | None = None  # the heartbeat in flight, if any
        self.result: Any = None  # what `read` made of the answer that ends it
        self.done = trio.Event()


class HeartbeatPump:
    def __init__(self, recorder: Recorder, member_rate: Callable[[], float]):
        self.recorder = recorder
        self.member_rate = member_rate  # heartbeats/s each member sends now
        self._epoll = select.epoll()
        self._by_fd: dict[int, _Beating] = {}
        self._due: list[tuple[float, int, _Beating]] = []
        self._order = itertools.count()  # tie-breaker of the heap
        self._started = False
        self._pace = 0.0  # the interval members were last scheduled at

    async def beat(
        self,
        member: GroupMember,
        conn: Connection,
        frame: bytearray,
        api: str,
        read: Callable[[bytes], Any],
    ) -> Any:
        """Heartbeats `member` on `conn` (latencies recorded under `api`) until `read` (given
        each answer frame; it checks the correlation id, BrokerError if wrong) makes of an answer
        something other than UNCHANGED, returned; or until the connection fails or an answer is
        late (None, the error recorded: the connection is then unusable). Cancelled, it leaves
        the connection with an answer possibly in flight."""
        if not self._started:
            self._started = True
            trio.lowlevel.spawn_system_task(self._run, name="heartbeat pump")
        b = _Beating(member, conn, frame, api, read)
        self._by_fd[b.fd] = b
        self._epoll.register(b.fd, select.EPOLLIN)
        self._schedule(b, time.monotonic() + random.uniform(0, self._interval()))
        try:
            await b.done.wait()
        finally:
            if self._by_fd.get(b.fd) is b:
                self._forget(b)
        return b.result

    def _interval(self) -> float:
        return 1 / max(1e-9, self.member_rate())

    def _schedule(self, b: _Beating, at: float) -> None:
        b.next_at = at
        heapq.heappush(self._due, (at, next(self._order), b))

    def _forget(self, b: _Beating) -> None:
        del self._by_fd[b.fd]
        self._epoll.unregister(b.fd)

    def _finish(self, b: _Beating, result: Any = None, error: str | None = None) -> None:
        if self._by_fd.get(b.fd) is b:
            self._forget(b)
        if error is not None:  # "CONNECTION" or "TIMEOUT"
            self.recorder.error(b.api, error)
        b.result = result
        b.done.set()

    def _repace(self, now: float) -> None:
        """A new rate moves every member to its pace at once: each one not waiting for an answer
        is due within an interval at the new rate (spread evenly), rather than at the time its
        old interval set, which would keep the old rate for an old interval."""
        interval = self._interval()
        if interval != self._pace and self._pace:
            for b in self._by_fd.values():
                if b.sent_at is None:
                    self._schedule(b, now + random.uniform(0, interval))
        self._pace = interval

    async def _run(self) -> None:
        next_scan = time.monotonic() + TIMEOUT_SCAN_S
        while True:
            now = time.monotonic()
            self._repace(now)
            while self._due and self._due[0][0] <= now:
                at, _, b = heapq.heappop(self._due)
                if at != b.next_at or b.done.is_set() or self._by_fd.get(b.fd) is not b:
                    continue  # rescheduled since (this entry is stale), or no longer beating
                try:
                    b.conn.send_nowait(b.frame)
                except BrokerError:
                    self._finish(b, error="CONNECTION")
                    continue
                b.sent_at = now
            if now >= next_scan:
                next_scan = now + TIMEOUT_SCAN_S
                for b in [
                    b
                    for b in self._by_fd.values()
                    if b.sent_at is not None and now - b.sent_at > REQUEST_TIMEOUT_S
                ]:
                    self._finish(b, error="TIMEOUT")
            wait = min(self._due[0][0] - now if self._due else MAX_WAIT_S, MAX_WAIT_S)
            with trio.move_on_after(max(0.0, wait)):
                await trio.lowlevel.wait_readable(self._epoll.fileno())
            self._receive()

    def _receive(self) -> None:
        for fd, _ in self._epoll.poll(0):
            b = self._by_fd.get(fd)
            if b is None:
                continue
            try:
                answers = b.conn.receive_nowait()
            except BrokerError:
                self._finish(b, error="CONNECTION")
                continue
            if not answers:
                continue
            now = time.monotonic()
            try:
                if len(answers) > 1 or b.sent_at is None:
                    raise BrokerError("an answer to no request in flight")
                result = b.read(answers[0])
            except BrokerError:
                self._finish(b, error="CONNECTION")
                continue
            self.recorder.latency(b.api, now - b.sent_at)
            b.sent_at = None
            if result is not UNCHANGED:
                self._finish(b, result)
                continue
            b.member.last_ok_at = now
            self._schedule(b, max(b.next_at + self._interval(), now))
