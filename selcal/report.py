"""Renderings of results (:mod:`selcal.results`): the terminal table, the leaderboard (terminal,
Markdown, CSV), the bootstrap intervals table and the most-confident-errors CSV."""

from __future__ import annotations

import math
from typing import Any

from .results import SCHEMA_VERSION, EvaluationResult, ModelResult, to_jsonable  # noqa: F401  (re-exported)
from .metrics import catalog
from .scores import REGISTRY
from .scores.registry import BoardColumn

__all__ = ["ModelResult", "EvaluationResult", "SCHEMA_VERSION", "to_jsonable", "render_table", "metric_sections",
           "leaderboard",
           "render_leaderboard", "leaderboard_markdown", "leaderboard_csv", "LEADERBOARD_COLUMNS", "METRIC_NAMES",
           "metric_name", "metric_label", "metric_unit", "ERRORS_CSV_COLUMNS", "confident_errors_csv", "render_intervals"]

# ---------------------------------------------------------------------- metric names
# Every fact about a metric (name, unit, direction, interval) is its entry in the catalog
# (selcal.metrics.catalog); these names stay for callers of the report module.
METRIC_NAMES = {k: (m.label, m.unit) for k, m in catalog.CATALOG.items() if not m.family}
metric_name = catalog.name
metric_unit = catalog.unit
metric_label = catalog.label


# ------------------------------------------------------------------- terminal table


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
    return _SPLIT_WORDS.get(model.split, model.split).format(by=by)


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

    from .escape import printable, terminal

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
        while per_table > 1 and _width(console, table_of(range(min(per_table, len(score_names))))) > console.width:
            per_table -= 1
        if _width(console, table_of(range(min(per_table, len(score_names))))) > console.width:
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
            if _width(console, table) <= console.width:
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
    names = sorted((n for n in model.scores if n in REGISTRY and REGISTRY[n].note is not None),
                   key=lambda n: REGISTRY[n].note_rank)
    return [REGISTRY[n].note(model.scores[n]) for n in names]


def _width(console, renderable, least: bool = False) -> int:
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


def _group_table(model: ModelResult):
    """Per-group rows (``--group-col``): size, accuracy and every score's AURC within the group."""
    from rich.table import Table

    from .escape import terminal

    score_names = list(model.scores)
    table = Table(show_edge=False, pad_edge=False, title="per group: accuracy and AURC of each score (%)",
                  title_justify="left")
    for header in ("group", "rows", "accuracy", *score_names):
        table.add_column(terminal(header), justify="left" if header == "group" else "right")
    for group, values in model.extra["groups"].items():
        table.add_row(terminal(group), str(values["n_eval"]), _format(values["accuracy"], catalog.unit("accuracy")),
                      *(_format(values["scores"][n]["aurc"], catalog.unit("aurc")) for n in score_names))
    return table


# ---------------------------------------------------------------------- leaderboard
def _board_columns() -> dict[str, tuple]:
    """column: (short header, kind, lower is better), in order: the model, accuracy, the AURC of
    every registered score followed by the columns its entry adds, the best post-hoc score,
    then the summary columns of the entries (:class:`selcal.scores.registry.BoardColumn`). A
    metric's unit and direction are its catalog entry's."""

    def metric(header: str, key: str) -> tuple:
        return header, catalog.unit(key), catalog.get(key).lower_is_better

    # top-5 accuracy: shown and sorted higher first, never judged (no direction in the catalog)
    columns = {"model": ("model", "text", None), "accuracy": metric("acc", "accuracy"),
               "top5_accuracy": ("top-5", catalog.unit("top5_accuracy"), False)}
    summary = []
    for name, entry in REGISTRY.items():
        columns[f"aurc_{name}"] = metric(name, "aurc")
        for column in entry.leaderboard:
            if column.place == "score":
                columns[column.key] = (column.header, column.kind, column.lower_is_better)
            elif column.place == "summary":
                summary.append(column)
    columns["best_score"] = ("best score", "text", None)
    columns["aurc_best_score"] = metric("its AURC", "aurc")
    columns["best_posthoc"] = ("best post-hoc", "text", None)  # (CSV_ONLY: in the CSV, not the tables)
    columns["aurc_best_posthoc"] = metric("post-hoc AURC", "aurc")
    for column in sorted(summary, key=lambda c: c.rank):
        columns[column.key] = (column.header, column.kind, column.lower_is_better)
    return columns


def _board_extras() -> list[BoardColumn]:
    """The columns the registry's entries add to the leaderboard."""
    return [column for entry in REGISTRY.values() for column in entry.leaderboard if column.place != "report"]


class _Columns(dict):
    """The leaderboard's columns, read from the registry when asked (a score registered later is in)."""

    def _now(self) -> dict:
        return _board_columns()

    def __getitem__(self, key):
        return self._now()[key]

    def __contains__(self, key):
        return key in self._now()

    def __iter__(self):
        return iter(self._now())

    def __len__(self):
        return len(self._now())

    def get(self, key, default=None):
        return self._now().get(key, default)

    def keys(self):
        return self._now().keys()

    def items(self):
        return self._now().items()

    def values(self):
        return self._now().values()


LEADERBOARD_COLUMNS = _Columns()  # column: (short header, kind, lower is better)


def _leaderboard_note(columns, rows=()) -> str:
    notes = ["AURC of each score"] if any(c.startswith("aurc_") and c not in _BEST for c in columns) else []
    if "aurc_best_score" in columns:
        notes.append("best score: the lowest AURC of every evaluated score (msp included), and that AURC")
    extras = {column.key: column for column in _board_extras()}
    notes += [extras[c].note for c in columns if c in extras and extras[c].note]
    note = "in %: accuracy" + (", top-5 accuracy" if "top5_accuracy" in columns else "") + "".join(
        ", " + note for note in notes)
    for column in extras.values():
        if column.flag_key and column.key in columns and any(row.get(column.flag_key) for row in rows):
            note += "; " + column.flag_note
    if any(row.get("warnings") for row in rows):
        note += f"; {WARNING_MARKER}: the model has warnings, listed below"
    return note


WARNING_MARKER = "(!)"


def _row_extras() -> tuple[str, ...]:
    """Keys of a leaderboard row that are not columns of their own."""
    return ("warnings", "sweep", *(c.flag_key for c in _board_extras() if c.flag_key))


_BEST = ("aurc_best_score", "aurc_best_posthoc")
CSV_ONLY = ("best_posthoc", "aurc_best_posthoc")  # in the CSV (and sortable), not in the tables
DEFAULT_SORT = "aurc_best_score"


def leaderboard(result: EvaluationResult, sort_by: str | None = None,
                sweep: str | None = None) -> list[dict[str, Any]]:
    """One row per model: accuracy, AURC of every score, the best score of all (msp included)
    and the best post-hoc one (fitted on validation rows) with their AURC, and the columns the
    registry's entries add (the gain from pnorm over MSP, ECE before and after temperature, ...).

    Sorted by ``sort_by`` (any column of the CSV), best first (direction-aware); undefined values
    last; by default by the swept value with ``sweep`` (ascending), else by the best score's AURC.
    ``sweep``: the name of a swept hyperparameter (``extra["sweep"]`` of each model, from
    ``--sweep NAME``), added as the column NAME after the model's name.
    """
    from .errors import SelcalError

    column_scores = list(dict.fromkeys(name for model in result.models for name in model.scores
                                       if "column" in model.scores[name]))
    if sweep is not None and (sweep in LEADERBOARD_COLUMNS or sweep in _row_extras() or sweep.startswith("aurc_")):
        raise SelcalError(f"--sweep {sweep!r} is the name of a leaderboard column; name the hyperparameter otherwise")
    if sort_by is None:
        sort_by = sweep or DEFAULT_SORT
    sortable = [*LEADERBOARD_COLUMNS, *(c for c in _row_extras() if c != "sweep"),
                *(f"aurc_{name}" for name in column_scores), *([sweep] if sweep else [])]
    deferred = not result.models and sort_by.startswith("aurc_")  # checked before the work: columns unknown yet
    if sort_by not in sortable and not deferred:
        raise SelcalError(f"--sort-by {sort_by!r} is not a column; choose from {', '.join(sortable)}")
    rows = []
    for model in result.models:
        scores = model.scores
        aurc = {name: scores[name]["aurc"] for name in scores}
        posthoc = {name: aurc[name] for name in aurc if name in REGISTRY and REGISTRY[name].needs_fit}
        best = min(posthoc, key=lambda name: (posthoc[name], name)) if posthoc else None
        defined = {name: value for name, value in aurc.items() if value is not None}
        best_any = min(defined, key=lambda name: (defined[name], name)) if defined else None
        row = {
            "model": model.name,
            **({"sweep": sweep, sweep: (model.extra.get("sweep") or {}).get(sweep)} if sweep else {}),
            "accuracy": model.accuracy,
            "top5_accuracy": model.top5_accuracy,
            **{f"aurc_{name}": aurc.get(name) for name in REGISTRY},
            **{f"aurc_{name}": aurc.get(name) for name in column_scores},  # columns of the file (--score-col)
            "best_score": best_any,
            "aurc_best_score": defined.get(best_any) if best_any else None,
            "best_posthoc": best,
            "aurc_best_posthoc": posthoc.get(best) if best else None,
            "warnings": list(model.warnings),
        }
        for column in _board_extras():
            row[column.key] = column.value(scores)
            if column.flag_key:
                row[column.flag_key] = column.flag(scores)
        rows.append(row)
    lower_is_better = _column_info(sort_by)[2]

    def key(row):
        value = len(row["warnings"]) if sort_by == "warnings" else row[sort_by]
        if value is None:
            return (1, 0)
        if isinstance(value, str) or lower_is_better is None:
            return (0, value)
        return (0, value if lower_is_better else -value)

    return sorted(rows, key=key)


def _column_info(column: str) -> tuple:
    """(header, kind, lower is better) of a leaderboard column; ``aurc_C`` for a column C of the
    file; any other name is a swept hyperparameter (``--sweep NAME``): a number, sorted ascending."""
    if column in LEADERBOARD_COLUMNS:
        return LEADERBOARD_COLUMNS[column]
    if column in _row_extras():  # warnings (a count: fewer first) and the entries' flags (e.g. pnorm_fallback)
        return (column, "num", True if column == "warnings" else None)
    if column.startswith("aurc_"):
        return column[len("aurc_"):], catalog.unit("aurc"), catalog.get("aurc").lower_is_better
    return column, "num", None


def _shown_columns(rows: list[dict[str, Any]]) -> list[str]:
    """The columns some row has a value for: the fixed ones, then the AURC of each column score."""
    extra = [c for c in dict.fromkeys(k for row in rows for k in row)
             if c.startswith("aurc_") and c not in LEADERBOARD_COLUMNS]
    fixed = [c for c in LEADERBOARD_COLUMNS if c not in CSV_ONLY]
    at = fixed.index("best_score")
    return [c for c in fixed[:1] + _swept(rows) + fixed[1:at] + extra + fixed[at:]
            if any(row.get(c) is not None for row in rows)]


def _swept(rows: list[dict[str, Any]]) -> list[str]:
    """[NAME] when the rows carry a swept hyperparameter (``--sweep NAME``), else []."""
    return [rows[0]["sweep"]] if rows and rows[0].get("sweep") else []


def _cell(value, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "pct":
        return f"{100 * value:.2f}"
    if kind == "num":
        return f"{value:g}"
    return str(value)


def _cells(row: dict[str, Any], columns) -> list[str]:
    """A leaderboard row as text: ``p`` says ``(fb)`` when pnorm fell back to MSP; the model
    name carries the warning marker when the model has warnings."""
    cells = []
    flags = {c.key: c.flag_key for c in _board_extras() if c.flag_key}
    for column in columns:
        text = _cell(row[column], _column_info(column)[1])
        if column in flags and row.get(flags[column]):
            text += " (fb)"
        if column == "model" and row.get("warnings"):
            text += f" {WARNING_MARKER}"
        cells.append(text)
    return cells


def render_leaderboard(rows: list[dict[str, Any]], console) -> None:
    """The leaderboard as a rich table (percent columns labelled)."""
    from rich.table import Table

    columns = _shown_columns(rows)
    headers = {c: _column_info(c)[0] for c in columns}
    if console.width < 125:  # a narrow terminal: short headers (every column is still shown, in stacked tables)
        headers.update({c.key: c.short for c in _board_extras() if c.short and c.key in headers})
    from rich.measure import Measurement

    from .escape import terminal

    name_width = max(14, console.width - 56)
    names = []
    for row in rows:
        name = _cells(row, ["model"])[0]  # the name and its warning marker
        if len(name) > name_width:  # cut the name, keep the warning marker
            marker = f" {WARNING_MARKER}" if row.get("warnings") else ""
            name = name[:name_width - len(marker) - 1] + "…" + marker
        names.append(name)

    def table_of(shown: list[str]) -> Table:
        table = Table(show_edge=False, pad_edge=False)
        for column in shown:
            if column == "model":
                table.add_column("model", no_wrap=True)
            else:
                table.add_column(terminal(headers[column]), justify="right", no_wrap=True)
        for name, row in zip(names, rows):
            cells = _cells(row, shown)
            if "model" in shown:
                cells[0] = name
            table.add_row(*(terminal(cell) for cell in cells))
        return table

    def width(shown: list[str]) -> int:
        unbounded = console.options.update(width=1 << 16)  # measured as if the console had no edge
        return Measurement.get(console, unbounded, table_of(shown)).maximum

    # Too wide for the console (many scores): stacked tables of the columns that fit, each with the
    # model column, rather than cells squeezed to '…'.
    groups: list[list[str]] = []
    rest = [c for c in columns if c != "model"]
    while rest:
        group = ["model", rest.pop(0)]
        while rest and width(group + rest[:1]) <= console.width:
            group.append(rest.pop(0))
        groups.append(group)
    for index, group in enumerate(groups or [["model"]]):
        if index:
            console.print()
        console.print(table_of(group))
    console.print(_leaderboard_note(columns, rows), soft_wrap=True, markup=False, highlight=False)


def leaderboard_markdown(rows: list[dict[str, Any]]) -> str:
    """A GitHub-flavoured Markdown table (for a PR comment); names and warnings escaped
    (:func:`selcal.escape.markdown_text`)."""
    from .escape import markdown_text as md

    columns = _shown_columns(rows)
    lines = ["| " + " | ".join(md(_column_info(c)[0]) for c in columns) + " |",
             "|" + "|".join("---" if c == "model" else "---:" for c in columns) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(md(cell) for cell in _cells(row, columns)) + " |")
    warnings = [f"- {md(row['model'])}: {md(text)}" for row in rows for text in row.get("warnings", ())]
    return "\n".join(lines) + f"\n\n{_leaderboard_note(columns, rows)}\n" + (
        "\n**Warnings**\n\n" + "\n".join(warnings) + "\n" if warnings else "")


def leaderboard_csv(rows: list[dict[str, Any]]) -> str:
    """CSV with fractions at full precision (not percent), one row per model; ``pnorm_fallback``
    (true when pnorm fell back to MSP) follows ``p``, and ``warnings`` counts the model's warnings."""
    import polars as pl

    from .options import DEFAULT_SCORES

    shown = set(_shown_columns(rows))
    # the columns of the default scores are always written, those of other scores when some model has them
    optional = {f"aurc_{name}" for name in REGISTRY if name not in DEFAULT_SCORES}
    columns = [c for c in LEADERBOARD_COLUMNS if c not in optional or c in shown]
    flags = {c.key: c.flag_key for c in _board_extras() if c.flag_key}
    at = columns.index("best_score")
    columns[at:at] = [c for c in _shown_columns(rows) if c.startswith("aurc_") and c not in LEADERBOARD_COLUMNS]
    columns[1:1] = _swept(rows)  # the swept hyperparameter, after the model
    schema = {}
    for column in columns:
        schema[column] = pl.Utf8 if _column_info(column)[1] == "text" else pl.Int64 if _column_info(column)[1] == "int" \
            else pl.Float64
        if column in flags:
            schema[flags[column]] = pl.Boolean
    schema["warnings"] = pl.Int64
    from .escape import csv_cell  # text a spreadsheet would run as a formula is neutralised

    frame = pl.DataFrame([{**{c: csv_cell(row.get(c)) for c in schema}, "warnings": len(row.get("warnings", ()))}
                          for row in rows], schema=schema)
    return frame.write_csv()


# ----------------------------------------------------------- most confident errors
ERRORS_CSV_COLUMNS = ("model", "score", "rank", "id", "label", "prediction", "confidence", "rank_percentile")


def confident_errors_csv(result: EvaluationResult) -> str:
    """``--errors-csv``: the most confident errors of every score and model, one row each.

    ``rank`` counts from 1 (the most confident error of that score); ``confidence`` is the
    score's value (a probability for msp and temp) and ``rank_percentile`` the percent of
    the evaluation rows ranked at or above it (ties at mid-rank), both at full precision.
    With pixel rows of segmentation images, a last column ``image`` names each row's image.
    """
    import csv
    import io

    from .escape import csv_cell

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    images = any(e.image is not None for m in result.models for e in m.confident_errors.values())
    writer.writerow(ERRORS_CSV_COLUMNS + (("image",) if images else ()))
    for model in result.models:
        for score, errors in model.confident_errors.items():
            for rank in range(len(errors)):
                writer.writerow([csv_cell(model.name), csv_cell(score), rank + 1, _id_cell(errors.id[rank]),
                                 int(errors.label[rank]), int(errors.prediction[rank]),
                                 repr(float(errors.confidence[rank])), repr(float(errors.rank_percentile[rank]))]
                                + ([] if not images else ["" if errors.image is None else csv_cell(str(errors.image[rank]))]))
    return out.getvalue()


# ------------------------------------------------------------- evaluate --bootstrap
def render_intervals(result, console) -> None:
    """After ``selcal evaluate``'s table: each model's bootstrap intervals, metrics by scores."""
    from rich.table import Table

    from .escape import terminal

    info = getattr(result, "bootstrap", None) or {}
    level = f"{100 * info.get('confidence', 0.95):g}%"
    for model in result.models:
        names = [s for s in model.scores if isinstance(model.scores[s].get("ci"), dict)]
        keys = list(dict.fromkeys(k for s in names for k in model.scores[s]["ci"]))
        unit = " of whole images, a cluster bootstrap" if model.extra.get("ci_resampled") == "images" else ""
        console.print(f"[bold]{terminal(model.name)}[/bold]  {level} bootstrap intervals "
                      f"({info.get('resamples')} resamples{unit}{_refitted(model) if info.get('refit') else ''})",
                      soft_wrap=True)
        table = Table(show_edge=False, pad_edge=False)
        table.add_column("metric")
        for name in names:
            table.add_column(terminal(name), justify="right")
        for key in keys:
            table.add_row(metric_label(key), *(_interval_text(key, model.scores[s]["ci"].get(key)) for s in names))
        console.print(table)
        model_ci = model.extra.get("ci") or {}
        if model_ci:
            console.print("  model: " + ", ".join(f"{metric_label(k)} {_interval_text(k, ci)}" for k, ci in model_ci.items()),
                          soft_wrap=True)
        console.print()


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


def _id_cell(value):
    """An id of --errors-csv: a number stays a number, text is neutralised (:func:`selcal.escape.csv_cell`)."""
    import numpy as np

    from .escape import csv_cell

    if isinstance(value, (np.integer, int)) and not isinstance(value, bool):
        return int(value)
    return csv_cell(str(value))
