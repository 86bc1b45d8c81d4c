"""Progress shown on a terminal (never in a pipe or a CI log): a bar for work counted in pieces,
a rows-per-second line for one model's pass, a bar of images for ``selcal dump``."""

from __future__ import annotations

import time
from contextlib import contextmanager


@contextmanager
def count_bar(what: str, enabled: bool = True):
    """``progress(done, total)`` for work counted in pieces (models, parts, bootstrap resamples): a
    transient bar on stderr, only on a terminal; None (nothing shown) in a pipe or a CI log."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield None
        return
    bar = Progress(TextColumn(what), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                   transient=True)
    task = bar.add_task(what, total=None)
    bar.start()

    def advance(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    try:
        yield advance
    finally:
        bar.stop()


@contextmanager
def progress_bar(delay: float = 2.0):
    """A rows-per-second progress line on stderr while a model is read, fitted and evaluated.

    Shown only on a terminal, and only once the work has lasted ``delay`` seconds: a timer
    starts it, so the spinner also turns while T and p are fitted on the validation rows
    (before any evaluation row is counted). Transient: it disappears when done.
    """
    import threading

    from rich.console import Console
    from rich.progress import MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    if not console.is_terminal:
        yield None
        return
    bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), MofNCompleteColumn(),
                   TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), console=console, transient=True)
    task = bar.add_task("reading, fitting", total=None, rate="")
    timer = threading.Timer(delay, bar.start)
    timer.daemon = True
    timer.start()

    first: list = []  # (time, rows) of the first count: the rate is of the evaluation pass, not of the fits

    def advance(done: int, total: int | None) -> None:
        now = time.monotonic()
        if not first:
            first.append((now, done))
        rate = (done - first[0][1]) / (now - first[0][0]) if now > first[0][0] else 0.0
        bar.update(task, description="evaluation rows", completed=done, total=total,
                   rate=f"{rate:,.0f} rows/s" if rate else "")

    try:
        yield advance
    finally:
        timer.cancel()
        timer.join()
        bar.stop()


@contextmanager
def images_bar(enabled: bool = True):
    """``progress(done, total)`` of ``selcal dump``: a bar with images/s on stderr, only on a terminal."""
    from rich.console import Console

    console = Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield None
        return
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    bar = Progress(TextColumn("images"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
                   TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(), console=console, transient=True)
    task = bar.add_task("images", total=None, rate="")
    started = time.monotonic()

    def advance(done: int, total: int) -> None:
        if not bar.live.is_started:
            bar.start()
        elapsed = max(time.monotonic() - started, 1e-9)
        bar.update(task, completed=done, total=total, rate=f"{done / elapsed:,.1f} images/s")

    try:
        yield advance
    finally:
        bar.stop()
