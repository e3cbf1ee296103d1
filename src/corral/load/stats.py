"""What a run measures: request latencies over time, errors by code, and counts."""

from __future__ import annotations

import time
from array import array
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field

from corral.errors import ErrorCode


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"ERROR_{code}"


@dataclass
class Samples:
    """Latency samples (seconds) with the monotonic time at which each answer arrived."""

    at: array = field(default_factory=lambda: array("d"))
    latency: array = field(default_factory=lambda: array("d"))

    def add(self, at: float, latency: float) -> None:
        self.at.append(at)
        self.latency.append(latency)

    def extend(self, other: Samples) -> None:
        self.at.extend(other.at)
        self.latency.extend(other.latency)


@dataclass
class Recorder:
    """One worker's measurements; workers' recorders are merged by the parent."""

    samples: dict[str, Samples] = field(default_factory=dict)
    errors: Counter = field(default_factory=Counter)
    counts: Counter = field(default_factory=Counter)

    def latency(self, api: str, seconds: float) -> None:
        self.samples.setdefault(api, Samples()).add(time.monotonic(), seconds)

    def error(self, api: str, code: int | str) -> None:
        name = code if isinstance(code, str) else error_name(code)
        self.errors[f"{api}:{name}"] += 1

    def answer(self, api: str, code: int, steps: Collection[int] = ()) -> None:
        """An answer other than NONE: counted when it is one of `steps`, the protocol's normal
        answer at that point (it says what the member does next), an error otherwise."""
        if code in steps:
            self.counts[f"{api}:{error_name(code)}"] += 1
        else:
            self.error(api, code)

    def take(self) -> Recorder:
        """Hands over everything recorded so far and starts afresh (shipped to the parent)."""
        out = Recorder(self.samples, self.errors, self.counts)
        self.samples, self.errors, self.counts = {}, Counter(), Counter()
        return out

    def merge(self, other: Recorder) -> None:
        for api, s in other.samples.items():
            self.samples.setdefault(api, Samples()).extend(s)
        self.errors.update(other.errors)
        self.counts.update(other.counts)


def percentiles(values, points=(50, 90, 99, 99.9)) -> dict[str, float]:
    """Latency percentiles in milliseconds (nearest rank), plus count and max."""
    data = sorted(values)
    if not data:
        return {"count": 0}
    out: dict[str, float] = {"count": len(data)}
    for p in points:
        rank = min(len(data) - 1, max(0, int(round(p / 100 * len(data) + 0.5)) - 1))
        out[f"p{p:g}"] = round(data[rank] * 1000, 3)
    out["max"] = round(data[-1] * 1000, 3)
    return out
