"""`corral load` driving corral's faults API (docs/faults.md) instead of its own tricks: failover
moves the group's coordinator (its shard unloaded, then loaded back from the log) where it would
run a restart command, and churn has members fenced by the coordinator where they would leave.
Both runs end with zero violations: no offset read back lower than acknowledged, no partition
owned twice, the group stable again."""

from __future__ import annotations

import pytest
from conftest import CorralProcess
from faultkit import faults_url
from loadkit import run_scenario

SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "corral.faults.enable": "true",
    "corral.faults.listen": "127.0.0.1:0",
}


@pytest.fixture
def broker(tmp_path):
    broker = CorralProcess(tmp_path / "corral", SETTINGS).start()
    broker.faults_url = faults_url(broker)
    yield broker
    broker.proc.kill()
    broker.proc.wait()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_failover_moves_the_coordinator_through_the_faults_api(broker, protocol):
    result = run_scenario(
        broker.bootstrap,
        "failover",
        "--members",
        "10",
        "--restart-at",
        "2",
        "--commit-interval",
        "0.5",
        "--duration",
        "60",
        "--heartbeat-interval-ms",
        "500",
        "--faults-url",
        broker.faults_url,
        "--move-ms",
        "1500",
        "--group-protocol",
        protocol,
    )
    assert result["failures"] == []
    assert result["violations"] == 0, result["violation_examples"]
    metrics = result["metrics"]
    assert metrics["restart_exit_code"] == 0
    assert metrics["restart_command_seconds"] >= 1.5
    assert metrics["stable_generation"] is not None and "timed_out" not in metrics
    assert result["latency_ms"]["OFFSET_FETCH"]["count"] >= 10  # every member read back
    # The members met the move: the coordinator answered NOT_COORDINATOR while it was away.
    away = {k.partition(":")[2] for k in (*result["errors"], *result["counts"])}
    assert away & {"NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS"}, result["errors"]
    assert "fired" in broker.log()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_churn_fences_members_through_the_faults_api(broker, protocol):
    result = run_scenario(
        broker.bootstrap,
        "churn",
        "--members",
        "12",
        "--churn-rate",
        "2",
        "--duration",
        "8",
        "--heartbeat-interval-ms",
        "500",
        "--faults-url",
        broker.faults_url,
        "--group-protocol",
        protocol,
    )
    assert result["failures"] == []
    assert result["violations"] == 0, result["violation_examples"]
    metrics = result["metrics"]
    assert metrics["fenced_and_rejoined"] > 0
    assert metrics["left_and_rejoined"] == 0
    assert metrics["rebalances_completed"] > 0
    if protocol == "classic":
        # A fenced member learns it on its next heartbeat, as after a session timeout (a KIP-848
        # member gave its partitions up first and rejoins at epoch 0: see ConsumerMember.give_up).
        told = {k.partition(":")[2] for k in (*result["errors"], *result["counts"])}
        assert "UNKNOWN_MEMBER_ID" in told, (result["errors"], result["counts"])
