"""The ``selcal`` command: Typer commands only, each a thin skin over the library."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, List, Optional

import typer

from ._version import __version__
from .errors import OptionError, SelcalError
from .escape import printable
from .options import DEFAULTS
from .scores import REGISTRY, load_entry_points

load_entry_points()  # scores that installed packages declare (entry point group selcal.scores)

app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    # Plain Click help: it wraps at word boundaries to any width (never cuts a default off),
    # reads the same in a pipe or a CI log, and shows no <bool> metavar on flags.
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="How well does a classifier know when it is wrong? Selective classification and calibration from saved logits.",
)


_SCORES_HELP = f"Scores to evaluate, comma-separated, or 'all': {', '.join(REGISTRY)}."


def _text(values) -> str:
    """A default of Options as the command line writes it: ``0.01,0.05,0.1``, ``1-10``."""
    values = list(values)
    if len(values) > 2 and all(isinstance(v, int) for v in values) and values == list(range(values[0], values[-1] + 1)):
        return f"{values[0]}-{values[-1]}"
    return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)
_NO_WARNINGS_HELP = "Do not print the warnings about the data on stderr (they stay in the JSON)."


def _say(line: str) -> None:
    """One line on stderr (an error, a warning or a note), always one line."""
    typer.echo(printable(line), err=True)


def _fail(message: str) -> None:
    _say(f"selcal: error: {message}")
    raise typer.Exit(2)


def _floats(text: str, option: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise SelcalError(f"{option} takes comma-separated numbers, e.g. 0.01,0.05; got {text!r}") from None
    if not values:
        raise SelcalError(f"{option} needs at least one value")
    return values


def _options(ctx: typer.Context, **values):
    """:class:`selcal.Options` from the command line: every parameter of the command that is a
    field of Options (its flag was built from that field's default), plus ``values``.

    Options checks and parses the values (the one validation of the Python API too); its
    errors name Python arguments, renamed here to the flags.
    """
    from dataclasses import fields

    from .options import Options

    given = {f.name: ctx.params[f.name] for f in fields(Options) if f.name in ctx.params}
    given.update(values)
    for name in ("score_cols", "uncertainty_cols"):
        if name in given:
            given[name] = tuple(given[name] or ())
    try:
        return Options(**given)
    except OptionError as exc:
        raise _flag_error(exc) from None


# Options that evaluate and compare share, declared once: flags and help here, defaults from Options.
_SHARED = {
    "scores": dict(default=_text(DEFAULTS.scores), help=_SCORES_HELP),
    "bins": dict(default=DEFAULTS.bins, help="Bins of every binned calibration metric."),
    "risks": dict(default=_text(DEFAULTS.risks), help="Risk targets r of cov@r (fractions)."),
    "coverages": dict(default=_text(DEFAULTS.coverages), help="Coverages c of risk@c (fractions)."),
    "aurc_estimator": dict(default=DEFAULTS.aurc_estimator,
                           help="AURC estimator: mean (CONVENTIONS.md) or trapz (Xia et al. code)."),
    "val_fraction": dict(default=DEFAULTS.val_fraction,
                         help="Hold-out fraction when there is no --val and no split column."),
    "seed": dict(default=DEFAULTS.seed, help="Seed of the random hold-out and of the bootstrap."),
    "center": dict(default=DEFAULTS.center, flags=("--center/--no-center",),
                   help="Centre logits before the p-norm (default) or not (eq. 17)."),
    "p_grid": dict(default=_text(DEFAULTS.p_grid), help="Values of p to search, e.g. 1-10 or 1,2,4."),
    "pnorm_objective": dict(default=DEFAULTS.pnorm_objective, help="Validation objective of the p search: aurc or augrc."),
    "temp_objective": dict(default=DEFAULTS.temp_objective, help="Temperature chosen by validation NLL (exact) or by "
                                                                 "validation AURC (a log grid, as Cattelan & Silva)."),
    "label_col": dict(default=None, help="Name of the label column (default: the one of label, labels, target, "
                                         "targets, y)."),
    "logits_col": dict(default=None, help="Name of the logits list column (default: 'logits')."),
    "ignore_label": dict(default=None, help="Drop rows with this label (e.g. 255)."),
    "pixels_per_image": dict(default=None, flags=("--pixels-per-image",), metavar="P",
                             help="Segmentation folders: labelled pixels drawn per image (default 5000; 0 = all), "
                                  "the same for every model."),
    "quiet": dict(default=False, flags=("--quiet", "-q"), help="No table on the terminal (warnings still go to stderr)."),
}


_NUMBERS = {"scores": str, "bins": int, "risks": str, "coverages": str, "aurc_estimator": str, "val_fraction": float,
            "center": bool, "p_grid": str, "pnorm_objective": str, "temp_objective": str}


def _with_numbers(command):
    """Give ``command`` the options of :data:`_NUMBERS` (those of Options that evaluate and compare
    share), declared once here: its ``**numbers`` becomes these parameters for Typer."""
    import inspect

    signature = inspect.signature(command)
    kept = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=_shared(name), annotation=kind)
             for name, kind in _NUMBERS.items()]
    command.__signature__ = signature.replace(parameters=kept + added)
    command.__annotations__ = {**command.__annotations__, **_NUMBERS}
    return command


def _shared(name: str):
    """The typer option ``name`` of :data:`_SHARED` (a new object for each command)."""
    spec = dict(_SHARED[name])
    return typer.Option(spec.pop("default"), *spec.pop("flags", ()), **spec)


def _flag_error(exc: OptionError) -> OptionError:
    """The error of a Python argument (``p_grid``), naming its command-line flag (``--p-grid``)."""
    return exc.named("--" + exc.option.replace("_", "-"))


def _version(value: bool):
    if value:
        typer.echo(f"selcal {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
):
    """selcal: selective classification and calibration metrics from saved logits."""


_FORMATS = ("Parquet (a file, or a folder or glob of parts), CSV, TSV, JSON Lines, .npz, .npy, .pt/.pth, a folder of "
            "segmentation .npz, fd-shifts raw_logits.npz / raw_output.npz, or lm-evaluation-harness "
            "samples_<task>_<date>.jsonl logs")
_FILES_HELP = f"TEST dumps, one model each: {_FORMATS} (a folder of logs: a model per log)."
_INPUT_HELP = ("What the logit columns hold: logits, probs (probabilities; their logs are the logits, and the scores "
               "that need raw logits are not available) or logprobs. Default: probabilities are detected (every row "
               "in [0, 1] summing to 1 within 1e-3; columns prob_k are probabilities).")


@app.command()
@_with_numbers
def evaluate(
    ctx: typer.Context,
    files: List[Path] = typer.Argument(..., help=_FILES_HELP, show_default=False),
    val: Optional[List[Path]] = typer.Option(None, "--val", help="Validation dump; repeat once per TEST file."),
    json_path: Optional[str] = typer.Option(None, "--json", help="Write JSON (schema 1) to PATH; '-' for stdout."),
    score_cols: Optional[List[str]] = typer.Option(None, "--score-col", metavar="COLUMN", help="A column of the TEST file to evaluate as a confidence (higher = more confident), beside the logit scores; repeatable. Values in [0, 1] also get calibration metrics."),
    uncertainty_cols: Optional[List[str]] = typer.Option(None, "--uncertainty-col", metavar="COLUMN", help="A column of the TEST file to evaluate as an uncertainty (lower = more confident); repeatable."),
    aece_estimator: str = typer.Option(DEFAULTS.aece_estimator, help="Adaptive ECE: equal-mass (exact, CONVENTIONS.md) or mbls (the bin edges of the MbLS/ACLS evaluation code)."),
    label_col: Optional[str] = _shared("label_col"),
    logits_col: Optional[str] = _shared("logits_col"),
    ignore_label: Optional[int] = _shared("ignore_label"),
    group_col: Optional[str] = typer.Option(None, help="Column naming a group per row (e.g. source): per-group metrics."),
    input_kind: Optional[str] = typer.Option(None, "--input", metavar="KIND", help=_INPUT_HELP),
    ood_label: Optional[int] = typer.Option(None, "--ood-label", metavar="V", help="Rows with this label belong to no class (out-of-distribution): always errors, counted in the selective and calibration metrics, reported as a group beside the in-distribution rows."),
    lm_norm: Optional[str] = typer.Option(None, "--lm-norm", metavar="NORM", help="lm-evaluation-harness logs: none (the choices' log-likelihoods, lm-eval's acc), chars (divided by each choice's length in characters, acc_norm) or bytes (in UTF-8 bytes, acc_bytes)."),
    pixels_per_image: Optional[int] = _shared("pixels_per_image"),
    seed: int = _shared("seed"),
    bootstrap: int = typer.Option(0, "--bootstrap", metavar="B", help="Add percentile confidence intervals from B bootstrap resamples of the evaluation rows (e.g. 1000)."),
    bootstrap_refit: bool = typer.Option(False, "--bootstrap-refit", help="Also resample the validation rows and refit every fitted score (T, p, ...) on every resample (slow)."),
    confidence: float = typer.Option(0.95, "--confidence", help="Level of the bootstrap intervals."),
    sort_by: Optional[str] = typer.Option(None, "--sort-by", help="Leaderboard column to sort by (several models; any column of the CSV), best first. Default: the swept value with --sweep, else aurc_best_score (the best AURC of every score)."),
    csv_path: Optional[str] = typer.Option(None, "--csv", help="Write the leaderboard (one row per model) as CSV to PATH; '-' for stdout."),
    markdown_path: Optional[str] = typer.Option(None, "--markdown", help="Write the leaderboard as a Markdown table to PATH; '-' for stdout."),
    sweep: Optional[str] = typer.Option(None, "--sweep", metavar="NAME", help="A hyperparameter that differs between the models (Parquet metadata key NAME, else NAME=VALUE or NAME_VALUE in the file name): a leaderboard column NAME and a figure sweep_NAME of the headline metrics against it."),
    errors_csv: Optional[str] = typer.Option(None, "--errors-csv", metavar="PATH", help="Write the most confident errors of every score and model as CSV to PATH; '-' for stdout."),
    errors_top: int = typer.Option(DEFAULTS.errors_top, "--errors-top", metavar="N", help="How many of the most confident errors per score and model (--errors-csv, --report)."),
    details: bool = typer.Option(False, "--details", help="With several models, print every model's full table too."),
    plots_dir: Optional[Path] = typer.Option(None, "--plots", metavar="DIR", help="Write the figures (rc, reliability, vmax_msp, pnorm_search, overlays) into DIR."),
    plot_format: str = typer.Option("png", "--plot-format", help="Format of the --plots files: png, svg or pdf."),
    figure_kinds: Optional[str] = typer.Option(None, "--figures", metavar="KINDS", help="Only these figures (--plots, --report), comma-separated: rc, reliability, vmax_msp, pnorm_search, errors_by_group, logit_profile, pnorm_vmax, sweep (overlays come with their kind); default all."),
    report_path: Optional[Path] = typer.Option(None, "--report", metavar="FILE.html", help="Write one self-contained HTML page: tables, figures, settings."),
    ls_alpha: Optional[str] = typer.Option(None, "--ls-alpha", help="Label-smoothing alpha of the models, one value or one per TEST file: draws the target ceiling (1-a)+a/K on vmax_msp."),
    at_coverage: float = typer.Option(0.1, "--at-coverage", help="Coverage of the errors-by-group figure (with --group-col)."),
    engine: str = typer.Option("local", "--engine", help="local (this process) or ray (one Ray task per model, on RAY_ADDRESS or a local Ray): the same numbers."),
    rank_maps: int = typer.Option(3, "--rank-maps", metavar="N", help="Segmentation folders with --plots: uncertainty-rank maps of the N images with the most confident errors."),
    rank_maps_of: Optional[str] = typer.Option(None, "--rank-maps-of", metavar="ID,...", help="Segmentation folders with --plots: rank maps of these images instead."),
    quiet: bool = _shared("quiet"),
    no_warnings: bool = typer.Option(False, "--no-warnings", help=_NO_WARNINGS_HELP),
    **numbers: Any,  # the options that change a number (_NUMBERS): read through _options(ctx)
):
    """Evaluate the confidence of one or several models from their saved logits."""
    from rich.console import Console

    from .evaluate import add_sweep, model_jobs, run_jobs, sweep_values
    from .io import Outputs

    try:
        options = _options(ctx, logit_profile=(plots_dir is not None or report_path is not None)
                           and _wants_profile(figure_kinds))
        if bootstrap:
            from .bootstrap import check_arguments

            check_arguments(bootstrap, confidence)  # before the work, not after it
        outputs = Outputs(inputs=[*files, *(val or [])])
        stdout_outputs = _check_outputs(outputs, {"--json": json_path, "--csv": csv_path, "--markdown": markdown_path,
                                                          "--errors-csv": errors_csv})
        from .report import confident_errors_csv, leaderboard, leaderboard_csv, leaderboard_markdown

        if sort_by:
            leaderboard(type("Empty", (), {"models": []})(), sort_by, sweep)  # refuse a bad column before the work
        figure_options = _figure_options(plots_dir, plot_format, report_path, ls_alpha, at_coverage, len(files),
                                         figure_kinds)
        stdout_outputs += _check_outputs(outputs, {"--report": report_path}, stdout_outputs, make_parents=True)
        outputs.check_folder(plots_dir, f".{plot_format}")
        swept = None if sweep is None else sweep_values([str(f) for f in files], sweep)
        jobs = model_jobs([str(f) for f in files], [str(v) for v in val] if val else None, options=options,
                          label_col=label_col, logits_col=logits_col, ignore_label=ignore_label, group_col=group_col,
                          pixels_per_image=pixels_per_image,
                          reader_settings={"input_kind": input_kind, "lm_norm": lm_norm, "ood_label": ood_label})
        if engine not in ("local", "ray"):
            raise SelcalError(f"--engine must be local or ray; got {engine!r}")
        with _progress_bar() as progress, _count_bar("models", enabled=len(jobs) > 1 or engine != "local") as done:
            result, failures = run_jobs(jobs, engine=engine, progress=progress, models_progress=done)
        for failure in failures:  # every model is evaluated, every failed one named; then nothing is written
            _say(f"selcal: error: {failure.message}")
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
    except SelcalError as exc:
        _fail(str(_flag_error(exc) if isinstance(exc, OptionError) else exc))
    except OSError as exc:  # a full disk or a vanished folder while writing
        _fail(_write_error(exc))
    if not quiet and not stdout_outputs:
        from .report import render_leaderboard, render_table

        console = Console()
        if len(result.models) == 1 or details:
            render_table(result, console)
        if len(result.models) > 1:
            shown = [{**row, "warnings": ()} for row in board] if no_warnings else board  # no marker to nothing
            render_leaderboard(shown, console if console.is_terminal else Console(width=160))
    if bootstrap and not quiet and not stdout_outputs:
        from .report import render_intervals

        render_intervals(result, Console())
    if not quiet:
        for note in figure_notes:
            _say(f"selcal: {note}")
    from .io.segmentation import is_segmentation_folder

    segmentation = any(is_segmentation_folder(str(f)) for f in files)
    from .io import expand_input

    lm_logs = any(settings or name for f in files for _, settings, name in expand_input(str(f)))
    _note_ignored(ctx, [
        ("pixels_per_image", "--pixels-per-image", segmentation, "no segmentation folder among the TEST inputs"),
        ("lm_norm", "--lm-norm", lm_logs, "no lm-evaluation-harness log among the TEST inputs"),
        ("rank_maps", "--rank-maps", segmentation and plots_dir, "it needs --plots and a segmentation folder"),
        ("rank_maps_of", "--rank-maps-of", segmentation and plots_dir, "it needs --plots and a segmentation folder"),
        ("errors_top", "--errors-top", errors_csv or report_path, "it needs --errors-csv or --report"),
        ("at_coverage", "--at-coverage", group_col is not None and (plots_dir or report_path),
         "it needs --group-col and --plots or --report"),
        ("ls_alpha", "--ls-alpha", plots_dir or report_path, "it needs --plots or --report"),
        ("plot_format", "--plot-format", plots_dir, "it needs --plots"),
        ("figure_kinds", "--figures", plots_dir or report_path, "it needs --plots or --report"),
        ("bootstrap_refit", "--bootstrap-refit", bootstrap, "it needs --bootstrap B"),
        ("confidence", "--confidence", bootstrap, "it needs --bootstrap B"),
        ("sort_by", "--sort-by", len(result.models) > 1, "one TEST file: no leaderboard to sort"),
        ("details", "--details", len(result.models) > 1, "one TEST file: its table is shown anyway"),
        *_score_option_rules(options.scores),
        ("val_fraction", "--val-fraction", any(m.split == "holdout" for m in result.models),
         "no random hold-out: the validation rows come from --val or a split column, or no score is fitted"),
    ])
    show_warnings([(model.name, w) for model in result.models for w in model.warnings], no_warnings)
    from .common_ground import leaderboard_warning

    other_rows = leaderboard_warning(result.models)
    if other_rows and not no_warnings:
        _say(f"selcal: warning: {other_rows}")


def _score_option_rules(chosen) -> list[tuple]:
    """(parameter, flag, has an effect, why not) of every option that only some scores read
    (their registry entries' ``options``): it has an effect when a chosen score reads it."""
    readers: dict[str, list[str]] = {}
    for name, entry in REGISTRY.items():
        for option in entry.options:
            readers.setdefault(option, []).append(name)
    rules = []
    for option, names in readers.items():
        flag = "--center/--no-center" if option == "center" else "--" + option.replace("_", "-")
        why = f"{names[0]} is not in --scores" if len(names) == 1 else f"none of {', '.join(names)} is in --scores"
        rules.append((option, flag, any(n in chosen for n in names), why))
    return rules


def _note_ignored(ctx: typer.Context, rules) -> None:
    """Name, in one ``selcal: note:`` line on stderr, every option the user gave that has no
    effect with these inputs (rules: (parameter, flag, has an effect, why not)), rather than
    ignore it silently. Printed whatever -q or --no-warnings say: it is about the command, not the data."""
    given = [(flag, why) for name, flag, effect, why in rules
             if not effect and ctx.get_parameter_source(name) is not None
             and ctx.get_parameter_source(name).name not in ("DEFAULT", "DEFAULT_MAP")]
    if given:
        sys.stdout.flush()
        _say("selcal: note: ignored, no effect with these inputs: "
             + "; ".join(f"{flag} ({why})" for flag, why in given))


def show_warnings(warnings, silenced: bool = False, width: int | None = None) -> None:
    """The one rule for what selcal knows about the data: every warning goes to stderr, always
    (also with -q, with an output to '-', under a leaderboard and in check/compare), as
    ``selcal: warning: MODEL: text``, after whatever went to stdout; ``--no-warnings`` silences it.

    ``warnings``: (model name, text) pairs.
    """
    if silenced or not warnings:
        return
    sys.stdout.flush()  # a CI log interleaves the two streams: the warnings come under the tables
    for name, text in warnings:
        line = f"selcal: warning: {name}: {text}"
        if width is None or len(line) <= width:
            _say(line)
            continue
        import textwrap  # check and compare: a CI log shows 100 columns

        for part in textwrap.wrap(printable(line), width=width, subsequent_indent="  ", break_long_words=False):
            typer.echo(part, err=True)


def _wants_profile(kinds) -> bool:
    """Whether --figures asks for a figure drawn from the sorted-logit profile (kept in the pass only then)."""
    from .figures.render import parse_kinds

    chosen = parse_kinds(kinds)
    return chosen is None or bool(chosen & {"logit_profile", "pnorm_vmax"})


def _figure_options(plots_dir, plot_format, report_path, ls_alpha, at_coverage, n_files, kinds=None) -> dict:
    """Check the --plots/--report options before any work is done (matplotlib is not imported here)."""
    from .figures.render import parse_kinds

    if plot_format not in ("png", "svg", "pdf"):
        raise SelcalError(f"--plot-format must be png, svg or pdf; got {plot_format!r}")
    if not 0 < at_coverage <= 1:
        raise SelcalError(f"--at-coverage must be a fraction in (0, 1], e.g. 0.1; got {at_coverage:g}")
    alphas = None
    if ls_alpha is not None:
        alphas = list(_floats(ls_alpha, "--ls-alpha"))
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
    from .figures.segmentation import write_rank_maps

    images = [i.strip() for i in of.split(",") if i.strip()] if of else None
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
    from .figures.render import default_workers

    drawing = {"kinds": kinds, "workers": default_workers()}
    with _count_bar("figures") as progress:
        if plots_dir is not None:
            from .figures import write_plots

            figures = write_plots(result, plots_dir, fmt, ls_alpha=ls_alpha, at_coverage=at_coverage,
                                  keep_data=report_path is not None and fmt in ("png", "svg"), notes=skipped,
                                  outputs=outputs, progress=progress, **drawing)
            written.append(f"{len(figures)} figures written to {plots_dir}")
        if report_path is not None:
            from .html_report import write_report

            write_report(result, report_path, figures if figures and fmt in ("png", "svg") else None,
                         ls_alpha=ls_alpha, at_coverage=at_coverage,
                         plot_settings={"plot_format": fmt, "figures": None if kinds is None else ",".join(sorted(kinds)),
                                        **(run_settings or {})},
                         notes=skipped, outputs=outputs, progress=progress, **drawing)
            written.append(f"report written to {report_path}")
    return [f"note: {line}" for line in dict.fromkeys(skipped)] + written


@contextmanager
def _progress_bar(delay: float = 2.0):
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


def _check_outputs(outputs, paths: dict, already: list[str] = (), make_parents: bool = False) -> list[str]:
    """Check the output paths before any work; the options among them that write to stdout (one at most)."""
    to_stdout = []
    for option, path in paths.items():
        target = outputs.check(None if path is None else str(path), make_parents=make_parents)
        if target is not None and target.is_stdout:
            to_stdout.append(option)
    if len(to_stdout) + len(already) > 1:
        names = ", ".join([*already, *to_stdout])
        raise SelcalError(f"only one output can go to stdout ('-' or /dev/stdout); got {names}")
    return to_stdout


def _check_writable(path) -> None:
    """Refuse an output path that cannot or must not be written (selcal.io.output.classify), before the work."""
    from .io.output import classify

    classify(str(path))


def _write_error(exc: OSError) -> str:
    where = f"{exc.filename}: " if exc.filename else ""
    return f"{where}cannot write ({exc.strerror or exc}); free space or choose another path"


class _Signalled(BaseException):
    """SIGINT or SIGTERM, raised where the run is so that every ``finally`` and discard runs.

    Not a KeyboardInterrupt: Click would turn that into its own exit before selcal could say why.
    """

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


_SIGNAL_LINES = {"SIGINT": "selcal: aborted", "SIGTERM": "selcal: terminated"}


def _raise_signal(signum, frame) -> None:
    raise _Signalled(signum)


def _rearm_dropped_signal(unraisable) -> None:
    """``sys.unraisablehook``: a :class:`_Signalled` raised while Python ran a finalizer or a weakref
    callback (the handler runs at whatever line is next, there too) is dropped by Python, which
    printed a traceback and let the run go on to exit 0. Raise it again 10 ms later, from a timer
    (raising it here would be dropped too): by then the run is back in its own code, and if not, this
    hook arms the timer again."""
    import signal

    if isinstance(unraisable.exc_value, _Signalled) and hasattr(signal, "setitimer"):
        signum = unraisable.exc_value.signum
        signal.signal(signal.SIGALRM, lambda _alarm, frame: _raise_signal(signum, frame))
        signal.setitimer(signal.ITIMER_REAL, 0.01)
        return
    sys.__unraisablehook__(unraisable)


def _catch_signals() -> None:
    """SIGINT and SIGTERM end the run through :class:`_Signalled` (only the main thread may set handlers)."""
    import signal

    for name in _SIGNAL_LINES:
        try:
            signal.signal(getattr(signal, name), _raise_signal)
        except (AttributeError, ValueError, OSError):
            pass
    sys.unraisablehook = _rearm_dropped_signal


def run() -> None:
    """Console entry point: usage errors as one ``selcal: error:`` line, exit status 2.

    Ctrl-C prints ``selcal: aborted`` and exits 130, SIGTERM ``selcal: terminated`` and 143, after
    the temporary files of the outputs are removed.
    """
    import signal

    _catch_signals()
    try:
        code = app(standalone_mode=False)
    except _Signalled as exc:
        for name in _SIGNAL_LINES:  # a second signal now would cut the line short
            signal.signal(getattr(signal, name), signal.SIG_IGN)
        line = _SIGNAL_LINES.get(signal.Signals(exc.signum).name, "selcal: aborted")
        typer.echo(line, err=True)
        code = 128 + exc.signum
    except typer.Exit as exc:
        code = exc.exit_code
    except typer.Abort:
        _say("selcal: aborted")
        code = 130
    except MemoryError:  # the readers bound what they decode; what is left (e.g. many huge inputs at once)
        _say("selcal: error: out of memory; evaluate fewer or smaller inputs at once, or give Parquet dumps "
             "(read by row batches)")
        code = 2
    except Exception as exc:  # Click's usage errors (vendored by Typer): one line, not a box
        if not hasattr(exc, "format_message"):
            raise
        message = exc.format_message().strip()
        if message:  # (no arguments at all: the help was printed, nothing to add)
            _say(f"selcal: error: {message} (see selcal --help)")
        code = getattr(exc, "exit_code", 2)
    sys.exit(code if isinstance(code, int) else 0)


def _bootstrap(result, files, val, options, resamples, seed, confidence, refit, **read):
    """``evaluate --bootstrap``: intervals for every model, as ``selcal.evaluate(bootstrap=B)`` adds them."""
    from .evaluate import with_intervals

    with _count_bar("bootstrap resamples" + (", fitted scores refitted" if refit else "")) as progress:
        return with_intervals(result, resamples=resamples, confidence=confidence, refit=refit,
                              paths=[str(f) for f in files], val=[str(v) for v in val] if val else None,
                              progress=progress, **read)


def _finish(report, outputs, json_path, markdown_path, junit_path, to_stdout: list[str], quiet: bool,
            no_warnings: bool = False, show_all: bool = False) -> None:
    """Write a check/compare report where asked (all files or none), show it, and exit with its status (0, 1)."""
    try:
        with outputs:
            for path, text in ((json_path, report.to_json), (markdown_path, report.to_markdown),
                               (junit_path, report.to_junit)):
                if path is not None:
                    outputs.write(path, text())
    except SelcalError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(_write_error(exc))
    if not quiet and not to_stdout:
        report.render(_report_console(), show_all=show_all)
    show_warnings(report.warnings, no_warnings, width=100)
    raise typer.Exit(report.exit_code)


def _report_console():
    """The console of check/compare: the terminal's width; in a pipe or a CI log, 100 columns."""
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=100)


_BOUND_HELP = "METRIC=VALUE, METRIC as msp.aurc, aurc (every score), accuracy or MODEL:msp.aurc; repeatable."


@app.command()
def check(
    ctx: typer.Context,
    current: Path = typer.Argument(..., help="Result JSON to check (`selcal evaluate --json`).", show_default=False),
    baseline: Optional[Path] = typer.Option(None, "--baseline", help="Result JSON to compare against."),
    tolerance: Optional[List[str]] = typer.Option(None, "--tolerance", metavar="METRIC=VALUE", help="Absolute worsening allowed (default 0). " + _BOUND_HELP),
    maximum: Optional[List[str]] = typer.Option(None, "--max", metavar="METRIC=VALUE", help="Upper bound on the current value. " + _BOUND_HELP),
    minimum: Optional[List[str]] = typer.Option(None, "--min", metavar="METRIC=VALUE", help="Lower bound on the current value. " + _BOUND_HELP),
    metric: Optional[List[str]] = typer.Option(None, "--metric", help="Judge these metrics against the baseline (repeatable; default: accuracy, and AURC and ECE of the first score)."),
    allow_other_data: bool = typer.Option(False, "--allow-other-data", help="Judge against a baseline evaluated on other data (refused otherwise)."),
    json_path: Optional[str] = typer.Option(None, "--json", help="Write the report as JSON to PATH; '-' for stdout."),
    markdown_path: Optional[str] = typer.Option(None, "--markdown", help="Write the report as Markdown (a PR comment) to PATH; '-' for stdout."),
    junit_path: Optional[str] = typer.Option(None, "--junit", help="Write the report as JUnit XML to PATH."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No table on the terminal (warnings still go to stderr)."),
    no_warnings: bool = typer.Option(False, "--no-warnings", help=_NO_WARNINGS_HELP + " The Markdown and JUnit keep them."),
    show_all: bool = typer.Option(False, "--all", help="Judge and show every metric of every score (default: the primary metrics)."),
):
    """Check a result against a baseline and bounds: exit 0 within bounds, 1 regression, 2 bad input."""
    from . import checks
    from .io import Outputs

    try:
        tolerances = checks.parse_bounds(tolerance, "--tolerance")
        maxima = checks.parse_bounds(maximum, "--max")
        minima = checks.parse_bounds(minimum, "--min")
        only = checks.parse_specs(metric, "--metric")
        outputs = Outputs(inputs=[current, baseline])
        to_stdout = _check_outputs(outputs, {"--json": json_path, "--markdown": markdown_path, "--junit": junit_path})
        current_data = checks.load_result(current)
        baseline_data = checks.load_result(baseline) if baseline is not None else None
        report = checks.check(current_data, baseline_data, tolerances=tolerances, maxima=maxima, minima=minima,
                              only=only, current_path=str(current), baseline_path=str(baseline),
                              all_metrics=show_all and baseline is not None, allow_other_data=allow_other_data)
    except SelcalError as exc:
        _fail(str(exc))
    _note_ignored(ctx, [("metric", "--metric", baseline is not None, "it restricts the comparison with --baseline"),
                        ("allow_other_data", "--allow-other-data", baseline is not None, "no --baseline")])
    _finish(report, outputs, json_path, markdown_path, junit_path, to_stdout, quiet, no_warnings, show_all)


@app.command()
@_with_numbers
def compare(
    ctx: typer.Context,
    file_a: Path = typer.Argument(..., metavar="A", help=f"Dump of the reference model: {_FORMATS}.", show_default=False),
    file_b: Path = typer.Argument(..., metavar="B", help="Dump of the model to judge, on the same rows.", show_default=False),
    val: Optional[List[Path]] = typer.Option(None, "--val", help="Validation dumps: give it twice, A's then B's."),
    bootstrap: int = typer.Option(1000, "--bootstrap", metavar="B", help="Paired bootstrap resamples."),
    confidence: float = typer.Option(0.95, "--confidence", help="Level of the intervals."),
    seed: int = _shared("seed"),
    tolerance: Optional[List[str]] = typer.Option(None, "--tolerance", metavar="METRIC=VALUE", help="Absolute worsening allowed (default 0). " + _BOUND_HELP),
    metric: Optional[List[str]] = typer.Option(None, "--metric", help="Judge these metrics (repeatable; default: accuracy, and AURC and ECE of the first score)."),
    allow_other_data: bool = typer.Option(False, "--allow-other-data", help="Pair rows by position even when the two dumps hold other labels or ids (refused otherwise)."),
    label_col: Optional[str] = _shared("label_col"),
    logits_col: Optional[str] = _shared("logits_col"),
    ignore_label: Optional[int] = _shared("ignore_label"),
    input_kind: Optional[str] = typer.Option(None, "--input", metavar="KIND", help=_INPUT_HELP),
    ood_label: Optional[int] = typer.Option(None, "--ood-label", metavar="V", help="Rows with this label belong to no class: always errors, in both models."),
    pixels_per_image: Optional[int] = _shared("pixels_per_image"),
    json_path: Optional[str] = typer.Option(None, "--json", help="Write the report as JSON to PATH; '-' for stdout."),
    markdown_path: Optional[str] = typer.Option(None, "--markdown", help="Write the report as Markdown to PATH; '-' for stdout."),
    junit_path: Optional[str] = typer.Option(None, "--junit", help="Write the report as JUnit XML to PATH."),
    quiet: bool = _shared("quiet"),
    no_warnings: bool = typer.Option(False, "--no-warnings", help=_NO_WARNINGS_HELP + " The Markdown and JUnit keep them."),
    show_all: bool = typer.Option(False, "--all", help="Judge and show every metric of every score (default: the primary metrics)."),
    **numbers: Any,  # the options that change a number (_NUMBERS): read through _options(ctx)
):
    """Is B worse than A? Paired-bootstrap differences B - A on the same rows: exit 1 if B is worse."""
    from . import checks
    from .io import Outputs

    try:
        options = _options(ctx)
        tolerances = checks.parse_bounds(tolerance, "--tolerance")
        only = checks.parse_specs(metric, "--metric")
        outputs = Outputs(inputs=[file_a, file_b, *(val or [])])
        to_stdout = _check_outputs(outputs, {"--json": json_path, "--markdown": markdown_path, "--junit": junit_path})
        with _count_bar("paired bootstrap resamples") as progress:
            report = checks.compare_files(
                file_a, file_b, val=[str(v) for v in val] if val else None, options=options, label_col=label_col,
                logits_col=logits_col, ignore_label=ignore_label, resamples=bootstrap, seed=seed,
                confidence=confidence, tolerances=tolerances, only=only, progress=progress,
                pixels_per_image=pixels_per_image, input_kind=input_kind, ood_label=ood_label,
                all_metrics=show_all, allow_other_data=allow_other_data,
            )
    except SelcalError as exc:
        _fail(str(_flag_error(exc) if isinstance(exc, OptionError) else exc))
    _finish(report, outputs, json_path, markdown_path, junit_path, to_stdout, quiet, no_warnings, show_all)


@app.command()
def pixels(
    folder: Path = typer.Argument(..., metavar="SEGDIR", help="Folder of per-image .npz files (logits K x h x w, label H x W).", show_default=False),
    out: Path = typer.Option(..., "--out", metavar="OUT.parquet", help="The pixel dump to write.", show_default=False),
    pixels_per_image: int = typer.Option(5000, "--pixels-per-image", metavar="P", help="Labelled pixels drawn per image; 0 = every labelled pixel."),
    seed: int = typer.Option(0, help="Seed of the pixel draw (use the same --seed with evaluate)."),
    ignore_label: Optional[int] = typer.Option(None, help="Void label, never drawn (default 255)."),
    label_col: str = typer.Option("label", help="Name of the label array in each .npz."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar and no summary."),
):
    """Draw pixels of a segmentation folder into an ordinary dump: logits, label, id (image/row/col), image."""
    from .io import open_dump
    from .io.segmentation import SegmentationSource, write_pixels

    try:
        if not folder.is_dir():
            raise SelcalError(f"{folder}: not a folder; give a folder of per-image .npz files")
        _check_writable(out)
        source = open_dump(str(folder), label_col=label_col, ignore_label=ignore_label,
                           pixels_per_image=pixels_per_image, seed=seed)
        if not isinstance(source, SegmentationSource):
            raise SelcalError(f"{folder}: holds no .npz files (or also Parquet files); give a folder of per-image "
                              ".npz files")
        from .io.output import classify
        classify(out, inputs=[str(f) for f in source.files])  # never an image of the folder (also via a link)
        with _count_bar("images", enabled=not quiet) as progress:
            rows = write_pixels(source, out, progress=progress)
    except SelcalError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"{exc.filename or out}: cannot write ({exc.strerror or exc}); free space or choose another path")
    if not quiet:
        _say(f"selcal: wrote {out}: {rows} pixels of {len(source.files)} images, K = {source.num_classes}")


@app.command()
def ensemble(
    members: List[Path] = typer.Argument(..., metavar="M1 M2 ...", help=f"Dumps of the same rows, one per member (two or more): {_FORMATS}.", show_default=False),
    out: Path = typer.Option(..., "--out", metavar="ENS.parquet", help="The ensemble dump to write.", show_default=False),
    label_col: Optional[str] = typer.Option(None, help="Name of the label column (default: the one of label, labels, target, targets, y)."),
    logits_col: Optional[str] = typer.Option(None, help="Name of the logits list column (default: 'logits')."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No summary."),
):
    """Average the members' softmax into one dump: logits log(mean p), columns mutual_information and disagreement."""
    from .ensemble import ensemble as combine

    try:
        _check_writable(out)
        summary = combine([str(m) for m in members], str(out), label_col=label_col, logits_col=logits_col)
    except SelcalError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"{exc.filename or out}: cannot write ({exc.strerror or exc}); free space or choose another path")
    if not quiet:
        _say(f"selcal: wrote {out}: {summary.n_rows} rows, K = {summary.num_classes}, "
             f"{len(summary.members)} members aligned by {summary.aligned_by}")
    if summary.aligned_by == "order":
        _say("selcal: note: members aligned by row order (no 'id' column): row i of every member is taken to be "
             "the same example")


@app.command()
def dump(
    models: Optional[List[str]] = typer.Argument(None, metavar="MODEL...", help="timm model names, e.g. resnet50.a1_in1k (timm.list_models()).", show_default=False),
    data: Path = typer.Option(..., "--data", metavar="DIR", help="Image folder: DIR/CLASS/IMAGE (ImageFolder layout), or flat with --labels.", show_default=False),
    out: Optional[Path] = typer.Option(None, "--out", metavar="OUT.parquet", help="The dump of one model (written as OUT.parquet.partial, renamed when complete).", show_default=False),
    out_dir: Optional[Path] = typer.Option(None, "--out-dir", metavar="DIR", help="Folder of the dumps of several models: DIR/MODEL.parquet, or DIR/MODEL/part-*.parquet with --shards.", show_default=False),
    models_file: Optional[Path] = typer.Option(None, "--models", metavar="FILE", help="More model names, one per line.", show_default=False),
    shards: int = typer.Option(1, "--shards", metavar="N", help="Split each model's images into N parts (one task each; with --out-dir)."),
    engine: str = typer.Option("local", "--engine", help="local (this process, one part after another) or ray (one Ray task per part, on RAY_ADDRESS or a local Ray)."),
    pretrained: bool = typer.Option(False, "--pretrained", help="Load timm's pretrained weights for MODEL (a download, unless cached)."),
    checkpoint: Optional[Path] = typer.Option(None, "--checkpoint", metavar="PATH", help="Load weights from a local checkpoint (.pth, .pt, .bin, .safetensors)."),
    class_map: Optional[Path] = typer.Option(None, "--class-map", metavar="FILE", help="Class folder name -> label index (JSON or text), e.g. imagenet_class_index.json."),
    labels: Optional[Path] = typer.Option(None, "--labels", metavar="CSV", help="Labels of a flat folder: CSV with the columns path,label."),
    num_classes: Optional[int] = typer.Option(None, "--num-classes", metavar="K", help="Create the model with K outputs (a checkpoint trained on other classes)."),
    dtype: str = typer.Option("float32", "--dtype", help="Logits dtype in the file: float32 or float16 (half the size)."),
    val_fraction: float = typer.Option(0.2, "--val-fraction", help="Fraction of the images whose split is 'val' (by a seeded hash of the id)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the split and of the --limit sample."),
    batch_size: int = typer.Option(64, "--batch-size", help="Images per forward pass."),
    workers: Optional[int] = typer.Option(None, "--workers", help="DataLoader worker processes (default: min(4, CPUs); 0 loads in the main process).", show_default=False),
    device: str = typer.Option("auto", "--device", help="cpu, cuda, cuda:N, or auto (cuda when available)."),
    limit: Optional[int] = typer.Option(None, "--limit", metavar="N", help="Only a seeded sample of N images, for a quick look."),
    errors: Optional[Path] = typer.Option(None, "--errors", metavar="FILE", help="List the unreadable images there: path<TAB>reason per line."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace OUT even if it is a complete dump, or one made with other settings."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar and no summary."),
):
    """Run timm models over an image folder and write their logits, labels, ids and split (needs the timm extra)."""
    from . import dump as dumping  # torch, torchvision and timm are imported there, when needed

    status = None if quiet else (lambda text: _say(f"selcal: {text}"))
    settings = dict(pretrained=pretrained, checkpoint=checkpoint, class_map=class_map, labels_csv=labels,
                    num_classes=num_classes, dtype=dtype, val_fraction=val_fraction, seed=seed, batch_size=batch_size,
                    workers=workers, device=device, limit=limit, overwrite=overwrite)
    try:
        names = list(models or []) + (dumping.read_model_list(models_file) if models_file is not None else [])
        if out_dir is None:
            if out is None:
                raise SelcalError("give --out OUT.parquet (one model) or --out-dir DIR (several models, --shards)")
            if len(names) != 1:
                raise SelcalError(f"--out writes one model's dump but {len(names)} models were given; use --out-dir DIR")
            if shards != 1 or engine != "local":
                raise SelcalError("--shards and --engine write a folder of parts: use --out-dir DIR instead of --out")
        elif out is not None:
            raise SelcalError("give --out (one model) or --out-dir (several), not both")
        elif errors is not None:
            raise SelcalError("--errors lists one model's unreadable images: use it with --out")
    except SelcalError as exc:
        _fail(str(exc))
    if out_dir is not None:
        _dump_many(dumping, names, data, out_dir, shards, engine, settings, quiet)
        return
    try:
        with dumping.progress_bar(enabled=not quiet) as progress:
            summary = dumping.run_dump(names[0], data, out, errors_path=errors, progress=progress, status=status,
                                       **settings)
    except SelcalError as exc:
        _fail(str(exc))
    except OSError as exc:  # a full disk or a vanished folder while writing
        _fail(f"{exc.filename or out}: cannot write ({exc.strerror or exc}); free space or choose another path")
    if summary.skipped_complete:
        if not quiet:
            _say(f"selcal: {out}: complete with the same settings ({summary.n_images} images); skipped "
                 "(--overwrite to redo)")
        return
    for warning in summary.warnings:
        _say(f"selcal: warning: {warning}")
    if not quiet:
        skipped = f", {summary.n_unreadable} unreadable images skipped" if summary.n_unreadable else ""
        if summary.n_unreadable and summary.errors_path is None:
            skipped += " (list them with --errors FILE)"
        _say(f"selcal: wrote {out}: {summary.rows} rows, K = {summary.num_classes}{skipped}; "
             f"{summary.images_per_second:,.1f} images/s on {summary.device}")


def _dump_many(dumping, names, data, out_dir, shards, engine, settings, quiet) -> None:
    """``selcal dump --out-dir``: every part of every model on the engine; failures listed, exit 2 if any."""
    from .engines import Failure

    try:
        dumping.require_stack()
        tasks = dumping.dump_tasks(names, data, out_dir, shards=shards, **settings)
        with _count_bar("parts", enabled=not quiet) as progress:
            outcomes = dumping.run_dumps(tasks, engine=engine, progress=progress)
    except SelcalError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"{exc.filename or out_dir}: cannot write ({exc.strerror or exc}); free space or choose another path")
    failed = 0
    for name in dict.fromkeys(names):
        parts = [(t, o) for t, o in zip(tasks, outcomes) if t.model_name == name]
        errors = [o for _, o in parts if isinstance(o, Failure)]
        for error in errors:
            _say(f"selcal: error: {name}: {error.message}")
        failed += bool(errors)
        done = [o for _, o in parts if not isinstance(o, Failure)]
        if quiet or errors:
            continue
        for summary in done:
            for warning in summary.warnings:
                _say(f"selcal: warning: {summary.out}: {warning}")
        where = dumping.part_path(out_dir, name, 0, shards).parent if shards > 1 else parts[0][0].out
        skipped = sum(s.skipped_complete for s in done)
        rows = sum(s.rows for s in done if not s.skipped_complete)
        note = f" ({skipped} of {len(done)} parts were complete and skipped)" if skipped else ""
        _say(f"selcal: wrote {where}: {rows} rows in {len(done) - skipped} parts{note}")
    if failed:
        _say(f"selcal: error: {failed} of {len(dict.fromkeys(names))} models failed; the others are complete "
             "(run the same command again to redo only what is missing)")
        raise typer.Exit(2)


@contextmanager
def _count_bar(what: str, enabled: bool = True):
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


# Metavars of the help (one place): a word for what the option takes, never Typer's <type>.
_METAVARS = {
    "files": "TEST", "current": "CURRENT", "val": "FILE", "baseline": "FILE", "json_path": "PATH",
    "csv_path": "PATH", "markdown_path": "PATH", "junit_path": "PATH", "scores": "LIST", "risks": "LIST",
    "coverages": "LIST", "p_grid": "LIST", "metric": "METRIC", "aurc_estimator": "mean|trapz",
    "pnorm_objective": "aurc|augrc", "temp_objective": "nll|aurc", "plot_format": "png|svg|pdf",
    "dtype": "float32|float16", "label_col": "NAME", "logits_col": "NAME", "group_col": "NAME", "sort_by": "COLUMN",
    "ls_alpha": "ALPHA", "device": "DEVICE", "engine": "local|ray",
}
_TYPE_METAVARS = {int: "N", float: "X", str: "TEXT", Path: "FILE"}


def _set_metavars(typer_app) -> None:
    import inspect
    import typing

    for command in typer_app.registered_commands:
        hints = typing.get_type_hints(command.callback)
        for name, parameter in inspect.signature(command.callback).parameters.items():
            info = parameter.default
            if not isinstance(info, (typer.models.OptionInfo, typer.models.ArgumentInfo)) or info.metavar:
                continue
            hint = hints.get(name)
            while typing.get_args(hint) and hint is not bool:  # Optional[List[X]] -> X
                hint = next(a for a in typing.get_args(hint) if a is not type(None))
            if hint is not bool:
                info.metavar = _METAVARS.get(name) or _TYPE_METAVARS.get(hint, "VALUE")


_set_metavars(app)


if __name__ == "__main__":  # pragma: no cover
    run()


# ``selcal threshold`` lives in its own module (which imports nothing from this one).
from .cli_threshold import threshold as _threshold_command  # noqa: E402

app.command("threshold")(_threshold_command)
