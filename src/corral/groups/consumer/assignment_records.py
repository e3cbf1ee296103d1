"""A consumer group's assignments as its records carry them and as memory holds them: partition
tuples <-> frozensets, KIP-1251 assignment epochs, and the records that rebuild a whole group."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING

from corral.groups.consumer.reconcile import NO_EPOCHS, Epochs, Reconciled
from corral.groups.storage import consumer_records as cr

if TYPE_CHECKING:
    from corral.groups.consumer.member_state import ConsumerMember

# Shared by every empty assignment: none of these dicts is ever changed in place.
EMPTY_ASSIGNMENT: dict[bytes, frozenset[int]] = {}


def as_record(partitions: Mapping[bytes, Collection[int]]) -> cr.Assignment:
    return {topic: tuple(sorted(ps)) for topic, ps in partitions.items() if ps}


def as_sets(partitions: cr.Assignment) -> dict[bytes, frozenset[int]]:
    if not partitions:
        return EMPTY_ASSIGNMENT
    return {topic: frozenset(ps) for topic, ps in partitions.items() if ps}


def epochs_record(current: Reconciled, partitions: cr.Assignment) -> cr.AssignmentEpochs:
    return {
        topic: tuple(current.assignment_epoch(topic, p) for p in ps)  # type: ignore[misc]
        for topic, ps in partitions.items()
    }


def epochs_of_record(record: cr.CurrentAssignment) -> Epochs:
    """The assignment epochs a current-assignment record says (Kafka's
    assignmentFromTopicPartitions): a topic without them, or with a list of another length than
    its partitions, has max(member epoch, 0) for each (a static member's -2 among them)."""
    default = max(record.epoch, 0)
    out: dict[bytes, dict[int, int]] = {}
    for partitions, epochs in (
        (record.assigned, record.assigned_epochs),
        (record.pending_revocation, record.pending_epochs),
    ):
        for topic, ps in partitions.items():
            given = epochs.get(topic)
            if given is None or len(given) != len(ps):
                given = (default,) * len(ps)
            out.setdefault(topic, {}).update(zip(ps, given))
    return out or NO_EPOCHS  # most members of a big group own nothing: one shared empty map


def group_records(
    gid: str,
    epochs: tuple[int, int, int, int],
    members: Iterable[ConsumerMember],
    regexes: Iterable[cr.RegexTopics],
    targets: Iterable[tuple[str, Mapping[bytes, Collection[int]]]],
) -> list[cr.ConsumerRecord]:
    """Every record that rebuilds a group: `epochs` (group epoch, metadata hash, assignment
    epoch and its time), its members, regex resolutions and targets."""
    group_epoch, metadata_hash, assignment_epoch, assignment_ms = epochs
    members = list(members)
    out: list[cr.ConsumerRecord] = [cr.GroupEpoch(gid, group_epoch, metadata_hash)]
    out.extend(m.metadata_record(gid) for m in members)
    out.extend(regexes)
    out.extend(cr.TargetMember(gid, member_id, as_record(t)) for member_id, t in targets)
    out.append(cr.TargetEpoch(gid, assignment_epoch, assignment_ms))
    out.extend(m.assignment_record(gid) for m in members)
    return out


def encoded(recs: list[cr.ConsumerRecord]) -> list[tuple[bytes, bytes]]:
    return [(cr.key_of(r), cr.value_of(r)) for r in recs]  # type: ignore[misc]
