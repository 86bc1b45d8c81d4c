"""The sorted-logit profile (``logit_profile`` and its overlay; Xia et al. 2024, fig. 18):
mean ± std of v, v^p and exp(v) per rank, correct and incorrect predictions apart. The data
come from :func:`selcal.metrics.diagnostics.sorted_logit_profile`."""

from __future__ import annotations

import numpy as np

from ..metrics import diagnostics
from ..pipeline.measure import logit_kind
from .base import (CORRECT_COLOUR, ERROR_COLOUR, NAME_LIMITS, figure_width, legend_columns, model_colours, new_figure,
                   plain_log_axis, user_text)

__all__ = ["figure_logit_profile", "raw_logits"]


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
    figure = new_figure(13.5, 4.3)
    axes = figure.subplots(1, 3)
    colours = model_colours(len(profiles)) if len(profiles) > 1 else [CORRECT_COLOUR]
    for index, (model, profile) in enumerate(profiles):
        labels = list(profile.correct)
        for ax, label in zip(axes, labels):
            for subset, style, word in ((profile.correct, "-", "correct"), (profile.incorrect, "--", "incorrect")):
                series = subset[label]
                if series.count == 0:
                    continue
                colour = colours[index] if len(profiles) > 1 else (
                    CORRECT_COLOUR if word == "correct" else ERROR_COLOUR)
                name = f"{user_text(model.name, NAME_LIMITS['legend'], escape=False)}, {word}" if len(profiles) > 1 else word
                finite = np.isfinite(series.mean) & np.isfinite(series.std)
                ax.plot(profile.ranks[finite], series.mean[finite], color=colour, linestyle=style, marker=".",
                        linewidth=1.2, label=user_text(f"{name} ({series.count:,} rows)"))
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
    plain_log_axis(axes[2].yaxis)
    axes[0].set_ylabel("mean ± std over rows")
    handles, texts = axes[0].get_legend_handles_labels()
    figure.legend(handles, texts, loc="outside lower center", ncol=legend_columns(texts, figure_width(figure), 4, 8.0),
                  fontsize="small")
    figure.suptitle("logits sorted high to low")
    return figure


def raw_logits(model) -> bool:
    """Whether the logit column holds logits (not probabilities or log-probabilities, whose
    sorted values and max say nothing beyond the softmax: see :func:`selcal.api.logit_kind`)."""
    return model.rows is not None and logit_kind(model.rows) == "logits"
