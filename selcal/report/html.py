"""One self-contained HTML page for an :class:`~selcal.report.EvaluationResult`.

The page holds the settings the numbers depend on, one metric table per model (the rows
of the terminal table, per-group tables when rows have groups), and every figure of
:mod:`selcal.figures` embedded as a ``data:`` URI (PNG, or SVG when the figures were
rendered as SVG), so it can be opened offline, mailed, or attached to a pull request.
Each image is embedded once: a model's figure that a figure across models shows as one of its
tiles (``selcal.figures.render.TILES``) is a link to that figure in the model's section. PNG
figures are palette images (:func:`selcal.figures.base.palette_png`), so the page grows by about
0.36 MB per CIFAR-size model with every figure (bench/bench_report.py). Nothing is measured here:
every number is read from the result.
"""

from __future__ import annotations

import base64
import dataclasses
import math
import re
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._version import __version__
from ..writers.output import Outputs
from . import calibrators, fit_notes, metric_sections
from ..scores import REGISTRY
from ..options import DEFAULT_AT_COVERAGE, DEFAULT_TOP

__all__ = ["render_report", "write_report", "zoo_boards", "zoo_selection"]

_MIME = {"png": "image/png", "svg": "image/svg+xml"}
_WIDE_KINDS = ("reliability", "smooth", "logit_profile", "errors_by_group")  # panels side by side: a whole row
_WIDE_PREFIXES = ("sweep_", "overlay_")

# Figures are never shown below this share of their pixel width (at 150 dpi, 8.5 pt labels
# stay about 9 px tall); a figure wider than its column at that scale scrolls inside its frame,
# never the page.
MIN_FIGURE_SCALE = 0.5
# Options that change no number (CONVENTIONS.md, Options): left out of the settings table.
_NOT_SETTINGS = ("chunk_rows", "workers")

PAGE_CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1a1a1a; margin: 0 auto;
       max-width: 1760px; padding: 1.2em 1.6em 3em; }
h1, h2, h3, p, li, code { overflow-wrap: anywhere; }
.scroll { overflow-x: auto; max-width: 100%; }
img { max-width: 100%; height: auto; }
.frame { overflow-x: auto; }
section.warnings { background: #fff8e6; border-left: 4px solid #e0a100; padding: 0.4em 1em; margin: 1em 0; }
section.warnings ul { margin: 0.3em 0; padding-left: 1.2em; }
td.default { color: #777; }
h1 { font-size: 1.55em; margin-bottom: 0.2em; } h2 { font-size: 1.25em; margin-top: 2.2em;
       border-bottom: 1px solid #ddd; padding-bottom: 0.2em; } h3 { font-size: 1.05em; margin-top: 1.6em; }
p.meta, p.note { color: #555; margin: 0.3em 0; }
table { border-collapse: collapse; margin: 0.6em 0 1em; font-variant-numeric: tabular-nums; }
th, td { padding: 0.22em 0.55em; border-bottom: 1px solid #e4e4e4; text-align: right; white-space: nowrap; }
thead th { border-bottom: 2px solid #bbb; white-space: normal; vertical-align: bottom; min-width: 3.8em; }
th:first-child, td:first-child { text-align: left; white-space: normal; overflow-wrap: anywhere; min-width: 10em; }
table.summary td:first-child, table.calibrators-best td:first-child { min-width: 15em; }  /* a usual name on one line */
table.calibrators-best th[colspan], table.calibrators-best td.best { text-align: left; }
table.calibrators-best td.best { font-weight: 600; padding-left: 1.4em; }
tr.section td { border-top: 2px solid #bbb; }
table.settings td, table.errors td { text-align: left; white-space: normal; overflow-wrap: anywhere; }
table.settings td { font-family: ui-monospace, monospace; font-size: 0.92em; }
table.settings th { text-align: left; }
.warning { color: #8a5300; }
.figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(560px, 100%), 1fr)); gap: 0 1.4em;
            grid-auto-flow: dense; }
figure { margin: 1em 0 1.6em; min-width: 0; } figure.wide { grid-column: 1 / -1; max-width: 1400px; }
figure img { border: 1px solid #eee; }
figcaption { color: #555; font-size: 0.92em; }
nav.toc ul { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(18em, 100%), 1fr)); gap: 0.1em 2em;
             padding-left: 1.2em; margin: 0.3em 0; }
@media (max-width: 960px) { body { padding: 1em 0.8em 3em; } th, td { padding: 0.2em 0.45em; }
  th:first-child, td:first-child, table.summary td:first-child, table.calibrators-best td:first-child { min-width: 7em; } }
code { font-size: 0.95em; }
section.warnings li { list-style: none; margin: 0.1em 0; }
section.warnings summary { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; cursor: pointer; }
section.warnings details[open] summary { white-space: normal; }
span.count { display: inline-block; min-width: 2.6em; font-weight: 600; color: #8a5300; }
table.summary th.sortable { cursor: pointer; } table.summary th[aria-sort]::after { content: " ▾"; color: #777; }
table.summary th[aria-sort='ascending']::after { content: " ▴"; }
tr.drawn td:first-child { font-weight: 600; }
details.model > summary { cursor: pointer; } details.model > summary h2 { display: inline; border: 0; }
nav.toc details summary { cursor: pointer; }
"""

# Sorting a summary table by a column: a click on its header (the page reads the same without it).
_SORT_SCRIPT = """<script>
document.querySelectorAll("table.summary").forEach(function (table) {
  table.querySelectorAll("thead th").forEach(function (th, column) {
    th.classList.add("sortable");
    th.title = "sort by this column";
    th.addEventListener("click", function () {
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      var down = th.getAttribute("aria-sort") !== "descending";
      table.querySelectorAll("thead th").forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", down ? "descending" : "ascending");
      function key(row) {
        var cell = row.cells[column], v = cell.getAttribute("data-v");
        return v === null ? cell.textContent.trim() : (v === "" ? null : parseFloat(v));
      }
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (x === null || y === null) { return (x === null) - (y === null); }  // no value: last
        var c = typeof x === "number" ? x - y : String(x).localeCompare(String(y));
        return down ? -c : c;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
</script>"""


def _cell(value, kind: str) -> str:
    """A summary cell: the value as shown, and as a number for the page's sorting (``data-v``)."""
    number = "" if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) \
        or not math.isfinite(value) else repr(float(value))
    return f"<td data-v='{number}'>{_format(value, kind)}</td>"


def _format(value, kind: str) -> str:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "–"
    return f"{100 * value:.2f}" if kind == "pct" else f"{value:.4f}"


def _e(text) -> str:
    from ..escape import html_text  # a control character or a non-UTF-8 byte of a name as a visible escape

    return html_text(text)


def _name(text) -> str:
    """A model's name or a path as element text: it breaks at ``/ _ - .`` first (``<wbr>``)."""
    from ..escape import html_name

    return html_name(text)


def _anchor(name: str) -> str:
    return "model-" + "".join(c if c.isalnum() else "-" for c in name)


def _metric_table(model) -> str:
    out = ["<div class='scroll'><table class='metrics'><thead><tr><th>metric</th>"]
    out += [f"<th>{_e(n)}</th>" for n in model.scores]
    out.append("</tr></thead><tbody>")
    for index, section in enumerate(metric_sections(model)):
        for row, (label, kind, values) in enumerate(section):
            css = " class='section'" if index and row == 0 else ""
            out.append(f"<tr{css}><td>{_e(label)}</td>" + "".join(f"<td>{_format(v, kind)}</td>" for v in values)
                       + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _group_table(model) -> str:
    groups = model.extra.get("groups")
    if not groups:
        return ""
    names = [n for n in model.scores if any(n in g.get("scores", {}) for g in groups.values())]
    out = ["<h3>By group</h3><div class='scroll'><table class='groups'><thead><tr><th>group</th><th>rows</th>"
           "<th>accuracy (%)</th>"]
    out += [f"<th>AURC {_e(n)} (%)</th>" for n in names]
    out.append("</tr></thead><tbody>")
    for group, values in groups.items():
        cells = "".join(f"<td>{_with_interval(values['scores'].get(n, {}), 'aurc')}</td>" for n in names)
        out.append(f"<tr><td>{_name(group)}</td><td>{values['n_eval']:,}</td>"
                   f"<td>{_with_interval(values, 'accuracy')}</td>{cells}</tr>")
    out.append("</tbody></table></div>")
    if any("ci" in values for values in groups.values()):
        out.append("<p class='note'>Under each value, its bootstrap interval (the rows resampled within each group; "
                   "every other metric's in the JSON).</p>")
    return "".join(out)


def _with_interval(metrics: dict, key: str) -> str:
    """A percent value, and under it its bootstrap interval when the result has one (``--bootstrap``)."""
    ci = (metrics.get("ci") or {}).get(key) if isinstance(metrics.get("ci"), dict) else None
    text = _format(metrics.get(key), "pct")
    if ci is None:
        return text
    return f"{text}<br><small>[{_format(ci[0], 'pct')}, {_format(ci[1], 'pct')}]</small>"


def _errors_tables(model) -> str:
    """The most confident errors of each score (Xia et al. 2024, fig. 5, without the images)."""
    tables = getattr(model, "confident_errors", None) or {}
    if not any(len(t) for t in tables.values()):
        return ""
    out = ["<h3>Most confident errors</h3><p class='note'>The errors each score ranks highest; "
           "rank percentile: percent of the evaluation rows at least as confident (ties at mid-rank).</p>"]
    for score, table in tables.items():
        if not len(table):
            continue
        entry = REGISTRY.get(score)
        probability = entry.is_probability(model.scores.get(score, {})) if entry is not None else \
            bool(model.scores.get(score, {}).get("probability_of_correct"))
        unit = "probability" if probability else "score"
        out.append(f"<details><summary>{_e(score)}: {len(table)} errors</summary>"
                   f"<table class='errors'><thead><tr><th>rank</th><th>id</th><th>label</th><th>prediction</th>"
                   f"<th>confidence ({unit})</th><th>rank percentile (%)</th></tr></thead><tbody>")
        for i in range(len(table)):
            out.append(f"<tr><td>{i + 1}</td><td>{_e(table.id[i])}</td><td>{int(table.label[i])}</td>"
                       f"<td>{int(table.prediction[i])}</td><td>{float(table.confidence[i]):.6g}</td>"
                       f"<td>{float(table.rank_percentile[i]):.3f}</td></tr>")
        out.append("</tbody></table></details>")
    return "".join(out)


def _notes(model) -> list[str]:
    """The fit note of every fitted score, as under the terminal table (its registry entry's ``note``)."""
    return [note.replace(" -> ", " → ") for note in fit_notes(model)]


def image_size(data: bytes, fmt: str) -> tuple[int, int] | None:
    """(width, height) in CSS pixels of a PNG (its pixels) or an SVG (its ``width`` and ``height``; pt = 4/3 px).

    >>> image_size(b"\\x89PNG\\r\\n\\x1a\\n" + b"\\0\\0\\0\\rIHDR" + (900).to_bytes(4, "big") + (600).to_bytes(4, "big"), "png")
    (900, 600)
    >>> image_size(b"<svg width='432pt' height='10pt'>", "svg")
    (576, 13)
    """
    if fmt == "png" and data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        return struct.unpack(">II", data[16:24])
    if fmt == "svg":
        head = data[:4096]
        sizes = [re.search(rb"<svg[^>]*?\s" + name + rb"=['\"]([0-9.]+)(pt|px)?['\"]", head) for name in (b"width", b"height")]
        if all(sizes):
            return tuple(round(float(m.group(1)) * (4 / 3 if m.group(2) in (b"pt", None) else 1)) for m in sizes)
    return None


def _figure_id(figure) -> str:
    return "figure-" + "".join(c if c.isalnum() or c in "-_." else "-" for c in figure.stem)


def _tiled(figures) -> dict[tuple[str, str], tuple[Any, int, int]]:
    """(model, kind) -> (figure across models, its page, pages) for each model whose figure of that
    kind a figure across models shows already, as a tile (:data:`selcal.figures.render.TILES`)."""
    from ..figures.render import TILES

    out = {}
    for kind, tile in TILES.items():
        across = [f for f in figures if f.model is None and f.kind == kind and f.data]
        for board in dict.fromkeys(getattr(f, "board", "") for f in across):  # a board's pages are numbered apart
            pages = [f for f in across if getattr(f, "board", "") == board]
            for number, page in enumerate(pages, 1):
                for name in getattr(page, "models", ()):
                    out.setdefault((name, tile), (page, number, len(pages)))
    return out


def _tile_note(figure, shown) -> str:
    page, number, pages = shown
    which = "the figure" if pages == 1 else f"figure {number} of {pages}"
    return (f"<p class='note'>{_e(figure.caption.rstrip('.'))}: shown with the other models in "
            f"<a href='#{_figure_id(page)}'>{which} across models</a> (the same panels, axes shared).</p>")


def figure_html(figure) -> str:
    mime = _MIME.get(figure.format)
    if mime is None or not figure.data:
        return ""
    data = base64.b64encode(figure.data).decode("ascii")
    alt = f"{figure.kind} {figure.model or 'all models'}"
    wide = " class='wide'" if figure.kind in _WIDE_KINDS or figure.kind.startswith(_WIDE_PREFIXES) else ""
    size = image_size(figure.data, figure.format)
    # width and height: the box of a figure not yet loaded has its final shape (loading=lazy:
    # a browser decodes a figure when it scrolls near, not all of them when the page opens).
    size = "" if size is None else \
        f" width='{size[0]}' height='{size[1]}' style='min-width:{math.ceil(MIN_FIGURE_SCALE * size[0])}px'"
    return (f"<figure{wide} id='{_figure_id(figure)}'><div class='frame'><img alt='{_e(alt)}'{size} loading='lazy' "
            "decoding='async' "
            f"src='data:{mime};base64,{data}'></div>"
            f"<figcaption>{_e(figure.caption)}</figcaption></figure>")


def _contents(models, across: bool) -> str:
    """The table of contents: summary, figures across models, every model (folded), settings."""
    parts = ["<a href='#summary'>Summary</a>"]
    if across:
        parts.append("<a href='#across-models'>Across models</a>")
    parts.append("<a href='#settings'>Settings</a>")
    items = "".join(f"<li><a href='#{_anchor(m.name)}'>{_name(m.name)}</a></li>" for m in models)
    return (f"<nav class='toc'><strong>Contents</strong>: {' · '.join(parts)}<details><summary>every model "
            f"({len(models)})</summary><ul>{items}</ul></details></nav>")


def _setting(value) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


def settings_rows(result, plot_settings: dict[str, Any] | None = None) -> list[tuple[str, str, str | None]]:
    """(name, value, default or None) of every setting a number on the page depends on.

    Every field of ``result.options`` but those that change no number (``chunk_rows``,
    ``workers``), with the default beside a value that differs from it; the bootstrap
    (resamples, seed, confidence, refit) when there are intervals; then ``plot_settings``
    (the CLI's column and row options and the figure options), those left at None omitted.
    """
    rows: list[tuple[str, str, str | None]] = [("selcal", __version__, None)]
    options = result.options
    if options is not None and dataclasses.is_dataclass(options):
        try:
            defaults = type(options)()
        except Exception:  # an Options without defaults: no default column
            defaults = None
        for field in dataclasses.fields(options):
            if field.name in _NOT_SETTINGS:
                continue
            value = _setting(getattr(options, field.name))
            default = None if defaults is None else _setting(getattr(defaults, field.name))
            rows.append((field.name, value, default if default != value else None))
    elif options is not None:
        for key, value in result.to_dict().get("options", {}).items():
            rows.append((key, _setting(value), None))
    bootstrap = getattr(result, "bootstrap", None)
    if bootstrap:
        rows += [(f"bootstrap_{key}", _setting(value), None) for key, value in bootstrap.items()]
    for key, value in (plot_settings or {}).items():
        if value is not None:
            rows.append((key, str(value), None))
    return rows


def _figure_pairs(result, notes: Sequence[str]) -> list[tuple[str, str]]:
    """Figure notes as (figure, reason) pairs: a model's figure named by its model, so that the same
    reason about many models' figures is one kind (``vmax_msp not drawn: ...``)."""
    from ..figures.base import safe_stem

    stems = sorted(((safe_stem(m.name), m.name) for m in result.models), key=lambda pair: -len(pair[0]))
    pairs = []
    for note in notes:
        owner = next(((stem, name) for stem, name in stems if note.startswith(stem + "_")), None)
        pairs.append(("", note) if owner is None else (owner[1], note[len(owner[0]) + 1:]))
    return pairs


def _warnings(result, notes: Sequence[str], board_warnings: Sequence[str] = ()) -> str:
    """One line per kind of warning with its count (models, or figures), the details folded under it:
    the models' warnings (:mod:`selcal.report.warning_groups`), the board's, the figures not drawn."""
    from .warning_groups import group_warnings

    n = len(result.models)
    items = []
    for group in group_warnings([(m.name, w) for m in result.models for w in m.warnings]):
        links = ", ".join(f"<a href='#{_anchor(name)}'>{_name(name)}</a>" for name in group.models)
        count = f"{len(group.models)} model{'s' if len(group.models) != 1 else ''}"
        if len(group.models) == 1:
            items.append(f"<li><span class='count'>1</span> {links}: {_e(group.text)}</li>")
        else:
            items.append(f"<li><details><summary><span class='count'>{len(group.models)}</span> "
                         f"{_e(group.text)}</summary>{'all ' if len(group.models) == n else ''}{count}: {links}"
                         "</details></li>")
    items += [f"<li><details><summary><span class='count'>{n}</span> {_e(line)}</summary>{_e(line)}</details></li>"
              for line in board_warnings if line]
    for group in group_warnings(_figure_pairs(result, notes)):
        named = [m for m in group.models if m]
        what = f"{len(group.texts)} figure{'s' if len(group.texts) != 1 else ''}"
        detail = ", ".join(_name(m) for m in named) if named else "; ".join(_e(t) for t in group.texts)
        items.append(f"<li><details><summary><span class='count'>{len(group.texts)}</span> figure: "
                     f"{_e(group.text)}</summary>{what}"
                     + (f" of {detail}" if named else f": {detail}") + "</details></li>")
    if not items:
        return ""
    return ("<section class='warnings'><strong>Warnings</strong> (one line per kind, with how many; "
            "click a line for the details)<ul>" + "".join(items) + "</ul></section>")


def _summary_table(models, score_names, summary, shown, marked: bool, heading: str = "", link: str = "") -> str:
    """A summary table: a row per model of ``models`` (in their order), the AURC of every score of
    ``score_names``, the registry's ``summary`` columns; ``heading``: its board's, above it (models
    not evaluated on the same rows; ``link``: the anchor of its figures across models); ``marked``: the
    rows of the models ``shown`` in bold."""
    parts = [(f"<p class='board'><strong>{_e(heading)}</strong>"
              + (f" · <a href='#{link}'>its figures across models</a>" if link else "") + "</p>" if heading else "")
             + "<div class='scroll'><table class='summary'><thead><tr><th>model</th><th>K</th>"
             "<th>evaluated</th><th>fitted on</th><th>accuracy (%)</th>"]
    parts += [f"<th>AURC {_e(s)} (%)</th>" for s in score_names]
    parts += [f"<th>{_e(c.title or c.header)}{' (%)' if c.kind == 'pct' else ''}</th>" for c in summary]
    parts.append("</tr></thead><tbody>")
    for model in models:
        cells = "".join(_cell(model.scores.get(s, {}).get("aurc"), "pct") for s in score_names)
        cells += "".join(_cell(c.value(model.scores), c.kind) for c in summary)
        fitted = f"{model.n_val:,} ({_e(model.split)})" if model.n_val else _e(model.split)
        held = " (h)" if model.split == "holdout" else ""
        k = "-" if model.num_classes is None else model.num_classes
        row_class = " class='drawn'" if model.name in shown and marked else ""
        parts.append(f"<tr{row_class}>"
                     f"<td><a href='#{_anchor(model.name)}'>{_name(model.name)}</a></td>"
                     f"<td data-v='{'' if model.num_classes is None else model.num_classes}'>{k}</td>"
                     f"<td data-v='{model.n_eval}'>{model.n_eval:,}{held}</td>"
                     f"<td data-v='{model.n_val or 0}'>{fitted}</td>{_cell(model.accuracy, 'pct')}{cells}</tr>")
    parts.append("</tbody></table></div>")
    return "\n".join(p for p in parts if p)


def _board_anchor(label: str) -> str:
    from ..figures.render import board_tag

    return f"across-{board_tag(label)}"


def _not_drawn(rest, where: str) -> str:
    return (f"<details><summary>{len(rest)} models not drawn ({where}, in its order)</summary>"
            + ", ".join(f"<a href='#{_anchor(m.name)}'>{_name(m.name)}</a>" for m in rest) + "</details>")


def render_report(result, figures: Sequence | None = None, *, title: str = "selcal report",
                  plot_settings: dict[str, Any] | None = None, notes: Sequence[str] = (),
                  order: Sequence[str] | None = None, drawn: Sequence[str] | None = None,
                  board_warnings: Sequence[str] = ()) -> str:
    """The HTML text. ``figures``: :class:`selcal.figures.RenderedFigure` objects (PNG or SVG bytes);
    ``notes``: figures not drawn, with the reason (:func:`selcal.figures.render_figures`).

    The page opens on the answer: the title; one line per kind of warning with its count, the
    details folded (the models' warnings grouped by :mod:`selcal.report.warning_groups`,
    ``board_warnings`` such as the rows one, the figures not drawn); then the summary, one row per
    model in ``order`` (the leaderboard's; default :func:`selcal.report.leaderboard`'s), sortable by
    any column in the browser (a small inline script; without it the page reads the same): the
    evaluation rows (``(h)``: a random hold-out), accuracy, each score's AURC, and the ECE before (msp)
    and after (temp) temperature scaling with T; then (with calibrators) the best calibrator per
    model (:func:`selcal.report.calibrators.html_summary`). ``drawn``: the models shown with their
    figures (a zoo's best k and its baselines; None: every model); every other model's section is
    folded, its tables only. Model names and paths break at ``/ _ - .`` first
    (:func:`selcal.escape.html_name`); the settings table ends the page."""
    figures = list(figures or [])
    plot_settings = dict(plot_settings or {})
    by_name = {m.name: m for m in result.models}
    if order is None:
        from .leaderboard import leaderboard

        order = [row["model"] for row in leaderboard(result)]
    models = [by_name[name] for name in order if name in by_name]
    models += [m for m in result.models if m.name not in set(order)]
    shown = {m.name for m in models} if drawn is None else set(drawn)
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{_e(title)}</title><style>{PAGE_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f"<p class='meta'>{len(models)} model{'s' if len(models) != 1 else ''}, evaluated by "
        f"selcal {_e(__version__)}"
        + (f"; the {len(shown)} in bold are drawn in the figures, the others' sections are folded"
           if len(shown) < len(models) else "")
        + ". Fractions are shown as percent; the settings are at the <a href='#settings'>end</a>.</p>",
        _warnings(result, notes, board_warnings),
    ]
    from ..checks.common_ground import boards, split_line

    split = boards(result.models)  # models not evaluated on the same rows: a summary table per board
    intro = ("<h2 id='summary'>Summary</h2><p class='note'>In the leaderboard's order; click a column's header "
             "to sort by it. evaluated: evaluation rows, (h) a random hold-out of the file.</p>")
    if len(split) > 1:
        parts += [intro, f"<p>{_e(split_line(len(split)).capitalize())}.</p>"]
    # the AURC of every score some model has, then the summary columns the registry's entries add
    score_names = [s for s in REGISTRY if any(s in m.scores for m in models)]
    summary = [c for e in REGISTRY.values() if e.name in score_names for c in e.display.leaderboard
               if c.place in ("summary", "report") and c.kind in ("pct", "num")
               and any(c.value(m.scores) is not None for m in models)]
    summary.sort(key=lambda c: c.rank)
    for board in split:
        members = {id(m) for m in board.models}
        link = _board_anchor(board.label) if any(f.model is None and getattr(f, "board", "") == board.label
                                                  and board.label for f in figures) else ""
        table = _summary_table([m for m in models if id(m) in members], score_names, summary, shown,
                               len(shown) < len(models), board.heading, link)
        parts.append(table if len(split) > 1 else intro + table)
    # which calibrator is best per model on ECE, smooth ECE and AURC (when some model has calibrators)
    parts.append(calibrators.html_summary(
        models, _e, lambda m: f"<a href='#{_anchor(m.name)}-calibrators'>{_name(m.name)}</a>"))
    shared = [f for f in figures if f.model is None]
    parts.append(_contents(models, bool(shared)))
    tiled = _tiled(figures)  # per-model figures a figure across models shows: embedded once, there
    if shared and len(split) > 1 and any(getattr(f, "board", "") for f in shared):
        # a board's figures under its heading, after the figures of every board (a sweep's)
        parts.append("<h2 id='across-models'>Across models</h2>")
        common = [f for f in shared if not getattr(f, "board", "")]
        if common:
            parts.append("<div class='figures'>" + "".join(figure_html(f) for f in common) + "</div>")
        for board in split:
            own = [f for f in shared if getattr(f, "board", "") == board.label]
            if not own:
                continue
            parts.append(f"<h3 id='{_board_anchor(board.label)}'>{_e(board.heading)}</h3><div class='figures'>"
                         + "".join(figure_html(f) for f in own) + "</div>")
            members = {id(m) for m in board.models}
            rest = [m for m in models if id(m) in members and m.name not in shown]
            if rest:
                parts.append(_not_drawn(rest, "in its summary table"))
    elif shared:
        parts.append("<h2 id='across-models'>Across models</h2><div class='figures'>")
        parts += [figure_html(f) for f in shared]
        parts.append("</div>")
        if len(shown) < len(models):
            parts.append(_not_drawn([m for m in models if m.name not in shown], "in the summary"))
    for model in models:
        folded = model.name not in shown
        heading = f"<h2 id='{_anchor(model.name)}'>{_name(model.name)}</h2>"
        parts.append(f"<details class='model'><summary>{heading}</summary>" if folded else heading)
        parts.append(f"<p class='meta'><code>{_name(model.path)}</code>"
                     + (f" (validation: <code>{_name(model.extra['val_path'])}</code>)"
                        if model.extra.get("val_path") else "")
                     + (f" · K = {model.num_classes}" if model.num_classes is not None else " · no logits")
                     + f" · evaluated on {model.n_eval:,} rows"
                     + (" (a random hold-out)" if model.split == "holdout" else "")
                     + (f", fitted on {model.n_val:,} ({_e(model.split)})" if model.n_val else "")
                     + f" · accuracy {_format(model.accuracy, 'pct')}%"
                     + (f" · top-5 accuracy {_format(model.top5_accuracy, 'pct')}%"
                        if getattr(model, "top5_accuracy", None) is not None else "") + "</p>")
        parts.append(_metric_table(model))
        parts.append(calibrators.html(model, _e, (getattr(result, "bootstrap", None) or {}).get("confidence"),
                                      anchor=_anchor(model.name) + "-calibrators"))
        parts += [f"<p class='note'>{_e(n)}</p>" for n in _notes(model)]
        missing = model.extra.get("not_available")
        if missing and missing.get("scores"):
            parts.append(f"<p class='note'>not available {_e(missing.get('reason') or 'without logits')}: "
                         f"{_e(', '.join(missing['scores']))}</p>")
        parts += [f"<p class='warning'>warning: {_e(w)}</p>" for w in model.warnings]
        parts.append(_group_table(model))
        parts.append(_errors_tables(model))
        if not folded:
            own = [f for f in figures if f.model == model.name]
            drawn_html = [figure_html(f) for f in own if (model.name, f.kind) not in tiled]
            if drawn_html:
                parts.append("<div class='figures'>" + "".join(drawn_html) + "</div>")
            parts += [_tile_note(f, tiled[model.name, f.kind]) for f in own if (model.name, f.kind) in tiled]
        else:
            parts.append("<p class='note'>Its figures are not drawn in this report (a zoo draws the models in bold "
                         "in the summary); <code>--top</code> or <code>--baseline</code> draws more.</p></details>")
    parts.append("<h2 id='settings'>Settings</h2><div class='scroll'><table class='settings'><thead><tr>"
                 "<th>setting</th><th>value</th><th>default, where it differs</th></tr></thead><tbody>")
    parts += [f"<tr><td>{_e(k)}</td><td>{_e(v)}</td><td class='default'>{'' if d is None else _e(d)}</td></tr>"
              for k, v, d in settings_rows(result, plot_settings)]
    parts.append(f"</tbody></table></div>{_SORT_SCRIPT}</body></html>\n")
    return "\n".join(p for p in parts if p)


def zoo_selection(result, order: Sequence[str], top: int, baselines: Sequence[str] = (), of: str = "the leaderboard"
                  ) -> tuple[list[int] | None, str]:
    """The models a zoo's figures draw: the first ``top`` of ``order`` (the leaderboard's) and every
    model named in ``baselines`` (a name or a TEST path), as indices into ``result.models``, and the
    note their captions get; ``(None, "")`` when there are no more models than that (every model drawn).

    >>> from types import SimpleNamespace as M
    >>> zoo = M(models=[M(name=n, path=n + ".npz") for n in "abcde"])
    >>> zoo_selection(zoo, ["e", "d", "c", "b", "a"], 2, ["a.npz"])[0]
    [0, 3, 4]
    >>> zoo_selection(zoo, list("abcde"), 8)
    (None, '')
    """
    from ..errors import SelcalError

    names = [m.name for m in result.models]
    wanted: list[str] = []
    for baseline in baselines:
        match = [m.name for m in result.models if baseline in (m.name, m.path, str(m.path))]
        if not match:
            raise SelcalError(f"--baseline {baseline!r} names no model; the models are {', '.join(names[:5])}"
                              + (f" and {len(names) - 5} more" if len(names) > 5 else ""))
        wanted += match
    best = [name for name in order if name not in wanted][:max(top, 0)]
    chosen = set(best) | set(wanted)
    if len(chosen) >= len(names):
        return None, ""
    indices = [i for i, name in enumerate(names) if name in chosen]
    note = (f"Drawn: the {len(best)} best models of {of}"
            + (f" and the baseline{'s' if len(set(wanted)) > 1 else ''} {', '.join(dict.fromkeys(wanted))}"
               if wanted else "")
            + f"; the other {len(names) - len(chosen)} are in the summary (--top K draws more).")
    return indices, note


def zoo_boards(result, order: Sequence[str], top: int, baselines: Sequence[str] = ()) -> list:
    """The models each board's figures across models draw (:class:`selcal.figures.render.ZooBoard`):
    one board (the models are one group, :func:`selcal.checks.common_ground.boards`): that of
    :func:`zoo_selection`, label and heading empty; several: per board, its first ``top`` models in
    ``order`` and the ``baselines`` that belong to it (all of its models when they are no more).

    >>> from types import SimpleNamespace as M
    >>> fp = {"rows": 9, "labels": "0"}
    >>> zoo = M(models=[M(name=n, path=n, num_classes=k, extra={"fingerprint": {**fp, "labels": str(k)}})
    ...                 for n, k in zip("abcde", (3, 3, 3, 4, 4))])
    >>> [(b.label, b.indices, b.whole) for b in zoo_boards(zoo, list("edcba"), 1, ["a"])]
    [('K = 3', [0, 2], False), ('K = 4', [4], False)]
    >>> [(b.label, b.indices, b.whole) for b in zoo_boards(zoo, list("edcba"), 2)][1]
    ('K = 4', [3, 4], True)
    """
    from types import SimpleNamespace

    from ..checks.common_ground import boards
    from ..figures.render import ZooBoard

    indices, note = zoo_selection(result, order, top, baselines)  # (refuses a baseline that names no model)
    split = boards(result.models)
    if len(split) < 2:
        return [ZooBoard("", "", indices, note)]
    where = {id(m): i for i, m in enumerate(result.models)}
    made = []
    for board in split:
        members = list(board.models)
        names = {m.name for m in members}
        own = [b for b in baselines if any(b in (m.name, m.path, str(m.path)) for m in members)]
        chosen, note = zoo_selection(SimpleNamespace(models=members), [n for n in order if n in names], top, own,
                                     of="its board")
        everyone = [where[id(m)] for m in members]
        made.append(ZooBoard(board.label, board.heading,
                             everyone if chosen is None else [everyone[i] for i in chosen], note, chosen is None))
    return made


def drawn_of(zoo, count: int) -> tuple[list[int] | None, str]:
    """The models drawn (indices; None: every one of the ``count``) and the caption note of
    :func:`zoo_boards`' boards: one board's own; several boards' drawn models together, no note."""
    if len(zoo) == 1:
        return zoo[0].indices, zoo[0].note
    chosen = sorted({i for board in zoo for i in board.indices})
    return (None if len(chosen) >= count else chosen), ""


def write_report(result, path, figures: Sequence | None = None, *, ls_alpha=None, at_coverage: float = DEFAULT_AT_COVERAGE,
                 title: str | None = None, plot_settings: dict[str, Any] | None = None,
                 notes: list[str] | None = None, outputs: Outputs | None = None, kinds=None, workers: int = 1,
                 progress=None, top: int = DEFAULT_TOP, baselines: Sequence[str] = (), sort_by: str | None = None,
                 board_warnings: Sequence[str] = (), order: Sequence[str] | None = None) -> Path:
    """Write the page to ``path`` atomically (a missing parent folder is created).

    Without ``figures`` (or with figures in a format a browser cannot show inline, such as
    PDF) the figures are rendered here as PNG, with the same ``ls_alpha`` and ``at_coverage``.
    ``notes``: the figures not drawn (shown at the top); when the figures are rendered here,
    their notes are added to this list too, so that the caller can print them.
    ``outputs``: stage the page in that transaction, for the caller to commit with its other outputs.
    ``kinds``, ``workers``, ``progress``: of the figures rendered here (see
    :func:`selcal.figures.render_figures`). A zoo (more models than ``top``): the figures across
    models draw the ``top`` best models of the leaderboard (sorted by ``sort_by``) and the
    ``baselines`` (:func:`zoo_selection`), only those get their own figures, drawn, and every other
    model's section is folded; models not evaluated on the same rows: the figures across models
    once per board, each drawing that board's best (:func:`zoo_boards`). ``board_warnings``: warnings
    about the board as a whole (the rows one). ``order``: the models' names in the leaderboard's
    order, when the caller has it.
    """
    from ..figures import render_figures
    from .leaderboard import leaderboard

    order = list(order) if order is not None else [row["model"] for row in leaderboard(result, sort_by)]
    zoo = zoo_boards(result, order, top, baselines)
    chosen, note = drawn_of(zoo, len(result.models))
    drawn = None if chosen is None else [result.models[i].name for i in chosen]
    shown = list(notes or [])
    if figures is None or any(f.format not in _MIME or not f.data for f in figures):
        own: list[str] = []
        figures = list(render_figures(result, "png", ls_alpha=ls_alpha, at_coverage=at_coverage, notes=own,
                                      kinds=kinds, workers=workers, progress=progress, skip_tiled=True,
                                      overview=chosen, per_model=chosen, overview_note=note, boards=zoo))
        shown = own
        if notes is not None:
            notes.extend(n for n in own if n not in notes)
    elif drawn is not None:  # the figures of --plots: those of the models shown
        figures = [f for f in figures if f.model is None or f.model in drawn]
    settings = {"ls_alpha": ls_alpha, "at_coverage": at_coverage, "top": top,
                "baselines": ", ".join(baselines) or None}
    settings.update(plot_settings or {})
    text = render_report(result, figures, title=title or "selcal report", plot_settings=settings, notes=shown,
                         order=order, drawn=drawn, board_warnings=board_warnings)
    path = Path(path)
    if outputs is None:
        with Outputs() as own:
            own.write(path, text.encode("utf-8"), make_parents=True)
    else:
        outputs.write(path, text.encode("utf-8"), make_parents=True)
    return path
