"""checks.ShareLedger: what `corral load --group-type share` concludes from share consumers'
reports (records acquired, acknowledged, released; shipped by several workers, out of order
between them). Table-driven: histories that are fine, and histories that break an invariant."""

from __future__ import annotations

import pytest

from corral.load.checks import ShareLedger, Violations

T = "t"
LOCK_MS = 30_000


def produced(p: int, base: int, count: int) -> tuple:
    return ("produced", (T, p), base, count)


def acq(member: str, p: int, first: int, last: int, at: float, count: int = 1) -> tuple:
    """Acquired by a ShareFetch sent 0.1 s before its answer at `at`."""
    return ("acquired", member, (T, p), first, last, count, at - 0.1, at, LOCK_MS)


def ack(member: str, p: int, first: int, last: int, at: float) -> tuple:
    return ("acknowledged", member, (T, p), first, last, at)


def late_ack(member: str, p: int, first: int, last: int, at: float) -> tuple:
    return ("acknowledged", member, (T, p), first, last, at, True)


def unconfirmed(member: str, p: int, first: int, last: int, at: float) -> tuple:
    return ("unconfirmed", member, (T, p), first, last, at)


def released(member: str, ps: list[int], at: float) -> tuple:
    return ("released", member, [(T, p) for p in ps], at)


def replay(shipments: list[tuple[int, list[tuple], float]], workers: int = 2):
    """Feeds (worker, events, shipped at) in order, then each worker's last shipment."""
    violations = Violations()
    ledger = ShareLedger({T: 2}, violations, workers)
    for worker, events, at in shipments:
        ledger.shipped_by(worker, events, at)
    for worker in range(workers):
        ledger.shipped_by(worker, [], float("inf"))
    outcome = ledger.finish()
    return ledger, violations, outcome


GOOD = {
    "two members split a partition, each acknowledges its own": (
        [
            (0, [produced(0, 0, 10), acq("a", 0, 0, 4, 1.0), ack("a", 0, 0, 4, 1.5)], 2.0),
            (1, [acq("b", 0, 5, 9, 1.2), ack("b", 0, 5, 9, 1.6)], 2.0),
        ],
        {"redelivered": 0},
    ),
    "a released session's records go to another member": (
        [
            (0, [produced(0, 0, 10), acq("a", 0, 0, 9, 1.0), released("a", [0], 2.0)], 2.1),
            (1, [acq("b", 0, 0, 9, 3.0, count=2), ack("b", 0, 0, 9, 3.5)], 4.0),
        ],
        {"redelivered": 10},
    ),
    "the release is shipped after the acquisition it explains (another worker)": (
        [
            (0, [produced(0, 0, 10), acq("a", 0, 0, 9, 1.0)], 1.5),
            (1, [acq("b", 0, 0, 9, 3.0, count=2), ack("b", 0, 0, 9, 3.5)], 4.0),
            (0, [released("a", [0], 2.0)], 4.5),
        ],
        {"redelivered": 10},
    ),
    "an expired lock frees the record": (
        [
            (0, [produced(0, 0, 10), acq("a", 0, 0, 9, 1.0)], 2.0),
            (1, [acq("b", 0, 0, 9, 1.0 + LOCK_MS / 1000, count=2), ack("b", 0, 0, 9, 32.0)], 33),
        ],
        {"redelivered": 10},
    ),
    "the same member takes its records again in a new session": (
        [
            (
                0,
                [
                    produced(0, 0, 10),
                    acq("a", 0, 0, 9, 1.0),
                    released("a", [0], 2.0),
                    acq("a", 0, 0, 9, 3.0, count=2),
                    ack("a", 0, 0, 9, 3.5),
                ],
                4.0,
            ),
        ],
        {"redelivered": 10},
    ),
    "an acknowledgement that got no answer is neither lost nor acknowledged": (
        [
            (
                0,
                [
                    produced(0, 0, 10),
                    acq("a", 0, 0, 9, 1.0),
                    unconfirmed("a", 0, 0, 9, 1.5),
                    released("a", [0], 1.6),
                ],
                2.0,
            ),
        ],
        {"unconfirmed": 10, "acknowledged": 0},
    ),
    "acknowledgements of several fetches in one range": (
        [
            (
                0,
                [
                    produced(1, 0, 6),
                    acq("a", 1, 0, 2, 1.0),
                    acq("a", 1, 3, 5, 1.1),
                    ack("a", 1, 0, 5, 1.2),
                ],
                2.0,
            ),
        ],
        {"acknowledged": 6},
    ),
    "a late acknowledgement of a record archived meanwhile (Kafka answers NONE)": (
        [(0, [produced(0, 0, 2), acq("a", 0, 0, 1, 1.0, count=5), late_ack("a", 0, 0, 1, 40)], 41)],
        {"late": 2, "acknowledged": 0},
    ),
    "a late acknowledgement of records another member took and acknowledged": (
        [
            (0, [produced(0, 0, 2), acq("a", 0, 0, 1, 1.0)], 1.5),
            (1, [acq("b", 0, 0, 1, 32.0, count=2), ack("b", 0, 0, 1, 33.0)], 33.5),
            (0, [late_ack("a", 0, 0, 1, 34.0)], 35),
        ],
        {"late": 0, "acknowledged": 2, "redelivered": 2},
    ),
}

BAD = {
    "a record held by two members at once": (
        [
            (0, [produced(0, 0, 10), acq("a", 0, 0, 9, 1.0), ack("a", 0, 0, 4, 2.0)], 2.5),
            (1, [acq("b", 0, 5, 9, 3.0), ack("b", 0, 5, 9, 3.5)], 4.0),
        ],
        ["t-0 offsets 5-9: acquired by b while a held them"],
    ),
    "the same member acquires a record it holds": (
        [
            (
                0,
                [
                    produced(0, 0, 2),
                    acq("a", 0, 0, 1, 1.0),
                    acq("a", 0, 1, 1, 2.0),
                    ack("a", 0, 0, 1, 2.5),
                ],
                3.0,
            )
        ],
        ["t-0 offsets 1-1: acquired again by a while a held them"],
    ),
    "a release before the acquisition explains nothing": (
        [
            (0, [produced(0, 0, 1), released("a", [0], 0.5), acq("a", 0, 0, 0, 1.0)], 1.5),
            (1, [acq("b", 0, 0, 0, 2.0), ack("b", 0, 0, 0, 2.5)], 3.0),
        ],
        ["acquired by b while a held them"],
    ),
    "a release of another partition explains nothing": (
        [
            (0, [produced(0, 0, 1), acq("a", 0, 0, 0, 1.0), released("a", [1], 1.5)], 1.6),
            (1, [acq("b", 0, 0, 0, 2.0), ack("b", 0, 0, 0, 2.5)], 3.0),
        ],
        ["acquired by b while a held them"],
    ),
    "an acknowledged record delivered again": (
        [
            (0, [produced(0, 0, 1), acq("a", 0, 0, 0, 1.0), ack("a", 0, 0, 0, 1.5)], 1.6),
            (1, [acq("b", 0, 0, 0, 2.0), ack("b", 0, 0, 0, 2.5)], 3.0),
        ],
        ["offset 0: acknowledged by a, then delivered again to b"],
    ),
    "a member acknowledges what was delivered to another": (
        [
            (0, [produced(0, 0, 1), acq("a", 0, 0, 0, 1.0)], 1.1),
            (1, [ack("b", 0, 0, 0, 1.5)], 1.6),
        ],
        ["offset 0: acknowledged by b, delivered to a"],
    ),
    "a member acknowledges a record never delivered": (
        [(0, [produced(0, 0, 1), ack("a", 0, 0, 0, 1.5)], 1.6)],
        ["offset 0: acknowledged by a, never delivered"],
    ),
    "a record acknowledged twice": (
        [
            (
                0,
                [
                    produced(0, 0, 1),
                    acq("a", 0, 0, 0, 1.0),
                    ack("a", 0, 0, 0, 1.5),
                    ack("a", 0, 0, 0, 1.7),
                ],
                2.0,
            )
        ],
        ["offset 0: acknowledged by a, already acknowledged"],
    ),
    "records lost: never delivered, or delivered and never acknowledged": (
        [
            (
                0,
                [produced(0, 0, 10), acq("a", 0, 0, 6, 1.0), ack("a", 0, 0, 4, 1.5)],
                2.0,
            )
        ],
        [
            "t-0: 3 produced records never delivered (offsets 7, 8, 9)",
            "t-0: 2 produced records delivered, never acknowledged (offsets 5, 6)",
        ],
    ),
}


@pytest.mark.parametrize("name", GOOD)
def test_good_history(name):
    shipments, expected = GOOD[name]
    ledger, violations, outcome = replay(shipments)
    assert violations.count == 0, violations.examples
    for key, value in expected.items():
        got = ledger.redelivered if key == "redelivered" else outcome[key]
        assert got == value, key
    if "unconfirmed" not in expected and "late" not in expected:
        assert outcome["acknowledged"] == ledger.produced_total
    assert ledger.complete()


@pytest.mark.parametrize("name", BAD)
def test_bad_history(name):
    shipments, expected = BAD[name]
    _, violations, _ = replay(shipments)
    assert violations.count == len(expected), violations.examples
    for text, example in zip(expected, violations.examples):
        assert text in example


def test_a_conflict_waits_for_every_worker_to_ship_past_it():
    violations = Violations()
    ledger = ShareLedger({T: 1}, violations, workers=2)
    ledger.shipped_by(0, [produced(0, 0, 1), acq("a", 0, 0, 0, 1.0)], 1.1)
    ledger.shipped_by(1, [acq("b", 0, 0, 0, 3.0, count=2)], 3.5)
    assert violations.count == 0 and len(ledger.pending) == 1  # worker 0 may still say more
    ledger.shipped_by(0, [released("a", [0], 2.0)], 4.0)
    assert violations.count == 0 and ledger.pending == []


def test_lost_records_are_counted_not_judged_when_the_run_was_cut_short():
    violations = Violations()
    ledger = ShareLedger({T: 1}, violations)
    ledger.shipped_by(0, [produced(0, 0, 4), acq("a", 0, 0, 1, 1.0)], 2.0)
    outcome = ledger.finish(lost_is_violation=False)
    assert violations.count == 0
    assert outcome == {
        "acknowledged": 0,
        "late": 0,
        "unconfirmed": 0,
        "never_delivered": 2,
        "unacknowledged": 2,
    }


def test_rates():
    violations = Violations()
    ledger = ShareLedger({T: 1}, violations)
    events = [produced(0, 0, 100), acq("a", 0, 0, 99, 1.0)]
    events += [ack("a", 0, i * 10, i * 10 + 9, 1.0 + (i + 1) * 0.5) for i in range(10)]
    ledger.shipped_by(0, events, 10.0)
    assert ledger.rate() == pytest.approx(100 / 5.0)
    # From 10 % (at 1.5 s) to 90 % (at 5.5 s): the 80 records acknowledged after the first 10.
    assert ledger.rate(0.1, 0.9) == pytest.approx(80 / 4.0)
