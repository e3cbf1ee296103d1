"""The HTML report of `corral analyze`: one self-contained file (PNG plots as base64 `data:`
URIs, no external script, style or font) over the output tables.

Everything is aggregated in Spark first: time buckets (at most MAX_COLUMNS per plot, whatever
the history's span), the top groups and partitions, histogram bins; only those bounded results
reach the driver, which draws them with matplotlib (its Agg canvas, no pyplot state). A table
that is missing or empty gives "no data" in its sections.

The big tables (partition_lag, group_status: a few rows per commit) are never scanned whole: the
top groups and partitions and the history's span come from the job's summaries
(`_key_summary`, `_group_summary`, corral.analyze.job.WORK), and the plots read only the chosen
groups' rows (the files are sorted by group, so Parquet's row-group statistics skip the rest).
"""

from __future__ import annotations

import base64
import datetime
import html
import io
import math
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import reduce
from typing import Any

import numpy as np
from matplotlib import colors, ticker
from matplotlib import dates as mdates
from matplotlib.figure import Figure
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

MAX_COLUMNS = 120  # time buckets per plot
SECTION_THREADS = 4
TOP_PARTITIONS = 30  # rows of the lag heatmap
TOP_GROUPS = 8  # lines of the p99 plot
RIBBON_GROUPS = 20  # rows of the status ribbon
TABLE_ROWS = 10
# Plot buckets: the smallest of these at least span / MAX_COLUMNS wide.
_STEPS_MS = [
    s * 1000
    for s in (
        1,
        2,
        5,
        10,
        15,
        30,
        60,
        120,
        300,
        600,
        900,
        1800,
        3600,
        7200,
        10800,
        21600,
        43200,
        86400,
        172800,
        604800,
    )
]
STATUS_RANKS = {"OK": 1, "WARN": 2, "ERR": 3, "STOP": 4, "STALL": 5, "REWIND": 6}
_STATUS_COLORS = ["#2e7d32", "#f9a825", "#c62828", "#6a1b9a", "#ef6c00", "#1565c0"]
_NO_DATA = '<p class="nodata">no data</p>'
_DRAWING = threading.Lock()
_STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
th { background: #f0f0f0; } td.n { text-align: right; }
p.nodata { color: #888; font-style: italic; } img { max-width: 100%; }
"""


def write_report(tables: Mapping[str, DataFrame], path: str, title: str) -> None:
    """Writes the report of `tables` (by name: partition_lag, group_status, rebalances,
    member_churn, assignment_skew, commit_activity, _key_summary, _group_summary; any may be
    missing) to `path`."""
    span = _span(tables)
    parts = [
        ("lag-heatmap", "Lag heatmap (partitions with the highest lag)", _lag_heatmap, True),
        ("p99-lag", "Top groups by p99 lag, with rebalances", _p99_lag, True),
        ("status-ribbon", "Group status over time", _status_ribbon, True),
        ("rebalance-durations", "Rebalance durations", _rebalance_durations, False),
        ("member-churn", "Member churn", _member_churn, True),
        ("worst-groups", "Worst groups", _worst_groups, False),
        ("longest-rebalances", "Longest rebalances", _longest_rebalances, False),
        ("skewed-assignments", "Most skewed assignments", _skewed_assignments, False),
        ("commit-activity", "Commit activity", _commit_activity, False),
    ]
    # The sections' Spark queries are small and mostly waiting (scheduling, reading footers):
    # run at once, they overlap. Drawing takes turns (_DRAWING).
    with ThreadPoolExecutor(SECTION_THREADS) as pool:
        contents = [
            pool.submit(make, tables, span) if spanned else pool.submit(make, tables)
            for _, _, make, spanned in parts
        ]
        sections = [(sid, name, done.result()) for (sid, name, _, _), done in zip(parts, contents)]
    when = "no data" if span is None else f"{_utc(span[0])} to {_utc(span[1])} UTC"
    body = "".join(
        f'<section id="{sid}"><h2>{html.escape(name)}</h2>{content}</section>\n'
        for sid, name, content in sections
    )
    page = (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>\n"
        f"<h1>{html.escape(title)}</h1><p>History: {html.escape(when)}.</p>\n{body}"
        f"</body></html>\n"
    )
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)


# -- time buckets -------------------------------------------------------------------------------


class _Span(tuple):
    """(first ms, last ms, bucket width ms) of the whole history."""

    def bucket(self, column: str = "time_ms"):
        return F.floor((F.col(column) - self[0]) / self[2]).cast("long").alias("bucket")

    @property
    def buckets(self) -> int:
        return int((self[1] - self[0]) // self[2]) + 1

    def times(self) -> list[datetime.datetime]:
        """Bucket edges, as datetimes (buckets + 1 of them)."""
        return [_dt(self[0] + i * self[2]) for i in range(self.buckets + 1)]


def _span(tables: Mapping[str, DataFrame]) -> _Span | None:
    times = [
        tables[name].select(F.col("time_ms").alias("first"), F.col("time_ms").alias("last"))
        for name in ("rebalances", "member_churn", "commit_activity")
        if name in tables
    ]
    if "_group_summary" in tables:  # the span of partition_lag and group_status
        times.append(
            tables["_group_summary"].select(
                F.col("first_ms").alias("first"), F.col("last_ms").alias("last")
            )
        )
    if not times:
        return None
    first, last = reduce(DataFrame.unionAll, times).agg(F.min("first"), F.max("last")).first()
    if first is None:
        return None
    wanted = max(1, math.ceil((last - first + 1) / MAX_COLUMNS))
    width = next((s for s in _STEPS_MS if s >= wanted), math.ceil(wanted / 86_400_000) * 86_400_000)
    return _Span((first - first % width, last, width))


def _dt(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).replace(tzinfo=None)


def _utc(ms: int | None) -> str:
    return "" if ms is None else _dt(ms).strftime("%Y-%m-%d %H:%M:%S")


# -- plots --------------------------------------------------------------------------------------


def _png(fig: Figure, alt: str) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _time_axis(ax) -> None:
    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.set_xlabel("time (UTC)")


def _grid(span: _Span, labels: list[str], matrix: np.ndarray, **mesh):
    """A figure of one row per label over the time buckets (NaN cells left blank)."""
    fig = Figure(figsize=(11, 1.3 + 0.28 * len(labels)))
    ax = fig.subplots()
    drawn = ax.pcolormesh(
        mdates.date2num(span.times()),
        np.arange(len(labels) + 1),
        np.ma.masked_invalid(matrix),
        shading="flat",
        **mesh,
    )
    ax.set_yticks(np.arange(len(labels)) + 0.5, labels, fontsize=7)
    ax.invert_yaxis()
    ax.xaxis_date()
    _time_axis(ax)
    return fig, ax, drawn


def _filled(cells: dict[tuple[Any, int], float], keys: list, buckets: int) -> np.ndarray:
    """A keys x buckets matrix of the cells, each value carried forward over empty buckets
    (lag and status hold until their next row); NaN before a key's first cell."""
    matrix = np.full((len(keys), buckets), np.nan)
    for i, key in enumerate(keys):
        last = np.nan
        for b in range(buckets):
            last = cells.get((key, b), last)
            matrix[i, b] = last
    return matrix


def _lag_heatmap(tables, span) -> str:
    lag, summary = tables.get("partition_lag"), tables.get("_key_summary")
    if span is None or lag is None or summary is None:
        return _NO_DATA
    key = ["group", "topic", "partition"]
    top = (
        summary.where(F.col("max_lag_records").isNotNull())
        .orderBy(F.desc("max_lag_records"), *key)
        .limit(TOP_PARTITIONS)
        .collect()
    )
    keys = [tuple(r[:3]) for r in top]
    if not keys:
        return _NO_DATA
    # The chosen groups' partitions, the others dropped here (a few per group).
    cells = (
        lag.where(F.col("group").isin(sorted({k[0] for k in keys})))
        .groupBy(*key, span.bucket())
        .agg(F.max("lag_records").alias("lag"))
        .collect()
    )
    matrix = _filled(
        {(tuple(r[:3]), r["bucket"]): r["lag"] for r in cells if r["lag"] is not None},
        keys,
        span.buckets,
    )
    norm = colors.SymLogNorm(linthresh=1, vmin=0, vmax=max(1, np.nanmax(matrix)))
    with _DRAWING:  # matplotlib's font and text caches are not thread-safe
        fig, _, mesh = _grid(
            span, [f"{g}  {t}-{p}" for g, t, p in keys], matrix, cmap="magma_r", norm=norm
        )
        fig.colorbar(mesh, label="lag (records)")
        return _png(fig, "lag heatmap")


def _p99_lag(tables, span) -> str:
    lag, summary = tables.get("partition_lag"), tables.get("_group_summary")
    if span is None or lag is None or summary is None:
        return _NO_DATA
    top = (
        summary.where(F.col("p99_lag_seconds").isNotNull())
        .orderBy(F.desc("p99_lag_seconds"), "group")
        .limit(TOP_GROUPS)
    )
    groups = [r["group"] for r in top.collect()]
    if not groups:
        return '<p class="nodata">no data (no lag in seconds: too few log-end samples)</p>'
    lines = (
        lag.where(F.col("group").isin(groups) & F.col("lag_seconds").isNotNull())
        .groupBy("group", span.bucket())
        .agg(F.percentile_approx("lag_seconds", 0.99).alias("p99"))
        .collect()
    )
    marks = []
    rebalances = tables.get("rebalances")
    if rebalances is not None:
        marks = (
            rebalances.where(F.col("group").isin(groups) & F.col("time_ms").isNotNull())
            .groupBy("group", span.bucket())
            .count()
            .collect()
        )
    with _DRAWING:  # matplotlib's font and text caches are not thread-safe
        fig = Figure(figsize=(11, 4.5))
        ax = fig.subplots()
        edges = span.times()
        mid = [edges[b] + (edges[1] - edges[0]) / 2 for b in range(span.buckets)]
        top_value = max(r["p99"] for r in lines) or 1.0
        for i, group in enumerate(groups):
            color = f"C{i % 10}"
            points = sorted((r["bucket"], r["p99"]) for r in lines if r["group"] == group)
            ax.plot(
                [mid[b] for b, _ in points],
                [v for _, v in points],
                marker=".",
                color=color,
                label=group,
            )
            starts = [r["bucket"] for r in marks if r["group"] == group]
            ax.scatter(
                [mid[b] for b in starts],
                [top_value * (1.04 + 0.03 * i)] * len(starts),
                marker="v",
                color=color,
                s=30,
            )
        ax.set_ylabel("p99 lag (s)")
        ax.set_title("▼ rebalance starts", fontsize=8, loc="right")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
        _time_axis(ax)
        return _png(fig, "top groups by p99 lag")


def _status_ribbon(tables, span) -> str:
    status, summary = tables.get("group_status"), tables.get("_group_summary")
    if span is None or status is None or summary is None:
        return _NO_DATA
    top = (
        summary.where(F.col("worst_status").isNotNull())
        .orderBy(F.desc(_rank("worst_status")), F.desc("not_ok_rows"), "group")
        .limit(RIBBON_GROUPS)
    )
    groups = [r["group"] for r in top.collect()]
    if not groups:
        return _NO_DATA
    ranked = status.withColumn("rank", _rank("status"))
    # The status at a bucket's end: that of the last row in it (the worst among equal times).
    cells = (
        ranked.where(F.col("group").isin(groups))
        .groupBy("group", span.bucket())
        .agg(F.max_by("rank", F.struct("time_ms", "rank")).alias("rank"))
        .collect()
    )
    matrix = _filled({(r["group"], r["bucket"]): r["rank"] for r in cells}, groups, span.buckets)
    cmap = colors.ListedColormap(_STATUS_COLORS)
    norm = colors.BoundaryNorm(np.arange(0.5, len(STATUS_RANKS) + 1), cmap.N)
    with _DRAWING:  # matplotlib's font and text caches are not thread-safe
        fig, ax, _ = _grid(span, groups, matrix, cmap=cmap, norm=norm)
        shown = sorted({int(v) for v in matrix[~np.isnan(matrix)]})
        names = {r: name for name, r in STATUS_RANKS.items()}
        handles = [
            ax.scatter([], [], marker="s", color=_STATUS_COLORS[r - 1], label=names[r])
            for r in shown
        ]
        ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
        return _png(fig, "group status ribbon")


def _rank(column: str):
    return F.coalesce(*(F.when(F.col(column) == name, r) for name, r in STATUS_RANKS.items()))


def _rebalance_durations(tables) -> str:
    rebalances = tables.get("rebalances")
    if rebalances is None:
        return _NO_DATA
    ended = rebalances.where(F.col("duration_ms").isNotNull())
    summary = ended.agg(
        F.count("*").alias("n"),
        F.percentile_approx("duration_ms", [0.5, 0.99]).alias("p"),
        F.max("duration_ms").alias("max"),
    ).first()
    if not summary["n"]:
        return _NO_DATA
    # Log bins, 5 per decade, of durations in ms (0 ms counts with 1 ms).
    bin_ = F.floor(F.log10(F.greatest(F.col("duration_ms"), F.lit(1))) * 5).cast("int")
    bins = sorted(
        (r["bin"], r["count"]) for r in ended.groupBy(bin_.alias("bin")).count().collect()
    )
    with _DRAWING:  # matplotlib's font and text caches are not thread-safe
        fig = Figure(figsize=(8, 3.5))
        ax = fig.subplots()
        lefts = [10 ** (b / 5) / 1000 for b, _ in bins]
        widths = [10 ** ((b + 1) / 5) / 1000 - left for (b, _), left in zip(bins, lefts)]
        ax.bar(
            lefts, [c for _, c in bins], width=widths, align="edge", color="C0", edgecolor="white"
        )
        ax.set_xscale("log")
        ax.set_xlabel("duration (s)")
        ax.set_ylabel("rebalances")
        ax.yaxis.set_major_locator(ticker.MaxNLocator(integer=True))
        p50, p99 = summary["p"]
        text = (
            f"<p>{summary['n']} ended rebalances: median {p50 / 1000:.3f} s, p99 "
            f"{p99 / 1000:.3f} s, longest {summary['max'] / 1000:.3f} s.</p>"
        )
        return text + _png(fig, "rebalance durations")


def _member_churn(tables, span) -> str:
    churn = tables.get("member_churn")
    if span is None or churn is None:
        return _NO_DATA
    expired = (
        F.col("expired_session_timeout")
        + F.col("expired_rebalance_timeout")
        + F.col("expired_sync_timeout")
    )
    rows = (
        churn.groupBy(span.bucket())
        .agg(
            F.sum("joins").alias("joins"),
            F.sum("leaves").alias("leaves"),
            F.sum(expired).alias("expiries"),
            F.sum(F.col("fencings") + F.col("static_replacements")).alias("fencings"),
        )
        .collect()
    )
    if not rows:
        return _NO_DATA
    by_bucket = {r["bucket"]: r for r in rows}
    edges = span.times()
    x = mdates.date2num(edges[:-1])
    width = (mdates.date2num(edges[1]) - mdates.date2num(edges[0])) * 0.9
    series = {
        k: np.array([by_bucket[b][k] if b in by_bucket else 0 for b in range(span.buckets)])
        for k in ("joins", "leaves", "expiries", "fencings")
    }
    with _DRAWING:  # matplotlib's font and text caches are not thread-safe
        fig = Figure(figsize=(11, 3.8))
        ax = fig.subplots()
        ax.bar(x, series["joins"], width=width, align="edge", color="C2", label="joins")
        below = np.zeros(span.buckets)
        for name, color in (("leaves", "C0"), ("expiries", "C3"), ("fencings", "C1")):
            ax.bar(
                x, -series[name], width=width, align="edge", bottom=-below, color=color, label=name
            )
            below = below + series[name]
        ax.axhline(0, color="#444", linewidth=0.6)
        ax.set_ylabel("members per bucket (departures below 0)")
        ax.yaxis.set_major_locator(ticker.MaxNLocator(integer=True))
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
        ax.xaxis_date()
        _time_axis(ax)
        return _png(fig, "member churn")


# -- tables -------------------------------------------------------------------------------------


def _html_table(headers: list[str], rows: list[list[Any]]) -> str:
    if not rows:
        return _NO_DATA

    def cell(v: Any) -> str:
        numeric = isinstance(v, (int, float)) and not isinstance(v, bool)
        text = "" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))
        return (
            f'<td class="n">{html.escape(text)}</td>'
            if numeric
            else f"<td>{html.escape(text)}</td>"
        )

    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(cell(v) for v in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _worst_groups(tables) -> str:
    summary = tables.get("_group_summary")
    if summary is None:
        return _NO_DATA
    rows = (
        summary.select(
            "group",
            "partitions",
            F.col("p99_lag_seconds").alias("p99"),
            F.col("max_lag_seconds").alias("max_s"),
            F.col("max_lag_records").alias("max_records"),
        )
        .orderBy(F.desc_nulls_last("p99"), F.desc_nulls_last("max_records"), "group")
        .limit(TABLE_ROWS)
        .collect()
    )
    return _html_table(
        ["group", "partitions", "p99 lag (s)", "max lag (s)", "max lag (records)"],
        [[r["group"], r["partitions"], r["p99"], r["max_s"], r["max_records"]] for r in rows],
    )


def _longest_rebalances(tables) -> str:
    rebalances = tables.get("rebalances")
    if rebalances is None:
        return _NO_DATA
    rows = (
        rebalances.where(F.col("duration_ms").isNotNull())
        .orderBy(F.desc("duration_ms"), "group", "time_ms")
        .limit(TABLE_ROWS)
        .collect()
    )
    return _html_table(
        [
            "group",
            "protocol",
            "start (UTC)",
            "duration (s)",
            "generation",
            "members before",
            "members after",
            "cause",
        ],
        [
            [
                r["group"],
                r["protocol"],
                _utc(r["start_ms"]) or "not seen",
                r["duration_ms"] / 1000,
                r["generation"],
                r["members_before"],
                r["members_after"],
                r["cause"],
            ]
            for r in rows
        ],
    )


def _skewed_assignments(tables) -> str:
    skew = tables.get("assignment_skew")
    if skew is None:
        return _NO_DATA
    rows = (
        skew.groupBy("group", "protocol", "time_ms", "generation")
        .agg(
            F.first("skew").alias("skew"),
            F.first("members").alias("members"),
            F.count(F.when(F.col("idle"), 1)).alias("idle"),
            F.max("partitions").alias("most"),
            F.sum("lag_records").alias("lag"),
        )
        .where(F.col("skew").isNotNull())
        .orderBy(F.desc("skew"), F.desc("idle"), "group", "time_ms")
        .limit(TABLE_ROWS)
        .collect()
    )
    return _html_table(
        [
            "group",
            "protocol",
            "time (UTC)",
            "generation",
            "members",
            "idle members",
            "most partitions",
            "skew (max/mean)",
            "lag over its lifetime (records)",
        ],
        [
            [
                r["group"],
                r["protocol"],
                _utc(r["time_ms"]),
                r["generation"],
                r["members"],
                r["idle"],
                r["most"],
                r["skew"],
                r["lag"],
            ]
            for r in rows
        ],
    )


def _commit_activity(tables) -> str:
    activity = tables.get("commit_activity")
    if activity is None:
        return _NO_DATA
    rows = (
        activity.groupBy("group")
        .agg(
            F.sum("commits").alias("commits"),
            F.sum("noop_commits").alias("noop"),
            F.sum("rewinds").alias("rewinds"),
            F.sum("rejected_commits").alias("rejected"),
            F.max("commit_rate").alias("peak"),
        )
        .orderBy(F.desc("rejected"), F.desc("rewinds"), F.desc("commits"), "group")
        .limit(TABLE_ROWS)
        .collect()
    )
    return _html_table(
        [
            "group",
            "commits",
            "no-op commits",
            "rewinds",
            "rejected commits",
            "peak commit rate (/s)",
        ],
        [
            [r["group"], r["commits"], r["noop"], r["rewinds"], r["rejected"], r["peak"]]
            for r in rows
        ],
    )
