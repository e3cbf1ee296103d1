"""`corral analyze`'s Spark job end to end on a generated history (benches/analyze_history.py):
read the inputs, `analyze`, `write_tables`, on Spark local[2].

    CORRAL_ANALYZE_BENCH_COMMITS=10000000 python -m pytest benches/test_analyze_bench.py -s
    CORRAL_ANALYZE_BENCH_COMMITS=50000000 python -m pytest benches/test_analyze_bench.py -s

The goal (issue 16): >= 1,000,000 commit records/s, time linear in the history (compare 10 M and
50 M). Environment:
- CORRAL_ANALYZE_BENCH_COMMITS: history size (default 20,000: a smoke run in seconds);
- CORRAL_ANALYZE_BENCH_DIR: where the history and the tables go (default a new directory under
  /tmp, deleted afterwards; 50 M commits take ~4 GB of segments plus ~0.4 GB of Parquet);
- CORRAL_ANALYZE_BENCH_MEMORY: spark.driver.memory (default 8g).

The inputs are read from the segments by `corral.analyze.segments` (`--data-dir`). One round: the history is generated once (outside
the timing), and a second round would only measure Spark's caches. Prints commits/s.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from analyze_history import generate  # noqa: E402

COMMITS = int(os.environ.get("CORRAL_ANALYZE_BENCH_COMMITS", "20000"))


@pytest.fixture(scope="module")
def history():
    given = os.environ.get("CORRAL_ANALYZE_BENCH_DIR")
    root = Path(given) if given else Path(tempfile.mkdtemp(prefix="corral-analyze-bench-",
                                                           dir="/tmp"))
    started = time.monotonic()
    stats = generate(root / "data", COMMITS)
    print(f"\nhistory: {stats} in {time.monotonic() - started:.1f}s")
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def spark():
    from corral.analyze import session
    # Shuffle partitions: a few tasks per core at any size (AQE merges small ones); the Arrow
    # batch and cache settings are session.start's.
    spark = session.start("local[2]", "corral-analyze-bench", {
        "spark.driver.memory": os.environ.get("CORRAL_ANALYZE_BENCH_MEMORY", "8g"),
        "spark.sql.shuffle.partitions": str(max(4, COMMITS // 2_000_000)),
    })
    yield spark
    session.stop(spark)


def _inputs(spark, root: Path):
    from corral.analyze import segments
    return segments.read_data_dir(spark, str(root / "data"), None, None)


def test_analyze_end_to_end(benchmark, spark, history):
    from corral.analyze.job import analyze, write_tables

    def run():
        inputs = _inputs(spark, history)
        tables = analyze(inputs.commits, inputs.samples)
        write_tables(tables, str(history / "tables"))
        return tables

    started = time.monotonic()
    tables = benchmark.pedantic(run, rounds=1, iterations=1)
    elapsed = time.monotonic() - started
    rows = {name: spark.read.parquet(str(history / "tables" / name)).count()
            for name in tables._fields}
    benchmark.extra_info.update(commits=COMMITS, seconds=elapsed, rows=rows,
                                commits_per_s=COMMITS / elapsed)
    print(f"\n{COMMITS} commits in {elapsed:.1f}s: {COMMITS / elapsed:,.0f} commits/s; rows {rows}")
    assert rows["partition_lag"] >= COMMITS // 8  # one row per commit time of each key at least
