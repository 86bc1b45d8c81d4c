"""Headline metrics against a value swept across runs (``sweep_NAME``): one panel per
metric, one line per score. The data come from :func:`selcal.metrics.diagnostics.sweep_series`."""

from __future__ import annotations

import numpy as np

from ..metrics import diagnostics
from ..scores import REGISTRY
from .base import NAME_LIMITS, SCORE_STYLES, figure_width, new_figure, score_colour, score_label, user_text, wrap

__all__ = ["figure_sweep", "figure_sweep_of"]


def figure_sweep(series: diagnostics.SweepSeries):
    """One panel per headline metric against the swept value, one line per score, points
    marked; the line joins the per-value means when several models share a value."""
    panels = series.panels
    columns = 3 if len(panels) > 4 else 2
    rows = -(-len(panels) // columns)
    figure = new_figure(4.2 * columns, 3.2 * rows + 0.6)
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    values = np.unique(series.x)
    for ax, panel in zip(axes, panels):
        for label, y in panel.lines.items():
            score = panel.scores.get(label, label)  # a line of a score: its colour, as in every figure
            colour = score_colour(score) if score in REGISTRY else "0.2"
            means = np.array([np.nanmean(y[series.x == v]) if np.any(np.isfinite(y[series.x == v])) else np.nan
                              for v in values])
            ax.plot(values, 100 * means, color=colour, linewidth=1.3, linestyle=SCORE_STYLES.get(label, "-"),
                    label=score_label(label))
            ax.plot(series.x, 100 * y, linestyle="none", marker="o", markersize=4.5, color=colour)
        ax.set_title(user_text(panel.title) + " (%)")
        ax.set_xlabel(wrap(user_text(series.name, NAME_LIMITS["title"]), 3.6))
        if series.log_x == "log":
            ax.set_xscale("log")
        elif series.log_x == "symlog":
            nonzero = np.abs(series.x[series.x != 0])
            ax.set_xscale("symlog", linthresh=float(nonzero.min()))
        if len(panel.lines) > 1:
            ax.legend(fontsize="small")
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    figure.suptitle(wrap(f"headline metrics against {user_text(series.name, NAME_LIMITS['title'])} "
                         f"({len(series.models)} models)", figure_width(figure)))
    return figure


def figure_sweep_of(models, name: str):
    """:func:`figure_sweep` of the models that carry the swept value ``name``."""
    return figure_sweep(diagnostics.sweep_series(models, name))
