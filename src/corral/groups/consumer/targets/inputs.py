"""A consumer group's target assignment (reference/kip848.md §2.3-2.5): which topics its members
subscribe to, the metadata hash whose change bumps the group epoch, the assignor's inputs, and the
records of a new target.

`TargetInputs` is taken on the event loop (plain tuples and frozensets, which the group never
mutates), so `compute` (and `encoded_result`, which also makes and encodes the records) may run
in a worker thread while the group goes on changing.
"""

from __future__ import annotations

import hashlib
import struct
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from corral.assignors import GroupSpec, MemberSpec, TopicId, run_assignor, subscription_type_of
from corral.groups.consumer.member_state import ConsumerMember
from corral.groups.consumer.reconcile import Partitions
from corral.groups.consumer.state import ConsumerGroup
from corral.groups.storage import consumer_records as cr
from corral.groups.storage.records import Record, encode_batch

if TYPE_CHECKING:
    from corral.assignors import Assignor
    from corral.topics.registry import Topic, TopicStore

EMPTY: frozenset[bytes] = frozenset()


class TopicImage:
    """The broker's topics as the coordinator sees them: ids are 16-byte `bytes`."""

    def __init__(self, store: TopicStore | None = None):
        self.store = store
        # Bumped on every topic creation or deletion (a regex resolution's `Version`).
        self.version = 0
        # name -> (its Topic, the id's bytes): UUID.bytes is computed at each call, and every
        # reconciliation asks for its member's topics' ids. A new Topic object (the topic
        # deleted and created again) replaces the entry.
        self._ids: dict[str, tuple[object, bytes]] = {}

    def topic(self, name: str) -> Topic | None:
        return None if self.store is None else self.store.get(name)

    def id_of(self, name: str) -> bytes | None:
        topic = self.topic(name)
        if topic is None:
            return None
        cached = self._ids.get(name)
        if cached is not None and cached[0] is topic:
            return cached[1]
        if self.store is not None and len(self._ids) > 4 * len(self.store.by_name) + 64:
            self._ids.clear()  # mostly deleted topics' entries
        topic_id = topic.id.bytes
        self._ids[name] = (topic, topic_id)
        return topic_id

    def by_id(self, topic_id: bytes) -> Topic | None:
        return None if self.store is None else self.store.by_id.get(uuid.UUID(bytes=topic_id))

    def name_of(self, topic_id: bytes) -> str:
        topic = self.by_id(topic_id)
        return "" if topic is None else topic.name

    def names(self) -> Iterable[str]:
        return () if self.store is None else list(self.store.by_name)


def member_topic_ids(
    member: ConsumerMember, regexes: Mapping[str, cr.RegexTopics], topics: TopicImage
) -> frozenset[bytes]:
    """The ids of the existing topics a member subscribes to: its names and its regex's topics
    (`regexes`: the group's resolutions)."""
    names: Iterable[str] = member.topic_names
    if member.regex:
        resolved = regexes.get(member.regex)
        if resolved is not None:
            names = (*names, *resolved.topics)
    ids = (topics.id_of(name) for name in names)
    return frozenset(i for i in ids if i is not None)


def metadata_hash(names: Iterable[str], topics: TopicImage) -> int:
    """KIP-1101's idea (a hash of every subscribed topic's id, name and partition count, sorted by
    name) with corral's own hash function: a change of it bumps the group epoch. Not bit-equal to
    Kafka's XXH3 (that matters only to a log shared with Java brokers: one extra bump)."""
    digest = hashlib.blake2b(digest_size=8)
    found = False
    for name in sorted(set(names)):
        topic = topics.topic(name)
        if topic is None:
            continue
        found = True
        digest.update(topic.id.bytes + name.encode() + b"\0" + struct.pack(">i", topic.partitions))
    return struct.unpack(">q", digest.digest())[0] if found else 0


@dataclass(slots=True)
class TargetInputs:
    """One computation's inputs: members in join order with (topic ids, previous target, rack,
    instance id), and the partition count of every subscribed topic."""

    group_id: str
    epoch: int
    members: list[tuple[str, frozenset[bytes], Partitions, str | None, str | None]]
    partition_counts: dict[bytes, int]
    # Each member's TargetMember as it stands (None: it has none), to write only what changes.
    stored_targets: Mapping[str, Partitions | None]

    @classmethod
    def of(
        cls,
        group: ConsumerGroup,
        epoch: int,
        members: Iterable[ConsumerMember],
        topics: TopicImage,
        regexes: Mapping[str, cr.RegexTopics] | None = None,
    ) -> TargetInputs:
        """`regexes`: the resolutions to read (default the group's; a heartbeat passes those
        its own records will add)."""
        regexes = group.regexes if regexes is None else regexes
        rows: list[tuple[str, frozenset[bytes], Partitions, str | None, str | None]] = []
        counts: dict[bytes, int] = {}
        # One set object per subscription class (the built-ins group members by it), looked up
        # once per class rather than once per member.
        shared: dict[tuple[tuple[str, ...], str | None], frozenset[bytes]] = {}
        for member in members:
            key = (member.topic_names, member.regex)
            ids = shared.get(key)
            if ids is None:
                ids = shared[key] = member_topic_ids(member, regexes, topics)
            for topic_id in ids:
                if topic_id not in counts:
                    topic = topics.by_id(topic_id)
                    assert topic is not None, "member_topic_ids gives existing topics' ids"
                    counts[topic_id] = topic.partitions
            rows.append(
                (member.member_id, ids, group.target_of(member), member.rack_id, member.instance_id)
            )
        stored = {row[0]: group.target.get(row[0]) for row in rows}
        return cls(group.group_id, epoch, rows, counts, stored)

    def compute(self, assignor: Assignor) -> dict[str, dict[bytes, frozenset[int]]] | None:
        """The new target (member -> topic id -> partitions), or None if the assignor failed
        (logged; the group keeps its target). Safe in a worker thread."""
        specs = {
            # The assignors take any hashable topic id (Mapping's key is invariant): ours are bytes.
            member_id: MemberSpec(ids, previous, rack, instance)  # type: ignore[arg-type]
            for member_id, ids, previous, rack, instance in self.members
        }
        spec = GroupSpec(specs, subscription_type_of(specs.values()))
        counts: Mapping[TopicId, int] = self.partition_counts  # type: ignore[assignment]  # as above
        result = run_assignor(assignor, self.group_id, spec, counts)
        if result is None:
            return None
        return {
            # The topic ids the assignor returns are those it was given: bytes.
            member_id: {t: frozenset(ps) for t, ps in result.get(member_id, {}).items() if ps}  # type: ignore[misc]
            for member_id in specs
        }

    def records(
        self, target: Mapping[str, Mapping[bytes, frozenset[int]]], now_ms: int
    ) -> list[Record]:
        """The records of a new target: a TargetMember per member whose target changed since
        the inputs were taken, then the TargetEpoch."""
        gid = self.group_id
        out: list[Record] = [
            cr.TargetMember(gid, member_id, {t: tuple(sorted(ps)) for t, ps in partitions.items()})
            for member_id, partitions in target.items()
            if self.stored_targets.get(member_id) != partitions
        ]
        out.append(cr.TargetEpoch(gid, self.epoch, now_ms))
        return out


def encoded_result(
    inputs: TargetInputs, assignor: Assignor, now_ms: int
) -> tuple[list[Record], bytes] | None:
    """An offloaded computation's whole result, in the worker thread: its records and their
    RecordBatch, so the event loop only applies them. None if the assignor failed."""
    target = inputs.compute(assignor)
    if target is None:
        return None
    records = inputs.records(target, now_ms)
    return records, encode_batch(records, now_ms)
