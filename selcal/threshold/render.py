"""Renderings of a :class:`selcal.threshold.run.ThresholdResult`: the terminal text and table, and a
self-contained HTML page (the figure embedded). Nothing is measured here."""

from __future__ import annotations

import base64
import html

from .._version import __version__
from .run import ThresholdResult, confidence_text, count_text, pct_text, target_text, format_threshold
from ..escape import printable, terminal
from .groups import ABSTAIN, TOO_FEW_ROWS, UNCOVERED
from ..options import PLOT_FORMATS

__all__ = ["provenance", "table_rows", "group_rows", "render_terminal", "render_html"]

TABLE_COLUMNS = ("target r", "threshold", "coverage", "risk", "bound", "eval coverage", "eval risk")
GROUP_COLUMNS = ("group", "cal rows", "threshold", "coverage", "risk", "bound", "eval rows", "eval coverage",
                 "eval risk")

_RULES = {
    "val-file": "the --val file",
    "split-column": "the 'val' rows of the split column",
    "holdout": "a seeded random hold-out of the TEST rows",
    "image-holdout": "a seeded random hold-out of whole images",
}


def provenance(result: ThresholdResult) -> str:
    """One line: where the calibration rows come from and how many there are of each kind."""
    first = result.entries[0]
    calibration = count_text(first.certificate.n)
    rows = f"calibration {calibration} rows from {_RULES.get(result.split, result.split)}"
    if result.n_fit:
        rows += f" (the other {count_text(result.n_fit)} fitted {result.score}" + (
            f"; {result.fit_note}" if result.fit_note else "") + ")"
    return (f"{result.name}: score {result.score} ({result.computed}), method {result.method}, {confidence_text(result.delta)} "
            f"confidence; {rows}; evaluation {count_text(first.evaluation.n)} rows")


def table_rows(result: ThresholdResult) -> list[tuple[str, ...]]:
    """One row of text per target (percent), in the order of :data:`TABLE_COLUMNS`."""
    rows = []
    for entry in result.entries:
        cert, ev = entry.certificate, entry.evaluation
        if cert.abstain_all:
            rows.append((target_text(cert.risk_target), "abstain on everything", "0.0%", "-", "-", "0.0%", "-"))
            continue
        rows.append((target_text(cert.risk_target), format_threshold(entry), pct_text(cert.coverage, 1), pct_text(cert.risk, 2),
                     pct_text(cert.bound, 2), pct_text(ev.coverage, 1), "-" if ev.risk is None else pct_text(ev.risk, 2)))
    return rows


def _or_dash(value, digits: int) -> str:
    return "-" if value is None else pct_text(value, digits)


def group_rows(entry) -> list[tuple[str, ...]]:
    """One row of text per group of a target's :class:`ThresholdEntry` (percent), in the order of
    :data:`GROUP_COLUMNS`; the group's name as it is (each medium escapes it)."""
    rows = []
    for item in entry.groups or ():
        group = item.group
        cert, ev = group.certificate, group.evaluation
        if group.status == UNCOVERED:
            answer = "uncovered: no calibration row"
        elif group.status == TOO_FEW_ROWS:
            answer = f"abstain: fewer rows than the {count_text(group.minimum_rows)} any guarantee needs"
        elif group.status == ABSTAIN:
            answer = "abstain on everything"
        else:
            answer = format_threshold(item)
        certified = cert is not None and not cert.abstain_all
        rows.append((group.name, count_text(group.n_calibration), answer,
                     pct_text(cert.coverage, 1) if cert is not None else "-",
                     _or_dash(cert.risk, 2) if certified else "-", _or_dash(cert.bound, 2) if certified else "-",
                     count_text(ev.n), _or_dash(ev.coverage, 1), _or_dash(ev.risk, 2)))
    return rows


def _group_table(entry, title: str | None = None):
    from rich.table import Table

    table = Table(show_edge=False, pad_edge=False, title=title, title_justify="left")
    for index, column in enumerate(GROUP_COLUMNS):
        table.add_column(column, justify="left" if index in (0, 2) else "right", no_wrap=index != 2)
    for row in group_rows(entry):
        table.add_row(terminal(row[0]), *row[1:])
    return table


def render_terminal(result: ThresholdResult, console) -> None:
    """One target: the sentence. Several: the provenance line and a table (coverage and risk of the
    calibration rows, the certified bound, then the evaluation rows)."""
    from rich.table import Table

    if len(result.entries) == 1:
        console.print(printable(result.sentence(result.entries[0])), markup=False, soft_wrap=True, highlight=False)
        _render_groups(result, console)
        return
    console.print(printable(provenance(result)), markup=False, soft_wrap=True, highlight=False)
    table = Table(show_edge=False, pad_edge=False)
    for index, column in enumerate(TABLE_COLUMNS):
        table.add_column(column, justify="left" if index < 2 else "right", no_wrap=index != 1)
    for row in table_rows(result):
        table.add_row(*row)
    console.print(table)
    console.print("accept a new input when its score is >= threshold; coverage, risk and bound are those of the "
                  "calibration rows (bound: certified upper limit of the selective risk)",
                  markup=False, soft_wrap=True, highlight=False)
    _render_groups(result, console)


def _render_groups(result: ThresholdResult, console) -> None:
    """Per target with groups: the grouping in words and one row per group."""
    for entry in result.entries:
        if entry.groups is None:
            continue
        several = len(result.entries) > 1
        console.print(printable(("at " + target_text(entry.certificate.risk_target) + ": " if several else "")
                                + result.group_sentence(entry)), markup=False, soft_wrap=True, highlight=False)
        console.print(_group_table(entry))


_CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1a1a1a; margin: 0 auto;
       max-width: 1000px; padding: 1.2em 1.6em 3em; }
h1, p, li, td { overflow-wrap: anywhere; }
table { border-collapse: collapse; margin: 0.6em 0 1em; font-variant-numeric: tabular-nums; }
th, td { padding: 0.22em 0.75em; border-bottom: 1px solid #e4e4e4; text-align: right; }
th:first-child, td:first-child, td.text { text-align: left; }
thead th { border-bottom: 2px solid #bbb; }
p.meta { color: #555; } img { max-width: 100%; height: auto; border: 1px solid #eee; }
section.warnings { background: #fff8e6; border-left: 4px solid #e0a100; padding: 0.4em 1em; margin: 1em 0; }
"""

_MIME = {"png": "image/png", "svg": "image/svg+xml"}


def _e(text) -> str:
    return html.escape(printable(str(text)), quote=True)


def render_html(result: ThresholdResult, figure: bytes | None = None, fmt: str = PLOT_FORMATS[0]) -> str:
    """The page: what was asked, the answer in words for each target, the table, the figure
    (``figure``: PNG or SVG bytes, embedded as a data URI) and the warnings."""
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>selcal threshold: {_e(result.name)}</title><style>{_CSS}</style></head><body>",
             f"<h1>Deployment threshold: {_e(result.name)}</h1>",
             f'<p class="meta">{_e(provenance(result))}. File: <code>{_e(result.path)}</code>; selcal {_e(__version__)}.</p>',
             "<ul>"]
    parts += [f"<li>{_e(result.sentence(entry))}</li>" for entry in result.entries]
    parts.append("</ul><table><thead><tr>" + "".join(f"<th>{_e(c)}</th>" for c in TABLE_COLUMNS) + "</tr></thead><tbody>")
    for row in table_rows(result):
        parts.append("<tr>" + "".join(f'<td{" class=text" if i == 1 else ""}>{_e(cell)}</td>'
                                      for i, cell in enumerate(row)) + "</tr>")
    parts.append("</tbody></table>")
    parts.append('<p class="meta">Coverage, risk and bound are those of the calibration rows; the bound is the '
                 "certified upper limit of the selective risk on new data (it holds with the confidence above); "
                 "eval coverage and eval risk are what the threshold gave on the evaluation rows.</p>")
    for entry in result.entries:
        if entry.groups is None:
            continue
        parts.append(f"<h2>Per group at {_e(target_text(entry.certificate.risk_target))}</h2>"
                     f"<p>{_e(result.group_sentence(entry))}</p><table><thead><tr>"
                     + "".join(f"<th>{_e(c)}</th>" for c in GROUP_COLUMNS) + "</tr></thead><tbody>")
        for row in group_rows(entry):
            parts.append("<tr>" + "".join(f'<td{" class=text" if i in (0, 2) else ""}>{_e(cell)}</td>'
                                          for i, cell in enumerate(row)) + "</tr>")
        parts.append("</tbody></table>")
    if figure is not None and fmt in _MIME:
        data = base64.b64encode(figure).decode("ascii")
        parts.append(f'<figure><img alt="thresholds and bounds on the risk-coverage curve" '
                     f'src="data:{_MIME[fmt]};base64,{data}"></figure>')
    if result.warnings:
        parts.append('<section class="warnings"><ul>' + "".join(f"<li>{_e(w)}</li>" for w in result.warnings)
                     + "</ul></section>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
