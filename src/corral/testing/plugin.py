"""The pytest plugin of corral (registered by the wheel: `[project.entry-points.pytest11]`;
`-p no:corral` turns it off). Fixtures (docs/testing.md):

- `corral`: a fresh broker for the test (default settings, faults API on), gone after it;
- `corral_session`: one broker for the whole session (faults added by a test stay: clear them);
- `corral_factory`: `corral_factory(settings, faults_file=..., ...)` starts brokers with
  settings of the test's own (EmbeddedCorral's arguments), each gone after the test.

Each is an `EmbeddedCorral` (corral/testing/broker.py): `.bootstrap`, `.faults`, `.stop()`,
`.kill()`, `.restart()`, `.log()`. A failed test's report shows the end of its brokers' logs.

Loaded in every pytest run where corral is installed, so this module imports only pytest and
the standard library; the broker's code loads when a fixture is first used.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from corral.testing.broker import EmbeddedCorral

LOG_LINES_SHOWN = 100


class Factory:
    """`corral_factory`: starts brokers, each in a directory of the test's tmp_path_factory."""

    def __init__(self, base: Callable[[], Path]):
        self._base = base
        self.started: list[EmbeddedCorral] = []

    def __call__(self, settings: dict[str, object] | None = None, **options: Any) -> EmbeddedCorral:
        from corral.testing.broker import EmbeddedCorral

        broker = EmbeddedCorral(self._base() / "data", settings, **options)
        self.started.append(broker)
        return broker.start()

    def close(self) -> None:
        for broker in self.started:
            broker.close()


@pytest.fixture
def corral_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Factory]:
    """Starts brokers with the test's settings: `corral_factory({"num.partitions": 3},
    faults_file=path)`; each is stopped after the test."""
    factory = Factory(lambda: tmp_path_factory.mktemp("corral"))
    yield factory
    factory.close()


@pytest.fixture
def corral(corral_factory: Factory) -> EmbeddedCorral:
    """A fresh broker (default settings, the faults API on), stopped after the test."""
    return corral_factory()


@pytest.fixture(scope="session")
def corral_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCorral]:
    """One broker for the whole session: faster; what a test leaves (topics, groups, faults)
    the next one sees."""
    factory = Factory(lambda: tmp_path_factory.mktemp("corral-session"))
    yield factory()
    factory.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed or "corral.testing.broker" not in sys.modules:
        return
    from corral.testing.broker import EmbeddedCorral

    brokers: list[EmbeddedCorral] = []
    for value in getattr(item, "funcargs", {}).values():
        if isinstance(value, EmbeddedCorral):
            brokers.append(value)
        elif isinstance(value, Factory):
            brokers.extend(value.started)
    for broker in dict.fromkeys(brokers):
        tail = "".join(broker.log().splitlines(keepends=True)[-LOG_LINES_SHOWN:])
        report.sections.append((f"corral log {broker.log_path} (last lines)", tail))
