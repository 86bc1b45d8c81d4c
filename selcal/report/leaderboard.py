"""The leaderboard of several models: its rows (:func:`leaderboard`), the terminal table, Markdown
and CSV; its columns are read from the score registry and the metric catalog."""

from __future__ import annotations

from typing import Any

from ..metrics import catalog
from ..options import DEFAULT_SORT  # noqa: F401  (re-exported by selcal.report)
from ..results import EvaluationResult
from ..scores import REGISTRY
from ..scores.registry import BoardColumn
from . import calibrators
from .calibrators import MAX_LINE  # the longest line printed (a CI log): the leaderboard's too

PIPE_WIDTH = MAX_LINE  # the console of the leaderboard in a pipe (not a terminal)


def _board_columns() -> dict[str, tuple]:
    """column: (short header, kind, lower is better), in order: the model, accuracy, the AURC of
    every registered score followed by the columns its entry adds, the best post-hoc score,
    then the summary columns of the entries (:class:`selcal.scores.registry.BoardColumn`). A
    metric's unit and direction are its catalog entry's."""

    def metric(header: str, key: str) -> tuple:
        return header, catalog.unit(key), catalog.get(key).lower_is_better

    # top-5 accuracy: shown and sorted higher first, never judged (no direction in the catalog)
    columns = {"model": ("model", "text", None), "n_eval": ("rows", "int", None), "accuracy": metric("acc", "accuracy"),
               "top5_accuracy": ("top-5", catalog.unit("top5_accuracy"), False)}
    summary = []
    for name, entry in REGISTRY.items():
        columns[catalog.column(name, "aurc")] = metric(name, "aurc")
        for column in entry.display.leaderboard:
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
    return [column for entry in REGISTRY.values() for column in entry.display.leaderboard if column.place != "report"]


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
    if any(row.get("holdout") for row in rows):
        note += (f"; rows: evaluation rows, {HOLDOUT_MARKER}: a random hold-out of the file, whose other rows fitted "
                 "the fitted scores (--val or a split column evaluates every row)")
    note += "".join(f"; {line}" for line in left_out_lines(rows))
    if any(row.get("warnings") for row in rows):
        note += f"; {WARNING_MARKER}: the model has warnings, listed below"
    return note


def left_out_lines(rows) -> list[str]:
    """One line per reason some scores have no number for some models (``not_available``: not
    meaningful on their logits, or not computed on their file), e.g. "max_logit: no number for 14
    models, not meaningful on logits that look like log-probabilities (...)"."""
    from ..checks.common_ground import describe_names

    by_reason: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        missing = row.get("not_available") or {}
        for name in missing.get("scores", ()):
            by_reason.setdefault((name, missing.get("reason") or "without logits"), []).append(row["model"])
    grouped: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for (name, reason), models in by_reason.items():
        grouped.setdefault((reason, tuple(models)), []).append(name)
    return [f"{', '.join(names)}: no number for {describe_names(list(models), len(rows))}, not meaningful {reason}"
            for (reason, models), names in grouped.items()]


HOLDOUT_MARKER = "(h)"


WARNING_MARKER = "(!)"


def _row_extras() -> tuple[str, ...]:
    """Keys of a leaderboard row that are not columns of their own."""
    return ("warnings", "sweep", "holdout", *(c.flag_key for c in _board_extras() if c.flag_key))


_BEST = ("aurc_best_score", "aurc_best_posthoc")
CSV_ONLY = ("best_posthoc", "aurc_best_posthoc")  # in the CSV (and sortable), not in the tables


def sort_column(sort_by: str | None, sweep: str | None = None, column_scores=None) -> str:
    """The column the leaderboard is sorted by: ``sort_by`` (any column of the CSV, or a score's metric
    as ``check`` names it: ``msp.aurc`` is ``aurc_msp``), by default the swept value with ``sweep``,
    else :data:`~selcal.options.DEFAULT_SORT`. An unknown column is refused, and a ``sweep`` named as
    a column; ``column_scores``: the scores read from columns of the files (``--score-col``), None
    before the work (their ``aurc_`` columns are not known yet and pass).
    """
    from ..errors import SelcalError

    if sweep is not None and (sweep in LEADERBOARD_COLUMNS or sweep in _row_extras() or sweep.startswith("aurc_")):
        raise SelcalError(f"--sweep {sweep!r} is the name of a leaderboard column; name the hyperparameter otherwise")
    if sort_by is None:
        sort_by = sweep or DEFAULT_SORT
    sortable = [*LEADERBOARD_COLUMNS, *(c for c in _row_extras() if c != "sweep"),
                *(catalog.column(name, "aurc") for name in column_scores or ()), *([sweep] if sweep else [])]
    if sort_by not in sortable and sort_by != sweep:  # a metric as check names it (msp.aurc): its CSV column
        score, key = catalog.split_name(sort_by)
        sort_by = catalog.column(score, key) if score is not None else sort_by
    deferred = column_scores is None and sort_by.startswith("aurc_")  # before the work: columns unknown yet
    if sort_by not in sortable and not deferred:
        raise SelcalError(f"--sort-by {sort_by!r} is not a column; choose from {', '.join(sortable)} "
                          "(a score's metric also as check names it: msp.aurc is aurc_msp)")
    return sort_by


def leaderboard(result: EvaluationResult, sort_by: str | None = None,
                sweep: str | None = None) -> list[dict[str, Any]]:
    """One row per model: accuracy, AURC of every score, the best score of all (msp included)
    and the best post-hoc one (fitted on validation rows) with their AURC, and the columns the
    registry's entries add (the gain from pnorm over MSP, ECE before and after temperature, ...).

    Models not evaluated on the same rows (:func:`selcal.checks.common_ground.boards`) make a board
    per group: each row then has the group's ``board`` (its label) and ``board_heading``, and the
    rows come board by board (in the order of the models), each board sorted on its own.
    Sorted by ``sort_by`` (any column of the CSV), best first (direction-aware); undefined values
    last; by default by the swept value with ``sweep`` (ascending), else by the best score's AURC.
    ``sweep``: the name of a swept hyperparameter (``extra["sweep"]`` of each model, from
    ``--sweep NAME``), added as the column NAME after the model's name.
    """
    from ..checks.common_ground import boards

    column_scores = list(dict.fromkeys(name for model in result.models for name in model.scores
                                       if "column" in model.scores[name]))
    sort_by = sort_column(sort_by, sweep, column_scores)
    split = boards(result.models)
    board_of = {id(model): (index, board) for index, board in enumerate(split) for model in board.models}
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
            "n_eval": model.n_eval,
            "holdout": model.split == "holdout",  # evaluated on a random hold-out of the file's rows
            **({"sweep": sweep, sweep: (model.extra.get("sweep") or {}).get(sweep)} if sweep else {}),
            "accuracy": model.accuracy,
            "top5_accuracy": model.top5_accuracy,
            **{catalog.column(name, "aurc"): aurc.get(name) for name in REGISTRY},
            **{catalog.column(name, "aurc"): aurc.get(name) for name in column_scores},  # columns of the file (--score-col)
            "best_score": best_any,
            "aurc_best_score": defined.get(best_any) if best_any else None,
            "best_posthoc": best,
            "aurc_best_posthoc": posthoc.get(best) if best else None,
            "warnings": list(model.warnings),
            "not_available": model.extra.get("not_available"),  # (not a column: the note says it)
        }
        view = calibrators.board_entry(model, (getattr(result, "bootstrap", None) or {}).get("confidence"))
        if view is not None:  # msp, temp and the calibrators side by side (not a column: report/calibrators.py)
            row["calibrators"] = view
        for column in _board_extras():
            row[column.key] = column.value(scores)
            if column.flag_key:
                row[column.flag_key] = column.flag(scores)
        if len(split) > 1:  # models not evaluated on the same rows: a board per group (not a column of the tables)
            row["board"], row["board_heading"] = board_of[id(model)][1].label, board_of[id(model)][1].heading
        rows.append(row)
    lower_is_better = _column_info(sort_by)[2]
    order = {id(row): board_of[id(model)][0] for row, model in zip(rows, result.models)}

    def key(row):
        value = len(row["warnings"]) if sort_by == "warnings" else row[sort_by]
        if value is None:
            return (1, 0)
        if isinstance(value, str) or lower_is_better is None:
            return (0, value)
        return (0, value if lower_is_better else -value)

    return sorted(rows, key=lambda row: (order[id(row)], key(row)))


def _boards(rows: list[dict[str, Any]]) -> list[tuple[str | None, list[dict[str, Any]]]]:
    """The boards of the rows (heading, rows), as :func:`leaderboard` ordered them; one board with no
    heading when the models were evaluated on the same rows (no row has a ``board``)."""
    if not any(row.get("board") for row in rows):
        return [(None, rows)]
    split: dict[str, list] = {}
    for row in rows:
        split.setdefault(row["board_heading"], []).append(row)
    return list(split.items())


def _split_line(boards: list) -> list[str]:
    """[the line above several boards] or [] for one board."""
    from ..checks.common_ground import split_line

    return [split_line(len(boards))] if len(boards) > 1 else []


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
            if any(row.get(c) is not None for row in rows)
            and (c != "n_eval" or any(row.get("holdout") for row in rows))]  # rows: when some model was held out


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
    if kind == "int":
        return f"{value:,}"
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
        if column == "n_eval" and row.get("holdout"):
            text += f" {HOLDOUT_MARKER}"
        if column == "model" and row.get("warnings"):
            text += f" {WARNING_MARKER}"
        cells.append(text)
    return cells


def cut_middle(text: str, width: int) -> str:
    """``text`` cut in its middle ("head…tail") to ``width`` terminal columns when wider (a wide
    East Asian character takes two): names that differ only at their end (``..._seed0``,
    ``..._seed1``) stay told apart.

    >>> cut_middle("resnet50_imagenet_finetuned_seed0", 20), cut_middle("short", 20)
    ('resnet50_i…ned_seed0', 'short')
    >>> cut_middle("模型" * 6, 9)
    '模型…模型'
    """
    from rich.cells import cell_len, get_character_cell_size

    if cell_len(text) <= width:
        return text
    room = width - 1
    head, used = 0, 0
    while get_character_cell_size(text[head]) + used <= room - room // 2:
        used += get_character_cell_size(text[head])
        head += 1
    tail = len(text)
    while tail > head and get_character_cell_size(text[tail - 1]) + used <= room:
        used += get_character_cell_size(text[tail - 1])
        tail -= 1
    return text[:head] + "…" + text[tail:]


def stacked(columns: list, fits) -> list[list]:
    """``columns`` cut into consecutive groups, each as long as ``fits(group)`` allows (at least
    one column each): the tables stacked one under the other when a table is too wide for the
    console (the leaderboard's, the study's).

    >>> stacked(["a", "b", "c", "d"], lambda group: len(group) <= 3)
    [['a', 'b', 'c'], ['d']]
    """
    groups: list[list] = []
    rest = list(columns)
    while rest:
        group = [rest.pop(0)]
        while rest and fits(group + rest[:1]):
            group.append(rest.pop(0))
        groups.append(group)
    return groups


def render_leaderboard(rows: list[dict[str, Any]], console) -> None:
    """The leaderboard as rich tables (percent columns labelled), then its note and the calibrators
    side by side; models not evaluated on the same rows: a line saying so, then each board's tables
    under its heading. Every line fits the console: stacked tables of the columns that fit, a long model
    name cut in its middle (the full names are in the CSV, Markdown and JSON); the notes wrapped at
    word boundaries to at most :data:`MAX_LINE` columns. The command line gives a pipe a console of
    :data:`MAX_LINE` columns (:data:`PIPE_WIDTH`), so that no line of a CI log is longer."""
    from ..escape import printable

    boards = _boards(rows)
    for line in _split_line(boards):
        calibrators.say(console, line)
    for heading, board in boards:
        if heading is not None:  # a blank line, the board's heading, its tables
            console.print()
            calibrators.say(console, printable(heading))  # (a task's name comes from the user's log)
        _render_tables(board, console)
    calibrators.say(console, _leaderboard_note(_shown_columns(rows), rows))  # wrapped at word boundaries, at most 100 columns
    calibrators.render_terminal(rows, console)


def _render_tables(rows: list[dict[str, Any]], console) -> None:
    """The tables of one board (stacked when too wide for the console)."""
    from rich.table import Table

    columns = _shown_columns(rows)
    headers = {c: _column_info(c)[0] for c in columns}
    if console.width < 125:  # a narrow terminal: short headers (every column is still shown, in stacked tables)
        headers.update({c.key: c.short for c in _board_extras() if c.short and c.key in headers})
    from rich.measure import Measurement

    from ..escape import printable, terminal

    name_width = max(14, console.width - 56)
    names = []
    for row in rows:  # the name and its warning marker; a long name cut in its middle, the marker kept
        marker = f" {WARNING_MARKER}" if row.get("warnings") else ""
        names.append(cut_middle(printable(row["model"]), name_width - len(marker)) + marker)

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
    groups = [["model", *group] for group in stacked([c for c in columns if c != "model"],
                                                      lambda group: width(["model", *group]) <= console.width)]
    for index, group in enumerate(groups or [["model"]]):
        if index:
            console.print()
        console.print(table_of(group))


def leaderboard_markdown(rows: list[dict[str, Any]]) -> str:
    """A GitHub-flavoured Markdown table (for a PR comment); names and warnings escaped
    (:func:`selcal.escape.markdown_text`). Models not evaluated on the same rows: a line saying so,
    then a table per board, each under its heading in bold."""
    from ..escape import markdown_text as md

    def table(board: list[dict[str, Any]]) -> str:
        columns = _shown_columns(board)
        lines = ["| " + " | ".join(md(_column_info(c)[0]) for c in columns) + " |",
                 "|" + "|".join("---" if c == "model" else "---:" for c in columns) + "|"]
        for row in board:
            lines.append("| " + " | ".join(md(cell) for cell in _cells(row, columns)) + " |")
        return "\n".join(lines)

    boards = _boards(rows)
    blocks = [md(line[:1].upper() + line[1:] + ".") for line in _split_line(boards)] + [
        (f"**{md(heading)}**\n\n" if heading is not None else "") + table(board) for heading, board in boards]
    columns = _shown_columns(rows)
    from .warning_groups import warning_lines

    warnings = [f"- {md(line)}" for line in warning_lines([(row["model"], text) for row in rows
                                                          for text in row.get("warnings", ())], len(rows))]
    compared = calibrators.markdown(rows)  # msp, temp and the calibrators side by side, when some model has them
    return "\n\n".join(blocks) + f"\n\n{_leaderboard_note(columns, rows)}\n" + (
        f"\n{compared}" if compared else "") + (
        "\n**Warnings**\n\n" + "\n".join(warnings) + "\n" if warnings else "")


def leaderboard_csv(rows: list[dict[str, Any]]) -> str:
    """CSV with fractions at full precision (not percent), one row per model; ``pnorm_fallback``
    (true when pnorm fell back to MSP) follows ``p``, and ``warnings`` counts the model's warnings.
    Models not evaluated on the same rows: one table still, a first column ``board`` (the label of
    the model's board), the rows board by board."""
    import polars as pl

    from ..options import DEFAULT_SCORES

    shown = set(_shown_columns(rows))
    # the columns of the default scores are always written, those of other scores when some model has them
    optional = {catalog.column(name, "aurc") for name in REGISTRY if name not in DEFAULT_SCORES}
    # (the evaluation rows and the hold-out flag go last, before the warnings: the other columns keep their places)
    columns = [c for c in LEADERBOARD_COLUMNS if (c not in optional or c in shown) and c != "n_eval"]
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
    schema.update(n_eval=pl.Int64, holdout=pl.Boolean, warnings=pl.Int64)
    if any(row.get("board") for row in rows):  # models not evaluated on the same rows: their board first
        schema = {"board": pl.Utf8, **schema}
    compared = calibrators.csv_columns(rows)  # SCORE.KEY, _low, _high of the calibrators compared
    schema.update({column: pl.Float64 for column in compared})
    from ..escape import csv_cell  # text a spreadsheet would run as a formula is neutralised

    frame = pl.DataFrame([{**{c: csv_cell(row.get(c)) for c in schema if c not in compared},
                           "warnings": len(row.get("warnings", ())),
                           **{c: values[i] for c, values in compared.items()}}
                          for i, row in enumerate(rows)], schema=schema)
    return frame.write_csv()
