"""The fault model and registry (corral/faults/model.py, registry.py, targets.py): what matches,
the limits (count, duration, probability with a seed), close_after per connection, the
descriptions refused, and what requests name, read from real decoded requests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from corral import _core
from corral.errors import ErrorCode
from corral.faults.model import FaultError
from corral.faults.registry import Faults
from corral.faults.targets import targets
from corral.network.apis import ApiKey, api_table


@dataclass
class Req:
    """The attributes of a `_core.Request` the registry reads."""

    api_key: int = ApiKey.OFFSET_COMMIT
    api_version: int = 8
    client_id: str | None = "app"
    listener: str = "PLAINTEXT"
    connection: int = 1
    client_host: str = "/127.0.0.1"
    body: dict[str, Any] = field(
        default_factory=lambda: {
            "group_id": "g",
            "member_id": "m-1",
            "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}],
        }
    )


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


ERROR = {"error": "COORDINATOR_LOAD_IN_PROGRESS"}

MATCHING = [
    # (fault's match fields, request changes, fires)
    ({}, {}, True),
    ({"api": "OffsetCommit"}, {}, True),
    ({"api": "OFFSET_COMMIT"}, {}, True),
    ({"api": 8}, {}, True),
    ({"api": "Heartbeat"}, {}, False),
    ({"versions": [2, 8]}, {}, True),
    ({"versions": "2-7"}, {}, False),
    ({"versions": 8}, {}, True),
    ({"group": "g"}, {}, True),
    ({"group": "other"}, {}, False),
    ({"topic": "t"}, {}, True),
    ({"topic": "u"}, {}, False),
    ({"topic": "t", "partition": 0}, {}, True),
    ({"topic": "t", "partition": 1}, {}, False),
    ({"partition": 0}, {}, True),
    ({"member": "m-1"}, {}, True),
    ({"member": "m-2"}, {}, False),
    ({"client_id": "app"}, {}, True),
    ({"client_id": "app"}, {"client_id": None}, False),
    ({"listener": "PLAINTEXT"}, {}, True),
    ({"listener": "SASL_PLAINTEXT"}, {}, False),
    ({"api": "Heartbeat", "group": "g"}, {"api_key": ApiKey.HEARTBEAT, "api_version": 4}, True),
    ({"group": "g"}, {"api_key": ApiKey.METADATA, "body": {"topics": None}}, False),
]


@pytest.mark.parametrize("match, changes, fires", MATCHING)
def test_matching(match, changes, fires):
    faults = Faults()
    faults.add({**match, **ERROR})
    fired = faults.fire(Req(**changes))
    assert (fired is not None) == fires
    listed = faults.listing()[0]
    assert listed["fired"] == int(fires)


def test_count_fires_the_next_n_matches_then_the_fault_is_done():
    faults = Faults()
    changes = []
    faults.on_change = lambda: changes.append(bool(faults.active))
    fault = faults.add({"api": "OffsetCommit", **ERROR, "count": 2})
    assert changes == [True] and faults.active
    assert faults.fire(Req(api_key=ApiKey.HEARTBEAT)) is None  # not a match: not counted
    assert faults.fire(Req()) is not None
    assert faults.fire(Req()) is not None
    assert faults.fire(Req()) is None
    assert not faults.active and changes == [True, False]
    (listed,) = faults.listing()
    assert (listed["fired"], listed["active"], listed["ended"]) == (2, False, "count")
    assert faults.get(fault.id) is fault


def test_duration_ends_the_fault():
    clock = Clock()
    faults = Faults(clock)
    faults.add({**ERROR, "duration_ms": 1500})
    assert faults.fire(Req()) is not None
    clock.now += 1.0
    assert faults.expire() == pytest.approx(101.5)
    assert faults.fire(Req()) is not None
    clock.now += 0.6
    assert faults.fire(Req()) is None  # over: ended on the way
    assert not faults.active and faults.listing()[0]["ended"] == "duration"
    assert faults.expire() is None


def fire_pattern(seed: int, probability: float = 0.3, n: int = 200) -> list[bool]:
    faults = Faults()
    faults.add({**ERROR, "probability": probability, "seed": seed})
    return [faults.fire(Req()) is not None for _ in range(n)]


def test_a_seed_gives_the_same_sequence():
    first = fire_pattern(42)
    assert first == fire_pattern(42)
    assert first != fire_pattern(43)
    assert 30 < sum(first) < 90  # about 0.3 of 200


def test_the_seed_is_drawn_and_listed_when_not_given():
    drawn = Faults()
    drawn.add({**ERROR, "probability": 0.5})
    seed = drawn.listing()[0]["seed"]
    replay = Faults()
    replay.add({**ERROR, "probability": 0.5, "seed": seed})
    assert [drawn.fire(Req()) is not None for _ in range(50)] == [
        replay.fire(Req()) is not None for _ in range(50)
    ]


def test_matched_counts_every_match_fired_or_not():
    faults = Faults()
    faults.add({**ERROR, "probability": 0.5, "seed": 1})
    fired = sum(faults.fire(Req()) is not None for _ in range(100))
    listed = faults.listing()[0]
    assert (listed["matched"], listed["fired"]) == (100, fired)


def test_random_delays_are_drawn_in_range_and_repeat_with_the_seed():
    def delays(seed: int) -> list[float]:
        faults = Faults()
        faults.add({"delay_ms": [100, 300], "seed": seed})
        return [faults.fire(Req()).delay_s for _ in range(20)]  # type: ignore[union-attr]

    drawn = delays(7)
    assert all(0.1 <= d <= 0.3 for d in drawn) and len(set(drawn)) > 1
    assert drawn == delays(7)
    faults = Faults()
    faults.add({"delay_ms": 250})
    assert faults.fire(Req()).delay_s == 0.25  # type: ignore[union-attr]


def test_close_after_counts_each_connection_on_its_own():
    faults = Faults()
    faults.add({"close_after": 3})
    a, b = Req(connection=1), Req(connection=2)
    assert [faults.fire(a) is not None for _ in range(2)] == [False, False]
    assert faults.fire(b) is None
    assert faults.fire(a) is not None  # a's third
    assert faults.fire(b) is None
    assert faults.fire(b) is not None  # b's third
    assert faults.fire(a) is None  # a counts again from its close
    listed = faults.listing()[0]
    assert (listed["matched"], listed["fired"]) == (7, 2)


def test_the_first_fault_added_decides():
    faults = Faults()
    first = faults.add({"group": "g", "error": "NOT_COORDINATOR"})
    faults.add(ERROR)
    fired = faults.fire(Req())
    assert fired is not None and fired.fault is first
    assert fired.fault.action.error == ErrorCode.NOT_COORDINATOR


def test_remove_clear_and_the_active_list():
    faults = Faults()
    ended = []
    faults.on_end = lambda fault: ended.append((fault.id, fault.ended))
    one = faults.add(ERROR)
    two = faults.add({"hold": True})
    assert faults.remove(one.id) and not faults.remove(one.id)
    assert [f["id"] for f in faults.listing()] == [two.id]
    assert faults.clear() == 1
    assert not faults.active and faults.listing() == []
    assert ended == [(one.id, "removed"), (two.id, "removed")]
    assert faults.add(ERROR).id == 3  # ids are not reused


REFUSED = [
    ({"api": "NoSuchApi", **ERROR}, "api"),
    ({"api": 18, **ERROR}, "ApiVersions"),
    ({}, "exactly one action"),
    ({"error": "NOT_COORDINATOR", "delay_ms": 5}, "exactly one action"),
    ({"error": "NONE"}, "not an error"),
    ({"error": "NO_SUCH_ERROR"}, "error"),
    ({"delay_ms": [300, 100]}, "above"),
    ({"delay_ms": -1}, "delay_ms"),
    ({"hold": "yes"}, "hold"),
    ({"close_after": 0}, "close_after"),
    ({**ERROR, "probability": 0}, "probability"),
    ({**ERROR, "probability": 1.5}, "probability"),
    ({**ERROR, "count": 0}, "count"),
    ({**ERROR, "group": 5}, "group"),
    ({**ERROR, "versions": [9, 2]}, "above"),
    ({**ERROR, "colour": "red"}, "unknown field"),
    ([1, 2], "JSON object"),
]


@pytest.mark.parametrize("spec, says", REFUSED)
def test_refused_descriptions(spec, says):
    with pytest.raises(FaultError, match=says):
        Faults().add(spec)


def test_zero_is_a_value_not_an_absent_field():
    # 0 == False in Python: a zero delay is still the one action given.
    assert Faults().add({"delay_ms": 0}).action.kind == "delay"
    with pytest.raises(FaultError, match="not an error"):
        Faults().add({"error": 0})


def test_the_cli_s_strings_are_read_as_numbers():
    faults = Faults()
    fault = faults.add(
        {
            "api": "8",
            "versions": "2-9",
            "partition": "0",
            "error": "14",
            "count": "2",
            "probability": "0.5",
            "seed": "3",
        }
    )
    assert fault.describe() == {
        "id": 1,
        "api": "OffsetCommit",
        "versions": [2, 9],
        "partition": 0,
        "error": "COORDINATOR_LOAD_IN_PROGRESS",
        "count": 2,
        "probability": 0.5,
        "seed": 3,
        "matched": 0,
        "fired": 0,
        "active": True,
        "fired_on": [],
    }


TABLE = _core.ApiTable(api_table().advertised())


def decoded(key: int, version: int, body: dict[str, Any]) -> _core.Request:
    connection = _core.Connection(TABLE, 1 << 20)
    connection.feed(_core.encode_request(key, version, 1, body, "app"))
    item = connection.next()
    assert isinstance(item, _core.Request)
    return item


TARGETS = [
    (
        ApiKey.OFFSET_COMMIT,  # a short path's request: its body is made from the Rust struct
        9,
        {
            "group_id": "g",
            "member_id": "m",
            "topics": [{"name": "t", "partitions": [{"partition_index": 3}]}],
        },
        ({"g"}, {"t": {3}}, {"m"}),
    ),
    (
        ApiKey.HEARTBEAT,
        4,
        {"group_id": "g", "member_id": "m", "generation_id": 1},
        ({"g"}, {}, {"m"}),
    ),
    (ApiKey.FIND_COORDINATOR, 5, {"coordinator_keys": ["g", "h"]}, ({"g", "h"}, {}, set())),
    (ApiKey.FIND_COORDINATOR, 5, {"key_type": 1, "coordinator_keys": ["tx"]}, (set(), {}, set())),
    (
        ApiKey.FETCH,
        12,
        {"topics": [{"topic": "t", "partitions": [{"partition": 1}, {"partition": 2}]}]},
        (set(), {"t": {1, 2}}, set()),
    ),
    (
        ApiKey.PRODUCE,
        9,
        {"acks": -1, "topic_data": [{"name": "t", "partition_data": [{"index": 0}]}]},
        (set(), {"t": {0}}, set()),
    ),
    (
        ApiKey.OFFSET_FETCH,
        9,
        {"groups": [{"group_id": "g", "member_id": "m", "topics": None}]},
        ({"g"}, {}, {"m"}),
    ),
    (
        ApiKey.LEAVE_GROUP,
        5,
        {"group_id": "g", "members": [{"member_id": "a"}, {"member_id": "b"}]},
        ({"g"}, {}, {"a", "b"}),
    ),
    (ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g", "h"]}, ({"g", "h"}, {}, set())),
    (ApiKey.METADATA, 12, {"topics": [{"name": "t"}]}, (set(), {"t": set()}, set())),
    (
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        0,
        {"group_id": "g", "member_id": "m", "subscribed_topic_names": ["t"]},
        ({"g"}, {"t": set()}, {"m"}),
    ),
]


@pytest.mark.parametrize(
    "key, version, body, expected", TARGETS, ids=[f"{c[0].name}-v{c[1]}" for c in TARGETS]
)
def test_what_real_requests_name(key, version, body, expected):
    found = targets(key, decoded(key, version, body).body)
    assert (found.groups, found.topics, found.members) == expected
