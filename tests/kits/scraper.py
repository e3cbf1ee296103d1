"""Scraping a corral's /metrics endpoint (`Scraper`), read with prometheus_client's text parser."""

from __future__ import annotations

import re
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

METRICS_AT = re.compile(r"metrics on http://(\S+):(\d+)/metrics")


class Scraper:
    def __init__(self, broker):
        match = METRICS_AT.search(broker.log())
        assert match, "the bound metrics port is logged at startup"
        self.url = f"http://127.0.0.1:{match.group(2)}/metrics"

    def families(self) -> dict:
        with urllib.request.urlopen(self.url, timeout=10) as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("text/plain")
            text = response.read().decode()
        return {f.name: f for f in text_string_to_metric_families(text)}

    def samples(self) -> dict[tuple[str, frozenset], float]:
        """(sample name, labels) -> value, over every family."""
        return {
            (s.name, frozenset(s.labels.items())): s.value
            for f in self.families().values()
            for s in f.samples
        }

    def value(self, name: str, **labels) -> float:
        return self.samples().get((name, frozenset(labels.items())), 0.0)
