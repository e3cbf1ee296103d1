"""The summariser of repeated warnings in process (src/corral/observability/summarised_warnings.py):
the first of a kind in full, then one summary per window, addresses beyond the named ones counted
together. (A thousand bad connections against a real corral: tests/wire/test_log_floods.py.)"""

from __future__ import annotations

import logging

import pytest

from corral.observability.summarised_warnings import SummarisedWarnings


@pytest.fixture
def records():
    handler = _Records()
    logger = logging.getLogger("test.summarised")
    logger.addHandler(handler)
    logger.propagate = False
    yield handler
    logger.removeHandler(handler)


class _Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_first_of_a_kind_in_full_then_one_summary_per_window(records):
    clock = _Clock()
    warn = SummarisedWarnings(logging.getLogger("test.summarised"), 10.0, clock)
    warn("bad", "closing %s", "a:1", address="/a")
    for i in range(500):
        clock.now += 0.01
        warn("bad", "closing %s", f"b:{i}", address="/b" if i % 5 else "/a")
    warn("slow", "slow %s", "c:1", address="/c")
    assert records.lines == ["closing a:1", "slow c:1"]
    clock.now = 110.5
    warn.flush()
    assert (
        records.lines[2]
        == "bad: 500 more from /b (400), /a (100) in the last 10s; the last: closing b:499"
    )
    assert len(records.lines) == 3  # "slow" counted nothing more: no summary
    clock.now = 111
    warn.flush()
    assert len(records.lines) == 3
    warn("bad", "closing %s", "again", address="/a")  # a new window: in full again
    assert records.lines[-1] == "closing again"


def test_addresses_beyond_the_named_ones_are_counted_together(records):
    clock = _Clock()
    warn = SummarisedWarnings(logging.getLogger("test.summarised"), 10.0, clock)
    warn("bad", "first")
    for i in range(100):
        warn("bad", "x", address=f"/10.0.0.{i}")
    warn("bad", "no address")
    clock.now += 10
    warn.flush()
    summary = records.lines[-1]
    assert summary.startswith("bad: 101 more from /10.0.0.0 (1), ")
    assert "96 from other addresses in the last 10s; the last: no address" in summary
