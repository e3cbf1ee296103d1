"""A shard's `replay` is one lookup by record type in a table the group types and the offsets
fill (group.py's Registration, shard.py's `registrations`): every record of groups/storage has
exactly one replay function, which takes that record. The table below plays each case where a
record meets a group of another type, or none, live and at load (classic/replay.py,
consumer/replay.py's ConsumerReplay, offsets.py)."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass

import pytest
from harness import FakeLog, Topics, make_coordinator

from corral.groups.classic import ClassicGroup, ClassicState
from corral.groups.consumer import ConsumerGroup
from corral.groups.share import ShareGroup
from corral.groups.storage import consumer_records as cr
from corral.groups.storage import records, share_records, txn_records
from corral.groups.storage.records import (
    GroupMetadata,
    GroupTombstone,
    GroupValue,
    MemberValue,
    OffsetCommits,
    OffsetTombstones,
)

RECORD_TYPES = set(typing.get_args(records.Record))


def make_shard():
    coordinator = make_coordinator(Topics(), log=FakeLog())
    return coordinator.shard_of("g")


def declared(shard) -> list[type]:
    """Every record type some part of the shard declares it replays, as often as declared."""
    parts = [shard.offsets, shard.offsets.pending, *(r.replays for r in shard.registrations)]
    return [record_type for part in parts for record_type in part.record_types]


# ============================================================================= registration ===


def test_every_record_of_the_storage_is_in_the_record_union():
    """What `Record` names is what the storage modules define (a class with a `group_id`)."""
    defined = {
        cls
        for module in (records, cr, share_records, txn_records)
        for cls in vars(module).values()
        if dataclasses.is_dataclass(cls)
        and isinstance(cls, type)
        and cls.__module__ == module.__name__
        and "group_id" in {f.name for f in dataclasses.fields(cls)}
    }
    assert defined == RECORD_TYPES


def test_every_record_type_has_exactly_one_replay_function():
    shard = make_shard()
    names = sorted(t.__name__ for t in declared(shard))
    assert names == sorted(t.__name__ for t in RECORD_TYPES)
    assert set(shard.replayers) == RECORD_TYPES


def test_each_replay_function_takes_its_record_and_whether_the_shard_loads():
    for record_type, apply in make_shard().replayers.items():
        hints = typing.get_type_hints(apply)
        accepted = hints["record"]
        assert record_type is accepted or record_type in typing.get_args(accepted), apply
        assert hints["loading"] is bool


def test_each_group_type_registers_its_groups_class_once():
    shard = make_shard()
    assert set(shard.types) == {ClassicGroup, ConsumerGroup, ShareGroup}
    assert [r.group_class for r in shard.registrations] == [ClassicGroup, ConsumerGroup, ShareGroup]


def test_a_record_of_a_type_nobody_registered_changes_nothing():
    @dataclass
    class Unknown:
        group_id: str

    shard = make_shard()
    shard.replay(Unknown("g"))
    shard.load_records([Unknown("g")])
    assert shard.groups == {}


# ============================================================================== cross-type ===


def group_value(members: int = 1) -> bytes:
    return records.group_value(
        GroupValue(
            "consumer",
            3,
            "range",
            "m0" if members else None,
            1,
            [
                MemberValue(f"m{i}", None, "c", "h", 30000, 10000, b"s", b"a")
                for i in range(members)
            ],
        )
    )


def add_classic(shard, members: int) -> None:
    if members:
        shard.rebalance.from_record("g", group_value(members))
    else:
        shard.rebalance.new_group("g")


def add_consumer(shard) -> None:
    shard.replay(cr.GroupEpoch("g", 2))
    shard.replay(cr.MemberMetadata("g", "m", None, None, "c", "h", ("t",), None, 30000, None))


START = {
    "none": lambda shard: None,
    "empty classic": lambda shard: add_classic(shard, 0),
    "classic": lambda shard: add_classic(shard, 1),
    "consumer": add_consumer,
}

LIVE, LOADING = False, True
COMMIT = OffsetCommits("g", [("t", [(1, 7, -1, "")])], 1, -1)
OFFSET_TOMBSTONE = OffsetTombstones("g", [("t", 0)])
METADATA = GroupMetadata("g", group_value(2))
TOMBSTONE = GroupTombstone("g")
EPOCH = cr.GroupEpoch("g", 5)
EPOCH_TOMBSTONE = cr.ConsumerTombstone(cr.GROUP_EPOCH, "g")
MEMBER_TOMBSTONE = cr.ConsumerTombstone(cr.MEMBER_METADATA, "g", "m")


def empty(shard) -> bool:
    return shard.groups["g"].is_empty()


def stored_only(shard) -> bool:
    """The live classic group took the record as its stored value, nothing else."""
    group = shard.groups["g"]
    return group.stored == METADATA.value and len(group.members) == 1


def sessions_armed(shard) -> bool:
    group = shard.groups["g"]
    return all(m.timer_key in shard.timers.wheel for m in group.members.values())


def case(start, record, loading, then, same, forgotten=(), offsets_kept=True, check=None, *, id):
    """`start`: the group before (START); after: the group's type (None: no group), whether it
    is the object it was, the types of the groups forgotten, whether the offset committed
    before is still there, and `check` of the shard."""
    return pytest.param(
        start, record, loading, then, same, list(forgotten), offsets_kept, check, id=id
    )


CASES = [
    # offsets: a commit of an unknown group makes an empty ("simple") classic group
    case("none", COMMIT, LIVE, "classic", False, check=empty, id="commit, no group"),
    case("consumer", COMMIT, LIVE, "consumer", True, id="commit, consumer group"),
    case("none", OFFSET_TOMBSTONE, LIVE, None, True, offsets_kept=False, id="offset tombstone"),
    # GroupMetadata
    case("classic", METADATA, LIVE, "classic", True, check=stored_only, id="metadata, live"),
    case(
        "classic",
        METADATA,
        LOADING,
        "classic",
        False,
        ["classic"],
        id="metadata, loaded over classic",
    ),
    case("consumer", METADATA, LIVE, "consumer", True, id="metadata, live, upgraded meanwhile"),
    case(
        "consumer",
        METADATA,
        LOADING,
        "classic",
        False,
        ["consumer"],
        id="metadata, loaded over consumer",
    ),
    case("none", METADATA, LIVE, "classic", False, check=sessions_armed, id="metadata, live, new"),
    case(
        "none",
        METADATA,
        LOADING,
        "classic",
        False,
        check=lambda s: not sessions_armed(s),
        id="metadata, loaded, new",
    ),
    # GroupTombstone
    case(
        "classic", TOMBSTONE, LIVE, None, False, ["classic"], False, id="group tombstone, classic"
    ),
    case(
        "empty classic",
        TOMBSTONE,
        LOADING,
        None,
        False,
        ["classic"],
        False,
        id="group tombstone, loaded",
    ),
    case("none", TOMBSTONE, LIVE, None, True, offsets_kept=False, id="group tombstone, no group"),
    case("consumer", TOMBSTONE, LIVE, "consumer", True, id="group tombstone after an upgrade"),
    case("consumer", TOMBSTONE, LOADING, "consumer", True, id="group tombstone, loaded, consumer"),
    # consumer records
    case(
        "empty classic",
        EPOCH,
        LIVE,
        "consumer",
        False,
        ["classic"],
        id="conversion of an empty classic group",
    ),
    case(
        "classic",
        EPOCH,
        LOADING,
        "consumer",
        False,
        ["classic"],
        id="consumer record loaded over classic",
    ),
    case("none", EPOCH, LIVE, "consumer", False, id="consumer record, no group"),
    case(
        "consumer",
        EPOCH_TOMBSTONE,
        LIVE,
        None,
        False,
        ["consumer"],
        id="group epoch tombstone, live",
    ),
    case(
        "consumer",
        EPOCH_TOMBSTONE,
        LOADING,
        "classic",
        False,
        ["consumer"],
        check=empty,
        id="group epoch tombstone, loaded: offsets stay with an empty classic group",
    ),
    case(
        "empty classic", EPOCH_TOMBSTONE, LIVE, "classic", True, id="group epoch tombstone, classic"
    ),
    case("none", MEMBER_TOMBSTONE, LOADING, None, True, id="member tombstone, no group"),
    case("empty classic", MEMBER_TOMBSTONE, LIVE, "classic", True, id="member tombstone, classic"),
]


@pytest.mark.parametrize(
    "start, record, loading, then, same, forgotten, offsets_kept, check", CASES
)
def test_records_meeting_groups_of_another_type(
    start, record, loading, then, same, forgotten, offsets_kept, check
):
    shard = make_shard()
    shard.offsets.map.commit("g", "t", [(0, 42, -1, "")], 1, -1)
    START[start](shard)
    before = shard.groups.get("g")
    seen: list[str] = []
    for runs in (shard.rebalance, shard.consumer):
        real = runs.forget
        runs.forget = lambda group, real=real: (seen.append(group.type), real(group))[1]
    if loading:
        shard.load_records([record])
    else:
        shard.replay(record)
    after = shard.groups.get("g")
    assert (after.type if after is not None else None) == then
    assert (after is before) == same
    assert seen == forgotten
    if isinstance(before, ClassicGroup) and "classic" in forgotten:
        assert before.state is ClassicState.DEAD
    if isinstance(before, ConsumerGroup) and "consumer" in forgotten:
        assert before.view is None
    assert (shard.offsets.map.count("g") > 0) == offsets_kept
    if check is not None:
        assert check(shard)


def test_a_live_group_epoch_counts_a_rebalance_and_a_loaded_one_does_not():
    shard = make_shard()
    shard.load_records([cr.GroupEpoch("g", 3)])
    assert shard.metrics.consumer_rebalances == 0
    shard.replay(cr.GroupEpoch("g", 4))
    assert shard.metrics.consumer_rebalances == 1


def test_a_loading_shard_holds_its_groups_from_the_network_thread_until_it_starts():
    """A shard loads while the broker runs (an unload and reload): the network thread could
    otherwise commit for a group whose older commits are still being replayed over its newer
    one. Each group is held before its first record replays and released when the shard
    starts (DurableLog: python_writing and python_writing_group in the commit path)."""
    shard = make_shard()
    events: list[tuple[str, str]] = []
    shard.writer.hold_group = lambda g: events.append(("hold", g))
    shard.writer.release_group = lambda g: events.append(("release", g))
    replay = shard.replay
    shard.replay = lambda record: (events.append(("replay", record.group_id)), replay(record))
    shard.load_records(
        [
            OffsetCommits("a", [("t", [(0, 1, -1, "")])], 1, -1),
            cr.GroupEpoch("b", 2),
            OffsetCommits("a", [("t", [(0, 2, -1, "")])], 1, -1),
            cr.MemberMetadata("b", "m", None, None, "c", "h", ("t",), None, 30000, None),
        ]
    )
    assert events == [
        ("hold", "a"),
        ("replay", "a"),
        ("hold", "b"),
        ("replay", "b"),
        ("replay", "a"),
        ("replay", "b"),
    ]
    events.clear()
    shard.start()
    assert sorted(events) == [("release", "a"), ("release", "b")]
    events.clear()
    shard.start()
    assert events == [], "released once"
