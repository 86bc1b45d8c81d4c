"""The figures of a study (``selcal study --plots/--report``), per data set: each study metric's
runs as dots with each recipe's mean and interval, and each recipe's risk-coverage curve
averaged over its runs with a band of one standard deviation. The data come from the
:class:`selcal.study.StudyResult` (:func:`metric_points`, its ``curves``); here only drawing."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..metrics import catalog
from ..options import PLOT_FORMATS
from .base import RenderedFigure, model_colours, new_figure, render, safe_stem, user_text, wrap, figure_width, \
    NAME_LIMITS

__all__ = ["metric_points", "figure_metrics", "figure_curves", "study_figures"]


def metric_points(result, dataset, metric: str) -> list[dict]:
    """Per recipe (the table's order): its runs' values, mean and interval (None without a bootstrap)."""
    from ..study.measure import values_of

    key = catalog.split_name(metric)
    out = []
    for recipe in result.recipes:
        values = [values_of(model).get(key) for run, model in zip(result.runs, result.results)
                  if run.dataset == dataset and run.recipe == recipe]
        row = result.row(dataset, recipe, metric)
        if row is None:
            continue
        out.append({"recipe": recipe, "values": [v for v in values if v is not None], "mean": row["mean"],
                    "low": row["low"], "high": row["high"], "verdict": row.get("verdict")})
    return out


def _title(dataset) -> str:
    return "" if dataset is None else f"{user_text(dataset, NAME_LIMITS['title'])}: "


def figure_metrics(result, dataset):
    """One panel per study metric: a column per recipe, its runs as dots, its mean as a bar with
    the interval (when there is one)."""
    metrics = list(result.metrics)
    columns = min(3, len(metrics))
    rows = -(-len(metrics) // columns)
    width = max(3.2 * columns, 1.0 + 0.9 * columns * len(result.recipes))
    figure = new_figure(width, 3.4 * rows + 0.6)
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    colours = model_colours(len(result.recipes))
    for ax, metric in zip(axes, metrics):
        scale = 100.0 if catalog.unit(metric) == "pct" else 1.0
        points = metric_points(result, dataset, metric)
        for x, point in enumerate(points):
            colour = colours[result.recipes.index(point["recipe"])]
            values = scale * np.asarray(point["values"], dtype=np.float64)
            jitter = np.linspace(-0.12, 0.12, values.size) if values.size > 1 else np.zeros(values.size)
            ax.plot(x + jitter, values, linestyle="none", marker="o", markersize=4, color=colour, alpha=0.7)
            if point["mean"] is not None:
                ax.plot([x - 0.28, x + 0.28], [scale * point["mean"]] * 2, color=colour, linewidth=2)
            if point["low"] is not None:
                ax.errorbar([x + 0.32], [scale * point["mean"]], yerr=[[scale * (point["mean"] - point["low"])],
                                                                     [scale * (point["high"] - point["mean"])]],
                            color=colour, capsize=3, linewidth=1.2)
        ax.set_xticks(range(len(points)), [user_text(p["recipe"], NAME_LIMITS["tick"]) for p in points],
                      rotation=30 if len(points) > 3 else 0, ha="right" if len(points) > 3 else "center")
        ax.set_title(catalog.label(metric))
        ax.set_xlim(-0.6, len(points) - 0.4)
    for ax in axes[len(metrics):]:
        ax.set_visible(False)
    level = f"; {100 * result.bootstrap['confidence']:g}% interval" if result.bootstrap else ""
    figure.suptitle(wrap(f"{_title(dataset)}runs (dots), mean (bar){level}", figure_width(figure)))
    return figure


def figure_curves(result, dataset):
    """Each recipe's risk-coverage curve averaged over its runs (the risk at each coverage), with a
    band of one standard deviation over the runs."""
    curves = result.curves.get(dataset, {})
    figure = new_figure(5.6, 4.2)
    ax = figure.subplots()
    colours = model_colours(len(result.recipes))
    for recipe, curve in curves.items():
        colour = colours[result.recipes.index(recipe)]
        coverage, risk, std = curve["coverage"], 100 * curve["risk"], 100 * curve["std"]
        ax.plot(coverage, risk, color=colour, linewidth=1.4,
                label=f"{user_text(recipe, NAME_LIMITS['legend'])} ({curve['runs']} runs)")
        if curve["runs"] > 1:
            ax.fill_between(coverage, risk - std, risk + std, color=colour, alpha=0.18, linewidth=0)
    ax.set_xlabel("coverage")
    ax.set_ylabel("selective risk (%)")
    ax.set_xlim(0, 1)
    ax.set_ylim(bottom=0)
    if curves:
        ax.legend(fontsize="small")
    score = user_text(result.curve_score or "")
    figure.suptitle(wrap(f"{_title(dataset)}risk-coverage of {score}, mean over runs ± 1 std",
                         figure_width(figure)))
    return figure


def study_figures(result, fmt: str = PLOT_FORMATS[0], progress: Callable[[int, int], None] | None = None) -> list[RenderedFigure]:
    """Every figure of the study, rendered: per data set the metrics' figure and, when the result
    keeps curves, the averaged risk-coverage curves."""
    from ..figures.base import mpl, style

    matplotlib = mpl()[0]
    jobs = []
    for dataset in result.datasets:
        stem = "" if dataset is None else safe_stem(dataset) + "_"
        jobs.append((f"{stem}study_metrics", "metrics", dataset, figure_metrics,
                     "each metric's runs (dots) and each recipe's mean (bar) and interval"))
        if result.curves.get(dataset):
            jobs.append((f"{stem}study_rc", "rc", dataset, figure_curves,
                         "the risk-coverage curve averaged over each recipe's runs, ± 1 standard deviation"))
    out = []
    with matplotlib.rc_context(style()):
        for index, (stem, kind, dataset, draw, caption) in enumerate(jobs):
            data = render(draw(result, dataset), fmt)
            out.append(RenderedFigure(stem=stem, kind=f"study_{kind}", model=dataset, caption=caption, format=fmt,
                                      data=data))
            if progress is not None:
                progress(index + 1, len(jobs))
    return out
