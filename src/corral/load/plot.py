"""--plot: latency over time and members stable over time, as one PNG (matplotlib)."""

from __future__ import annotations

import argparse
from typing import Any


def png_path(path: str) -> str:
    """`--plot`'s argument type: refuses the option before the run when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise argparse.ArgumentTypeError(
            "--plot needs matplotlib, which the broker's install leaves out: "
            "pip install 'corral[load]'"
        ) from None
    return path


def plot(result: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = result["_samples"]
    timeline = result["_timeline"]
    start = min((s.at[0] for s in samples.values() if len(s.at)), default=0.0)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    for api, s in sorted(samples.items()):
        top.scatter(
            [a - start for a in s.at],
            [lat * 1000 for lat in s.latency],
            s=2,
            alpha=0.4,
            label=api.lower(),
        )
    top.set_yscale("log")
    top.set_ylabel("latency (ms)")
    top.legend(markerscale=5, loc="upper left")
    top.set_title(
        f"{result['scenario']}: {result['parameters']['members']:,} members, "
        f"{result['machine'].get('cpu_model', '')}"
    )
    # The timeline starts with the run; samples use the same monotonic clock, shifted alike.
    offset = (start - result["_started"]) if "_started" in result else 0.0
    bottom.plot([t["t"] - offset for t in timeline], [t["stable"] for t in timeline])
    bottom.set_ylabel("members stable")
    bottom.set_xlabel("seconds")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
