"""What a groups operation returns (Kafka's CoordinatorResult<Response, Record>): the records it
made and the answer it gives once they are durable. An operation never appends to a list it was
handed: it returns its records, and its caller combines them with its own; the runtime (the
shard's writes) appends and replays them.

`NO_RECORDS` is the one empty sequence a step returns when it made none (the common case of a
steady heartbeat), so that no list is allocated for nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, NamedTuple, TypeVar

from corral.groups.storage.records import Record

A = TypeVar("A")

Records = Sequence[Record]
NO_RECORDS: tuple[Record, ...] = ()


class Result(NamedTuple, Generic[A]):
    """An operation's records and its answer."""

    records: list[Record]
    answer: A
