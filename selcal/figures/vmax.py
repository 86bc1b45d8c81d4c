"""The max logit given the MSP, correct against incorrect predictions (``vmax_msp`` and its
overlay across models; Xia et al. 2024, fig. 9 right)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..pipeline.measure import logit_kind
from .base import (
    CORRECT_COLOUR,
    ERROR_COLOUR,
    NAME_LIMITS,
    figure_width,
    legend_columns,
    new_figure,
    on_two_axes,
    one_model,
    user_text,
    wrap,
)
from .data import SlidingWindowStats, ls_ceiling_share, sliding_window_stats, vmax_msp_limits

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["plot_vmax_msp", "figure_vmax_msp", "figure_vmax_msp_overlay", "vmax_msp_skip_reason", "vmax_stats"]


def vmax_msp_skip_reason(model) -> str | None:
    """Why ``vmax_msp`` is not drawn for ``model`` (None: it is drawn).

    Not drawn without MSP or per-row values, and when the logit column holds probabilities
    or log-probabilities (:func:`selcal.api.logit_kind`, the rule of the table's
    warning): the max logit is then the MSP or its log, so the two curves would only
    redraw the MSP axis and the difference between them would be zero by construction.
    """
    if "msp" not in model.scores:
        return None if model.rows is None else "msp was not evaluated"
    if model.rows is None:
        return "the result holds no per-row values"
    kind = logit_kind(model.rows)
    if kind != "logits":
        return (f"the logits look like {kind}, so the max logit is "
                + ("the MSP" if kind == "probabilities" else "log MSP") + " and says nothing beyond it")
    return None


def vmax_stats(model) -> SlidingWindowStats:
    return sliding_window_stats(np.exp(model.rows.log_msp), model.rows.max_logit, model.rows.correct)


def _draw_vmax_msp(ax, diff_ax, model, ls_alpha: float | None, stats: SlidingWindowStats | None = None):
    """Mean ± std of v_max per MSP window (top) and the difference of the means (bottom).

    Returns the legend entries ((handle, label): one per subset, then the ceiling line) and
    the ceiling line (or None).
    """
    msp = np.exp(model.rows.log_msp)
    stats = stats if stats is not None else vmax_stats(model)
    x = stats.centre
    entries = []
    for series, colour, label in ((stats.correct, CORRECT_COLOUR, "correct ✓"),
                                  (stats.incorrect, ERROR_COLOUR, "incorrect ✗")):
        (line,) = ax.plot(x, series.mean, color=colour, linewidth=1.6, label=f"{label}: mean")
        band = ax.fill_between(x, series.mean - series.std, series.mean + series.std, color=colour, alpha=0.18,
                               linewidth=0, label=f"{label}: ± std")
        entries.append(((band, line), f"{label}: mean ± std"))
    if diff_ax is not None:
        diff_ax.axhline(0.0, color="0.5", linewidth=0.8)
        diff_ax.plot(x, stats.difference, color="0.15", linewidth=1.4, label="✗ − ✓")
    shown = ~(np.isnan(stats.correct.mean) & np.isnan(stats.incorrect.mean))
    if shown.any():
        ax.set_xlim(max(0.0, float(stats.lo[shown].min()) - 0.01), 1.0)
    line = None
    if ls_alpha:
        c = ls_ceiling_share(msp, ls_alpha, model.num_classes, model.rows.correct)
        above = "" if c.error_rate_above is None else f", {100 * c.error_rate_above:.1f}% of them wrong"
        line = ax.axvline(c.ceiling, color="0.25", linestyle="--", linewidth=1.0,
                          label=f"LS target ceiling (1−α)+α/K = {c.ceiling:.3f} (α = {ls_alpha:g}):\n"
                                f"{100 * c.share_above:.1f}% of samples have a higher MSP{above}")
        if diff_ax is not None:
            diff_ax.axvline(c.ceiling, color="0.25", linestyle="--", linewidth=1.0)
    ax.set_ylabel("max logit $v_{max}$ (logit units; mean ± std)")
    xlabel = "MSP (window centre; 0.05 wide, step 0.01)"
    if diff_ax is None:  # one panel (plot_vmax_msp on the caller's axes)
        ax.set_xlabel(xlabel)
    else:
        ax.tick_params(labelbottom=False)
        diff_ax.set_ylabel("✗ − ✓ mean $v_{max}$\n(logit units)")
        diff_ax.set_xlabel(xlabel)
    if line is not None:
        entries.append((line, line.get_label()))
    return entries, line


def plot_vmax_msp(model, *, ax: Axes | None = None, diff_ax: Axes | None = None,
                  ls_alpha: float | None = None) -> Axes | Figure:
    """The max logit given the MSP, correct against incorrect predictions (the ``vmax_msp`` figure's panels).

    Parameters
    ----------
    model : ModelResult or EvaluationResult of one model
        With ``msp`` evaluated on logits (not probabilities).
    ax : matplotlib Axes, optional
        Where to draw the mean ± std of v_max per MSP window (your axes: nothing else of its
        figure, nor any global setting, changes). None: a new Figure in selcal's style, with
        the difference of the means beneath.
    diff_ax : matplotlib Axes, optional
        With ``ax``: axes for the difference of the means (incorrect minus correct).
    ls_alpha : float, optional
        The label-smoothing α the model was trained with: its MSP ceiling is marked.

    Returns
    -------
    ``ax``, or the new matplotlib Figure when ``ax`` is None.
    """
    from ..errors import SelcalError

    model = one_model(model)
    reason = vmax_msp_skip_reason(model)
    if reason is not None or "msp" not in model.scores:
        raise SelcalError(f"the vmax_msp figure is not drawn for {model.name!r}: {reason or 'msp was not evaluated'}")

    def draw(target, below=None) -> None:
        entries, _ = _draw_vmax_msp(target, below, model, ls_alpha)
        target.legend([h for h, _ in entries], [label for _, label in entries], fontsize="small")

    return on_two_axes(ax, diff_ax, draw, (6.0, 6.0), (3.0, 1.0))


def figure_vmax_msp(model, ls_alpha: float | None = None):
    """v_max given the MSP for correct and incorrect predictions (Xia et al. 2024, fig. 9 right)."""
    figure = new_figure(6.0, 6.0)
    grid = figure.add_gridspec(2, 1, height_ratios=[3.0, 1.0])
    ax = figure.add_subplot(grid[0])
    diff_ax = figure.add_subplot(grid[1], sharex=ax)
    entries, _ = _draw_vmax_msp(ax, diff_ax, model, ls_alpha)
    ax.set_title(wrap(f"{user_text(model.name, NAME_LIMITS['title'])}: max logit given MSP\n(windows with < 10 samples "
                      "skipped)", 0.9 * figure_width(figure)))
    figure.legend([h for h, _ in entries], [lab for _, lab in entries], loc="outside lower center", ncol=1)
    return figure


def figure_vmax_msp_overlay(models, ls_alphas: Sequence[float | None] | None = None, *,
                            limits: tuple[float, float] | None = None, page: tuple[int, int] | None = None):
    """The vmax_msp panels of several models side by side (same MSP axis).

    Every upper panel has the same y limits, so that the levels of v_max can be compared
    across models (an LS model's logits are much smaller): ``limits`` (from
    :func:`vmax_msp_limits`) extends this across the several figures that
    :func:`render_figures` draws for more than ``OVERLAY_VMAX_MODELS`` models; by default,
    the limits of ``models``. The difference panels beneath keep each its own scale (a
    difference of 0.2 next to one of 5 would otherwise be a flat line; what they show is
    its sign), and the title says so. ``page``: (this figure, of how many), named in the title.
    """
    ls_alphas = list(ls_alphas) if ls_alphas is not None else [None] * len(models)
    stats = [vmax_stats(m) for m in models]
    top_limits = limits if limits is not None else vmax_msp_limits(stats)
    columns = min(len(models), 3)
    rows = math.ceil(len(models) / columns)
    figure = new_figure(4.9 * columns, 6.2 * rows)
    grid = figure.add_gridspec(2 * rows, columns, height_ratios=[3.0, 1.0] * rows)
    shared: dict = {}
    first = None
    for index, (model, alpha, model_stats) in enumerate(zip(models, ls_alphas, stats)):
        row, column = divmod(index, columns)
        ax = figure.add_subplot(grid[2 * row, column], sharex=first)
        first = first or ax
        diff_ax = figure.add_subplot(grid[2 * row + 1, column], sharex=first)
        entries, ceiling = _draw_vmax_msp(ax, diff_ax, model, alpha, model_stats)
        ax.set_ylim(*top_limits)
        ax.set_title(wrap(user_text(model.name, NAME_LIMITS["legend"]), 4.4))
        for handle, label in entries:
            if handle is not ceiling:
                shared.setdefault(label, handle)
        if ceiling is not None:
            diff_ax.legend([ceiling], [ceiling.get_label()], loc="upper center", bbox_to_anchor=(0.5, -0.42))
    figure.legend(list(shared.values()), list(shared), loc="outside lower center",
                  ncol=legend_columns(shared, figure_width(figure), 2))
    scope = "" if page is None or page[1] == 1 else f" of all {page[1]} figures"
    part = "" if page is None or page[1] == 1 else f" ({page[0]} of {page[1]})"
    figure.suptitle(f"max logit given MSP, correct vs incorrect (mean ± std in a sliding window){part}\n"
                    f"upper panels{scope}: same y axis; difference panels: each its own y scale", fontsize=11)
    return figure


