"""The classic state machine's scripted cases (`TABLES`), one per row, run by
tests/unit/groups/classic/test_state_machine.py."""

from __future__ import annotations

from harness.classic import S, stable

MEMBERSHIP = [
    (
        "kip394_member_id_required_then_join",
        [
            S.join("a", first_only=True, expect="MEMBER_ID_REQUIRED"),
            S.expect("Empty", members=[], pending=1),
            S.join("a", expect="parked"),
            S.expect("PreparingRebalance", members=["a"], pending=0, generation=0),
        ],
    ),
    (
        "old_client_joins_without_member_id_required",
        [
            S.join("a", require_known=False, expect="parked"),
            S.expect("PreparingRebalance", members=["a"], pending=0),
        ],
    ),
    (
        "unknown_member_id_on_unknown_group",
        [S.join("x", member_id="made-up", expect="UNKNOWN_MEMBER_ID"), S.expect(exists=False)],
    ),
    (
        "unknown_member_id_on_stable_group",
        stable("a")
        + [
            S.join("x", member_id="made-up", expect="UNKNOWN_MEMBER_ID"),
            S.expect("Stable", generation=1, members=["a"]),
        ],
    ),
    (
        "session_timeout_below_min",
        [
            S.join("a", first_only=True, session=999, expect="INVALID_SESSION_TIMEOUT"),
            S.expect(exists=False),
        ],
    ),
    (
        "session_timeout_at_min",
        [S.join("a", first_only=True, session=1000, expect="MEMBER_ID_REQUIRED")],
    ),
    (
        "session_timeout_at_max",
        [S.join("a", first_only=True, session=60000, expect="MEMBER_ID_REQUIRED")],
    ),
    (
        "session_timeout_above_max",
        [S.join("a", first_only=True, session=60001, expect="INVALID_SESSION_TIMEOUT")],
    ),
    (
        "rejoin_with_bad_session_leaves_group_alone",
        stable("a")
        + [
            S.join("a", session=60001, expect="INVALID_SESSION_TIMEOUT"),
            S.expect("Stable", generation=1, members=["a"]),
        ],
    ),
    (
        "pending_member_expires_after_session",
        [
            S.join("a", first_only=True, session=5000, expect="MEMBER_ID_REQUIRED"),
            S.advance(4990),
            S.expect("Empty", pending=1),
            S.advance(10),
            S.expect("Empty", pending=0),
            S.join("a", expect="UNKNOWN_MEMBER_ID"),
        ],
    ),
    (
        "pending_member_holds_join_phase_until_it_expires",
        stable("a")
        + [
            S.advance(1000),
            S.join("b", first_only=True, expect="MEMBER_ID_REQUIRED"),
            S.expect("Stable", generation=1, pending=1),
            S.join("a", expect="parked"),  # the leader rejoining starts a rebalance
            S.expect("PreparingRebalance"),
            S.advance(9990),
            S.expect("PreparingRebalance", pending=1),
            S.advance(10),
            S.expect("CompletingRebalance", generation=2, members=["a"], pending=0),
            S.sync_all(),
            S.expect("Stable", generation=2),
        ],
    ),
    (
        "static_member_may_not_use_a_pending_id",
        [
            S.join("a", first_only=True, expect="MEMBER_ID_REQUIRED"),
            S.join("a", instance="ia", expect="UNKNOWN_MEMBER_ID"),
        ],
    ),
    (
        "inconsistent_protocol_type",
        stable("a")
        + [
            S.join("b", protocol_type="connect", expect="INCONSISTENT_GROUP_PROTOCOL"),
            S.expect("Stable", members=["a"], pending=0),
        ],
    ),
    (
        "no_protocol_in_common",
        stable("a") + [S.join("b", protocols=["roundrobin"], expect="INCONSISTENT_GROUP_PROTOCOL")],
    ),
    (
        "leave_pending_member",
        [
            S.join("a", first_only=True, expect="MEMBER_ID_REQUIRED"),
            S.leave("a"),
            S.expect("Empty", pending=0),
        ],
    ),
    ("leave_twice", stable("a") + [S.leave("a"), S.leave("a", expect="UNKNOWN_MEMBER_ID")]),
]


REBALANCE = [
    (
        "initial_delay",
        [
            S.join("a", expect="parked"),
            S.advance(2990),
            S.expect("PreparingRebalance", generation=0),
            S.expect_join("a", code="parked"),
            S.advance(10),
            S.expect("CompletingRebalance", generation=1, leader="a"),
            S.expect_join("a", code="NONE", generation=1, leader="a", members=["a"]),
            S.sync_all(),
            S.expect("Stable", generation=1),
        ],
    ),
    (
        "initial_delay_extended_by_a_new_member",
        [
            S.join("a", expect="parked"),
            S.advance(2000),
            S.join("b", expect="parked"),
            S.advance(3990),
            S.expect("PreparingRebalance", generation=0),
            S.advance(10),
            S.expect("CompletingRebalance", generation=1, members=["a", "b"], leader="a"),
            S.expect_join("b", code="NONE", generation=1, leader="a", members=[]),
            S.sync_all(),
            S.expect("Stable", generation=1),
        ],
    ),
    (
        "second_member_joins_stable_group",
        stable("a")
        + [
            S.join("b", expect="parked"),
            S.expect("PreparingRebalance", generation=1, members=["a", "b"]),
            S.heartbeat("a", "REBALANCE_IN_PROGRESS"),
            S.join("a", expect="NONE", generation=2, leader="a", members=["a", "b"]),
            S.expect("CompletingRebalance", generation=2, leader="a"),
            S.expect_join("b", code="NONE", generation=2, leader="a", members=[]),
            S.heartbeat("a", "NONE"),
            S.heartbeat("b", "NONE"),
            S.sync_all(),
            S.expect("Stable", generation=2, members=["a", "b"]),
        ],
    ),
    (
        "follower_sync_waits_for_leader_assignment",
        [
            S.join("a"),
            S.join("b"),
            S.until("CompletingRebalance"),
            S.sync("b", expect="parked"),
            S.expect("CompletingRebalance"),
            S.sync("a", expect="NONE"),
            S.expect_sync("b", "NONE"),
            S.expect("Stable", generation=1),
        ],
    ),
    (
        "stale_generation_is_illegal",
        stable("a")
        + [
            S.join("b"),
            S.join("a", expect="NONE", generation=2),
            S.sync("a", generation=1, expect="ILLEGAL_GENERATION"),
            S.heartbeat("a", "ILLEGAL_GENERATION", generation=1),
            S.sync_all(),
            S.expect("Stable", generation=2),
            S.heartbeat("b", "ILLEGAL_GENERATION", generation=3),
            S.heartbeat("b", "NONE", generation=2),
        ],
    ),
    (
        "sync_and_heartbeat_while_preparing",
        stable("a", "b")
        + [
            S.join("c", expect="parked"),
            S.sync("b", generation=1, expect="REBALANCE_IN_PROGRESS"),
            S.heartbeat("b", "REBALANCE_IN_PROGRESS", generation=1),
            S.join("a"),
            S.join("b"),
            S.expect("CompletingRebalance", generation=2, members=["a", "b", "c"]),
            S.sync_all(),
        ],
    ),
    (
        "leader_leaves_and_a_rejoiner_leads",
        stable("a", "b")
        + [
            S.leave("a"),
            S.expect("PreparingRebalance", members=["b"]),
            S.join("b", expect="NONE", generation=2, leader="b", members=["b"]),
            S.sync_all(),
            S.expect("Stable", generation=2, members=["b"], leader="b"),
            S.heartbeat("a", "UNKNOWN_MEMBER_ID"),
        ],
    ),
    (
        "leader_not_rejoining_in_rebalance_timeout_is_replaced",
        stable("a", "b", session=30000)
        + [
            S.join("c", session=30000, expect="parked"),
            S.join("b", session=30000, expect="parked"),
            S.advance(19990),
            S.expect("PreparingRebalance", members=["a", "b", "c"]),
            S.advance(10),
            S.expect("CompletingRebalance", generation=2, members=["b", "c"], leader="b"),
            S.sync_all(),
            S.expect("Stable", generation=2),
        ],
    ),
    (
        "follower_not_rejoining_in_rebalance_timeout_is_removed",
        stable("a", "b", session=30000)
        + [
            S.join("c", session=30000),
            S.join("a", session=30000),
            S.advance(19990),
            S.expect("PreparingRebalance"),
            S.advance(10),
            S.expect("CompletingRebalance", generation=2, members=["a", "c"], leader="a"),
            S.sync_all(),
            S.heartbeat("b", "UNKNOWN_MEMBER_ID"),
        ],
    ),
    (
        "follower_rejoin_with_same_protocols_keeps_stable",
        stable("a", "b")
        + [
            S.join("b", expect="NONE", generation=1, leader="a", members=[]),
            S.expect("Stable", generation=1),
        ],
    ),
    (
        "leader_rejoin_rebalances",
        stable("a", "b")
        + [
            S.join("a", expect="parked"),
            S.expect("PreparingRebalance", generation=1),
            S.join("b", expect="NONE", generation=2),
            S.sync_all(),
            S.expect("Stable", generation=2, leader="a"),
        ],
    ),
    (
        "lost_join_response_answered_again_in_completing",
        [
            S.join("a"),
            S.join("b"),
            S.until("CompletingRebalance"),
            S.join("b", expect="NONE", generation=1, leader="a", members=[]),
            S.join("a", expect="NONE", generation=1, leader="a", members=["a", "b"]),
            S.expect("CompletingRebalance", generation=1),
            S.sync_all(),
            S.expect("Stable", generation=1),
        ],
    ),
    (
        "member_that_never_syncs_is_removed_after_rebalance_timeout",
        [
            S.join("a"),
            S.join("b"),
            S.until("CompletingRebalance"),
            S.sync("a", expect="NONE"),
            S.expect("Stable", generation=1),
            S.keepalive(["a", "b"], 19000),
            S.advance(990),
            S.expect("Stable"),
            S.advance(10),
            S.expect("PreparingRebalance", members=["a"]),
            S.join("a", expect="NONE", generation=2, members=["a"]),
            S.sync_all(),
            S.expect("Stable", generation=2),
        ],
    ),
    (
        "last_member_leaving_empties_group",
        stable("a")
        + [
            S.leave("a"),
            S.expect("Empty", generation=2, members=[]),
            S.delete("NONE"),
            S.expect(exists=False),
            S.delete("GROUP_ID_NOT_FOUND"),
        ],
    ),
    (
        "delete_non_empty_group_refused",
        stable("a") + [S.delete("NON_EMPTY_GROUP"), S.expect("Stable")],
    ),
]


STATIC = [
    (
        "static_leader_rejoins_with_new_id_group_stays_stable",
        [
            S.join("a", instance="ia"),
            S.join("b"),
            S.stabilize("a", "b"),
            S.join(
                "a2",
                instance="ia",
                expect="NONE",
                generation=1,
                skip_assignment=True,
                members=["a2", "b"],
            ),
            S.expect("Stable", generation=1, members=["a2", "b"], leader="a2"),
            S.heartbeat("a", "FENCED_INSTANCE_ID"),
            S.sync("a", generation=1, expect="FENCED_INSTANCE_ID"),
            S.commit("a", "FENCED_INSTANCE_ID", generation=1),
            S.leave("a", expect="FENCED_INSTANCE_ID"),
            S.sync("a2", as_leader=False, expect="NONE"),
            S.heartbeat("a2", "NONE"),
            S.commit("a2", "NONE"),
        ],
    ),
    (
        "static_follower_rejoins_with_new_id",
        [
            S.join("a"),
            S.join("b", instance="ib"),
            S.stabilize("a", "b"),
            S.join(
                "b2",
                instance="ib",
                expect="NONE",
                generation=1,
                leader="a",
                members=[],
                skip_assignment=False,
            ),
            S.expect("Stable", generation=1, members=["a", "b2"]),
            S.heartbeat("b", "FENCED_INSTANCE_ID"),
            S.sync("b2", expect="NONE"),
        ],
    ),
    (
        "static_rejoin_with_changed_protocol_rebalances",
        [
            S.join("a", instance="ia", protocols=["range", "roundrobin"]),
            S.join("b", protocols=["range", "roundrobin"]),
            S.stabilize("a", "b"),
            S.expect(protocol="range"),
            S.join("a2", instance="ia", protocols=["roundrobin", "range"], expect="parked"),
            S.expect("PreparingRebalance", generation=1),
            S.join("b", protocols=["range", "roundrobin"], expect="NONE", generation=2),
            S.expect("CompletingRebalance", protocol="roundrobin"),
            S.sync_all(),
            S.expect("Stable", generation=2, members=["a2", "b"]),
        ],
    ),
    (
        "static_rejoin_while_completing_fences_parked_sync_and_rebalances",
        [
            S.join("a"),
            S.join("b", instance="ib"),
            S.until("CompletingRebalance"),
            S.sync("b", expect="parked"),
            S.join("b2", instance="ib", expect="parked"),
            S.expect_sync("b", "FENCED_INSTANCE_ID"),
            S.expect("PreparingRebalance", generation=1, members=["a", "b2"]),
            S.join("a", expect="NONE", generation=2),
            S.sync_all(),
            S.expect("Stable", generation=2, members=["a", "b2"]),
        ],
    ),
    (
        "static_member_not_rejoining_stays_in_next_generation",
        [
            S.join("a", session=30000),
            S.join("b", instance="ib", session=30000),
            S.stabilize("a", "b"),
            S.join("c", session=30000, expect="parked"),
            S.join("a", session=30000),
            S.advance(20000),
            S.expect("CompletingRebalance", generation=2, members=["a", "b", "c"]),
            S.sync_all(),
            S.expect("Stable", generation=2),
            S.heartbeat("b", "ILLEGAL_GENERATION", generation=1),
            S.heartbeat("b", "NONE", generation=2),
        ],
    ),
    (
        "static_member_removed_by_instance_id",
        [
            S.join("a"),
            S.join("b", instance="ib"),
            S.stabilize("a", "b"),
            S.leave("b", by_instance=True),
            S.expect("PreparingRebalance", members=["a"]),
            S.join("a", expect="NONE", generation=2),
            S.sync_all(),
        ],
    ),
    (
        "static_member_expires_on_session_timeout",
        [
            S.join("a", session=30000),
            S.join("b", instance="ib"),
            S.stabilize("a", "b"),
            S.keepalive(["a"], 9000),
            S.advance(990),
            S.expect("Stable", members=["a", "b"]),
            S.advance(10),
            S.expect("PreparingRebalance", members=["a"]),
            S.heartbeat("b", "UNKNOWN_MEMBER_ID"),
        ],
    ),
]


EXPIRY = [
    (
        "session_timeout_removes_member_and_rebalances",
        stable("a", "b")
        + [
            S.keepalive(["b"], 9000),
            S.advance(990),
            S.expect("Stable", members=["a", "b"]),
            S.advance(10),
            S.expect("PreparingRebalance", generation=1, members=["b"]),
            S.heartbeat("b", "REBALANCE_IN_PROGRESS"),
            S.join("b", expect="NONE", generation=2, leader="b", members=["b"]),
            S.sync_all(),
            S.expect("Stable", generation=2),
        ],
    ),
    (
        "every_member_expires_group_empty",
        stable("a")
        + [
            S.advance(9990),
            S.expect("Stable"),
            S.advance(10),
            S.expect("Empty", generation=2, members=[]),
            S.heartbeat("a", "UNKNOWN_MEMBER_ID"),
        ],
    ),
    (
        "member_awaiting_join_outlives_its_session",
        stable("a", "b")
        + [
            S.advance(1000),
            S.heartbeat("b"),
            S.join("a", expect="parked"),
            S.advance(9000),
            S.expect("PreparingRebalance", members=["a", "b"]),  # a's deadline passed
            S.advance(990),
            S.expect("PreparingRebalance", members=["a", "b"]),
            S.advance(10),  # b's deadline
            S.expect("CompletingRebalance", generation=2, members=["a"]),
            S.expect_join("a", code="NONE", generation=2, members=["a"]),
            S.sync_all(),
        ],
    ),
    (
        "heartbeats_keep_a_stable_group",
        stable("a", "b") + [S.keepalive(["a", "b"], 60000), S.expect("Stable", generation=1)],
    ),
]


# Found by these tests: when two deadlines fall on the same millisecond, the first callback can
# complete the join phase (answering a member's parked JoinGroup and rescheduling its session);
# the second, now stale deadline of the same batch must not fire (it used to, expiring the member
# just answered). Members that synced together share their session deadline, so this is the
# ordinary case. Kafka cancels the old heartbeat expiration when it schedules the next.
SAME_DEADLINE = [
    (
        "member_awaiting_join_outlives_its_session_same_deadline",
        stable("a", "b")
        + [
            S.join("a", expect="parked"),
            S.advance(9990),
            S.expect("PreparingRebalance", members=["a", "b"]),
            S.advance(10),
            S.expect("CompletingRebalance", generation=2, members=["a"]),
        ],
    ),
    (
        "pending_member_expiry_same_deadline_as_rejoined_leader",
        stable("a")
        + [
            S.join("b", first_only=True, expect="MEMBER_ID_REQUIRED"),
            S.join("a", expect="parked"),
            S.advance(10000),
            S.expect("CompletingRebalance", generation=2, members=["a"], pending=0),
        ],
    ),
]


COMMITS = [
    (
        "simple_commit_without_group",
        [S.commit(None, "NONE", generation=-1), S.expect(exists=False)],
    ),
    (
        "generation_for_unknown_group_before_v9",
        [S.commit(None, "ILLEGAL_GENERATION", generation=3, member_id="m", version=8)],
    ),
    (
        "generation_for_unknown_group_v9",
        [S.commit(None, "GROUP_ID_NOT_FOUND", generation=3, member_id="m", version=9)],
    ),
    (
        "stable_member_commits",
        stable("a", "b") + [S.commit("a", "NONE"), S.commit("b", "NONE", version=9)],
    ),
    ("stale_generation", stable("a") + [S.commit("a", "ILLEGAL_GENERATION", generation=0)]),
    (
        "unknown_member",
        stable("a") + [S.commit(None, "UNKNOWN_MEMBER_ID", member_id="made-up", generation=1)],
    ),
    (
        "simple_commit_into_live_group",
        stable("a") + [S.commit(None, "UNKNOWN_MEMBER_ID", generation=-1)],
    ),
    (
        "completing_rebalance",
        [
            S.join("a"),
            S.join("b"),
            S.until("CompletingRebalance"),
            S.commit("a", "REBALANCE_IN_PROGRESS"),
            S.commit("b", "REBALANCE_IN_PROGRESS"),
            S.commit("b", "ILLEGAL_GENERATION", generation=0),
            S.sync_all(),
            S.commit("b", "NONE"),
        ],
    ),
    (
        "preparing_rebalance_accepts_current_generation",
        stable("a", "b")
        + [
            S.join("c", expect="parked"),
            S.expect("PreparingRebalance"),
            S.commit("a", "NONE", generation=1),
            S.commit("c", "ILLEGAL_GENERATION", generation=0),
        ],
    ),
    (
        "empty_group_takes_simple_commits_only",
        stable("a")
        + [
            S.leave("a"),
            S.expect("Empty"),
            S.commit(None, "NONE", generation=-1),
            S.commit("a", "UNKNOWN_MEMBER_ID", generation=2),
        ],
    ),
]


# Every table above runs with default settings, one case per row.
TABLES = {
    "membership": MEMBERSHIP,
    "rebalance": REBALANCE,
    "static": STATIC,
    "expiry": EXPIRY,
    "same_deadline": SAME_DEADLINE,
    "commits": COMMITS,
}
