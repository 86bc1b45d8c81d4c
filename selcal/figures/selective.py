"""Selective-classification figures: risk-coverage curves of one model (``rc``), of every
model (``overlay_rc``, Xia et al. 2024, fig. 1) and the errors accepted at a coverage,
stacked by group (``errors_by_group``, fig. 8 right)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .base import (NAME_LIMITS, all_scores, figure_width, legend_below, legend_columns, model_colours, mpl,
                   new_figure, on_axes, one_model, pct, score_colour, score_detail, score_label, score_style, user_text, wrap)
from .data import (DEFAULT_AT_COVERAGE, DEFAULT_MAX_POINTS, MAX_GROUP_BARS, RCPoints, errors_at_coverage_by_group,
                   rc_curve_points, shown_groups)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["plot_rc", "figure_rc", "figure_rc_overlay", "figure_errors_by_group", "OVERLAY_LEGEND_MODELS"]

OVERLAY_LEGEND_MODELS = 8  # more models: overlay_rc names them in one shared legend


def _rc_ylim(curves: list[RCPoints], floor_pct: float) -> float:
    """Top of the risk axis: the highest risk drawn at coverage >= 5% (above it the curve
    is ruled by a handful of samples), with a margin; never below ``floor_pct``."""
    top = floor_pct
    for points in curves:
        settled = points.coverage >= 5.0
        if settled.any():
            top = max(top, float(np.nanmax(points.risk[settled])))
    return max(top * 1.12, 0.5)


def _set_risk_axis(ax, top: float) -> None:
    """Risk from 0 to ``top``, with a sliver below 0 so that zero risk is not hidden by the axis."""
    ax.set_ylim(-0.012 * top, top)


def _draw_rc(ax, entries, error_rate_line=None):
    """entries: (points, label, colour, linestyle). Axes in percent. Returns the curves and
    then the error-rate line (if any), for the legend."""
    handles = []
    for points, label, colour, style in entries:
        # Above the axis spine, so that a stretch of zero risk stays visible.
        handles += ax.plot(points.coverage, points.risk, color=colour, linestyle=style, linewidth=1.4, label=label,
                           zorder=3)
    if error_rate_line is not None:
        handles.append(ax.axhline(100 * error_rate_line, color="0.45", linestyle=":", linewidth=1.0,
                                  label=f"error rate, no abstention ({100 * error_rate_line:.2f}%)",
                                  gid="error rate"))
    ax.set_xlim(0, 100)
    _set_risk_axis(ax, _rc_ylim([e[0] for e in entries], 100 * (error_rate_line or 0)))
    ax.set_xlabel("coverage (% of samples accepted)")
    ax.set_ylabel("risk (% errors among accepted)")
    return handles


def _rc_on(ax, model, scores: Sequence[str] | None, max_points: int | None) -> list:
    """The risk-coverage curves of ``scores`` (every score with a curve: None) of one model on ``ax``,
    AURC in their labels, and the error rate with no abstention; returns the legend's handles."""
    names = list(model.curves) if scores is None else [name for name in model.curves if name in scores]
    entries = [
        (rc_curve_points(model.curves[name], max_points),
         f"{score_label(name, model)}: AURC {pct(model.scores[name].get('aurc'))}",
         score_colour(name), score_style(name))
        for name in names
    ]
    return _draw_rc(ax, entries, error_rate_line=model.error)


def plot_rc(model, *, scores: Sequence[str] | None = None, ax: Axes | None = None,
            max_points: int | None = DEFAULT_MAX_POINTS) -> Axes | Figure:
    """Risk-coverage curves of a model's scores, drawn on ``ax`` (the ``rc`` figure's curves).

    Parameters
    ----------
    model : ModelResult or EvaluationResult of one model
        ``result.models[i]``, ``result["name"]``, or the result of ``evaluate_arrays``.
    scores : list of str, optional
        The scores drawn (default: every score of the model).
    ax : matplotlib Axes, optional
        Where to draw: your axes (selcal changes nothing else of its figure, nor any global
        matplotlib setting, and leaves its style alone). None: a new Figure in selcal's style.
    max_points : int or None
        Vertices above which a curve is thinned without a visible change (None: never).

    Returns
    -------
    The Axes drawn on (``ax``), or the new matplotlib Figure when ``ax`` is None (not
    registered with pyplot: show it in a notebook by leaving it last in a cell, or ``savefig``).

    Examples
    --------
    >>> from matplotlib.figure import Figure
    >>> import selcal
    >>> result = selcal.evaluate_arrays([[2.0, 0.0], [0.0, 1.0], [3.0, 1.0]], [0, 1, 1], scores="msp,max_logit")
    >>> axes = Figure().subplots(1, 2)
    >>> plot_rc(result, ax=axes[0]) is axes[0], len(axes[0].get_lines())
    (True, 3)
    """
    def draw(target) -> None:
        target.legend(handles=_rc_on(target, one_model(model), scores, max_points), fontsize="small")

    return on_axes(ax, draw, size=(6.0, 4.9))


def figure_rc(model, *, max_points: int | None = DEFAULT_MAX_POINTS):
    """Risk-coverage curves of every score of one model; AURC in the legend."""
    figure = new_figure(6.0, 4.9)
    ax = figure.add_subplot()
    handles = _rc_on(ax, model, None, max_points)
    ax.set_title(wrap(f"{user_text(model.name, NAME_LIMITS['title'])}: risk–coverage\nerror {pct(model.error)} on "
                      f"{model.n_eval:,} samples", 0.9 * figure_width(figure)))
    legend_below(ax, handles=handles)
    return figure


def figure_rc_overlay(models, scores: Sequence[str] | None = None, *, max_points: int | None = DEFAULT_MAX_POINTS):
    """One panel per score, one curve per model: the "vary only alpha" figure of Xia et al., fig. 1."""
    if scores is None:
        scores = all_scores(models, every=False)
    scores = list(scores)
    columns = 1 if len(scores) == 1 else 2
    rows = math.ceil(len(scores) / columns)
    # Up to OVERLAY_LEGEND_MODELS models, each panel's legend gives every model's AURC and error
    # rate; beyond, one shared legend names the models (their numbers are in the tables).
    per_panel = len(models) <= OVERLAY_LEGEND_MODELS
    legend_height = 0.22 * len(models) + 0.3 if per_panel else 0.0
    shared_height = 0.0 if per_panel else 0.2 * math.ceil(len(models) / 4) + 0.3
    figure = new_figure(5.6 * columns, rows * (3.9 + legend_height) + shared_height)
    axes = figure.subplots(rows, columns, squeeze=False, sharex=True, sharey=True)
    colours = model_colours(len(models))
    all_points = []
    for ax, score in zip(axes.flat, scores):
        entries = []
        for model, colour in zip(models, colours):
            if score not in model.curves:
                continue
            points = rc_curve_points(model.curves[score], max_points)
            all_points.append(points)
            # The numbers on a second line: a long name and its numbers side by side would be
            # wider than the panel.
            label = (f"{user_text(model.name, NAME_LIMITS['legend'])}\n{score_detail(score, model).strip()} "
                     f"AURC {pct(model.scores[score].get('aurc'))}, error {pct(model.error)}".replace("\n ", "\n")
                     if per_panel else user_text(model.name, NAME_LIMITS['legend']))
            entries.append((points, label, colour, "-"))
        handles = _draw_rc(ax, entries)
        ax.set_title(score_label(score))
        ax.tick_params(labelbottom=True, labelleft=True)
        if per_panel:
            legend_below(ax, handles=handles)
    for ax in list(axes.flat)[len(scores):]:
        ax.set_visible(False)
    top = _rc_ylim(all_points, 100 * max(m.error for m in models))
    for ax in axes.flat:
        _set_risk_axis(ax, top)
    if not per_panel:
        handles = {}
        for ax in axes.flat:
            for handle in ax.lines:
                if handle.get_gid() != "error rate":
                    handles.setdefault(handle.get_label(), handle)
        figure.legend(list(handles.values()), list(handles), loc="outside lower center",
                      ncol=legend_columns(handles, figure_width(figure), 4, 7.5), fontsize=7.5)
    figure.suptitle("risk–coverage by score, one curve per model", fontsize=11)
    return figure


def figure_errors_by_group(models, coverage: float = DEFAULT_AT_COVERAGE, scores: Sequence[str] | None = None):
    """Errors accepted at a coverage, stacked by group, one bar per model and a panel per score.

    With more than ``MAX_GROUP_BARS + 1`` groups, the groups of :func:`shown_groups` are
    drawn and the rest is one grey "other (N groups)" bar on top of each stack.
    """
    models = [m for m in models if m.groups is not None]
    if not models:
        return None
    if scores is None:
        scores = all_scores(models, every=True)
    scores = list(scores)
    stacks = {score: [errors_at_coverage_by_group(m.curves[score], m.score_values[score], m.rows.correct, m.groups,
                                                  coverage) for m in models] for score in scores}
    group_names, others = shown_groups([s for per_score in stacks.values() for s in per_score])
    matplotlib, _, _ = mpl()
    cmap = matplotlib.colormaps["Set2" if len(group_names) <= 8 else "tab10"]
    colours = {g: cmap(i % cmap.N) for i, g in enumerate(group_names)}
    other_label = f"other ({len(others):,} groups)"
    many = len(models) > 8
    # Names side by side under their bars only when they fit: two models with short names. Slanted
    # names reach left of their panel: a panel then needs room for them and its title.
    slanted = len(models) > 2 or max(len(user_text(m.name, NAME_LIMITS['tick'])) for m in models) > 14
    width = min(max(4.4 if slanted and not many else 3.2, 0.9 + 0.55 * len(models)), 8.0)
    columns = len(scores) if width * len(scores) <= 16 else max(1, int(16 // width))
    rows = math.ceil(len(scores) / columns)
    figure = new_figure(width * columns, (4.8 + (0.9 if many else 0.0)) * rows)
    axes = list(figure.subplots(rows, columns, squeeze=False, sharey=True).flat)
    for ax in axes[len(scores):]:
        ax.set_visible(False)
    axes = axes[:len(scores)]
    legend: dict[str, Any] = {}
    for ax, score in zip(axes, scores):
        x = np.arange(len(models))
        bottom = np.zeros(len(models))
        layers = [(user_text(g, NAME_LIMITS["legend"]), colours[g], [s.groups.get(g, 0) for s in stacks[score]]) for g in group_names]
        if others:
            layers.append((other_label, "0.72",
                           [sum(s.groups.get(g, 0) for g in others) for s in stacks[score]]))
        for label, colour, counts in layers:
            heights = np.array(counts, dtype=np.float64)
            bars = ax.bar(x, heights, bottom=bottom, color=colour, edgecolor="white", linewidth=0.6, label=label)
            legend.setdefault(label, bars)
            bottom += heights
        for xi, s in zip(x, stacks[score]):
            ax.annotate(f"{s.errors}" if many else f"{s.errors} of {s.accepted}", (xi, s.errors), xytext=(0, 2),
                        textcoords="offset points", ha="center", va="bottom", fontsize=6.5 if many else 7.5)
        ax.set_xticks(x, [user_text(m.name, NAME_LIMITS["tick"]) for m in models], rotation=90 if many else (30 if slanted else 0),
                      ha="center" if many or not slanted else "right", fontsize=7 if many else None)
        ax.set_title(score_label(score))
        ax.grid(axis="x", visible=False)
    axes[0].set_ylabel(f"errors among the accepted\nat {100 * coverage:g}% coverage")
    top = max(1.0, max(ax.get_ylim()[1] for ax in axes))
    axes[0].set_ylim(0, top * 1.1)
    title = "group" if not others else f"group ({MAX_GROUP_BARS} with the most errors drawn; the rest as other)"
    # Explicit handles and labels: automatic collection would drop a group named "_x".
    figure.legend(list(legend.values()), list(legend), loc="outside lower center",
                  ncol=legend_columns(legend, figure_width(figure)),
                  title=title)
    figure.suptitle(f"errors accepted at {100 * coverage:g}% coverage, by group (label: errors"
                    + ("" if many else " of accepted") + ")", fontsize=11)
    return figure


