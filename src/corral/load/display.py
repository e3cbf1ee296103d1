"""Progress on stderr: the live display (rich) on a terminal, fed by the parent twice a second,
else lines; both print the notes of the run (a ramp's plan and steps) as they come."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.live import Live
from rich.table import Table

from corral.load.stats import percentiles


class LineDisplay:
    """Not a terminal: the run's notes, a line each."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def note(self, text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    def update(self, run) -> None:
        pass


class LiveDisplay:
    def __init__(self):
        # On stderr, as the choice of a live display is made on stderr (stdout carries the JSON).
        self.live = Live(
            Table(), console=Console(stderr=True), refresh_per_second=4, transient=False
        )
        self._last_counts: dict[str, int] = {}
        self._last_acknowledged = 0

    def __enter__(self):
        self.live.__enter__()
        return self

    def __exit__(self, *exc):
        return self.live.__exit__(*exc)

    def note(self, text: str) -> None:
        self.live.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def update(self, run) -> None:
        table = Table(
            title=f"corral load: {run.scenario} against {run.broker.bootstrap}",
            show_header=False,
            expand=False,
        )
        table.add_column(style="bold")
        table.add_column()
        elapsed = run.elapsed()
        share = run.params.get("group_type") == "share"
        table.add_row("elapsed", f"{elapsed:6.1f} s")
        in_group = run.params.get("group_protocol") == "consumer" or share
        table.add_row(
            "members in the group" if in_group else "members stable",
            f"{run.stable_members:,} / {run.members:,}",
        )
        if share:
            acknowledged = run.ledger.acknowledged_total
            rate = (acknowledged - self._last_acknowledged) / 0.5
            self._last_acknowledged = acknowledged
            table.add_row(
                "records acknowledged",
                f"{acknowledged:,} / {run.ledger.produced_total:,} produced, ~{rate:,.0f}/s",
            )
        newest = run.ledger.newest_generation()
        if newest is not None:
            table.add_row(
                "generation"
                if run.params.get("group_protocol") != "consumer"
                else "newest member epoch",
                str(newest),
            )
        if run.phase:
            table.add_row(
                "phase",
                ", ".join(
                    f"{k}={v:.0f}" if isinstance(v, float) else f"{k}={v}"
                    for k, v in run.phase.items()
                ),
            )
        for api, samples in sorted(run.recorder.samples.items()):
            count = len(samples.latency)
            rate = (count - self._last_counts.get(api, 0)) / 0.5
            self._last_counts[api] = count
            recent = percentiles(samples.latency[-2000:])
            table.add_row(
                api.lower(),
                f"{count:,} answered, ~{rate:,.0f}/s, recent p50 "
                f"{recent.get('p50', 0):.1f} ms, p99 {recent.get('p99', 0):.1f} ms",
            )
        cpu = sum(run.cpu.values()) / max(elapsed, 1e-9)
        table.add_row("generator cpu", f"{cpu:.0%} of one core over {run.workers} worker(s)")
        errors = sum(run.recorder.errors.values())
        table.add_row(
            "errors",
            f"{errors:,}" + (f"  {dict(run.recorder.errors.most_common(3))}" if errors else ""),
        )
        table.add_row(
            "violations", f"[{'red' if run.violations.count else 'green'}]{run.violations.count}[/]"
        )
        self.live.update(table)
