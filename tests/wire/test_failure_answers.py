"""Clear failures instead of silent hangs: one broker per data directory, ids in log lines cannot
forge lines, and start-up mistakes end in one line and a non-zero exit."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest
from conftest import CorralProcess


def test_second_broker_on_a_data_dir_exits_with_one_line(corral, tmp_path):
    second = CorralProcess(corral.data_dir)
    second.log_path = tmp_path / "second.log"
    with pytest.raises(RuntimeError, match="exited with 1"):
        second.start()
    lines = [line for line in second.log().strip().splitlines() if " INFO " not in line]
    assert len(lines) == 1 and "in use by another corral" in lines[0], lines
    # The first broker is untouched, and still owns the directory after a clean restart.
    assert corral.alive()
    corral.restart()
    assert corral.alive()


def run_cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "corral.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def one_line_error(run: subprocess.CompletedProcess) -> str:
    assert run.returncode != 0, run
    assert "Traceback" not in run.stderr, run.stderr
    # Start-up INFO lines may come first; the failure itself is one line.
    lines = [line for line in run.stderr.splitlines() if line.strip() and " INFO " not in line]
    assert len(lines) == 1, run.stderr
    return lines[0]


def test_port_in_use_is_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = run_cli("serve", "--listen", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "d"))
    assert "cannot listen on 127.0.0.1" in one_line_error(run)


def test_unusable_data_dir_is_one_line(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    run = run_cli("serve", "--listen", "127.0.0.1:0", "--data-dir", str(not_a_dir / "data"))
    assert "data directory" in one_line_error(run)


def test_unreadable_config_is_one_line(tmp_path):
    run = run_cli(
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        str(tmp_path / "d"),
        "--config",
        str(tmp_path / "missing.toml"),
    )
    assert "missing.toml" in one_line_error(run)
    bad = tmp_path / "bad.toml"
    bad.write_text("num.partitions = = 3\n")
    run = run_cli(
        "serve", "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "d"), "--config", str(bad)
    )
    assert "bad.toml" in one_line_error(run)


def test_bad_log_level_is_one_line(tmp_path):
    run = run_cli(
        "serve", "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "d"), "--log-level", "LOUD"
    )
    assert "log-level" in one_line_error(run)


def test_ids_in_log_lines_cannot_forge_lines(corral):
    from rawwire import RawClient
    from wire_groups import join

    forged = "g\n2026-01-01 00:00:00,000 ERROR corral.forged member was never here\r"
    with RawClient(corral.port) as client:
        response = join(client, forged)
    assert response["error_code"] == 0, response
    deadline = time.monotonic() + 10
    while "stabilized group" not in corral.log() and time.monotonic() < deadline:
        time.sleep(0.1)
    log = corral.log()
    assert "stabilized group g\\x0a2026" in log, log[-2000:]
    assert not any(line.startswith("2026-01-01") for line in log.splitlines())


def test_a_stopped_network_thread_shuts_the_broker_down(tmp_path):
    # In process: the network thread is made to stop as if its poll failed (fault injection);
    # serve() must shut everything down cleanly and raise, so the process exits non-zero.
    import trio

    from corral.broker import BrokerFailed
    from corral.config.settings import Settings
    from corral.server import Server

    server = Server(
        Settings({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "d")})
    )

    async def main():
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                await nursery.start(server.serve)
                server.reactor.inject_failure("injected")

    with pytest.raises(BrokerFailed, match="injected"):
        trio.run(main)
    # The shutdown was clean: the log store left its marker.
    assert (tmp_path / "d" / ".corral-clean-shutdown").exists()
