"""The progress display of `corral analyze` (rich, on stderr): one line per step, and while Spark
runs, its active stages' task counts (polled from the status tracker)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.progress import Progress as RichProgress

SPARK_POLL_S = 0.5


class Step:
    """One step's line; `update(what, done, total)` may be called from any thread."""

    def __init__(self, update: Callable[[str, int, int | None], None]):
        self.update = update


class Progress:
    """Shown only on a terminal and when enabled (not with --json)."""

    def __init__(self, enabled: bool = True):
        console = Console(stderr=True)
        self._rich = (
            RichProgress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
            )
            if enabled and console.is_terminal
            else None
        )

    def __enter__(self) -> Progress:
        if self._rich is not None:
            self._rich.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        if self._rich is not None:
            self._rich.stop()

    @contextlib.contextmanager
    def step(self, description: str) -> Iterator[Step]:
        if self._rich is None:
            yield Step(lambda what, done, total: None)
            return
        task = self._rich.add_task(description, total=None)

        def update(what: str, done: int, total: int | None) -> None:
            self._rich.update(
                task, description=f"{description}: {what}", completed=done, total=total
            )

        try:
            yield Step(update)
        finally:
            self._rich.update(task, description=description, completed=1, total=1)

    @contextlib.contextmanager
    def spark_step(self, description: str, spark) -> Iterator[Step]:
        with self.step(description) as step:
            if self._rich is None:
                yield step
                return
            stop = threading.Event()
            poller = threading.Thread(
                target=_poll_spark, args=(spark, step.update, stop), daemon=True
            )
            poller.start()
            try:
                yield step
            finally:
                stop.set()
                poller.join()


def _poll_spark(spark, show: Callable[[str, int, int | None], None], stop: threading.Event) -> None:
    tracker = spark.sparkContext.statusTracker()
    while not stop.wait(SPARK_POLL_S):
        try:
            stages = tracker.getActiveStageIds()
            infos = [tracker.getStageInfo(s) for s in stages]
        except Exception:  # the JVM going away at the end: the display is not worth a crash
            return
        infos = [i for i in infos if i is not None]
        if infos:
            show(
                f"{len(infos)} Spark stage(s)",
                sum(i.numCompletedTasks for i in infos),
                sum(i.numTasks for i in infos),
            )
