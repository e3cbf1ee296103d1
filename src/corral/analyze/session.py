"""The SparkSession of `corral analyze`: local[*] by default, any master by `--master`."""

from __future__ import annotations

import os
import sys

from pyspark import SparkContext
from pyspark.sql import SparkSession


def start(
    master: str = "local[*]", app: str = "corral-analyze", conf: dict[str, str] | None = None
) -> SparkSession:
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        # Measured at 5 M commits (docs/benchmarks.md): bigger Arrow batches halve the Python
        # side's time, an uncompressed cache saves the JVM ~25 %.
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "200000")
        .config("spark.sql.inMemoryColumnarStorage.compressed", "false")
        # The report reads a few dozen groups' rows by `group IN (...)`; beyond this many values
        # Spark hands Parquet only the range min..max, which skips nothing.
        .config("spark.sql.parquet.pushdown.inFilterThreshold", "64")
        # The driver's JVM lives for one run and its heavy per-row work happens in the Python
        # tasks: the C2 compiler's warm-up cost more than it gave back (measured: the report
        # 11.3 -> 8.0 s, the lag job 27.6 -> 26.6 s at 50 M commits). --conf replaces it.
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
    )
    if master.startswith("local"):
        # Nothing but this process talks to a local driver, and its Python workers are this
        # Python (the one corral is installed in), not whatever `python3` is on PATH (an
        # installed `corral` run from a virtualenv that is not activated). PySpark takes the
        # workers' interpreter from PYSPARK_PYTHON when the context starts; the RDD path the job
        # uses ignores spark.pyspark.python. A user's own PYSPARK_PYTHON is kept.
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1"
        )
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # else a warning about the hostname
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for name, value in (conf or {}).items():
        builder = builder.config(name, value)
    spark = builder.getOrCreate()
    if "spark.sql.shuffle.partitions" not in (conf or {}):
        # Spark's 200 is made for big shuffles; after the job's tasks (which never shuffle by
        # this setting) only small tables and the report's aggregates are left.
        spark.conf.set(
            "spark.sql.shuffle.partitions", str(4 * spark.sparkContext.defaultParallelism)
        )
    return spark


def stop(spark: SparkSession) -> None:
    """Stop the session and its JVM (stop() alone leaves the JVM for a next session; its gateway
    server exits at EOF on stdin), so a later session launches a new one."""
    gateway = spark.sparkContext._gateway
    spark.stop()
    gateway.shutdown()
    SparkContext._gateway = SparkContext._jvm = None
    gateway.proc.stdin.close()
    gateway.proc.wait(timeout=60)
