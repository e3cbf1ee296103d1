"""`corral load --group-type share` against a real broker: a share group (KIP-932) of simulated
consumers reads and acknowledges every record of a topic, every answer checked (checks.ShareLedger:
no record held by two members at once, none lost, each acknowledged once by the member it was
delivered to).

Parametrized by broker: corral and Apache Kafka 4.4 (benches/kafka_ref.py), with the same
settings.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from kafka_ref import kafka_broker

from corral.load.cli import parse
from corral.load.runner import run
from corral.load.scenarios import SCENARIOS

# A heartbeat interval of 1 s instead of 5 s: the first assignment comes one interval after a
# member joins (share partitions are initialized between the two heartbeats).
SHARE_SETTINGS = {
    "group.share.heartbeat.interval.ms": 1000,
    "group.share.min.heartbeat.interval.ms": 500,
    "group.share.max.size": 1000,
    "group.share.min.record.lock.duration.ms": 1000,  # for the group's 1 s lock below
}
BROKERS = ["corral_share", pytest.param("kafka_share", marks=pytest.mark.kafka)]


@pytest.fixture
def corral_share(corral_factory):
    return corral_factory(**SHARE_SETTINGS).bootstrap


@pytest.fixture(scope="module")
def kafka_share():
    with kafka_broker(settings=SHARE_SETTINGS) as bootstrap:
        yield bootstrap


@pytest.fixture(params=BROKERS)
def broker(request):
    return request.getfixturevalue(request.param)


def run_share(bootstrap: str, *args: str) -> dict:
    params = parse(["--bootstrap", bootstrap, "--group-type", "share", "--quiet", *args])
    return run(SCENARIOS[params["scenario"]], params)


def check_complete(result: dict, records: int) -> dict:
    assert result["failures"] == []
    assert result["violations"] == 0, result["violation_examples"]
    assert result["errors"] == {}
    metrics = result["metrics"]
    assert metrics["outcome"] == "complete"
    assert metrics["produced"] == metrics["acknowledged"] == records
    assert metrics["never_delivered"] == metrics["delivered_unacknowledged"] == 0
    assert metrics["acknowledged_per_s"] > 0
    assert result["counts"]["records_acknowledged"] == records
    return metrics


def test_share_group_of_20_members_acknowledges_every_record(broker):
    result = run_share(
        broker, "--members", "20", "--partitions", "4", "--records", "20000", "--duration", "90"
    )
    metrics = check_complete(result, 20000)
    assert metrics["group_type"] == "share" and metrics["members"] == 20
    assert metrics["partitions"] == 4
    assert metrics["redelivered"] == 0 and metrics["delivery_count_above_1"] == 0
    assert metrics["all_in_group_s"] is not None
    assert metrics["group_configs"] == {"share.auto.offset.reset": "earliest"}
    # Who gets the records produced beforehand depends on who is assigned first (corral assigns
    # the first member everything at once; Kafka a heartbeat later, to all 20).
    assert metrics["members_that_acquired"] >= 1
    assert metrics["acquisition_lock_ms"] > 0
    versions = result["broker"]["versions_used"]
    assert versions["SHARE_GROUP_HEARTBEAT"] == 1
    assert versions["SHARE_FETCH"] == versions["SHARE_ACKNOWLEDGE"] == 2
    # Every member that opened a session closed it (ShareAcknowledge at epoch -1), and left.
    closed = result["latency_ms"]["SHARE_ACKNOWLEDGE"]["count"]
    assert metrics["members_that_acquired"] <= closed <= 20
    assert result["latency_ms"]["SHARE_FETCH"]["count"] > 0
    assert result["latency_ms"]["SHARE_GROUP_HEARTBEAT"]["count"] >= 40  # join, leave
    group = result["parameters"]["group"]
    assert result["cleanup"] == {
        "deleted_groups": [group],
        "deleted_topics": [group],
        "not_deleted": {},
    }


def test_records_produced_while_the_group_consumes(broker):
    result = run_share(
        broker,
        "--members",
        "20",
        "--partitions",
        "4",
        "--records",
        "8000",
        "--produce",
        "alongside",
        "--produce-rate",
        "1000",
        "--produce-batch",
        "20",
        "--max-records",
        "50",
        "--duration",
        "90",
    )
    metrics = check_complete(result, 8000)
    assert metrics["produce"] == "alongside"
    # At 1,000/s the 8,000 records take about 8 s, and the members consume meanwhile (their
    # first assignment comes a heartbeat or two after they join: 1-3 s on a fresh Kafka).
    assert metrics["produced_at_s"] > 7
    assert metrics["first_acquired_at_s"] < metrics["produced_at_s"]
    # Five members share each partition: records produced after they all joined spread.
    assert metrics["members_that_acquired"] > 4


def test_records_whose_lock_expires_come_again_until_their_last_delivery(broker):
    """Members take 1.5 s with records locked for 1 s: every acknowledgement but the last is
    refused (INVALID_RECORD_STATE), the records come back with a higher delivery count, at the
    limit (5) one at a time, and the last acknowledgement of each is answered NONE although its
    lock had expired too (Kafka archives the record and skips acknowledgements below the share
    partition's start): the ledger counts those "late", and finds no record held twice."""
    result = run_share(
        broker,
        "--members",
        "2",
        "--partitions",
        "1",
        "--records",
        "4",
        "--produce-batch",
        "4",
        "--process-ms",
        "1500",
        "--group-config",
        "share.record.lock.duration.ms=1000",
        "--stall-seconds",
        "20",
        "--duration",
        "90",
    )
    assert result["failures"] == []
    assert result["violations"] == 0, result["violation_examples"]
    metrics = result["metrics"]
    assert metrics["outcome"] == "complete"
    assert metrics["acquisition_lock_ms"] == 1000
    assert metrics["acknowledged_late"] == 4 and metrics["acknowledged"] == 0
    assert metrics["redelivered"] == metrics["delivery_count_above_1"] == 16  # 4 x 4 more
    assert set(result["errors"]) == {"SHARE_ACKNOWLEDGEMENT:INVALID_RECORD_STATE"}


def test_the_command_line_runs_a_share_group(broker):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "corral.cli",
            "load",
            "--bootstrap",
            broker,
            "--group-type",
            "share",
            "--members",
            "5",
            "--partitions",
            "2",
            "--records",
            "500",
            "--duration",
            "60",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    brief = json.loads(out.stdout)
    assert brief["scenario"] == "share" and brief["violations"] == 0
    assert brief["metrics"]["acknowledged"] == 500


def test_share_group_type_runs_only_the_share_scenario():
    with pytest.raises(SystemExit):
        parse(["--bootstrap", "h:1", "--group-type", "share", "--scenario", "commit"])
    params = parse(["--bootstrap", "h:1", "--scenario", "share"])
    assert params["group_type"] == "share"
    assert parse(["--bootstrap", "h:1", "--scenario", "commit"])["group_type"] == "consumer"
