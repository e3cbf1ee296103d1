"""Scenario files (corral/faults/scenario.py) and what they rely on in the registry: the files
refused (naming the fault and the field), each fault's seed derived from the file's and its
position, `after_ms` keeping a fault pending until its start, and `fired_on` repeating with the
seed."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from corral.faults.registry import Faults
from corral.faults.scenario import ScenarioError, fault_seed, install, load, parse_scenario


@dataclass
class Req:
    """The attributes of a `_core.Request` the registry reads."""

    api_key: int = 8
    api_version: int = 8
    client_id: str | None = "app"
    listener: str = "PLAINTEXT"
    connection: int = 1
    client_host: str = "/127.0.0.1"
    body: dict[str, Any] = field(default_factory=dict)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


GOOD = """
seed = 42

[[fault]]
api = "Produce"
error = "NOT_LEADER_OR_FOLLOWER"
probability = 0.3

[[fault]]
api = "OffsetCommit"
versions = [2, 9]
error = "COORDINATOR_LOAD_IN_PROGRESS"
after_ms = 5000
duration_ms = 10000
seed = 7
"""

REFUSED = [
    # (file text, what the error says)
    (
        "seed = 1\n[[fault]]\napi = 'Produce'\neror = 'NOT_LEADER_OR_FOLLOWER'\n",
        "[[fault]] number 1: ",
    ),
    (
        "seed = 1\n[[fault]]\napi = 'Produce'\neror = 'NOT_LEADER_OR_FOLLOWER'\n",
        "unknown field(s): eror",
    ),
    (
        "seed = 1\n[[fault]]\nerror = 'NOT_COORDINATOR'\n[[fault]]\nerror = 'NOPE'\n",
        "[[fault]] number 2: error: 'NOPE' is not a Kafka error code",
    ),
    (
        "[[fault]]\nerror = 'NOT_COORDINATOR'\nprobability = 1.5\n",
        "[[fault]] number 1: probability: 1.5",
    ),
    (
        "[[fault]]\napi = 'NoSuchApi'\nerror = 'NOT_COORDINATOR'\n",
        "[[fault]] number 1: api: 'NoSuchApi'",
    ),
    (
        "[[fault]]\nerror = 'NOT_COORDINATOR'\nafter_ms = -1\n",
        "[[fault]] number 1: after_ms: -1",
    ),
    ("[[fault]]\nerror = 'NOT_COORDINATOR'\nafter_ms = 'soon'\n", "after_ms: 'soon'"),
    ("[[fault]]\napi = 'Produce'\n", "[[fault]] number 1: give exactly one action"),
    ("[[fault]]\nerror = 'NOT_COORDINATOR'\nhold = true\n", "give exactly one action"),
    ("[[fault]]\nerror = 'NOT_COORDINATOR'\ngroup = 3\n", "group: 3 is not a string"),
    ("[[fault]]\nerror = 'NOT_COORDINATOR'\nseed = -3\n", "[[fault]] number 1: seed: -3"),
    ("seed = 'x'\n", "seed: 'x' is not an integer"),
    ("seed = true\n", "seed: True is not an integer"),
    ("seed = 1\nfaults = []\n", "unknown key(s) faults"),
    ("[fault]\nerror = 'NOT_COORDINATOR'\n", "write each as [[fault]]"),
    ("fault = [1, 2]\n", "write each as [[fault]]"),
    ("seed = \n", "not TOML"),
]


@pytest.mark.parametrize("text, says", REFUSED)
def test_refused_files_name_the_fault_and_the_field(text: str, says: str) -> None:
    with pytest.raises(ScenarioError) as e:
        parse_scenario(text, "chaos.toml")
    assert str(e.value).startswith("faults file chaos.toml: ")
    assert says in str(e.value)


def test_an_unreadable_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="cannot read it"):
        load(tmp_path / "missing.toml")


def test_each_fault_s_seed_comes_from_the_file_s_and_its_position(tmp_path: Path) -> None:
    path = tmp_path / "chaos.toml"
    path.write_text(GOOD)
    scenario = load(path)
    assert (scenario.seed, scenario.seeded) == (42, True)
    first, second = scenario.faults
    assert first["seed"] == fault_seed(42, 1)
    assert second["seed"] == 7  # given: kept
    assert load(path) == scenario
    # Different positions and file seeds give different seeds, all usable by the model.
    seeds = {fault_seed(s, p) for s in range(20) for p in range(1, 20)}
    assert len(seeds) == 400 - 20 and all(0 <= s < 2**63 for s in seeds)


def test_no_seed_draws_one() -> None:
    one, two = (
        parse_scenario("[[fault]]\nerror = 'NOT_COORDINATOR'\n"),
        parse_scenario("[[fault]]\nerror = 'NOT_COORDINATOR'\n"),
    )
    assert not one.seeded and one.seed != two.seed
    assert one.faults[0]["seed"] == fault_seed(one.seed, 1)


def test_an_empty_file_is_a_scenario_of_no_faults() -> None:
    assert parse_scenario("seed = 3\n").faults == ()
    assert parse_scenario("").faults == ()


def test_install_adds_in_file_order_and_after_ms_waits() -> None:
    clock = Clock()
    faults = Faults(clock)
    changes = []
    faults.on_change = lambda: changes.append(len(faults.active))
    ids = install(parse_scenario(GOOD), faults)
    assert ids == [1, 2]
    listed = {f["id"]: f for f in faults.listing()}
    assert listed[1]["active"] and "pending" not in listed[1]
    assert listed[2]["pending"] is True and listed[2]["active"] is False
    assert listed[2]["after_ms"] == 5000 and listed[2]["seed"] == 7
    commit = Req()
    assert faults.fire(commit) is None  # pending: matches nothing
    assert faults.get(2) is not None and faults.get(2).matched == 0  # type: ignore[union-attr]
    # The run loop sleeps until the start.
    assert faults.expire() == pytest.approx(105.0)
    clock.now = 105.0
    assert faults.expire() == pytest.approx(115.0)  # started; ends 10 s later
    assert [f.id for f in faults.active] == [1, 2]
    assert changes[-1] == 2
    fired = faults.fire(commit)
    assert fired is not None and fired.fault.id == 2
    clock.now = 115.0
    faults.expire()
    assert faults.get(2).ended == "duration"  # type: ignore[union-attr]


def test_a_pending_fault_can_be_removed_or_cleared() -> None:
    faults = Faults(Clock())
    spec = {"error": "NOT_COORDINATOR", "after_ms": 1000}
    first, second = faults.add(spec), faults.add(spec)
    assert faults.remove(first.id)
    assert first.ended == "removed" and not first.pending
    assert [f["id"] for f in faults.listing()] == [2]
    assert faults.clear() == 1
    assert faults.listing() == [] and not faults.pending and second.ended == "removed"


def fired_sequence(seed: int) -> list[Any]:
    faults = Faults(Clock())
    install(
        parse_scenario(
            f"seed = {seed}\n"
            "[[fault]]\napi = 'Produce'\nerror = 'NOT_LEADER_OR_FOLLOWER'\nprobability = 0.3\n"
            "[[fault]]\napi = 'OffsetCommit'\nerror = 'NOT_COORDINATOR'\nprobability = 0.3\n"
        ),
        faults,
    )
    seen = []
    for n in range(200):
        request = Req(api_key=0 if n % 3 else 8, api_version=9, body={})
        fired = faults.fire(request)
        seen.append(fired.fault.id if fired else None)
    return [seen, [f["fired_on"] for f in faults.listing()]]


def test_the_same_file_fires_the_same_sequence() -> None:
    once, again = fired_sequence(11), fired_sequence(11)
    assert once == again
    seen, fired_on = once
    assert {1, 2, None} == set(seen)
    # fired_on: the ordinals, among the fault's matches, that it fired on.
    assert len(fired_on[0]) == seen.count(1) and len(fired_on[1]) == seen.count(2)
    produces = [fault for n, fault in enumerate(seen) if n % 3]
    assert fired_on[0] == [i + 1 for i, fault in enumerate(produces) if fault == 1]
    assert fired_sequence(12) != once
