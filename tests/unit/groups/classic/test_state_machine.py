"""The classic group state machine in process (no sockets), case by case.

Each case is a list of steps played by named members ("a", "b", ...) against one group of a
GroupCoordinator (tests/kits/harness/): JoinGroup as clients send it (KIP-394 two-step), the
leader's SyncGroup with a real range assignment of "topic" (6 partitions), Heartbeat, LeaveGroup,
OffsetCommit validation, and time moved by hand (the timers' clock is the harness's). After every
step, and every tick of time, the driver checks the group's invariants; in a Stable group: every
member holds what this generation's leader sent it, and each partition of the subscribed topics is
assigned exactly once.

Defaults: group.initial.rebalance.delay.ms 3000, session bounds 1000..60000 ms; members join with
a 10 s session and a 20 s rebalance timeout unless a case says otherwise.
"""

from __future__ import annotations

import pytest
import trio
from harness import (
    TABLES,
    ClassicDriver,
    FakeClock,
    InvariantError,
    S,
    patched_clock,
    run_case,
    stable,
)


def cases(table):
    return [pytest.param(*row, id=name) for name, *row in table]


# ==================================================================================== membership ===


MAX_SIZE = [
    (
        "third_member_refused_by_stable_group",
        stable("a", "b")
        + [
            S.join("c", expect="GROUP_MAX_SIZE_REACHED"),
            S.expect("Stable", generation=1, members=["a", "b"], pending=0),
        ],
    ),
    (
        "third_member_refused_during_initial_rebalance",
        [
            S.join("a", expect="parked"),
            S.join("b", expect="parked"),
            S.join("c", expect="GROUP_MAX_SIZE_REACHED"),
            S.expect("PreparingRebalance", members=["a", "b"]),
            S.stabilize("a", "b"),
        ],
    ),
    (
        "pending_members_count_only_once_they_join",
        [
            S.join("a", first_only=True, expect="MEMBER_ID_REQUIRED"),
            S.join("b", first_only=True, expect="MEMBER_ID_REQUIRED"),
            S.join("c", first_only=True, expect="MEMBER_ID_REQUIRED"),
            S.expect("Empty", pending=3),
            S.join("a", expect="parked"),
            S.join("b", expect="parked"),
            S.join("c", expect="GROUP_MAX_SIZE_REACHED"),
            S.expect("PreparingRebalance", members=["a", "b"], pending=0),
            S.stabilize("a", "b"),
        ],
    ),
]


@pytest.mark.parametrize("steps", cases(MAX_SIZE))
def test_group_max_size(steps):
    run_case(steps, {"group.max.size": 2})


# ===================================================================================== rebalance ===


# corral.group.max.rebalance.timeout.ms: members asking for an hour wait at most 5 s.
BOUND = [
    (
        "follower_not_rejoining_removed_at_the_bound",
        stable("a", "b", session=30000, rebalance=3_600_000)
        + [
            S.join("c", session=30000, rebalance=3_600_000),
            S.join("a", session=30000, rebalance=3_600_000),
            S.advance(4990),
            S.expect("PreparingRebalance"),
            S.advance(10),
            S.expect("CompletingRebalance", generation=2, members=["a", "c"], leader="a"),
            S.sync_all(),
            S.heartbeat("b", "UNKNOWN_MEMBER_ID"),
        ],
    ),
    (
        "member_that_never_syncs_removed_at_the_bound",
        [
            S.join("a", rebalance=3_600_000),
            S.join("b", rebalance=3_600_000),
            S.until("CompletingRebalance"),
            S.sync("a", expect="NONE"),
            S.expect("Stable", generation=1),
            S.keepalive(["a", "b"], 4000),
            S.advance(990),
            S.expect("Stable"),
            S.advance(10),
            S.expect("PreparingRebalance", members=["a"]),
        ],
    ),
    (
        "shorter_timeouts_are_kept",
        stable("a", "b", session=30000, rebalance=2000)
        + [
            S.join("c", session=30000, rebalance=2000),
            S.join("a", session=30000, rebalance=2000),
            S.advance(1990),
            S.expect("PreparingRebalance"),
            S.advance(10),
            S.expect("CompletingRebalance", generation=2, members=["a", "c"]),
        ],
    ),
]


@pytest.mark.parametrize("steps", cases(BOUND))
def test_rebalance_timeout_bound(steps):
    run_case(steps, {"corral.group.max.rebalance.timeout.ms": 5000})


def test_subscription_change_rebalances_over_both_topics():
    driver = run_case(
        stable("a", "b")
        + [
            S.join("b", topics=("topic", "other"), expect="parked"),
            S.expect("PreparingRebalance", generation=1),
            S.join("a", expect="NONE", generation=2),
            S.sync_all(),
            S.expect("Stable", generation=2),
        ],
        partitions={"topic": 6, "other": 3},
    )
    assert driver.group.subscribed_topics == {"topic", "other"}


# ================================================================================ static members ===


# ======================================================================================== expiry ===


# ======================================================================================= commits ===


@pytest.mark.parametrize(
    "steps",
    [
        pytest.param(steps, id=f"{table}-{name}")
        for table, rows in TABLES.items()
        for name, steps in rows
    ],
)
def test_case(steps):
    run_case(steps)


# =========================================================== the invariant checker can fail ===


def _everyone_gets_everything(assignments):
    return (
        [(m, assignments[0][1]) for m, _ in assignments]
        if len(assignments) > 1
        else [(m, a + a) for m, a in assignments]
    )


def _drop_last(assignments):
    return assignments[:-1]


BROKEN_LEADERS = [
    ("partition_assigned_twice", _everyone_gets_everything, "assigned to both"),
    ("member_left_without_assignment", _drop_last, "expected each of"),
]


@pytest.mark.parametrize("tamper, message", cases(BROKEN_LEADERS))
def test_invariant_checker_catches_a_bad_leader(tamper, message):
    with pytest.raises(AssertionError, match=message):
        run_case(
            [
                S.join("a"),
                S.join("b"),
                S.until("CompletingRebalance"),
                S.sync("b", expect="parked"),
                S.sync("a", tamper=tamper),
            ]
        )


def test_invariant_checker_catches_a_member_holding_another_assignment():
    async def main():
        with patched_clock(FakeClock()) as clock:
            driver = ClassicDriver(clock)
            driver.run([S.join("a"), S.join("b"), S.stabilize("a", "b")])
            members = list(driver.group.members.values())
            members[0].assignment, members[1].assignment = (
                members[1].assignment,
                members[0].assignment,
            )
            with pytest.raises(InvariantError, match="other than the one its leader sent"):
                driver.check_invariants()

    trio.run(main)
