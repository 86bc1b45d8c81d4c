"""Calibration figure: the reliability diagram over a confidence histogram, one panel per
probability score (``reliability``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import calibration
from ..scores import REGISTRY
from .base import (NAME_LIMITS, figure_width, legend_columns, new_figure, pct, plain_log_axis, score_label, user_text,
                   wrap)
from .data import histogram_top, reliability_data

__all__ = ["figure_reliability", "probability_scores", "GAP_STYLES"]


def probability_scores(model) -> list[tuple[str, np.ndarray]]:
    """(score, top-label confidence per row) for the probability scores of a model: every score
    of the registry with probabilities (``model.confidences``), and a score column read as a
    probability (it has an ECE; ``--score-col``, or a file with no logits) as it is."""
    out = []
    for name in model.scores:
        if name in getattr(model, "confidences", {}):  # a score with probabilities: its top-label probability
            out.append((name, np.asarray(model.confidences[name], dtype=np.float64)))
        elif name not in REGISTRY and "ece" in model.scores[name] and name in model.score_values:
            out.append((name, np.asarray(model.score_values[name], dtype=np.float64)))
    return out


# Over-confident: mean confidence above the bin's accuracy (the gap sits on the accuracy bar);
# under-confident: below (the gap covers the top of the bar, up to the accuracy). Opaque, so
# that the legend's swatch is the colour drawn.
GAP_STYLES = {
    "over": {"color": "#fcbba1", "edgecolor": "#cb181d", "hatch": "///",
             "label": "gap, over-confident (confidence > accuracy)"},
    "under": {"color": "#fee391", "edgecolor": "#b07800", "hatch": "\\\\\\",
              "label": "gap, under-confident (confidence < accuracy)"},
}


def figure_reliability(model, n_bins: int = calibration.DEFAULT_BINS):
    """Reliability diagram (gap shaded, empty bins hatched) over a confidence histogram, per probability score."""
    panels = probability_scores(model)
    if not panels:
        return None
    figure = new_figure(max(4.6 * len(panels), 7.0), 6.4)
    grid = figure.add_gridspec(2, len(panels), height_ratios=[3.0, 1.25])
    legend_entries: dict[str, Any] = {}
    for column, (score, confidence) in enumerate(panels):
        data = reliability_data(confidence, model.rows.correct, n_bins)
        ax = figure.add_subplot(grid[0, column])
        hist = figure.add_subplot(grid[1, column], sharex=ax)
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
        ax.plot([0, 1], [0, 1], color="0.3", linestyle="--", linewidth=0.9, label="perfect calibration")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_ylabel("accuracy")
        ax.tick_params(labelbottom=False)
        ece = model.scores[score].get("ece")
        ax.set_title(f"{score_label(score, model)}\nECE {pct(ece)} ({n_bins} bins)")
        handles, labels = ax.get_legend_handles_labels()
        for handle, label in zip(handles, labels):
            legend_entries.setdefault(label, handle)
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
        hist.legend(loc="upper center", bbox_to_anchor=(0.5, -0.42), ncol=2, fontsize=7.5, borderaxespad=0.0)
    figure.legend(list(legend_entries.values()), list(legend_entries), loc="outside lower center",
                  ncol=legend_columns(legend_entries, figure_width(figure), 2 if len(panels) == 1 else 3))
    figure.suptitle(wrap(f"{user_text(model.name, NAME_LIMITS['title'])}: reliability on {model.n_eval:,} samples",
                         figure_width(figure), 11), fontsize=11)
    return figure


