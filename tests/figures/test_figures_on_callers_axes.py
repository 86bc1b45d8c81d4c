"""Figures on the caller's axes (``plot_rc``, ``plot_reliability``, ``plot_smooth_reliability``): drawn
into a subplot grid the caller made, returning matplotlib objects, the same curves as the files'
figures, and no global matplotlib state touched (rcParams, pyplot's figures)."""

from __future__ import annotations

import io

import matplotlib
import numpy as np
import pytest
from helpers import make_data
from matplotlib.figure import Figure

import selcal
from selcal import figures
from selcal.errors import SelcalError
from selcal.figures.data import rc_curve_points


@pytest.fixture(scope="module")
def result():
    logits, labels = make_data(n=400, k=4, seed=11)
    return selcal.evaluate_arrays(logits, labels, scores="msp,max_logit,temp")


@pytest.mark.slow
def test_every_figure_draws_into_a_subplot_grid_the_caller_made(result):
    grid = Figure(figsize=(10, 8))
    axes = grid.subplots(2, 2)
    axes[0, 0].plot([0, 1], [1, 0], label="the caller's own line")
    assert figures.plot_rc(result, ax=axes[0, 1]) is axes[0, 1]
    assert figures.plot_reliability(result, "temp", ax=axes[1, 0], hist_ax=axes[1, 1]) is axes[1, 0]
    assert len(grid.axes) == 4 and len(axes[0, 0].get_lines()) == 1  # nothing added, nothing else changed
    # the curves are the result's: one per score, and the error rate with no abstention
    lines = {line.get_label().split(":")[0]: line for line in axes[0, 1].get_lines()}
    assert len(lines) == 4 and sum(label.startswith("error rate") for label in lines) == 1
    curve = rc_curve_points(result.models[0].curves["msp"])
    assert np.array_equal(lines["MSP"].get_xdata(), curve.coverage)
    assert np.array_equal(lines["MSP"].get_ydata(), curve.risk)
    assert axes[1, 1].get_yscale() == "log" and "ECE" in axes[1, 0].get_title()
    smooth = grid.add_subplot(3, 3, 5)
    assert figures.plot_smooth_reliability(result.models[0], "msp", ax=smooth) is smooth
    assert smooth.collections  # the density band, the curve and the rug
    grid.savefig(io.BytesIO(), format="png")  # a complete figure of the caller's


@pytest.mark.slow
def test_the_vmax_and_pnorm_panels_draw_into_the_callers_grid():
    logits, labels = make_data(n=600, k=5, seed=13)
    result = selcal.evaluate_arrays(logits, labels, scores="msp,max_logit,pnorm")
    grid = Figure(figsize=(9, 6))
    axes = grid.subplots(2, 2)
    assert figures.plot_vmax_msp(result, ax=axes[0, 0], diff_ax=axes[1, 0], ls_alpha=0.1) is axes[0, 0]
    assert figures.plot_pnorm_search(result, ax=axes[0, 1]) is axes[0, 1]
    assert len(axes[0, 0].get_lines()) == 3 and len(axes[1, 0].get_lines()) == 3  # 2 means, the LS ceiling; 0, ✗−✓
    p = [int(x) for x in axes[0, 1].get_lines()[0].get_xdata()]
    assert p == list(result.options.p_grid)
    alone = figures.plot_vmax_msp(result.models[0], ax=axes[1, 1])  # one panel: the x label on it
    assert alone.get_xlabel().startswith("MSP")
    assert isinstance(figures.plot_vmax_msp(result), Figure) and isinstance(figures.plot_pnorm_search(result), Figure)
    grid.savefig(io.BytesIO(), format="png")
    with pytest.raises(SelcalError, match="no pnorm search"):
        figures.plot_pnorm_search(selcal.evaluate_arrays(logits, labels, scores="msp"))


@pytest.mark.slow
def test_without_axes_a_new_figure_in_selcals_style_is_returned(result):
    for draw in (figures.plot_rc, figures.plot_reliability, figures.plot_smooth_reliability):
        figure = draw(result)
        assert isinstance(figure, Figure) and figure.axes
        assert not figure.axes[0].spines["top"].get_visible()  # selcal's style, applied to its own figure only
        figure.savefig(io.BytesIO(), format="svg")


@pytest.mark.slow
def test_no_global_matplotlib_state_is_touched(result):
    import matplotlib.pyplot as plt

    before, open_figures = dict(matplotlib.rcParams), plt.get_fignums()
    ax = Figure().subplots()
    figures.plot_rc(result, ax=ax)
    figures.plot_reliability(result)
    figures.plot_smooth_reliability(result, "temp")
    assert dict(matplotlib.rcParams) == before
    assert plt.get_fignums() == open_figures  # nothing registered with pyplot
    assert ax.spines["top"].get_visible()  # the caller's axes keep the caller's style


def test_the_files_figures_draw_the_same_curves(result):
    model = result.models[0]
    written = figures.figure_rc(model).axes[0].get_lines()
    drawn = figures.plot_rc(model, ax=Figure().subplots()).get_lines()
    assert [line.get_label() for line in written] == [line.get_label() for line in drawn]
    for a, b in zip(written, drawn):
        assert np.array_equal(a.get_xydata(), b.get_xydata())


def test_a_choice_the_figure_cannot_draw_is_one_line():
    logits, labels = make_data(n=100, k=3, seed=12)
    two = selcal.EvaluationResult([selcal.evaluate_arrays(logits, labels, scores="msp", name=name)
                                   for name in ("a", "b")])
    with pytest.raises(SelcalError, match="holds 2 models"):
        figures.plot_rc(two)
    figures.plot_rc(two["b"], ax=Figure().subplots())  # one of them
    with pytest.raises(SelcalError, match="'max_logit' has no probabilities in this result; choose one of msp"):
        figures.plot_reliability(selcal.evaluate_arrays(logits, labels, scores="msp,max_logit"), "max_logit")
