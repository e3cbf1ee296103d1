"""Answers wait for durability (Kafka's coordinator runtime answers a write once it is committed):
in process, with the fake log holding every write back as a slow disk would, an OffsetCommit is
neither answered nor visible to OffsetFetch, and a joining consumer-group member gets no answer,
until the write is released; then each is answered in write order and the state is there."""

from __future__ import annotations

from harness import FakeLog, request, setup

from corral.errors import ErrorCode

NO_OFFSET = -1


def offset_of(c, group_id: str, topic: str, partition: int) -> int:
    [(_, [(_, offset, *_)])] = c.offsets.fetch(group_id, [(topic, [partition])])
    return offset


def test_an_offset_commit_is_answered_and_visible_only_once_durable():
    log = FakeLog()
    _, _, c, _ = setup(log=log)
    log.hold()
    first = c.offsets.commit("simple", [("t", [(0, 10, -1, "")])], 1, -1)
    second = c.offsets.commit("simple", [("t", [(0, 20, -1, "")])], 2, -1)
    assert not first.resolved and not second.resolved
    assert log.writing("simple") and not log.writing("other")
    assert offset_of(c, "simple", "t", 0) == NO_OFFSET
    order = []
    first.then(lambda error: order.append(("first", error, offset_of(c, "simple", "t", 0))))
    second.then(lambda error: order.append(("second", error, offset_of(c, "simple", "t", 0))))
    log.release()
    assert order == [("first", ErrorCode.NONE, 10), ("second", ErrorCode.NONE, 20)]
    assert not log.writing("simple")


def test_a_joining_member_is_answered_once_its_records_are_durable():
    def join(hold: bool):
        log = FakeLog(keep=True)
        _, _, c, _ = setup(log=log)
        if hold:
            log.hold()
        joined = c.consumer_heartbeat(request("g", "member-a", 0, names=["t"], owned={}))
        if hold:
            assert not joined.resolved and log.pairs  # appended, not yet durable
            log.release()
        assert joined.resolved
        answer = dict(joined.value)  # each setup names its topic with a new id
        answer["assignment"] = [t["partitions"] for t in answer["assignment"]["topic_partitions"]]
        return answer, log.pairs

    held, written = join(hold=True)
    assert held["error_code"] == ErrorCode.NONE and held["member_epoch"] > 0, held
    assert held["assignment"] == [[0, 1, 2, 3, 4, 5]]
    # The same answer and the same records as when every write is durable at once.
    at_once, written_at_once = join(hold=False)
    assert held == at_once and len(written) == len(written_at_once)


def test_a_failed_write_is_answered_with_its_error_and_changes_nothing():
    log = FakeLog()
    _, _, c, _ = setup(log=log)
    log.fail_next = 1
    failed = c.offsets.commit("simple", [("t", [(0, 10, -1, "")])], 1, -1)
    assert failed.value == ErrorCode.NOT_COORDINATOR
    assert offset_of(c, "simple", "t", 0) == NO_OFFSET
    assert c.offsets.commit("simple", [("t", [(0, 11, -1, "")])], 2, -1).value == ErrorCode.NONE
    assert offset_of(c, "simple", "t", 0) == 11
