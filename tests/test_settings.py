"""The settings loader: TOML file, CORRAL_* environment, --set flags, precedence, bad values."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from corral.cli import main
from corral.config import ConfigError, ConfigSource, Settings
from corral.apis import ApiKey
from conftest import LISTENING
from rawwire import RawClient


def write(tmp_path, text: str):
    path = tmp_path / "corral.toml"
    path.write_text(text)
    return str(path)


def test_defaults_are_kafkas_except_num_partitions():
    s = Settings.load(environ={})
    assert s["socket.request.max.bytes"] == 104857600
    assert s["auto.create.topics.enable"] is True
    assert s["num.partitions"] == 4
    assert s["log.retention.ms"] == 604800000
    assert s.explicit == set()


def test_toml_file_flat_and_nested_keys(tmp_path):
    path = write(tmp_path, '"num.partitions" = 8\n"auto.create.topics.enable" = false\n'
                           '[socket]\n"request.max.bytes" = 4096\n')
    s = Settings.load(path, environ={})
    assert (s["num.partitions"], s["auto.create.topics.enable"], s["socket.request.max.bytes"]) == (8, False, 4096)
    assert s.explicit == {"num.partitions", "auto.create.topics.enable", "socket.request.max.bytes"}


def test_environment_names(tmp_path):
    s = Settings.load(environ={"CORRAL_NUM_PARTITIONS": "12", "CORRAL_AUTO_CREATE_TOPICS_ENABLE": "FALSE",
                               "CORRAL_UNRELATED": "x", "NUM_PARTITIONS": "99"})
    assert (s["num.partitions"], s["auto.create.topics.enable"]) == (12, False)


def test_precedence_flags_over_environment_over_file_over_defaults(tmp_path):
    path = write(tmp_path, '"num.partitions" = 2\n"log.retention.ms" = 5\n"message.max.bytes" = 7\n')
    env = {"CORRAL_NUM_PARTITIONS": "3", "CORRAL_LOG_RETENTION_MS": "6"}
    s = Settings.load(path, {"num.partitions": "9"}, environ=env)
    assert s["num.partitions"] == 9          # flag beats env and file
    assert s["log.retention.ms"] == 6        # env beats file
    assert s["message.max.bytes"] == 7       # file beats default
    assert s["log.segment.bytes"] == 1073741824


@pytest.mark.parametrize("name, value, message", [
    ("num.partitions", "many", "num.partitions: expected an integer, got 'many'"),
    ("num.partitions", "0", r"num.partitions: 0 is outside \[1, 100000\]"),
    ("auto.create.topics.enable", "yes", "auto.create.topics.enable: expected true or false"),
    ("socket.request.max.bytes", "-1", "socket.request.max.bytes: -1 is outside"),
    ("log.message.timestamp.type", "Now", "'Now' is not one of CreateTime, LogAppendTime"),
    ("no.such.setting", "1", "unknown setting 'no.such.setting'"),
])
def test_bad_values_are_rejected_with_the_setting_named(name, value, message):
    with pytest.raises(ConfigError, match=message):
        Settings.load(overrides={name: value}, environ={})


def test_bad_toml_types_are_rejected(tmp_path):
    path = write(tmp_path, '"num.partitions" = true\n')
    with pytest.raises(ConfigError, match="num.partitions: expected an integer, got True"):
        Settings.load(path, environ={})


def test_bad_environment_value_names_the_setting():
    with pytest.raises(ConfigError, match="node.id: expected an integer"):
        Settings.load(environ={"CORRAL_NODE_ID": "one"})


@pytest.mark.parametrize("argv, message", [
    (["--set", "num.partitions=lots"], "corral: num.partitions: expected an integer, got 'lots'"),
    (["--set", "num.partitions"], "corral: --set wants NAME=VALUE, got 'num.partitions'"),
    (["--set", "nope=1"], "corral: unknown setting 'nope'"),
    (["--config", "/nonexistent/corral.toml"], "corral: [Errno 2] No such file or directory"),
    (["--listen", "nowhere"], "corral: listeners: listener 'PLAINTEXT://nowhere' is not HOST:PORT"),
    (["--set", "advertised.listeners=x:y"], "corral: advertised.listeners: listener 'x:y' is not HOST:PORT"),
])
def test_cli_rejects_bad_settings_with_exit_code_2(capsys, tmp_path, argv, message):
    assert main(["serve", "--data-dir", str(tmp_path / "d"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message), err
    assert "Traceback" not in err


def test_cli_rejects_a_malformed_toml_file(capsys, tmp_path):
    path = write(tmp_path, "num.partitions = = 3\n")
    assert main(["serve", "--data-dir", str(tmp_path / "d"), "--config", path]) == 2
    assert capsys.readouterr().err.startswith(f"corral: {path}: Invalid value (at line 1")


def test_cli_exit_code_in_a_real_process(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "corral.cli", "serve", "--set", "num.partitions=-3"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "corral: num.partitions: -3 is outside [1, 100000]"
    assert not (tmp_path / "corral-data").exists()


def start_broker(tmp_path, args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, int]:
    log_path = tmp_path / "serve.log"
    cmd = [sys.executable, "-m", "corral.cli", "serve", "--listen", "127.0.0.1:0",
           "--data-dir", str(tmp_path / "data"), *args]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env})
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and proc.poll() is None:
        if match := LISTENING.search(log_path.read_text()):
            return proc, int(match.group(2))
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(log_path.read_text())


def test_file_environment_and_flags_reach_the_running_broker(tmp_path):
    """The values a client reads back through DescribeConfigs are the loaded ones."""
    path = write(tmp_path, '"num.partitions" = 2\n"log.retention.ms" = 1234\n')
    proc, port = start_broker(tmp_path, ["--config", path, "--set", "log.segment.bytes=1048576"],
                              {"CORRAL_NUM_PARTITIONS": "3"})
    try:
        with RawClient(port) as client:
            body = {"resources": [{"resource_type": 4, "resource_name": "1", "configuration_keys": None}],
                    "include_synonyms": False, "include_documentation": False}
            [result] = client.call(ApiKey.DESCRIBE_CONFIGS, 4, body)["results"]
            [topic] = client.call(ApiKey.METADATA, 12, {"topics": [{"name": "fresh"}]})["topics"]
    finally:
        proc.terminate()
        assert proc.wait(10) == 0
    configs = {c["name"]: (c["value"], c["config_source"]) for c in result["configs"]}
    static, default = ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG
    assert configs["num.partitions"] == ("3", static)
    assert configs["log.retention.ms"] == ("1234", static)
    assert configs["log.segment.bytes"] == ("1048576", static)
    assert configs["message.max.bytes"] == ("1048588", default)
    assert len(topic["partitions"]) == 3


@pytest.mark.parametrize("overrides, message", [
    ({"group.consumer.session.timeout.ms": 1000},
     "group.consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
    ({"group.consumer.session.timeout.ms": 90000},
     "group.consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
    ({"group.consumer.min.heartbeat.interval.ms": 20000},
     "group.consumer.max.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
    ({"group.consumer.assignment.interval.ms": 20000},
     "group.consumer.assignment.interval.ms must be less than or equal to group.consumer.max.assignment.interval.ms"),
    ({"group.consumer.session.timeout.ms": 5000, "group.consumer.min.session.timeout.ms": 5000},
     "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms"),
])
def test_consumer_group_settings_bounds(overrides, message):
    with pytest.raises(ConfigError, match=message):
        Settings.load(overrides=overrides, environ={})
