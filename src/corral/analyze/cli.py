"""`corral analyze`: consumer-lag and rebalance analytics over a whole history, on Spark.

    corral analyze --data-dir DIR --out OUT          # a corral data directory (broker up or not)
    corral analyze --bootstrap HOST:PORT --out OUT   # any live Kafka-compatible cluster

The inputs (corral.analyze.inputs) are read from corral's segments, or consumed from the cluster
and landed as Parquet under OUT/inputs first; the job (corral.analyze.job, .tables) writes every
table as Parquet under OUT/<table>, partitioned by date, and OUT/report.html. Progress goes to
stderr; `--json` prints a summary on stdout.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

EXIT_FAILED, EXIT_USAGE = 1, 2
TABLE_ORDER = (
    "partition_lag",
    "partition_status",
    "group_status",
    "rebalances",
    "member_churn",
    "assignment_skew",
    "commit_activity",
)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "analyze",
        help="consumer-lag and rebalance analytics (Spark; pip install corral[analyze])",
        description="Lag in records and seconds, Burrow's statuses, rebalances, churn, assignment "
        "skew and commit activity of every group over the whole history, as Parquet "
        "tables and one HTML report. Exits 1 when the source cannot be read, 2 on "
        "bad usage or without pyspark.",
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--data-dir", metavar="DIR", help="a corral data directory")
    source.add_argument(
        "--bootstrap",
        metavar="HOST:PORT",
        help="a live cluster: corral or any Kafka-compatible broker",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="where tables and report go")
    p.add_argument(
        "--master",
        default="local[*]",
        metavar="URL",
        help="Spark master (default local[*]; e.g. spark://host:7077)",
    )
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a Spark setting, as spark-submit's --conf (repeatable), e.g. "
        "--conf spark.executor.memory=4g",
    )
    p.add_argument(
        "--from",
        dest="from_time",
        metavar="TIME",
        type=parse_time,
        help="keep what happened at or after TIME (ISO 8601, UTC unless it says, or "
        "ms since the epoch)",
    )
    p.add_argument(
        "--to",
        dest="to_time",
        metavar="TIME",
        type=parse_time,
        help="keep what happened before TIME",
    )
    p.add_argument(
        "--sample-for",
        type=float,
        default=None,
        metavar="SECONDS",
        help="--bootstrap: sample log-end offsets live for this long (default 30, "
        "or 0 when the cluster keeps __corral_analytics)",
    )
    p.add_argument(
        "--sample-interval",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="--bootstrap: seconds between live samples (default 5)",
    )
    p.add_argument(
        "--bucket",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="time bucket of member_churn and commit_activity (default 60)",
    )
    p.add_argument(
        "--burrow-compatible",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Burrow's STOP rule as Burrow has it (default); --no-burrow-compatible: "
        "no STOP while the log end has not moved (docs/analytics-rules.md)",
    )
    p.add_argument("--no-report", action="store_true", help="tables only, no report.html")
    p.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="--bootstrap: seconds per request (default 30)",
    )
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    p.add_argument("--log-level", default="WARNING")


def parse_time(text: str) -> int:
    """ms since the epoch, from ms digits or ISO 8601 (naive times are UTC)."""
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        t = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a time: {text!r} (ISO 8601 or ms)") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=datetime.UTC)
    return int(t.timestamp() * 1000)


def main(args: argparse.Namespace) -> int:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("corral analyze: pyspark is missing: pip install 'corral[analyze]'", file=sys.stderr)
        return EXIT_USAGE
    if args.from_time is not None and args.to_time is not None and args.from_time >= args.to_time:
        print("corral analyze: --from must be before --to", file=sys.stderr)
        return EXIT_USAGE
    conf = dict(item.partition("=")[::2] for item in args.conf)
    if any("=" not in item for item in args.conf):
        print("corral analyze: --conf wants NAME=VALUE", file=sys.stderr)
        return EXIT_USAGE
    args.conf = conf
    from corral.analyze.progress import Progress

    with Progress(enabled=not args.json) as progress:
        try:
            summary = run(args, progress)
        except SourceError as e:
            progress.stop()
            print(f"corral analyze: {e}", file=sys.stderr)
            return EXIT_FAILED
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print_summary(summary)
    return 0


class SourceError(Exception):
    """The source could not be read (unreachable cluster, missing or unreadable directory)."""


def run(args: argparse.Namespace, progress) -> dict[str, Any]:
    """The whole pipeline; returns the summary `--json` prints."""
    from corral.analyze import inputs as inputs_mod
    from corral.analyze import job, session, tables

    started = time.monotonic()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {
        "out": str(out.resolve()),
        "master": args.master,
        "from_ms": args.from_time,
        "to_ms": args.to_time,
    }
    if args.bootstrap:
        summary["source"] = {"bootstrap": args.bootstrap}
        with progress.step("consuming the cluster's history") as step:
            summary["landed"] = _land(args, str(out / "inputs"), step)
    else:
        data_dir = Path(args.data_dir)
        if not any(data_dir.glob("__consumer_offsets-*")):
            raise SourceError(
                f"{data_dir} is not a corral data directory (no __consumer_offsets partitions)"
            )
        summary["source"] = {"data_dir": str(data_dir.resolve())}

    reading = None
    if not args.bootstrap:  # __corral_analytics read on the driver while Spark starts
        from corral.analyze.inputs.segments import read_data_dir

        reader = ThreadPoolExecutor(1)
        reading = reader.submit(read_data_dir, args.data_dir, args.from_time, args.to_time)
        reader.shutdown(wait=False)
    phases = summary["phases_s"] = {}
    lap = _Lap(phases)
    with progress.step("starting Spark"):
        spark = session.start(args.master, conf=args.conf)
    lap("spark_start")
    try:
        spark.sparkContext.setLogLevel("ERROR")
        with progress.spark_step("analyzing", spark):
            bucket_ms = int(args.bucket * 1000)
            options = {"burrow_compatible": args.burrow_compatible, "bucket_ms": bucket_ms}
            if reading is None:
                read = inputs_mod.in_window(
                    inputs_mod.read_landed(spark, str(out / "inputs")), args.from_time, args.to_time
                )
                analyzed = job.analyze(read.commits, read.samples, str(out), **options)
                events = read.events
            else:
                split = reading.result()
                analyzed = job.analyze_data_dir(
                    spark,
                    args.data_dir,
                    split.samples,
                    str(out),
                    from_ms=args.from_time,
                    to_ms=args.to_time,
                    **options,
                )
                events = spark.createDataFrame(split.events)
            # Small tables (made of the events and the tasks' counts), used by the writes, the
            # summary and the report at once: each computed once, cached.
            lap("job")
            derived = {
                name: df.cache()
                for name, df in tables.derive(
                    events,
                    analyzed.tables.partition_lag,
                    analyzed.work["_commit_counts"],
                    bucket_ms,
                ).items()
            }
            job.write_tables(derived, str(out))
            lap("small_tables")
        with progress.spark_step("writing the report", spark):
            summary["groups"] = _group_summary(
                analyzed.work["_group_summary"], derived["rebalances"]
            )
            lap("summary")
            if not args.no_report:
                from corral.analyze.report import write_report

                write_report(
                    {**analyzed.tables._asdict(), **derived, **analyzed.work},
                    str(out / "report.html"),
                    _title(summary),
                )
                lap("report")
        summary["tables"] = {
            name: _rows(out / name) for name in (*analyzed.tables._fields, *derived)
        }
        if not args.no_report:
            summary["report"] = str((out / "report.html").resolve())
        job.remove_work(str(out))
    finally:
        session.stop(spark)
    lap("spark_stop")
    summary["elapsed_s"] = round(time.monotonic() - started, 3)
    return summary


class _Lap:
    """Seconds since the previous lap, by name (the `--json` summary's `phases_s`)."""

    def __init__(self, phases: dict[str, float]):
        self.phases = phases
        self.last = time.monotonic()

    def __call__(self, name: str) -> None:
        now = time.monotonic()
        self.phases[name] = round(now - self.last, 3)
        self.last = now


def _land(args: argparse.Namespace, directory: str, step) -> dict[str, Any]:
    from corral.analyze.inputs.ingest import IngestError, land

    try:
        return land(
            args.bootstrap,
            directory,
            sample_for_s=args.sample_for,
            sample_interval_s=args.sample_interval,
            from_ms=args.from_time,
            to_ms=args.to_time,
            timeout_s=args.timeout,
            progress=step.update,
        )
    except IngestError as e:
        raise SourceError(str(e)) from e


def _rows(table_dir: Path) -> int:
    """Rows of a written table, from the Parquet footers only."""
    import pyarrow.dataset as ds

    return ds.dataset(str(table_dir), format="parquet", partitioning="hive").count_rows()


def _group_summary(group_summary, rebalances) -> dict[str, dict[str, Any]]:
    """Per group: its last status, and the most lag it had (records, seconds)."""
    from pyspark.sql import functions as F

    counts = rebalances.groupBy("group").agg(F.count("*").alias("rebalances"))
    rows = (
        group_summary.select(
            "group", F.col("last_status").alias("status"), "max_lag_records", "max_lag_seconds"
        )
        .join(counts, "group", "full")
        .orderBy("group")
        .collect()
    )
    return {
        r["group"]: {
            "status": r["status"],
            "max_lag_records": r["max_lag_records"],
            "max_lag_seconds": r["max_lag_seconds"],
            "rebalances": r["rebalances"] or 0,
        }
        for r in rows
    }


def _title(summary: dict[str, Any]) -> str:
    source = summary["source"]
    return f"corral analyze: {source.get('bootstrap') or source.get('data_dir')}"


def _print_summary(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    tables = Table("table", "rows", box=None, header_style="bold")
    for name in sorted(summary["tables"], key=_table_rank):
        tables.add_row(name, f"{summary['tables'][name]:,}")
    console.print(tables)
    groups = Table(
        "group", "status", "max lag", "max lag (s)", "rebalances", box=None, header_style="bold"
    )
    for name, g in summary["groups"].items():
        seconds = g["max_lag_seconds"]
        groups.add_row(
            name,
            g["status"] or "-",
            _dash(g["max_lag_records"]),
            "-" if seconds is None else f"{seconds:.1f}",
            str(g["rebalances"]),
        )
    console.print(groups)
    console.print(
        f"tables in {summary['out']}"
        + (f", report {summary['report']}" if "report" in summary else "")
        + f" ({summary['elapsed_s']:.1f} s)"
    )


def _table_rank(name: str) -> int:
    return TABLE_ORDER.index(name) if name in TABLE_ORDER else len(TABLE_ORDER)


def _dash(value) -> str:
    return "-" if value is None else f"{value:,}"
