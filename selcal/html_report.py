"""One self-contained HTML page for an :class:`~selcal.report.EvaluationResult`.

The page holds the settings the numbers depend on, one metric table per model (the rows
of the terminal table, per-group tables when rows have groups), and every figure of
:mod:`selcal.plots` embedded as a ``data:`` URI (PNG, or SVG when the figures were
rendered as SVG), so it can be opened offline, mailed, or attached to a pull request.
Nothing is measured here: every number is read from the result.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import __version__
from .io import atomic_write
from .report import metric_sections

__all__ = ["render_report", "write_report"]

_MIME = {"png": "image/png", "svg": "image/svg+xml"}
_WIDE_KINDS = ("reliability",)  # two panels side by side: a whole row of the figure grid

_CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1a1a1a; margin: 0 auto;
       max-width: 1180px; padding: 1.2em 1.6em 3em; }
h1 { font-size: 1.55em; margin-bottom: 0.2em; } h2 { font-size: 1.25em; margin-top: 2.2em;
       border-bottom: 1px solid #ddd; padding-bottom: 0.2em; } h3 { font-size: 1.05em; margin-top: 1.6em; }
p.meta, p.note { color: #555; margin: 0.3em 0; }
table { border-collapse: collapse; margin: 0.6em 0 1em; font-variant-numeric: tabular-nums; }
th, td { padding: 0.22em 0.75em; border-bottom: 1px solid #e4e4e4; text-align: right; }
th:first-child, td:first-child { text-align: left; }
thead th { border-bottom: 2px solid #bbb; }
tr.section td { border-top: 2px solid #bbb; }
table.settings td { text-align: left; font-family: ui-monospace, monospace; font-size: 0.92em; }
.warning { color: #8a5300; }
.figures { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 0 1.4em;
            grid-auto-flow: dense; }
figure { margin: 1em 0 1.6em; } figure.wide { grid-column: 1 / -1; max-width: 980px; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #555; font-size: 0.92em; }
nav ul { columns: 2; } code { font-size: 0.95em; }
"""


def _format(value, kind: str) -> str:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "–"
    return f"{100 * value:.2f}" if kind == "pct" else f"{value:.4f}"


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _anchor(name: str) -> str:
    return "model-" + "".join(c if c.isalnum() else "-" for c in name)


def _metric_table(model) -> str:
    out = ["<table class='metrics'><thead><tr><th>metric</th>"]
    out += [f"<th>{_e(n)}</th>" for n in model.scores]
    out.append("</tr></thead><tbody>")
    for index, section in enumerate(metric_sections(model)):
        for row, (label, kind, values) in enumerate(section):
            css = " class='section'" if index and row == 0 else ""
            out.append(f"<tr{css}><td>{_e(label)}</td>" + "".join(f"<td>{_format(v, kind)}</td>" for v in values)
                       + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _group_table(model) -> str:
    groups = model.extra.get("groups")
    if not groups:
        return ""
    names = [n for n in model.scores if any(n in g.get("scores", {}) for g in groups.values())]
    out = ["<h3>By group</h3><table class='groups'><thead><tr><th>group</th><th>rows</th><th>accuracy (%)</th>"]
    out += [f"<th>AURC {_e(n)} (%)</th>" for n in names]
    out.append("</tr></thead><tbody>")
    for group, values in groups.items():
        cells = "".join(f"<td>{_format(values['scores'].get(n, {}).get('aurc'), 'pct')}</td>" for n in names)
        out.append(f"<tr><td>{_e(group)}</td><td>{values['n_eval']:,}</td>"
                   f"<td>{_format(values['accuracy'], 'pct')}</td>{cells}</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _notes(model) -> list[str]:
    notes = []
    if "temp" in model.scores and "temperature" in model.scores["temp"]:
        t = model.scores["temp"]
        notes.append(f"temp: T = {t['temperature']:.4f} (validation NLL {_format(t.get('val_nll_before'), 'num')} "
                     f"→ {_format(t.get('val_nll_after'), 'num')})")
    if "pnorm" in model.scores and "p" in model.scores["pnorm"]:
        p = model.scores["pnorm"]
        centre = "centred" if p.get("center", True) else "uncentred"
        notes.append(f"pnorm: p = {p['p']} ({centre}, by validation {str(p.get('objective', 'aurc')).upper()})"
                     + ("; falls back to MSP, which is no worse on validation" if p.get("fallback") else ""))
    return notes


def _figure_html(figure) -> str:
    mime = _MIME.get(figure.format)
    if mime is None or not figure.data:
        return ""
    data = base64.b64encode(figure.data).decode("ascii")
    alt = f"{figure.kind} {figure.model or 'all models'}"
    wide = " class='wide'" if figure.kind in _WIDE_KINDS else ""
    return (f"<figure{wide}><img alt='{_e(alt)}' src='data:{mime};base64,{data}'>"
            f"<figcaption>{_e(figure.caption)}</figcaption></figure>")


def _settings_rows(result, plot_settings: dict[str, Any]) -> list[tuple[str, str]]:
    options = result.to_dict().get("options", {})
    rows = [("selcal", __version__)]
    for key, value in options.items():
        rows.append((key, ", ".join(str(v) for v in value) if isinstance(value, list) else str(value)))
    for key, value in plot_settings.items():
        if value is not None:
            rows.append((key, str(value)))
    return rows


def render_report(result, figures: Sequence | None = None, *, title: str = "selcal report",
                  plot_settings: dict[str, Any] | None = None) -> str:
    """The HTML text. ``figures``: :class:`selcal.plots.RenderedFigure` objects (PNG or SVG bytes)."""
    figures = list(figures or [])
    plot_settings = dict(plot_settings or {})
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f"<p class='meta'>{len(result.models)} model{'s' if len(result.models) != 1 else ''}, evaluated by "
        f"selcal {_e(__version__)}. Fractions are shown as percent; definitions follow CONVENTIONS.md.</p>",
    ]
    # Summary across models.
    parts.append("<h2>Summary</h2><table class='summary'><thead><tr><th>model</th><th>K</th><th>evaluated</th>"
                 "<th>fitted on</th><th>accuracy (%)</th>")
    score_names = [s for s in ("msp", "max_logit", "pnorm", "temp") if any(s in m.scores for m in result.models)]
    parts += [f"<th>AURC {_e(s)} (%)</th>" for s in score_names]
    parts.append("</tr></thead><tbody>")
    for model in result.models:
        cells = "".join(f"<td>{_format(model.scores.get(s, {}).get('aurc'), 'pct')}</td>" for s in score_names)
        fitted = f"{model.n_val:,} ({_e(model.split)})" if model.n_val else _e(model.split)
        parts.append(f"<tr><td><a href='#{_anchor(model.name)}'>{_e(model.name)}</a></td>"
                     f"<td>{model.num_classes}</td><td>{model.n_eval:,}</td><td>{fitted}</td>"
                     f"<td>{_format(model.accuracy, 'pct')}</td>{cells}</tr>")
    parts.append("</tbody></table>")
    shared = [f for f in figures if f.model is None]
    if shared:
        parts.append("<h2>Across models</h2>")
        parts += [_figure_html(f) for f in shared]
    for model in result.models:
        parts.append(f"<h2 id='{_anchor(model.name)}'>{_e(model.name)}</h2>")
        parts.append(f"<p class='meta'><code>{_e(model.path)}</code>"
                     + (f" (validation: <code>{_e(model.extra['val_path'])}</code>)"
                        if model.extra.get("val_path") else "")
                     + f" · K = {model.num_classes} · evaluated on {model.n_eval:,} rows"
                     + (f", fitted on {model.n_val:,} ({_e(model.split)})" if model.n_val else "")
                     + f" · accuracy {_format(model.accuracy, 'pct')}%</p>")
        parts.append(_metric_table(model))
        parts += [f"<p class='note'>{_e(n)}</p>" for n in _notes(model)]
        parts += [f"<p class='warning'>warning: {_e(w)}</p>" for w in model.warnings]
        parts.append(_group_table(model))
        own = [_figure_html(f) for f in figures if f.model == model.name]
        if own:
            parts.append("<div class='figures'>" + "".join(own) + "</div>")
    parts.append("<h2>Settings</h2><table class='settings'><tbody>")
    parts += [f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in _settings_rows(result, plot_settings)]
    parts.append("</tbody></table></body></html>\n")
    return "\n".join(p for p in parts if p)


def write_report(result, path, figures: Sequence | None = None, *, ls_alpha=None, at_coverage: float = 0.1,
                 title: str | None = None, plot_settings: dict[str, Any] | None = None) -> Path:
    """Write the page to ``path`` atomically.

    Without ``figures`` (or with figures in a format a browser cannot show inline, such as
    PDF) the figures are rendered here as PNG, with the same ``ls_alpha`` and ``at_coverage``.
    """
    from . import plots

    if figures is None or any(f.format not in _MIME or not f.data for f in figures):
        figures = list(plots.render_figures(result, "png", ls_alpha=ls_alpha, at_coverage=at_coverage))
    settings = {"ls_alpha": ls_alpha, "at_coverage": at_coverage}
    settings.update(plot_settings or {})
    text = render_report(result, figures, title=title or "selcal report", plot_settings=settings)
    path = Path(path)
    with atomic_write(path, "wb") as out:
        out.write(text.encode("utf-8"))
    return path
