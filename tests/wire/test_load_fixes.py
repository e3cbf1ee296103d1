"""`corral load` against a real corral: a ramp that runs out of --duration before saturation says
so and exits 3; --cleanup deletes only what the run created; --no-cleanup keeps it. (The KIP-394
step not counted as an error, the default names and the cleanup of default runs are checked by
tests/wire/test_load_generator.py against corral and Kafka.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import trio
from cgkit import create_topics
from confluent_kafka import Consumer, TopicPartition
from conftest import CorralProcess
from loadkit import run_scenario

from corral.ops.admin import Admin


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    broker = CorralProcess(
        tmp_path_factory.mktemp("loadfix") / "corral", {"group.initial.rebalance.delay.ms": "0"}
    ).start()
    yield broker.bootstrap
    broker.proc.kill()
    broker.proc.wait()


def groups_and_topics(bootstrap: str) -> tuple[set[str], set[str]]:
    async def ask():
        async with Admin(bootstrap) as admin:
            return (
                {g["group_id"] for g in await admin.list_groups()},
                set(await admin.metadata(None)),
            )

    return trio.run(ask)


def test_ramp_out_of_time_exits_3(bootstrap, tmp_path):
    """The group is stable but the ramp has not started (--settle-seconds past --duration): no
    step measured, nothing saturated."""
    out = tmp_path / "r.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "corral.cli",
            "load",
            "--bootstrap",
            bootstrap,
            "--scenario",
            "heartbeat",
            "--members",
            "5",
            "--duration",
            "3",
            "--settle-seconds",
            "30",
            "--quiet",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr
    assert "ran out of time (--duration 3 s) after 0 step(s)" in done.stderr
    result = json.loads(out.read_text())
    assert result["metrics"]["stopped_by"] == "duration"
    assert result["metrics"]["saturation_reached"] is False
    assert "lower bound" in result["unfinished"]
    assert json.loads(done.stdout)["unfinished"] == result["unfinished"]


def test_ramp_stopping_itself_for_time(bootstrap):
    """The ramp's own check: the next step would not fit in --duration (a bound no step reaches,
    a rate the generator keeps up with easily). The first step ends about 4 s after the group is
    stable (0.25 s warm-up, 3 s measured, up to 1 s for the last samples to arrive): before the
    run's 8 s deadline if the group took under 3 s, and a second step could not fit.

    Each member heartbeats every 0.5 s: an answer delayed by a busy machine costs a heartbeat
    only when it is 0.5 s late. (At 200/s, every 50 ms, a machine busy with other builds had
    the step at 155/s, p99 200 ms: rate_not_achieved, the ramp saturated before its time.)"""
    result = run_scenario(
        bootstrap,
        "heartbeat",
        "--members",
        "10",
        "--duration",
        "8",
        "--settle-seconds",
        "0",
        "--start-rate",
        "20",
        "--step-seconds",
        "3",
        "--p99-bound-ms",
        "10000",
        "--heartbeat-interval-ms",
        "500",
    )
    metrics = result["metrics"]
    assert metrics["stopped_by"] == "duration", metrics["steps"]
    assert len(metrics["steps"]) == 1 and metrics["sustained_per_s"] > 0
    assert result["unfinished"].startswith(
        "the ramp ran out of time (--duration 8 s) after 1 step(s)"
    )


def test_heartbeat_ramp_with_its_defaults_in_10_s(bootstrap, tmp_path):
    """200 members, --duration 10, nothing else: the plan fits the time (x16 per step from the
    members' normal 67/s), is said up front, and each step is reported as it ends; the ramp
    completes steps (before: the default 10 s settling alone outlasted the run, exit 3 after 0
    steps). The 3rd step, 17,067/s, or the 4th, 273,067/s, saturates the broker or the generator:
    exit 0 (a machine too busy for the 3rd step gets a lower bound, exit 3)."""
    out = tmp_path / "r.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "corral.cli",
            "load",
            "--bootstrap",
            bootstrap,
            "--scenario",
            "heartbeat",
            "--members",
            "200",
            "--duration",
            "10",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    result = json.loads(out.read_text())
    metrics, lines = result["metrics"], done.stderr.splitlines()
    steps = metrics["steps"]
    assert done.returncode in (0, 3), done.stderr
    assert result["violations"] == 0 and result["failures"] == []
    assert steps, done.stderr
    plan = metrics["plan"]
    assert plan["factor"] == 16 and plan["rates"][:2] == [66.7, 1066.7], plan
    assert [s["target"] for s in steps if s["phase"] == "climb"] == plan["rates"][
        : len([s for s in steps if s["phase"] == "climb"])
    ], steps
    # Up front, the plan; when the ramp starts, the plan for the time left; a line per step.
    assert "] ramp plan: x16 per step from 67/s: 67, 1.1k" in lines[0], done.stderr
    assert "] ramp starts" in lines[1], done.stderr
    reported = [line for line in lines if "] step " in line]
    planned = len(plan["rates"]) + plan["confirm_steps"] + plan["refine_steps"]
    assert [line.split("] step ")[1].split()[0] for line in reported] == [
        f"{i + 1}/{max(planned, i + 1)}" for i in range(len(steps))
    ], done.stderr
    assert f"{steps[0]['target']:,.0f}/s -> {steps[0]['achieved']:,.0f}/s achieved" in reported[0]
    if done.returncode == 3:  # no time for the step that saturates: a lower bound, said so
        assert metrics["stopped_by"] == "duration" and "lower bound" in lines[-1], done.stderr
    else:
        assert metrics["saturation_reached"], done.stderr
        assert "ramp done: " in done.stderr and "saturated the broker" in done.stderr


def test_cleanup_keeps_what_existed_before(bootstrap):
    create_topics(bootstrap, {"kept-topic": 4})
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "kept-group", "enable.auto.commit": False}
    )
    consumer.commit(offsets=[TopicPartition("kept-topic", 0, 1)], asynchronous=False)
    consumer.close()
    result = run_scenario(
        bootstrap,
        "join-storm",
        "--members",
        "4",
        "--group",
        "kept-group",
        "--topic",
        "kept-topic",
        "--duration",
        "30",
    )
    assert result["metrics"]["stable"] is True
    assert result["cleanup"] == {"deleted_groups": [], "deleted_topics": [], "not_deleted": {}}
    groups, topics = groups_and_topics(bootstrap)
    assert "kept-group" in groups and "kept-topic" in topics


def test_cleanup_of_a_named_new_group_and_no_cleanup(bootstrap):
    result = run_scenario(
        bootstrap, "join-storm", "--members", "4", "--group", "fresh", "--duration", "30"
    )
    assert result["parameters"]["topic"] == "corral-load-fresh"
    assert result["cleanup"] == {
        "deleted_groups": ["fresh"],
        "deleted_topics": ["corral-load-fresh"],
        "not_deleted": {},
    }
    groups, topics = groups_and_topics(bootstrap)
    assert "fresh" not in groups and "corral-load-fresh" not in topics

    result = run_scenario(
        bootstrap,
        "join-storm",
        "--members",
        "4",
        "--group",
        "kept-after",
        "--duration",
        "30",
        "--no-cleanup",
    )
    assert "cleanup" not in result
    groups, topics = groups_and_topics(bootstrap)
    assert "kept-after" in groups and "corral-load-kept-after" in topics
