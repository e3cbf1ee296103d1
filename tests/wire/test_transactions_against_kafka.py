"""One transaction scenario over raw frames, sent to Apache Kafka 4.4 (benches/kafka_ref.py) and to
corral: the same observable answers (error codes, epochs, offsets, last stable offsets, aborted
lists, states; producer ids aside). Coordinator answers that clients retry (the coordinator still
loading, markers still being written) are retried the same way on both."""

from __future__ import annotations

import time

from rawwire import RawClient
from txnwire import TOPIC, add, describe, end, init, latest, produce, read_committed, until
from wire_data import create

from corral.errors import ErrorCode
from corral.network.apis import ApiKey

RETRIED = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.CONCURRENT_TRANSACTIONS,
}


def retried(call):
    """The call's answer once it is not one that clients retry."""
    deadline = time.monotonic() + 60
    while True:
        answer = call()
        code = answer[0] if isinstance(answer, tuple) else answer
        if isinstance(code, list):
            code = code[0]
        if code not in RETRIED or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)


def scenario(port: int) -> list:
    seen: list = []
    with RawClient(port, timeout=30) as c:
        create(c, TOPIC, partitions=2)
        found = retried(
            lambda: c.call(ApiKey.FIND_COORDINATOR, 3, {"key": "diff", "key_type": 1})["error_code"]
        )
        seen.append(("find coordinator", found))
        seen.append(("bad timeout", init(c, "diff", timeout_ms=900_001)[0]))
        error, pid, epoch = retried(lambda: init(c, "diff"))
        seen.append(("init", error, epoch))
        seen.append(("end while empty", end(c, "diff", pid, epoch, commit=True)))
        seen.append(("add", retried(lambda: add(c, "diff", pid, epoch, [0]))))
        not_added = produce(c, "diff", pid, epoch, 1, 0, 1)
        seen.append(("produce to a partition not added", not_added["error_code"]))
        # Kafka may answer NOT_ENOUGH_REPLICAS while verifying; clients retry it.
        written = until(
            lambda: (
                (r := produce(c, "diff", pid, epoch, 0, 0, 3))["error_code"]
                != ErrorCode.NOT_ENOUGH_REPLICAS
                and r
            )
        )
        seen.append(("produce", written["error_code"], written["base_offset"]))
        seen.append(("open: stable, end", latest(c, 0, True), latest(c, 0, False)))
        seen.append(("end by a zombie", end(c, "diff", pid, epoch + 1, commit=True)))
        seen.append(("end by a zombie v1", end(c, "diff", pid, epoch + 1, True, version=1)))
        seen.append(("commit", retried(lambda: end(c, "diff", pid, epoch, commit=True))))
        until(lambda: latest(c, 0, True) == 4)
        committed = read_committed(c, 0)
        seen.append(
            (
                "after commit",
                committed["high_watermark"],
                committed["last_stable_offset"],
                committed["aborted_transactions"],
            )
        )
        seen.append(("add again", retried(lambda: add(c, "diff", pid, epoch, [0]))))
        again = until(
            lambda: (
                (r := produce(c, "diff", pid, epoch, 0, 3, 2))["error_code"]
                != ErrorCode.NOT_ENOUGH_REPLICAS
                and r
            )
        )
        seen.append(("produce again", again["error_code"], again["base_offset"]))
        seen.append(("abort", retried(lambda: end(c, "diff", pid, epoch, commit=False))))
        until(lambda: latest(c, 0, True) == 7)
        # From the aborted transaction's first offset (how much one fetch returns from offset 0
        # is Kafka's own business: it answered the first batch alone).
        aborted = read_committed(c, 0, offset=4)
        seen.append(
            (
                "after abort",
                aborted["last_stable_offset"],
                [
                    (a["producer_id"] == pid, a["first_offset"])
                    for a in aborted["aborted_transactions"]
                ],
            )
        )
        state = until(
            lambda: (d := describe(c, "diff"))["transaction_state"] == "CompleteAbort" and d
        )
        seen.append(("described", state["error_code"], state["producer_epoch"], state["topics"]))
        listed = c.call(
            ApiKey.LIST_TRANSACTIONS,
            1,
            {"state_filters": ["CompleteAbort"], "producer_id_filters": [], "duration_filter": -1},
        )
        seen.append(
            (
                "listed",
                [
                    (t["transactional_id"], t["transaction_state"])
                    for t in listed["transaction_states"]
                ],
            )
        )
    return seen


def test_kafka_and_corral_answer_a_transaction_alike(corral):
    from kafka_java import kafka_reference

    with kafka_reference({}) as bootstrap:
        kafka = scenario(int(bootstrap.rsplit(":", 1)[1]))
    ours = scenario(corral.port)
    assert ours == kafka
    assert ("commit", ErrorCode.NONE) in kafka
