"""Figures from result objects (CONVENTIONS.md, "Plots").

Two layers, kept apart so that what is drawn can be tested without looking at pixels:

* **data preparation**, pure functions of arrays (:func:`rc_curve_points`,
  :func:`reliability_data`, :func:`sliding_window_stats`, :func:`ls_ceiling_share`,
  :func:`pnorm_search_data`, :func:`errors_at_coverage_by_group`): arrays in, arrays
  out, no matplotlib;
* **drawing**, which takes :class:`~selcal.report.ModelResult` objects, reads every
  number from them (metrics, curves, per-row values; nothing is re-measured) and builds
  :class:`matplotlib.figure.Figure` objects on the Agg canvas. pyplot is never used, so
  no figure is registered globally, the style is applied through ``rc_context`` only,
  and a figure is released as soon as it is written: plotting 50 models does not grow
  memory or change the caller's matplotlib state.

Files are staged through the output transaction :class:`selcal.io.Outputs`, so an
interrupted or failed run leaves no figure (and no half-written one). matplotlib is imported only when a figure is drawn.
"""

from __future__ import annotations

import functools
import io as _io
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import calibration
from .errors import SelcalError
from .io import Outputs

__all__ = [
    "PLOT_FORMATS",
    "FIGURE_KINDS",
    "RCPoints",
    "rc_curve_points",
    "ReliabilityData",
    "reliability_data",
    "WindowSeries",
    "SlidingWindowStats",
    "sliding_window_stats",
    "LSCeiling",
    "ls_ceiling_share",
    "PnormSearch",
    "pnorm_search_data",
    "GroupErrors",
    "errors_at_coverage_by_group",
    "RenderedFigure",
    "figure_rc",
    "figure_rc_overlay",
    "figure_reliability",
    "figure_vmax_msp",
    "figure_vmax_msp_overlay",
    "figure_pnorm_search",
    "figure_errors_by_group",
    "shown_groups",
    "user_text",
    "render_figures",
    "write_plots",
]

PLOT_FORMATS = ("png", "svg", "pdf")
FIGURE_KINDS = ("rc", "reliability", "vmax_msp", "pnorm_search")
DEFAULT_MAX_POINTS = 4000
DEFAULT_AT_COVERAGE = 0.1
OVERLAY_LEGEND_MODELS = 8  # more models: overlay_rc names them in one shared legend
OVERLAY_VMAX_MODELS = 6  # more models: overlay_vmax_msp_1, _2, ... of up to 6 models each
# Longest user text, in characters, in a title, a legend entry and a tick label (see user_text).
NAME_LIMITS = {"title": 70, "legend": 40, "tick": 28}
MAX_GROUP_BARS = 10  # errors_by_group: more groups than this + 1 draw these and an "other" bar

SCORE_LABELS = {
    "msp": "MSP",
    "max_logit": "max logit",
    "pnorm": "p-norm",
    "temp": "temperature-scaled MSP",
}
SCORE_COLOURS = {"msp": "#1f77b4", "max_logit": "#ff7f0e", "pnorm": "#2ca02c", "temp": "#9467bd"}
# temp ranks almost like msp: dashed, so that the curve beneath stays visible.
SCORE_STYLES = {"temp": (0, (5, 2))}
# Scores of selcal.scores.REGISTRY beyond the four above take these colours in registry order.
EXTRA_SCORE_COLOURS = ("#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#d62728")


def _score_colour(name: str) -> str:
    if name in SCORE_COLOURS:
        return SCORE_COLOURS[name]
    from .scores import REGISTRY

    extra = [n for n in REGISTRY if n not in SCORE_COLOURS]
    index = extra.index(name) if name in extra else len(extra)
    return EXTRA_SCORE_COLOURS[index % len(EXTRA_SCORE_COLOURS)]


def _score_style(name: str):
    """Dashed for temp; dash-dotted for a registry score past the sixth extra colour."""
    if name in SCORE_STYLES:
        return SCORE_STYLES[name]
    from .scores import REGISTRY

    extra = [n for n in REGISTRY if n not in SCORE_COLOURS]
    return "-." if name not in SCORE_COLOURS and name in extra and extra.index(name) >= 6 else "-"


def _all_scores(models, every: bool) -> list[str]:
    """Scores with a curve, in the order of the models' curves (registry order): those of any
    model (``every`` False) or of every model."""
    names = list(dict.fromkeys(s for m in models for s in m.curves))
    return [s for s in names if (all if every else any)(s in m.curves for m in models)]
CORRECT_COLOUR, ERROR_COLOUR = "#1f77b4", "#d62728"


# ========================================================================== data
@dataclass(frozen=True)
class RCPoints:
    """Vertices of the drawn risk-coverage curve, in percent.

    The curve is the step function that the operating points define: at a coverage c
    the risk is that of the first operating point whose coverage is at least c (the
    rule of ``risk@c``), so a tie group accepted at once is a horizontal step across the
    coverage it adds, followed by a vertical jump to the next group's risk.
    """

    coverage: np.ndarray
    risk: np.ndarray
    thinned: bool


def rc_curve_points(curve, max_points: int | None = DEFAULT_MAX_POINTS) -> RCPoints:
    """Step coordinates (coverage %, risk %) of a :class:`~selcal.selective.RiskCoverage`.

    Parameters
    ----------
    curve : RiskCoverage
        Tie-grouped operating points (``accepted``, ``errors``, ``n``).
    max_points : int or None
        Above this many vertices the polyline is thinned by min/max decimation: the
        coverage axis is cut into ``max_points // 4`` equal buckets and each bucket keeps
        its first and last vertex and the vertices of its lowest and highest risk, in
        order. Every kept vertex is an exact vertex of the full curve, the segments
        between buckets are exact, and inside a bucket (0.1% of coverage by default,
        below a pixel) the drawn band spans the same risks, so the shape does not change.
        ``None`` never thins.

    Returns
    -------
    RCPoints
        ``coverage`` starts at 0 and ends at 100; ``risk`` holds r_g on (c_{g-1}, c_g].

    Examples
    --------
    >>> from selcal.selective import risk_coverage
    >>> pts = rc_curve_points(risk_coverage([0.9, 0.8, 0.8, 0.1], [True, True, False, False]))
    >>> pts.coverage.tolist()
    [0.0, 25.0, 25.0, 75.0, 75.0, 100.0]
    >>> [round(r, 2) for r in pts.risk.tolist()]
    [0.0, 0.0, 33.33, 33.33, 50.0, 50.0]
    """
    coverage = 100.0 * (np.asarray(curve.accepted, dtype=np.float64) / curve.n)
    risk = 100.0 * (np.asarray(curve.errors, dtype=np.float64) / np.asarray(curve.accepted, dtype=np.float64))
    g = coverage.size
    x = np.empty(2 * g)
    x[0] = 0.0
    x[1::2] = coverage
    x[2::2] = coverage[:-1]
    y = np.repeat(risk, 2)
    if max_points is None or x.size <= max_points:
        return RCPoints(x, y, thinned=False)
    keep = _minmax_decimation(x, y, max(1, int(max_points) // 4), 100.0)
    return RCPoints(x[keep], y[keep], thinned=True)


def _minmax_decimation(x: np.ndarray, y: np.ndarray, n_buckets: int, x_max: float) -> np.ndarray:
    """Indices to keep: first, last, argmin and argmax of y in each x bucket (x nondecreasing)."""
    bucket = np.minimum((x / x_max * n_buckets).astype(np.int64), n_buckets - 1)
    starts = np.flatnonzero(np.diff(bucket, prepend=-1))
    ends = np.append(starts[1:], x.size)
    keep = []
    for a, b in zip(starts.tolist(), ends.tolist()):
        segment = y[a:b]
        keep.extend((a, b - 1, a + int(np.argmin(segment)), a + int(np.argmax(segment))))
    return np.unique(np.asarray(keep, dtype=np.int64))


@dataclass(frozen=True)
class ReliabilityData:
    """Per-bin numbers of a reliability diagram (equal-width bins; NaN where a bin is empty)."""

    edges: np.ndarray
    count: np.ndarray
    accuracy: np.ndarray
    confidence: np.ndarray
    n: int
    overall_accuracy: float
    overall_confidence: float

    @property
    def empty(self) -> np.ndarray:
        return self.count == 0

    @property
    def gap(self) -> np.ndarray:
        """confidence - accuracy per bin (positive: over-confident); NaN for empty bins."""
        return self.confidence - self.accuracy

    def ece(self) -> float:
        """sum_b (n_b/N) |acc_b - conf_b| over the non-empty bins (equals the reported ECE)."""
        full = ~self.empty
        return math.fsum(self.count[full] * np.abs(self.gap[full])) / self.n


def reliability_data(confidence, correct, n_bins: int = calibration.DEFAULT_BINS) -> ReliabilityData:
    """Bins of the reliability diagram, from :func:`selcal.calibration.binned_calibration`.

    Examples
    --------
    >>> d = reliability_data([0.9, 0.9, 0.6, 0.6], [1, 0, 1, 1], n_bins=10)
    >>> d.count.tolist()[5], d.accuracy.tolist()[5], d.accuracy.tolist()[8]
    (2.0, 1.0, 0.5)
    >>> round(d.ece(), 12)
    0.4
    """
    binned = calibration.binned_calibration(confidence, correct, n_bins)
    count = binned.count
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.where(count > 0, binned.hits / count, np.nan)
        mean_confidence = np.where(count > 0, binned.confidence_sum / count, np.nan)
    n = int(count.sum())
    return ReliabilityData(
        edges=np.arange(n_bins + 1, dtype=np.float64) / n_bins,
        count=count,
        accuracy=accuracy,
        confidence=mean_confidence,
        n=n,
        overall_accuracy=float(binned.hits.sum() / n),
        overall_confidence=math.fsum(binned.confidence_sum) / n,
    )


@dataclass(frozen=True)
class WindowSeries:
    """mean and std of v_max per window for one subset (NaN where the window is skipped)."""

    mean: np.ndarray
    std: np.ndarray
    count: np.ndarray


@dataclass(frozen=True)
class SlidingWindowStats:
    """Windows [lo, hi) of MSP (the last one closed at 1) and the statistics in each."""

    lo: np.ndarray
    hi: np.ndarray
    correct: WindowSeries
    incorrect: WindowSeries

    @property
    def centre(self) -> np.ndarray:
        return (self.lo + self.hi) / 2

    @property
    def difference(self) -> np.ndarray:
        """Mean v_max of the incorrect minus that of the correct (NaN where either is skipped)."""
        return self.incorrect.mean - self.correct.mean


def sliding_window_stats(msp, vmax, correct, width: float = 0.05, step: float = 0.01,
                         min_count: int = 10) -> SlidingWindowStats:
    """v_max given the MSP, for correct and incorrect predictions separately.

    Windows are [i * step, i * step + width) for i = 0, 1, ... while they fit in [0, 1];
    a window reaching 1 is closed on the right, so MSP = 1 is counted. In each window and
    subset, the mean and the (population) standard deviation of v_max; windows with fewer
    than ``min_count`` samples of a subset are skipped for that subset (NaN, which the
    drawing shows as a gap rather than a line across).

    References
    ----------
    Xia et al., "Understanding why label smoothing degrades selective classification",
    2024, fig. 9 right (0.05-wide sliding window).

    Examples
    --------
    >>> s = sliding_window_stats([0.5] * 10 + [0.9] * 3, [1.0] * 10 + [2.0] * 3, [True] * 13)
    >>> float(s.correct.mean[s.lo.tolist().index(0.46)]), int(np.isnan(s.correct.mean).sum())
    (1.0, 91)
    """
    msp = np.asarray(msp, dtype=np.float64)
    vmax = np.asarray(vmax, dtype=np.float64)
    correct = np.asarray(correct, dtype=bool)
    if not (msp.shape == vmax.shape == correct.shape):
        raise ValueError("msp, vmax and correct must have the same length")
    if not (0 < width <= 1 and 0 < step <= 1):
        raise ValueError("width and step must be in (0, 1]")
    n_windows = int(math.floor((1.0 - width) / step + 1e-9)) + 1
    lo = np.round(np.arange(n_windows) * step, 12)
    hi = np.round(lo + width, 12)
    series = {}
    for name, subset in (("correct", correct), ("incorrect", ~correct)):
        m, v = msp[subset], vmax[subset]
        mean = np.full(n_windows, np.nan)
        std = np.full(n_windows, np.nan)
        count = np.zeros(n_windows, dtype=np.int64)
        for i in range(n_windows):
            inside = (m >= lo[i]) & ((m < hi[i]) | (hi[i] >= 1.0) & (m <= 1.0))
            count[i] = np.count_nonzero(inside)
            if count[i] >= min_count:
                values = v[inside]
                mean[i] = math.fsum(values) / values.size
                std[i] = math.sqrt(math.fsum((values - mean[i]) ** 2) / values.size)
        series[name] = WindowSeries(mean, std, count)
    return SlidingWindowStats(lo, hi, series["correct"], series["incorrect"])


@dataclass(frozen=True)
class LSCeiling:
    """The label-smoothing target ceiling, the share of samples whose MSP exceeds it, and
    the error rate among those samples (``None`` when correctness was not given or none exceed)."""

    alpha: float
    ceiling: float
    share_above: float
    error_rate_above: float | None


def ls_ceiling_share(msp, alpha: float, num_classes: int, correct=None) -> LSCeiling:
    """The label-smoothing target ceiling (1 - alpha) + alpha / K and who exceeds it.

    The LS training target of the true class never exceeds the ceiling, so an MSP above
    it is one the training targets never asked for; Xia et al. (2024, sec. 3.1) find the
    selective-classification damage of LS concentrated on these samples.

    Examples
    --------
    >>> c = ls_ceiling_share([0.5, 0.95, 0.99, 0.91], 0.1, 10, correct=[True, True, False, True])
    >>> round(c.ceiling, 12), c.share_above, c.error_rate_above
    (0.91, 0.5, 0.5)
    """
    ceiling = (1.0 - alpha) + alpha / num_classes
    msp = np.asarray(msp, dtype=np.float64)
    above = msp > ceiling
    error_rate = None
    if correct is not None and above.any():
        error_rate = float(np.count_nonzero(above & ~np.asarray(correct, dtype=bool)) / np.count_nonzero(above))
    return LSCeiling(float(alpha), ceiling, float(np.count_nonzero(above) / msp.size), error_rate)


@dataclass(frozen=True)
class PnormSearch:
    """The validation objective of every p, MSP's, and what was chosen."""

    p: np.ndarray
    objective: np.ndarray
    msp: float | None
    chosen_p: int | None
    fallback: bool
    objective_name: str


def pnorm_search_data(metrics: dict[str, Any]) -> PnormSearch:
    """From a model's ``scores["pnorm"]`` dict (``val_objective``, ``val_objective_msp``, ``p``)."""
    items = sorted((int(p), value) for p, value in metrics["val_objective"].items())
    values = [np.nan if v is None else float(v) for _, v in items]
    msp = metrics.get("val_objective_msp")
    return PnormSearch(
        p=np.array([p for p, _ in items], dtype=np.int64),
        objective=np.array(values, dtype=np.float64),
        msp=None if msp is None else float(msp),
        chosen_p=metrics.get("p"),
        fallback=bool(metrics.get("fallback", False)),
        objective_name=str(metrics.get("objective", "aurc")),
    )


@dataclass(frozen=True)
class GroupErrors:
    """Errors accepted at one operating point, split by group."""

    target_coverage: float
    coverage: float
    accepted: int
    errors: int
    groups: dict[str, int]
    accepted_by_group: dict[str, int]


def errors_at_coverage_by_group(curve, score, correct, groups, coverage: float = DEFAULT_AT_COVERAGE) -> GroupErrors:
    """Errors accepted at the first operating point whose coverage reaches ``coverage``, by group.

    The operating point is the one ``risk@c`` uses; it accepts every row whose score is
    at least that point's threshold, so whole tie groups are accepted and the counts are
    integers. The counts over the groups add up to the curve's error count there.

    References
    ----------
    Xia et al. 2024, fig. 8 right (errors at 10% coverage, ImageNet vs ImageNet-Sketch).

    Examples
    --------
    >>> from selcal.selective import risk_coverage
    >>> score, ok = [0.9, 0.8, 0.7, 0.1], [False, True, False, True]
    >>> e = errors_at_coverage_by_group(risk_coverage(score, ok), score, ok, ["a", "b", "b", "a"], 0.5)
    >>> e.accepted, e.errors, e.groups
    (2, 1, {'a': 1, 'b': 0})
    """
    if not 0 < coverage <= 1:
        raise ValueError("coverage must be in (0, 1]")
    score = np.asarray(score, dtype=np.float64)
    correct = np.asarray(correct, dtype=bool)
    groups = np.asarray(groups)
    point = int(np.flatnonzero(curve.coverage >= coverage)[0])
    accepted = score >= curve.thresholds[point]
    names, index = np.unique(groups, return_inverse=True)  # one pass, however many groups
    index = index.reshape(-1)
    errors = np.bincount(index[accepted & ~correct], minlength=names.size)
    taken = np.bincount(index[accepted], minlength=names.size)
    labels = [str(g) for g in names.tolist()]
    by_group = dict(zip(labels, errors.tolist()))
    accepted_by_group = dict(zip(labels, taken.tolist()))
    return GroupErrors(
        target_coverage=float(coverage),
        coverage=float(curve.coverage[point]),
        accepted=int(curve.accepted[point]),
        errors=int(round(float(curve.errors[point]))),
        groups=by_group,
        accepted_by_group=accepted_by_group,
    )


# ======================================================================= drawing
_STYLE = {
    "font.size": 9.5,
    "axes.titlesize": 10.5,
    "axes.labelsize": 9.5,
    "legend.fontsize": 8.5,
    "xtick.labelsize": 8.5,
    "ytick.labelsize": 8.5,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "savefig.dpi": 150,
    "svg.hashsalt": "selcal",
    "svg.fonttype": "path",
    "pdf.fonttype": 42,
    "text.usetex": False,  # a user's matplotlibrc must not send model names through TeX
}
# Fonts that cover scripts DejaVu Sans lacks, used (in this order) when installed: matplotlib
# falls back glyph by glyph through font.family. Characters no installed font has are drawn as
# REPLACEMENT_CHARACTER (see user_text), so a file name in any script never warns.
FALLBACK_FONTS = ("Noto Sans CJK JP", "Noto Sans CJK SC", "Noto Sans CJK TC", "Noto Sans CJK KR",
                  "Source Han Sans", "WenQuanYi Zen Hei", "WenQuanYi Micro Hei", "Droid Sans Fallback",
                  "Noto Sans", "Arial Unicode MS", "Microsoft YaHei", "PingFang SC", "Hiragino Sans")
REPLACEMENT_CHARACTER = "\ufffd"


def _mpl():
    """matplotlib's Figure and the Agg canvas, imported on first use (never pyplot)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    return matplotlib, Figure, FigureCanvasAgg


@functools.lru_cache(maxsize=1)
def _fonts() -> tuple[tuple[str, ...], frozenset[int]]:
    """The font.family chain (DejaVu Sans, then the installed FALLBACK_FONTS) and the code
    points it covers. Only installed families are named, so font_manager never logs a miss."""
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    installed = {entry.name for entry in font_manager.fontManager.ttflist}
    families = ("DejaVu Sans",) + tuple(f for f in FALLBACK_FONTS if f in installed)
    covered: set[int] = set()
    for family in families:
        try:
            path = font_manager.findfont(font_manager.FontProperties(family=family), fallback_to_default=False)
            covered.update(FT2Font(path).get_charmap())
        except (ValueError, OSError, RuntimeError):  # listed but unreadable: its glyphs count as missing
            continue
    return families, frozenset(covered)


def _style() -> dict[str, Any]:
    """:data:`_STYLE` with the font chain of this machine."""
    return {**_STYLE, "font.family": list(_fonts()[0])}


def user_text(text, limit: int | None = None, *, escape: bool = True) -> str:
    r"""``text`` from the user (a model or file name, an id, a group value) as matplotlib draws it literally.

    matplotlib treats a string with an even number of unescaped ``$`` as mathtext, where
    ``_``, ``^`` and ``\`` are markup and a malformed formula raises while the figure is
    saved. Every ``$`` is escaped here (matplotlib draws ``\$`` as ``$``), so user text is
    never parsed, whatever else the label holds; labels that carry user text therefore hold
    no mathtext of selcal's own. Characters that no font of the chain (:data:`FALLBACK_FONTS`)
    can draw become :data:`REPLACEMENT_CHARACTER` instead of a missing-glyph warning.
    With ``limit``, a longer text is cut in its middle to ``limit`` characters ("head…tail"),
    so that a long name cannot squeeze the axes out of a figure (``NAME_LIMITS``).
    ``escape=False`` for a text artist made with ``parse_math=False`` (which would draw the
    escaping backslash): glyphs and length are handled the same.
    Every drawing function of this module (and any figure added to it) passes model names,
    group values and file names through this function.

    Examples
    --------
    >>> user_text("a$b_c^d\\e")
    'a\\$b_c^d\\e'
    >>> user_text("\u6a21\u578b_\u03b2") == ("\u6a21\u578b" if 0x6a21 in _fonts()[1] else "\ufffd\ufffd") + "_\u03b2"
    True
    >>> user_text(3)
    '3'
    >>> user_text("resnet50_imagenet_seed0_final", limit=12)
    'resne…_final'
    """
    text = str(text)
    covered = _fonts()[1]
    if covered:
        text = "".join(c if ord(c) in covered or c == "\n" else REPLACEMENT_CHARACTER for c in text)
    if limit is not None and len(text) > limit:
        head = (limit - 1) // 2
        text = text[:head] + "…" + text[len(text) - (limit - 1 - head):]
    return text.replace("$", "\\$") if escape else text


def _new_figure(width: float, height: float):
    _, Figure, FigureCanvasAgg = _mpl()
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _pct(value) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{100 * value:.2f}%"


def _score_detail(name: str, model) -> str:
    """What was fitted for a score: ' (p = 2)', ' (falls back to MSP)', ' (T = 2.28)' or ''."""
    metrics = model.scores.get(name, {})
    if name == "pnorm":
        if metrics.get("fallback"):
            return " (falls back to MSP)"
        if metrics.get("p") is not None:
            return f" (p = {metrics['p']})"
    if name == "temp" and metrics.get("temperature") is not None:
        return f" (T = {metrics['temperature']:.2f})"
    return ""


def _score_label(name: str, model=None) -> str:
    return SCORE_LABELS.get(name, name) + ("" if model is None else _score_detail(name, model))


def _model_colours(count: int) -> list:
    matplotlib, _, _ = _mpl()
    if count <= 10:
        cmap = matplotlib.colormaps["tab10"]
        return [cmap(i) for i in range(count)]
    cmap = matplotlib.colormaps["viridis"]
    return [cmap(i / max(count - 1, 1)) for i in range(count)]


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


def _legend_below(ax, ncol: int = 1, handles=None):
    """The axes' legend under the x label. Pass ``handles`` when a label carries user text:
    matplotlib's automatic collection drops labels that start with "_", as a model name may."""
    args = () if handles is None else (handles, [h.get_label() for h in handles])
    ax.legend(*args, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=ncol, handlelength=1.8,
              borderaxespad=0.0)


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


def figure_rc(model, *, max_points: int | None = DEFAULT_MAX_POINTS):
    """Risk-coverage curves of every score of one model; AURC in the legend."""
    figure = _new_figure(6.0, 4.9)
    ax = figure.add_subplot()
    entries = [
        (rc_curve_points(curve, max_points),
         f"{_score_label(name, model)}: AURC {_pct(model.scores[name].get('aurc'))}",
         _score_colour(name), _score_style(name))
        for name, curve in model.curves.items()
    ]
    handles = _draw_rc(ax, entries, error_rate_line=model.error)
    ax.set_title(f"{user_text(model.name, NAME_LIMITS['title'])}: risk–coverage\nerror {_pct(model.error)} on {model.n_eval:,} samples")
    _legend_below(ax, handles=handles)
    return figure


def figure_rc_overlay(models, scores: Sequence[str] | None = None, *, max_points: int | None = DEFAULT_MAX_POINTS):
    """One panel per score, one curve per model: the "vary only alpha" figure of Xia et al., fig. 1."""
    if scores is None:
        scores = _all_scores(models, every=False)
    scores = list(scores)
    columns = 1 if len(scores) == 1 else 2
    rows = math.ceil(len(scores) / columns)
    # Up to OVERLAY_LEGEND_MODELS models, each panel's legend gives every model's AURC and error
    # rate; beyond, one shared legend names the models (their numbers are in the tables).
    per_panel = len(models) <= OVERLAY_LEGEND_MODELS
    legend_height = 0.22 * len(models) + 0.3 if per_panel else 0.0
    shared_height = 0.0 if per_panel else 0.2 * math.ceil(len(models) / 4) + 0.3
    figure = _new_figure(5.6 * columns, rows * (3.9 + legend_height) + shared_height)
    axes = figure.subplots(rows, columns, squeeze=False, sharex=True, sharey=True)
    colours = _model_colours(len(models))
    all_points = []
    for ax, score in zip(axes.flat, scores):
        entries = []
        for model, colour in zip(models, colours):
            if score not in model.curves:
                continue
            points = rc_curve_points(model.curves[score], max_points)
            all_points.append(points)
            label = (f"{user_text(model.name, NAME_LIMITS['legend'])}{_score_detail(score, model)}: "
                     f"AURC {_pct(model.scores[score].get('aurc'))}, error {_pct(model.error)}"
                     if per_panel else user_text(model.name, NAME_LIMITS['legend']))
            entries.append((points, label, colour, "-"))
        handles = _draw_rc(ax, entries)
        ax.set_title(SCORE_LABELS.get(score, score))
        ax.tick_params(labelbottom=True, labelleft=True)
        if per_panel:
            _legend_below(ax, handles=handles)
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
        figure.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=4, fontsize=7.5)
    figure.suptitle("risk–coverage by score, one curve per model", fontsize=11)
    return figure


def _probability_scores(model) -> list[tuple[str, np.ndarray]]:
    """(score, top-label confidence per row) for the probability scores of a model: msp and
    temp from the per-row reduction, any other probability score of the registry from its
    per-row value (the log of its top-class probability), and a score column read as a
    probability (it has an ECE; ``--score-col``, or a file with no logits) as it is."""
    from .scores import REGISTRY

    out = []
    for name in model.scores:
        if name == "msp":
            out.append(("msp", np.exp(model.rows.log_msp)))
        elif name == "temp":
            if model.rows.temp_log_msp is not None:
                out.append(("temp", np.exp(model.rows.temp_log_msp)))
        elif getattr(REGISTRY.get(name), "probability", False) and name in model.score_values:
            out.append((name, np.exp(np.asarray(model.score_values[name], dtype=np.float64))))
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


def histogram_top(counts) -> float:
    """Top of the log-scale histogram axis: the next power of ten above the largest bin.

    >>> histogram_top([3, 9_000, 12]), histogram_top([10_000]), histogram_top([1])
    (10000.0, 100000.0, 10.0)
    """
    largest = max(1.0, float(np.max(counts)))
    return 10.0 ** (math.floor(math.log10(largest)) + 1)


def figure_reliability(model, n_bins: int = calibration.DEFAULT_BINS):
    """Reliability diagram (gap shaded, empty bins hatched) over a confidence histogram, per probability score."""
    panels = _probability_scores(model)
    if not panels:
        return None
    figure = _new_figure(max(4.6 * len(panels), 7.0), 6.4)
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
        ax.set_title(f"{_score_label(score, model)}\nECE {_pct(ece)} ({n_bins} bins)")
        handles, labels = ax.get_legend_handles_labels()
        for handle, label in zip(handles, labels):
            legend_entries.setdefault(label, handle)
        hist.bar(left[full], data.count[full], width=width[full], align="edge", color="0.55", edgecolor="white",
                 linewidth=0.5)
        hist.set_yscale("log")
        hist.set_ylim(0.7, histogram_top(data.count))
        hist.axvline(data.overall_accuracy, color="#08519c", linestyle="--", linewidth=1.0,
                     label=f"accuracy {100 * data.overall_accuracy:.1f}%")
        hist.axvline(data.overall_confidence, color="#cb181d", linestyle=":", linewidth=1.2,
                     label=f"mean confidence {100 * data.overall_confidence:.1f}%")
        hist.set_xlabel("confidence (top-label probability)")
        hist.set_ylabel("samples (log)")
        hist.legend(loc="upper center", bbox_to_anchor=(0.5, -0.42), ncol=2, fontsize=7.5, borderaxespad=0.0)
    figure.legend(list(legend_entries.values()), list(legend_entries), loc="outside lower center",
                  ncol=2 if len(panels) == 1 else min(len(legend_entries), 3))
    figure.suptitle(f"{user_text(model.name, NAME_LIMITS['title'])}: reliability on {model.n_eval:,} samples", fontsize=11)
    return figure


def vmax_msp_skip_reason(model) -> str | None:
    """Why ``vmax_msp`` is not drawn for ``model`` (None: it is drawn).

    Not drawn without MSP or per-row values, and when the logit column holds probabilities
    or log-probabilities (:func:`selcal.evaluate.logit_kind`, the rule of the table's
    warning): the max logit is then the MSP or its log, so the two curves would only
    redraw the MSP axis and the difference between them would be zero by construction.
    """
    if "msp" not in model.scores:
        return None if model.rows is None else "msp was not evaluated"
    if model.rows is None:
        return "the result holds no per-row values"
    from .evaluate import logit_kind

    kind = logit_kind(model.rows)
    if kind != "logits":
        return (f"the logits look like {kind}, so the max logit is "
                + ("the MSP" if kind == "probabilities" else "log MSP") + " and says nothing beyond it")
    return None


def _vmax_stats(model) -> SlidingWindowStats:
    return sliding_window_stats(np.exp(model.rows.log_msp), model.rows.max_logit, model.rows.correct)


def vmax_msp_limits(stats: Sequence[SlidingWindowStats]) -> tuple[float, float]:
    """Shared y limits of the upper vmax_msp panels of an overlay: every mean ± std band of
    every model, with a 5% margin."""
    values = np.concatenate([np.asarray(s.mean + sign * s.std, dtype=np.float64)
                             for st in stats for s in (st.correct, st.incorrect) for sign in (-1, 1)])
    values = values[np.isfinite(values)]
    if values.size == 0:
        return (-1.0, 1.0)
    lo, hi = float(values.min()), float(values.max())
    margin = 0.05 * (hi - lo) or 0.5
    return (lo - margin, hi + margin)


def _draw_vmax_msp(ax, diff_ax, model, ls_alpha: float | None, stats: SlidingWindowStats | None = None):
    """Mean ± std of v_max per MSP window (top) and the difference of the means (bottom).

    Returns the legend entries ((handle, label): one per subset, then the ceiling line) and
    the ceiling line (or None).
    """
    msp = np.exp(model.rows.log_msp)
    stats = stats if stats is not None else _vmax_stats(model)
    x = stats.centre
    entries = []
    for series, colour, label in ((stats.correct, CORRECT_COLOUR, "correct ✓"),
                                  (stats.incorrect, ERROR_COLOUR, "incorrect ✗")):
        (line,) = ax.plot(x, series.mean, color=colour, linewidth=1.6, label=f"{label}: mean")
        band = ax.fill_between(x, series.mean - series.std, series.mean + series.std, color=colour, alpha=0.18,
                               linewidth=0, label=f"{label}: ± std")
        entries.append(((band, line), f"{label}: mean ± std"))
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
        diff_ax.axvline(c.ceiling, color="0.25", linestyle="--", linewidth=1.0)
    ax.tick_params(labelbottom=False)
    ax.set_ylabel("max logit $v_{max}$ (logit units; mean ± std)")
    diff_ax.set_ylabel("✗ − ✓ mean $v_{max}$\n(logit units)")
    diff_ax.set_xlabel("MSP (window centre; 0.05 wide, step 0.01)")
    if line is not None:
        entries.append((line, line.get_label()))
    return entries, line


def figure_vmax_msp(model, ls_alpha: float | None = None):
    """v_max given the MSP for correct and incorrect predictions (Xia et al. 2024, fig. 9 right)."""
    figure = _new_figure(6.0, 6.0)
    grid = figure.add_gridspec(2, 1, height_ratios=[3.0, 1.0])
    ax = figure.add_subplot(grid[0])
    diff_ax = figure.add_subplot(grid[1], sharex=ax)
    entries, _ = _draw_vmax_msp(ax, diff_ax, model, ls_alpha)
    ax.set_title(f"{user_text(model.name, NAME_LIMITS['title'])}: max logit given MSP\n(windows with < 10 samples skipped)")
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
    stats = [_vmax_stats(m) for m in models]
    top_limits = limits if limits is not None else vmax_msp_limits(stats)
    columns = min(len(models), 3)
    rows = math.ceil(len(models) / columns)
    figure = _new_figure(4.9 * columns, 6.2 * rows)
    grid = figure.add_gridspec(2 * rows, columns, height_ratios=[3.0, 1.0] * rows)
    shared = {}
    first = None
    for index, (model, alpha, model_stats) in enumerate(zip(models, ls_alphas, stats)):
        row, column = divmod(index, columns)
        ax = figure.add_subplot(grid[2 * row, column], sharex=first)
        first = first or ax
        diff_ax = figure.add_subplot(grid[2 * row + 1, column], sharex=first)
        entries, ceiling = _draw_vmax_msp(ax, diff_ax, model, alpha, model_stats)
        ax.set_ylim(*top_limits)
        ax.set_title(user_text(model.name, NAME_LIMITS["legend"]))
        for handle, label in entries:
            if handle is not ceiling:
                shared.setdefault(label, handle)
        if ceiling is not None:
            diff_ax.legend([ceiling], [ceiling.get_label()], loc="upper center", bbox_to_anchor=(0.5, -0.42))
    figure.legend(list(shared.values()), list(shared), loc="outside lower center", ncol=2)
    scope = "" if page is None or page[1] == 1 else f" of all {page[1]} figures"
    part = "" if page is None or page[1] == 1 else f" ({page[0]} of {page[1]})"
    figure.suptitle(f"max logit given MSP, correct vs incorrect (mean ± std in a sliding window){part}\n"
                    f"upper panels{scope}: same y axis; difference panels: each its own y scale", fontsize=11)
    return figure


def figure_pnorm_search(model):
    """Validation objective against p, MSP as a horizontal line, the chosen p marked."""
    metrics = model.scores.get("pnorm")
    if not metrics or "val_objective" not in metrics:
        return None
    data = pnorm_search_data(metrics)
    name = data.objective_name.upper()
    figure = _new_figure(6.0, 4.4)
    ax = figure.add_subplot()
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
    ax.set_title(f"{user_text(model.name, NAME_LIMITS['title'])}: choice of p on {model.n_val:,} validation samples\n(lower is better)")
    _legend_below(ax)
    return figure


def shown_groups(stacks: Sequence[GroupErrors], limit: int = MAX_GROUP_BARS) -> tuple[list[str], list[str]]:
    """The groups drawn one by one in ``errors_by_group``, and those merged into one "other" bar.

    Up to ``limit + 1`` groups every group is drawn. Beyond, the ``limit`` groups with the
    most errors over all the bars of the figure (every model and score: the groups that
    hold the errors the figure is about) are drawn, ties broken by the number of accepted
    rows and then by name; the rest is summed into "other". Drawn groups keep name order.

    Examples
    --------
    >>> g = GroupErrors(0.1, 0.1, 9, 6, {"a": 1, "b": 3, "c": 0, "d": 2}, {"a": 2, "b": 3, "c": 2, "d": 2})
    >>> shown_groups([g], limit=2)
    (['b', 'd'], ['a', 'c'])
    >>> shown_groups([g], limit=3)
    (['a', 'b', 'c', 'd'], [])
    """
    errors: dict[str, int] = {}
    taken: dict[str, int] = {}
    for stack in stacks:
        for group, count in stack.groups.items():
            errors[group] = errors.get(group, 0) + count
            taken[group] = taken.get(group, 0) + stack.accepted_by_group.get(group, 0)
    names = sorted(errors)
    if len(names) <= limit + 1:
        return names, []
    ranked = sorted(names, key=lambda g: (-errors[g], -taken[g], g))
    top = set(ranked[:limit])
    return [g for g in names if g in top], [g for g in names if g not in top]


def figure_errors_by_group(models, coverage: float = DEFAULT_AT_COVERAGE, scores: Sequence[str] | None = None):
    """Errors accepted at a coverage, stacked by group, one bar per model and a panel per score.

    With more than ``MAX_GROUP_BARS + 1`` groups, the groups of :func:`shown_groups` are
    drawn and the rest is one grey "other (N groups)" bar on top of each stack.
    """
    models = [m for m in models if m.groups is not None]
    if not models:
        return None
    if scores is None:
        scores = _all_scores(models, every=True)
    scores = list(scores)
    stacks = {score: [errors_at_coverage_by_group(m.curves[score], m.score_values[score], m.rows.correct, m.groups,
                                                  coverage) for m in models] for score in scores}
    group_names, others = shown_groups([s for per_score in stacks.values() for s in per_score])
    matplotlib, _, _ = _mpl()
    cmap = matplotlib.colormaps["Set2" if len(group_names) <= 8 else "tab10"]
    colours = {g: cmap(i % cmap.N) for i, g in enumerate(group_names)}
    other_label = f"other ({len(others):,} groups)"
    many = len(models) > 8
    width = min(max(3.2, 0.9 + 0.55 * len(models)), 8.0)
    columns = len(scores) if width * len(scores) <= 16 else max(1, int(16 // width))
    rows = math.ceil(len(scores) / columns)
    figure = _new_figure(width * columns, (4.8 + (0.9 if many else 0.0)) * rows)
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
        ax.set_xticks(x, [user_text(m.name, NAME_LIMITS["tick"]) for m in models], rotation=90 if many else (30 if len(models) > 2 else 0),
                      ha="center" if many or len(models) <= 2 else "right", fontsize=7 if many else None)
        ax.set_title(SCORE_LABELS.get(score, score))
        ax.grid(axis="x", visible=False)
    axes[0].set_ylabel(f"errors among the accepted at {100 * coverage:g}% coverage")
    top = max(1.0, max(ax.get_ylim()[1] for ax in axes))
    axes[0].set_ylim(0, top * 1.1)
    title = "group" if not others else f"group ({MAX_GROUP_BARS} with the most errors drawn; the rest as other)"
    # Explicit handles and labels: automatic collection would drop a group named "_x".
    figure.legend(list(legend.values()), list(legend), loc="outside lower center", ncol=min(len(legend), 6),
                  title=title)
    figure.suptitle(f"errors accepted at {100 * coverage:g}% coverage, by group (label: errors"
                    + ("" if many else " of accepted") + ")", fontsize=11)
    return figure


# ==================================================================== rendering
@dataclass
class RenderedFigure:
    """One figure as file content: ``stem`` (file name without extension), ``kind``,
    the model it shows (``None`` for figures across models), a caption, and the bytes."""

    stem: str
    kind: str
    model: str | None
    caption: str
    format: str
    data: bytes
    path: Path | None = None


def _render(figure, fmt: str) -> bytes:
    buffer = _io.BytesIO()
    metadata = {"png": {"Software": None}, "svg": {"Date": None}, "pdf": {"CreationDate": None}}[fmt]
    figure.savefig(buffer, format=fmt, metadata=metadata)
    figure.clear()
    return buffer.getvalue()


def _safe(name: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "model"
    return stem[:120]


def _alphas_for(models, ls_alpha) -> list[float | None]:
    if ls_alpha is None:
        return [None] * len(models)
    if isinstance(ls_alpha, (int, float)):
        return [float(ls_alpha)] * len(models)
    values = list(ls_alpha)
    if len(values) == 1:
        return values * len(models)
    if len(values) != len(models):
        raise SelcalError(f"--ls-alpha takes one value or one per TEST file ({len(models)}); got {len(values)}")
    return values


def _validate(fmt: str, ls_alpha, at_coverage: float, n_models: int) -> list:
    if fmt not in PLOT_FORMATS:
        raise SelcalError(f"--plot-format must be one of {', '.join(PLOT_FORMATS)}; got {fmt!r}")
    if not 0 < at_coverage <= 1:
        raise SelcalError(f"--at-coverage must be a fraction in (0, 1], e.g. 0.1; got {at_coverage:g}")
    alphas = _alphas_for(range(n_models), ls_alpha)
    if any(a is not None and not 0 <= a < 1 for a in alphas):
        raise SelcalError("--ls-alpha must be in [0, 1), e.g. 0.1")
    return alphas


def overlay_pages(count: int, per_page: int = OVERLAY_VMAX_MODELS) -> list[range]:
    """Models 0..count-1 cut into the fewest figures of at most ``per_page``, as even as can be.

    >>> overlay_pages(7)
    [range(0, 4), range(4, 7)]
    >>> overlay_pages(6)
    [range(0, 6)]
    """
    pages = max(1, math.ceil(count / per_page))
    size = math.ceil(count / pages)
    return [range(start, min(start + size, count)) for start in range(0, count, size)]


def render_figures(result, fmt: str = "png", *, ls_alpha=None, at_coverage: float = DEFAULT_AT_COVERAGE,
                   max_points: int | None = DEFAULT_MAX_POINTS, notes: list[str] | None = None
                   ) -> Iterator[RenderedFigure]:
    """Every figure of ``result``, one at a time (each figure is released once rendered).

    Per model: ``rc``, ``reliability`` (if msp or temp was evaluated), ``vmax_msp`` (if
    msp was and :func:`vmax_msp_skip_reason` allows), ``pnorm_search`` (if pnorm was).
    Across models, when there are several: ``overlay_rc`` and ``overlay_vmax_msp`` (for
    more than ``OVERLAY_VMAX_MODELS`` models, several figures ``overlay_vmax_msp_1``,
    ``_2``, ... of :func:`overlay_pages` sharing their y axes); when rows have groups:
    ``errors_by_group``. ``ls_alpha``: one label-smoothing level for every model, or one
    per model (None or 0 for none), drawn as the target ceiling on ``vmax_msp``.

    ``notes``: a list that receives one line per figure that was asked for but is not
    drawn, or that leaves a model out, with the reason (``selcal evaluate`` prints them
    as ``selcal: note: ...``). Nothing is skipped silently.
    """
    notes = notes if notes is not None else []
    from .scores import REGISTRY as score_registry

    models = list(result.models)
    alphas = _validate(fmt, ls_alpha, at_coverage, len(models))
    bins = getattr(result.options, "bins", calibration.DEFAULT_BINS) if result.options is not None else \
        calibration.DEFAULT_BINS
    matplotlib, _, _ = _mpl()
    used: set[str] = set()

    def stem_for(base: str) -> str:
        stem, i = base, 2
        while stem in used:
            stem, i = f"{base}-{i}", i + 1
        used.add(stem)
        return stem

    def build(kind, model_name, caption, make, base=None):
        with matplotlib.rc_context(_style()):
            figure = make()
            if figure is None:
                return None
            data = _render(figure, fmt)
        base = base or (f"{_safe(model_name)}_{kind}" if model_name is not None else kind)
        return RenderedFigure(stem=stem_for(base), kind=kind, model=model_name, caption=caption, format=fmt, data=data)

    vmax_reasons = [vmax_msp_skip_reason(m) for m in models]
    if len(models) > 1:
        jobs = [
            ("overlay_rc", None, "Risk–coverage of every model, one panel per score.",
             lambda: figure_rc_overlay(models, max_points=max_points)),
        ]
        drawn = [i for i, reason in enumerate(vmax_reasons) if reason is None]
        by_reason: dict[str, list[str]] = {}
        for m, reason in zip(models, vmax_reasons):
            if reason is not None and "msp" in m.scores:
                by_reason.setdefault(reason, []).append(m.name)
        left_out = [f"{', '.join(names)} ({reason})" for reason, names in by_reason.items()]
        if len(drawn) >= 2:
            if left_out:
                notes.append(f"overlay_vmax_msp leaves out {'; '.join(left_out)}")
            pages = overlay_pages(len(drawn))
            limits = vmax_msp_limits([_vmax_stats(models[i]) for i in drawn]) if len(pages) > 1 else None
            for number, page in enumerate(pages, 1):
                chosen = [drawn[i] for i in page]
                which = "" if len(pages) == 1 else \
                    f" Models {page.start + 1}–{page.stop} of {len(drawn)}; upper panels share their y axis " \
                    f"across all {len(pages)} figures."
                jobs.append(("overlay_vmax_msp", None,
                             "Max logit given MSP, correct vs incorrect, per model." + which,
                             lambda c=chosen, n=number: figure_vmax_msp_overlay(
                                 [models[i] for i in c], [alphas[i] for i in c], limits=limits,
                                 page=(n, len(pages))),
                             "overlay_vmax_msp" if len(pages) == 1 else f"overlay_vmax_msp_{number}"))
        elif left_out:
            notes.append(f"overlay_vmax_msp not drawn: fewer than two models can be drawn; {'; '.join(left_out)}")
        for job in jobs:
            rendered = build(*job)
            if rendered is not None:
                yield rendered
    if any(m.groups is not None for m in models):
        rendered = build("errors_by_group", None,
                         f"Errors accepted at {100 * at_coverage:g}% coverage, stacked by group.",
                         lambda: figure_errors_by_group(models, at_coverage))
        if rendered is not None:
            yield rendered
    from . import plots_diagnostics  # sweeps, logit profiles: their own module

    for job in plots_diagnostics.across_model_jobs(models):
        rendered = build(*job)
        if rendered is not None:
            yield rendered
    for model, alpha, vmax_reason in zip(models, alphas, vmax_reasons):
        jobs = [("rc", "Risk–coverage, one curve per score.", lambda m=model: figure_rc(m, max_points=max_points))]
        has_rows = model.rows is not None
        if any(getattr(score_registry.get(name), "probability", False) or
               (name not in score_registry and "ece" in metrics) for name, metrics in model.scores.items()):
            if has_rows:
                jobs.append(("reliability", "Reliability diagram and confidence histogram.",
                             lambda m=model: figure_reliability(m, bins)))
            else:
                notes.append(f"{_safe(model.name)}_reliability not drawn: the result holds no per-row values")
        if "msp" in model.scores:
            if vmax_reason is None:
                jobs.append(("vmax_msp", "Max logit given MSP for correct and incorrect predictions.",
                             lambda m=model, a=alpha: figure_vmax_msp(m, a)))
            else:
                notes.append(f"{_safe(model.name)}_vmax_msp not drawn: {vmax_reason}")
        if "pnorm" in model.scores:
            jobs.append(("pnorm_search", "Validation objective of every p; MSP as a line.",
                         lambda m=model: figure_pnorm_search(m)))
        jobs += plots_diagnostics.model_jobs(model, notes)
        for kind, caption, make in jobs:
            rendered = build(kind, model.name, caption, make)
            if rendered is not None:
                yield rendered
            elif kind == "pnorm_search":
                notes.append(f"{_safe(model.name)}_pnorm_search not drawn: the result holds no validation "
                             "objective per p (p-norm was not fitted on validation rows)")


def write_plots(result, folder, fmt: str = "png", *, ls_alpha=None, at_coverage: float = DEFAULT_AT_COVERAGE,
                max_points: int | None = DEFAULT_MAX_POINTS, keep_data: bool = False,
                notes: list[str] | None = None, outputs: Outputs | None = None) -> list[RenderedFigure]:
    """Write every figure of :func:`render_figures` into ``folder`` (created if missing).

    The figures appear together when all are drawn (none if one fails). Returns the figures
    with their ``path``; their bytes are kept only with ``keep_data`` (e.g. to embed them in
    an HTML report as well). ``notes`` receives the figures not drawn, with the reason (see
    :func:`render_figures`). ``outputs``: stage the files in that transaction instead, for
    the caller to commit with its other outputs.
    """
    if outputs is None:
        with Outputs() as own:
            return write_plots(result, folder, fmt, ls_alpha=ls_alpha, at_coverage=at_coverage,
                               max_points=max_points, keep_data=keep_data, notes=notes, outputs=own)
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise SelcalError(f"{folder}: is a file; --plots takes a folder")
    _validate(fmt, ls_alpha, at_coverage, len(result.models))
    outputs.folder(folder)
    written = []
    for rendered in render_figures(result, fmt, ls_alpha=ls_alpha, at_coverage=at_coverage, max_points=max_points,
                                   notes=notes):
        path = folder / f"{rendered.stem}.{fmt}"
        outputs.write(path, rendered.data)
        rendered.path = path
        if not keep_data:
            rendered.data = b""
        written.append(rendered)
    return written
