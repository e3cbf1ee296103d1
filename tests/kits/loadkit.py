"""Running `corral load` scenarios in the test's process against a broker (`run_scenario`)."""

from __future__ import annotations

import sys
from pathlib import Path

from corral.load.cli import parse
from corral.load.runner import run
from corral.load.scenarios import SCENARIOS

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benches"))


def run_scenario(bootstrap: str, scenario: str, *args: str) -> dict:
    params = parse(["--bootstrap", bootstrap, "--scenario", scenario, "--quiet", *args])
    return run(SCENARIOS[scenario], params)
