"""`corral serve --listen HOST:PORT` is short for `listeners=PLAINTEXT://HOST:PORT`: given together
with `listeners` (--set, CORRAL_LISTENERS or the --config file) one of them would be dropped, so
the real command refuses the pair in one line, exit 2, before it touches the data dir; --listen
alone, or saying what listeners already says, starts the broker."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from conftest import LISTENER


def serve(tmp_path, *args: str, env: dict[str, str] | None = None) -> tuple[int | None, str]:
    """Runs `corral serve` until it exits or says where it listens: (exit code or None, output)."""
    log_path = tmp_path / "serve.log"
    cmd = [sys.executable, "-m", "corral.cli", "serve", "--data-dir", str(tmp_path / "data"), *args]
    environ = {k: v for k, v in os.environ.items() if k != "CORRAL_LISTENERS"} | (env or {})
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=environ)
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return proc.returncode, log_path.read_text()
            if LISTENER.search(log_path.read_text()):
                return None, log_path.read_text()
            time.sleep(0.05)
        raise AssertionError(f"corral neither exited nor listened:\n{log_path.read_text()}")
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(10)


SASL = "SASL_PLAINTEXT://127.0.0.1:0"


@pytest.mark.parametrize("source", ["--set", "CORRAL_LISTENERS", "file"])
def test_listen_with_listeners_elsewhere_is_refused(tmp_path, source):
    args, env, named = ["--listen", "127.0.0.1:0"], {}, source
    if source == "--set":
        args += ["--set", f"listeners={SASL}"]
    elif source == "CORRAL_LISTENERS":
        env["CORRAL_LISTENERS"] = SASL
    else:
        config = tmp_path / "server.properties"
        config.write_text(f"listeners={SASL}\n")
        args += ["--config", str(config)]
        named = str(config)
    code, output = serve(tmp_path, *args, env=env)
    assert code == 2, output
    assert output == (
        f"corral: --listen 127.0.0.1:0 would replace listeners={SASL} "
        f"(from {named}); name every listener in listeners instead, e.g. --set "
        f"listeners=PLAINTEXT://127.0.0.1:0,{SASL}\n"
    )
    assert not (tmp_path / "data").exists()


def test_the_suggestion_moves_a_plaintext_listener_to_the_listen_address(tmp_path):
    code, output = serve(
        tmp_path, "--listen", "127.0.0.1:0", "--set", f"listeners=PLAINTEXT://0.0.0.0:9092,{SASL}"
    )
    assert code == 2, output
    assert output.rstrip().endswith(f"e.g. --set listeners=PLAINTEXT://127.0.0.1:0,{SASL}")


def test_listen_saying_what_listeners_says_starts(tmp_path):
    code, output = serve(
        tmp_path, "--listen", "127.0.0.1:0", "--set", "listeners=PLAINTEXT://127.0.0.1:0"
    )
    assert code is None, output
    assert [m.group(1) for m in LISTENER.finditer(output)] == ["PLAINTEXT"]
