"""What every in-process group test uses: the fake coordinator log (FakeLog, with its
fail and hold controls), a clock the test moves, JoinGroup requests as decoded off the wire."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from corral.errors import ErrorCode
from corral.groups import timers as timers_module
from corral.groups.classic import JoinRequest
from corral.groups.storage import records
from corral.groups.storage.records import LogEntry
from corral.groups.storage.txn_records import TxnOffsetCommits, log_records
from corral.groups.storage.writer import CoordinatorLog
from corral.later import Later
from corral.load import consumer_protocol as cp


class FakeLog(CoordinatorLog):
    """The coordinator's log in process: encodes every write as the durable log does (part of a
    request's cost), replays what the caller did not apply and acknowledges at once, unless a
    control says otherwise:
    - `keep=True`: the bytes of every record written are kept in `pairs` (the "log");
    - `fail_next = n`: the next n writes fail (NOT_COORDINATOR, nothing replayed);
    - `hold()` ... `release()`: writes wait, as on a slow disk; `release` replays and answers
      them in order, as the durable log does once they are fsynced."""

    def __init__(self, keep: bool = False) -> None:
        self.keep = keep
        self.pairs: list[LogEntry] = []
        self.fail_next = 0
        self.held: list[tuple[str, list, bool, Later]] | None = None

    def _write(self, group_id, recs, applied=False, batch=None):
        if self.fail_next:
            self.fail_next -= 1
            return Later.of(ErrorCode.NOT_COORDINATOR)
        if batch is None:
            batch = records.encode_batch(recs, 0)
        if isinstance(recs[0], TxnOffsetCommits):
            recs[0].offset = len(self.pairs)  # its position in `pairs`, the "log"
        if self.keep:
            # As DurableLog.read gives them: a transactional batch's records with its facts.
            for _, key, value, pid, epoch, control in log_records(batch):
                if pid >= 0 or control:
                    self.pairs.append((key, value, (0, len(self.pairs), pid, epoch, control)))
                else:
                    self.pairs.append((key, value))
        if self.held is not None:
            done = Later()
            self.held.append((group_id, recs, applied, done))
            return done
        if not applied:
            for record in recs:
                self.replay(record)
        return Later.of(ErrorCode.NONE)

    def writing(self, group_id: str) -> bool:
        return self.held is not None and any(g == group_id for g, *_ in self.held)

    def hold(self) -> None:
        self.held = []

    def release(self) -> None:
        held, self.held = self.held or [], None
        for _, recs, applied, done in held:
            if not applied:
                for record in recs:
                    self.replay(record)
            done.resolve(ErrorCode.NONE)


def fresh(value: str) -> str:
    """A new object equal to `value`: a request decoded off the wire brings its own strings."""
    return (value + " ")[:-1]


def subscription(topics=("topic",)) -> bytes:
    """ConsumerProtocolSubscription v3 bytes for `topics`."""
    return cp.encode_subscription(list(topics), {}, -1)


def join_request(
    group_id: str,
    member_id: str,
    metadata: bytes,
    *,
    n: int = 0,
    instance_id: str | None = None,
    session_timeout_ms: int = 45000,
    rebalance_timeout_ms: int = 300000,
    protocol_type: str = "consumer",
    protocols: list[str] | None = None,
    require_known_member_id: bool = True,
    supports_skip_assignment: bool = True,
    reason: str | None = None,
) -> JoinRequest:
    """A JoinRequest as the handlers build it from the wire (fresh strings and bytes)."""
    names = protocols or ["range"]
    return JoinRequest(
        group_id=group_id,
        member_id=member_id,
        group_instance_id=instance_id,
        client_id=f"client-{n}",
        client_host=fresh("/127.0.0.1"),
        session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms,
        protocol_type=fresh(protocol_type),
        protocols=[(fresh(name), bytes(bytearray(metadata))) for name in names],
        require_known_member_id=require_known_member_id,
        supports_skip_assignment=supports_skip_assignment,
        reason=reason,
    )


class FakeClock:
    """The monotonic clock of the coordinator's timers (corral.groups.timers.now_ms), moved by hand."""

    def __init__(self, start_ms: int = 1_000_000):
        self.now = start_ms

    def __call__(self) -> int:
        return self.now


@contextlib.contextmanager
def patched_clock(clock: FakeClock) -> Iterator[FakeClock]:
    """Makes `clock` the timers' clock; a coordinator must be built inside the block."""
    saved = timers_module.now_ms
    timers_module.now_ms = clock
    try:
        yield clock
    finally:
        timers_module.now_ms = saved


def code(value: ErrorCode | str | int) -> ErrorCode:
    return ErrorCode[value] if isinstance(value, str) else ErrorCode(value)


class InvariantError(AssertionError):
    pass
