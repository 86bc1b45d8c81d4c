"""``selcal evaluate``: parse the flags into the library's records, call :func:`selcal.api.evaluate`,
write and show the result (table, leaderboard, JSON, CSV, Markdown, figures, the HTML report)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional

import typer

from ..errors import ModelsFailed, SelcalError
from ..options import DEFAULT_SORT, DEFAULTS, FIGURE_FAMILIES, FigureSettings, ReadSettings, RunSettings
from .common import check_outputs, fail, fail_on, note_ignored, say, show_warnings, write_error
from .groups import (FIGURES, FILES_HELP, NO_WARNINGS_HELP, RUN, build, build_options, score_option_rules, shared,
                     with_numbers)
from .progress import count_bar, evaluation_bars


@with_numbers
def evaluate(
    ctx: typer.Context,
    files: List[Path] = typer.Argument(..., help=FILES_HELP, show_default=False),
    val: Optional[List[Path]] = typer.Option(None, "--val", help="Validation dump; repeat once per TEST file."),
    json_path: Optional[str] = typer.Option(None, "--json", help="Write JSON (schema 1) to PATH; '-' for stdout."),
    score_cols: Optional[List[str]] = typer.Option(None, "--score-col", metavar="COLUMN", help="A column of the TEST file to evaluate as a confidence (higher = more confident), beside the logit scores; repeatable. Values in [0, 1] also get calibration metrics."),
    uncertainty_cols: Optional[List[str]] = typer.Option(None, "--uncertainty-col", metavar="COLUMN", help="A column of the TEST file to evaluate as an uncertainty (lower = more confident); repeatable."),
    aece_estimator: str = typer.Option(DEFAULTS.aece_estimator, help="Adaptive ECE: equal-mass (exact, CONVENTIONS.md) or mbls (the bin edges of the MbLS/ACLS evaluation code)."),
    label_col: Optional[str] = shared("label_col"),
    logits_col: Optional[str] = shared("logits_col"),
    ignore_label: Optional[int] = shared("ignore_label"),
    group_col: Optional[str] = typer.Option(None, help="Column naming a group per row (e.g. source): per-group metrics."),
    input_kind: Optional[str] = shared("input_kind"),
    ood_label: Optional[int] = typer.Option(None, "--ood-label", metavar="V", help="Rows with this label belong to no class (out-of-distribution): always errors, counted in the selective and calibration metrics, reported as a group beside the in-distribution rows."),
    lm_norm: Optional[str] = shared("lm_norm"),
    pixels_per_image: Optional[int] = shared("pixels_per_image"),
    seed: int = shared("seed"),
    bootstrap: int = typer.Option(RUN.bootstrap, "--bootstrap", metavar="B", help="Add percentile confidence intervals from B bootstrap resamples of the evaluation rows (e.g. 1000)."),
    bootstrap_refit: bool = typer.Option(RUN.bootstrap_refit, "--bootstrap-refit", help="Also resample the validation rows and refit every fitted score (T, p, ...) on every resample (slow)."),
    confidence: float = typer.Option(RUN.confidence, "--confidence", help="Level of the bootstrap intervals."),
    calibration_test: int = shared("calibration_test"),
    sort_by: Optional[str] = typer.Option(None, "--sort-by", help=f"Leaderboard column to sort by (several models; any column of the CSV), best first. Default: the swept value with --sweep, else {DEFAULT_SORT} (the best AURC of every score)."),
    csv_path: Optional[str] = typer.Option(None, "--csv", help="Write the leaderboard (one row per model) as CSV to PATH; '-' for stdout."),
    markdown_path: Optional[str] = typer.Option(None, "--markdown", help="Write the leaderboard as a Markdown table to PATH; '-' for stdout."),
    sweep: Optional[str] = typer.Option(None, "--sweep", metavar="NAME", help="A hyperparameter that differs between the models (Parquet metadata key NAME, else NAME=VALUE or NAME_VALUE in the file name): a leaderboard column NAME and a figure sweep_NAME of the headline metrics against it."),
    errors_csv: Optional[str] = typer.Option(None, "--errors-csv", metavar="PATH", help="Write the most confident errors of every score and model as CSV to PATH; '-' for stdout."),
    errors_top: int = typer.Option(DEFAULTS.errors_top, "--errors-top", metavar="N", help="How many of the most confident errors per score and model (--errors-csv, --report)."),
    details: bool = typer.Option(False, "--details", help="With several models, print every model's full table too."),
    plots: Optional[Path] = typer.Option(None, "--plots", metavar="DIR", help="Write the figures (rc, reliability, vmax_msp, pnorm_search, overlays) into DIR."),
    plot_format: str = typer.Option(FIGURES.plot_format, "--plot-format", help="Format of the --plots files (and of the figures --mlflow logs)."),
    figures: Optional[str] = typer.Option(None, "--figures", metavar="KINDS", help=f"Only these figures (--plots, --report, --mlflow), comma-separated: {', '.join(FIGURE_FAMILIES)} (overlays come with their kind); default all."),
    mlflow: bool = typer.Option(False, "--mlflow", help="Log the result into an MLflow run (the store and experiment of MLFLOW_TRACKING_URI and MLFLOW_EXPERIMENT_NAME): every metric under its flat name (msp/aurc), the options as params, the JSON, the figures and the report as artifacts. Needs selcal[mlflow]."),
    report: Optional[Path] = typer.Option(None, "--report", metavar="FILE.html", help="Write one self-contained HTML page: tables, figures, settings."),
    ls_alpha: Optional[str] = typer.Option(None, "--ls-alpha", help="Label-smoothing alpha of the models, one value or one per TEST file: draws the target ceiling (1-a)+a/K on vmax_msp."),
    at_coverage: float = typer.Option(FIGURES.at_coverage, "--at-coverage", help="Coverage of the errors-by-group figure (with --group-col)."),
    engine: str = typer.Option(RUN.engine, "--engine", help="local (this process) or ray (one Ray task per model, on RAY_ADDRESS or a local Ray): the same numbers."),
    rank_maps: int = typer.Option(FIGURES.rank_maps, "--rank-maps", metavar="N", help="Segmentation folders with --plots: uncertainty-rank maps of the N images with the most confident errors."),
    rank_maps_of: Optional[str] = typer.Option(None, "--rank-maps-of", metavar="ID,...", help="Segmentation folders with --plots: rank maps of these images instead."),
    top: int = typer.Option(FIGURES.top, "--top", metavar="K", help="A zoo (more than K models): the figures across models (--plots, --report) draw the K best of the leaderboard (of each board, when the models were not all evaluated on the same rows) and every --baseline, the rest listed; the report draws only their own figures and folds the other models' sections."),
    baselines: Optional[List[str]] = typer.Option(None, "--baseline", metavar="MODEL", help="A model (its name or TEST file) always drawn in a zoo's figures across models, whatever its rank; repeatable."),
    quiet: bool = shared("quiet"),
    no_warnings: bool = typer.Option(False, "--no-warnings", help=NO_WARNINGS_HELP),
    **numbers: Any,  # the options that change a number (groups.NUMBERS): read by build_options(ctx)
):
    """Evaluate the confidence of one or several models from their saved logits."""
    from ..api import evaluate as evaluation
    from ..writers.output import Outputs

    try:
        options, reading, run, drawing = build_options(ctx), build(ctx, ReadSettings), build(ctx, RunSettings), \
            build(ctx, FigureSettings)
        if mlflow:
            from ..writers.trackers import require_mlflow

            require_mlflow()  # before the work, not after it
        outputs = Outputs(inputs=[*files, *(val or [])])
        to_stdout = check_outputs(outputs, {"--json": json_path, "--csv": csv_path, "--markdown": markdown_path,
                                            "--errors-csv": errors_csv})
        to_stdout += check_outputs(outputs, {"--report": report}, to_stdout, make_parents=True)
        outputs.check_folder(plots, f".{plot_format}")
        with evaluation_bars(run.engine, run.bootstrap_refit, enabled=not quiet) as progress:
            result = evaluation(files, val, options=options, read=reading, run=run, figures=drawing, progress=progress)
        board, notes = _write(result, outputs, run, drawing, json_path, csv_path, markdown_path, errors_csv,
                              {"label_col": label_col or "auto (label, labels, target or y)", "logits_col": logits_col,
                               "ignore_label": ignore_label, "group_col": group_col}, mlflow, quiet)
    except ModelsFailed as exc:  # every model was evaluated, every failed one is named; nothing is written
        for message in exc.messages:
            say(f"selcal: error: {message}")
        raise typer.Exit(2)
    except SelcalError as exc:
        fail_on(exc)
    except OSError as exc:  # a full disk or a vanished folder while writing
        fail(write_error(exc))
    _show(result, board, notes, shown=not quiet and not to_stdout, quiet=quiet, details=details,
          no_warnings=no_warnings, bootstrap=bootstrap)
    _note_ignored(ctx, result, files, options, drawing, errors_csv, group_col, bootstrap)
    show_warnings([(model.name, w) for model in result.models for w in model.warnings], no_warnings,
                  of=len(result.models))
    from ..checks.common_ground import board_warning

    other_rows = board_warning(result.models)  # (None with a board per group of rows: the boards say it)
    if other_rows and not no_warnings:
        say(f"selcal: warning: {other_rows}")


def _write(result, outputs, run, drawing, json_path, csv_path, markdown_path, errors_csv, settings, mlflow,
           quiet=False):
    """Every output asked for, together at the end or none (``outputs``); the leaderboard and the notes
    to print (the figures not drawn, what was written, the MLflow run)."""
    from ..report import confident_errors_csv, leaderboard, leaderboard_csv, leaderboard_markdown

    board = leaderboard(result, run.sort_by, run.sweep)
    with outputs:
        if json_path is not None:
            outputs.write(json_path, result.to_json())
        for output, render in ((csv_path, leaderboard_csv), (markdown_path, leaderboard_markdown)):
            if output is not None:
                outputs.write(output, render(board))
        if errors_csv is not None:
            outputs.write(errors_csv, confident_errors_csv(result))
        notes = _write_figures(result, drawing, outputs=outputs, run_settings=settings,
                               order=[row["model"] for row in board], quiet=quiet)
        if drawing.plots is not None:
            notes += _write_rank_maps(result, drawing, outputs=outputs)
    if mlflow:
        from ..figures.render import default_workers
        from ..writers.trackers import log_to_mlflow

        run_id = log_to_mlflow(result, workers=default_workers(), figure_format=drawing.plot_format,
                               kinds=drawing.figures, at_coverage=drawing.at_coverage,
                               ls_alpha=None if drawing.ls_alpha is None else list(drawing.ls_alpha))
        notes.append(f"logged to the MLflow run {run_id}")
    return board, notes


def _show(result, board, notes, *, shown: bool, quiet: bool, details: bool, no_warnings: bool, bootstrap: int):
    """The tables on the terminal (unless -q or an output to stdout), then the notes."""
    from rich.console import Console

    if shown:
        from ..report import render_leaderboard, render_table
        from ..report.leaderboard import PIPE_WIDTH

        console = Console()
        if len(result.models) == 1 or details:
            render_table(result, console)
        if len(result.models) > 1:
            rows = [{**row, "warnings": ()} for row in board] if no_warnings else board  # no marker to nothing
            render_leaderboard(rows, console if console.is_terminal else Console(width=PIPE_WIDTH))
    if bootstrap and shown:
        from ..report import render_intervals

        render_intervals(result, Console())
    if len(result.models) == 1 and shown:  # (several: under the leaderboard)
        from ..report.calibrators import render_terminal

        render_terminal(board, Console())
    if not quiet:
        for note in notes:
            say(f"selcal: {note}")


def _note_ignored(ctx, result, files, options, drawing, errors_csv, group_col, bootstrap) -> None:
    """One note naming every option given that had no effect with these inputs."""
    from ..io import expand_input
    from ..io.segmentation import is_segmentation_folder

    segmentation = any(is_segmentation_folder(str(f)) for f in files)
    lm_logs = any(settings or name for f in files for _, settings, name in expand_input(str(f)))
    plots, report, mlflow = drawing.plots, drawing.report, drawing.mlflow
    note_ignored(ctx, [
        ("pixels_per_image", "--pixels-per-image", segmentation, "no segmentation folder among the TEST inputs"),
        ("lm_norm", "--lm-norm", lm_logs, "no lm-evaluation-harness log among the TEST inputs"),
        ("rank_maps", "--rank-maps", segmentation and plots, "it needs --plots and a segmentation folder"),
        ("rank_maps_of", "--rank-maps-of", segmentation and plots, "it needs --plots and a segmentation folder"),
        ("errors_top", "--errors-top", errors_csv or report, "it needs --errors-csv or --report"),
        ("at_coverage", "--at-coverage", group_col is not None and (plots or report or mlflow),
         "it needs --group-col and --plots, --report or --mlflow"),
        ("ls_alpha", "--ls-alpha", plots or report or mlflow, "it needs --plots, --report or --mlflow"),
        ("plot_format", "--plot-format", plots or mlflow, "it needs --plots or --mlflow"),
        ("figures", "--figures", plots or report or mlflow, "it needs --plots, --report or --mlflow"),
        ("bootstrap_refit", "--bootstrap-refit", bootstrap, "it needs --bootstrap B"),
        ("confidence", "--confidence", bootstrap, "it needs --bootstrap B"),
        ("sort_by", "--sort-by", len(result.models) > 1, "one TEST file: no leaderboard to sort"),
        ("details", "--details", len(result.models) > 1, "one TEST file: its table is shown anyway"),
        *score_option_rules(options.scores),
        ("val_fraction", "--val-fraction", any(m.split == "holdout" for m in result.models),
         "no random hold-out: the validation rows come from --val or a split column, or no score is fitted"),
    ])


def _write_rank_maps(result, drawing, *, outputs=None) -> list[str]:
    """--plots on segmentation folders: the uncertainty-rank maps (selcal/figures/segmentation.py)."""
    if not any(getattr(m, "clusters", None) is not None for m in result.models):
        return []
    from ..figures.segmentation import write_rank_maps

    images = None if drawing.rank_maps_of is None else list(drawing.rank_maps_of)
    written = write_rank_maps(result, drawing.plots, drawing.plot_format, count=drawing.rank_maps, images=images,
                              outputs=outputs)
    return [f"{len(written)} rank maps written to {drawing.plots}"] if written else []


def _write_figures(result, drawing, *, outputs, run_settings=None, order=None, quiet=False) -> list[str]:
    """--plots and --report, staged in ``outputs``: matplotlib is imported only here, when one is asked for.
    ``quiet`` (``-q``): no progress of the figures either.

    Returns the lines to print: each figure not drawn (``note: ...``, with the reason), then
    what was written."""
    if drawing.plots is None and drawing.report is None:
        return []
    from ..figures.render import default_workers

    skipped: list[str] = []
    written = []
    figures = None
    fmt, kinds = drawing.plot_format, drawing.figures
    ls_alpha = None if drawing.ls_alpha is None else list(drawing.ls_alpha)
    common = {"ls_alpha": ls_alpha, "at_coverage": drawing.at_coverage, "notes": skipped, "outputs": outputs,
              "kinds": kinds, "workers": default_workers()}
    from ..checks.common_ground import board_warning
    from ..report.html import drawn_of, zoo_boards

    order = order or [m.name for m in result.models]
    zoo = zoo_boards(result, order, drawing.top, drawing.baselines)  # a board's each (refuses a bad name)
    overview, overview_note = drawn_of(zoo, len(result.models))
    with count_bar("figures", enabled=not quiet) as progress:
        if drawing.plots is not None:
            from ..figures import write_plots

            figures = write_plots(result, drawing.plots, fmt, keep_data=drawing.report is not None and fmt in ("png", "svg"),
                                  progress=progress, overview=overview, overview_note=overview_note, boards=zoo,
                                  **common)
            written.append(f"{len(figures)} figures written to {drawing.plots}")
        if drawing.report is not None:
            from ..report.html import write_report

            write_report(result, drawing.report, figures if figures and fmt in ("png", "svg") else None,
                         plot_settings={"plot_format": fmt, "figures": None if kinds is None else ",".join(sorted(kinds)),
                                        **(run_settings or {})},
                         progress=progress, top=drawing.top, baselines=drawing.baselines, order=order,
                         board_warnings=[board_warning(result.models)], **common)
            written.append(f"report written to {drawing.report}")
    return [f"note: {line}" for line in dict.fromkeys(skipped)] + written
