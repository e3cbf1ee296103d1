"""The README's promises, checked so that they cannot rot."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(), re.S)


def test_client_example_runs_against_corral(corral):
    [example] = [b for b in code_blocks("python") if "AdminClient" in b]
    assert "127.0.0.1:9092" in example
    script = example.replace("127.0.0.1:9092", corral.bootstrap)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "orders" in result.stdout
    assert "created topic orders (8 partitions" in corral.log()


def test_the_two_commands_at_the_top_exist():
    [commands] = code_blocks("sh")[:1]
    lines = [line for line in commands.splitlines() if line and not line.startswith("#")]
    assert lines == ["pip install . && corral serve", "bash ci/test.sh"]
    assert (README.parent / "ci/test.sh").exists()
    assert 'corral = "corral.cli:main"' in (README.parent / "pyproject.toml").read_text()

