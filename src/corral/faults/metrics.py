"""The faults' families for /metrics (observability/metrics.py yields them at scrape time)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from corral.faults.inject import Injector


def collect(injector: Injector) -> Iterator[Metric]:
    injector.refresh()
    faults = injector.faults
    every = sorted([*faults.active, *faults.done.values()], key=lambda f: f.id)
    fired = CounterMetricFamily(
        "corral_faults_fired",
        "Times each injected fault fired (docs/faults.md), while it is listed",
        labels=["fault", "kind"],
    )
    matched = CounterMetricFamily(
        "corral_faults_matched",
        "Requests each injected fault matched (fired or not: probability, close_after)",
        labels=["fault", "kind"],
    )
    for fault in every:
        labels = [str(fault.id), fault.action.kind]
        fired.add_metric(labels, fault.fired)
        matched.add_metric(labels, fault.matched)
    yield fired
    yield matched
    by_kind = CounterMetricFamily(
        "corral_faults_fired_by_kind",
        "Times any injected fault fired, per action kind, since the broker started",
        labels=["kind"],
    )
    for kind, n in sorted(faults.fired_by_kind.items()):
        by_kind.add_metric([kind], n)
    yield by_kind
    yield GaugeMetricFamily(
        "corral_faults_active", "Injected faults in force", value=len(faults.active)
    )
    yield GaugeMetricFamily(
        "corral_faults_held_requests",
        "Requests held by hold faults, waiting to be released",
        value=sum(injector.held.values()),
    )
