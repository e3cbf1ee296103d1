"""The analyze job on a real standalone Spark cluster (tests/sparkcluster.py: a master and a
worker from pyspark's own sbin script, on loopback) gives the same tables as local[2].

The cluster's driver runs in a subprocess: this process already holds the `spark` fixture's
local SparkContext (conftest.py), and a process can have only one. It reads landed inputs
(corral.analyze.inputs.read_landed) and writes the tables as Parquet (job.write_tables, date
partitions), as `corral analyze --master` does; the test reads them back into the local session
and compares them with the job run there on the same inputs."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from corral.analyze.analytics_records import EVENTS, SAMPLES
from corral.analyze.inputs import read_landed
from corral.analyze.job import Tables, analyze
from sparkcluster import leftovers, standalone

DRIVER = """
import json, sys
from corral.analyze import inputs, job, session
master, landed, out, conf = sys.argv[1:]
spark = session.start(master, "corral-analyze-cluster-test", json.loads(conf))
try:
    read = inputs.read_landed(spark, landed)
    job.write_tables(job.analyze(read.commits, read.samples), out)
finally:
    session.stop(spark)
"""
DRIVER_TIMEOUT_S = 300
# Across a UTC midnight, so that the tables have two date partitions.
MIDNIGHT_MS = 1_795_564_800_000  # 2026-11-25T00:00:00Z
TOPICS = {"orders": 3, "payments": 2}
GROUPS = {"billing": ["orders", "payments"], "audit": ["orders"], "search": ["payments"]}
# inputs.COMMITS_SCHEMA as Arrow.
COMMITS = pa.schema([("group", pa.string()), ("topic", pa.string()), ("partition", pa.int32()),
                     ("time_ms", pa.int64()), ("offset", pa.int64()), ("seq", pa.int64())])


def history(seed: int = 16) -> tuple[list[tuple], list[tuple]]:
    """Commits (group, topic, partition, time_ms, offset, seq) and samples (topic, partition,
    time_ms, log_end_offset, log_start_offset, seq) over two minutes: log ends rising by bursts,
    consumers keeping up, lagging, stalling, rewinding and pausing, some commits at equal times."""
    rng = random.Random(seed)
    start = MIDNIGHT_MS - 60_000
    samples, ends = [], {}
    for topic, n in TOPICS.items():
        for p in range(n):
            end = 0
            for t in range(start, start + 120_000, 1000):
                end += rng.choice([0, 0, 5, 20, 60])
                samples.append((topic, p, t, end, 0, len(samples)))
                ends[(topic, p, t)] = end
    commits = []
    for group, topics in GROUPS.items():
        for topic in topics:
            for p in range(TOPICS[topic]):
                offset, t = 0, start + rng.randrange(0, 3000)
                while t < start + 120_000:
                    end = ends[(topic, p, t - t % 1000)]
                    offset = rng.choice([offset, offset, end, max(0, end - 30),
                                         max(0, offset - 40), min(end, offset + 10)])
                    commits.append((group, topic, p, t, offset, len(commits)))
                    t += rng.choice([0, 700, 1500, 4000, 9000])
    return commits, samples


def land(directory: Path, commits: list[tuple], samples: list[tuple]) -> None:
    """The inputs as `--bootstrap` lands them (Parquet, read back by read_landed), in several
    files each so that the cluster reads them in several tasks."""
    for name, rows, schema in (("commits", commits, COMMITS), ("samples", samples, SAMPLES),
                               ("events", [], EVENTS)):
        (directory / name).mkdir(parents=True)
        for i in range(3):
            part = rows[i::3]
            columns = list(zip(*part)) if part else [[] for _ in schema]
            pq.write_table(pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(columns, schema)],
                                                schema=schema), directory / name / f"part-{i}.parquet")


def test_cluster_gives_the_local_tables(spark, tmp_path):
    commits, samples = history()
    landed, out = tmp_path / "inputs", tmp_path / "out"
    land(landed, commits, samples)
    cluster_dir = tmp_path / "spark"
    with standalone(cluster_dir) as cluster:
        assert cluster.url.startswith("spark://127.0.0.1:")
        conf = {**cluster.conf(), "spark.sql.shuffle.partitions": "2",
                "spark.sql.adaptive.enabled": "false"}
        driver = subprocess.Popen([sys.executable, "-c", DRIVER, cluster.url, str(landed), str(out),
                                   json.dumps(conf)], cwd=cluster.directory, env=cluster.driver_env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        # The local tables meanwhile (the cluster's JVMs spend much of their start waiting).
        read = read_landed(spark, str(landed))
        local = {name: df.collect() for name, df in analyze(read.commits, read.samples)._asdict().items()}
        output = driver.communicate(timeout=DRIVER_TIMEOUT_S)[0]
        assert driver.returncode == 0, output[-6000:]
        # The tasks ran in the worker's executor, Python workers included.
        logs = [f.read_text(errors="replace") for f in (cluster_dir / "work").glob("app-*/*/stderr")]
        assert any("Running task" in log for log in logs), logs
    assert leftovers(cluster_dir) == []

    assert len({r.status for r in local["partition_status"]}) >= 4
    for name in Tables._fields:
        written = spark.read.parquet(str(out / name)).collect()
        assert {r.date.isoformat() for r in written} == {"2026-11-24", "2026-11-25"}, name
        assertDataFrameEqual([Row(**{k: v for k, v in r.asDict().items() if k != "date"})
                              for r in written], local[name])
