"""Calibration figures, one panel per probability score: the binned reliability diagram over a
confidence histogram (``reliability``), and the smoothed reliability curve of the smooth ECE
over the kernel density of the confidences (``smooth``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ..metrics import calibration
from ..scores import REGISTRY
from .base import (
    NAME_LIMITS,
    figure_width,
    legend_columns,
    new_figure,
    on_axes,
    on_two_axes,
    one_model,
    pct,
    plain_log_axis,
    score_label,
    user_text,
    wrap,
)
from .data import RELIABILITY_LEVEL, histogram_top, reliability_data, smooth_reliability_data

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["plot_reliability", "plot_smooth_reliability", "figure_reliability", "figure_smooth_reliability",
           "probability_scores", "score_panel", "GAP_STYLES"]


def probability_scores(model) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(score, top-label confidence per row, correct per row) for the probability scores of a
    model: every score of the registry with probabilities (``model.confidences``), and a score
    column read as a probability (it has an ECE; ``--score-col``, or a file with no logits) as it
    is. A score judged by its own predictions (a calibrator: its own top label) brings its own
    correctness (``model.score_correct``), as its ECE was measured; the others the model's."""
    out = []
    own = getattr(model, "score_correct", {})
    for name in model.scores:
        if name in getattr(model, "confidences", {}):  # a score with probabilities: its top-label probability
            confidence = model.confidences[name]
        elif name not in REGISTRY and "ece" in model.scores[name] and name in model.score_values:
            confidence = model.score_values[name]
        else:
            continue
        correct = own[name] if name in own else model.rows.correct
        out.append((name, np.asarray(confidence, dtype=np.float64), np.asarray(correct, dtype=bool)))
    return out


PANEL_COLUMNS = 4  # panels per row; more probability scores (calibrators) start a new row

# Over-confident: mean confidence above the bin's accuracy (the gap sits on the accuracy bar);
# under-confident: below (the gap covers the top of the bar, up to the accuracy). Opaque, so
# that the legend's swatch is the colour drawn.
GAP_STYLES = {
    "over": {"color": "#fcbba1", "edgecolor": "#cb181d", "hatch": "///",
             "label": "gap, over-confident (confidence > accuracy)"},
    "under": {"color": "#fee391", "edgecolor": "#b07800", "hatch": "\\\\\\",
              "label": "gap, under-confident (confidence < accuracy)"},
}


def score_panel(model, score: str) -> tuple[np.ndarray, np.ndarray]:
    """(confidence, correct) of one probability score of ``model`` (:func:`probability_scores`)."""
    from ..errors import SelcalError

    panels = {name: (confidence, correct) for name, confidence, correct in probability_scores(model)}
    if score not in panels:
        raise SelcalError(f"score {score!r} has no probabilities in this result; choose one of "
                          f"{', '.join(panels) or '(none: no score has probabilities)'}")
    return panels[score]


def _reliability_on(ax, data) -> None:
    """The reliability diagram on ``ax``: each bin's accuracy, its gap to the mean confidence, the
    empty bins, the accuracy's interval and the diagonal, on [0, 1] x [0, 1]."""
    left, width = data.edges[:-1], np.diff(data.edges)
    full = ~data.empty
    ax.bar(left[full], data.accuracy[full], width=width[full], align="edge", color="#9ecae1",
           edgecolor="#08519c", linewidth=0.8, label="accuracy in the bin")
    low = np.minimum(data.accuracy, data.confidence)
    for side, style in GAP_STYLES.items():
        drawn = full & (np.sign(data.gap) == (1 if side == "over" else -1))
        if drawn.any():  # a legend entry only for a kind of gap that is drawn
            ax.bar(left[drawn], np.abs(data.gap[drawn]), bottom=low[drawn], width=width[drawn], align="edge",
                   linewidth=0.6, **style)
    if data.empty.any():
        ax.bar(left[data.empty], np.ones(int(data.empty.sum())), width=width[data.empty], align="edge",
               color="none", edgecolor="0.72", linewidth=0.4, hatch="..", label="empty bin (no samples)")
    centre = left + width / 2
    ax.errorbar(centre[full], data.accuracy[full],
                yerr=[data.accuracy[full] - data.lower[full], data.upper[full] - data.accuracy[full]],
                fmt="none", ecolor="#08306b", elinewidth=0.9, capsize=2.0, capthick=0.9,
                label=f"{100 * RELIABILITY_LEVEL:g}% Clopper-Pearson interval of the accuracy")
    ax.plot([0, 1], [0, 1], color="0.3", linestyle="--", linewidth=0.9, label="perfect calibration")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy")


def _null_band_on(ax, data, null) -> None:
    """The calibration test's floor on the diagram (``--calibration-test``): in each non-empty bin, the
    central 95% of a perfectly calibrated model's accuracy with this bin's mean confidence (the null
    draws' accuracy minus confidence, around the diagonal), a grey box a gap must leave to be more than
    noise. Nothing when the test was not run, or on other bins."""
    band = getattr(null, "band", None)
    if band is None or band[0].size != data.edges.size - 1:
        return
    low, high = band
    left, width = data.edges[:-1], np.diff(data.edges)
    shown = ~data.empty & np.isfinite(low) & np.isfinite(high)
    if shown.any():
        ax.bar(left[shown], (high - low)[shown], bottom=(data.confidence + low)[shown], width=width[shown],
               align="edge", color="0.45", alpha=0.28, linewidth=0, zorder=3,
               label=f"calibrated model's 95% range (calibration test, {null.draws:,} draws)")


def _ece_title(model, score: str, n_bins: int) -> str:
    """``ECE 4.35% (15 bins)``, and with the calibration test ``; floor 0.16%, p = 0.001``."""
    metrics = model.scores[score]
    text = f"ECE {pct(metrics.get('ece'))} ({n_bins} bins)"
    if metrics.get("ece_floor") is not None:
        p = metrics.get("ece_p")
        text += f"; floor {pct(metrics['ece_floor'])}" + ("" if p is None else f", p = {p:.2g}")
    return text


def _histogram_on(hist, data) -> None:
    """The confidence histogram (log counts) under a reliability diagram, with the overall accuracy
    and mean confidence."""
    left, width = data.edges[:-1], np.diff(data.edges)
    full = ~data.empty
    hist.bar(left[full], data.count[full], width=width[full], align="edge", color="0.55", edgecolor="white",
             linewidth=0.5)
    hist.set_yscale("log")
    hist.set_ylim(0.7, histogram_top(data.count))
    plain_log_axis(hist.yaxis, plain_below=math.inf)  # counts: 1, 10, 100, 1,000, ...
    hist.axvline(data.overall_accuracy, color="#08519c", linestyle="--", linewidth=1.0,
                 label=f"accuracy {100 * data.overall_accuracy:.1f}%")
    hist.axvline(data.overall_confidence, color="#cb181d", linestyle=":", linewidth=1.2,
                 label=f"mean confidence {100 * data.overall_confidence:.1f}%")
    hist.set_xlabel("confidence (top-label probability)")
    hist.set_ylabel("samples (log)")


def plot_reliability(model, score: str = "msp", *, bins: int | None = None, ax: Axes | None = None,
                     hist_ax: Axes | None = None) -> Axes | Figure:
    """The reliability diagram of one probability score (a panel of the ``reliability`` figure).

    Parameters
    ----------
    model : ModelResult or EvaluationResult of one model
    score : str, default "msp"
        A score with probabilities (``msp``, ``temp``, a calibrator, a probability column).
    bins : int, optional
        Equal-width bins (default: the result's ``bins`` option, as its ECE).
    ax : matplotlib Axes, optional
        Where to draw the diagram, as for :func:`~selcal.figures.selective.plot_rc`.
    hist_ax : matplotlib Axes, optional
        With ``ax``: axes for the confidence histogram (log counts), e.g. the subplot below.

    Returns
    -------
    ``ax``, or a new Figure of the diagram over the confidence histogram (with no ``ax``).

    Examples
    --------
    >>> from matplotlib.figure import Figure
    >>> import selcal
    >>> result = selcal.evaluate_arrays([[2.0, 0.0], [0.0, 1.0], [3.0, 1.0]], [0, 1, 1], scores="msp")
    >>> ax = Figure().subplots()
    >>> plot_reliability(result, ax=ax) is ax, ax.get_ylabel()
    (True, 'accuracy')
    """
    options = getattr(model, "options", None)  # an EvaluationResult's (a ModelResult has none)
    model = one_model(model)
    confidence, correct = score_panel(model, score)
    n_bins = bins or getattr(options, "bins", None) or calibration.DEFAULT_BINS
    data = reliability_data(confidence, correct, n_bins)

    def draw(target, hist=None) -> None:
        _reliability_on(target, data)
        _null_band_on(target, data, getattr(model, "calibration_nulls", {}).get(score))
        target.set_title(f"{score_label(score, model)}: {_ece_title(model, score, n_bins)}")
        target.legend(fontsize="small")
        if hist is not None:
            _histogram_on(hist, data)

    return on_two_axes(ax, hist_ax, draw, (5.0, 6.4), (3.0, 1.25))


def figure_reliability(model, n_bins: int = calibration.DEFAULT_BINS):
    """Reliability diagram (gap shaded, empty bins hatched, each bin's accuracy with its 95%
    Clopper-Pearson interval) over a confidence histogram, per probability score."""
    panels = probability_scores(model)
    if not panels:
        return None
    columns = min(len(panels), PANEL_COLUMNS)
    rows = math.ceil(len(panels) / columns)
    figure = new_figure(max(4.6 * columns, 7.0), 6.4 * rows)
    grid = figure.add_gridspec(2 * rows, columns, height_ratios=[3.0, 1.25] * rows)
    panel_width = figure_width(figure) / columns
    legend_entries: dict[str, Any] = {}
    for index, (score, confidence, correct) in enumerate(panels):
        data = reliability_data(confidence, correct, n_bins)
        row, column = divmod(index, columns)
        ax = figure.add_subplot(grid[2 * row, column])
        hist = figure.add_subplot(grid[2 * row + 1, column], sharex=ax)
        _reliability_on(ax, data)
        _null_band_on(ax, data, getattr(model, "calibration_nulls", {}).get(score))
        ax.tick_params(labelbottom=False)
        ax.set_title(wrap(f"{score_label(score, model, NAME_LIMITS['title'])}\n{_ece_title(model, score, n_bins)}",
                          panel_width))
        handles, labels = ax.get_legend_handles_labels()
        for handle, label in zip(handles, labels):
            legend_entries.setdefault(label, handle)
        _histogram_on(hist, data)
        hist.legend(loc="upper center", bbox_to_anchor=(0.5, -0.42), ncol=2, fontsize=7.5, borderaxespad=0.0)
    figure.legend(list(legend_entries.values()), list(legend_entries), loc="outside lower center",
                  ncol=legend_columns(legend_entries, figure_width(figure), 2 if len(panels) == 1 else 3))
    figure.suptitle(wrap(f"{user_text(model.name, NAME_LIMITS['title'])}: reliability on {model.n_eval:,} samples",
                         figure_width(figure), 11), fontsize=11)
    return figure


SMOOTH_CURVE_COLOUR = "#cb181d"
DENSITY_HEIGHT = 0.3  # the density band's peak, in accuracy units (relplot's height)
TICK_HEIGHT = 0.03


def _density_curve(ax, data) -> None:
    """The smoothed accuracy as segments whose width and opacity grow with the density of
    confidences (thin and faint where few rows lie, as relplot draws it); only where ``shown``."""
    from matplotlib.collections import LineCollection
    from matplotlib.colors import to_rgba

    points = np.column_stack([data.t, data.accuracy])
    keep = data.shown[:-1] & data.shown[1:]
    segments = np.stack([points[:-1], points[1:]], axis=1)[keep]
    middle = ((data.density[:-1] + data.density[1:]) / 2)[keep]
    widths = np.clip(0.8 + 1.4 * np.sqrt(middle), 0.8, 4.5)
    colours = np.tile(to_rgba(SMOOTH_CURVE_COLOUR), (segments.shape[0], 1))
    colours[:, 3] = np.clip(0.3 + 0.7 * np.minimum(1.0, 0.3 * middle), 0.3, 1.0)
    ax.add_collection(LineCollection(segments, linewidths=widths, colors=colours, capstyle="round", zorder=3))


def _smooth_on(ax, data) -> str:
    """The smoothed reliability curve on ``ax``: the diagonal, the density of confidences, the curve
    (thicker where more rows) and a rug of rows; returns the rug's legend label."""
    ax.plot([0, 1], [0, 1], color="0.3", linestyle="--", linewidth=0.9, zorder=2)
    peak = float(np.max(data.density))
    if peak > 0:
        ax.fill_between(data.t, 0.0, DENSITY_HEIGHT * data.density / peak, color="0.55", alpha=0.35,
                        linewidth=0, zorder=1)
    _density_curve(ax, data)
    hits = data.tick_correct
    ax.vlines(data.ticks[hits], 0.0, TICK_HEIGHT, color="black", linewidth=0.6, zorder=4)
    ax.vlines(data.ticks[~hits], -TICK_HEIGHT, 0.0, color="black", linewidth=0.6, zorder=4)
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.05, 1.05)
    return f"{data.ticks.size:,} rows at random: correct above 0, errors below"


def plot_smooth_reliability(model, score: str = "msp", *, ax: Axes | None = None) -> Axes | Figure:
    """The smoothed reliability curve of one probability score at its smooth ECE's σ* (a panel of
    the ``smooth`` figure; Błasiok & Nakkiran, ICLR 2024).

    Parameters
    ----------
    model : ModelResult or EvaluationResult of one model
    score : str, default "msp"
        A score with probabilities.
    ax : matplotlib Axes, optional
        Where to draw, as for :func:`~selcal.figures.selective.plot_rc`.

    Returns
    -------
    ``ax``, or a new Figure of the curve (with no ``ax``).

    Examples
    --------
    A Figure of its own (in a notebook, shown as the cell's value):

    >>> import selcal
    >>> result = selcal.evaluate_arrays([[2.0, 0.0], [0.0, 1.0], [3.0, 1.0], [0.5, 0.0]], [0, 1, 1, 0], scores="msp")
    >>> figure = plot_smooth_reliability(result)
    >>> [ax.get_xlabel() for ax in figure.axes]
    ['confidence (top-label probability)']
    """
    model = one_model(model)
    confidence, correct = score_panel(model, score)
    metrics = model.scores[score]
    data = smooth_reliability_data(confidence, correct, metrics.get("smece"), metrics.get("smece_sigma"))

    def draw(target) -> None:
        _smooth_on(target, data)
        target.set_title(f"{score_label(score, model)}: smooth ECE {pct(data.smece)} (σ* = {data.sigma:.3g})")
        target.set_xlabel("confidence (top-label probability)")
        target.set_ylabel("accuracy (kernel-smoothed)")

    return on_axes(ax, draw, size=(5.0, 4.6))


def figure_smooth_reliability(model):
    """The smoothed reliability curve (the kernel-weighted accuracy against the confidence, with
    the reflected Gaussian kernel at the score's σ*, as in its smooth ECE) over the kernel density
    of the confidences and a rug of rows, per probability score, as relplot draws it.

    The smooth ECE is the area between the curve and the diagonal weighted by the density
    (:meth:`~selcal.figures.data.SmoothReliabilityData.smece_of_curve`). The smECE and σ* shown
    are the score's reported ``smece`` and ``smece_sigma`` (computed when the result has none).

    References
    ----------
    Błasiok & Nakkiran, "Smooth ECE: principled reliability diagrams via kernel smoothing",
    ICLR 2024 (relplot's ``rel_diagram``).
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    panels = probability_scores(model)
    if not panels:
        return None
    columns = min(len(panels), PANEL_COLUMNS)
    rows = math.ceil(len(panels) / columns)
    figure = new_figure(max(4.0 * columns, 6.5), 4.4 * rows + 1.2)
    grid = figure.add_gridspec(rows, columns)
    panel_width = figure_width(figure) / columns
    ticks_label = None
    for index, (score, confidence, correct) in enumerate(panels):
        metrics = model.scores[score]
        data = smooth_reliability_data(confidence, correct, metrics.get("smece"), metrics.get("smece_sigma"))
        ax = figure.add_subplot(grid[index // columns, index % columns])
        ticks_label = _smooth_on(ax, data)
        drawn_at = "" if data.bandwidth == data.sigma else f", drawn at σ = {data.bandwidth:.3g}"
        ax.set_title(wrap(f"{score_label(score, model, NAME_LIMITS['title'])}\n"
                          f"smooth ECE {pct(data.smece)} (σ* = {data.sigma:.3g}{drawn_at})", panel_width))
        ax.set_xlabel("confidence (top-label probability)")
        if index % columns == 0:
            ax.set_ylabel("accuracy (kernel-smoothed)")
    handles = [
        Line2D([], [], color="0.3", linestyle="--", linewidth=0.9, label="perfect calibration"),
        Line2D([], [], color=SMOOTH_CURVE_COLOUR, linewidth=2.5,
               label="kernel-weighted accuracy (Gaussian reflected at 0 and 1, σ = σ*); thicker where more rows"),
        Patch(color="0.55", alpha=0.35, linewidth=0, label="density of confidences (same kernel; peak at 0.3)"),
        Line2D([], [], color="black", linewidth=0.6, marker="|", linestyle="none", markersize=6, label=ticks_label),
    ]
    figure.legend(handles=handles, loc="outside lower center",
                  ncol=legend_columns([h.get_label() for h in handles], figure_width(figure), 2))
    figure.suptitle(wrap(f"{user_text(model.name, NAME_LIMITS['title'])}: smoothed reliability on "
                         f"{model.n_eval:,} samples", figure_width(figure), 11), fontsize=11)
    return figure
