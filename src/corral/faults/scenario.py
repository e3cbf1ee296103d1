"""A seeded scenario file: `corral serve --faults FILE`, faults added when the broker starts.

    seed = 42                      # the file's seed (drawn and logged when not given)

    [[fault]]                      # the same fields as the JSON API (model.py, docs/faults.md)
    api = "Produce"
    error = "NOT_LEADER_OR_FOLLOWER"
    probability = 0.3              # drawn from the fault's seed: derived from the file's

    [[fault]]
    api = "OffsetCommit"
    error = "COORDINATOR_LOAD_IN_PROGRESS"
    after_ms = 5000                # starts 5 s after the broker started...
    duration_ms = 10000            # ... and is done 10 s later
    seed = 7                       # its own seed, as given

Each fault's seed, unless it gives one, is derived from the file's seed and its position (1 for
the first [[fault]]): the same file gives the same faults with the same seeds, so the same
requests meet the same injected faults. The whole file is checked before the broker starts
(`load`, ScenarioError naming the fault and the field); `install` adds its faults to the registry
(ids 1, 2, ... in file order on a fresh broker), where they are listed, counted and logged like
faults the API adds. The file alone turns injection on: `corral.faults.enable` only gates the API.
"""

from __future__ import annotations

import hashlib
import logging
import random
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corral.faults.model import FaultError, parse
from corral.faults.registry import Faults

log = logging.getLogger("corral.faults")

MAX_SEED = 2**63 - 1
_TOP = {"seed", "fault"}


class ScenarioError(ValueError):
    """A scenario file that cannot be used: unreadable, not TOML, or a bad fault."""


@dataclass(frozen=True)
class Scenario:
    path: str
    seed: int
    # Whether the file gave the seed (else it was drawn: logged, so that the run can be replayed).
    seeded: bool
    # Each fault's JSON form, its seed filled in.
    faults: tuple[dict[str, Any], ...]


def fault_seed(seed: int, position: int) -> int:
    """The seed of the fault at `position` (1-based) of a file seeded `seed`: the first 63 bits of
    SHA-256 of "seed:position" (the same on every machine and Python)."""
    digest = hashlib.sha256(f"{seed}:{position}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def parse_scenario(text: str, path: str = "<scenario>") -> Scenario:
    """A Scenario from the file's text; raises ScenarioError naming what is wrong."""
    where = f"faults file {path}"
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{where}: not TOML: {e}") from None
    unknown = sorted(set(doc) - _TOP)
    if unknown:
        raise ScenarioError(
            f"{where}: unknown key(s) {', '.join(unknown)}: a scenario has a `seed` and "
            "[[fault]] tables"
        )
    seeded = "seed" in doc
    if seeded:
        seed = doc["seed"]
        if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED:
            raise ScenarioError(f"{where}: seed: {seed!r} is not an integer in [0, {MAX_SEED}]")
    else:
        seed = random.SystemRandom().randrange(MAX_SEED + 1)
    tables = doc.get("fault", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ScenarioError(f"{where}: `fault` is a list of tables: write each as [[fault]]")
    faults = []
    for position, table in enumerate(tables, 1):
        spec = dict(table)
        if spec.get("seed") is None:
            spec["seed"] = fault_seed(seed, position)
        try:
            parse(spec, position, 0.0)
        except FaultError as e:
            raise ScenarioError(f"{where}: [[fault]] number {position}: {e}") from None
        faults.append(spec)
    return Scenario(path, seed, seeded, tuple(faults))


def load(path: str | Path) -> Scenario:
    """The scenario in the file at `path`; raises ScenarioError."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ScenarioError(f"faults file {path}: cannot read it: {e}") from None
    return parse_scenario(text, str(path))


def install(scenario: Scenario, faults: Faults) -> list[int]:
    """Adds the scenario's faults (each `after_ms` counts from now); returns their ids."""
    log.info(
        "faults file %s: %d fault(s), seed %d%s",
        scenario.path,
        len(scenario.faults),
        scenario.seed,
        "" if scenario.seeded else f" (drawn: add `seed = {scenario.seed}` to replay this run)",
    )
    return [faults.add(spec).id for spec in scenario.faults]
