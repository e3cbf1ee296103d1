"""`corral analyze` end to end, as a user runs it (`python -m corral.cli analyze ... --json`), on
the scripted scenario of tests/kits/analyze_scenario.py (groups that keep up, lag, stall, rewind,
stop, rebalance and churn on a schedule, with its ground truth):

- `--data-dir` on the session's corral: the statuses at each phase's end, the rebalances, the
  churn and the lag in seconds are the truth's; the report is written;
- the same with `--master spark://...` on a standalone Spark cluster on loopback
  (tests/kits/sparkcluster.py): the same tables as local;
- `--bootstrap` on the Apache Kafka 4.4 reference broker, sampling while the scenario runs and
  stopped with Ctrl-C: the same statuses, and the classic group's rebalances derived from
  Kafka's group metadata;
- refusals: bad usage exits 2, an unreadable source 1.

The tables are read back with pyarrow: what a user's own tools would read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path

import analyze_scenario as sc
import analyze_scenario_driver
import pyarrow.parquet as pq
import pytest
from kafka_java import kafka_reference
from sparkcluster import leftovers, standalone

CLI_TIMEOUT_S = 400
LOCAL = ["--master", "local[2]", "--conf", "spark.sql.shuffle.partitions=2"]
# Churn per event: a bucket of 1 ms dates each row by its event.
EXACT_BUCKETS = ["--bucket", "0.001"]
TABLES = (
    "partition_lag",
    "partition_status",
    "group_status",
    "rebalances",
    "member_churn",
    "assignment_skew",
    "commit_activity",
)


def analyze(
    *args: str, env: dict[str, str] | None = None, command: list[str] | None = None
) -> dict:
    command = command or [sys.executable, "-m", "corral.cli"]
    proc = subprocess.run(
        [*command, "analyze", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    return json.loads(proc.stdout)


def rows(out: Path, table: str) -> list[dict]:
    """A written table's rows, without its date partition column, sorted."""
    found = pq.read_table(out / table).drop_columns(["date"]).to_pylist()
    return sorted(found, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def timelines(out: Path) -> tuple[dict, dict]:
    partitions, groups = defaultdict(list), defaultdict(list)
    for r in rows(out, "partition_status"):
        partitions[(r["group"], r["topic"], r["partition"])].append((r["time_ms"], r["status"]))
    for r in rows(out, "group_status"):
        groups[r["group"]].append((r["time_ms"], r["status"]))
    for timeline in (*partitions.values(), *groups.values()):
        timeline.sort(key=lambda r: r[0])
    return partitions, groups


def check_statuses(truth: sc.Truth, out: Path) -> None:
    assert sc.phase_statuses(truth, *timelines(out)) == sc.expected_statuses(truth)


def check_rebalances(truth: sc.Truth, out: Path, groups: dict[str, str], start_known: bool) -> None:
    """Each membership group's rebalances in the scenario: members before and after as the
    truth has them, ended between the change and its being seen settled."""
    found = [r for r in rows(out, "rebalances") if truth.start_ms <= r["time_ms"] < truth.end_ms]
    for group in groups:
        expected = [r for r in truth.rebalances if r.group == group]
        got = sorted((r for r in found if r["group"] == group), key=lambda r: r["end_ms"])
        assert [(r["members_before"], r["members_after"]) for r in got] == [
            (r.members_before, r.members_after) for r in expected
        ], got
        for r, e in zip(got, expected):
            assert e.requested_ms <= r["end_ms"] <= e.settled_ms, (r, e)
            if start_known:
                assert e.requested_ms <= r["start_ms"] <= r["end_ms"], (r, e)
                assert r["duration_ms"] == r["end_ms"] - r["start_ms"]
                if groups[group] == "consumer":
                    assert r["cause"] == e.cause


def installed_command_outside_its_python() -> tuple[list[str], dict[str, str]]:
    """The installed `corral` run as from a virtualenv never activated (pipx, a systemd unit):
    PATH reaches a `python3` without corral (here Debian's own), from which Spark's Python
    workers must not be started (every task died with ModuleNotFoundError: No module named
    'corral')."""
    command = Path(sys.executable).parent / "corral"
    assert command.exists(), "the suite runs from the Python corral is installed in"
    path = "/usr/bin:/bin"
    python3 = subprocess.run(
        ["python3", "-c", "import corral"], env={"PATH": path}, capture_output=True, text=True
    )
    assert python3.returncode != 0, "PATH must not reach a python3 with corral for this test"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env["PATH"] = path
    return [str(command)], env


def test_data_dir(corral_scenario, tmp_path):
    broker, truth = corral_scenario
    out = tmp_path / "out"
    # The scenario's history (the broker goes on sampling): the cluster's run gives the same.
    window = ["--to", str(truth.end_ms)]
    command, env = installed_command_outside_its_python()
    summary = analyze(
        "--data-dir",
        str(broker.data_dir),
        "--out",
        str(out),
        *LOCAL,
        *EXACT_BUCKETS,
        *window,
        command=command,
        env=env,
    )
    assert summary["source"] == {"data_dir": str(broker.data_dir.resolve())}
    phases = summary["phases_s"]
    assert list(phases) == ["spark_start", "job", "small_tables", "summary", "report", "spark_stop"]
    # Each phase and the total are rounded to the millisecond: the sum may pass the total by
    # half a millisecond per phase.
    assert 0 < sum(phases.values()) <= summary["elapsed_s"] + 0.0005 * len(phases)
    for table in TABLES:
        assert summary["tables"][table] == len(rows(out, table)) > 0, table
    check_statuses(truth, out)
    check_rebalances(truth, out, sc.MEMBER_GROUPS, start_known=True)

    # churn: each membership group's joins, leaves, expiries and static replacements
    for group in sc.MEMBER_GROUPS:
        churn = [
            r
            for r in rows(out, "member_churn")
            if r["group"] == group and truth.start_ms <= r["time_ms"] < truth.end_ms
        ]
        wanted = [m.event for m in truth.memberships if m.group == group]
        assert sum(r["joins"] for r in churn) == wanted.count("member_joined")
        assert sum(r["leaves"] for r in churn) == wanted.count("member_left")
        assert sum(r["expired_session_timeout"] for r in churn) == wanted.count("member_expired")
        assert sum(r["static_replacements"] for r in churn) == wanted.count("member_fenced")
        assert sum(r["fencings"] for r in churn) == 0
        assert max(churn, key=lambda r: r["time_ms"])["members"] == 2  # 3, +1, -1, expired

    # lag in seconds within one sample interval (and the tick) of the truth
    interval = sc.CORRAL_SETTINGS["corral.analytics.sample.interval.ms"]
    checked = 0
    for r in rows(out, "partition_lag"):
        key = (r["group"], r["topic"], r["partition"])
        if key not in truth.roles or not truth.start_ms <= r["time_ms"] < truth.end_ms:
            continue
        if r["lag_records"] == 0:
            assert r["lag_seconds"] in (0.0, None), r
            continue
        reached = truth.reached_bounds(r["topic"], r["partition"], r["committed_offset"] + 1)
        if reached is None or r["lag_seconds"] is None:
            continue
        # The first record not consumed was produced in the tick `reached`.
        low, high = r["time_ms"] - reached[1] - interval, r["time_ms"] - reached[0] + interval
        assert low <= r["lag_seconds"] * 1000 <= high, (r, reached)
        checked += 1
    assert checked > 100

    # The summary: each group's last status and most lag, as the tables have them.
    _, groups = timelines(out)
    for group in sc.STATUS_GROUPS:
        lags = [r["lag_records"] for r in rows(out, "partition_lag") if r["group"] == group]
        assert summary["groups"][group]["status"] == groups[group][-1][1]
        assert summary["groups"][group]["max_lag_records"] == max(lags)
    report = (out / "report.html").read_text()
    assert report.count("data:image/png;base64,") >= 5 and "http://" not in report

    # The same directory on a standalone cluster: the same tables.
    cluster_out = tmp_path / "cluster-out"
    with standalone(tmp_path / "spark") as cluster:
        conf = [f"--conf={k}={v}" for k, v in cluster.conf().items()]
        analyze(
            "--data-dir",
            str(broker.data_dir),
            "--out",
            str(cluster_out),
            "--master",
            cluster.url,
            *conf,
            "--conf",
            "spark.sql.shuffle.partitions=2",
            *EXACT_BUCKETS,
            "--no-report",
            *window,
            env={**cluster.driver_env, "PYSPARK_PYTHON": sys.executable},
        )
        worker_logs = [
            f.read_text(errors="replace")
            for f in (cluster.directory / "work").glob("app-*/*/stderr")
        ]
        assert any("Running task" in log for log in worker_logs)
    assert leftovers(tmp_path / "spark") == []
    for table in TABLES:
        assert rows(cluster_out, table) == rows(out, table), table


@pytest.mark.kafka
def test_bootstrap_on_kafka(tmp_path):
    """Sampling runs while the scenario does, Ctrl-C ends it, then the history is read."""
    out = tmp_path / "out"
    with kafka_reference(sc.SETTINGS) as bootstrap:
        cli = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "corral.cli",
                "analyze",
                "--bootstrap",
                bootstrap,
                "--out",
                str(out),
                *LOCAL,
                *EXACT_BUCKETS,
                "--sample-for",
                "900",
                "--sample-interval",
                "0.25",
                "--json",
                "--log-level",
                "INFO",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        stderr: list[str] = []
        sampling = threading.Event()

        def follow() -> None:
            for line in cli.stderr:
                stderr.append(line)
                if "sampling log-end offsets" in line:
                    sampling.set()

        follower = threading.Thread(target=follow, daemon=True)
        follower.start()
        try:
            assert sampling.wait(60), "".join(stderr)
            truth = analyze_scenario_driver.run(bootstrap)
            cli.send_signal(signal.SIGINT)
            stdout = cli.communicate(timeout=CLI_TIMEOUT_S)[0]
        finally:
            if cli.poll() is None:
                cli.kill()
                cli.wait()
        follower.join(10)
    assert cli.returncode == 0, "".join(stderr)[-6000:]
    summary = json.loads(stdout)
    assert summary["landed"]["cluster"] == "kafka"
    assert summary["landed"]["sources"]["live samples"]["interrupted"] is True
    check_statuses(truth, out)
    classic = {g: p for g, p in sc.MEMBER_GROUPS.items() if p == "classic"}
    check_rebalances(truth, out, classic, start_known=False)


def test_refusals(tmp_path):
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "corral.cli", "analyze", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    out = str(tmp_path / "out")
    not_data = tmp_path / "empty"
    not_data.mkdir()
    bad = run("--data-dir", str(not_data), "--out", out, "--no-report")
    assert bad.returncode == 1 and "not a corral data directory" in bad.stderr
    assert (
        run(
            "--data-dir", str(not_data), "--out", out, "--from", "2026-01-02", "--to", "2026-01-01"
        ).returncode
        == 2
    )
    assert run("--data-dir", str(not_data), "--out", out, "--from", "yesterday").returncode == 2
    assert run("--data-dir", str(not_data), "--out", out, "--conf", "x").returncode == 2
    assert run("--out", out).returncode == 2  # a source is required
    closed = run("--bootstrap", "127.0.0.1:1", "--out", out, "--timeout", "2")
    assert closed.returncode == 1 and "127.0.0.1:1" in closed.stderr, closed.stderr
    assert not os.path.exists(os.path.join(out, "partition_lag"))
