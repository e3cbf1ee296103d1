"""Settings reaching a real `corral serve` process: a bad setting ends it with exit code 2, and the
TOML file, CORRAL_* environment and --set flags reach the running broker (checked over TCP). (The
loader itself, in process: tests/unit/config/test_settings.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from conftest import LISTENING
from rawwire import RawClient

from corral.config.settings import ConfigSource
from corral.network.apis import ApiKey


def write(tmp_path, text: str):
    path = tmp_path / "corral.toml"
    path.write_text(text)
    return str(path)


def test_cli_exit_code_in_a_real_process(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "corral.cli", "serve", "--set", "num.partitions=-3"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == "corral: num.partitions: -3 is outside [1, 100000]"
    assert not (tmp_path / "corral-data").exists()


def start_broker(tmp_path, args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, int]:
    log_path = tmp_path / "serve.log"
    cmd = [
        sys.executable,
        "-m",
        "corral.cli",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        str(tmp_path / "data"),
        *args,
    ]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env}
        )
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
    proc, port = start_broker(
        tmp_path,
        ["--config", path, "--set", "log.segment.bytes=1048576"],
        {"CORRAL_NUM_PARTITIONS": "3"},
    )
    try:
        with RawClient(port) as client:
            body = {
                "resources": [
                    {"resource_type": 4, "resource_name": "1", "configuration_keys": None}
                ],
                "include_synonyms": False,
                "include_documentation": False,
            }
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
