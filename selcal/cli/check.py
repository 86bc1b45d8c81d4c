"""``selcal check`` and ``selcal compare``: parse the options, call :mod:`selcal.checks`, write the
report (JSON, Markdown, JUnit), show it, and exit with its status (0 within bounds, 1 worse)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional

import typer

from ..errors import SelcalError
from ..options import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES
from .common import check_outputs, fail, fail_on, note_ignored, show_warnings, write_error
from .groups import BOUND_HELP, FORMATS, build_options, shared, verdict, with_numbers, with_report
from .progress import count_bar


@with_report
def check(
    ctx: typer.Context,
    current: Path = typer.Argument(..., help="Result JSON to check (`selcal evaluate --json`).", show_default=False),
    baseline: Optional[Path] = typer.Option(None, "--baseline", help="Result JSON to compare against."),
    tolerance: Optional[List[str]] = verdict("tolerance"),
    maximum: Optional[List[str]] = typer.Option(None, "--max", metavar="METRIC=VALUE", help="Upper bound on the current value. " + BOUND_HELP),
    minimum: Optional[List[str]] = typer.Option(None, "--min", metavar="METRIC=VALUE", help="Lower bound on the current value. " + BOUND_HELP),
    metric: Optional[List[str]] = typer.Option(None, "--metric", help="Judge these metrics against the baseline, [SCORE.]METRIC as msp.aurc or accuracy (repeatable; default: accuracy, and AURC and ECE of the first score)."),
    allow_other_data: bool = typer.Option(False, "--allow-other-data", help="Judge against a baseline evaluated on other data (refused otherwise)."),
    **given: Any,  # the options of the report (groups.REPORT)
):
    """Check a result against a baseline and bounds: exit 0 within bounds, 1 regression, 2 bad input."""
    from .. import checks
    from ..writers.output import Outputs

    try:
        tolerances = checks.parse_bounds(tolerance, "--tolerance")
        maxima = checks.parse_bounds(maximum, "--max")
        minima = checks.parse_bounds(minimum, "--min")
        only = checks.parse_specs(metric, "--metric")
        outputs = Outputs(inputs=[current, baseline])
        to_stdout = check_outputs(outputs, _report_paths(ctx))
        current_data = checks.load_result(current)
        baseline_data = checks.load_result(baseline) if baseline is not None else None
        report = checks.check(current_data, baseline_data, tolerances=tolerances, maxima=maxima, minima=minima,
                              only=only, current_path=str(current), baseline_path=str(baseline),
                              all_metrics=given["show_all"] and baseline is not None,
                              allow_other_data=allow_other_data)
    except SelcalError as exc:
        fail(str(exc))
    note_ignored(ctx, [("metric", "--metric", baseline is not None, "it restricts the comparison with --baseline"),
                       ("allow_other_data", "--allow-other-data", baseline is not None, "no --baseline")])
    _finish(ctx, report, outputs, to_stdout)


@with_report
@with_numbers
def compare(
    ctx: typer.Context,
    file_a: Path = typer.Argument(..., metavar="A", help=f"Dump of the reference model: {FORMATS}.", show_default=False),
    file_b: Path = typer.Argument(..., metavar="B", help="Dump of the model to judge, on the same rows.", show_default=False),
    val: Optional[List[Path]] = typer.Option(None, "--val", help="Validation dumps: give it twice, A's then B's."),
    bootstrap: int = typer.Option(DEFAULT_RESAMPLES, "--bootstrap", metavar="B", help="Paired bootstrap resamples."),
    confidence: float = typer.Option(DEFAULT_CONFIDENCE, "--confidence", help="Level of the intervals."),
    seed: int = shared("seed"),
    tolerance: Optional[List[str]] = verdict("tolerance"),
    metric: Optional[List[str]] = typer.Option(None, "--metric", help="Judge these metrics, [SCORE.]METRIC as msp.aurc or accuracy (repeatable; default: accuracy, and AURC and ECE of the first score)."),
    allow_other_data: bool = typer.Option(False, "--allow-other-data", help="Pair rows by position even when the two dumps hold other labels or ids (refused otherwise)."),
    label_col: Optional[str] = shared("label_col"),
    logits_col: Optional[str] = shared("logits_col"),
    ignore_label: Optional[int] = shared("ignore_label"),
    input_kind: Optional[str] = shared("input_kind"),
    ood_label: Optional[int] = typer.Option(None, "--ood-label", metavar="V", help="Rows with this label belong to no class: always errors, in both models."),
    pixels_per_image: Optional[int] = shared("pixels_per_image"),
    **given: Any,  # the options that change a number (groups.NUMBERS, read by build_options) and REPORT's
):
    """Is B worse than A? Paired-bootstrap differences B - A on the same rows: exit 1 if B is worse."""
    from .. import checks
    from ..writers.output import Outputs

    try:
        options = build_options(ctx)
        tolerances = checks.parse_bounds(tolerance, "--tolerance")
        only = checks.parse_specs(metric, "--metric")
        outputs = Outputs(inputs=[file_a, file_b, *(val or [])])
        to_stdout = check_outputs(outputs, _report_paths(ctx))
        with count_bar("paired bootstrap resamples") as progress:
            report = checks.compare_files(
                file_a, file_b, val=[str(v) for v in val] if val else None, options=options, label_col=label_col,
                logits_col=logits_col, ignore_label=ignore_label, resamples=bootstrap, seed=seed,
                confidence=confidence, tolerances=tolerances, only=only, progress=progress,
                pixels_per_image=pixels_per_image, input_kind=input_kind, ood_label=ood_label,
                all_metrics=given["show_all"], allow_other_data=allow_other_data,
            )
    except SelcalError as exc:
        fail_on(exc)
    _finish(ctx, report, outputs, to_stdout)


def _report_paths(ctx: typer.Context) -> dict[str, str | None]:
    """The files of the report a command was asked for, by flag."""
    return {"--json": ctx.params["json_path"], "--markdown": ctx.params["markdown_path"],
            "--junit": ctx.params["junit_path"]}


def _finish(ctx: typer.Context, report, outputs, to_stdout: list[str]) -> None:
    """Write a check/compare report where asked (all files or none), show it, and exit with its status (0, 1)."""
    given = ctx.params
    try:
        with outputs:
            for path, text in zip(_report_paths(ctx).values(), (report.to_json, report.to_markdown, report.to_junit)):
                if path is not None:
                    outputs.write(path, text())
    except SelcalError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(write_error(exc))
    if not given["quiet"] and not to_stdout:
        report.render(_report_console(), show_all=given["show_all"])
    show_warnings(report.warnings, given["no_warnings"], width=100)
    raise typer.Exit(report.exit_code)


def _report_console():
    """The console of check/compare: the terminal's width; in a pipe or a CI log, 100 columns."""
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=100)


