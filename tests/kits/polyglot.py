"""The Go and Node client programs of the tests (tests/clients/go: franz-go and sarama; tests/clients/node:
kafkajs): built on first use into the jar cache, kept per source text, and their command lines.

Outside pytest: `python tests/kits/polyglot.py build` builds both, as CI setup does (Go modules come
from the Go proxy as go.sum pins them, kafkajs from npm as package-lock.json pins it).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benches"))
from checkout import GO, NODE
from kafka_ref import CACHE

HERE = Path(__file__).resolve().parent
GO_SOURCES = GO
NODE_SOURCES = NODE
NODE_MEMBER = NODE_SOURCES / "member.js"
GO_CLIENTS = ("franz-go", "sarama")
CLIENTS = (*GO_CLIENTS, "kafkajs")


def _digest(files: list[Path]) -> str:
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def go_members() -> Path:
    """The Go program (tests/clients/go/main.go), built once per source text."""
    sources = [*GO_SOURCES.glob("*.go"), GO_SOURCES / "go.mod", GO_SOURCES / "go.sum"]
    binary = CACHE / f"go-members-{_digest(sources)}" / "members"
    if not binary.exists():
        tmp = binary.with_name(binary.name + ".tmp")
        binary.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["go", "build", "-mod=readonly", "-o", str(tmp), "."],
            cwd=GO_SOURCES,
            check=True,
            capture_output=True,
        )
        tmp.rename(binary)
    return binary


def node_modules() -> Path:
    """kafkajs installed (`npm ci`, as package-lock.json pins it) once per lock file."""
    lock = [NODE_SOURCES / "package.json", NODE_SOURCES / "package-lock.json"]
    home = CACHE / f"node-members-{_digest(lock)}"
    if not (home / "node_modules" / "kafkajs").exists():
        tmp = home.with_name(home.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for f in lock:
            shutil.copy(f, tmp / f.name)
        subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=tmp,
            check=True,
            capture_output=True,
        )
        shutil.rmtree(home, ignore_errors=True)
        tmp.rename(home)
    return home / "node_modules"


def member_command(
    client: str, config: dict, command: str | None = None
) -> tuple[list[str], dict[str, str]]:
    """The command line (and environment) of a process of `client`: members, or the one-shot
    `command` ("produce", "commit", "admin")."""
    words = [command] if command else []
    if client in GO_CLIENTS:
        return [str(go_members()), *words, json.dumps({**config, "client": client})], dict(
            os.environ
        )
    if client == "kafkajs":
        return (
            ["node", str(NODE_MEMBER), *words, json.dumps(config)],
            {**os.environ, "NODE_PATH": str(node_modules())},
        )
    raise ValueError(client)


def produce(client: str, config: dict, timeout: float = 90) -> dict:
    """Produces `config["count"]` records with `client`: its one-line JSON answer
    ({"produced": n} or {"error": text})."""
    return _run(client, "produce", config, timeout)


def commit(client: str, config: dict, timeout: float = 90) -> dict:
    """franz-go's read-then-CommitOffsetsSync of tests/clients/go/franz.go (franzCommit): its
    report ({"consumed", "commit_error", "commit_ms", "committed"} or {"error": text})."""
    return _run(client, "commit", config, timeout)


def txn(config: dict, timeout: float = 120) -> dict:
    """franz-go's transactions and read-committed consumer (tests/clients/go/franz_txn.go): its
    report ({"committed", "seen"} or {"error": text})."""
    return _run("franz-go", "txn", config, timeout)


def admin(client: str, config: dict, timeout: float = 90) -> dict:
    """The admin calls of tests/clients/go/admin.go (and member.js) with `client`: their report."""
    return _run(client, "admin", config, timeout)


def _run(client: str, command: str, config: dict, timeout: float) -> dict:
    cmd, env = member_command(client, config, command)
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    lines = run.stdout.strip().splitlines()
    assert lines, (
        f"{client} {command} printed nothing (exit {run.returncode}): {run.stderr[-3000:]}"
    )
    answer = json.loads(lines[-1])
    if "error" in answer:
        answer["stderr"] = run.stderr[-3000:]
    return answer


if __name__ == "__main__":
    if sys.argv[1:] == ["build"]:
        print(go_members())
        print(node_modules())
    else:
        sys.exit("usage: python tests/kits/polyglot.py build")
