"""Figures of the papers' remaining diagnostics: sweeps across runs (``sweep_NAME``), the
sorted-logit profile (``logit_profile``, Xia et al. fig. 18) and the p-norm score given v_max
in MSP bins (``pnorm_vmax``, fig. 19).

The data come from :mod:`selcal.diagnostics` (pure functions, tested against loops); the
functions here only draw them, on matplotlib's Agg canvas through :mod:`selcal.plots`'
helpers. User text (model names, the swept name) is never parsed as mathtext.
"""

from __future__ import annotations

import numpy as np

from . import diagnostics
from . import plots as _plots

__all__ = ["figure_sweep", "figure_logit_profile", "figure_pnorm_given_vmax", "across_model_jobs",
           "model_jobs", "OVERLAY_PROFILE_MODELS"]

OVERLAY_PROFILE_MODELS = 6  # more models: one profile figure per model only


def _plain(text) -> str:
    """User text drawn as written: :func:`selcal.plots.user_text` (a ``$`` never starts
    mathtext; a glyph no installed font has becomes the replacement character)."""
    return _plots.user_text(text)


def _colour(name: str):
    return _plots.SCORE_COLOURS.get(name, "0.25")


# ----------------------------------------------------------------------------- sweep
def figure_sweep(series: diagnostics.SweepSeries):
    """One panel per headline metric against the swept value, one line per score, points
    marked; the line joins the per-value means when several models share a value."""
    panels = series.panels
    columns = 3 if len(panels) > 4 else 2
    rows = -(-len(panels) // columns)
    figure = _plots._new_figure(4.2 * columns, 3.2 * rows + 0.6)
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    values = np.unique(series.x)
    for ax, panel in zip(axes, panels):
        for label, y in panel.lines.items():
            colour = _colour(label) if label in _plots.SCORE_COLOURS else (
                _colour("temp") if label.startswith("after") else _colour("msp") if label.startswith("before")
                else "0.2")
            shown = _plots.SCORE_LABELS.get(label, label)
            means = np.array([np.nanmean(y[series.x == v]) if np.any(np.isfinite(y[series.x == v])) else np.nan
                              for v in values])
            ax.plot(values, 100 * means, color=colour, linewidth=1.3, linestyle=_plots.SCORE_STYLES.get(label, "-"),
                    label=_plain(shown))
            ax.plot(series.x, 100 * y, linestyle="none", marker="o", markersize=4.5, color=colour)
        ax.set_title(_plain(panel.title) + " (%)")
        ax.set_xlabel(_plain(series.name))
        if series.log_x == "log":
            ax.set_xscale("log")
        elif series.log_x == "symlog":
            nonzero = np.abs(series.x[series.x != 0])
            ax.set_xscale("symlog", linthresh=float(nonzero.min()))
        if len(panel.lines) > 1:
            ax.legend(fontsize="small")
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    figure.suptitle(_plain(f"headline metrics against {series.name} ({len(series.models)} models)"))
    return figure


# -------------------------------------------------------------- sorted-logit profile
def _profile_of(model):
    rows = model.rows
    if rows is None or rows.profile is None or rows.profile.shape[0] == 0:
        return None
    p = model.scores.get("pnorm", {}).get("p") or 5
    return diagnostics.sorted_logit_profile(rows.profile, rows.profile_correct, int(p))


def figure_logit_profile(models):
    """Mean ± std of v, v^p and exp(v) against rank, correct (solid) and incorrect (dashed)
    apart, one colour per model (Xia et al. fig. 18)."""
    profiles = [(m, _profile_of(m)) for m in models]
    profiles = [(m, prof) for m, prof in profiles if prof is not None]
    if not profiles:
        return None
    figure = _plots._new_figure(13.5, 4.3)
    axes = figure.subplots(1, 3)
    colours = _plots._model_colours(len(profiles)) if len(profiles) > 1 else [_plots.CORRECT_COLOUR]
    for index, (model, profile) in enumerate(profiles):
        labels = list(profile.correct)
        for ax, label in zip(axes, labels):
            for subset, style, word in ((profile.correct, "-", "correct"), (profile.incorrect, "--", "incorrect")):
                series = subset[label]
                if series.count == 0:
                    continue
                colour = colours[index] if len(profiles) > 1 else (
                    _plots.CORRECT_COLOUR if word == "correct" else _plots.ERROR_COLOUR)
                name = f"{model.name}, {word}" if len(profiles) > 1 else word
                finite = np.isfinite(series.mean) & np.isfinite(series.std)
                ax.plot(profile.ranks[finite], series.mean[finite], color=colour, linestyle=style, marker=".",
                        linewidth=1.2, label=_plain(f"{name} ({series.count:,} rows)"))
                lower = series.mean - series.std
                if label == "exp(v)":  # log axis: no band where mean - std is not positive
                    lower = np.where(lower > 0, lower, np.nan)
                ax.fill_between(profile.ranks[finite], lower[finite], (series.mean + series.std)[finite],
                                color=colour, alpha=0.12, linewidth=0)
            ax.set_xlabel("rank of the logit (1 = largest)")
    ps = ", ".join(str(p) for p in sorted({profile.p for _, profile in profiles}))
    axes[0].set_title("$v$")
    axes[1].set_title(f"$v^p$, p = {ps} (the p of the p-norm score)")
    axes[2].set_title(r"$\exp(v)$ (log scale)")
    axes[2].set_yscale("log")
    axes[0].set_ylabel("mean ± std over rows")
    handles, texts = axes[0].get_legend_handles_labels()
    figure.legend(handles, texts, loc="outside lower center", ncol=min(4, len(texts)), fontsize="small")
    figure.suptitle("logits sorted high to low")
    return figure


# ------------------------------------------------------ p-norm given v_max in MSP bins
def figure_pnorm_given_vmax(model):
    """The p-norm score against v_max within MSP bins (Xia et al. fig. 19), one line per bin."""
    rows = model.rows
    if rows is None or rows.pnorm is None or "pnorm" not in model.scores:
        return None
    bins = diagnostics.pnorm_given_vmax(np.exp(rows.log_msp), rows.max_logit, rows.pnorm)
    if not any(np.isfinite(b.mean).any() for b in bins):
        return None
    figure = _plots._new_figure(7.0, 4.6)
    ax = figure.subplots()
    colours = _plots._model_colours(len(bins))
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
    ax.set_title(_plain(f"{model.name}: p-norm score given max logit, within MSP bins"))
    ax.legend(fontsize="small")
    return figure


# --------------------------------------------------------------- hooks for plots.py
def across_model_jobs(models):
    """(kind, model, caption, make) of the figures drawn across models: a sweep figure when
    the models carry a swept value, and the logit-profile overlay for 2..6 models."""
    jobs = []
    names = {key for m in models for key in (m.extra.get("sweep") or {})}
    for name in sorted(names):
        swept = [m for m in models if name in (m.extra.get("sweep") or {})]
        series = diagnostics.sweep_series(swept, name)
        jobs.append((f"sweep_{_plots._safe(name)}", None,
                     f"Headline metrics against {name}: accuracy, AURC and coverage at risk of every score, "
                     "ECE and adaptive ECE before and after temperature scaling.",
                     lambda s=series: figure_sweep(s)))
    profiled = [m for m in models if m.rows is not None and m.rows.profile is not None and _raw_logits(m)]
    if 1 < len(profiled) <= OVERLAY_PROFILE_MODELS:
        jobs.append(("overlay_logit_profile", None,
                     "Sorted logits (v, v^p, exp v), mean ± std per rank, every model; solid: correct, "
                     "dashed: incorrect.", lambda: figure_logit_profile(profiled)))
    return jobs


def _raw_logits(model) -> bool:
    """Whether the logit column holds logits (not probabilities or log-probabilities, whose
    sorted values and max say nothing beyond the softmax: see :func:`selcal.evaluate.logit_kind`)."""
    from .evaluate import logit_kind

    return model.rows is not None and logit_kind(model.rows) == "logits"


def model_jobs(model, notes: list | None = None):
    """(kind, caption, make) of one model's diagnostic figures, where their data were kept;
    ``notes`` receives the figures left out and why."""
    jobs = []
    wanted = model.rows is not None and (model.rows.profile is not None or (
        model.rows.pnorm is not None and "pnorm" in model.scores))
    if wanted and not _raw_logits(model):
        if notes is not None:
            from .evaluate import logit_kind

            notes.append(f"{_plots._safe(model.name)}_logit_profile and _pnorm_vmax not drawn: the logits look like "
                         f"{logit_kind(model.rows)}, whose sorted values and max logit say nothing beyond the MSP")
        return jobs
    if model.rows is not None and model.rows.profile is not None:
        jobs.append(("logit_profile", "Logits sorted high to low: mean ± std of v, v^p and exp(v) per rank, "
                     "correct and incorrect apart (Xia et al. fig. 18).", lambda m=model: figure_logit_profile([m])))
    if model.rows is not None and model.rows.pnorm is not None and "pnorm" in model.scores:
        jobs.append(("pnorm_vmax", "p-norm score given the max logit within MSP bins (Xia et al. fig. 19).",
                     lambda m=model: figure_pnorm_given_vmax(m)))
    return jobs
