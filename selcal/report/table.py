"""The terminal table of ``selcal evaluate`` (one model: metrics by scores, notes, groups) and the
table of its bootstrap intervals."""

from __future__ import annotations

import math

from ..metrics import catalog
from ..metrics.catalog import label as metric_label, unit as metric_unit
from ..results import EvaluationResult, ModelResult
from ..scores import REGISTRY
from ..options import DEFAULT_CONFIDENCE


_SPLIT_WORDS = {
    "val-file": "the --val file",
    "split-column": "the 'val' rows of the split column",
    "split-names": "the 'val' parts, named by their file or folder names (validation-*, split=val/, val/)",
    "holdout": "a seeded random hold-out of the TEST rows by {by} (give --val to use a file)",
    "image-holdout": "a seeded random hold-out of whole images (give --val to use a folder)",
}


def split_words(model) -> str:
    """How the model's validation rows were chosen, in words."""
    by = "row position" if model.extra.get("holdout_by") == "position" else "id"
    return _SPLIT_WORDS.get(model.split, model.split).replace("{by}", by)  # (a split read from a JSON is text)


def _and(names: list[str]) -> str:
    return " and ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + " and " + names[-1]


def _format(value, kind: str) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if kind == "pct":
        return f"{100 * value:.2f}"
    return _number(value)


def _number(value: float) -> str:
    """Four decimals, or four significant digits beyond 1e6 (an NLL of 1e300 stays a short cell)."""
    return f"{value:.4f}" if abs(value) < 1e6 else f"{value:.4g}"


def metric_sections(model: ModelResult) -> list[list[tuple[str, str, list]]]:
    """The rows of a model's metric table, shared by the terminal and the HTML report.

    Two sections (selective, then calibration; the catalog's sections), each a list of (label,
    kind, one value per score in ``model.scores`` order). Calibration rows that no score has are
    left out; the model-level NLL, Brier and class-wise ECE are shown under the score whose
    probabilities are the model's own (msp: ``model_probabilities`` in the registry).
    """
    names = list(model.scores)
    some = next(iter(model.scores.values()), {})
    keys = [k for key in catalog.section("selective")
            for k in ([x for x in some if x.startswith(key)] if catalog.get(key).family else [key])]
    selective = [(metric_label(key), metric_unit(key), [model.scores[n].get(key) for n in names]) for key in keys]
    model_level = {k: getattr(model, k) for k in catalog.section("calibration") if "model" in catalog.get(k).levels}
    calibration = []
    for key in catalog.section("calibration"):
        # a score whose probabilities are the model's own softmax (msp) shows the model's NLL, Brier, class-wise ECE
        values = [model.scores[n].get(key, model_level.get(key) if n in REGISTRY and REGISTRY[n].model_probabilities
                                      else None) for n in names]
        values = [None if isinstance(v, bool) else v for v in values]
        if any(v is not None for v in values):
            calibration.append((metric_label(key), metric_unit(key), values))
    return [selective, calibration]


def render_table(result: EvaluationResult, console) -> None:
    """Print one rich table per model: metrics as rows, scores as columns (user text escaped: :mod:`selcal.escape`)."""
    from rich.table import Table

    from ..escape import printable, terminal

    for model in result.models:
        score_names = list(model.scores)
        # Lines of text are printed with soft_wrap: a pipe or a CI log gets them whole, not cut at 80 columns.
        top5 = f", top-5 accuracy {100 * model.top5_accuracy:.2f}%" if model.top5_accuracy is not None else ""
        classes = f"K = {model.num_classes}, " if model.num_classes is not None else "no logits, "
        console.print(f"[bold]{terminal(model.name)}[/bold]  {classes}"
                      f"accuracy {100 * model.accuracy:.2f}%{top5}", soft_wrap=True)
        # Only the scores evaluated that were fitted (none: nothing said about fitting).
        fitted_text = _and([n for n in score_names if n in REGISTRY and REGISTRY[n].needs_fit])
        pixels = model.extra.get("pixels")
        if pixels:  # pixel rows of segmentation images: say how many images, and how they were drawn
            drawn = pixels.get("pixels_per_image")
            console.print(f"  evaluated on {model.n_eval} pixels of {pixels['eval_images']} images"
                          + (f" ({'every labelled pixel' if drawn == 0 else f'at most {drawn} per image'}, "
                             f"seed {pixels.get('seed')}, void label {pixels.get('ignore_label')})"
                             if drawn is not None else "")
                          + (f"; {fitted_text} fitted on {model.n_val} pixels of {pixels.get('val_images')} "
                             f"images, {split_words(model)}" if model.n_val and fitted_text
                             else ""),
                          markup=False, soft_wrap=True)
        else:
            console.print(f"  evaluated on {model.n_eval} rows" + (
                f"; {fitted_text} fitted on {model.n_val} rows, {split_words(model)}"
                if model.n_val and fitted_text else ""), soft_wrap=True)
        sections = metric_sections(model)
        # Many scores (--scores all) in a narrow terminal: several tables of the columns that fit.
        per_table = max(4, (console.width - 24) // 10)  # the default four always stay together

        def table_of(shown) -> Table:
            table = Table(show_edge=False, pad_edge=False)
            table.add_column("metric", no_wrap=True)
            for j in shown:
                table.add_column(terminal(score_names[j]), justify="right", no_wrap=True)
            for index, section in enumerate(sections):
                rows = [(label, kind, values) for label, kind, values in section
                        if any(values[j] is not None for j in shown) or index == 0]
                if index and rows:
                    table.add_section()
                for label, kind, values in rows:
                    table.add_row(label, *(_format(values[j], kind) for j in shown))
            return table

        # A narrow terminal: fewer scores per table, down to one; narrower still, plain lines
        # "metric value" under each score's name (the terminal wraps them), never cells cut to '…'.
        def too_wide(count: int) -> bool:
            return measure_width(console, table_of(range(min(count, len(score_names))))) > console.width

        while per_table > 1 and too_wide(per_table):
            per_table -= 1
        if too_wide(per_table):
            for j, score in enumerate(score_names):
                console.print(terminal(score), style="bold", soft_wrap=True)
                for section in sections:
                    for label, kind, values in section:
                        if values[j] is not None:
                            console.print(f"  {label} {_format(values[j], kind)}", soft_wrap=True, markup=False,
                                          highlight=False)
        else:
            for first in range(0, len(score_names), per_table):
                console.print(table_of(range(first, min(first + per_table, len(score_names)))))
        if model.extra.get("groups"):
            table = _group_table(model)
            if measure_width(console, table) <= console.width:
                console.print(table)
            else:  # a narrow terminal: one line per group, wrapped by the terminal, no value cut
                console.print("per group: accuracy and AURC of each score (%)", soft_wrap=True)
                for group, values in model.extra["groups"].items():
                    console.print(f"  {printable(group)}: {values['n_eval']} rows, accuracy "
                                  f"{_format(values['accuracy'], 'pct')}, " + ", ".join(
                                      f"{printable(n)} {_format(values['scores'][n]['aurc'], 'pct')}"
                                      for n in model.scores), soft_wrap=True, markup=False, highlight=False)
        notes = fit_notes(model)
        if model.extra.get("n_train_dropped"):
            notes.append(f"{model.extra['n_train_dropped']} rows of the split 'train' left out")
        if model.extra.get("n_ood"):
            n_ood = model.extra["n_ood"]
            notes.append(f"{n_ood} rows of no class (--ood-label) counted as errors; NLL, Brier and class-wise ECE "
                         f"are over the other {model.n_eval - n_ood} rows")
        notes += [_column_note(n, model.scores[n]) for n in score_names if "column" in model.scores[n]]
        missing = model.extra.get("not_available")
        if missing:
            notes.append(f"not available {missing.get('reason', 'without logits')}: " + ", ".join(
                missing["scores"] + [catalog.name(m) for m in missing["metrics"]]))
        for note in notes:  # (they quote column names)
            console.print(f"  {printable(note)}", soft_wrap=True, markup=False)
        if model.warnings:  # the warnings themselves go to stderr, after the tables (cli.show_warnings)
            console.print(f"  {len(model.warnings)} warning{'s' if len(model.warnings) > 1 else ''} about this "
                          "model (on stderr)", soft_wrap=True)
        console.print()


def fit_notes(model: ModelResult) -> list[str]:
    """The fit note of every fitted score of ``model`` (its registry entry's ``note``), in the
    entries' ``note_rank`` order; the terminal table and the HTML report show them."""
    names = sorted((n for n in model.scores if n in REGISTRY and REGISTRY[n].display.note is not None),
                   key=lambda n: REGISTRY[n].display.note_rank)
    return [REGISTRY[n].display.note(model.scores[n]) for n in names]


def measure_width(console, renderable, least: bool = False) -> int:
    """The width ``renderable`` takes when nothing squeezes it (as if the console had no edge);
    ``least``: the least it can take, its wrappable columns wrapped."""
    from rich.measure import Measurement

    measured = Measurement.get(console, console.options.update(width=1 << 16), renderable)
    return measured.minimum if least else measured.maximum


def _column_note(name: str, metrics: dict) -> str:
    if metrics["orientation"] == "uncertainty":
        return f"{name}: a column of the file, read as an uncertainty (lower = more confident)"
    return f"{name}: a column of the file, read as a confidence" + (
        "; its values lie in [0, 1], so it is read as the probability that the prediction is correct"
        if metrics.get("probability_of_correct") else "")


def _group_table(model: ModelResult, intervals: bool = False):
    """Per-group rows (``--group-col``): size, accuracy and every score's AURC within the group; with
    ``intervals``, their bootstrap intervals (resampled within each group) instead of the values."""
    from rich.table import Table

    from ..escape import terminal

    score_names = list(model.scores)
    title = ("per group: bootstrap intervals of accuracy and AURC of each score, resampled within each group (%)"
             if intervals else "per group: accuracy and AURC of each score (%)")
    table = Table(show_edge=False, pad_edge=False, title=title, title_justify="left")
    for header in ("group", "rows", "accuracy", *score_names):
        table.add_column(terminal(header), justify="left" if header == "group" else "right")

    def cell(values: dict, key: str) -> str:
        if intervals:
            return _interval_text(key, (values.get("ci") or {}).get(key))
        return _format(values.get(key), catalog.unit(key))

    for group, values in model.extra["groups"].items():
        table.add_row(terminal(group), str(values["n_eval"]), cell(values, "accuracy"),
                      *(cell(values["scores"][n], "aurc") for n in score_names))
    return table



# ------------------------------------------------------------- evaluate --bootstrap
def render_intervals(result, console) -> None:
    """After ``selcal evaluate``'s table: each model's bootstrap intervals, metrics by scores."""
    from rich.table import Table

    from ..escape import terminal

    info = getattr(result, "bootstrap", None) or {}
    level = f"{100 * info.get('confidence', DEFAULT_CONFIDENCE):g}%"
    for model in result.models:
        names = [s for s in model.scores if isinstance(model.scores[s].get("ci"), dict)]
        cells, model_ci = interval_cells(model, names)
        keys = list(dict.fromkeys(k for s in names for k in cells[s]))
        unit = " of whole images, a cluster bootstrap" if model.extra.get("ci_resampled") == "images" else ""
        console.print(f"[bold]{terminal(model.name)}[/bold]  {level} bootstrap intervals "
                      f"({info.get('resamples')} resamples{unit}{_refitted(model) if info.get('refit') else ''})",
                      soft_wrap=True)

        def table_of(shown: list[str]) -> Table:
            table = Table(show_edge=False, pad_edge=False)
            table.add_column("metric", no_wrap=True)
            for name in shown:
                table.add_column(terminal(name), justify="right", no_wrap=True)
            for key in keys:
                table.add_row(metric_label(key), *(cells[s].get(key, "-") for s in shown))
            return table

        # many scores (--scores calibrators) in a narrow terminal: several tables of the columns that fit,
        # never an interval cut to '…'
        rest = list(names)
        if not rest:
            console.print(table_of([]))
        while rest:
            shown = rest[:1]
            while len(shown) < len(rest) and measure_width(console, table_of(rest[:len(shown) + 1])) <= console.width:
                shown = rest[:len(shown) + 1]
            rest = rest[len(shown):]
            console.print(table_of(shown))
        if model_ci:
            console.print("  model: " + ", ".join(f"{metric_label(k)} {_interval_text(k, ci)}" for k, ci in model_ci.items()),
                          soft_wrap=True)
        if any("ci" in values for values in (model.extra.get("groups") or {}).values()):
            table = _group_table(model, intervals=True)
            console.print(table if measure_width(console, table) <= console.width else
                          "  per group: the intervals are in the JSON (too wide for this terminal)", soft_wrap=True)
        console.print()


def interval_cells(model, names: list[str]) -> tuple[dict[str, dict[str, str]], dict]:
    """The intervals table's cells of each score in ``names`` (metric key -> text), and what stays on
    the model's line under it.

    A score whose probabilities are the model's own (msp: ``Score.model_probabilities``) shows the
    model's NLL and Brier in its column, on the line of every other score's NLL and Brier (they
    then leave the model's line). A metric a score reports with no interval (isotonic's NLL, null
    when a label has probability 0) keeps its row: ``-``, or ``∞ on N rows``. Rows follow the scores'
    intervals, NLL before Brier.
    """
    model_ci = dict(model.extra.get("ci") or {})
    cells: dict[str, dict[str, str]] = {}
    moved: set[str] = set()
    for name in names:
        intervals = dict(model.scores[name]["ci"])
        entry = REGISTRY.get(name)
        if entry is not None and entry.model_probabilities:
            for key in ("nll", "brier"):
                if key in model_ci and key not in intervals:
                    intervals[key] = model_ci[key]
                    moved.add(key)
        cells[name] = {key: _interval_text(key, ci) for key, ci in intervals.items()}
        for key, value in model.scores[name].items():  # reported, no interval: the row stays
            if key not in cells[name] and catalog.has_interval(key) and key in catalog.CATALOG:
                infinite = model.scores[name].get(f"{key}_infinite_rows")
                cells[name][key] = f"∞ on {infinite:,} rows" if value is None and infinite else "-"
    order = list(dict.fromkeys(k for name in names for k in cells[name]))
    if "nll" in order and "brier" in order:  # NLL, then Brier, wherever a column brought them
        order.remove("nll")
        order.insert(order.index("brier"), "nll")
    cells = {name: {key: cells[name][key] for key in order if key in cells[name]} for name in names}
    return cells, {k: v for k, v in model_ci.items() if k not in moved}


def _refitted(model) -> str:
    """``, pnorm and temp refitted``: the fitted scores of ``model`` (the registry's), refitted on every resample."""
    names = [n for n in model.scores if n in REGISTRY and REGISTRY[n].refitted]
    return f", {_and(names)} refitted" if names else ""


def _interval_text(key: str, ci) -> str:
    if ci is None:
        return "-"
    if metric_unit(key) != "pct":
        return f"{ci[0]:.4f}–{ci[1]:.4f}"
    return f"{100 * ci[0]:.2f}–{100 * ci[1]:.2f}"
