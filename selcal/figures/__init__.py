"""Figures from result objects (CONVENTIONS.md, "Plots"): one module per figure family.

The numbers a figure shows are prepared in :mod:`.data` (pure functions of arrays, no
matplotlib); the families draw them and read every number from the
:class:`~selcal.report.ModelResult` objects (nothing is re-measured):

* :mod:`.selective`: ``rc``, ``overlay_rc``, ``errors_by_group``;
* :mod:`.reliability`: ``reliability``, ``smooth``;
* :mod:`.vmax`: ``vmax_msp``, ``overlay_vmax_msp``;
* :mod:`.pnorm`: ``pnorm_search``, ``pnorm_vmax``;
* :mod:`.profile`: ``logit_profile``, ``overlay_logit_profile``;
* :mod:`.sweep`: ``sweep_NAME``;
* :mod:`.segmentation`: the uncertainty-rank maps of segmentation images;
* :mod:`.threshold`: ``threshold``, the certified thresholds of ``selcal threshold`` on the
  risk-coverage curve (drawn by that command from its own result, not planned here).

On your own axes: :func:`plot_rc`, :func:`plot_reliability`, :func:`plot_smooth_reliability`,
:func:`plot_vmax_msp` and :func:`plot_pnorm_search` draw one model's curves on the ``ax`` given (or return a new Figure), as a panel of the files'
figures, which are built on the same drawing functions.

They share only :mod:`.base` (style, fonts, user text, colours, rendering). :mod:`.render`
plans which figures a result gets, draws them in worker processes and writes them through
the output transaction :class:`selcal.writers.output.Outputs`, so an interrupted or failed run leaves no
figure. pyplot is never used: no figure is registered globally, the style is applied through
``rc_context`` only, and a figure is released as soon as it is rendered. matplotlib is
imported only when a figure is drawn.
"""

from __future__ import annotations

from . import base, data
from .base import (FALLBACK_FONTS, NAME_LIMITS, PLOT_FORMATS, REPLACEMENT_CHARACTER, SCORE_COLOURS, SCORE_LABELS,
                   RenderedFigure, user_text)
from .data import (DEFAULT_AT_COVERAGE, DEFAULT_MAX_POINTS, MAX_GROUP_BARS, OVERLAY_VMAX_MODELS, GroupErrors,
                   LSCeiling, PnormSearch, RCPoints, ReliabilityData, SlidingWindowStats, SmoothReliabilityData,
                   WindowSeries, clopper_pearson, errors_at_coverage_by_group, histogram_top, ls_ceiling_share, overlay_pages, pnorm_search_data,
                   rc_curve_points, reliability_data, shown_groups, sliding_window_stats, smooth_reliability_data,
                   vmax_msp_limits)
from .pnorm import figure_pnorm_given_vmax, figure_pnorm_search, plot_pnorm_search
from .profile import figure_logit_profile
from .reliability import GAP_STYLES, figure_reliability, figure_smooth_reliability, plot_reliability, plot_smooth_reliability
from .render import (FIGURE_FAMILIES, FIGURE_KINDS, Job, parse_kinds, plan_figures, render_figures,
                     write_plots)
from .selective import figure_errors_by_group, figure_rc, figure_rc_overlay, plot_rc
from .sweep import figure_sweep
from .vmax import figure_vmax_msp, figure_vmax_msp_overlay, plot_vmax_msp, vmax_msp_skip_reason

__all__ = [
    "plot_rc", "plot_reliability", "plot_smooth_reliability", "plot_vmax_msp", "plot_pnorm_search", "base", "data", "FALLBACK_FONTS", "NAME_LIMITS", "PLOT_FORMATS", "REPLACEMENT_CHARACTER", "SCORE_COLOURS",
    "SCORE_LABELS", "RenderedFigure", "user_text", "DEFAULT_AT_COVERAGE", "DEFAULT_MAX_POINTS", "MAX_GROUP_BARS",
    "OVERLAY_VMAX_MODELS", "GroupErrors", "LSCeiling", "PnormSearch", "RCPoints", "ReliabilityData",
    "SlidingWindowStats", "SmoothReliabilityData", "WindowSeries", "clopper_pearson", "smooth_reliability_data",
    "errors_at_coverage_by_group", "histogram_top", "ls_ceiling_share",
    "overlay_pages", "pnorm_search_data", "rc_curve_points", "reliability_data", "shown_groups",
    "sliding_window_stats", "vmax_msp_limits", "figure_pnorm_given_vmax", "figure_pnorm_search",
    "figure_logit_profile", "GAP_STYLES", "figure_reliability", "figure_smooth_reliability", "FIGURE_FAMILIES", "FIGURE_KINDS", "Job",
    "parse_kinds", "plan_figures", "render_figures", "write_plots", "figure_errors_by_group", "figure_rc",
    "figure_rc_overlay", "figure_sweep", "figure_vmax_msp", "figure_vmax_msp_overlay", "vmax_msp_skip_reason",
]
