"""A study for people: the terminal table, Markdown, LaTeX (booktabs) and CSV.

One table for all of them (:func:`table`): recipes as rows (the baseline first), data sets x the
study's metrics as columns, ``mean ± std`` per cell (percent for a fraction, as the evaluate
tables), the best per column marked, and beside each rival of the baseline its verdict. Names
and labels come from the metric catalog; user text is escaped for each medium (selcal.escape).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..escape import csv_cell, latex_text, markdown_text, printable, terminal
from ..metrics import catalog
from ..report.calibrators import BEST_MARK, MAX_LINE, say
from ..report.leaderboard import cut_middle, stacked
from .result import StudyResult

__all__ = ["table", "render_terminal", "study_markdown", "study_latex", "study_csv", "VERDICT_MARKS"]

VERDICT_MARKS = {"better": "+", "worse": "-", "same": "="}
_DIGITS = {"pct": 2, "num": 4}  # the precision of the evaluate tables (percent, plain numbers)


@dataclass
class Cell:
    mean: float | None
    std: float | None
    unit: str
    best: bool = False
    verdict: str | None = None

    def number(self, value: float) -> str:
        digits = _DIGITS[self.unit]
        return f"{100 * value if self.unit == 'pct' else value:.{digits}f}"

    @property
    def text(self) -> str:
        """``mean ± std`` (``mean`` alone for a single run; ``-`` when undefined)."""
        if self.mean is None:
            return "-"
        return self.number(self.mean) + ("" if self.std is None else f" ± {self.number(self.std)}")


@dataclass
class Column:
    dataset: str | None
    metric: str

    @property
    def label(self) -> str:
        return catalog.label(self.metric)


def table(result: StudyResult) -> tuple[list[Column], list[tuple[str, list[Cell]]]]:
    """The study's table: its columns and, per recipe, a cell per column."""
    columns = [Column(dataset, metric) for dataset in result.datasets for metric in result.metrics]
    found = {(row["dataset"], row["recipe"], row["score"], row["metric"]): row for row in result.rows}
    rows = []
    for recipe in result.recipes:
        cells = []
        for column in columns:
            score, key = catalog.split_name(column.metric)
            row = found.get((column.dataset, recipe, score, key))
            cells.append(Cell(None if row is None else row["mean"], None if row is None else row["std"],
                              catalog.unit(key), verdict=None if row is None else row.get("verdict")))
        rows.append((recipe, cells))
    for j, column in enumerate(columns):
        direction = catalog.better(catalog.split_name(column.metric)[1])
        means = [cells[j].mean for _, cells in rows if cells[j].mean is not None]
        if direction is None or not means:
            continue
        best = min(means) if direction == "lower" else max(means)
        for _, cells in rows:
            cells[j].best = cells[j].mean == best and len(rows) > 1
    return columns, rows


def _header(column: Column, several: bool) -> str:
    """A terminal column's header (rich markup escaped): the data set over the metric's label."""
    return (f"{terminal(column.dataset)}\n" if several and column.dataset is not None else "") + terminal(column.label)


def _marks(cell: Cell) -> str:
    return (BEST_MARK if cell.best else " ") + (f" {VERDICT_MARKS[cell.verdict]}" if cell.verdict else "")


def legend(result: StudyResult) -> str:
    """What the table's numbers and marks mean, in one line."""
    runs = "mean ± sample standard deviation over the runs"
    parts = [f"{runs}; in % but {', '.join(catalog.name(m) for m in result.metrics if catalog.unit(m) == 'num')}"
             if any(catalog.unit(m) == "num" for m in result.metrics) else f"{runs}, in %",
             f"{BEST_MARK} the best of its column"]
    if result.baseline is not None and any(row.get("verdict") for row in result.rows):
        level = 100 * result.bootstrap["confidence"]
        parts.append(f"against {printable(result.baseline)}: {VERDICT_MARKS['better']} better, "
                     f"{VERDICT_MARKS['worse']} worse, {VERDICT_MARKS['same']} same (two-level bootstrap, "
                     f"Holm over the recipe-metric pairs of each data set, {level:g}%)")
    return "; ".join(parts)


def render_terminal(result: StudyResult, console) -> None:
    """The table on a rich console: stacked tables of the columns that fit (the leaderboard's rule),
    long recipe names cut in their middle; then the mean ranks, the legend and the notes, wrapped
    to at most :data:`MAX_LINE` columns."""
    from rich.table import Table

    from ..report.table import measure_width

    columns, rows = table(result)
    several = len(result.datasets) > 1
    name_width = max(14, min(console.width, MAX_LINE) - 40)
    names = [cut_middle(printable(recipe), name_width) for recipe, _ in rows]

    def table_of(shown: list[int]) -> Table:
        out = Table(show_edge=False, pad_edge=False)
        out.add_column("recipe", no_wrap=True)
        for j in shown:
            out.add_column(_header(columns[j], several), justify="right", no_wrap=True)
        for name, (_, cells) in zip(names, rows):
            out.add_row(terminal(name), *(terminal(cells[j].text + _marks(cells[j])) for j in shown))
        return out

    width = min(console.width, MAX_LINE)
    groups = stacked(list(range(len(columns))), lambda group: measure_width(console, table_of(group)) <= width)
    for index, group in enumerate(groups):
        if index:
            console.print()
        console.print(table_of(group))
    if result.ranks:
        console.print()
        ranks = Table(show_edge=False, pad_edge=False, title=None)
        ranks.add_column("recipe", no_wrap=True)
        shown = list(result.ranks)
        for metric in shown:
            ranks.add_column(terminal(f"rank {catalog.name(metric)}"), justify="right", no_wrap=True)
        for name, (recipe, _) in zip(names, rows):
            ranks.add_row(terminal(name), *(_rank(result.ranks[m].get(recipe)) for m in shown))
        say(console, f"mean rank over the {len(result.datasets)} data sets (1 = best)")
        console.print(ranks)
    say(console, legend(result))
    for note in result.notes:
        say(console, f"note: {note}")


def _rank(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def study_markdown(result: StudyResult) -> str:
    """The table as GitHub-flavoured Markdown (best per column in bold), the ranks, legend and notes."""
    columns, rows = table(result)
    several = len(result.datasets) > 1
    headers = ["recipe"] + [(f"{column.dataset} " if several and column.dataset is not None else "") + column.label
                            for column in columns]
    lines = ["| " + " | ".join(markdown_text(h) for h in headers) + " |",
             "|---|" + "---:|" * len(columns)]
    for recipe, cells in rows:
        texts = []
        for cell in cells:
            text = markdown_text(cell.text)
            text = f"**{text}**" if cell.best else text
            texts.append(text + (f" {markdown_text(VERDICT_MARKS[cell.verdict])}" if cell.verdict else ""))
        lines.append("| " + " | ".join([markdown_text(recipe), *texts]) + " |")
    out = "\n".join(lines) + "\n"
    if result.ranks:
        shown = list(result.ranks)
        out += (f"\nMean rank over the {len(result.datasets)} data sets (1 = best):\n\n"
                + "| recipe | " + " | ".join(markdown_text(catalog.name(m)) for m in shown) + " |\n"
                + "|---|" + "---:|" * len(shown) + "\n"
                + "".join(f"| {markdown_text(recipe)} | " + " | ".join(_rank(result.ranks[m].get(recipe))
                                                                     for m in shown) + " |\n"
                          for recipe, _ in rows))
    out += "\n" + markdown_text(legend(result).replace(f"{BEST_MARK} the best", "bold: the best")) + "\n"
    for note in result.notes:
        out += f"\n- {markdown_text(note)}"
    return out + ("\n" if result.notes else "")


def study_latex(result: StudyResult) -> str:
    """A booktabs table ready to ``\\input``: a column group per data set, ``mean $\\pm$ std`` in % with
    the precision of the terminal table, the best per column in ``\\textbf``, names escaped."""
    columns, rows = table(result)
    several = len(result.datasets) > 1 or result.datasets[0] is not None
    per = len(result.metrics)
    lines = [r"\begin{tabular}{l" + ("r" * per) * len(result.datasets) + "}", r"\toprule"]
    if several:
        groups = [rf"\multicolumn{{{per}}}{{c}}{{{latex_text(d)}}}" for d in result.datasets]
        lines.append(" & " + " & ".join(groups) + r" \\")
        lines.append(" ".join(rf"\cmidrule(lr){{{2 + i * per}-{1 + (i + 1) * per}}}"
                              for i in range(len(result.datasets))))
    lines.append("Recipe & " + " & ".join(latex_text(c.label) for c in columns) + r" \\")
    lines.append(r"\midrule")
    for recipe, cells in rows:
        texts = []
        for cell in cells:
            if cell.mean is None:
                texts.append("--")
                continue
            text = cell.number(cell.mean) + ("" if cell.std is None else rf" $\pm$ {cell.number(cell.std)}")
            texts.append(rf"\textbf{{{text}}}" if cell.best else text)
        lines.append(latex_text(recipe) + " & " + " & ".join(texts) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def study_csv(result: StudyResult) -> str:
    """The tidy table (:meth:`StudyResult.to_polars`) as CSV: fractions at full precision; a text
    cell a spreadsheet would run as a formula neutralised (:func:`selcal.escape.csv_cell`)."""
    import polars as pl

    frame = result.to_polars()
    text = [c for c, kind in frame.schema.items() if kind == pl.Utf8]
    frame = frame.with_columns(pl.col(c).map_elements(csv_cell, return_dtype=pl.Utf8) for c in text)
    return frame.write_csv()
