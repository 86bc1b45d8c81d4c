"""Progress: on a terminal, a bar for work counted in pieces, a rows-per-second line for one model's
pass, a bar of images for ``selcal dump``; in a pipe or a CI log, a plain line on stderr at most
every :data:`PIPE_EVERY` seconds (``selcal: bootstrap resamples 300/1000``), never a bar's control
characters, so that long work does not look hung."""

from __future__ import annotations

import time
from contextlib import contextmanager


PIPE_EVERY = 10.0  # seconds between two progress lines in a pipe or a CI log


def pipe_lines(every: float | None = None, clock=time.monotonic, write=None):
    """``line(what, done, total)``: prints ``selcal: WHAT DONE/TOTAL`` on stderr when ``every`` seconds
    have passed since the work started or since the last line (a short run prints nothing), plain
    text, one line each (for a pipe or a CI log)."""
    import sys

    write = write or (lambda text: (sys.stderr.write(text + "\n"), sys.stderr.flush()))
    every = PIPE_EVERY if every is None else every
    last = [clock()]

    def line(what: str, done: int, total: int | None) -> None:
        now = clock()
        if now - last[0] >= every:
            last[0] = now
            write(f"selcal: {what} {done:,}" + (f"/{total:,}" if total else ""))

    return line


@contextmanager
def count_bar(what: str, enabled: bool = True):
    """``progress(done, total)`` for work counted in pieces (models, parts, bootstrap resamples): a
    transient bar on stderr, only on a terminal; None (nothing shown) in a pipe or a CI log."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    if not enabled:
        yield None
        return
    if not console.is_terminal:  # a pipe or a CI log: a plain line at most every PIPE_EVERY seconds
        line = pipe_lines()
        yield lambda done, total: line(what, done, total)
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


@contextmanager
def evaluation_bars(engine: str, refit: bool = False, enabled: bool = True):
    """The hook ``progress(what, done, total)`` that :func:`selcal.api.evaluate` reports to, drawing the
    bars of ``selcal evaluate`` on a terminal: the rows of one model's pass (:func:`progress_bar`), the
    models done (when there are several, or they run on Ray), then the bootstrap resamples (the
    evaluation's bars end when the first resample is counted). In a pipe or a CI log: the models
    and the resamples done, a plain line at most every :data:`PIPE_EVERY` seconds (:func:`pipe_lines`).
    ``enabled`` False (``-q``): nothing."""
    from contextlib import ExitStack

    from rich.console import Console

    if not enabled:
        yield None
        return
    if not Console(stderr=True).is_terminal:
        line = pipe_lines()
        label = "bootstrap resamples" + (", fitted scores refitted," if refit else "")

        def plain(what: str, done: int, total: int | None) -> None:
            if what == "models" and (total or 0) > 1:
                line("models", done, total)
            elif what == "resamples":
                line(label, done, total)

        yield plain
        return
    with ExitStack() as stack:
        evaluation = stack.enter_context(ExitStack())
        rows = evaluation.enter_context(progress_bar())
        bars: dict = {}

        def hook(what: str, done: int, total: int | None) -> None:
            if what == "rows" and rows is not None:
                rows(done, total)
            elif what == "models":
                if what not in bars:
                    bars[what] = evaluation.enter_context(count_bar("models", enabled=total > 1 or engine != "local"))
                if bars[what] is not None:
                    bars[what](done, total)
            elif what == "resamples":
                if what not in bars:
                    evaluation.close()  # (transient: the evaluation's bars are gone)
                    label = "bootstrap resamples" + (", fitted scores refitted" if refit else "")
                    bars[what] = stack.enter_context(count_bar(label))
                if bars[what] is not None:
                    bars[what](done, total)

        yield hook
