"""The calibrators side by side: per model, msp, temp and every post-hoc calibrator on
accuracy, ECE, smooth ECE and AURC, each with its bootstrap interval, so a reader sees which
calibrator helps which axis (CONVENTIONS.md, "Post-hoc calibrators").

The leaderboard (terminal, Markdown, CSV) and the HTML report show it for every model that has
a post-hoc calibrator among its scores. Nothing is measured here: every number is read from the
model's scores (and their ``ci``); which scores are shown is asked of the registry (the members
of the ``calibrators`` group), how each metric is named and which way is better of the catalog.
"""

from __future__ import annotations

import math
import textwrap
from typing import Any

from ..metrics import catalog
from ..scores import REGISTRY
from ..options import DEFAULT_CONFIDENCE

__all__ = ["GROUP", "AXES", "MAX_LINE", "shown_scores", "model_rows", "board_entry", "best_per_axis", "render_terminal",
           "say", "markdown", "csv_columns", "html", "html_summary"]

GROUP = "calibrators"  # the registry's group whose members are compared
AXES = ("ece", "smece", "aurc")  # catalog keys, in the order shown (after accuracy)
BEST_MARK = "*"
MAX_LINE = 100  # the longest line printed (a CI log)


def shown_scores(scores: dict) -> list[str]:
    """The members of the calibrators group among ``scores`` (in their order) when one of them is
    a post-hoc calibrator (a member whose probabilities make a classifier of its own); else []."""
    members = [name for name in scores if name in REGISTRY and GROUP in REGISTRY[name].groups]
    return members if any(REGISTRY[name].own_predictions for name in members) else []


def _interval(ci) -> list[float] | None:
    if not isinstance(ci, (list, tuple)) or len(ci) != 2 or any(v is None for v in ci):
        return None
    return [float(ci[0]), float(ci[1])]


def model_rows(model) -> list[dict[str, Any]]:
    """One dict per shown score of ``model``: ``score``, ``accuracy`` (its own top label's for a
    calibrator, the model's otherwise), and per axis its value, ``AXIS_ci`` ([low, high] or None) and
    ``AXIS_best`` (True for the best value of the column by the catalog's direction, at the precision
    shown: percent with two decimals, ties all best).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> scores = {"msp": {"ece": 0.04, "smece": 0.04, "aurc": 0.01},
    ...           "vector": {"ece": 0.01, "smece": 0.02, "aurc": 0.012, "accuracy": 0.9}}
    >>> rows = model_rows(SimpleNamespace(scores=scores, accuracy=0.91, extra={}))
    >>> [(r["score"], r["accuracy"], r["ece_best"], r["aurc_best"]) for r in rows]
    [('msp', 0.91, False, True), ('vector', 0.9, True, False)]
    """
    names = shown_scores(model.scores)
    model_ci = (model.extra or {}).get("ci") or {}
    rows = []
    for name in names:
        metrics = model.scores[name]
        ci = metrics.get("ci") if isinstance(metrics.get("ci"), dict) else {}
        own = REGISTRY[name].own_predictions and metrics.get("accuracy") is not None
        row = {"score": name, "accuracy": metrics["accuracy"] if own else model.accuracy,
               "accuracy_ci": _interval(ci.get("accuracy") if own else model_ci.get("accuracy"))}
        for key in AXES:
            value = metrics.get(key)
            row[key] = None if value is None or not math.isfinite(value) else float(value)
            row[f"{key}_ci"] = _interval(ci.get(key))
        rows.append(row)
    for key in ("accuracy", *AXES):  # the best at the precision shown (percent, two decimals): ties all marked
        shown = {id(row): round(100 * row[key], 2) for row in rows if row[key] is not None}
        best = (min if catalog.better(key) == "lower" else max)(shown.values()) if shown else None
        for row in rows:
            row[f"{key}_best"] = best is not None and shown.get(id(row)) == best
    return rows


def best_per_axis(rows: list[dict[str, Any]]) -> dict[str, tuple[list[str], float | None]]:
    """Per axis (ECE, smooth ECE, AURC): the scores marked best in ``rows`` (:func:`model_rows`; ties
    all, in the rows' order) and their value (the first's; None when no score has one).

    >>> rows = [{"score": "msp", **{k: 0.02 for k in AXES}, **{f"{k}_best": k == "aurc" for k in AXES}},
    ...         {"score": "vector", **{k: 0.01 for k in AXES}, **{f"{k}_best": k != "aurc" for k in AXES}}]
    >>> best_per_axis(rows)
    {'ece': (['vector'], 0.01), 'smece': (['vector'], 0.01), 'aurc': (['msp'], 0.02)}
    """
    out = {}
    for key in AXES:
        best = [row for row in rows if row[f"{key}_best"]]
        out[key] = ([row["score"] for row in best], best[0][key] if best else None)
    return out


def board_entry(model, confidence: float | None = None) -> dict[str, Any] | None:
    """What a leaderboard row keeps of the comparison (its key ``calibrators``): ``{"confidence":
    the intervals' level or None, "rows": model_rows(model)}``; None when the model has no calibrator."""
    rows = model_rows(model)
    return {"confidence": confidence, "rows": rows} if rows else None


def _level(views) -> str:
    confidence = next((v["confidence"] for v in views if v.get("confidence")), DEFAULT_CONFIDENCE)
    return f"{100 * confidence:g}%"


def _has_intervals(rows) -> bool:
    return any(r[f"{k}_ci"] is not None for r in rows for k in AXES)


def _pct(value) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def _ci_text(ci) -> str:
    return "" if ci is None else f"[{100 * ci[0]:.2f}, {100 * ci[1]:.2f}]"


def _headers() -> list[str]:
    return ["score", catalog.name("accuracy"), *(catalog.name(key) for key in AXES)]


def _cells_text(entry: dict, key: str) -> str:
    """A value in percent, the best of its column marked, its interval on a second line."""
    text = _pct(entry[key]) + (f" {BEST_MARK}" if entry[f"{key}_best"] else "  ")
    return text + ("\n" + _ci_text(entry[f"{key}_ci"]) + "  " if entry[f"{key}_ci"] is not None else "")


def render_terminal(board: list[dict[str, Any]], console) -> None:
    """Per model with calibrators (the leaderboard rows' ``calibrators``), a table: a row per score,
    accuracy, ECE, smooth ECE and AURC in percent with the interval on a second line, the best of
    each column marked. Every line fits the console (at most 100 columns in a CI log): a console too
    narrow for the table gets one line per score instead, wrapped, never a value cut."""
    from rich.table import Table

    from ..escape import printable, terminal
    from .table import measure_width

    views = [(row["model"], row["calibrators"]) for row in board if row.get("calibrators")]
    if not views:
        return
    for name, view in views:
        console.print()
        table = Table(show_edge=False, pad_edge=False)
        for index, header in enumerate(_headers()):
            table.add_column(terminal(header), justify="left" if index == 0 else "right", no_wrap=True)
        for entry in view["rows"]:
            table.add_row(terminal(entry["score"]), *(_cells_text(entry, key) for key in ("accuracy", *AXES)))
        say(console, f"calibrators of {printable(name)}")
        if measure_width(console, table) <= min(console.width, MAX_LINE):
            console.print(table)
        else:  # too narrow for the table: a line per score, wrapped, never a value cut
            for entry in view["rows"]:
                say(console, printable(entry["score"]) + ": " + ", ".join(
                    f"{catalog.name(key)} {_pct(entry[key])}"
                    + (f" {_ci_text(entry[f'{key}_ci'])}".replace(" ", "\u00a0") if entry[f"{key}_ci"] else "")
                    + (f" {BEST_MARK}" if entry[f"{key}_best"] else "") for key in ("accuracy", *AXES)), "  ")
    say(console, _legend([v for _, v in views], BEST_MARK + " the best of the model's column"))


def say(console, text: str, indent: str = "") -> None:
    """A line of plain text (no markup: user text in it escaped by :func:`selcal.escape.printable`)
    wrapped at word boundaries to the console's width, at most :data:`MAX_LINE` columns,
    continuations indented."""
    from rich.cells import cell_len, get_character_cell_size

    width = min(console.width, MAX_LINE)
    for line in textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent + "  ",
                              break_on_hyphens=False):
        while cell_len(line) > width:  # wide characters (two columns each): textwrap counts them as one
            end, used = 0, 0
            while used + get_character_cell_size(line[end]) <= width:
                used += get_character_cell_size(line[end])
                end += 1
            console.print(line[:end].replace("\u00a0", " "), soft_wrap=True, markup=False, highlight=False)
            line = indent + "  " + line[end:]
        console.print(line.replace("\u00a0", " "), soft_wrap=True, markup=False, highlight=False)  # (kept whole)


def _legend(views, best: str) -> str:
    intervals = any(_has_intervals(v["rows"]) for v in views)
    where = f"{_level(views)} bootstrap interval with each value" if intervals else \
        "no intervals (--bootstrap B gives them)"
    return (f"in %: accuracy (a calibrator's from its own top label), {', '.join(catalog.name(k) for k in AXES)}; "
            f"{where}; {best}")


def markdown(board: list[dict[str, Any]]) -> str:
    """The same comparison as one GitHub-flavoured Markdown table (the model named on its first
    row; the interval in brackets after each value; the best of each model's column in bold);
    '' when no model has calibrators."""
    from ..escape import markdown_text as md

    views = [(row["model"], row["calibrators"]) for row in board if row.get("calibrators")]
    if not views:
        return ""
    lines = ["| model | " + " | ".join(md(h) for h in _headers()) + " |", "|---|---|" + "---:|" * (1 + len(AXES))]
    for name, view in views:
        for index, entry in enumerate(view["rows"]):
            cells = [md(name) if index == 0 else "", md(entry["score"])]
            for key in ("accuracy", *AXES):
                text = f"**{_pct(entry[key])}**" if entry[f"{key}_best"] else _pct(entry[key])
                cells.append(text + (f" {_ci_text(entry[f'{key}_ci'])}" if entry[f"{key}_ci"] else ""))
            lines.append("| " + " | ".join(cells) + " |")
    return ("**Calibrators**\n\n" + "\n".join(lines) + "\n\n"
            + _legend([v for _, v in views], "bold: the best of the model's column") + "\n")


def csv_columns(board: list[dict[str, Any]]) -> dict[str, list]:
    """Columns for the leaderboard CSV (fractions at full precision, a value per model, None where
    the model lacks it): ``SCORE.KEY``, ``SCORE.KEY_low`` and ``SCORE.KEY_high`` for accuracy and
    every axis of every compared score; empty when no model has calibrators."""
    entries = [{e["score"]: e for e in (row.get("calibrators") or {}).get("rows", ())} for row in board]
    names = list(dict.fromkeys(name for entry in entries for name in entry))
    columns: dict[str, list] = {}
    for name in names:
        for key in ("accuracy", *AXES):
            found = [entry.get(name) for entry in entries]
            columns[f"{name}.{key}"] = [None if e is None else e[key] for e in found]
            columns[f"{name}.{key}_low"] = [None if e is None or e[f"{key}_ci"] is None else e[f"{key}_ci"][0]
                                            for e in found]
            columns[f"{name}.{key}_high"] = [None if e is None or e[f"{key}_ci"] is None else e[f"{key}_ci"][1]
                                             for e in found]
    return columns


def html(model, escape, confidence: float | None = None, anchor: str | None = None) -> str:
    """The model's calibrators table for the HTML report ('' without calibrators): a row per score,
    the interval under each value, the best of each column in bold. ``escape``: the page's escape;
    ``anchor``: the id of its heading."""
    view = board_entry(model, confidence)
    if view is None:
        return ""
    heading = "<h3>" if anchor is None else f"<h3 id='{escape(anchor)}'>"
    out = [heading + "Calibrators</h3><p class='note'>Which calibrator helps which axis. "
           + escape(_legend([view], "bold: the best of the column")) + ".</p>"
           "<div class='scroll'><table class='calibrators'><thead><tr>"]
    out += [f"<th>{escape(h)}{'' if i == 0 else ' (%)'}</th>" for i, h in enumerate(_headers())]
    out.append("</tr></thead><tbody>")
    for entry in view["rows"]:
        cells = [f"<td>{escape(entry['score'])}</td>"]
        for key in ("accuracy", *AXES):
            value = "–" if entry[key] is None else _pct(entry[key])
            value = f"<strong>{value}</strong>" if entry[f"{key}_best"] else value
            ci = f"<br><small>{_ci_text(entry[f'{key}_ci'])}</small>" if entry[f"{key}_ci"] else ""
            cells.append(f"<td>{value}{ci}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def html_summary(models, escape, link) -> str:
    """The calibrators of every model at a glance, for the summary at the top of the HTML report
    ('' when no model has a post-hoc calibrator): a row per model with calibrators and, per axis
    (ECE, smooth ECE, AURC), the best of its compared scores (ties all named) and its value in
    percent; under the table, per axis, for how many models each score is the best. Seven columns,
    so that it stays whole in a narrow window whatever the number of calibrators; the values with
    their intervals are in each model's own table. ``escape``: the page's escape; ``link(model)``:
    the HTML of the model's name, linked to its calibrators table."""
    views = [(model, rows) for model in models for rows in [model_rows(model)] if rows]
    if not views:
        return ""
    left_out = len(models) - len(views)
    tally: dict[str, dict[str, int]] = {key: {} for key in AXES}
    body = []
    for model, rows in views:
        cells = []
        for key, (names, value) in best_per_axis(rows).items():
            for name in names:
                tally[key][name] = tally[key].get(name, 0) + 1
            cells.append(f"<td class='best'>{escape(', '.join(names)) or '–'}</td><td>{_pct(value) if names else '–'}</td>")
        body.append(f"<tr><td>{link(model)}</td>{''.join(cells)}</tr>")
    note = ("The best of each model's calibrators (msp, temp and the post-hoc calibrators evaluated) on each "
            "axis, at the precision shown (ties all named); a model's name leads to all its values, with their "
            "intervals when there are." + (f" {left_out} model{'s' if left_out != 1 else ''} without a post-hoc "
                                           "calibrator not listed." if left_out else ""))
    order = list(dict.fromkeys(row["score"] for _, rows in views for row in rows))
    counts = "; ".join(f"{catalog.name(key)}: " + ", ".join(
        f"{name} {count}" for name, count in sorted(tally[key].items(), key=lambda item: (-item[1], order.index(item[0]))))
        for key in AXES if tally[key])
    out = ["<h3 id='calibrators-summary'>Calibrators: the best per model</h3>",
           f"<p class='note'>{escape(note)}</p>",
           "<div class='scroll'><table class='calibrators-best'><thead><tr><th>model</th>"]
    out += [f"<th colspan='2'>best on {escape(catalog.name(key))} (%)</th>" for key in AXES]
    out.append("</tr></thead><tbody>")
    out += body
    out.append("</tbody></table></div>")
    if counts:
        out.append(f"<p class='note'>Best for how many models: {escape(counts)}.</p>")
    return "".join(out)
