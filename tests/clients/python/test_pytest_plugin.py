"""The pytest plugin of the wheel (corral/testing/plugin.py, docs/testing.md), used as a user uses
it: a pytest in a child process, in a directory of its own (none of this repo's conftest.py),
runs test files written here, and docs/testing.md's own example. The plugin is loaded by its
entry point when the installed corral declares one, else (an editable install older than the
entry point) by `-p corral.testing.plugin`, the module that pyproject.toml's entry point names
(checked here too). Also: loading the plugin imports nothing heavy."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import corral

ROOT = Path(__file__).resolve().parents[3]
PLUGIN = "corral.testing.plugin"

SESSION_TESTS = """
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from corral.faults.client import FaultsApiError
from corral.testing import EmbeddedCorral

SEEN = []


def test_the_session_broker_is_one_1(corral_session):
    SEEN.append(corral_session.bootstrap)
    assert corral_session.faults.list() == []


def test_the_session_broker_is_one_2(corral_session):
    SEEN.append(corral_session.bootstrap)
    assert len(set(SEEN)) == 1 and isinstance(corral_session, EmbeddedCorral)


def test_corral_is_fresh_and_different(corral, corral_session):
    assert corral.bootstrap != corral_session.bootstrap
    assert corral.alive()


def test_factory_settings_and_a_scenario_file(corral_factory, tmp_path):
    closed = corral_factory({"corral.faults.enable": False})
    try:
        closed.faults.list()
        raise AssertionError("the API is off")
    except FaultsApiError as e:
        assert e.status == 403
    chaos = tmp_path / "chaos.toml"
    chaos.write_text(
        "seed = 9\\n[[fault]]\\napi = 'OffsetCommit'\\nerror = 'COORDINATOR_LOAD_IN_PROGRESS'\\n"
        "count = 1\\n"
    )
    scripted = corral_factory(faults_file=chaos)
    [fault] = scripted.faults.list()
    assert (fault["id"], fault["api"], fault["active"]) == (1, "OffsetCommit", True)
    assert "faults file" in scripted.log()


def commit_three(broker, group):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("kept", 1, 1)])["kept"].result(timeout=10)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for n in range(3):
        producer.produce("kept", b"x")
    assert producer.flush(10) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["kept"])
    seen = 0
    deadline = time.monotonic() + 20
    while seen < 3 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen += 1
    assert seen == 3
    consumer.commit(asynchronous=False)
    consumer.close()


def committed(broker, group):
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        [tp] = consumer.committed([TopicPartition("kept", 0)], timeout=10)
        return tp.offset
    finally:
        consumer.close()


def test_a_commit_survives_kill_and_restart_on_the_same_address(corral):
    commit_three(corral, "keeper")
    address = corral.bootstrap
    corral.kill()
    assert not corral.alive()
    corral.restart()
    assert corral.bootstrap == address
    assert committed(corral, "keeper") == 3
    assert corral.stop() == 0
    corral.restart()
    assert committed(corral, "keeper") == 3
    assert corral.faults.list() == []
"""

FAILING_TEST = """
def test_that_fails(corral):
    corral.faults.add(api="Metadata", delay_ms=1, count=1)
    assert False, "on purpose"
"""


def run_pytest(directory: Path, name: str, text: str) -> subprocess.CompletedProcess[str]:
    """pytest in a child process, as a user runs it in `directory`, on a test module `text`
    written there as test_<name>."""
    module = f"test_{name}.py"
    (directory / module).write_text(text)
    declared = [ep for ep in entry_points(group="pytest11") if ep.value == PLUGIN]
    load = [] if declared else ["-p", PLUGIN]
    env = dict(os.environ)
    # The child imports this checkout's corral, as the test run does.
    src = str(Path(corral.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.run(
        [sys.executable, "-m", "pytest", *load, "-p", "no:cacheprovider", "-q", module],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_pyproject_declares_the_plugin_s_entry_point():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"corral": PLUGIN}
    # An installed corral that declares one names the same module.
    for ep in entry_points(group="pytest11"):
        if ep.name == "corral":
            assert ep.value == PLUGIN


def test_loading_the_plugin_imports_nothing_heavy():
    probe = (
        f"import sys, {PLUGIN}; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('trio', 'confluent_kafka', 'prometheus_client', 're2') or m in "
        "('corral._core', 'corral.testing.broker', 'corral.faults', 'corral.server')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]", out.stdout


def test_the_fixtures_as_a_user_gets_them(tmp_path):
    done = run_pytest(tmp_path, "user", SESSION_TESTS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\b5 passed\b", done.stdout), done.stdout


def test_the_example_of_docs_testing_md_passes(tmp_path):
    text = (ROOT / "docs" / "testing.md").read_text()
    example = re.search(r"```python\n(.*?)```", text, re.S)
    assert example and "def test_a_commit_is_retried" in example.group(1)
    done = run_pytest(tmp_path, "example", example.group(1))
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\b1 passed\b", done.stdout), done.stdout


def test_a_failed_test_shows_the_broker_s_log(tmp_path):
    done = run_pytest(tmp_path, "failing", FAILING_TEST)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "corral log" in done.stdout and "fault 1 added: api=Metadata" in done.stdout
