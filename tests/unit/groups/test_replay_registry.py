"""How a shard finds what replays a record (shard.py's `replayers`): the offsets part and each
registered group type declare their record types, and every record type corral writes has
exactly one replayer, so a new group type's records cannot go unreplayed or be taken twice."""

from __future__ import annotations

from collections import Counter
from typing import get_args

from harness.consumer import Topics, make_coordinator

from corral.groups.classic import ClassicGroup
from corral.groups.consumer import ConsumerGroup
from corral.groups.storage.records import Record


def test_every_record_type_has_exactly_one_replayer():
    shard = make_coordinator(Topics()).shard_of("g")
    written = set(get_args(Record))
    assert set(shard.replayers) == written
    declared = Counter(
        t for part in (shard.offsets, *shard.registrations) for t in _record_types(part)
    )
    assert set(declared) == written and set(declared.values()) == {1}


def test_each_group_type_registers_its_groups_class_once():
    shard = make_coordinator(Topics()).shard_of("g")
    assert set(shard.types) == {ClassicGroup, ConsumerGroup}
    assert [r.group_class for r in shard.registrations] == [ClassicGroup, ConsumerGroup]


def _record_types(part):
    return getattr(part, "replays", part).record_types
