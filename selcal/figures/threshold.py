"""The ``threshold`` figure of ``selcal threshold --plots``: the certified thresholds and their
bounds on the risk-coverage curve.

:func:`threshold_figure_data` prepares the numbers (pure, testable); :func:`figure_threshold`
only draws them. Everything is read from a :class:`selcal.threshold.run.ThresholdResult`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..options import PLOT_FORMATS
from .base import NAME_LIMITS, legend_below, mpl, new_figure, render, style, user_text, wrap
from .data import RCPoints, rc_curve_points

__all__ = ["ThresholdMark", "GroupMark", "ThresholdFigureData", "threshold_figure_data", "figure_threshold",
           "render_threshold"]

GROUP_LABELS = 20  # at most this many groups are named beside their points


@dataclass(frozen=True)
class ThresholdMark:
    """One risk target in percent: the calibration operating point chosen (``coverage``, ``risk``),
    its certified ``bound`` and what the evaluation rows gave (``eval_coverage``, ``eval_risk``);
    None where abstaining (or nothing accepted)."""

    target: float
    coverage: float | None
    risk: float | None
    bound: float | None
    eval_coverage: float
    eval_risk: float | None


@dataclass(frozen=True)
class GroupMark:
    """One group at one target (percent): the calibration coverage of its threshold and its certified
    bound, what its evaluation rows gave; ``status`` as :class:`selcal.threshold.groups.GroupCertificate`
    (the coverages and risks are None when it has no threshold or no such rows)."""

    target: float
    name: str
    status: str
    coverage: float | None
    bound: float | None
    eval_coverage: float | None
    eval_risk: float | None


@dataclass(frozen=True)
class ThresholdFigureData:
    calibration: RCPoints
    evaluation: RCPoints
    marks: tuple[ThresholdMark, ...]
    groups: tuple[GroupMark, ...] = ()


def _risk_top(curves) -> float:
    """Top of the risk axis (percent): the highest risk drawn at coverage >= 5% (below it a handful of
    rows rule the curve), with a margin."""
    top = 0.5
    for points in curves:
        settled = points.coverage >= 5.0
        if settled.any():
            top = max(top, 1.12 * float(np.nanmax(points.risk[settled])))
    return top


def _percent(value):
    return None if value is None else 100.0 * value


def threshold_figure_data(result) -> ThresholdFigureData:
    """The curves (percent) of the calibration and evaluation rows and one mark per target.

    Examples
    --------
    >>> import numpy as np, selcal.threshold.run as d, selcal.threshold.guarantee as g
    >>> from selcal.metrics.selective import risk_coverage
    >>> curve = risk_coverage(np.arange(100.0), np.arange(100) > 10)
    >>> cert = g.sgr(curve, risk=0.3, delta=0.1)
    >>> entry = d.ThresholdEntry(cert, g.apply_threshold(np.arange(100.0), np.arange(100) > 10, cert.threshold),
    ...                          "max_logit", cert.threshold)
    >>> result = d.ThresholdResult("m", "m", "max_logit", "sgr", 0.1, "val-file", 0, [entry], curve, curve)
    >>> mark = threshold_figure_data(result).marks[0]
    >>> mark.target, mark.coverage, round(mark.bound, 1)
    (30.0, 99.0, 18.7)
    """
    marks = []
    for entry in result.entries:
        cert, ev = entry.certificate, entry.evaluation
        abstain = cert.abstain_all
        marks.append(ThresholdMark(
            target=100.0 * cert.risk_target,
            coverage=None if abstain else 100.0 * cert.coverage,
            risk=_percent(cert.risk),
            bound=_percent(cert.bound),
            eval_coverage=100.0 * ev.coverage,
            eval_risk=_percent(ev.risk),
        ))
    groups = []
    for entry in result.entries:
        for item in entry.groups or ():
            group = item.group
            certified = not group.abstain_all
            groups.append(GroupMark(
                target=100.0 * entry.certificate.risk_target, name=group.name, status=group.status,
                coverage=100.0 * group.certificate.coverage if certified else None,
                bound=_percent(group.certificate.bound) if certified else None,
                eval_coverage=_percent(group.evaluation.coverage) if certified else None,
                eval_risk=_percent(group.evaluation.risk) if certified else None))
    return ThresholdFigureData(rc_curve_points(result.calibration_curve), rc_curve_points(result.evaluation_curve),
                               tuple(marks), tuple(groups))


def figure_threshold(result):
    """Risk against coverage of the calibration rows (where the thresholds were chosen) and of the
    evaluation rows (what they gave); per target r: a dotted line at r, the chosen calibration
    point with its certified bound above it (a bar from risk to bound), and the evaluation point.
    A target with no threshold is named in the legend as abstaining."""
    data = threshold_figure_data(result)
    matplotlib, _, _ = mpl()
    colours = matplotlib.colormaps["tab10"]
    figure = new_figure(12.8 if data.groups else 6.4, 5.2)
    ax = figure.add_subplot(1, 2, 1) if data.groups else figure.add_subplot()
    handles = ax.plot(data.calibration.coverage, data.calibration.risk, color="0.25", linewidth=1.4, zorder=3,
                      label=f"calibration rows ({result.calibration_curve.n:,})")
    handles += ax.plot(data.evaluation.coverage, data.evaluation.risk, color="0.6", linewidth=1.0, zorder=2,
                       linestyle="--", label=f"evaluation rows ({result.evaluation_curve.n:,})")
    top = _risk_top([data.calibration, data.evaluation])
    for index, mark in enumerate(data.marks):
        colour = colours(index + 1)
        top = max(top, 1.15 * mark.target, 1.15 * (mark.bound or 0.0))
        ax.axhline(mark.target, color=colour, linestyle=":", linewidth=1.0, zorder=1)
        if mark.coverage is None:
            handles.append(ax.plot([], [], color=colour, linestyle=":",
                                   label=f"r = {mark.target:.3g}%: abstain on everything")[0])
            continue
        ax.vlines(mark.coverage, mark.risk, mark.bound, color=colour, linewidth=2.2, zorder=4)
        handles.append(ax.plot([mark.coverage], [mark.bound], marker="v", color=colour, linestyle="none", zorder=5,
                               label=f"r = {mark.target:.3g}%: bound {mark.bound:.2f}% at coverage "
                                     f"{mark.coverage:.1f}% (calibration)")[0])
        ax.plot([mark.coverage], [mark.risk], marker="o", markersize=4, color=colour, zorder=5)
        if mark.eval_risk is not None:
            handles.append(ax.plot([mark.eval_coverage], [mark.eval_risk], marker="x", color=colour,
                                   linestyle="none", zorder=5,
                                   label=f"r = {mark.target:.3g}%: evaluation coverage {mark.eval_coverage:.1f}%, "
                                         f"risk {mark.eval_risk:.2f}%")[0])
    ax.set_xlim(0, 100)
    ax.set_ylim(-0.012 * top, top)  # a sliver below 0: a stretch of zero risk stays visible
    ax.set_xlabel("coverage (% of rows accepted)")
    ax.set_ylabel("risk (% errors among accepted)")
    confidence = f"{100 * (1 - result.delta):.3g}%"
    ax.set_title(f"{user_text(result.name, NAME_LIMITS['title'])}: thresholds of {user_text(result.score)} "
                 f"({result.method}, {confidence} confidence)")
    legend_below(ax, handles=handles)
    if data.groups:
        _draw_groups(figure.add_subplot(1, 2, 2), data, result, colours, top)
    return figure


def _draw_groups(ax, data: ThresholdFigureData, result, colours, top: float) -> None:
    """Each group's threshold on the axes of the curves: its certified bound at its calibration
    coverage (a triangle) joined to what its evaluation rows gave (a cross), named when there are at
    most :data:`GROUP_LABELS` groups; the groups without a threshold are listed under the axes."""
    targets = list(dict.fromkeys(mark.target for mark in data.groups))  # in the order of the left panel
    handles, without = [], []
    for index, target in enumerate(targets):
        colour = colours(index + 1)
        ax.axhline(target, color=colour, linestyle=":", linewidth=1.0, zorder=1)
        marks = [mark for mark in data.groups if mark.target == target]
        named = len(marks) <= GROUP_LABELS
        drawn = False
        for mark in marks:
            if mark.coverage is None:
                without.append(f"{user_text(mark.name, NAME_LIMITS['tick'])} ({mark.status}"
                               + (f", r = {target:.3g}%)" if len(targets) > 1 else ")"))
                continue
            top = max(top, 1.15 * mark.bound)
            ax.plot([mark.coverage], [mark.bound], marker="v", color=colour, linestyle="none", zorder=5)
            if mark.eval_risk is not None:
                ax.plot([mark.coverage, mark.eval_coverage], [mark.bound, mark.eval_risk], color=colour,
                        linewidth=0.6, alpha=0.6, zorder=3)
                ax.plot([mark.eval_coverage], [mark.eval_risk], marker="x", color=colour, linestyle="none", zorder=5)
            if named:
                ax.annotate(user_text(mark.name, NAME_LIMITS["tick"]), (mark.coverage, mark.bound),
                            textcoords="offset points", xytext=(3, 3), fontsize=7.5, color=colour)
            drawn = True
        if drawn:
            handles.append(ax.plot([], [], marker="v", color=colour, linestyle="none",
                                   label=f"r = {target:.3g}%: a group's bound at its calibration coverage")[0])
            handles.append(ax.plot([], [], marker="x", color=colour, linestyle="none",
                                   label=f"r = {target:.3g}%: its evaluation coverage and risk")[0])
    ax.set_xlim(0, 100)
    ax.set_ylim(-0.012 * top, top)
    ax.set_xlabel("coverage (% of the group's rows accepted)")
    ax.set_ylabel("risk (% errors among accepted)")
    by = "predicted class" if result.group_by == "predicted class" else user_text(result.group_by, NAME_LIMITS["tick"])
    together = "each on its own" if result.per_group else "all together"
    ax.set_title(f"per group of {by} ({together})")
    if without:
        shown = without[:12] + ([f"{len(without) - 12} more"] if len(without) > 12 else [])
        handles.append(ax.plot([], [], linestyle="none", label=wrap("no threshold: " + ", ".join(shown), 5.0, 8.5))[0])
    if handles:
        legend_below(ax, handles=handles)


def render_threshold(result, fmt: str = PLOT_FORMATS[0]) -> bytes:
    """The figure as ``fmt`` bytes (png, svg or pdf), drawn under selcal's figure style."""
    matplotlib, _, _ = mpl()
    with matplotlib.rc_context(style()):
        return render(figure_threshold(result), fmt)
