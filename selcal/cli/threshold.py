"""``selcal threshold``: the Typer command, a thin skin over :func:`selcal.threshold.run.threshold`.

Registered on the ``selcal`` app by :mod:`selcal.cli`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..errors import SelcalError
from ..options import DEFAULT_DELTA, DEFAULT_RISK, DEFAULTS, PLOT_FORMATS, THRESHOLD_METHODS, FigureSettings
from .common import check_outputs, fail, fail_on, say, show_warnings, write_error
from .groups import SCORE_HELP, shared

def threshold(
    test: Path = typer.Argument(..., metavar="TEST", show_default=False,
                                help="TEST dump (any input of selcal evaluate): its evaluation rows measure the "
                                     "threshold."),
    val: Optional[Path] = typer.Option(None, "--val", help="Validation dump to calibrate on (else the split column, "
                                                           "else a seeded hold-out of TEST, as evaluate)."),
    score: Optional[str] = typer.Option(None, "--score", show_default=False,
                                        help=SCORE_HELP.format(scores="msp, temp, pnorm, ...")),  # (registry_help)
    score_col: Optional[str] = typer.Option(None, "--score-col", metavar="COLUMN",
                                            help="A file of confidences without logits (a confidence, a prediction "
                                                 "and a label per row): the column to certify on, higher = more "
                                                 "confident (default 'confidence')."),
    risk: str = typer.Option(f"{DEFAULT_RISK:g}", "--risk", help="Target selective risk r in (0, 1), as a fraction or "
                                                    "in percent; several give a table, e.g. 0.01,0.05,0.1 or 1%,5%,10%."),
    delta: str = typer.Option(f"{DEFAULT_DELTA:g}", "--delta", help="The guarantee holds with probability at least "
                                                                    "1 - delta (a fraction, or in percent: 10%)."),
    method: str = typer.Option(THRESHOLD_METHODS[0], "--method", help="sgr (Geifman & El-Yaniv 2017) or ltt (Learn then Test, "
                                                       "fixed sequence over the coverages 1%..100%)."),
    dtype: Optional[str] = typer.Option(None, "--dtype", show_default=False,
                                        help="Precision the confidences are computed at (default float64, selcal's "
                                             "own); float32: the score's softmax in float32 throughout, as a service "
                                             "usually runs it. The certificate holds for that precision."),
    per_class: bool = typer.Option(False, "--per-class", help="One certified threshold per predicted class."),
    delta_per_group: bool = typer.Option(False, "--delta-per-group",
                                         help="With --group-col or --per-class: each group at delta, a guarantee for "
                                              "each group on its own (default: delta / G, all groups together)."),
    json_path: Optional[str] = typer.Option(None, "--json", help="Write the answer as JSON to PATH; '-' for stdout."),
    plots: Optional[Path] = typer.Option(None, "--plots", metavar="DIR", help="Write the figure 'threshold' "
                                             "(thresholds and bounds on the risk-coverage curve) into DIR."),
    plot_format: str = typer.Option(PLOT_FORMATS[0], "--plot-format", help="Format of the --plots file."),
    report: Optional[Path] = typer.Option(None, "--report", metavar="FILE.html", help="Write one "
                                               "self-contained HTML page: the answer, the table and the figure."),
    label_col: Optional[str] = shared("label_col"),
    logits_col: Optional[str] = shared("logits_col"),
    ignore_label: Optional[int] = shared("ignore_label"),
    group_col: Optional[str] = typer.Option(None, "--group-col", help="Column naming a group per row (e.g. source): "
                                            "one certified threshold per group, all holding together."),
    ood_label: Optional[int] = typer.Option(None, "--ood-label", metavar="V", help="Rows with this label belong "
                                            "to no class (out-of-distribution): errors wherever accepted, never "
                                            "fitted on (as evaluate)."),
    input_kind: Optional[str] = shared("input_kind"),
    lm_norm: Optional[str] = shared("lm_norm"),
    lm_choices: Optional[int] = shared("lm_choices"),
    val_fraction: float = shared("val_fraction"),
    seed: int = typer.Option(DEFAULTS.seed, help="Seed of the hold-out and of the fit/calibration halves."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print nothing on the terminal (warnings still go to stderr)."),
    no_warnings: bool = typer.Option(False, "--no-warnings", help="Do not print the warnings about the data on stderr."),
):
    """Pick the confidence threshold whose selective risk on new data is certified: at most r with
    probability at least 1 - delta."""
    from rich.console import Console

    from ..threshold.run import threshold as run_threshold
    from ..writers.output import Outputs

    try:
        FigureSettings(plot_format=plot_format)  # (its check)
        outputs = Outputs(inputs=[test, *([val] if val is not None else [])])
        stdout_outputs = check_outputs(outputs, {"--json": json_path})
        stdout_outputs += check_outputs(outputs, {"--report": report}, stdout_outputs, make_parents=True)
        outputs.check_folder(plots, f".{plot_format}")
        result = run_threshold(str(test), None if val is None else str(val), score=score, score_col=score_col, risk=risk, delta=delta,
                               method=method, label_col=label_col, logits_col=logits_col, ignore_label=ignore_label,
                               input_kind=input_kind, ood_label=ood_label, lm_norm=lm_norm, lm_choices=lm_choices,
                               val_fraction=val_fraction, seed=seed, dtype=dtype, group_col=group_col,
                               per_class=per_class, delta_per_group=delta_per_group)
        figure = None
        with outputs:  # every output appears together, or none does
            if json_path is not None:
                outputs.write(json_path, result.to_json())
            if plots is not None or report is not None:
                from ..figures.threshold import render_threshold

                fmt = plot_format if plots is not None else "png"
                figure = render_threshold(result, fmt)
                if plots is not None:
                    outputs.write(outputs.folder(plots) / f"threshold.{plot_format}", figure)
            if report is not None:
                from ..threshold.render import render_html

                page_figure = figure if fmt in ("png", "svg") else render_threshold(result, "png")
                outputs.write(report, render_html(result, page_figure, fmt if fmt in ("png", "svg") else "png"),
                              make_parents=True)
    except SelcalError as exc:
        fail_on(exc)
    except OSError as exc:
        fail(write_error(exc))
    if not quiet and not stdout_outputs:
        from ..threshold.render import render_terminal

        console = Console()
        render_terminal(result, console if console.is_terminal else Console(width=160))
    if not quiet:
        if plots is not None:
            say(f"selcal: 1 figure written to {plots}")
    show_warnings([(result.name, line) for line in result.warnings], no_warnings)
