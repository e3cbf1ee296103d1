"""Share groups in process (groups/share/protocol.py over the coordinator with a fake log): joins,
epochs, the assignment reaching members, fencing, leaving, session expiry, replay from the records
alone, and costs: a heartbeat, a join and a leave cost the same in a group of 100 members as in one
of 3,000 (Python bytecode counted), and a target computation costs O(members)."""

from __future__ import annotations

from harness import FakeLog, Topics, make_coordinator, opcodes

from corral.errors import ErrorCode
from corral.groups.share import ShareGroup, ShareHeartbeat
from corral.groups.storage import records

SETTINGS = {"group.share.assignment.interval.ms": 0, "group.share.max.size": 10_000}


def setup(partitions: int = 4, settings: dict | None = None):
    topics = Topics()
    tid = topics.add("t", partitions)
    log = FakeLog(keep=True)
    c = make_coordinator(topics, {**SETTINGS, **(settings or {})}, log=log)
    c.events.sink = lambda event, time_ms: None
    return c, tid, log


def hb(c, member: str, epoch: int, topics: list[str] | None = None, group: str = "g") -> dict:
    later = c.share_heartbeat(ShareHeartbeat(group, member, epoch, None, topics, "client", "/h"))
    assert later.resolved
    return later.value


def owned(answer: dict, tid: bytes) -> list[int]:
    tps = (answer.get("assignment") or {}).get("topic_partitions") or []
    return [p for tp in tps if tp["topic_id"] == tid for p in tp["partitions"]]


def check_invariant(group: ShareGroup, partitions: int) -> None:
    """Every assignable partition owned, each by at most ceil(members / partitions) members."""
    if not group.members:
        return
    sharing = -(-len(group.members) // partitions)
    holders = [0] * partitions
    for m in group.members.values():
        for ps in m.target.values():
            for p in ps:
                holders[p] += 1
    assert all(1 <= h <= sharing for h in holders), holders


def test_join_assign_share_fence_and_leave():
    c, tid, _ = setup(partitions=2)
    # A group starts at epoch 1 (Kafka's); the join makes it 2 while the partitions initialize,
    # and the next heartbeat assigns them at epoch 3.
    a = hb(c, "a", 0, ["t"])
    assert (a["error_code"], a["member_epoch"], owned(a, tid)) == (0, 2, [])
    a = hb(c, "a", 2)
    assert (a["member_epoch"], owned(a, tid)) == (3, [0, 1])
    b = hb(c, "b", 0, ["t"])
    z = hb(c, "z", 0, ["t"])
    group = c.groups["g"]
    assert isinstance(group, ShareGroup) and group.epoch == 5
    check_invariant(group, 2)
    assert sorted(len(owned(x, tid)) for x in (b, z)) == [1, 1]
    # a learns its new target at its next heartbeat, at the target's epoch.
    a = hb(c, "a", 3)
    assert a["member_epoch"] == 5 and len(owned(a, tid)) == 2
    # An unchanged heartbeat carries no assignment.
    assert hb(c, "a", 5)["assignment"] is None
    # Epochs: the previous one is accepted (a lost response), others fenced.
    assert hb(c, "a", 3)["error_code"] == ErrorCode.NONE
    fenced = hb(c, "a", 8)
    assert fenced["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH
    assert fenced["error_message"] == (
        "The share group member has a greater member epoch (8) than the one known by the group "
        "coordinator (5). The member must abandon all its partitions and rejoin."
    )
    assert hb(c, "q", 3)["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    left = hb(c, "z", -1)
    assert (left["error_code"], left["member_epoch"]) == (0, -1)
    assert group.epoch == 6 and "z" not in group.members
    assert hb(c, "z", -1)["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID


def test_the_size_limit_and_other_types():
    c, _, _ = setup(settings={"group.share.max.size": 2})
    hb(c, "a", 0, ["t"])
    hb(c, "b", 0, ["t"])
    full = hb(c, "c", 0, ["t"])
    assert full["error_code"] == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert full["error_message"] == "The share group has reached its maximum capacity of 2 members."
    assert hb(c, "a", 0, ["t"], group="other")["error_code"] == 0


def test_records_alone_rebuild_the_group():
    c, tid, log = setup(partitions=3)
    for m in "abcd":
        hb(c, m, 0, ["t"])
    hb(c, "b", -1)
    before = c.groups["g"]
    # Replay every record written into a fresh coordinator: the same group.
    c2, _, _ = setup(partitions=3)
    c2.topics.store = c.topics.store
    for key, value, *_ in log.pairs:
        record = records.decode(key, value)
        if record is not None:
            c2.shard_of("g").replay(record)
    after = c2.groups["g"]
    assert (after.epoch, after.assignment_epoch) == (before.epoch, before.assignment_epoch)
    assert {m: (x.epoch, x.assigned, x.target) for m, x in after.members.items()} == {
        m: (x.epoch, x.assigned, x.target) for m, x in before.members.items()
    }
    assert after.initialized == before.initialized and after.subscribers == before.subscribers


def _group_of(size: int):
    c, tid, _ = setup(partitions=8, settings={"group.share.assignment.interval.ms": 60_000})
    for i in range(size):
        hb(c, f"m{i}", 0, ["t"])
    for i in range(size):
        hb(c, f"m{i}", c.groups["g"].members[f"m{i}"].epoch)
    return c


def test_heartbeat_join_and_leave_cost_does_not_grow_with_the_group():
    costs = {}
    for size in (100, 3000):
        c = _group_of(size)
        group = c.groups["g"]
        member = group.members["m1"]
        steady = opcodes(lambda: hb(c, "m1", member.epoch))
        join = opcodes(lambda: hb(c, "new", 0, ["t"]))
        leave = opcodes(lambda: hb(c, "m2", -1))
        costs[size] = (steady, join, leave)
    small, large = costs[100], costs[3000]
    for name, s, big in zip(("heartbeat", "join", "leave"), small, large):
        assert big <= s * 1.3 + 50, (name, s, big)


def test_a_target_computation_costs_o_members():
    per_member = []
    for size in (200, 2000):
        c = _group_of(size)
        group = c.groups["g"]
        group.assignment_timestamp_ms = 0  # the next bump recomputes the target
        cost = opcodes(lambda: hb(c, "new", 0, ["t"]))
        check_invariant(group, 8)
        per_member.append(cost / size)
    assert per_member[1] <= per_member[0] * 1.5, per_member
