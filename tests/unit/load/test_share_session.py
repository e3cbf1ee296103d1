"""share.session.ShareSession: the ShareFetch requests a share consumer sends (session epochs,
incremental partitions, piggy-backed acknowledgements) and what it makes of the answers, without
a broker."""

from __future__ import annotations

import time
from types import SimpleNamespace

from corral import _core
from corral.errors import ErrorCode
from corral.load.checks import Violations
from corral.load.member import Events
from corral.load.share.session import (
    MAX_EPOCH,
    ShareConfig,
    ShareSession,
    batch_ranges,
    merge,
    next_epoch,
    uncovered,
)
from corral.load.stats import Recorder

TID = bytes(range(16))


def session() -> ShareSession:
    member = SimpleNamespace(
        config=SimpleNamespace(group="g", versions={}, handshake=True),
        member_id="m1",
        events=Events(),
        recorder=Recorder(),
        violations=Violations(),
        connect_slots=None,
    )
    share = ShareConfig(leaders={"t": {0: 1, 1: 1}}, brokers={1: ("h", 1)}, topic_ids={"t": TID})
    return ShareSession(member, 1, share, {TID: "t"})


def batches(*ranges: tuple[int, int]) -> bytes:
    out = b""
    for first, last in ranges:
        batch = bytearray(_core.build_batch([(None, b"v")] * (last - first + 1), 1000))
        batch[0:8] = first.to_bytes(8, "big")
        out += bytes(batch)
    return out


def answer(partitions: list[dict], code: int = 0) -> dict:
    return {
        "error_code": code,
        "acquisition_lock_timeout_ms": 30000,
        "responses": [{"topic_id": TID, "partitions": partitions}] if partitions else [],
    }


def part(p: int, acquired=(), records=b"", ack_code: int = 0, code: int = 0) -> dict:
    return {
        "partition_index": p,
        "error_code": code,
        "acknowledge_error_code": ack_code,
        "records": records,
        "acquired_records": [
            {"first_offset": f, "last_offset": last, "delivery_count": 1} for f, last in acquired
        ],
    }


def listed(body: dict) -> dict[int, list]:
    return {
        p["partition_index"]: [
            (b["first_offset"], b["last_offset"], b["acknowledge_types"])
            for b in p["acknowledgement_batches"]
        ]
        for t in body["topics"]
        for p in t["partitions"]
    }


def test_batch_headers_give_the_offsets_delivered():
    data = batches((0, 4), (5, 9), (20, 21))
    assert batch_ranges(data) == [(0, 9), (20, 21)]
    assert batch_ranges(data[:-3]) == [(0, 9)]  # a trailing partial batch is left out
    assert batch_ranges(b"") == [] and batch_ranges(None) == []
    assert uncovered((3, 12), [(0, 9), (20, 21)]) == 3


def test_ranges_merge_and_epochs_wrap():
    assert merge([(5, 9), (0, 4), (12, 12), (11, 11)]) == [(0, 9), (11, 12)]
    assert next_epoch(0) == 1 and next_epoch(7) == 8 and next_epoch(MAX_EPOCH) == 1


def test_a_session_opens_with_every_partition_then_sends_changes_and_acknowledgements():
    s = session()
    s.want = {("t", 0), ("t", 1)}
    body, acks, listed_tps, forgotten = s._fetch_body()
    assert body["share_session_epoch"] == 0 and acks == {} and forgotten == set()
    assert listed(body) == {0: [], 1: []}
    got = s._fetched(
        answer([part(0, [(0, 4)], batches((0, 4)))]), acks, listed_tps, forgotten, time.monotonic()
    )
    assert got == 5 and s.epoch == 1 and s.in_session == {("t", 0), ("t", 1)}
    assert s.pending == {("t", 0): [(0, 4)]}

    # Epoch 1: only the partition with acknowledgements; partition 1 dropped from the wants.
    s.want = {("t", 0)}
    body, acks, listed_tps, forgotten = s._fetch_body()
    assert body["share_session_epoch"] == 1
    assert listed(body) == {0: [(0, 4, [1])]}
    assert forgotten == {("t", 1)}
    assert body["forgotten_topics_data"] == [{"topic_id": TID, "partitions": [1]}]
    assert body["max_records"] == 500
    s._fetched(answer([part(0)]), acks, listed_tps, forgotten, time.monotonic())
    assert s.pending == {} and s.epoch == 2 and s.in_session == {("t", 0)}
    kinds = [e[0] for e in s.member.events.drain()]
    assert kinds == ["acquired", "acknowledged"]


def test_acknowledgements_of_a_partition_no_longer_wanted_go_with_every_limit_zero():
    s = session()
    s.epoch, s.in_session, s.want = 3, {("t", 1)}, set()
    s.pending = {("t", 1): [(7, 9)]}
    body, _, _, forgotten = s._fetch_body()
    assert listed(body) == {1: [(7, 9, [1])]}
    assert forgotten == {("t", 1)}
    assert [body[k] for k in ("max_wait_ms", "min_bytes", "max_bytes", "max_records")] == [0] * 4


def test_a_session_error_starts_again_at_epoch_0_keeping_the_acknowledgements():
    s = session()
    s.epoch, s.in_session, s.want = 5, {("t", 0)}, {("t", 0)}
    s.pending = {("t", 0): [(0, 4)]}
    body, acks, listed_tps, forgotten = s._fetch_body()
    code = ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert s._fetched(answer([], code), acks, listed_tps, forgotten, 0.0) == -1
    assert s.epoch == 0 and s.in_session == set() and s.pending == {("t", 0): [(0, 4)]}
    body, acks, _, _ = s._fetch_body()
    assert acks == {} and listed(body) == {0: []}  # no acknowledgements at epoch 0


def test_a_refused_acknowledgement_is_dropped_and_counted():
    s = session()
    s.epoch, s.in_session, s.want = 2, {("t", 0)}, {("t", 0)}
    s.pending = {("t", 0): [(0, 4)]}
    body, acks, listed_tps, forgotten = s._fetch_body()
    ack_code = ErrorCode.INVALID_RECORD_STATE
    s._fetched(answer([part(0, ack_code=ack_code)]), acks, listed_tps, forgotten, 0.0)
    assert s.pending == {}
    assert s.member.recorder.errors == {"SHARE_ACKNOWLEDGEMENT:INVALID_RECORD_STATE": 1}
    assert s.member.events.drain() == []


def test_acquired_offsets_without_their_records_are_a_violation():
    s = session()
    s.want = {("t", 0)}
    body, acks, listed_tps, forgotten = s._fetch_body()
    s._fetched(answer([part(0, [(0, 9)], batches((0, 4)))]), acks, listed_tps, forgotten, 0.0)
    assert s.member.violations.count == 1
    assert (
        "offsets 0-9 acquired, 5 of them without their record" in (s.member.violations.examples[0])
    )


def test_an_acknowledgement_answered_after_the_lock_could_have_expired_is_late():
    s = session()
    s.want = {("t", 0)}
    body, acks, listed_tps, forgotten = s._fetch_body()
    s._fetched(
        answer([part(0, [(0, 4)], batches((0, 4))), part(1, [(0, 1)], batches((0, 1)))]),
        acks,
        listed_tps,
        forgotten,
        time.monotonic() - 31,  # sent 31 s ago: the 30 s lock may be over
    )
    s.acquired_at[(("t", 1), (0, 1))] = time.monotonic()  # partition 1's just now
    body, acks, listed_tps, forgotten = s._fetch_body()
    s._fetched(answer([part(0), part(1)]), acks, listed_tps, forgotten, time.monotonic())
    acknowledged = [e for e in s.member.events.drain() if e[0] == "acknowledged"]
    assert [(e[2], e[3], e[4], e[6]) for e in acknowledged] == [
        (("t", 0), 0, 4, True),
        (("t", 1), 0, 1, False),
    ]
    counts = s.member.recorder.counts
    assert counts["records_acknowledged_late"] == 5 and counts["records_acknowledged"] == 2
