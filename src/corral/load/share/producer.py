"""Records for share consumers to consume: Produce requests over the generator's connections.

One connection per partition leader, one request in flight on it; a request carries one batch of
`batch` records (uncompressed, `value_bytes` each, no key) for every partition of that leader that
still needs records, acks=-1. Each batch the broker appended is reported with its base offset
(`on_produced(tp, base, count)`): the share ledger knows exactly which offsets must be consumed.
Optionally paced to `rate` records/s (closed loop, never bursting to catch up).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import trio

from corral import _core
from corral.errors import ErrorCode
from corral.load.wire import BrokerError, Connection
from corral.network.apis import ApiKey

ACKS_ALL = -1
PRODUCE_TIMEOUT_MS = 30_000
RETRIABLE = {
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,  # a topic just created, not yet everywhere
    ErrorCode.LEADER_NOT_AVAILABLE,
}
MAX_ATTEMPTS = 50

TP = tuple[str, int]


class ProduceError(Exception):
    """A batch could not be appended."""


def split(total: int, parts: int) -> list[int]:
    """`total` records over `parts` partitions, as evenly as possible."""
    per, extra = divmod(total, parts)
    return [per + (1 if i < extra else 0) for i in range(parts)]


async def produce_to_leader(
    conn: Connection,
    quota: dict[TP, int],
    batch: int,
    value_bytes: int,
    on_produced: Callable[[TP, int, int], None],
    rate: float = 0.0,
) -> None:
    """Produces `quota[tp]` records to each partition (all led by `conn`'s broker)."""
    left = dict(quota)
    value = b"x" * value_bytes
    version = conn.versions[ApiKey.PRODUCE]
    attempts = 0
    next_at = time.monotonic()
    while any(left.values()):
        by_topic: dict[str, list[dict]] = {}
        sizes: dict[TP, int] = {}
        for tp, n in sorted(left.items()):
            if n <= 0:
                continue
            count = min(batch, n)
            sizes[tp] = count
            records = _core.build_batch([(None, value)] * count, int(time.time() * 1000))
            by_topic.setdefault(tp[0], []).append({"index": tp[1], "records": records})
        if rate > 0:
            delay = next_at - time.monotonic()
            if delay > 0:
                await trio.sleep(delay)
            next_at = max(next_at + sum(sizes.values()) / rate, time.monotonic())
        body = {
            "transactional_id": None,
            "acks": ACKS_ALL,
            "timeout_ms": PRODUCE_TIMEOUT_MS,
            "topic_data": [
                {"name": t, "topic_id": bytes(16), "partition_data": ps}
                for t, ps in by_topic.items()
            ],
        }
        answer = await conn.call(ApiKey.PRODUCE, body, version)
        retry = False
        for topic in answer["responses"]:
            for part in topic["partition_responses"]:
                tp = (topic["name"], part["index"])
                code = part["error_code"]
                if code == ErrorCode.NONE:
                    on_produced(tp, part["base_offset"], sizes[tp])
                    left[tp] -= sizes[tp]
                elif code in RETRIABLE:
                    retry = True
                else:
                    raise ProduceError(f"Produce {tp[0]}-{tp[1]}: {ErrorCode(code).name}")
        if retry:
            attempts += 1
            if attempts > MAX_ATTEMPTS:
                raise ProduceError("Produce kept failing with retriable errors")
            await trio.sleep(0.2)


async def produce(
    brokers: dict[int, tuple[str, int]],
    versions: dict[int, int],
    quota: dict[TP, int],
    leader_of: Callable[[TP], int],
    batch: int,
    value_bytes: int,
    on_produced: Callable[[TP, int, int], None],
    rate: float = 0.0,
) -> None:
    """Produces `quota` (records per partition) to the partitions' leaders at once; `rate` in
    records/s over all of them (0: as fast as the broker takes them)."""
    by_leader: dict[int, dict[TP, int]] = {}
    for tp, n in quota.items():
        if n > 0:
            by_leader.setdefault(leader_of(tp), {})[tp] = n
    total = sum(quota.values())

    async def one(node: int, part: dict[TP, int]) -> None:
        host, port = brokers[node]
        try:
            conn = await Connection.open(host, port, versions)
        except BrokerError as e:
            raise ProduceError(str(e)) from e
        try:
            share = rate * sum(part.values()) / total if rate > 0 else 0.0
            await produce_to_leader(conn, part, batch, value_bytes, on_produced, share)
        except BrokerError as e:
            raise ProduceError(str(e)) from e
        finally:
            await conn.aclose()

    async with trio.open_nursery() as nursery:
        for node, part in by_leader.items():
            nursery.start_soon(one, node, part)
