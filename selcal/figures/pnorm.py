"""The p-norm score's figures: the validation objective of every p (``pnorm_search``) and the
score given the max logit within MSP bins (``pnorm_vmax``, Xia et al. 2024, fig. 19)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..metrics import diagnostics
from .base import (NAME_LIMITS, SCORE_COLOURS, figure_width, legend_below, model_colours, new_figure, on_axes,
                   one_model, user_text, wrap)
from .data import pnorm_search_data

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["plot_pnorm_search", "figure_pnorm_search", "figure_pnorm_given_vmax"]


def _pnorm_search_on(ax, metrics: dict) -> None:
    """The validation objective of every p on ``ax``, MSP's as a line, the chosen p marked."""
    data = pnorm_search_data(metrics)
    name = data.objective_name.upper()
    ax.plot(data.p, 100 * data.objective, color=SCORE_COLOURS["pnorm"], marker="o", markersize=4, linewidth=1.4,
            label=f"p-norm score ({'centred' if metrics.get('center', True) else 'uncentred'})")
    if data.msp is not None:
        ax.axhline(100 * data.msp, color=SCORE_COLOURS["msp"], linestyle="--", linewidth=1.2,
                   label=f"MSP: {100 * data.msp:.3f}%")
    if data.chosen_p is not None and data.chosen_p in data.p.tolist():
        best = 100 * data.objective[data.p.tolist().index(data.chosen_p)]
        verdict = "MSP is kept (no worse on validation)" if data.fallback else "used on the evaluation rows"
        ax.plot([data.chosen_p], [best], marker="*", markersize=15, color="#ffbf00", markeredgecolor="0.15",
                linestyle="none", label=f"best p = {data.chosen_p}: {best:.3f}%; {verdict}")
    ax.set_xticks(data.p)
    ax.set_xlabel("p of the p-norm")
    ax.set_ylabel(f"validation {name} (%)")


def plot_pnorm_search(model, *, ax: Axes | None = None) -> Axes | Figure:
    """The choice of p of the ``pnorm`` score: the validation objective of every p, MSP's, the p chosen
    (the ``pnorm_search`` figure).

    Parameters
    ----------
    model : ModelResult or EvaluationResult of one model
        With the ``pnorm`` score evaluated.
    ax : matplotlib Axes, optional
        Where to draw, as for :func:`~selcal.figures.selective.plot_rc`.

    Returns
    -------
    ``ax``, or a new Figure of the search (with no ``ax``).
    """
    from ..errors import SelcalError

    model = one_model(model)
    metrics = model.scores.get("pnorm")
    if not metrics or "val_objective" not in metrics:
        raise SelcalError(f"{model.name!r} has no pnorm search: evaluate it with the pnorm score")

    def draw(target) -> None:
        _pnorm_search_on(target, metrics)
        target.legend(fontsize="small")

    return on_axes(ax, draw, size=(6.0, 4.4))


def figure_pnorm_search(model):
    """Validation objective against p, MSP as a horizontal line, the chosen p marked."""
    metrics = model.scores.get("pnorm")
    if not metrics or "val_objective" not in metrics:
        return None
    figure = new_figure(6.0, 4.4)
    ax = figure.add_subplot()
    _pnorm_search_on(ax, metrics)
    ax.set_title(wrap(f"{user_text(model.name, NAME_LIMITS['title'])}: choice of p on {model.n_val:,} validation "
                      "samples\n(lower is better)", 0.9 * figure_width(figure)))
    legend_below(ax)
    return figure


def pnorm_rows(model):
    """The p-norm score of every evaluation row at the fitted p (the ``extra_rows`` of the pnorm
    entry: kept when it does not fall back to MSP, or with the logit profile), or None."""
    rows = model.rows
    if rows is None or "pnorm" not in model.scores:
        return None
    return rows.extra.get("pnorm")


def figure_pnorm_given_vmax(model):
    """The p-norm score against v_max within MSP bins (Xia et al. fig. 19), one line per bin."""
    values = pnorm_rows(model)
    if values is None:
        return None
    rows = model.rows
    bins = diagnostics.pnorm_given_vmax(np.exp(rows.log_msp), rows.max_logit, values)
    if not any(np.isfinite(b.mean).any() for b in bins):
        return None
    figure = new_figure(7.0, 4.6)
    ax = figure.subplots()
    colours = model_colours(len(bins))
    for colour, b in zip(colours, bins):
        finite = np.isfinite(b.mean)
        if not finite.any():
            continue
        ax.plot(b.centre[finite], b.mean[finite], color=colour, linewidth=1.3,
                label=f"MSP in ({b.lo:g}, {b.hi:g}]: {b.n_kept:,} rows")
        ax.fill_between(b.centre[finite], (b.mean - b.std)[finite], (b.mean + b.std)[finite], color=colour,
                        alpha=0.15, linewidth=0)
    p = model.scores["pnorm"].get("p")
    fallback = " (MSP kept as the score)" if model.scores["pnorm"].get("fallback") else ""
    ax.set_xlabel("max logit $v_{max}$")
    ax.set_ylabel(f"p-norm score, p = {p}{fallback}")
    ax.set_title(wrap(f"{user_text(model.name, NAME_LIMITS['title'])}: p-norm score given max logit, within MSP bins",
                      0.9 * figure_width(figure)))
    ax.legend(fontsize="small")
    return figure
