"""The ``selcal`` command: Typer commands only, each a thin skin over the library."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import List, Optional

import typer

from . import __version__
from .errors import SelcalError

app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    help="How well does a classifier know when it is wrong? Selective classification and calibration from saved logits.",
)


def _fail(message: str) -> None:
    typer.echo(f"selcal: error: {message}", err=True)
    raise typer.Exit(2)


def _floats(text: str, option: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise SelcalError(f"{option} takes comma-separated numbers, e.g. 0.01,0.05; got {text!r}") from None
    if not values:
        raise SelcalError(f"{option} needs at least one value")
    return values


def _p_grid(text: str) -> tuple[int, ...]:
    """'1-10' or '1,2,4' or a mix: '1-4,8'."""
    values: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                low, high = (int(x) for x in part.split("-", 1))
                values.extend(range(low, high + 1))
            elif part:
                values.append(int(part))
    except ValueError:
        raise SelcalError(f"--p-grid takes positive integers such as 1-10 or 1,2,4; got {text!r}") from None
    return tuple(values)


def _version(value: bool):
    if value:
        typer.echo(f"selcal {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
):
    """selcal: selective classification and calibration metrics from saved logits."""


@app.command()
def evaluate(
    files: List[Path] = typer.Argument(..., help="TEST dumps (Parquet or .npz), one model each.", show_default=False),
    val: Optional[List[Path]] = typer.Option(None, "--val", help="Validation dump; repeat once per TEST file."),
    json_path: Optional[str] = typer.Option(None, "--json", help="Write JSON (schema 1) to PATH; '-' for stdout."),
    scores: str = typer.Option("msp,max_logit,pnorm,temp", help="Scores to evaluate, comma-separated."),
    bins: int = typer.Option(15, help="Bins of every binned calibration metric."),
    risks: str = typer.Option("0.01,0.05,0.1", help="Risk targets r of cov@r (fractions)."),
    coverages: str = typer.Option("0.5,0.8,0.9", help="Coverages c of risk@c (fractions)."),
    aurc_estimator: str = typer.Option("mean", help="AURC estimator: mean (CONVENTIONS.md) or trapz (Xia et al. code)."),
    label_col: str = typer.Option("label", help="Name of the label column."),
    logits_col: Optional[str] = typer.Option(None, help="Name of the logits list column (default: 'logits')."),
    ignore_label: Optional[int] = typer.Option(None, help="Drop rows with this label (e.g. 255)."),
    group_col: Optional[str] = typer.Option(None, help="Column naming a group per row (e.g. source): per-group metrics."),
    val_fraction: float = typer.Option(0.2, help="Hold-out fraction when there is no --val and no split column."),
    seed: int = typer.Option(0, help="Seed of the random hold-out and of the bootstrap."),
    center: bool = typer.Option(True, "--center/--no-center", help="Centre logits before the p-norm (default) or not (eq. 17)."),
    p_grid: str = typer.Option("1-10", help="Values of p to search, e.g. 1-10 or 1,2,4."),
    pnorm_objective: str = typer.Option("aurc", help="Validation objective of the p search: aurc or augrc."),
    bootstrap: int = typer.Option(0, "--bootstrap", metavar="B", help="Add percentile confidence intervals from B bootstrap resamples of the evaluation rows (e.g. 1000)."),
    bootstrap_refit: bool = typer.Option(False, "--bootstrap-refit", help="Also resample the validation rows and refit T and p on every resample (slow)."),
    confidence: float = typer.Option(0.95, "--confidence", help="Level of the bootstrap intervals."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No table on the terminal."),
):
    """Evaluate the confidence of one or several models from their saved logits."""
    from rich.console import Console

    from .evaluate import Options
    from .evaluate import evaluate as run_evaluation
    from .io import atomic_write

    try:
        options = Options(
            scores=tuple(s.strip() for s in scores.split(",") if s.strip()),
            bins=bins, risks=_floats(risks, "--risks"), coverages=_floats(coverages, "--coverages"),
            aurc_estimator=aurc_estimator, val_fraction=val_fraction, seed=seed, center=center,
            p_grid=_p_grid(p_grid), pnorm_objective=pnorm_objective,
        )
        if json_path not in (None, "-"):
            _check_writable(Path(json_path))
        with _progress_bar() as progress:
            result = run_evaluation(
                [str(f) for f in files], [str(v) for v in val] if val else None, options=options,
                label_col=label_col, logits_col=logits_col, ignore_label=ignore_label, group_col=group_col,
                progress=progress,
            )
        if bootstrap:
            result = _bootstrap(result, files, val, options, bootstrap, seed, confidence, bootstrap_refit,
                                label_col=label_col, logits_col=logits_col, ignore_label=ignore_label)
        if json_path == "-":
            sys.stdout.write(result.to_json())
            for model in result.models:  # the table is not shown: warnings go to stderr
                for warning in model.warnings:
                    typer.echo(f"selcal: warning: {model.name}: {warning}", err=True)
        elif json_path is not None:
            with atomic_write(json_path) as out:
                out.write(result.to_json())
    except SelcalError as exc:
        _fail(str(exc))
    except OSError as exc:  # a full disk or a vanished folder while writing
        _fail(f"{exc.filename or json_path}: cannot write ({exc.strerror or exc}); free space or choose another path")
    if not quiet and json_path != "-":
        from .report import render_table

        render_table(result, Console())
    if bootstrap and not quiet and json_path != "-":
        from .checks import render_intervals

        render_intervals(result, Console())


@contextmanager
def _progress_bar():
    """A rows-per-second progress line on stderr while evaluation rows are reduced.

    Shown only on a terminal, and only once the work has lasted a couple of seconds.
    """
    from rich.console import Console
    from rich.progress import MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    if not console.is_terminal:
        yield None
        return
    bar = Progress(SpinnerColumn(), TextColumn("evaluation rows"), MofNCompleteColumn(),
                   TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), console=console, transient=True)
    task = bar.add_task("rows", total=None, rate="")
    started = time.monotonic()

    def advance(done: int, total: int | None) -> None:
        elapsed = time.monotonic() - started
        if elapsed > 2 and not bar.live.is_started:
            bar.start()
        bar.update(task, completed=done, total=total, rate=f"{done / max(elapsed, 1e-9):,.0f} rows/s")

    try:
        yield advance
    finally:
        bar.stop()


def _check_writable(path: Path) -> None:
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise SelcalError(f"{path}: folder '{folder}' does not exist; create it first")
    if path.is_dir():
        raise SelcalError(f"{path}: is a folder; give a file name for the output")
    import os

    if not os.access(folder, os.W_OK):
        raise SelcalError(f"{path}: folder '{folder}' is not writable; choose another output path")


def run() -> None:
    """Console entry point: usage errors as one ``selcal: error:`` line, exit status 2."""
    try:
        code = app(standalone_mode=False)
    except typer.Exit as exc:
        code = exc.exit_code
    except typer.Abort:
        typer.echo("selcal: aborted", err=True)
        code = 130
    except Exception as exc:  # Click's usage errors (vendored by Typer): one line, not a box
        if not hasattr(exc, "format_message"):
            raise
        message = exc.format_message().strip()
        if message:  # (no arguments at all: the help was printed, nothing to add)
            typer.echo(f"selcal: error: {message} (see selcal --help)", err=True)
        code = getattr(exc, "exit_code", 2)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    run()
