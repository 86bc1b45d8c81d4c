"""``selcal study``: parse the options, call :func:`selcal.study.study`, write and show the result
(table, CSV, LaTeX, Markdown, JSON, the HTML page, the figures)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional

import typer

from ..errors import SelcalError
from ..options import FigureSettings, ReadSettings, RunSettings
from .common import check_outputs, fail, fail_on, note_ignored, say, show_warnings, write_error
from .groups import FIGURES, NO_WARNINGS_HELP, RUN, build, build_options, score_option_rules, shared, with_numbers
from .progress import count_bar


@with_numbers
def study(
    ctx: typer.Context,
    files: Optional[List[Path]] = typer.Argument(None, metavar="RUNS", show_default=False, help="The runs' dumps, one model each (any input selcal evaluate reads); their recipe, seed and data set from --pattern."),
    pattern: Optional[str] = typer.Option(None, "--pattern", metavar="TEMPLATE", help="How each run's path names it, e.g. '{dataset}/{recipe}_seed{seed}.parquet': fields in braces ({recipe} and {seed} needed, {dataset} when there are several, any other becomes a column), * a wildcard."),
    manifest: Optional[Path] = typer.Option(None, "--manifest", metavar="FILE", help="Or a CSV of the runs: columns path, recipe, seed, optionally dataset and val (paths relative to it)."),
    baseline: Optional[str] = typer.Option(None, "--baseline", metavar="RECIPE", help="Judge every other recipe against this one: difference of means, its interval and p-value, better/worse/same (with --bootstrap)."),
    metric: Optional[List[str]] = typer.Option(None, "--metric", help="The metrics of the table and of the verdicts, [SCORE.]METRIC (repeatable or comma-separated; default: accuracy, and AURC and ECE of the first score)."),
    bootstrap: int = typer.Option(RUN.bootstrap, "--bootstrap", metavar="B", help="Intervals from B resamples of the two-level bootstrap (runs and rows; e.g. 1000), with a small-sample correction."),
    confidence: float = typer.Option(RUN.confidence, "--confidence", help="Level of the intervals and of the verdicts."),
    allow_other_data: bool = typer.Option(False, "--allow-other-data", help="Accept runs of one data set evaluated on other rows (refused otherwise)."),
    engine: str = typer.Option(RUN.engine, "--engine", help="local (this process) or ray (one Ray task per run): the same numbers."),
    csv_path: Optional[str] = typer.Option(None, "--csv", help="Write the tidy table (one row per data set, recipe, score and metric) as CSV to PATH; '-' for stdout."),
    latex_path: Optional[str] = typer.Option(None, "--latex", metavar="PATH", help="Write the table as a booktabs LaTeX tabular to PATH; '-' for stdout."),
    markdown_path: Optional[str] = typer.Option(None, "--markdown", help="Write the table as Markdown to PATH; '-' for stdout."),
    json_path: Optional[str] = typer.Option(None, "--json", help="Write every run's result and the aggregates as JSON to PATH; '-' for stdout."),
    report: Optional[Path] = typer.Option(None, "--report", metavar="FILE.html", help="Write one self-contained HTML page: the table first, then the figures and the runs."),
    plots: Optional[Path] = typer.Option(None, "--plots", metavar="DIR", help="Write per data set: each metric's runs with each recipe's mean and interval; the risk-coverage curve averaged over runs."),
    plot_format: str = typer.Option(FIGURES.plot_format, "--plot-format", help="Format of the --plots files."),
    label_col: Optional[str] = shared("label_col"),
    logits_col: Optional[str] = shared("logits_col"),
    ignore_label: Optional[int] = shared("ignore_label"),
    input_kind: Optional[str] = shared("input_kind"),
    pixels_per_image: Optional[int] = shared("pixels_per_image"),
    seed: int = shared("seed"),
    quiet: bool = shared("quiet"),
    no_warnings: bool = typer.Option(False, "--no-warnings", help=NO_WARNINGS_HELP),
    **numbers: Any,  # the options that change a number (groups.NUMBERS): read by build_options(ctx)
):
    """Compare training recipes over their runs (seeds) and data sets, judged against run-to-run noise."""
    from rich.console import Console

    from ..options import split_items
    from ..study import study as run_study
    from ..study.render import render_terminal, study_csv, study_latex, study_markdown
    from ..writers.output import Outputs

    try:
        options, reading, running, drawing = build_options(ctx), build(ctx, ReadSettings), build(ctx, RunSettings), \
            build(ctx, FigureSettings)
        if running.bootstrap:
            from ..bootstrap import check_arguments

            check_arguments(running.bootstrap, running.confidence)  # before the work, not after it
        metrics = [item for text in metric or () for item in split_items(text, "--metric")]
        outputs = Outputs(inputs=[*(files or []), *([manifest] if manifest else [])])
        texts = {"--csv": csv_path, "--latex": latex_path, "--markdown": markdown_path, "--json": json_path}
        to_stdout = check_outputs(outputs, texts)
        to_stdout += check_outputs(outputs, {"--report": report}, to_stdout, make_parents=True)
        outputs.check_folder(plots, f".{plot_format}")
        with count_bar("runs evaluated") as runs_done:
            def progress(what, done, total):
                if runs_done is not None and what == "runs":
                    runs_done(done, total)

            result = run_study([str(f) for f in files or []], pattern=pattern,
                               manifest=None if manifest is None else str(manifest), baseline=baseline,
                               metrics=metrics, allow_other_data=allow_other_data, options=options, read=reading,
                               run=running, curves=drawing.plots is not None or drawing.report is not None,
                               progress=progress)
        renders = {"--csv": study_csv, "--latex": study_latex, "--markdown": study_markdown,
                   "--json": lambda r: r.to_json()}
        written = []
        with outputs:  # every output appears together at the end of this block, or none does
            for option, path in texts.items():
                if path is not None:
                    outputs.write(path, renders[option](result))
            if drawing.plots is not None or drawing.report is not None:
                written = _figures(result, drawing, outputs, quiet)
    except SelcalError as exc:
        fail_on(exc)
    except OSError as exc:  # a full disk or a vanished folder while writing
        fail(write_error(exc))
    if not quiet and not to_stdout:
        from ..report.leaderboard import PIPE_WIDTH

        console = Console()
        render_terminal(result, console if console.is_terminal else Console(width=PIPE_WIDTH))
    if not quiet:
        for line in written:
            say(f"selcal: {line}")
    note_ignored(ctx, [
        ("confidence", "--confidence", bootstrap, "it needs --bootstrap B"),
        ("plot_format", "--plot-format", plots, "it needs --plots"),
        *score_option_rules(options.scores),
    ])
    show_warnings(result.warnings, no_warnings, of=len(result.runs))


def _figures(result, drawing: FigureSettings, outputs, quiet: bool = False) -> list[str]:
    """--plots and --report, staged in ``outputs`` (matplotlib imported only here); ``-q``: no progress."""
    from ..figures.study import study_figures

    written = []
    fmt = drawing.plot_format
    with count_bar("figures", enabled=not quiet) as progress:
        figures = study_figures(result, fmt, progress=progress) if drawing.plots is not None else []
        if drawing.plots is not None:
            folder = outputs.folder(drawing.plots)
            for figure in figures:
                outputs.write(str(Path(folder) / f"{figure.stem}.{fmt}"), figure.data)
            written.append(f"{len(figures)} figures written to {drawing.plots}")
        if drawing.report is not None:
            from ..study.report import study_page

            shown = figures if figures and fmt in ("png", "svg") else study_figures(result)
            outputs.write(str(drawing.report), study_page(result, shown), make_parents=True)
            written.append(f"report written to {drawing.report}")
    return written
