"""Scenario files (`corral serve --faults FILE`, docs/faults.md) against real brokers: the same
seeded file and the same requests give the same injected faults twice (two fresh brokers, the
faults' listings, their `fired_on` and their log lines compared; with raw requests, and with
confluent-kafka producing, consuming and committing through the retries); the file alone
injects, with the API off, and `after_ms` starts a fault later; a bad file stops `corral serve`
naming the fault and the field."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from cgkit import FAST_GROUPS, wait_until
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from faultkit import faults_of
from rawwire import RawClient
from wire_data import batch, create, produce

from corral.errors import ErrorCode
from corral.faults.client import FaultsApiError
from corral.network.apis import ApiKey

FIRED = re.compile(r"fault (\d+) fired \((\d+) of \w+\): (\w+) v\d+ from .* (answered \w+)")

CHAOS = """
seed = 2024

[[fault]]
api = "Produce"
error = "NOT_LEADER_OR_FOLLOWER"
probability = 0.3

[[fault]]
api = "OffsetCommit"
error = "COORDINATOR_LOAD_IN_PROGRESS"
probability = 0.3
"""


def commit(client: RawClient, group: str, offset: int) -> int:
    body = {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "retention_time_ms": -1,
        "topics": [
            {
                "name": "chaos",
                "partitions": [
                    {"partition_index": 0, "committed_offset": offset, "committed_metadata": ""}
                ],
            }
        ],
    }
    response = client.call(ApiKey.OFFSET_COMMIT, 8, body)
    return int(response["topics"][0]["partitions"][0]["error_code"])


def logged_at(broker, text: str) -> float:
    """The time of the first log line with `text` (the log's own timestamp, ms)."""
    line = next(line for line in broker.log().splitlines() if text in line)
    stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
    return stamp.timestamp()


def run_chaos(corral_factory, scenario: Path, name: str) -> dict:
    broker = corral_factory(
        name,
        args=["--faults", str(scenario)],
        **{"corral.faults.enable": "true", "corral.faults.listen": "127.0.0.1:0"},
    )
    outcomes = []
    with RawClient(broker.port) as client:
        create(client, "chaos")
        # A fixed sequence: each record produced until acknowledged, then its offset committed
        # until acknowledged; every answer recorded.
        for i in range(40):
            while True:
                answer = produce(client, "chaos", 0, batch(1))
                outcomes.append(("produce", i, answer["error_code"]))
                if answer["error_code"] == ErrorCode.NONE:
                    break
            while True:
                code = commit(client, "replayed", i + 1)
                outcomes.append(("commit", i, code))
                if code == ErrorCode.NONE:
                    break
    listing = faults_of(broker).list()
    fired_lines = FIRED.findall(broker.log())
    return {"outcomes": outcomes, "listing": listing, "log": fired_lines}


def test_a_seeded_scenario_gives_the_same_faults_twice(corral_factory, tmp_path):
    scenario = tmp_path / "chaos.toml"
    scenario.write_text(CHAOS)
    first = run_chaos(corral_factory, scenario, "first")
    second = run_chaos(corral_factory, scenario, "second")
    assert first == second
    produce_fault, commit_fault = first["listing"]
    # Both faults fired, neither on every match: the probability drew.
    for fault in (produce_fault, commit_fault):
        assert 0 < fault["fired"] < fault["matched"], fault
        assert len(fault["fired_on"]) == fault["fired"]
        assert fault["probability"] == 0.3
    # What the client saw is what the faults say they did, request by request.
    produces = [code for what, _, code in first["outcomes"] if what == "produce"]
    assert produce_fault["matched"] == len(produces)
    hit = [n for n, code in enumerate(produces, 1) if code == ErrorCode.NOT_LEADER_OR_FOLLOWER]
    assert hit == produce_fault["fired_on"]
    commits = [code for what, _, code in first["outcomes"] if what == "commit"]
    hit = [n for n, code in enumerate(commits, 1) if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS]
    assert hit == commit_fault["fired_on"]
    # One log line per fired fault, in the order they fired.
    assert len(first["log"]) == produce_fault["fired"] + commit_fault["fired"]


def test_the_file_alone_injects_and_after_ms_starts_a_fault_later(corral_factory, tmp_path):
    scenario = tmp_path / "later.toml"
    scenario.write_text(
        "seed = 1\n"
        "[[fault]]\napi = 'ListGroups'\nerror = 'COORDINATOR_NOT_AVAILABLE'\ncount = 1\n"
        "[[fault]]\napi = 'ListGroups'\nerror = 'NOT_COORDINATOR'\ncount = 1\nafter_ms = 1500\n"
    )
    # The API listens but is not enabled: it refuses; the file's faults fire all the same.
    broker = corral_factory(
        args=["--faults", str(scenario)], **{"corral.faults.listen": "127.0.0.1:0"}
    )
    assert f"faults file {scenario}: 2 fault(s), seed 1" in broker.log()
    with RawClient(broker.port) as client:

        def list_groups() -> int:
            return int(client.call(ApiKey.LIST_GROUPS, 4, {})["error_code"])

        assert list_groups() == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert list_groups() == ErrorCode.NONE  # fault 1 done; fault 2 pending
        wait_until(lambda: "fault 2 started" in broker.log(), 10, "fault 2 started")
        assert logged_at(broker, "fault 2 started") - logged_at(broker, "faults file") >= 1.499
        assert list_groups() == ErrorCode.NOT_COORDINATOR
        assert list_groups() == ErrorCode.NONE
    assert "fault 1 fired (1 of 1): ListGroups v4" in broker.log()
    assert "fault 2 fired (1 of 1): ListGroups v4" in broker.log()
    try:
        faults_of(broker).list()
        raise AssertionError("the API is not enabled")
    except FaultsApiError as e:
        assert e.status == 403


def test_a_bad_file_stops_the_broker_naming_the_fault_and_field(tmp_path):
    scenario = tmp_path / "bad.toml"
    scenario.write_text(
        "seed = 1\n"
        "[[fault]]\napi = 'Produce'\nerror = 'NOT_LEADER_OR_FOLLOWER'\n"
        "[[fault]]\napi = 'OffsetCommit'\nerror = 'NOT_COORDINATOR'\nprobability = 3\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "corral.cli", "serve", "--listen", "127.0.0.1:0"]
        + ["--data-dir", str(tmp_path / "data"), "--faults", str(scenario)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.strip().endswith(
        f"corral: faults file {scenario}: [[fault]] number 2: "
        "probability: 3 is not a number in (0, 1]"
    ), done.stderr


def run_with_confluent(corral_factory, scenario: Path, name: str) -> list[dict]:
    """One record at a time, produced (and flushed) then consumed and committed synchronously:
    each request a client retries after an injected error is one more match of its fault."""
    broker = corral_factory(
        name,
        args=["--faults", str(scenario)],
        **FAST_GROUPS,
        **{"corral.faults.enable": "true", "corral.faults.listen": "127.0.0.1:0"},
    )
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("chaos", 1, 1)])["chaos"].result(timeout=10)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "retry.backoff.ms": 20})
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "replayed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["chaos"])
    try:
        for i in range(15):
            delivered = []
            producer.produce("chaos", b"%d" % i, on_delivery=lambda e, m: delivered.append(e))
            assert producer.flush(30) == 0 and delivered == [None]
            msg = None
            deadline = time.monotonic() + 20
            while msg is None and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is not None:
                    msg = None
            assert msg is not None and msg.value() == b"%d" % i
            [tp] = consumer.commit(message=msg, asynchronous=False)
            assert tp.offset == i + 1
    finally:
        consumer.close()
    return faults_of(broker).list()


def test_a_seeded_scenario_replays_with_a_real_client(corral_factory, tmp_path):
    scenario = tmp_path / "chaos.toml"
    scenario.write_text(
        CHAOS.replace('api = "OffsetCommit"', 'api = "OffsetCommit"\ngroup = "replayed"')
    )
    first = run_with_confluent(corral_factory, scenario, "first")
    second = run_with_confluent(corral_factory, scenario, "second")
    assert first == second
    assert all(0 < fault["fired"] < fault["matched"] for fault in first), first
