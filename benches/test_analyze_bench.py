"""`corral analyze --data-dir` end to end on a generated history (benches/analyze_history.py):
the command as a user runs it, in its own process, from the segments to the tables, the report
and the `--json` summary, Spark's start included (local[*] on this machine: local[2]).

    CORRAL_ANALYZE_BENCH_COMMITS=10000000 python -m pytest benches/test_analyze_bench.py -s
    CORRAL_ANALYZE_BENCH_COMMITS=50000000 python -m pytest benches/test_analyze_bench.py -s

The goal (issue 16): >= 1,000,000 commit records/s, time linear in the history (compare 10 M and
50 M). Environment:
- CORRAL_ANALYZE_BENCH_COMMITS: history size (default 20,000: a smoke run in seconds);
- CORRAL_ANALYZE_BENCH_DIR: where the history and the tables go (default a new directory under
  /tmp, deleted afterwards; 50 M commits take ~3.6 GB of segments plus ~1.5 GB of tables); a
  given directory is kept, and its history reused by a run of the same size;

One round: the history is generated once (outside the timing); a second run would measure the
page cache. Prints commits/s.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from analyze_history import generate

COMMITS = int(os.environ.get("CORRAL_ANALYZE_BENCH_COMMITS", "20000"))


@pytest.fixture(scope="module")
def history():
    given = os.environ.get("CORRAL_ANALYZE_BENCH_DIR")
    root = (
        Path(given) if given else Path(tempfile.mkdtemp(prefix="corral-analyze-bench-", dir="/tmp"))
    )
    made = root / "history.json"
    if not (made.exists() and json.loads(made.read_text())["commits"] == COMMITS):
        started = time.monotonic()
        shutil.rmtree(root / "data", ignore_errors=True)
        stats = generate(root / "data", COMMITS)
        made.write_text(json.dumps(stats))
        print(f"\nhistory: {stats} in {time.monotonic() - started:.1f}s")
    yield root
    if not given:
        shutil.rmtree(root, ignore_errors=True)


def test_analyze_end_to_end(benchmark, history):
    out = history / "out"
    command = [
        sys.executable,
        "-c",
        "from corral.cli import main; main()",
        "analyze",
        "--data-dir",
        str(history / "data"),
        "--out",
        str(out),
        "--json",
    ]

    def run():
        done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout)

    started = time.monotonic()
    summary = benchmark.pedantic(run, rounds=1, iterations=1)
    elapsed = time.monotonic() - started
    rows, phases = summary["tables"], summary["phases_s"]
    tables_s = phases["job"] + phases["small_tables"]  # from the segments to every table
    benchmark.extra_info.update(
        commits=COMMITS,
        seconds=elapsed,
        rows=rows,
        phases=phases,
        commits_per_s=COMMITS / elapsed,
        tables_commits_per_s=COMMITS / tables_s,
    )
    print(
        f"\n{COMMITS} commits in {elapsed:.1f}s: {COMMITS / elapsed:,.0f} commits/s end to end; "
        f"the tables in {tables_s:.1f}s: {COMMITS / tables_s:,.0f} commits/s; phases {phases}; "
        f"rows {rows}"
    )
    assert rows["partition_lag"] >= COMMITS // 8  # one row per commit time of each key at least
    assert sum(g["status"] is not None for g in summary["groups"].values()) == len(
        summary["groups"]
    )
    assert (out / "report.html").stat().st_size > 10_000
