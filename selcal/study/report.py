"""The study's HTML page (``selcal study --report``): one self-contained file whose first screen is
the table; then the differences against the baseline, the mean ranks, the notes, the figures of
each data set, the runs and the settings. The style, the figures' markup and the settings table
are those of the evaluate report (:mod:`selcal.report.html`); text from the user is escaped
(:func:`selcal.escape.html_text`)."""

from __future__ import annotations

from collections.abc import Sequence

from ..escape import html_name, html_text
from ..report.html import PAGE_CSS, figure_html, settings_rows
from ..metrics import catalog
from .render import VERDICT_MARKS, legend, table
from .result import StudyResult

__all__ = ["study_page"]

_STUDY_CSS = "td.best { font-weight: 700; } td.worse { color: #a4161a; } td.better { color: #1b6e20; }"


def _number(value, unit: str) -> str:
    if value is None:
        return "–"
    return f"{100 * value:.2f}" if unit == "pct" else f"{value:.4f}"


def _main_table(result: StudyResult) -> str:
    columns, rows = table(result)
    several = len(result.datasets) > 1 or result.datasets[0] is not None
    head = ""
    if several:
        per = len(result.metrics)
        head = "<tr><th></th>" + "".join(f"<th colspan='{per}' style='text-align:center'>{html_name(d or '')}</th>"
                                         for d in result.datasets) + "</tr>"
    head += "<tr><th>recipe</th>" + "".join(f"<th>{html_text(c.label)}</th>" for c in columns) + "</tr>"
    body = []
    for recipe, cells in rows:
        tds = []
        for cell in cells:
            kind = " ".join(k for k in ("best" if cell.best else "", cell.verdict or "") if k)
            mark = f" {VERDICT_MARKS[cell.verdict]}" if cell.verdict else ""
            tds.append(f"<td class='{kind}'>{html_text(cell.text)}{mark}</td>" if kind else
                       f"<td>{html_text(cell.text)}{mark}</td>")
        body.append(f"<tr><td>{html_name(recipe)}</td>{''.join(tds)}</tr>")
    return f"<div class='scroll'><table class='summary'><thead>{head}</thead><tbody>{''.join(body)}</tbody></table></div>"


def _differences(result: StudyResult) -> str:
    judged = [row for row in result.rows if row.get("verdict")]
    if not judged:
        return ""
    level = 100 * result.bootstrap["confidence"]
    lines = []
    for row in judged:
        metric = row["metric"] if row["score"] is None else f"{row['score']}.{row['metric']}"
        unit = catalog.unit(row["metric"])
        interval = f"[{_number(row['diff_low'], unit)}, {_number(row['diff_high'], unit)}]"
        lines.append(f"<tr><td>{html_name(row['recipe'])}</td><td>{html_name(row['dataset'] or '')}</td>"
                     f"<td>{html_text(catalog.label(metric))}</td><td>{_number(row['diff'], unit)}</td>"
                     f"<td>{interval}</td><td>{row['p']:.3g}</td><td class='{row['verdict']}'>{row['verdict']}</td></tr>")
    return (f"<h2>Against {html_name(result.baseline)}</h2><p class='note'>recipe − baseline, its {level:g}% interval "
            "(two-level bootstrap with the small-sample correction), the one-sided p-value and the verdict after "
            "Holm's procedure over the recipe-metric pairs of each data set.</p>"
            "<div class='scroll'><table><thead><tr><th>recipe</th><th>data set</th><th>metric</th><th>difference</th>"
            f"<th>interval</th><th>p</th><th>verdict</th></tr></thead><tbody>{''.join(lines)}</tbody></table></div>")


def _ranks(result: StudyResult) -> str:
    if not result.ranks:
        return ""
    shown = list(result.ranks)
    head = "".join(f"<th>{html_text(catalog.name(m))}</th>" for m in shown)
    body = "".join(f"<tr><td>{html_name(recipe)}</td>" + "".join(
        f"<td>{'–' if result.ranks[m].get(recipe) is None else f'{result.ranks[m][recipe]:.2f}'}</td>" for m in shown)
        + "</tr>" for recipe in result.recipes)
    return (f"<h2>Mean rank over the {len(result.datasets)} data sets</h2><p class='note'>1 = best; ties share the "
            f"average rank.</p><table><thead><tr><th>recipe</th>{head}</tr></thead><tbody>{body}</tbody></table>")


def _runs(result: StudyResult) -> str:
    fields = result.fields
    head = "".join(f"<th>{html_text(name)}</th>" for name in ["data set", "recipe", "seed", *fields, "path"])
    body = "".join(
        f"<tr><td>{html_name(run.dataset or '')}</td><td>{html_name(run.recipe)}</td><td>{html_text(run.seed)}</td>"
        + "".join(f"<td>{html_name(run.fields.get(name, ''))}</td>" for name in fields)
        + f"<td style='text-align:left'>{html_name(run.path)}</td></tr>" for run in result.runs)
    return f"<h2>Runs ({len(result.runs)})</h2><div class='scroll'><table><thead><tr>{head}</tr></thead>" \
           f"<tbody>{body}</tbody></table></div>"


def study_page(result: StudyResult, figures: Sequence = (), *, title: str = "selcal study") -> str:
    """The HTML text of the page; ``figures``: :class:`selcal.figures.base.RenderedFigure` (PNG or SVG)."""
    parts = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
             "<meta name='viewport' content='width=device-width, initial-scale=1'>",
             f"<title>{html_text(title)}</title><style>{PAGE_CSS}{_STUDY_CSS}</style></head><body>",
             f"<h1>{html_text(title)}</h1>",
             f"<p class='meta'>{len(result.runs)} runs, {len(result.recipes)} recipes"
             + (f", {len(result.datasets)} data sets" if result.datasets != [None] else "") + "</p>",
             _main_table(result), f"<p class='note'>{html_text(legend(result))}</p>"]
    parts += [f"<p class='note'>note: {html_text(note)}</p>" for note in result.notes]
    if result.warnings:
        parts.append("<section class='warnings'><strong>Warnings</strong><ul>" + "".join(
            f"<li>{html_name(name)}: {html_text(text)}</li>" for name, text in result.warnings) + "</ul></section>")
    parts += [_differences(result), _ranks(result)]
    for dataset in result.datasets:
        shown = [f for f in figures if f.model == dataset]
        if shown:
            parts.append(f"<h2>{html_name(dataset) if dataset is not None else 'Figures'}</h2><div class='figures'>"
                         + "".join(figure_html(f) for f in shown) + "</div>")
    parts.append(_runs(result))
    rows = settings_rows(result)
    parts.append("<h2>Settings</h2><table class='settings'><tbody>" + "".join(
        f"<tr><th>{html_text(name)}</th><td>{html_text(value)}</td></tr>" for name, value, _ in rows)
        + "</tbody></table>")
    parts.append("</body></html>")
    return "\n".join(p for p in parts if p) + "\n"
