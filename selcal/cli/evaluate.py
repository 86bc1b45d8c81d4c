"""``selcal evaluate``: parse the options, call :func:`selcal.api.run_jobs`, write and show
the result (table, leaderboard, JSON, CSV, Markdown, figures, the HTML report)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional

import typer

from ..errors import SelcalError
from ..options import DEFAULTS, parse_floats, split_items
from .common import check_outputs, fail, fail_on, note_ignored, say, show_warnings, write_error
from .groups import FILES_HELP, NO_WARNINGS_HELP, build_options, score_option_rules, shared, with_numbers
from .progress import count_bar, progress_bar


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
    bootstrap: int = typer.Option(0, "--bootstrap", metavar="B", help="Add percentile confidence intervals from B bootstrap resamples of the evaluation rows (e.g. 1000)."),
    bootstrap_refit: bool = typer.Option(False, "--bootstrap-refit", help="Also resample the validation rows and refit every fitted score (T, p, ...) on every resample (slow)."),
    confidence: float = typer.Option(0.95, "--confidence", help="Level of the bootstrap intervals."),
    calibration_test: int = shared("calibration_test"),
    sort_by: Optional[str] = typer.Option(None, "--sort-by", help="Leaderboard column to sort by (several models; any column of the CSV), best first. Default: the swept value with --sweep, else aurc_best_score (the best AURC of every score)."),
    csv_path: Optional[str] = typer.Option(None, "--csv", help="Write the leaderboard (one row per model) as CSV to PATH; '-' for stdout."),
    markdown_path: Optional[str] = typer.Option(None, "--markdown", help="Write the leaderboard as a Markdown table to PATH; '-' for stdout."),
    sweep: Optional[str] = typer.Option(None, "--sweep", metavar="NAME", help="A hyperparameter that differs between the models (Parquet metadata key NAME, else NAME=VALUE or NAME_VALUE in the file name): a leaderboard column NAME and a figure sweep_NAME of the headline metrics against it."),
    errors_csv: Optional[str] = typer.Option(None, "--errors-csv", metavar="PATH", help="Write the most confident errors of every score and model as CSV to PATH; '-' for stdout."),
    errors_top: int = typer.Option(DEFAULTS.errors_top, "--errors-top", metavar="N", help="How many of the most confident errors per score and model (--errors-csv, --report)."),
    details: bool = typer.Option(False, "--details", help="With several models, print every model's full table too."),
    plots_dir: Optional[Path] = typer.Option(None, "--plots", metavar="DIR", help="Write the figures (rc, reliability, vmax_msp, pnorm_search, overlays) into DIR."),
    plot_format: str = typer.Option("png", "--plot-format", help="Format of the --plots files (and of the figures --mlflow logs): png, svg or pdf."),
    figure_kinds: Optional[str] = typer.Option(None, "--figures", metavar="KINDS", help="Only these figures (--plots, --report, --mlflow), comma-separated: rc, reliability, smooth, vmax_msp, pnorm_search, errors_by_group, logit_profile, pnorm_vmax, sweep (overlays come with their kind); default all."),
    mlflow: bool = typer.Option(False, "--mlflow", help="Log the result into an MLflow run (the store and experiment of MLFLOW_TRACKING_URI and MLFLOW_EXPERIMENT_NAME): every metric under its flat name (msp/aurc), the options as params, the JSON, the figures and the report as artifacts. Needs selcal[mlflow]."),
    report_path: Optional[Path] = typer.Option(None, "--report", metavar="FILE.html", help="Write one self-contained HTML page: tables, figures, settings."),
    ls_alpha: Optional[str] = typer.Option(None, "--ls-alpha", help="Label-smoothing alpha of the models, one value or one per TEST file: draws the target ceiling (1-a)+a/K on vmax_msp."),
    at_coverage: float = typer.Option(0.1, "--at-coverage", help="Coverage of the errors-by-group figure (with --group-col)."),
    engine: str = typer.Option("local", "--engine", help="local (this process) or ray (one Ray task per model, on RAY_ADDRESS or a local Ray): the same numbers."),
    rank_maps: int = typer.Option(3, "--rank-maps", metavar="N", help="Segmentation folders with --plots: uncertainty-rank maps of the N images with the most confident errors."),
    rank_maps_of: Optional[str] = typer.Option(None, "--rank-maps-of", metavar="ID,...", help="Segmentation folders with --plots: rank maps of these images instead."),
    quiet: bool = shared("quiet"),
    no_warnings: bool = typer.Option(False, "--no-warnings", help=NO_WARNINGS_HELP),
    **numbers: Any,  # the options that change a number (groups.NUMBERS): read by build_options(ctx)
):
    """Evaluate the confidence of one or several models from their saved logits."""
    from rich.console import Console

    from ..api import add_sweep, model_jobs, run_jobs, sweep_values
    from ..writers.output import Outputs

    try:
        options = build_options(ctx, logit_profile=(plots_dir is not None or report_path is not None or mlflow)
                                and _wants_profile(figure_kinds))
        if bootstrap:
            from ..bootstrap import check_arguments

            check_arguments(bootstrap, confidence)  # before the work, not after it
        if mlflow:
            from ..writers.trackers import require_mlflow

            require_mlflow()  # before the work, not after it
        outputs = Outputs(inputs=[*files, *(val or [])])
        stdout_outputs = check_outputs(outputs, {"--json": json_path, "--csv": csv_path, "--markdown": markdown_path,
                                                 "--errors-csv": errors_csv})
        from ..report import confident_errors_csv, leaderboard, leaderboard_csv, leaderboard_markdown

        if sort_by:
            leaderboard(type("Empty", (), {"models": []})(), sort_by, sweep)  # refuse a bad column before the work
        figure_options = _figure_options(plots_dir, plot_format, report_path, ls_alpha, at_coverage, len(files),
                                         figure_kinds)
        stdout_outputs += check_outputs(outputs, {"--report": report_path}, stdout_outputs, make_parents=True)
        outputs.check_folder(plots_dir, f".{plot_format}")
        swept = None if sweep is None else sweep_values([str(f) for f in files], sweep)
        jobs = model_jobs([str(f) for f in files], [str(v) for v in val] if val else None, options=options,
                          label_col=label_col, logits_col=logits_col, ignore_label=ignore_label, group_col=group_col,
                          pixels_per_image=pixels_per_image,
                          reader_settings={"input_kind": input_kind, "lm_norm": lm_norm, "ood_label": ood_label})
        if engine not in ("local", "ray"):
            raise SelcalError(f"--engine must be local or ray; got {engine!r}")
        with progress_bar() as progress, count_bar("models", enabled=len(jobs) > 1 or engine != "local") as done:
            result, failures = run_jobs(jobs, engine=engine, progress=progress, models_progress=done)
        for failure in failures:  # every model is evaluated, every failed one named; then nothing is written
            say(f"selcal: error: {failure.message}")
        if failures:
            raise typer.Exit(2)
        if swept is not None:
            add_sweep(result, sweep, swept)
        if bootstrap:
            result = _bootstrap(result, files, val, options, bootstrap, seed, confidence, bootstrap_refit,
                                label_col=label_col, logits_col=logits_col, ignore_label=ignore_label,
                                pixels_per_image=pixels_per_image, input_kind=input_kind, lm_norm=lm_norm,
                                ood_label=ood_label)
        board = leaderboard(result, sort_by, sweep)
        with outputs:  # every output appears together at the end of this block, or none does
            if json_path is not None:
                outputs.write(json_path, result.to_json())
            for output, render in ((csv_path, leaderboard_csv), (markdown_path, leaderboard_markdown)):
                if output is not None:
                    outputs.write(output, render(board))
            if errors_csv is not None:
                outputs.write(errors_csv, confident_errors_csv(result))
            figure_notes = _write_figures(result, plots_dir, report_path, outputs=outputs, **figure_options,
                                          run_settings={"label_col": label_col or "auto (label, labels, target or y)",
                                                        "logits_col": logits_col,
                                                        "ignore_label": ignore_label, "group_col": group_col})
            if plots_dir is not None:
                figure_notes += _write_rank_maps(result, plots_dir, plot_format, rank_maps, rank_maps_of,
                                                 outputs=outputs)
        if mlflow:
            from ..figures.render import default_workers
            from ..writers.trackers import log_to_mlflow

            run_id = log_to_mlflow(result, workers=default_workers(), figure_format=figure_options["fmt"],
                                   kinds=figure_options["kinds"], ls_alpha=figure_options["ls_alpha"],
                                   at_coverage=figure_options["at_coverage"])
            figure_notes.append(f"logged to the MLflow run {run_id}")
    except SelcalError as exc:
        fail_on(exc)
    except OSError as exc:  # a full disk or a vanished folder while writing
        fail(write_error(exc))
    if not quiet and not stdout_outputs:
        from ..report import render_leaderboard, render_table
        from ..report.leaderboard import PIPE_WIDTH

        console = Console()
        if len(result.models) == 1 or details:
            render_table(result, console)
        if len(result.models) > 1:
            shown = [{**row, "warnings": ()} for row in board] if no_warnings else board  # no marker to nothing
            render_leaderboard(shown, console if console.is_terminal else Console(width=PIPE_WIDTH))
    if bootstrap and not quiet and not stdout_outputs:
        from ..report import render_intervals

        render_intervals(result, Console())
    if len(result.models) == 1 and not quiet and not stdout_outputs:  # (several: under the leaderboard)
        from ..report.calibrators import render_terminal

        render_terminal(board, Console())
    if not quiet:
        for note in figure_notes:
            say(f"selcal: {note}")
    from ..io.segmentation import is_segmentation_folder

    segmentation = any(is_segmentation_folder(str(f)) for f in files)
    from ..io import expand_input

    lm_logs = any(settings or name for f in files for _, settings, name in expand_input(str(f)))
    note_ignored(ctx, [
        ("pixels_per_image", "--pixels-per-image", segmentation, "no segmentation folder among the TEST inputs"),
        ("lm_norm", "--lm-norm", lm_logs, "no lm-evaluation-harness log among the TEST inputs"),
        ("rank_maps", "--rank-maps", segmentation and plots_dir, "it needs --plots and a segmentation folder"),
        ("rank_maps_of", "--rank-maps-of", segmentation and plots_dir, "it needs --plots and a segmentation folder"),
        ("errors_top", "--errors-top", errors_csv or report_path, "it needs --errors-csv or --report"),
        ("at_coverage", "--at-coverage", group_col is not None and (plots_dir or report_path or mlflow),
         "it needs --group-col and --plots, --report or --mlflow"),
        ("ls_alpha", "--ls-alpha", plots_dir or report_path or mlflow, "it needs --plots, --report or --mlflow"),
        ("plot_format", "--plot-format", plots_dir or mlflow, "it needs --plots or --mlflow"),
        ("figure_kinds", "--figures", plots_dir or report_path or mlflow, "it needs --plots, --report or --mlflow"),
        ("bootstrap_refit", "--bootstrap-refit", bootstrap, "it needs --bootstrap B"),
        ("confidence", "--confidence", bootstrap, "it needs --bootstrap B"),
        ("sort_by", "--sort-by", len(result.models) > 1, "one TEST file: no leaderboard to sort"),
        ("details", "--details", len(result.models) > 1, "one TEST file: its table is shown anyway"),
        *score_option_rules(options.scores),
        ("val_fraction", "--val-fraction", any(m.split == "holdout" for m in result.models),
         "no random hold-out: the validation rows come from --val or a split column, or no score is fitted"),
    ])
    show_warnings([(model.name, w) for model in result.models for w in model.warnings], no_warnings,
                  of=len(result.models))
    from ..checks.common_ground import leaderboard_warning

    other_rows = leaderboard_warning(result.models)
    if other_rows and not no_warnings:
        say(f"selcal: warning: {other_rows}")


def _bootstrap(result, files, val, options, resamples, seed, confidence, refit, **read):
    """``evaluate --bootstrap``: intervals for every model, as ``selcal.evaluate(bootstrap=B)`` adds them."""
    from ..api import with_intervals

    with count_bar("bootstrap resamples" + (", fitted scores refitted" if refit else "")) as progress:
        return with_intervals(result, resamples=resamples, confidence=confidence, refit=refit,
                              paths=[str(f) for f in files], val=[str(v) for v in val] if val else None,
                              progress=progress, **read)


def _wants_profile(kinds) -> bool:
    """Whether --figures asks for a figure drawn from the sorted-logit profile (kept in the pass only then)."""
    from ..figures.render import parse_kinds

    chosen = parse_kinds(kinds)
    return chosen is None or bool(chosen & {"logit_profile", "pnorm_vmax"})


def _figure_options(plots_dir, plot_format, report_path, ls_alpha, at_coverage, n_files, kinds=None) -> dict:
    """Check the --plots/--report options before any work is done (matplotlib is not imported here)."""
    from ..figures.render import parse_kinds

    if plot_format not in ("png", "svg", "pdf"):
        raise SelcalError(f"--plot-format must be png, svg or pdf; got {plot_format!r}")
    if not 0 < at_coverage <= 1:
        raise SelcalError(f"--at-coverage must be a fraction in (0, 1], e.g. 0.1; got {at_coverage:g}")
    alphas = None
    if ls_alpha is not None:
        alphas = list(parse_floats(ls_alpha, "--ls-alpha"))
        if len(alphas) not in (1, n_files):
            raise SelcalError(f"--ls-alpha takes one value or one per TEST file ({n_files}); got {len(alphas)}")
        if any(not 0 <= a < 1 for a in alphas):
            raise SelcalError(f"--ls-alpha must be in [0, 1), e.g. 0.1; got {ls_alpha!r}")
    return {"fmt": plot_format, "ls_alpha": alphas, "at_coverage": at_coverage, "kinds": parse_kinds(kinds)}


def _write_rank_maps(result, plots_dir, fmt, count, of, *, outputs=None) -> list[str]:
    """--plots on segmentation folders: the uncertainty-rank maps (selcal/figures/segmentation.py)."""
    if count < 0:
        raise SelcalError(f"--rank-maps takes a number of images, 0 or more; got {count}")
    if not any(getattr(m, "clusters", None) is not None for m in result.models):
        return []
    from ..figures.segmentation import write_rank_maps

    images = split_items(of, "--rank-maps-of") if of is not None else None
    written = write_rank_maps(result, plots_dir, fmt, count=count, images=images, outputs=outputs)
    return [f"{len(written)} rank maps written to {plots_dir}"] if written else []


def _write_figures(result, plots_dir, report_path, *, outputs, fmt, ls_alpha, at_coverage, kinds=None,
                   run_settings=None) -> list[str]:
    """--plots and --report, staged in ``outputs``: matplotlib is imported only here, when one is asked for.

    Returns the lines to print: each figure not drawn (``note: ...``, with the reason), then
    what was written."""
    skipped: list[str] = []
    written = []
    figures = None
    if plots_dir is None and report_path is None:
        return []
    from ..figures.render import default_workers

    drawing = {"kinds": kinds, "workers": default_workers()}
    with count_bar("figures") as progress:
        if plots_dir is not None:
            from ..figures import write_plots

            figures = write_plots(result, plots_dir, fmt, ls_alpha=ls_alpha, at_coverage=at_coverage,
                                  keep_data=report_path is not None and fmt in ("png", "svg"), notes=skipped,
                                  outputs=outputs, progress=progress, **drawing)
            written.append(f"{len(figures)} figures written to {plots_dir}")
        if report_path is not None:
            from ..report.html import write_report

            write_report(result, report_path, figures if figures and fmt in ("png", "svg") else None,
                         ls_alpha=ls_alpha, at_coverage=at_coverage,
                         plot_settings={"plot_format": fmt, "figures": None if kinds is None else ",".join(sorted(kinds)),
                                        **(run_settings or {})},
                         notes=skipped, outputs=outputs, progress=progress, **drawing)
            written.append(f"report written to {report_path}")
    return [f"note: {line}" for line in dict.fromkeys(skipped)] + written


