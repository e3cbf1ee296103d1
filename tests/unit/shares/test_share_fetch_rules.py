"""The pure rules of share fetches (shares/manager.py, shares/acknowledgements.py): acquired runs cut
at batch boundaries every BatchSize records, the data batches of aborted transactions as a
read_committed reader finds them, and Kafka's checks of acknowledgement batches."""

from __future__ import annotations

import pytest

from corral.shares.acknowledgements import invalid_batches
from corral.shares.manager import CONTROL, TRANSACTIONAL, aborted_ranges, split_at_batches


def bounds(*ranges, producer=-1, attributes=0):
    return [(first, last, 0, producer, attributes) for first, last in ranges]


@pytest.mark.parametrize(
    "acquired, batches, size, expected",
    [
        ([(0, 9, 1)], [(0, 4), (5, 9)], 5, [(0, 4, 1), (5, 9, 1)]),
        ([(0, 9, 1)], [(0, 4), (5, 9)], 100, [(0, 9, 1)]),
        ([(0, 9, 1)], [(0, 2), (3, 5), (6, 9)], 4, [(0, 5, 1), (6, 9, 1)]),
        # Runs of different delivery counts stay apart.
        ([(0, 1, 2), (2, 9, 1)], [(0, 4), (5, 9)], 3, [(0, 1, 2), (2, 4, 1), (5, 9, 1)]),
    ],
)
def test_acquired_runs_are_cut_at_batch_boundaries(acquired, batches, size, expected):
    assert split_at_batches(acquired, bounds(*batches), size) == expected


def test_aborted_data_batches_end_at_their_producers_marker():
    data = [
        (0, 1, 0, -1, 0),  # plain
        (2, 4, 0, 7, TRANSACTIONAL),  # producer 7, aborted
        (5, 6, 0, 8, TRANSACTIONAL),  # producer 8, committed
        (7, 7, 0, 7, TRANSACTIONAL | CONTROL),  # 7's ABORT marker
        (8, 8, 0, 7, TRANSACTIONAL),  # 7's next transaction: not aborted
        (9, 9, 0, 8, TRANSACTIONAL | CONTROL),
    ]
    assert aborted_ranges(data, [(7, 2)]) == [(2, 4)]
    assert aborted_ranges(data, []) == []


@pytest.mark.parametrize(
    "batches, version, renew, invalid",
    [
        ([(0, 4, [1])], 1, False, False),
        ([(4, 0, [1])], 1, False, True),  # first > last
        ([(0, 4, [1]), (4, 6, [2])], 1, False, False),  # equal to the previous last: allowed
        ([(0, 4, [1]), (3, 6, [2])], 1, False, True),  # below it
        ([(0, 4, [])], 1, False, True),  # no types
        ([(0, 2, [1, 2])], 1, False, True),  # several types, not one per offset
        ([(0, 2, [1, 2, 3])], 1, False, False),
        ([(0, 0, [4])], 1, True, True),  # renew above v1's types
        ([(0, 0, [4])], 2, False, True),  # renew without IsRenewAck
        ([(0, 0, [4])], 2, True, False),
    ],
)
def test_kafkas_acknowledgement_batch_checks(batches, version, renew, invalid):
    body = [
        {"first_offset": f, "last_offset": last, "acknowledge_types": t} for f, last, t in batches
    ]
    assert invalid_batches(body, version, renew) is invalid
