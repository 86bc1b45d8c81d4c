"""No figure is cut at its border (issue 25): every kind, drawn for many models with long names,
long group names and a swept value, leaves the outermost pixels of its PNG blank (the figure's
white background), so no title, legend, label or line reaches the edge and runs past it.

The test looks at pixels, the only place where a cut shows: matplotlib lays out what it knows
of, and a title longer than the figure or a legend placed outside the axes is drawn past the
canvas without a warning.
"""

from __future__ import annotations

import io

import numpy as np
import pytest

import selcal
from selcal import figures

LONG = "imagenet_resnet50_label_smoothing_alpha_0.1_seed_{}_final_checkpoint_epoch_300_ema"
BORDER = 2  # pixels on each side that must stay blank


def many_models(count: int, *, pnorm_p=None):
    rng = np.random.default_rng(11)
    models = []
    options = selcal.Options(scores=("msp", "max_logit", "pnorm", "temp"), logit_profile=True)
    for i in range(count):
        n, k = 1600, 8
        labels = rng.integers(0, k, size=n)
        logits = rng.normal(size=(n, k)) * (1.0 + 0.2 * i)
        logits[np.arange(n), labels] += rng.gamma(2.0, 1.2, size=n)
        groups = np.array(["sketch_renditions_" * 4 + str(g) for g in range(14)])[rng.integers(0, 14, size=n)]
        model = selcal.evaluate_arrays(logits[400:], labels[400:], logits[:400], labels[:400], name=LONG.format(i),
                                       options=options, groups=groups[400:])
        model.extra["sweep"] = {"label_smoothing_alpha_of_the_training_recipe": 0.05 * i}
        models.append(model)
    return selcal.EvaluationResult(models=models, options=options)


def blank_border(png: bytes) -> bool:
    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    edges = [pixels[:BORDER], pixels[-BORDER:], pixels[:, :BORDER], pixels[:, -BORDER:]]
    return all((edge == 255).all() for edge in edges)


@pytest.fixture(scope="module")
def drawn():
    """Every kind, for 2 models (legends with numbers, overlays of profiles) and 12 (shared legends, pages)."""
    out = {}
    for count in (2, 12):
        result = many_models(count)
        for figure in figures.render_figures(result, "png", ls_alpha=0.1, workers=2):
            out.setdefault((count, figure.kind), figure.data)
    return out


@pytest.mark.slow
def test_every_kind_is_drawn(drawn):
    kinds = {kind for _, kind in drawn}
    assert kinds >= {"rc", "overlay_rc", "reliability", "smooth", "vmax_msp", "overlay_vmax_msp", "pnorm_search",
                     "errors_by_group", "logit_profile", "overlay_logit_profile", "pnorm_vmax",
                     "sweep_label_smoothing_alpha_of_the_training_recipe"}


@pytest.mark.slow
@pytest.mark.parametrize("count", [2, 12])
def test_no_figure_reaches_its_border(drawn, count):
    cut = sorted(kind for (n, kind), data in drawn.items() if n == count and not blank_border(data))
    assert cut == [], f"drawn to the edge (cut): {cut}"


@pytest.mark.slow
def test_calibration_figures_of_many_probability_scores_stay_inside():
    """Seven probability scores with long names: the smoothed figure wraps its panels into rows
    (four per row), the reliability diagram puts them side by side; neither reaches the border."""
    from selcal.figures.base import mpl, render, style

    model = many_models(1).models[0]
    for i in range(5):
        name = f"calibrator_with_a_long_name_number_{i}_fitted_on_validation_rows"
        model.confidences[name] = model.confidences["temp"] ** (1.0 + 0.1 * i)
        model.scores[name] = {"ece": 0.0}
    matplotlib, _, _ = mpl()
    with matplotlib.rc_context(style()):
        smooth = figures.figure_smooth_reliability(model)
        assert len(smooth.axes) == 7 and len({ax.get_subplotspec().rowspan.start for ax in smooth.axes}) == 2
        for figure in (smooth, figures.figure_reliability(model)):
            assert blank_border(render(figure, "png"))
